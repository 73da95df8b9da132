"""Table rendering of ``mi400plan cost``: systems side by side, then the site inputs and formula."""

from __future__ import annotations

from typing import Any

from mi400plan.render import table_renderer
from mi400plan.render.table import print_table


def _say(console: Any, text: str) -> None:
    console.print(text, markup=False, highlight=False)


def _money(x: float) -> str:
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.3f}" if abs(x) < 1 else f"{x:.2f}"


def _rng(r: Any, fmt: Any = _money) -> str:
    if r.low == r.high:
        return fmt(r.nominal)
    return f"{fmt(r.nominal)} ({fmt(r.low)}-{fmt(r.high)})"


def _num(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 1e4 else f"{x:,.4g}"


def _w(x: float) -> str:
    return f"{x:,.0f}"


def _systems(console: Any, res: Any) -> None:
    rows = res.rows
    cur = res.currency
    lines: list[list[str]] = []

    def add(label: str, cells: list[str]) -> None:
        lines.append([label, *cells])

    add(f"capex per GPU, {cur}", [f"{_rng(r.capex_per_gpu)}{'*' if 'server_capex_per_gpu' in r.estimates else ''}" for r in rows])
    add("  price year, network", [f"{r.capex_year}, {r.network}" for r in rows])
    add(f"wall W per GPU at load {res.gpu_load:g}", [_rng(r.wall_power_per_gpu_w, _w) for r in rows])
    add("wall W per GPU at full load", [_rng(r.provisioned_power_per_gpu_w, _w) for r in rows])
    add("chip TDP, W", [_w(r.tdp_w) if r.tdp_w else "n/d" for r in rows])
    add(f"{cur} per GPU-hour: capex", [_money(r.per_gpu_hour.capex) for r in rows])
    add("  facility" if res.facility == "owned" else "  colocation", [_money(r.per_gpu_hour.facility) for r in rows])
    if res.facility == "owned":
        add("  operating", [_money(r.per_gpu_hour.operating) for r in rows])
    add("  energy", [_money(r.per_gpu_hour.energy) for r in rows])
    add("  all-in (low-high)", [_rng(r.per_gpu_hour.total) for r in rows])
    precisions = [p for p in ("fp4", "fp6", "fp8", "bf16") if any(p in r.tco_per_pflops_hour for r in rows)]
    for p in precisions:
        add(f"TCO per {p.upper()} PFLOP/s-hour", [_rng(r.tco_per_pflops_hour[p]) if p in r.tco_per_pflops_hour else "n/d" for r in rows])
    for p in precisions:
        add(f"capex only per {p.upper()} PFLOP/s-h", [_money(r.capex_per_pflops_hour[p]) if p in r.capex_per_pflops_hour else "n/d" for r in rows])
    for p in precisions:
        add(f"{p.upper()} TFLOP/s per W: TDP, wall", [
            f"{r.tflops_per_w_tdp.get(p, float('nan')):.2f}, {r.tflops_per_w_wall[p]:.2f}" if p in r.tflops_per_w_wall else "n/d"
            for r in rows
        ])
    if res.tokens_per_s_per_gpu is not None:
        add(f"{cur} per Mtok at {res.tokens_per_s_per_gpu:,.0f} tok/s/GPU", [_rng(r.cost_per_mtok) if r.cost_per_mtok else "-" for r in rows])
        add("tok/s per facility MW", [f"{r.tokens_per_s_per_mw:,.0f}" if r.tokens_per_s_per_mw else "-" for r in rows])
    print_table(
        console,
        ["", *[(r.system, "right") for r in rows]],
        lines,
        title=f"Cost at site {res.site} ({cur} {res.site_year}, {res.facility} facility, PUE {res.pue:g}); "
        "nominal (low-high); * estimate",
    )


def _site(console: Any, res: Any) -> None:
    lines = [
        [i.field, _rng(i.value, _num), i.unit, i.status, ", ".join(i.source) or i.origin]
        for i in res.site_inputs
    ]
    print_table(console, ["site input", ("value (low-high)", "right"), "unit", "status", "source"], lines,
                title=f"Site {res.site}")


@table_renderer("cost")
def render(res: Any, console: Any) -> None:
    _systems(console, res)
    _site(console, res)
    for line in res.formula:
        _say(console, line)
    for note in res.notes:
        _say(console, f"note: {note}")
