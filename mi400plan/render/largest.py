"""Table rendering for ``fit --largest``: the largest family model per SKU and the step above it."""

from __future__ import annotations

from typing import Any

from mi400plan.render.table import print_table
from mi400plan.results.largest import LargestResult, StepFit
from mi400plan.units import fmt_bytes, fmt_count


def _params(s: StepFit) -> str:
    if s.params_active != s.params_total:
        return f"{fmt_count(s.params_total)} ({fmt_count(s.params_active)} act.)"
    return fmt_count(s.params_total)


def render_largest(res: LargestResult, console: Any) -> None:
    infer = res.mode == "infer"
    what = (f"inference, one replica of {res.gpus:,} GPUs, batch {res.batch:,} x {res.seq_len:,} tokens"
            if infer else f"training on {res.gpus:,} GPUs, seq {res.seq_len:,}, global batch {res.batch:,} seqs")
    cols = ["SKU", "largest that fits", ("params", "right"), "layout",
            ("max context" if infer else "mem/GPU", "right"), "next step (does not fit)"]
    out = []
    for r in res.rows:
        big, nxt = r.largest, r.next_larger
        extra = "-"
        if big is not None:
            extra = f"{big.max_context:,}" if infer and big.max_context is not None else (
                fmt_bytes(big.memory_bytes, binary=False) if big.memory_bytes is not None else "-")
        nxt_text = "ladder top fits" if nxt is None else f"{nxt.name} ({_params(nxt)})"
        out.append([r.sku, "none" if big is None else big.name, "-" if big is None else _params(big),
                    "-" if big is None or big.layout_text is None else big.layout_text, extra, nxt_text])
    print_table(console, cols, out, title=f"Largest {res.family} model, {res.precision}, {what}",
                caption=f"Fits: {res.rule}. Family: d_model in steps of 1,024, 128 per layer, Llama-3 heads and FFN.")
    _runs(res, console)
    if res.packing:
        console.print(f"Packed sequences: {res.packing.removeprefix('packed sequences: ')}.", markup=False,
                      highlight=False)


def _runs(res: LargestResult, console: Any) -> None:
    """Train mode with --tokens: the largest model's step time and days, as ``sweep <name>`` prices them."""
    from mi400plan.units import fmt_pct, fmt_time

    runs = [(r.sku, r.run) for r in res.rows if r.run is not None]
    if not res.train_tokens or not runs:
        return
    cols = ["SKU", "model", ("batch (seqs)", "right"), "layout", ("step", "right"), ("tokens/s", "right"),
            ("MFU", "right"), ("days", "right")]
    out = [[sku, u.model, f"{u.global_batch_seqs:,}" + (" (pinned)" if u.batch_pinned else ""), u.layout_text,
            fmt_time(u.step_time_s, 2), fmt_count(u.tokens_per_s), fmt_pct(u.mfu), f"{u.days:,.1f}"] for sku, u in runs]
    print_table(console, cols, out, title=f"Training the largest model on {res.gpus:,} GPUs: "
                f"{fmt_count(res.train_tokens)} tokens",
                caption="The fastest layout at the planned global batch (or --global-batch), as 'mi400plan sweep "
                f"{runs[0][1].model} --sku {runs[0][0]} --gpus {res.gpus} --tokens ...' prices it.")
