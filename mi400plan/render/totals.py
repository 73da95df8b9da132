"""Tables of the totals behind a plan: FLOPs per token split, total FLOPs, collective bytes per step."""

from __future__ import annotations

from typing import Any

from mi400plan.render.table import print_table
from mi400plan.results.totals import PlanTotals
from mi400plan.units import fmt_bytes


def fmt_sci(x: float | None) -> str:
    if x is None:
        return "-"
    if x == 0:
        return "0"
    exp = int(f"{x:e}".split("e")[1])
    return f"{x / 10**exp:.2f}e{exp}"


def render_totals(totals: list[PlanTotals], console: Any, *, of: str = "the best layout") -> None:
    """The FLOPs split and bytes-per-step tables; ``of`` names what the rows are (in the first title),
    and the first table names each row's layout when they are not all the same."""
    if not totals:
        return
    with_tokens = any(t.total_model_flops is not None for t in totals)
    named = len({t.layout_text for t in totals}) > 1 and of != "the best layout"
    cols = ["SKU", ("GPUs", "right")] + (["layout"] if named else []) + [
        ("dense GEMM", "right"), ("attention", "right"), ("recompute", "right"), ("FLOP/token", "right")]
    if with_tokens:
        cols += [("total FLOP", "right"), ("with recompute", "right", "secondary")]
    out = []
    for t in totals:
        f = t.flops_per_token
        line = [t.sku, f"{t.gpus:,}"] + ([t.layout_text] if named else [])
        line += [fmt_sci(f.dense_gemm), fmt_sci(f.attention), fmt_sci(f.recompute), fmt_sci(f.model)]
        if with_tokens:
            line += [fmt_sci(t.total_model_flops), fmt_sci(t.total_hardware_flops)]
        out.append(line)
    print_table(console, cols, out, title=f"Training FLOPs of {of} (per token, forward + backward)",
                caption="dense GEMM = 6 x matmul weights; attention = 3 x forward score and context FLOPs; "
                "recompute under the layout's mode; FLOP/token = dense GEMM + attention (MFU's count); "
                "total = tokens x FLOP/token.")
    cols = ["SKU", ("GPUs", "right"), "layout", ("TP", "right"), ("CP", "right"), ("EP", "right"), ("PP", "right"),
            ("DP", "right")]
    out = []
    for t in totals:
        b = t.collective_bytes_per_step
        out.append([t.sku, f"{t.gpus:,}", t.layout_text]
                   + ["-" if v == 0 else fmt_bytes(v, binary=False) for v in (b.tp, b.cp, b.ep, b.pp, b.dp)])
    print_table(console, cols, out, title="Bytes each GPU sends per optimizer step, by parallel group",
                caption="nccl-tests volume factors: all-reduce 2(n-1)/n x buffer, all-gather and reduce-scatter "
                "(n-1)/n x buffer, all-to-all (n-1)/n x the rank's buffer, send/recv 1x.")
