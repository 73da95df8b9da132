"""Table rendering for ``sweep``: top-K layouts, SKU comparison, scaling view, rejection counts."""

from __future__ import annotations

from typing import Any

from mi400plan.render import table_renderer
from mi400plan.render.table import KEEP, print_table
from mi400plan.results.sweep import Span, SweepResult, SweepRow
from mi400plan.units import fmt_bytes, fmt_count, fmt_pct, fmt_time


# Which memory figure the tables show (the same figure `fit` reports for the layout).
MEM_NOTE = ("mem/GPU: the most loaded rank, runtime reserve included (the figure `fit --plan` reports), in GB "
            "(10^9 B) as fit's tables; "
            "! = tight: over HBM by no more than the allocator-fragmentation share (runs if fragmentation stays lower).")


def _band_note(rows: list[Any]) -> str:
    """The step time's empirical error band (``SweepRow.error_band_text``), once per table."""
    texts = sorted({r.error_band_text for r in rows if r.error_band_text})
    return f" step: {'; '.join(texts)} empirical error band (mi400plan validate)." if texts else ""


def _mem(m: Any) -> str:
    """The memory cell: the total, with "!" when the layout is tight (``MemoryBytes.verdict``)."""
    return fmt_bytes(m.total, binary=False) + ("!" if m.verdict == "tight" else "")

def _layout(r: SweepRow) -> str:
    from mi400plan.results.sweep import layout_text

    return layout_text(r.layout)


def _breakdown(r: SweepRow) -> str:
    t = r.time_s
    parts = [("comp", t.compute), ("attn", t.attention), ("mem", t.memory_bound), ("tp", t.tp), ("cp", t.cp), ("ep", t.ep),
             ("pp", t.pp), ("bubble", t.bubble), ("dp", t.dp), ("opt", t.optimizer + t.gemm_overhead),
             ("offl", t.offload), ("host", t.host)]
    return " ".join(f"{k}{KEEP}{v / r.step_time_s * 100:.0f}%" for k, v in parts if v / r.step_time_s >= 0.005)


def _money(x: float | None) -> str:
    if x is None:
        return "-"
    return f"${x / 1e6:,.2f}M" if x >= 1e6 else f"${x:,.0f}"


def _days(x: float | None) -> str:
    return "-" if x is None else f"{x:,.1f}"


def _has_cost(res: SweepResult) -> bool:
    return bool(res.train_tokens) and any(r.cost_usd is not None for r in res.rows)


def _energy(res: SweepResult, console: Any) -> None:
    """Energy, emissions and cost of each SKU's best layout (``--tokens``)."""
    if not res.energy:
        return

    def rng(r: Any, f: Any) -> str:
        if r is None:
            return "-"
        return f(r.nominal) if r.low == r.high else f"{f(r.nominal)}\n({f(r.low)}-{f(r.high)})"

    out, sources = [], []
    for e in res.energy:
        out.append([e.sku, f"{e.gpus:,}", f"{e.gpu_hours / 1e6:,.2f}M",
                    "-" if e.wall_power_per_gpu_w is None else f"{e.wall_power_per_gpu_w.nominal:,.0f}",
                    rng(e.energy_mwh, lambda x: f"{x:,.0f}"), rng(e.emissions_t, lambda x: f"{x:,.0f}"),
                    rng(e.cost, lambda x: f"{x / 1e6:,.2f}M")])
        if e.cost_per_gpu_hour is not None:
            where = e.cost_source if e.cost_source == "--gpu-hour-cost" else f"all-in, cost profile {e.system}"
            year = f" {e.price_year}" if e.price_year else ""
            sources.append(f"{e.sku} {e.cost_per_gpu_hour.nominal:.2f} {e.currency}{year}/GPU-hour ({where})")
    e0 = res.energy[0]
    print_table(
        console,
        ["SKU", ("GPUs", "right"), ("GPU-hours", "right"), ("W/GPU wall", "right"), ("MWh", "right"),
         ("t CO2e", "right"), (f"cost, {e0.currency}", "right")],
        out,
        title=f"Energy and cost to train: site {e0.site}, GPU load {e0.gpu_load:g} x TDP, "
        f"PUE {e0.pue.nominal:g}, {e0.grid_kg_co2e_per_kwh:g} kg CO2e/kWh",
        caption="MWh = GPU-hours x wall W per GPU (rack wall power / GPUs at the GPU load) / 1e6 x PUE; "
        "t CO2e = MWh x grid kg/kWh; cost = GPU-hours x cost per GPU-hour: " + ("; ".join(sources) or "none")
        + ". Nominal (low-high) over the estimate ranges.",
    )


@table_renderer("sweep")
def render(res: SweepResult, console: Any) -> None:
    if not isinstance(res, SweepResult):  # sweep --deadline / --budget
        from mi400plan.render.deadline import render_deadline

        render_deadline(res, console)
        return
    batches = {c.global_batch_seqs for c in res.batch.chosen} if res.batch else set()
    head = (
        f"{res.model}, {res.precision}, seq {res.seq_len}, global batch {res.global_batch_seqs:,} seqs "
        f"({fmt_count(res.global_batch_tokens)} tokens)" if len(batches) <= 1 else
        f"{res.model}, {res.precision}, seq {res.seq_len}, global batch planned per size (table Global batch)"
    )
    if not res.rows:
        console.print(_no_layout_headline(res), markup=False, highlight=False)
    groups: dict[tuple[str, int], list[SweepRow]] = {}
    for r in res.rows:
        groups.setdefault((r.sku, r.gpus), []).append(r)
    single = len(groups) == 1
    shown = groups if single or not res.scaling else {k: v[:1] for k, v in groups.items()}
    if not res.scaling:
        for (sku, gpus), rows in shown.items():
            cols = ["#", "layout", ("mem/GPU", "right"), ("step", "right"), "breakdown (% of step)",
                    ("tokens/s", "right"), ("MFU", "right")]
            if res.train_tokens:
                cols.append(("days", "right"))
            if _has_cost(res):
                cols.append(("cost", "right"))
            out = []
            for r in rows:
                line = [r.rank, _layout(r), _mem(r.memory_bytes), fmt_time(r.step_time_s, 2), _breakdown(r),
                        fmt_count(r.tokens_per_s), fmt_pct(r.mfu)]
                if res.train_tokens:
                    line.append(_days(r.days))
                if _has_cost(res):
                    line.append(_money(r.cost_usd))
                out.append(line)
            print_table(console, cols, out, title=f"Best layouts: {sku} x {gpus:,} GPUs - {head}",
                        caption=f"Order: {res.tie_break}. {MEM_NOTE}{_split_note(rows)}{_band_note(rows)}")
    if res.skus:
        cols = ["SKU", ("GPUs", "right"), "best layout", ("step", "right"), ("tokens/s", "right"),
                ("tok/s per GPU", "right"), ("GPUs/rack", "right"), ("tok/s per rack", "right"), ("MFU", "right"),
                ("vs best", "right")]
        if res.train_tokens:
            cols.append(("days", "right"))
        out = []
        for s in res.skus:
            line = [s.sku, f"{s.gpus:,}" if s.gpus else "-", "n/d" if s.missing else s.layout or "no valid layout",
                    fmt_time(s.step_time_s, 2) if s.step_time_s else "-", fmt_count(s.tokens_per_s) if s.tokens_per_s else "-",
                    f"{s.tokens_per_s_per_gpu:,.0f}" if s.tokens_per_s_per_gpu else "-", s.gpus_per_rack or "-",
                    fmt_count(s.tokens_per_s_per_rack) if s.tokens_per_s_per_rack else "-",
                    fmt_pct(s.mfu) if s.mfu is not None else "-", fmt_pct(s.relative) if s.relative else "-"]
            if res.train_tokens:
                line.append(_days(s.days))
            out.append(line)
        print_table(console, cols, out, title=f"SKU comparison (each SKU's best layout) - {head}")
    if res.scaling:
        cols = ["SKU", ("GPUs", "right"), "best layout", ("step", "right"), ("tokens/s", "right"),
                ("tok/s per GPU", "right"), ("MFU", "right"), ("scaling eff.", "right"), ("tokens/replica", "right")]
        out = []
        for p in res.scaling:
            out.append([p.sku, f"{p.gpus:,}", p.layout or "no valid layout", fmt_time(p.step_time_s, 2) if p.step_time_s else "-",
                        fmt_count(p.tokens_per_s) if p.tokens_per_s else "-",
                        f"{p.tokens_per_s_per_gpu:,.0f}" if p.tokens_per_s_per_gpu else "-",
                        fmt_pct(p.mfu) if p.mfu is not None else "-",
                        (fmt_pct(p.scaling_efficiency) + (" <90%" if p.below_90 else "")) if p.scaling_efficiency else "-",
                        fmt_count(p.per_replica_batch_tokens) if p.per_replica_batch_tokens else "-"])
        notes = [f"{k}: below 90% from {v:,} GPUs" if v else f"{k}: stays >= 90%" for k, v in res.scaling_below_90_at.items()]
        print_table(console, cols, out, title=f"Scaling - {head}",
                    caption="Scaling efficiency = tokens/s per GPU relative to the smallest size. " + "; ".join(notes))
    _batch(res, console)
    _pareto(res, console, head)
    _domain_comparison(res, console)
    _energy(res, console)
    from mi400plan.render.totals import render_totals

    render_totals(res.totals, console)
    if res.ranges:
        _ranges(res, console)
    rej = ", ".join(f"{k} {v:,}" for k, v in res.rejected.items() if v)
    console.print(f"Evaluated {res.evaluated:,} candidate layouts: {res.valid:,} valid and fit; rejected: {rej or 'none'}.",
                  markup=False, highlight=False)
    for e in res.efficiencies:
        console.print(
            f"{e.sku}: matmul {e.matmul:.2f} of peak ({e.matmul_status}), HBM {e.hbm:.2f}, "
            f"GEMM overhead {e.gemm_overhead_s * 1e6:.0f} us, scale-up domain {e.scale_up_domain}, {e.gpus_per_rack} GPUs/rack ({e.rack_basis})",
            markup=False, highlight=False,
        )
        if e.stack_label:
            console.print(f"{e.sku}: software stack {e.stack_label} ({e.stack_basis})", markup=False, highlight=False)
    console.print(_switches(res), markup=False, highlight=False)
    if res.finetune:
        console.print(f"Fine-tuning: {res.finetune}.", markup=False, highlight=False)
    if res.packing:
        console.print(f"Packed sequences: {res.packing.removeprefix('packed sequences: ')}.", markup=False, highlight=False)
    if res.saved_plan:
        console.print(f"Saved the best layout to {res.saved_plan}", markup=False, highlight=False)


def _batch(res: SweepResult, console: Any) -> None:
    """How the global batch was chosen: the rule, the law's numbers and each size's choice."""
    b = res.batch
    if b is None or not b.chosen or b.pinned:  # a pinned batch is in the headline (and warned about if starved)
        return
    cols = ["SKU", ("GPUs", "right"), ("batch (seqs)", "right"), ("tokens", "right"), ("micro-batches", "right"),
            ("stages x chunks", "right"), ("bubble", "right"), "tried (seqs)"]
    out = [[c.sku, f"{c.gpus:,}", f"{c.global_batch_seqs:,}", fmt_count(c.global_batch_tokens),
            "-" if c.microbatches is None else f"{c.microbatches:,}",
            "-" if c.pp is None else f"{c.pp} x {c.vpp}",
            "-" if c.bubble_fraction is None else fmt_pct(c.bubble_fraction) + (" !" if c.starved else ""),
            ", ".join(f"{t:,}" for t in c.tried_seqs)] for c in b.chosen]
    law = (f" Law: {b.law}; M = {b.flops_per_token:.3g} FLOPs/token (non-embedding, forward + backward). "
           "Override with --global-batch." if b.law else " Override with --global-batch.")
    print_table(console, cols, out, title="Global batch (sequences per optimizer step)",
                caption=f"Rule: {b.rule}.{law} Micro-batches per pipeline per step for the best layout; "
                f"bubble = (stages - 1) / (chunks x micro-batches) of compute time; ! = pipeline starved.")


def _split_note(rows: list[SweepRow]) -> str:
    """Rows whose layers do not split evenly over PP x VPP, with the split they use (``pipeline``)."""
    odd = [f"#{r.rank} {r.pipeline_split}" for r in rows if not r.pipeline_split.startswith("even")]
    text = (" Pipeline splits other than even: " + "; ".join(odd) + ".") if odd else ""
    slow = [f"#{r.rank} {r.stage_imbalance:.2f}x" for r in rows if r.stage_imbalance >= 1.005]
    if slow:
        text += " Slowest pipeline stage's time over the mean stage's (the LM head runs on the last): " + ", ".join(slow) + "."
    return text


def _no_layout_headline(res: SweepResult) -> str:
    cases = "; ".join(
        f"{n.sku} x {n.gpus:,} GPUs" + (f" (nearest that work: {' and '.join(f'{g:,}' for g in n.nearest_gpus)})"
                                        if n.nearest_gpus else "")
        for n in res.no_layout
    )
    return f"No valid layout that fits: {cases or 'nothing searched'}."


# The table lists the front up to this multiple of the fastest step time (JSON has all of it).
PARETO_SHOWN_SLOWDOWN = 1.5
# ... and leaves out a layout that saves less than this share of memory per GPU on the last one listed
# (slower, for next to no memory: a near-duplicate such as ZeRO 2 mb4 -> ZeRO 1 mb2 at 62.0 -> 61.6 GB,
# GPT-3 175B on 1,024 A100). 3 %: a difference the runtime reserve's 5 % fragmentation share already exceeds.
# The least-memory layout shown is always kept, so the front still ends where it ends.
PARETO_MIN_SAVING = 0.03


def distinct_front(rows: list[SweepRow], min_saving: float = PARETO_MIN_SAVING) -> list[SweepRow]:
    """``rows`` (a front, fastest first, memory falling) without near-duplicates: each kept layout needs
    at least ``min_saving`` less memory per GPU than the one kept before it. The fastest and the
    least-memory layouts are always kept; the latter replaces a kept one it barely undercuts."""
    kept: list[SweepRow] = []
    for r in rows:
        if not kept or r.memory_bytes.total <= (1 - min_saving) * kept[-1].memory_bytes.total:
            kept.append(r)
    if rows and kept[-1] is not rows[-1]:
        if len(kept) > 1:
            kept.pop()  # a near-duplicate of the front's end: the end (less memory) stands for both
        kept.append(rows[-1])
    return kept


def _pareto(res: SweepResult, console: Any, head: str) -> None:
    """``--pareto``: the layouts no other beats on both step time and memory per GPU."""
    groups: dict[tuple[str, int], list[SweepRow]] = {}
    for r in res.pareto:
        groups.setdefault((r.sku, r.gpus), []).append(r)
    for (sku, gpus), every in groups.items():
        fastest = every[0].step_time_s
        shown = [r for r in every if r.step_time_s <= PARETO_SHOWN_SLOWDOWN * fastest]
        rows = distinct_front(shown)
        cols = ["layout", ("mem/GPU", "right"), ("step", "right"), ("vs fastest", "right"), ("tokens/s", "right"),
                ("MFU", "right")]
        if _has_cost(res):
            cols.append(("cost", "right"))
        out = []
        for r in rows:
            line = [_layout(r), _mem(r.memory_bytes), fmt_time(r.step_time_s, 2),
                    "fastest" if r.rank == 1 else f"+{(r.step_time_s / fastest - 1) * 100:.2f}%",
                    fmt_count(r.tokens_per_s), fmt_pct(r.mfu)]
            if _has_cost(res):
                line.append(_money(r.cost_usd))
            out.append(line)
        print_table(console, cols, out, title=f"Trade-off front (step time vs memory per GPU): {sku} x {gpus:,} GPUs",
                    caption="Each layout needs less memory per GPU than every faster one; none is beaten on both. "
                    "At a fixed GPU count, cost and energy to train follow step time."
                    + (f" {len(shown) - len(rows)} left out: each saves under {PARETO_MIN_SAVING:.0%} memory on the "
                       "layout above it." if len(shown) > len(rows) else "")
                    + (f" {len(every) - len(shown)} more on the front, each over {PARETO_SHOWN_SLOWDOWN:g}x the fastest "
                       "step time, are in --json." if len(every) > len(shown) else "")
                    + (" The whole front is in --json." if len(shown) > len(rows) and len(every) == len(shown) else ""))


def _switches(res: SweepResult) -> str:
    """The step-time model's overlap and pipeline-split settings, as one line."""
    ov = res.overlap

    def onoff(k: str) -> str:
        return "on" if ov.get(k) else "off"

    pp = "on (VPP > 1; fill/drain exposed)" if ov.get("pp") else "off"
    text = (f"Overlap with compute: TP {onoff('tp')}, EP {onoff('ep')}, CP {onoff('cp')}, PP {pp}, "
            f"DP {onoff('dp')}.")
    if res.split_embedding_loss:
        text += " Pipeline split counts the embedding and the loss as one layer each."
    return text


def _span(sp: Span | None, f: Any) -> str:
    """``low..high`` (either side ``-`` where no layout fits at that corner)."""
    if sp is None:
        return "-"
    lo = f(sp.low) if sp.low is not None else "-"
    hi = f(sp.high) if sp.high is not None else "-"
    return f"{lo}..{hi}"


def _ranges(res: SweepResult, console: Any) -> None:
    """One line per SKU and GPU count: the best layout's figures over the estimate-range corners."""
    scaling = any(r.scaling_efficiency is not None for r in res.ranges)
    cols = ["SKU", ("GPUs", "right"), ("step", "right"), ("tokens/s", "right"), ("MFU", "right")]
    if res.train_tokens:
        cols.append(("days", "right"))
    if _has_cost(res):
        cols.append(("cost", "right"))
    if scaling:
        cols.append(("scaling eff.", "right"))
    cols.append("best layout at the corners")
    out = []
    for r in res.ranges:
        line = [r.sku, f"{r.gpus:,}", _span(r.step_time_s, lambda x: fmt_time(x, 2)),
                _span(r.tokens_per_s, fmt_count), _span(r.mfu, fmt_pct)]
        if res.train_tokens:
            line.append(_span(r.days, lambda x: f"{x:,.1f}"))
        if _has_cost(res):
            line.append(_span(r.cost_usd, _money))
        if scaling:
            line.append(_span(r.scaling_efficiency, fmt_pct))
        moved = []
        for c in (r.pessimistic, r.optimistic):
            if c.layout is None:
                moved.append(f"{c.corner}: no layout fits")
            elif c.layout_changes:
                if c.nominal_layout_fits is False:
                    gap = "nominal best does not fit"
                elif c.nominal_layout_step_time_s and c.step_time_s:
                    gap = f"nominal best +{fmt_pct(c.nominal_layout_step_time_s / c.step_time_s - 1.0)}"
                else:
                    gap = ""
                moved.append(f"{c.corner}: {c.layout_text}" + (f" ({gap})" if gap else ""))
        line.append("; ".join(moved) or "unchanged")
        out.append(line)
    varied = {r.sku: r.varied for r in res.ranges}
    notes = "; ".join(f"{k}: {', '.join(v) if v else 'no ranged input'}" for k, v in varied.items())
    print_table(
        console, cols, out, title="Estimate ranges (search re-run at the pessimistic and optimistic corners)",
        caption="Pessimistic: low end of peak, matmul and HBM efficiency, HBM bandwidth and capacity, slow fabrics, "
        f"high GEMM overhead; optimistic: the other ends. Ranged inputs - {notes}.",
    )
    n = len(res.flips)
    console.print(
        f"{n} conclusion{'s' if n != 1 else ''} flip{'' if n != 1 else 's'} inside the estimate ranges (see warnings)."
        if n else "No conclusion flips inside the estimate ranges.",
        markup=False, highlight=False,
    )


def _domain_comparison(res: SweepResult, console: Any) -> None:
    """Each SKU's best layout next to the fastest one on the other side of the scale-up-domain boundary
    (a SKU column when several SKUs are compared)."""
    skus = list(dict.fromkeys(r.sku for r in res.rows))
    multi = len(skus) > 1
    out, titles = [], []

    def t(x: float) -> str:
        return fmt_time(x, 2) if x else "-"

    for sku in skus:
        best = next(r for r in res.rows if r.sku == sku)
        crossing = next((r for r in res.rack_crossing if r.sku == sku), None)
        inside = next((r for r in res.domain_inside if r.sku == sku), None)
        if crossing is not None and crossing.layout != best.layout:
            other, label, title = crossing, "best crossing", "Why the best layout stays inside the scale-up domain"
        elif inside is not None and inside.layout != best.layout:
            other, label, title = inside, "best inside", "The best layout crosses the scale-up domain"
        else:
            continue
        titles.append(title)
        for lab, r in (("best", best), (label, other)):
            delta = "" if r is best else f"{(r.step_time_s / best.step_time_s - 1) * 100:+.2f}%"
            out.append(([sku] if multi else []) + [
                lab, _layout(r), r.placement.tp, r.placement.pp, fmt_time(r.step_time_s, 2), delta,
                t(r.time_s.tp), t(r.time_s.pp), t(r.time_s.bubble), t(r.time_s.dp)])
    if not out:
        return
    cols = (["SKU"] if multi else []) + [
        "", "layout", "TP tier", "PP tier", ("step", "right"), ("vs best", "right"), ("tp", "right"),
        ("pp", "right"), ("bubble", "right"), ("dp", "right")]
    title = titles[0] if len(set(titles)) == 1 else "Best layout vs the fastest on the other side of the scale-up domain"
    print_table(console, cols, out, title=title,
                caption="exposed time per step; tiers: scale_up inside the domain, scale_out or hierarchical across it")

