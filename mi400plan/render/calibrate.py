"""Table rendering of ``mi400plan calibrate``: fitted values, then every measured point's residual."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mi400plan.render import table_renderer
from mi400plan.render.table import print_lines, print_table
from mi400plan.units import fmt_time


def _value(v: float | None, unit: str) -> str:
    if v is None:
        return "-"
    if unit.startswith("us"):
        return f"{v:,.2f} us"
    return f"{v:.3f}"


def _source(text: str) -> str:
    """``dir/runs.toml:12`` as ``runs.toml:12`` (JSON keeps the path as given)."""
    path, _, line = text.rpartition(":")
    return f"{Path(path).name}:{line}" if path and line.isdigit() else Path(text).name


def _pct(x: float) -> str:
    return f"{x * 100:+.1f}%"


def _params(result: Any, console: Any) -> None:
    rows = [
        [p.profile, p.key, _value(p.before, p.unit), _value(p.value, p.unit),
         "-" if p.std_error is None else _value(p.std_error, p.unit), p.points]
        for p in result.params
    ]
    print_table(
        console,
        ["profile", "parameter", ("profile value", "right"), ("fitted", "right"), ("std err", "right"),
         ("points", "right")],
        rows,
        title="Fitted values (calibrate)",
        caption="efficiencies are fractions (matmul, attention: of the dense peak; fabric: of the per-GPU "
        "bandwidth per direction); latency per algorithm step; '-' = not identified, the profile value stays",
    )
    notes = [f"{p.profile} {p.key}: {p.note}" for p in result.params if p.note]
    if notes:
        print_lines(console, notes)


def _points(result: Any, console: Any, summary: Any) -> None:
    rows = [r for r in result.rows if r.profile == summary.profile]
    what = "run" if summary.kind == "accelerator" else "row"
    files = {r.source.rpartition(":")[0] for r in rows}
    one = len(files) == 1 and all(r.source.rpartition(":")[2].isdigit() for r in rows)
    where = f" from {Path(files.pop()).name}" if one else ""
    print_table(
        console,
        ["line" if one else "source", what, ("measured", "right"), ("model before", "right"), ("fitted", "right"),
         ("residual", "right")],
        [[r.source.rpartition(":")[2] if one else _source(r.source), r.label, fmt_time(r.measured_s, 2), fmt_time(r.model_before_s, 2),
          fmt_time(r.model_s, 2), _pct(r.residual)] for r in rows],
        title=f"{summary.profile}: {summary.points} measured {what}s{where}",
        caption=f"mean |residual| {summary.mean_abs_residual_before * 100:.1f}% at the profile's values, "
        f"{summary.mean_abs_residual * 100:.1f}% fitted (max {summary.max_abs_residual * 100:.1f}%); "
        "residual = model / measured - 1",
    )


def _explain(result: Any, console: Any) -> None:
    """Each run's measured step split term by term (``mi400plan.explain``), then the totals tables."""
    from mi400plan.render.totals import render_totals

    for e in result.explain:
        rows = [[t.label, fmt_time(t.seconds, 3) if t.seconds >= 0 else "-" + fmt_time(-t.seconds, 3),
                 f"{t.share * 100:+.1f}" if t.key in ("below_peak", "not_modelled") else f"{t.share * 100:.1f}"]
                for t in e.terms if t.key == "ideal" or abs(t.share) >= 0.0005]
        print_table(
            console, ["term", ("per step", "right"), ("% of step", "right")], rows,
            title=f"{e.label} ({e.profile}, {e.gpus:,} GPUs, {e.precision}): measured {fmt_time(e.measured_s, 3)}, "
            f"{e.tokens_per_s_per_gpu:,.0f} tokens/s per GPU, MFU {e.mfu * 100:.1f}%, HFU {e.hfu * 100:.1f}%",
            caption=f"model at the fitted values {fmt_time(e.model_s, 3)}; % of the measured step = points of MFU; "
            "the terms add up to the measured step; terms under 0.05% not shown",
        )
    render_totals([e.totals for e in result.explain], console, of="each run")


@table_renderer("calibrate")
def render_calibrate(result: Any, console: Any) -> None:
    _params(result, console)
    for s in result.summaries:
        _points(result, console, s)
    if result.show_explain and result.explain:
        _explain(result, console)
    if result.saved:
        print_lines(console, [f"saved: {', '.join(result.saved)} (use with --profiles "
                              f"{Path(result.saved[0]).parent.parent})"])
