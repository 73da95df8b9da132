"""Table rendering for ``budget``: the budget, the law's optimum, the family model and its plan."""

from __future__ import annotations

from typing import Any

from mi400plan.render import table_renderer
from mi400plan.render.table import print_table
from mi400plan.results.budget import BudgetResult
from mi400plan.render.totals import fmt_sci
from mi400plan.units import fmt_count, fmt_pct


@table_renderer("budget")
def render(res: BudgetResult, console: Any) -> None:
    m, p = res.model, res.plan
    rows = [
        ["compute budget", f"{fmt_sci(res.compute_flops)} FLOPs (6ND)", res.compute_basis],
        ["scaling law", res.law.name, res.law.formula],
        ["compute-optimal", f"{fmt_count(res.params_opt)} parameters, {fmt_count(res.tokens_opt)} tokens",
         f"{res.tokens_per_param:.1f} tokens per parameter"
         + ("" if res.loss_opt is None else f"; predicted loss {res.loss_opt:.3f}")],
        ["nearest family model", m.name, f"{m.family}; {fmt_count(m.params_total)} parameters"
         + ("" if m.params_active == m.params_total else f" ({fmt_count(m.params_active)} active)")
         + f", d_model {m.hidden_size:,}, {m.num_layers} layers, FFN {m.ffn_dim:,}"],
        ["tokens for it", fmt_count(m.tokens), "the same budget: C / (6 x parameters)"],
    ]
    if p is not None:
        rows += [
            ["layout", p.layout_text, f"on {p.gpus_used:,} of {res.gpus:,} {res.sku}"],
            ["throughput", f"{fmt_count(p.tokens_per_s)} tokens/s", f"step {p.step_time_s:.2f} s, MFU {fmt_pct(p.mfu)}"],
            ["days to train", f"{p.days:,.1f}", ("within" if p.feasible else "over") +
             (f" the {res.days:g}-day budget" if res.days is not None else " (no time budget)")],
        ]
    print_table(console, ["", "value", "basis"], rows,
                title=f"Compute-optimal model for {res.gpus:,} {res.sku}"
                + (f" x {res.days:g} days" if res.days is not None else f" and {fmt_sci(res.compute_flops)} FLOPs"))
    console.print(f"Law source: {res.law.source}.", markup=False, highlight=False)
    neighbours = [x for x in (res.next_smaller, res.next_larger) if x]
    if neighbours:
        console.print(f"Family neighbours: {' and '.join(neighbours)}.", markup=False, highlight=False)
    for line in res.iterations:
        console.print(f"  {line}", markup=False, highlight=False)
    if res.why_not:
        console.print(f"Not achievable: {res.why_not}.", markup=False, highlight=False)
    if p is not None and p.totals is not None:
        from mi400plan.render.totals import render_totals

        render_totals([p.totals], console)
