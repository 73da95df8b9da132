"""Table rendering of ``mi400plan comm``: an nccl-tests-like table per system, then a comparison."""

from __future__ import annotations

from typing import Any

from mi400plan.render import table_renderer
from mi400plan.render.table import print_table
from mi400plan.units import fmt_bytes, fmt_rate, fmt_time


def _gbs(x: float) -> str:
    """B/s as GB/s (1e9 B/s), the unit nccl-tests prints."""
    return f"{x / 1e9:,.2f}"


def _us(t: float) -> str:
    return f"{t * 1e6:,.2f}"


def _size(n: int) -> str:
    """Binary units when the size is whole in them (32 MiB), decimal otherwise (32.0 MB), as given."""
    unit = 1
    while unit * 1024 <= n:
        unit *= 1024
    return fmt_bytes(n, binary=(n % unit == 0))


def _path(r: Any) -> str:
    if r.tier == "hierarchical":
        per = (f"{r.group_in_domain}" if r.group_in_domain_min == r.group_in_domain
               else f"({r.group_in_domain_min}..{r.group_in_domain})")
        return f"{r.domains}x{per}{r.algorithm.removeprefix('hierarchical')}"
    return f"{r.tier}/{r.algorithm}"  # one word: one line per size, as nccl-tests prints


def _tier_line(t: Any) -> str:
    s = (
        f"{t.fabric}: {t.kind}, {t.topology}, domain {t.domain_size if t.domain_size is not None else 'unbounded'}, "
        f"{fmt_rate(t.bw_per_dir_bytes_per_s)} per GPU per direction x efficiency {t.efficiency:.2f}, "
        f"latency {fmt_time(t.latency_s, 2)} per step"
    )
    if t.assumed:
        s += f" [uncertain: {'; '.join(t.assumed)}]"
    return s


@table_renderer("comm")
def render_comm(result: Any, console: Any) -> None:
    for sysm in result.systems:
        rows = [r for r in result.rows if r.system == sysm.label]
        caption_lines = [_tier_line(sysm.scale_up)]
        if getattr(sysm, "torus_slice", None):
            caption_lines.append(f"torus slice for the group: {sysm.torus_slice}")
        if sysm.scale_out is not None:
            caption_lines.append(_tier_line(sysm.scale_out))
        caption_lines.append(
            "algbw = S/t, busbw = algbw x nccl-tests factor (GB/s = 1e9 B/s, per direction); "
            "fast..slow spans the profile ranges; path tier/algorithm, NxM(...) = N domains x M GPUs each "
            "(hierarchical)"
            + ("; Nx(a..b): the domains hold a to b GPUs of the group"
               if any(r.group_in_domain_min != r.group_in_domain for r in rows) else "")
        )
        print_table(
            console,
            [
                ("size", "right"),
                ("time us", "right"),
                ("fast..slow us", "right", "secondary"),
                ("algbw GB/s", "right"),
                ("busbw GB/s", "right"),
                "bound",
                "path",
            ],
            [
                [
                    _size(r.size_bytes),
                    _us(r.time_s),
                    f"{_us(r.time_fast_s)}..{_us(r.time_slow_s)}",
                    _gbs(r.algbw_bytes_per_s),
                    _gbs(r.busbw_bytes_per_s),
                    "lat" if r.bound == "latency" else "bw",
                    _path(r),
                ]
                for r in rows
            ],
            title=f"{sysm.label}: {result.op.replace('_', '-')}, group {result.group}, stride {result.stride}, algo {result.algo}",
            caption="\n".join(caption_lines),
        )
    if len(result.systems) > 1:
        labels = [s.label for s in result.systems]
        sizes = sorted({r.size_bytes for r in result.rows})
        by = {(r.system, r.size_bytes): r for r in result.rows}
        print_table(
            console,
            [("size", "right")] + [(f"{lab} (us)", "right") for lab in labels] + [(f"{lab} / fastest", "right") for lab in labels],
            [
                [_size(s)]
                + [_us(by[(lab, s)].time_s) for lab in labels]
                + [f"{by[(lab, s)].relative_to_fastest:,.2f}x" for lab in labels]
                for s in sizes
            ],
            title=f"Comparison: {result.op.replace('_', '-')}, group {result.group}, stride {result.stride}",
        )
