"""Table rendering for ``sweep --deadline`` / ``--budget``: one line per SKU, then how each was found."""

from __future__ import annotations

from typing import Any

from mi400plan.render.table import print_table
from mi400plan.results.deadline import DeadlineResult
from mi400plan.units import fmt_count, fmt_pct


def _money(x: float | None) -> str:
    if x is None:
        return "-"
    return f"${x / 1e6:,.2f}M" if x >= 1e6 else f"${x:,.0f}"


def render_deadline(res: DeadlineResult, console: Any) -> None:
    target = []
    if res.deadline_days is not None:
        target.append(f"in {res.deadline_days:g} days")
    if res.budget_usd is not None:
        target.append(f"within {_money(res.budget_usd)}")
    ask = "Smallest cluster" if res.deadline_days is not None else "Fastest cluster"
    title = (f"{ask} per SKU to train {res.model} on {fmt_count(res.train_tokens)} tokens {' and '.join(target)} "
             f"({res.precision}, seq {res.seq_len:,}, global batch {res.global_batch_seqs:,} seqs)")
    cols = ["SKU", ("GPUs", "right"), ("racks", "right"), "layout", ("days", "right"), ("cost", "right"),
            ("MW", "right"), ("MFU", "right"), ("scaling", "right", "secondary")]
    out = []
    for a in res.answers:
        p = a.pick
        if p is None:
            b = a.best
            out.append([a.sku, "-", "-", "none meets" if b is None else f"best: {b.gpus:,} GPUs",
                        "-" if b is None else f"{b.days:,.1f}", "-", "-", "-", "-"])
            continue
        mark = "" if a.meets else " (over)"
        out.append([a.sku, f"{p.gpus:,}", f"{p.racks:,}", p.layout_text, f"{p.days:,.1f}", _money(p.cost_usd) + mark,
                    "-" if p.megawatts is None else f"{p.megawatts:,.1f}", fmt_pct(p.mfu),
                    "-" if p.scaling_efficiency is None else f"{fmt_pct(p.scaling_efficiency)} vs {p.scaling_reference_gpus:,}"])
    notes = [f"{a.sku}: next smaller size {a.next_smaller.gpus:,} GPUs "
             + ("holds no layout" if a.next_smaller.days is None else f"takes {a.next_smaller.days:,.1f} days")
             for a in res.answers if a.next_smaller is not None]
    costs = [f"{a.sku} {a.usd_per_gpu_hour:.2f} USD/GPU-hour ({a.cost_source})" for a in res.answers
             if a.usd_per_gpu_hour is not None]
    print_table(console, cols, out, title=title,
                caption="Sizes step by whole scale-up domains (8-GPU nodes where a domain is not a power of two); "
                "racks = ceil(GPUs / GPUs per rack); MW = GPUs x wall W per GPU x PUE (site "
                f"{res.site}); scaling = tokens/s per GPU vs the smallest size that holds the model (above 100% where that size needs recompute or ZeRO-3 to fit). "
                + "; ".join(notes + costs) + "."
                + (f" Global batch: {res.global_batch_rule}." if res.global_batch_rule else ""))
    for a in res.answers:
        if a.limit:
            console.print(f"{a.sku}: {a.limit}.", markup=False, highlight=False)
    if res.finetune:
        console.print(f"Fine-tuning: {res.finetune}.", markup=False, highlight=False)
    if res.packing:
        console.print(f"Packed sequences: {res.packing.removeprefix('packed sequences: ')}.", markup=False, highlight=False)
    from mi400plan.render.totals import render_totals

    render_totals([a.pick.totals for a in res.answers if a.pick is not None and a.pick.totals is not None], console)
    for a in res.answers:
        priced = ", ".join(f"{p.gpus:,}: {'no layout' if p.days is None else f'{p.days:,.1f} d'}" for p in a.priced)
        console.print(f"{a.sku}: {a.candidates:,} candidate sizes up to {res.max_gpus:,} GPUs; priced {priced}.",
                      markup=False, highlight=False)
