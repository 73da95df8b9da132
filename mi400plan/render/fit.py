"""Table output of ``fit``: a breakdown for one SKU, a comparison for several.

Sizes state their unit: GB = 10^9 bytes (vendor HBM capacities), GiB = 2^30 bytes.
"""

from __future__ import annotations

from typing import Any

from mi400plan.render import table_renderer
from mi400plan.render.table import print_table
from mi400plan.results.fit import FitResult, FitRow
from mi400plan.units import GB, GiB, fmt_count

TERMS = ("weights", "gradients", "optimizer", "activations", "kv_cache", "reserve")
LABELS = {
    "weights": "weights",
    "gradients": "gradients",
    "optimizer": "optimizer states",
    "activations": "activations",
    "kv_cache": "KV cache",
    "reserve": "runtime reserve",
}


def _gb(x: float | None) -> str:
    return "n/d" if x is None else f"{x / GB:,.1f} GB"


def _gib(x: float | None) -> str:
    return "n/d" if x is None else f"{x / GiB:,.1f} GiB"


def _layout_text(row: FitRow) -> str:
    lay = row.layout
    if row.mode == "infer":
        return (f"tp={lay['tp']} pp={lay['pp']} ep={lay['ep']} batch={lay['batch']} context={lay['context']} "
                f"weights={lay['weight_format']} kv={lay['kv_format']}")
    keys = ["tp", "pp", "vpp", "dp", "ep", "etp", "cp", "zero", "micro_batch", "recompute", "sequence_parallel",
            "seq_len"]
    return " ".join(f"{k}={lay[k]}" for k in keys if k in lay)


def _verdict(row: FitRow) -> str:
    if row.verdict == "unknown":
        return "unknown (capacity n/d)"
    v = "fits" if row.fits else "does not fit"
    return v + (" (flips in range)" if row.flips else "")


@table_renderer("fit")
def render_fit(result: FitResult, console: Any) -> None:
    m = result.model
    head = (f"{m.display_name} ({m.name}): {fmt_count(m.params_total)} parameters, "
            f"{fmt_count(m.params_active)} active per token; mode {result.mode}")
    console.print(head, highlight=False, markup=False)
    if len(result.rows) == 1:
        _breakdown(result, result.rows[0], console)
    else:
        _comparison(result, console)


def _breakdown(result: FitResult, row: FitRow, console: Any) -> None:
    mb = row.memory_bytes
    rows = []
    for k in TERMS:
        v = getattr(mb, k)
        if k in ("gradients", "optimizer") and result.mode == "infer":
            continue
        if k == "kv_cache" and result.mode == "train":
            continue
        share = f"{100.0 * v / mb.total:.1f}%" if mb.total else "-"
        rows.append((LABELS[k], _gib(v), _gb(v), share))
    rows.append(("total", _gib(mb.total), _gb(mb.total), "100.0%"))
    rows.append(("capacity", _gib(row.capacity_bytes), _gb(row.capacity_bytes), ""))
    if row.headroom_bytes is not None:
        rows.append(("headroom", _gib(row.headroom_bytes), _gb(row.headroom_bytes), f"{row.headroom_pct:.1f}% of HBM"))
    print_table(
        console,
        ["term", ("GiB", "right"), ("GB", "right"), ("share", "right")],
        rows,
        title=f"{row.display_name} ({row.sku}): per-GPU memory, {result.mode}",
    )
    for line in (
        f"layout: {_layout_text(row)}; {row.gpus} GPUs; most loaded pipeline stage: {row.stage}",
        f"runtime reserve: {result.reserve}; GB = 10^9 B, GiB = 2^30 B",
        f"profiles: {result.model.profile}, {row.profile}",
    ):
        console.print(line, highlight=False, markup=False, soft_wrap=True)
    lines = [f"verdict: {_verdict(row)}"]
    if row.reason:
        lines.append(f"reason: {row.reason}")
    if row.range_note:
        lines.append(f"note: {row.range_note}")
    if row.suggestion:
        lines.append(f"what would fit: {row.suggestion}")
    if row.max_tokens is not None:
        lines.append(
            f"KV room: {row.max_tokens:,} tokens of batch x context; longest context at batch "
            f"{row.layout.get('batch')}: {row.max_context:,} tokens"
        )
    for line in lines:
        console.print(line, highlight=False, markup=False, soft_wrap=True)


def _comparison(result: FitResult, console: Any) -> None:
    rows = []
    for r in result.rows:
        mb = r.memory_bytes
        hr = "n/d" if r.headroom_bytes is None else f"{_gb(r.headroom_bytes)} ({r.headroom_pct:.0f}%)"
        cap = _gb(r.capacity_bytes)
        if r.capacity_low_bytes is not None and r.capacity_low_bytes != r.capacity_high_bytes:
            cap += f" [{r.capacity_low_bytes / GB:,.0f}-{(r.capacity_high_bytes or 0) / GB:,.0f}]"
        mins = "-" if r.min_gpus is None else f"{r.min_gpus} ({r.min_layout})"
        row = [r.sku, _verdict(r), _gb(mb.total), cap, hr, mins]
        if result.mode == "infer":
            row.append("-" if r.max_context is None else f"{r.max_context:,}")
        row.append(r.suggestion or "")
        rows.append(row)
    cols: list[Any] = ["sku", "fits?", ("need/GPU", "right"), ("HBM", "right"), ("headroom", "right"),
                       "fewest GPUs that fit"]
    if result.mode == "infer":
        cols.append(("max context", "right"))
    cols.append("what would fit")
    first = result.rows[0] if result.rows else None
    caption = (f"layout: {_layout_text(first)}; {first.gpus} GPUs. " if first else "") + \
        f"reserve: {result.reserve}. GB = 10^9 B."
    print_table(console, cols, rows, title=f"per-GPU memory across {len(result.rows)} SKUs ({result.mode})",
                caption=caption)
