"""``mi400plan budget``: the compute-optimal model and token count for GPUs x days (or a FLOP budget)
under a stated scaling law, the family model nearest it, and its layout and days on the cluster."""

from __future__ import annotations

import math
from typing import Any

from mi400plan.errors import UsageError
from mi400plan.results.budget import BudgetResult, FamilyModel, Feasibility, LawInfo
from mi400plan.specs.layout import TrainOptions
from mi400plan.units import DAY, UnitError, fmt_count, parse_count

MAX_ITERATIONS = 6  # fixed-point steps of (budget -> model -> throughput -> budget)
SIZE_TRIES = 8  # candidate sizes tried downward from --gpus for a layout


def budget(cat: Any, sku: str, *, gpus: int, days: str | None = None, flops: str | None = None,
           law: str = "chinchilla", family: str = "dense", experts: int = 0, top_k: int = 0,
           mfu: float | None = None, seq_len: int | None = None, global_batch: str | None = None,
           options: TrainOptions | None = None) -> BudgetResult:
    """See the module doc; ``days`` as ``90d``, ``flops`` as ``3.8e25``; ``options`` the training recipe
    (``TrainOptions``, default Megatron-LM BF16) every family model is priced with."""
    from mi400plan import budget as bg
    from mi400plan.api.deadline import parse_deadline_days
    from mi400plan.hardware import build_sku
    from mi400plan.family import FamilyTemplate
    from mi400plan.scaling import compute_optimal, get_law

    if (days is None) == (flops is None):
        raise UsageError("give exactly one of --days (with --gpus) or --flops")
    from mi400plan.deadline import MAX_CLUSTER_GPUS

    if not 1 <= gpus <= MAX_CLUSTER_GPUS:
        raise UsageError(f"--gpus must be in 1..{MAX_CLUSTER_GPUS:,}, got {gpus:,}")
    if mfu is not None and not (math.isfinite(mfu) and 0 < mfu <= 1):
        raise UsageError(f"--mfu must be a fraction in (0, 1], got {mfu}")
    the_law = get_law(law)
    if family not in ("dense", "moe"):
        raise UsageError(f"unknown --family {family!r}; choose dense or moe")
    template = FamilyTemplate(family, experts, top_k)  # type: ignore[arg-type]
    topts = options or TrainOptions()
    precision = topts.precision
    hw = build_sku(cat, sku, precision, offload=topts.offload_layers > 0, stack=topts.stack_request()).hw
    steps = bg.ladder(template)
    n_days = parse_deadline_days(days, "--days") if days is not None else None
    price = _Pricer(hw, topts, gpus, seq_len, global_batch)
    iterations: list[str] = []
    if flops is not None:
        c = _parse_flops(flops)
        basis, mfu_used = "given (--flops)", None
    else:
        secs = n_days * DAY  # type: ignore[operator]
        mfu_used = mfu if mfu is not None else hw.matmul_eff
        c = bg.budget_flops(gpus, secs, hw.peak_flops, mfu_used)
        basis = f"{gpus:,} GPUs x {n_days:g} days x {hw.peak_flops / 1e12:,.0f} TFLOP/s x MFU {mfu_used:.3f}"
        if mfu is None:
            c, basis, mfu_used = _fixed_point(c, secs, gpus, hw, the_law, template, steps, price, iterations)
    opt = compute_optimal(c, the_law)
    step = bg.nearest(template, opt.params, steps)
    matched = step.matched(template.family)
    tokens = c / (6.0 * matched)
    plan, why = price.plan(step, tokens, n_days)
    i = steps.index(step)
    warnings = _edge_warnings(opt.params, tokens, steps, template.family, plan)
    return BudgetResult(
        sku=hw.name, gpus=gpus, days=n_days, precision=precision, compute_flops=c, compute_basis=basis,
        mfu_used=mfu_used, law=LawInfo(name=the_law.name, formula=the_law.describe(), source=the_law.source),
        params_opt=opt.params, tokens_opt=opt.tokens, loss_opt=opt.loss, tokens_per_param=opt.tokens / opt.params,
        model=FamilyModel(name=step.model.name, family=template.label(), hidden_size=step.model.hidden_size,
                          num_layers=step.model.num_layers, ffn_dim=step.model.ffn_dim,
                          params_total=step.params_total, params_active=step.params_active, tokens=tokens),
        next_smaller=_neighbour(steps, i - 1), next_larger=_neighbour(steps, i + 1),
        plan=plan, iterations=iterations, why_not=why, warnings=warnings,
    )


def _edge_warnings(params: float, tokens: float, steps: list[Any], family: str, plan: Any) -> list[str]:
    """The optimum outside the family's ladder, or a budget below one optimizer step."""
    out = []
    lo, hi = steps[0].matched(family), steps[-1].matched(family)
    if params < lo / 2:
        out.append(f"the compute-optimal size ({fmt_count(params)}) is below the family's smallest model "
                   f"({fmt_count(lo)}): the budget is too small for this family")
    if params > hi * 2:
        out.append(f"the compute-optimal size ({fmt_count(params)}) is above the family's largest model "
                   f"({fmt_count(hi)})")
    if plan is not None and plan.totals is not None and tokens < plan.totals.step_tokens:
        out.append(f"the budget trains {fmt_count(tokens)} tokens, less than one optimizer step "
                   f"({fmt_count(plan.totals.step_tokens)} tokens)")
    return out


def _neighbour(steps: list[Any], i: int) -> str | None:
    if not 0 <= i < len(steps):
        return None
    return f"{steps[i].model.name} ({fmt_count(steps[i].params_total)} parameters)"


def _parse_flops(text: str) -> float:
    try:
        c = parse_count(text.strip())
    except UnitError:
        raise UsageError(f"cannot read --flops {text!r}", hint="give FLOPs as a number: 3.8e25") from None
    if not (math.isfinite(c) and c > 0):
        raise UsageError(f"--flops must be a positive number of FLOPs, got {text!r}")
    return c


def _fixed_point(c: float, secs: float, gpus: int, hw: Any, law: Any, template: Any, steps: list[Any],
                 price: "_Pricer", iterations: list[str]) -> tuple[float, str, float]:
    """Budget in the law's 6ND FLOPs from the throughput the chosen model reaches on the cluster:
    ``C = 6 N_model x tokens/s x seconds``; repeat until the chosen model stops changing."""
    from mi400plan import budget as bg
    from mi400plan.scaling import compute_optimal

    basis, mfu_used, seen = "", c / (gpus * secs * hw.peak_flops), set()
    for _ in range(MAX_ITERATIONS):
        step = bg.nearest(template, compute_optimal(c, law).params, steps)
        best = price.best(step)
        if best is None or step.width in seen:
            break
        seen.add(step.width)
        tps = best[1]
        c_new = 6.0 * step.matched(template.family) * tps * secs
        iterations.append(f"C {c:.3g} -> {step.model.name} at {tps:,.0f} tokens/s on {best[0]:,} GPUs -> C {c_new:.3g}".replace("e+", "e"))
        c = c_new
        mfu_used = c / (gpus * secs * hw.peak_flops)
        basis = (f"6 N D the cluster delivers: 6 x {fmt_count(step.matched(template.family))} parameters x "
                 f"{fmt_count(tps)} tokens/s x {secs / DAY:g} days ({step.model.name}'s best layout)")
    return c, basis or "GPUs x time x peak x matmul efficiency (no layout priced)", mfu_used


class _Pricer:
    """Prices family models on the cluster with the layout search (largest fillable size <= --gpus)."""

    def __init__(self, hw: Any, options: TrainOptions, gpus: int, seq_len: int | None, global_batch: str | None) -> None:
        self.hw, self.options, self.gpus = hw, options, gpus
        self.seq_len, self.global_batch = seq_len, global_batch
        self._cache: dict[int, Any] = {}

    def _workload(self, spec: Any) -> Any:
        from mi400plan.api.sweep import DEFAULT_SEQ_CAP, parse_global_batch
        from mi400plan.batch import planned_law
        from mi400plan.params import count_params
        from mi400plan.search import Workload

        seq = int(self.seq_len) if self.seq_len else min(spec.max_seq_len, DEFAULT_SEQ_CAP)
        counts, recipe = count_params(spec), self.options.train_recipe()
        # a compute-optimal model (the budget's answer) trains on 20 tokens per parameter: the batch law's own
        # assumption without --tokens (batch.batch_law)
        gb = (parse_global_batch(self.global_batch, seq) if self.global_batch
              else planned_law(spec, counts, recipe, seq, None).start_seqs)
        return Workload(spec, counts, recipe, seq, gb)

    def best(self, step: Any) -> tuple[int, float, dict[str, Any], Any] | None:
        """(GPUs used, tokens/s, search row, workload) of the fastest layout, or None."""
        from mi400plan import deadline as dl
        from mi400plan.search import SearchOptions, iter_rows, search

        if step.width not in self._cache:
            wl, opts = self._workload(step.model), SearchOptions(**self.options.search_flags())
            sizes = dl.candidate_sizes(wl, opts, 1, self.gpus)
            found = None
            for s in reversed(sizes[-SIZE_TRIES:]):
                res = search(wl, self.hw, s, opts, top_k=1)
                if res.valid:
                    row = next(iter_rows(res.top))
                    found = (s, wl.global_batch * wl.seq_len / row["step"], row, wl)
                    break
            self._cache[step.width] = found
        return self._cache[step.width]

    def plan(self, step: Any, tokens: float, days: float | None) -> tuple[Feasibility | None, str | None]:
        from mi400plan.results.sweep import layout_text
        from mi400plan.api.totals import plan_totals
        from mi400plan.results.sweep import SweepLayout
        from mi400plan.search import model_terms

        best = self.best(step)
        if best is None:
            return None, (f"{step.model.name} has no valid layout that fits on the largest {SIZE_TRIES} GPU counts "
                          f"up to {self.gpus:,} {self.hw.name}")
        used, tps, r, wl = best
        lay = SweepLayout.of_row(r)
        terms = model_terms(wl.model, wl.counts, wl.seq_len, wl.recipe)
        need = tokens / tps / DAY
        return Feasibility(
            gpus_used=used, layout=lay, layout_text=layout_text(lay), step_time_s=r["step"], tokens_per_s=tps,
            mfu=terms.flops_model * tps / (used * self.hw.peak_flops), days=need,
            feasible=days is None or need <= days * (1 + 1e-9),
            totals=plan_totals(r, wl, terms, self.hw.name, used, layout_text(lay), tokens),
        ), None
