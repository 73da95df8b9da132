"""Table rendering of ``mi400plan validate``: every run's signed error, then the group statistics."""

from __future__ import annotations

from typing import Any

from mi400plan.render import table_renderer
from mi400plan.render.table import print_lines, print_table
from mi400plan.units import fmt_time


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:+.1f}%"


def _groups(console: Any, title: str, groups: list[Any]) -> None:
    rows = [[g.group, g.name, g.runs, _pct(g.mean), f"{g.mean_abs * 100:.1f}%", f"{g.max_abs * 100:.1f}%"]
            for g in groups]
    print_table(console, ["by", "group", ("runs", "right"), ("mean", "right"), ("mean |err|", "right"),
                          ("max |err|", "right")], rows, title=title)


@table_renderer("validate")
def render_validate(result: Any, console: Any) -> None:
    if getattr(result, "mode", None) == "serve":  # validate --serve
        from mi400plan.render.serve_validate import render_serve_validate

        render_serve_validate(result, console)
        return
    rows = [[r.id, r.sku, r.kind, r.stack or "-", fmt_time(r.measured_s, 3), fmt_time(r.predicted_s, 3), _pct(r.error),
             _pct(r.loso_error)] for r in result.rows]
    print_table(console, ["run", "sku", "kind", "stack", ("measured", "right"), ("model", "right"),
                          ("error", "right"), ("LOSO", "right")], rows,
                title=f"Measured training runs: {', '.join(result.inputs)}")
    _groups(console, "At the profiles' values", result.groups)
    if result.loso_groups:
        _groups(console, f"Leave-one-source-out ({result.loso_sources} sources, refits {result.loso_seconds:.1f} s)",
                result.loso_groups)
    lines = ["error = measured step / model step - 1: + = the model is optimistic (predicts more tokens/s than "
             "measured); LOSO = the same with the calibrated parameters refitted without the run's source "
             "(3 runs a parameter, per SKU; a SKU with fewer keeps its profile values)."]
    if not result.loso_groups and result.loso_sources == 0 and result.rows:
        lines.append("leave-one-source-out: not run (--no-loso, or the runs come from one source)")
    if result.skipped:
        lines.append(f"skipped (no valid layout at the SKU's capacity): {', '.join(result.skipped)}")
    if result.bands_written:
        lines.append(f"error bands written to {result.bands_written}")
    print_lines(console, lines)
