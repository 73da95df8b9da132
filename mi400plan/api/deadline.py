"""``sweep --deadline`` / ``--budget``: the cluster size per SKU that trains ``--tokens`` in time or
within a budget (the search is ``mi400plan.deadline``; layouts and step times are ``sweep``'s)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from mi400plan.errors import UsageError
from mi400plan.finetune import finetune_text
from mi400plan.packing import options_packing_text
from mi400plan.hardware import SkuOverrides
from mi400plan.results.deadline import ClusterPick, DeadlineResult, PricedSize, SkuAnswer
from mi400plan.specs.layout import TrainOptions
from mi400plan.units import DAY, HOUR, UnitError, parse_count

_DAYS = {"d": 1.0, "day": 1.0, "days": 1.0, "w": 7.0, "wk": 7.0, "week": 7.0, "weeks": 7.0, "h": 1 / 24, "hours": 1 / 24}


# A time budget from one hour to a century: shorter is no training run, longer no plan.
DAYS_RANGE = (1.0 / 24.0, 36525.0)


def parse_deadline_days(text: str, flag: str = "--deadline") -> float:
    """``30d`` / ``30 days`` / ``6w`` / ``72h`` / ``30`` (days) -> days; errors name ``flag``."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([a-z]*)\s*", text.lower())
    if not m or (m.group(2) and m.group(2) not in _DAYS):
        raise UsageError(f"cannot read {flag} {text!r}", hint="give days (30d, 30), weeks (6w) or hours (72h)")
    days = float(m.group(1)) * _DAYS.get(m.group(2) or "d", 1.0)
    if not (math.isfinite(days) and DAYS_RANGE[0] <= days <= DAYS_RANGE[1]):
        raise UsageError(f"{flag} must be a time from 1 hour to 100 years (36,525 days), got {text!r}")
    return days


def parse_usd(text: str) -> float:
    """``5M`` / ``$2,500,000`` / ``2.5e6`` -> US dollars."""
    t = text.strip().lstrip("$").replace(",", "").replace("_", "").removesuffix("USD").strip()
    try:
        usd = parse_count(t)
    except UnitError:
        raise UsageError(f"cannot read --budget {text!r}", hint="give US dollars: 5M, 2500000, $2,500,000") from None
    if not (math.isfinite(usd) and usd > 0):
        raise UsageError(f"--budget must be a positive amount of US dollars, got {text!r}")
    return usd


@dataclass(frozen=True)
class _Price:
    usd_per_gpu_hour: float | None
    wall_w_per_gpu: float | None
    pue: float | None
    source: str | None


def _pricing(cat: Any, sku: str, gpu_hour_cost: float | None, site_prof: Any, site: Any) -> _Price:
    """Cost per GPU-hour (flag, else the cost model) and wall power per GPU x PUE for the MW figure."""
    from mi400plan.cost import gpu_hour_model, resolve_system
    from mi400plan.errors import MissingValueError, UnknownNameError

    try:
        m = gpu_hour_model(cat, resolve_system(cat, sku), site_prof, site)
    except (MissingValueError, UnknownNameError):
        m = None
    wall = None if m is None else m.power.at_load[1][1]
    pue = site.pue.nominal
    if gpu_hour_cost is not None:
        return _Price(gpu_hour_cost, wall, pue, "--gpu-hour-cost")
    if m is None or site_prof.currency != "USD":
        return _Price(None, wall, pue, None)
    return _Price(m.nominal.total, wall, pue, f"cost model: {m.profile.name} at {site_prof.name}")


def sweep_deadline(cat: Any, model: str, skus: list[str], *, tokens: str | None, deadline: str | None = None,
                   budget: str | None = None, global_batch: str | None = None, seq_len: int | None = None,
                   options: TrainOptions | None = None, pins: dict[str, list[int]] | None = None,
                   gpu_hour_cost: float | None = None, site: str | None = None, cost_overrides: Any = None,
                   max_gpus: int | None = None, sku_overrides: SkuOverrides | None = None) -> DeadlineResult:
    """Smallest cluster per SKU that trains ``tokens`` by ``deadline`` (within ``budget`` too when both
    are given), or with ``budget`` alone the fastest cluster within it. ``options`` is the training
    recipe (``TrainOptions``, as ``sweep`` takes it) and ``pins`` the layout values the search may use
    (``sweep --tp/--pp/.../--recompute``); ``sku_overrides`` the measured efficiencies."""
    from mi400plan import deadline as dl
    from mi400plan.cost import load_site

    if not tokens:
        raise UsageError("--deadline and --budget need --tokens (how many tokens to train)")
    if not skus:
        raise UsageError("give at least one --sku")
    try:
        train_tokens = parse_count(tokens)
    except UnitError as exc:
        raise UsageError(f"cannot read --tokens {tokens!r}: {exc}") from None
    if not (math.isfinite(train_tokens) and train_tokens >= 1):
        raise UsageError(f"--tokens must be a positive count, got {tokens!r}")
    days_target = parse_deadline_days(deadline) if deadline else None
    usd = parse_usd(budget) if budget else None
    cap = dl.MAX_CLUSTER_GPUS if max_gpus is None else int(max_gpus)
    if not 1 <= cap <= dl.MAX_CLUSTER_GPUS:
        raise UsageError(f"--max-gpus must be in 1..{dl.MAX_CLUSTER_GPUS:,}")
    topts = options or TrainOptions()
    wl, opts, spec_name, batch_rule = _workload(cat, model, global_batch, seq_len, topts, pins, train_tokens)
    site_prof, site_v, _ = load_site(cat, site, cost_overrides)
    goal = _Goal(train_tokens, days_target, usd, cap)
    answers = [_answer(cat, s, wl, opts, topts, goal, gpu_hour_cost, site_prof, site_v, sku_overrides or SkuOverrides())
               for s in skus]
    if len({a.sku for a in answers}) != len(answers):
        raise UsageError("the same --sku is given twice")
    return DeadlineResult(
        mode="deadline" if days_target is not None else "budget", model=spec_name, precision=topts.precision,
        seq_len=wl.seq_len, global_batch_seqs=wl.global_batch, global_batch_rule=batch_rule, train_tokens=train_tokens,
        deadline_days=days_target,
        budget_usd=usd, max_gpus=cap, site=site_prof.name, recipe=topts.changed(), finetune=finetune_text(topts),
        packing=options_packing_text(topts, wl.seq_len),
        method=dl.__doc__.split("\n\n")[2].replace("\n", " ") if dl.__doc__ else "", answers=answers, warnings=[],
    )


@dataclass(frozen=True)
class _Goal:
    tokens: float
    days: float | None
    usd: float | None
    cap: int


def _workload(cat: Any, model: str, global_batch: str | None, seq_len: int | None, topts: TrainOptions,
              pins: dict[str, list[int]] | None, train_tokens: float) -> tuple[Any, Any, str, str]:
    """The workload and search options ``sweep`` builds from the same recipe and pins, and the rule that
    set the global batch: ``--global-batch``, else planned as ``sweep`` plans it (``batch.batch_law``)."""
    from mi400plan.api.sweep import DEFAULT_SEQ_CAP, PRECISIONS, parse_global_batch
    from mi400plan.batch import law_text, planned_law
    from mi400plan.api.sweep import pin_options
    from mi400plan.params import count_params
    from mi400plan.search import SearchOptions, Workload

    if topts.precision not in PRECISIONS:
        raise UsageError(f"unknown --precision {topts.precision!r}; choose from {', '.join(PRECISIONS)}")
    spec = cat.get("models", model).spec
    seq = int(seq_len) if seq_len else min(spec.max_seq_len, DEFAULT_SEQ_CAP)
    if seq < 1:
        raise UsageError("--seq must be positive")
    counts, recipe = count_params(spec), topts.train_recipe()
    if global_batch:
        gb, rule = parse_global_batch(global_batch, seq), "pinned by --global-batch"
    else:
        law = planned_law(spec, counts, recipe, seq, train_tokens)
        gb, rule = law.start_seqs, law_text(law)
    opts = SearchOptions(**topts.search_flags(), **pin_options(pins))
    return Workload(spec, counts, recipe, seq, gb), opts, spec.name, rule


def _answer(cat: Any, sku_name: str, wl: Any, opts: Any, topts: TrainOptions, goal: _Goal,
            gpu_hour_cost: float | None, site_prof: Any, site_v: Any, ov: SkuOverrides) -> SkuAnswer:
    from mi400plan import deadline as dl
    from mi400plan.hardware import build_sku
    from mi400plan.search import model_terms

    sku = build_sku(cat, sku_name, topts.precision, matmul_efficiency=ov.matmul_efficiency,
                    hbm_efficiency=ov.hbm_efficiency, gemm_overhead_us=ov.gemm_overhead_us,
                    offload=topts.offload_layers > 0, stack=topts.stack_request())
    hw = sku.hw
    step = dl.size_step(hw.domain)
    sizes = dl.candidate_sizes(wl, opts, step, goal.cap)
    price = _pricing(cat, sku.name, gpu_hour_cost, site_prof, site_v)
    pricer = dl.Pricer(wl, hw, opts)
    terms = model_terms(wl.model, wl.counts, wl.seq_len, wl.recipe)
    bound = dl.throughput_bound(hw.peak_flops, terms.flops_model)

    def days_of(p: Any) -> float:
        return goal.tokens / p.tokens_per_s / DAY

    def cost_of(p: Any) -> float:
        return days_of(p) * DAY / HOUR * p.gpus * (price.usd_per_gpu_hour or 0.0)

    def within(p: Any) -> bool:
        return goal.usd is None or cost_of(p) <= goal.usd

    if goal.usd is not None and price.usd_per_gpu_hour is None:
        raise UsageError(f"{sku.name}: no cost per GPU-hour for --budget",
                         hint="give --gpu-hour-cost, or a cost profile for this SKU")
    min_gpus = None
    if goal.days is not None:
        min_gpus = dl.compute_bound_gpus(goal.tokens, terms.flops_model, goal.days * DAY, hw.peak_flops)
        out = dl.smallest_meeting(sizes, pricer, goal.tokens / (goal.days * DAY), bound, within)
    else:
        out = dl.fastest(sizes, pricer, bound, within)
    valid = [p for p in out.priced if p.valid]
    ref = _smallest_valid(sizes, pricer) if valid else None

    def pick(p: Any) -> ClusterPick | None:
        return None if p is None else _pick(p, sku, wl, terms, days_of(p), price, ref, goal.tokens)

    shown = out.found or out.nearest  # with both: the smallest size meeting the deadline, over budget
    chosen = pick(shown)
    meets = out.found is not None
    limit = None if meets else _limit(out, wl, goal, price, cost_of, days_of, chosen, sizes)
    nxt = None
    if shown is not None:
        below = [p for p in out.priced if p.gpus < shown.gpus]
        nxt = _priced(below[-1], days_of, cost_of, price) if below else None
    return SkuAnswer(
        sku=sku.name, size_step_gpus=step, candidates=len(sizes), compute_bound_gpus=min_gpus,
        usd_per_gpu_hour=price.usd_per_gpu_hour, cost_source=price.source, pick=chosen,
        best=pick(out.best), meets=meets, limit=limit, next_smaller=nxt,
        priced=[_priced(p, days_of, cost_of, price) for p in out.priced],
    )


# Sizes tried upward from the smallest candidate for the scaling-efficiency reference.
REFERENCE_TRIES = 6


def _smallest_valid(sizes: list[int], pricer: Any) -> Any:
    """The smallest candidate size with a valid layout (the scaling-efficiency reference), or None."""
    for s in sizes[:REFERENCE_TRIES]:
        p = pricer(s)
        if p.valid:
            return p
    return next((p for p in sorted(pricer.seen.values(), key=lambda q: q.gpus) if p.valid), None)


def _priced(p: Any, days_of: Any, cost_of: Any, price: _Price) -> PricedSize:
    if not p.valid:
        return PricedSize(gpus=p.gpus, tokens_per_s=None, days=None)
    return PricedSize(gpus=p.gpus, tokens_per_s=p.tokens_per_s, days=days_of(p),
                      cost_usd=cost_of(p) if price.usd_per_gpu_hour is not None else None)


def _pick(p: Any, sku: Any, wl: Any, terms: Any, days: float, price: _Price, ref: Any,
          train_tokens: float | None = None) -> ClusterPick:
    from mi400plan.api.sweep import _memory as memory_bytes
    from mi400plan.results.sweep import layout_text
    from mi400plan.api.totals import plan_totals
    from mi400plan.results.sweep import SweepLayout, TimeBreakdown

    r = p.row
    lay = SweepLayout.of_row(r)
    per_rack = sku.hw.gpus_per_rack
    mw = None
    if price.wall_w_per_gpu is not None and price.pue is not None:
        mw = p.gpus * price.wall_w_per_gpu * price.pue / 1e6
    eff = (p.tokens_per_s / p.gpus) / (ref.tokens_per_s / ref.gpus) if ref is not None else None
    return ClusterPick(
        gpus=p.gpus, racks=-(-p.gpus // per_rack), gpus_per_rack=per_rack, layout=lay, layout_text=layout_text(lay),
        step_time_s=r["step"], time_s=TimeBreakdown(**{k: r[f"t_{k}"] for k in TimeBreakdown.model_fields}),
        tokens_per_s=p.tokens_per_s, mfu=terms.flops_model * p.tokens_per_s / (p.gpus * sku.hw.peak_flops),
        days=days, cost_usd=None if price.usd_per_gpu_hour is None else days * DAY / HOUR * p.gpus * price.usd_per_gpu_hour,
        megawatts=mw, scaling_efficiency=eff, scaling_reference_gpus=None if ref is None else ref.gpus,
        totals=plan_totals(r, wl, terms, sku.name, p.gpus, layout_text(lay), train_tokens),
        memory=memory_bytes(r, wl, sku.hw),
    )


def _limit(out: Any, wl: Any, goal: _Goal, price: _Price, cost_of: Any, days_of: Any,
           chosen: ClusterPick | None, sizes: list[int]) -> str:
    """Why nothing qualifies: the term that stops scaling and the best date, or the budget's reach."""
    from mi400plan import deadline as dl

    cap, usd = goal.cap, goal.usd
    if not sizes:
        return f"no GPU count up to {cap:,} can hold a layout of this model and global batch"
    if out.best is None and out.nearest is None:
        return f"no layout fits on any size priced up to {cap:,} GPUs"
    best = out.best
    if goal.days is not None and out.nearest is None:
        term, share = dl.limiting_term(best.row)
        return (f"no cluster up to {cap:,} GPUs trains in {goal.days:g} days; the best achievable is "
                f"{days_of(best):,.1f} days on {best.gpus:,} GPUs, where {_TERMS.get(term, term)} takes {share:.0%} "
                f"of each step: that term stops scaling (the global batch of {wl.global_batch:,} sequences caps "
                "data parallelism)")
    if chosen is not None and chosen.cost_usd is not None and usd is not None and goal.days is not None:
        return (f"meeting the deadline costs ${chosen.cost_usd:,.0f} on {chosen.gpus:,} GPUs, the smallest size "
                f"that meets it, over the budget of ${usd:,.0f}; no larger size meets both")
    cheapest = min((p for p in out.priced if p.valid), key=cost_of)
    step_cost = cost_of(cheapest) * (wl.global_batch * wl.seq_len) / (days_of(cheapest) * DAY * cheapest.tokens_per_s)
    if usd is not None and usd < step_cost:
        return (f"a budget of ${usd:,.0f} is below the cost of one optimizer step (${step_cost:,.2f} on "
                f"{cheapest.gpus:,} GPUs)")
    from mi400plan.units import fmt_count

    share = (usd or 0.0) / cost_of(cheapest)
    return (f"over budget: the cheapest size priced, {cheapest.gpus:,} GPUs, costs ${cost_of(cheapest):,.0f} "
            f"({days_of(cheapest):,.1f} days); ${usd:,.0f} trains {fmt_count(share * days_of(cheapest) * DAY * cheapest.tokens_per_s)} "
            "tokens")


_TERMS = {"gemm_overhead": "per-GEMM kernel overhead", "memory_bound": "memory-bound work", "tp": "exposed TP traffic",
          "cp": "exposed CP traffic", "ep": "exposed EP all-to-all", "pp": "exposed pipeline transfers",
          "host": "host-bound expert GEMMs",
          "bubble": "the pipeline bubble", "dp": "exposed data-parallel traffic", "optimizer": "the optimizer step",
          "offload": "exposed activation offloading"}
