"""``sweep``: search parallelism layouts for a model on one or more SKUs and cluster sizes.

Inputs are names and strings (as typed on the command line); unit parsing happens here. The search
itself is ``mi400plan.search``; memory comes from ``mi400plan.memory`` (the ``fit`` model) and
collective times from ``mi400plan.comms`` (the ``comm`` model).
"""

from __future__ import annotations

import math

import re
from collections.abc import Callable
from dataclasses import field
from pathlib import Path
from typing import Any

from mi400plan.batch import BatchLaw
from mi400plan import hardware
from mi400plan.pricing import Pricing
from mi400plan.errors import UsageError
from mi400plan.finetune import finetune_text
from mi400plan.packing import options_packing_text
# Re-exported: the hardware model lives in the core ``mi400plan.hardware``.
from mi400plan.hardware import CORNERS, Sku, SkuOverrides, expand_all  # noqa: F401
from mi400plan.hardware import build_all as _build_all
from mi400plan.profiles import approximation_warnings
from mi400plan.records import record
from mi400plan.results.sweep import (
    BatchChoice,
    BatchPlan,
    NoLayout,
    CornerBest,
    CornerInputs,
    MemoryBytes,
    Placement,
    RowRange,
    ScalingPoint,
    SkuRange,
    SkuSummary,
    Span,
    SweepFlip,
    SweepLayout,
    SweepResult,
    SweepRow,
    TimeBreakdown,
    layout_text,
)
from mi400plan.units import DAY, HOUR, UnitError, fmt_bytes, fmt_count, fmt_pct, fmt_time, parse_count, parse_count_list

DEFAULT_GLOBAL_BATCH_TOKENS = 2**22  # 4Mi tokens (Llama 3 pre-training began at 4M tokens per step)
DEFAULT_SEQ_CAP = 8192
PRECISIONS = ("bf16", "fp8", "mxfp8", "nvfp4", "mxfp4")
SCALING_THRESHOLD = 0.90
# A corner's best layout counts as a flip of the "best layout" conclusion only when the nominal best,
# run at that corner, is at least this much slower than the corner's own best (or does not fit there):
# smaller gaps are near-ties that the step-time model cannot resolve. ``ranges[].<corner>.layout_changes``
# still reports every change.
LAYOUT_FLIP_MIN_PENALTY = 0.01

ProgressFn = Callable[[str, int, int], None]  # (label, done, total)


def parse_gpus(text: str) -> list[int]:
    """``1024`` / ``1k`` / ``512,1024,2048`` / ``512..64Ki`` (doubling) -> sorted GPU counts (``units.COUNT_RULE``:
    ``1,024`` is refused as a thousands separator)."""
    try:
        vals = parse_count_list(text, "--gpus")
    except UnitError as exc:
        raise UsageError(str(exc)) from None
    if not vals or min(vals) < 1:
        raise UsageError(f"--gpus {text!r} must list positive GPU counts")
    return vals


_BIN = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def parse_global_batch(text: str, seq_len: int) -> int:
    """Global batch in sequences.

    A bare integer is sequences (``1024``); a number with a count suffix is tokens (``4M`` =
    4e6 tokens, ``128Mi`` = 2**27 tokens); ``tok``/``seq`` suffixes say it explicitly
    (``2048seq``, ``8388608tok``). Tokens must be a whole number of sequences.
    """
    t = text.strip().replace("_", "")
    m = re.fullmatch(r"([0-9]*\.?[0-9]+)\s*(Ki|Mi|Gi|Ti|[kKMGBT])?\s*(tok|tokens|seq|seqs|sequences)?", t)
    if not m:
        raise UsageError(
            f"cannot read --global-batch {text!r}: give sequences (1024), tokens with a suffix (4M, 128Mi) "
            "or an explicit unit (2048seq, 8388608tok)"
        )
    num, suf, unit = float(m.group(1)), m.group(2), m.group(3)
    value = num * (_BIN[suf] if suf in _BIN else parse_count("1" + suf) if suf else 1.0)
    is_tokens = unit in ("tok", "tokens") or (unit is None and suf is not None)
    if is_tokens:
        seqs = value / seq_len
        if abs(seqs - round(seqs)) > 1e-9 or round(seqs) < 1:
            lo, hi = max(1, math.floor(seqs)), max(1, math.ceil(seqs))
            near = " or ".join(f"{n} ({n * seq_len:,} tokens)" for n in sorted({lo, hi}))
            raise UsageError(
                f"--global-batch {text!r} is {value:,.0f} tokens = {seqs:,.2f} sequences of {seq_len:,} tokens, "
                "not a whole number",
                hint=f"give sequences: --global-batch {near}; or a power-of-two token count such as 4Mi",
            )
        return int(round(seqs))
    if abs(value - round(value)) > 1e-9 or value < 1:
        raise UsageError(f"--global-batch {text!r}: a number of sequences must be a positive integer")
    return int(round(value))



def _error_band(wl: Any) -> Any:
    """The bundled step-time error band for the workload's kind (``bands.band_for``; no stack input yet)."""
    from mi400plan.bands import band_for, read_bands

    return band_for(read_bands(), wl.model.moe is not None, None)


def _row(r: dict[str, Any], rank: int, sku: Sku, gpus: int, wl: Any, terms: Any, usable: float,
         train_tokens: float | None, cost: float | None) -> SweepRow:
    from mi400plan.pipeline import split_text
    from mi400plan.search import dp_tier, metrics, tier_of

    hw = sku.hw
    lay = SweepLayout.of_row(r)
    met = metrics(r["step"], wl, hw, gpus, terms, r["flops_hw_per_token"])
    tps = float(met["tokens_per_s"])
    days = cst = None
    if train_tokens:
        days = train_tokens / tps / DAY
        if cost is not None:
            cst = days * DAY / HOUR * gpus * cost
    tp, cp, fold, pp, ep, etp = r["tp"], r["cp"], r["fold"], r["pp"], r["ep"], r["etp"]
    dom = hw.domain
    inner = tp * cp * fold
    placement = Placement(
        tp=str(tier_of(tp, 1, dom)), cp=str(tier_of(cp, tp, dom)), ep=str(tier_of(ep, etp, dom)),
        pp=str(tier_of(pp, inner, dom)), dp=str(dp_tier(tp, cp, fold, pp, r["dp"], dom)),
    )
    band = _error_band(wl)
    return SweepRow(
        error_band=band.mean_abs if band else None, error_band_text=band.text() if band else None,
        rank=rank, sku=sku.name, gpus=gpus, layout=lay,
        pipeline_split=split_text(wl.model.num_layers, int(pp), int(r["vpp"]), int(r.get("split", 0))),
        stage_imbalance=float(r["stage_imbalance"]),
        replica_gpus=int(inner * pp),
        microbatches=int(round(r["m"])),
        memory_bytes=_memory(r, wl, hw),
        step_time_s=r["step"], compute_only_s=r["compute_only"],
        time_s=TimeBreakdown(**{k: r[f"t_{k}"] for k in TimeBreakdown.model_fields}),
        placement=placement, tokens_per_s=tps, mfu=float(met["mfu"]), hfu=float(met["hfu"]),
        days=days, cost_usd=cst, global_batch_seqs=int(wl.global_batch),
    )


def _memory(r: dict[str, Any], wl: Any, hw: Any) -> MemoryBytes:
    """Per-GPU memory of a search row as ``fit`` reports it: the reserve is the whole runtime reserve
    (fixed part + the capacity share, ``RuntimeReserve``), so ``total`` includes it and compares with
    the SKU's HBM capacity (``memory.train_memory`` leaves the capacity share to the caller)."""
    share = wl.recipe.reserve.fraction * hw.hbm_bytes
    frag = r.get("mem_fragmentation", 0.0)
    return MemoryBytes(
        weights=r["mem_weights"], gradients=r["mem_gradients"], optimizer=r["mem_optimizer"],
        activations=r["mem_activations"], offloaded=r.get("mem_offloaded", 0.0), reserve=r["mem_reserve"] + share,
        total=r["mem_total"] + share, capacity=hw.hbm_bytes, fragmentation=frag,
        verdict="tight" if r["mem_total"] + share > hw.hbm_bytes else "fits",
    )


# --- estimate ranges: corners, spans and flips ----------------------------------------------------


@record
class _AtCorner:
    """One listed layout evaluated at one corner (seconds, tokens/s, fraction, days, US dollars)."""

    step: float
    tokens_per_s: float
    mfu: float
    days: float | None
    cost: float | None
    fits: bool


_LAYOUT_KEYS = ("tp", "pp", "vpp", "cp", "ep", "etp", "zero", "micro_batch", "recompute", "sp")


def _days_cost(tps: float, gpus: int, train_tokens: float | None, cost: float | None) -> tuple[float | None, float | None]:
    """Days to train ``train_tokens`` at ``tps`` tokens/s; dollars = GPU-hours x ``cost`` $/GPU-hour."""
    if not train_tokens or tps <= 0:
        return None, None
    days = train_tokens / tps / DAY
    return days, (days * DAY / HOUR * gpus * cost if cost is not None else None)


def _at_corners(r: dict[str, Any], corners: dict[str, Sku], wl: Any, terms: Any, gpus: int, opts: Any,
                train_tokens: float | None, cost: float | None) -> dict[str, _AtCorner]:
    """The layout of search row ``r`` re-evaluated on each corner's hardware (``search.evaluate_one``)."""
    from mi400plan.search import evaluate_one, metrics

    lay = {k: int(r[k]) for k in _LAYOUT_KEYS}
    out = {}
    for c, csku in corners.items():
        ev = evaluate_one(lay, wl, csku.hw, gpus, opts)
        met = metrics(ev["step"], wl, csku.hw, gpus, terms, ev["flops_hw_per_token"])
        tps = float(met["tokens_per_s"])
        days, cst = _days_cost(tps, gpus, train_tokens, cost)
        out[c] = _AtCorner(float(ev["step"]), tps, float(met["mfu"]), days, cst, bool(ev["fits"]))
    return out


def _span(nominal: float | None, pess: float | None, opt: float | None, *, up_is_worse: bool = False) -> Span:
    """``low``/``high`` = min/max of the two corner values; a missing corner leaves its own side empty
    (the pessimistic side is ``high`` when larger is worse, as for step time and days)."""
    if pess is not None and opt is not None:
        return Span(nominal=nominal, low=min(pess, opt), high=max(pess, opt))
    lo, hi = (opt, pess) if up_is_worse else (pess, opt)
    return Span(nominal=nominal, low=lo, high=hi)


def _maybe_span(nominal: float | None, pess: float | None, opt: float | None, **kw: Any) -> Span | None:
    return None if nominal is None and pess is None and opt is None else _span(nominal, pess, opt, **kw)


def _row_range(row: SweepRow, a: dict[str, _AtCorner]) -> RowRange:
    p, o = a["pessimistic"], a["optimistic"]
    return RowRange(
        step_time_s=_span(row.step_time_s, p.step, o.step, up_is_worse=True),
        tokens_per_s=_span(row.tokens_per_s, p.tokens_per_s, o.tokens_per_s),
        mfu=_span(row.mfu, p.mfu, o.mfu),
        days=_maybe_span(row.days, p.days, o.days, up_is_worse=True),
        cost_usd=_maybe_span(row.cost_usd, p.cost, o.cost, up_is_worse=True),
        fits_low_capacity=p.fits,
        fits_high_capacity=o.fits,
    )


def _inputs(hw: Any) -> CornerInputs:
    return CornerInputs(
        peak_flops=hw.peak_flops, matmul=hw.matmul_eff, hbm_bytes=hw.hbm_bytes, hbm_bw_bytes_per_s=hw.hbm_bw,
        hbm_efficiency=hw.hbm_eff, gemm_overhead_s=hw.gemm_overhead_s,
        scale_up_bw_per_dir_bytes_per_s=hw.scale_up.bw_per_dir, scale_up_latency_s=hw.scale_up.latency,
        scale_up_efficiency=hw.scale_up.efficiency, scale_out_bw_per_dir_bytes_per_s=hw.scale_out.bw_per_dir,
        scale_out_latency_s=hw.scale_out.latency, scale_out_efficiency=hw.scale_out.efficiency,
    )


def _sku_range(sku: Sku, corners: dict[str, Sku], gpus: int, best: SweepRow | None, best_at: dict[str, _AtCorner] | None,
               cbest: dict[str, SweepRow | None], eff: float | None, eff_c: dict[str, float | None],
               scaling_view: bool) -> SkuRange:
    rack = sku.hw.gpus_per_rack

    def corner(c: str) -> CornerBest:
        r = cbest[c]
        at = best_at[c] if best_at else None
        return CornerBest(
            corner=c, inputs=_inputs(corners[c].hw),
            layout=r.layout if r else None, layout_text=layout_text(r.layout) if r else None,
            step_time_s=r.step_time_s if r else None, tokens_per_s=r.tokens_per_s if r else None,
            tokens_per_s_per_gpu=r.tokens_per_s / gpus if r else None,
            tokens_per_s_per_rack=r.tokens_per_s / gpus * rack if r else None,
            mfu=r.mfu if r else None, days=r.days if r else None, cost_usd=r.cost_usd if r else None,
            layout_changes=(best is not None) and (r is None or r.layout != best.layout),
            nominal_layout_step_time_s=at.step if at else None, nominal_layout_fits=at.fits if at else None,
        )

    p, o = corner("pessimistic"), corner("optimistic")
    nom_tps = best.tokens_per_s if best else None
    per_gpu = nom_tps / gpus if nom_tps is not None else None
    return SkuRange(
        sku=sku.name, gpus=gpus, varied=list(sku.varied),
        step_time_s=_span(best.step_time_s if best else None, p.step_time_s, o.step_time_s, up_is_worse=True),
        tokens_per_s=_span(nom_tps, p.tokens_per_s, o.tokens_per_s),
        tokens_per_s_per_gpu=_span(per_gpu, p.tokens_per_s_per_gpu, o.tokens_per_s_per_gpu),
        tokens_per_s_per_rack=_span(per_gpu * rack if per_gpu is not None else None,
                                    p.tokens_per_s_per_rack, o.tokens_per_s_per_rack),
        mfu=_span(best.mfu if best else None, p.mfu, o.mfu),
        days=_maybe_span(best.days if best else None, p.days, o.days, up_is_worse=True),
        cost_usd=_maybe_span(best.cost_usd if best else None, p.cost_usd, o.cost_usd, up_is_worse=True),
        scaling_efficiency=(_span(eff, eff_c.get("pessimistic"), eff_c.get("optimistic")) if scaling_view else None),
        pessimistic=p, optimistic=o,
    )


def _size_flips(sr: SkuRange, best: SweepRow | None, wl: Any, corners: dict[str, Sku], cap_nom: float) -> list[SweepFlip]:
    """Best-layout and fit flips of one SKU at one GPU count."""
    from mi400plan.search import usable_hbm

    out: list[SweepFlip] = []
    where = f"{sr.sku} x {sr.gpus:,} GPUs"
    if best is None:
        o = sr.optimistic
        if o.layout is not None:
            out.append(SweepFlip(
                kind="fit", sku=sr.sku, gpus=sr.gpus, corner="optimistic",
                detail=f"{where}: no layout fits at nominal, but {o.layout_text} fits at the optimistic corner "
                f"of the estimate ranges ({fmt_bytes(o.inputs.hbm_bytes, binary=False)} HBM)",
            ))
        return out
    nom = layout_text(best.layout)
    p = sr.pessimistic
    if p.nominal_layout_fits is False:
        cap_lo = corners["pessimistic"].hw.hbm_bytes
        usable_lo = usable_hbm(wl, corners["pessimistic"].hw)
        there = (f"the best layout that fits there is {p.layout_text} ({fmt_time(p.step_time_s, 2)} per step)"
                 if p.layout is not None else "no layout fits there")

        def gb(x: float) -> str:
            return fmt_bytes(x, binary=False)

        out.append(SweepFlip(
            kind="fit", sku=sr.sku, gpus=sr.gpus, corner="pessimistic",
            detail=f"{where}: the best layout {nom} needs {gb(best.memory_bytes.total)} per GPU (runtime reserve "
            f"included): it {'is tight on' if best.memory_bytes.verdict == 'tight' else 'fits'} the nominal "
            f"{gb(cap_nom)} HBM but not the low-end {gb(cap_lo)} "
            f"({gb(usable_lo)} after the capacity share of the reserve); {there}",
        ))
    for c in CORNERS:
        cb = getattr(sr, c)
        if not cb.layout_changes or cb.layout is None:
            continue
        if cb.nominal_layout_fits is False:
            why = "does not fit there"
        elif cb.nominal_layout_step_time_s is not None and cb.step_time_s:
            slower = cb.nominal_layout_step_time_s / cb.step_time_s - 1.0
            if slower < LAYOUT_FLIP_MIN_PENALTY:
                continue
            why = f"takes {fmt_time(cb.nominal_layout_step_time_s, 2)} there ({fmt_pct(slower, 1)} slower)"
        else:
            why = "is not evaluated there"
        out.append(SweepFlip(
            kind="best_layout", sku=sr.sku, gpus=sr.gpus, corner=c,
            detail=f"{where}: the best layout changes at the {c} corner of the estimate ranges: {cb.layout_text} "
            f"({fmt_time(cb.step_time_s, 2)} per step) instead of {nom}, which {why}",
        ))
    return out


_METRICS = (
    ("time_to_train", "tokens_per_s", "time to train", lambda v: f"{fmt_count(v)} tokens/s"),
    ("tokens_per_s_per_gpu", "tokens_per_s_per_gpu", "tokens/s per GPU", lambda v: f"{v:,.0f} tokens/s per GPU"),
    ("tokens_per_s_per_rack", "tokens_per_s_per_rack", "tokens/s per rack", lambda v: f"{fmt_count(v)} tokens/s per rack"),
)
_CORNER_TEXT = {
    "pessimistic": "when both are at the pessimistic corner of their estimate ranges",
    "optimistic": "when both are at the optimistic corner of their estimate ranges",
}


def ranking_flips(sku_ranges: list[SkuRange], groups: list[int] | None = None) -> list[SweepFlip]:
    """SKU pairs whose order reverses inside the ranges, per GPU count and metric (higher is better).

    For a pair where ``a`` leads at nominal, the corners tried are both pessimistic, both
    optimistic, and ``mixed`` (``a`` pessimistic, ``b`` optimistic: the widest reading, since the two
    SKUs' estimates are independent). A corner where no layout fits counts as zero throughput.
    ``groups`` says which entries are compared (same ``--gpus`` value or the same ``--racks``);
    by default entries with equal GPU counts.
    Metrics that flip at the same corner for the same pair (time to train and per-GPU throughput at
    equal GPU counts) are reported once, with both names.
    """
    by_size: dict[int, list[SkuRange]] = {}
    for i, sr in enumerate(sku_ranges):
        by_size.setdefault(groups[i] if groups is not None else sr.gpus, []).append(sr)
    out: list[SweepFlip] = []
    for group in by_size.values():
        for i, a in enumerate(group):
            for b in group[i + 1:]:
                found: dict[tuple[str, str, str], list[tuple[str, str, Any, Any, Any, Any, Any]]] = {}
                for key, field, label, fmt in _METRICS:
                    sa, sb = getattr(a, field), getattr(b, field)
                    if sa.nominal is None or sb.nominal is None or sa.nominal == sb.nominal:
                        continue
                    lead, lag, sl, sg = (a, b, sa, sb) if sa.nominal > sb.nominal else (b, a, sb, sa)
                    pl, ol = _corner_vals(lead, field)
                    pg, og = _corner_vals(lag, field)
                    for corner, vl, vg in (("pessimistic", pl, pg), ("optimistic", ol, og), ("mixed", pl, og)):
                        if vg > vl:
                            found.setdefault((lead.sku, lag.sku, corner), []).append((key, label, fmt, sl.nominal, sg.nominal, vl, vg))
                            break
                for (lead_n, lag_n, corner), hits in found.items():
                    key = ",".join(h[0] for h in hits)
                    labels = " and ".join(h[1] for h in hits)
                    _, _, fmt, nl, ng, vl, vg = hits[0]
                    when = _CORNER_TEXT.get(corner, f"with {lead_n} at the pessimistic and {lag_n} at the optimistic "
                                                    "corner of their estimate ranges")
                    g_lead = a.gpus if a.sku == lead_n else b.gpus
                    g_lag = b.gpus if a.sku == lead_n else a.gpus
                    where = f"{g_lead:,} GPUs" if g_lead == g_lag else f"{lead_n} x {g_lead:,} vs {lag_n} x {g_lag:,} GPUs"
                    out.append(SweepFlip(
                        kind="ranking", sku=lead_n, other_sku=lag_n, gpus=g_lead, corner=corner, metric=key,
                        detail=f"{where}: the SKU ranking by {labels} flips inside the estimate ranges: {lead_n} "
                        f"leads {lag_n} at nominal ({fmt(nl)} vs {fmt(ng)}) but {lag_n} leads {when} "
                        f"({fmt(vg)} vs {fmt(vl)})",
                    ))
    return out


def _corner_vals(sr: SkuRange, field: str) -> tuple[float, float]:
    """(pessimistic, optimistic) best-layout value of ``field``; 0 where no layout fits."""
    return tuple(getattr(getattr(sr, c), field) or 0.0 for c in CORNERS)  # type: ignore[return-value]


def _scaling_flips(below: dict[str, int | None], below_c: dict[str, dict[str, int | None]]) -> list[SweepFlip]:
    """The GPU count where scaling efficiency first drops below 90% moves at a corner."""
    out = []

    def txt(v: int | None) -> str:
        return f"from {v:,} GPUs" if v else "never (stays >= 90%)"

    for sku, nom in below.items():
        for c, v in below_c.get(sku, {}).items():
            if v != nom:
                out.append(SweepFlip(
                    kind="scaling", sku=sku, corner=c, gpus=v,
                    detail=f"{sku}: scaling efficiency drops below {SCALING_THRESHOLD:.0%} {txt(nom)} at nominal but "
                    f"{txt(v)} at the {c} corner of the estimate ranges",
                ))
    return out


def planned_search(wl0: Any, law: BatchLaw, pinned: bool, hw: Any, size: int, opts: Any, top: int,
                   progress: Callable[[int, int], None] | None, pareto: bool) -> tuple[Any, Any, BatchChoice]:
    """The search at the global batch for ``size`` GPUs: ``wl0``'s when ``pinned``; otherwise the
    first of ``law.candidates`` (``batch.batch_law``: from the one nearest the law's optimum up to its
    bound) whose best layout fills its pipeline (``batch.pipeline_starved``), or, when none does,
    the candidate with the most tokens/s. Returns (search result, its workload, the choice)."""
    from dataclasses import replace

    from mi400plan.batch import pipeline_starved
    from mi400plan.search import search

    batches = [wl0.global_batch] if pinned else list(law.candidates)
    best: tuple[float, Any, Any] | None = None
    tried: list[int] = []
    for gb in batches:
        wl = replace(wl0, global_batch=gb)
        res = search(wl, hw, size, opts, top_k=top, progress=progress, pareto=pareto)
        tried.append(gb)
        row = _first_row(res)
        tps = -1.0 if row is None else gb * wl.seq_len / row["step"]
        if best is None or tps > best[0]:
            best = (tps, res, wl)
        if row is not None and not pipeline_starved(row["pp"], row["vpp"], int(round(row["m"]))):
            best = (tps, res, wl)
            break
    assert best is not None
    _, res, wl = best
    return res, wl, _choice(res, wl, hw.name, size, tried)


def _first_row(res: Any) -> dict[str, Any] | None:
    from mi400plan.search import iter_rows

    return next(iter_rows(res.top), None)


def _choice(res: Any, wl: Any, sku: str, size: int, tried: list[int]) -> BatchChoice:
    """The batch ``wl`` ran at on ``size`` GPUs and its best layout's pipeline fill."""
    from mi400plan.batch import bubble_fraction, pipeline_starved

    row = _first_row(res)
    gb = int(wl.global_batch)
    out = BatchChoice(sku=sku, gpus=size, global_batch_seqs=gb, global_batch_tokens=gb * wl.seq_len, tried_seqs=tried)
    if row is None:
        return out
    m, pp, vpp = int(round(row["m"])), int(row["pp"]), int(row["vpp"])
    return out.model_copy(update={"microbatches": m, "pp": pp, "vpp": vpp,
                                  "bubble_fraction": bubble_fraction(pp, vpp, m),
                                  "starved": pipeline_starved(pp, vpp, m)})


def _idle_warning(c: BatchChoice, pinned: bool) -> str | None:
    from mi400plan.batch import idle_warning

    if c.microbatches is None or c.pp is None or c.vpp is None:
        return None
    return idle_warning(f"{c.sku} x {c.gpus:,} GPUs", c.global_batch_seqs, c.pp, c.vpp, c.microbatches, pinned)


def batch_plan(law: BatchLaw, pinned: bool, choices: list[BatchChoice]) -> BatchPlan:
    """The ``batch`` block of a sweep result: the law's numbers, the rule in words, the choices."""
    from mi400plan.batch import BOUND_FACTOR, BUBBLE_LIMIT, LAW

    d = f"{law.train_tokens:.3g} tokens" + (" (assumed: 20 per active parameter, Chinchilla)" if law.tokens_assumed else "")
    rule = ("pinned by --global-batch" if pinned else f"planned: {law.rule}" if law.rule else
            f"planned: the largest batch of 2^k or 3 x 2^k sequences at or below the bound B_opt = "
            f"{fmt_count(law.b_opt_tokens)} tokens (C = {law.compute_flops:.3g} FLOPs for {d}); each size's best "
            f"layout checked for pipeline fill (micro-batches >= stages, bubble <= {BUBBLE_LIMIT:.0%} of compute)")
    return BatchPlan(
        pinned=pinned, rule=rule, law="" if law.rule else LAW, flops_per_token=law.flops_per_token, train_tokens=law.train_tokens,
        tokens_assumed=law.tokens_assumed, compute_flops=law.compute_flops, b_opt_tokens=law.b_opt_tokens,
        bound_tokens=law.bound_tokens, bound_factor=BOUND_FACTOR, bubble_limit=BUBBLE_LIMIT, chosen=choices,
    )


def pin_options(pins: dict[str, list[int]] | None) -> dict[str, tuple[int, ...]]:
    """``--tp 8,16 --recompute full ...`` as ``search.SearchOptions`` keyword arguments (the values the
    search may use); an empty list pins nothing."""
    out: dict[str, tuple[int, ...]] = {}
    for k, v in (pins or {}).items():
        if v:
            if any(int(x) < 0 for x in v):
                raise UsageError(f"--{k.replace('_', '-')} values must be non-negative")
            out[k] = tuple(int(x) for x in v)
    return out


@record
class SweepReport:
    """What a sweep returns and writes: the ``top`` layouts per SKU and size, the estimate-range corners
    (``ranges``), the Pareto front (``pareto``), and the best layout saved as a plan file (``save``,
    replacing an existing file only with ``overwrite``)."""

    top: int = 5
    ranges: bool = True
    pareto: bool = False
    save: str | None = None
    overwrite: bool = False


@record
class _Ctx:
    """One sweep's inputs, parsed and checked, shared by every SKU and size."""

    cat: Any
    spec: Any
    seq: int
    train_tokens: float | None
    topts: Any  # specs.layout.TrainOptions
    terms: Any
    law: BatchLaw
    pinned: int | None
    wl0: Any
    opts: Any  # search.SearchOptions
    pricing: Pricing
    site_prof: Any
    site_v: Any
    report: SweepReport
    progress: ProgressFn | None


@record(frozen=False)
class _Acc:
    """What the sweep collects over SKUs and sizes."""

    rows: list[SweepRow] = field(default_factory=list)
    summaries: list[SkuSummary] = field(default_factory=list)
    scaling: list[ScalingPoint] = field(default_factory=list)
    below: dict[str, int | None] = field(default_factory=dict)
    below_c: dict[str, dict[str, int | None]] = field(default_factory=dict)
    crossing: list[SweepRow] = field(default_factory=list)
    inside: list[SweepRow] = field(default_factory=list)
    front: list[SweepRow] = field(default_factory=list)  # with pareto: non-dominated layouts per SKU and GPU count
    no_layout: list[NoLayout] = field(default_factory=list)
    sku_ranges: list[SkuRange] = field(default_factory=list)
    range_groups: list[int] = field(default_factory=list)  # SKUs compared at the same position
    flips: list[SweepFlip] = field(default_factory=list)
    choices: list[BatchChoice] = field(default_factory=list)
    energy: list[Any] = field(default_factory=list)
    totals: list[Any] = field(default_factory=list)  # the best layout's totals per SKU (single-size sweeps)
    warnings: list[str] = field(default_factory=list)
    evaluated: int = 0
    valid: int = 0
    rejected: dict[str, int] = field(default_factory=dict)


def _context(cat: Any, model: str, skus: list[str], gpus: str | None, racks: int | None, global_batch: str | None,
             seq_len: int | None, tokens: str | None, options: Any, pins: dict[str, list[int]] | None,
             pricing: Pricing, report: SweepReport, progress: ProgressFn | None) -> _Ctx:
    """Check the inputs and build what every SKU's search shares (workload, batch law, search options)."""
    from mi400plan.batch import law_for
    from mi400plan.params import count_params
    from mi400plan.search import SearchOptions, Workload, model_terms
    from mi400plan.specs.layout import TrainOptions

    topts = options or TrainOptions()
    if not skus:
        raise UsageError("give at least one --sku")
    if report.save and Path(report.save).exists() and not report.overwrite:
        # Checked before the search: a user's existing file is never replaced without being asked.
        raise UsageError(f"plan file {report.save!r} already exists",
                         hint="pass --force to replace it, or choose another path")
    if report.save:
        _check_save_target(report.save)
    if topts.precision not in PRECISIONS:
        raise UsageError(f"unknown --precision {topts.precision!r}; choose from {', '.join(PRECISIONS)}")
    if report.top < 1:
        raise UsageError("--top must be at least 1")
    if (gpus is None) == (racks is None):
        raise UsageError("give exactly one of --gpus or --racks")
    spec = cat.get("models", model).spec
    counts = count_params(spec)
    seq = int(seq_len) if seq_len else min(spec.max_seq_len, DEFAULT_SEQ_CAP)
    if seq < 1:
        raise UsageError("--seq must be positive")
    train_tokens = None
    if tokens:
        try:
            train_tokens = parse_count(tokens)
        except UnitError as exc:
            raise UsageError(f"cannot read --tokens {tokens!r}: {exc}") from None
    cost = pricing.gpu_hour_cost
    if cost is not None and not (math.isfinite(cost) and cost > 0):
        raise UsageError(f"--gpu-hour-cost must be a price above 0, got {cost:g}")
    site_prof = site_v = None
    if train_tokens:
        from mi400plan.cost import load_site

        site_prof, site_v, _ = load_site(cat, pricing.site, pricing.overrides)
    recipe = topts.train_recipe()
    terms = model_terms(spec, counts, seq, recipe)
    law = law_for(terms.flops_layers, seq, train_tokens, counts.active, recipe)
    pinned = parse_global_batch(global_batch, seq) if global_batch else None
    wl0 = Workload(spec, counts, recipe, seq, pinned or law.start_seqs)
    pin_kw = pin_options(pins)
    _recompute_pins_agree(pin_kw.get("recompute"), topts)
    opts = SearchOptions(**topts.search_flags(), **pin_kw)
    return _Ctx(cat, spec, seq, train_tokens, topts, terms, law, pinned, wl0, opts, pricing, site_prof, site_v,
                report, progress)


def _corner_bests(ctx: _Ctx, sku: Sku, corners: dict[str, Sku], size: int, wl: Any, sku_cost: float | None) -> dict[str, SweepRow | None]:
    """The best layout of each estimate-range corner of ``sku`` on ``size`` GPUs (its own search)."""
    from mi400plan.search import iter_rows, search, usable_hbm

    cbest: dict[str, SweepRow | None] = {}
    for c, csku in corners.items():
        clabel = f"{sku.name} x {size} ({c} corner)"
        ccb = (lambda d, n, _l=clabel: ctx.progress(_l, d, n)) if ctx.progress else None  # type: ignore[misc]
        cres = search(wl, csku.hw, size, ctx.opts, top_k=1, progress=ccb)
        crow = next(iter_rows(cres.top), None)
        cbest[c] = None if crow is None else _row(
            crow, 1, csku, size, wl, ctx.terms, usable_hbm(wl, csku.hw), ctx.train_tokens, sku_cost)
    return cbest


@record(frozen=False)
class _Scaling:
    """One SKU's scaling bookkeeping over its sizes: tokens/s per GPU at the first size with a layout
    (nominal and per corner)."""

    base: float | None = None
    base_c: dict[str, float | None] = field(default_factory=dict)


def _sweep_size(ctx: _Ctx, acc: _Acc, sku: Sku, corners: dict[str, Sku], size: int, sizes: list[int],
                sku_cost: float | None, sc: _Scaling, group: int) -> None:
    """Search ``sku`` on ``size`` GPUs and add its rows, comparison, scaling point, corners and energy."""
    from mi400plan.search import iter_rows, usable_hbm

    label = f"{sku.name} x {size}"
    cb = (lambda d, n, _l=label: ctx.progress(_l, d, n)) if ctx.progress else None  # type: ignore[misc]
    rep, tt, terms = ctx.report, ctx.train_tokens, ctx.terms
    res, wl, choice = planned_search(ctx.wl0, ctx.law, ctx.pinned is not None, sku.hw, size, ctx.opts, rep.top, cb,
                                     rep.pareto)
    usable = usable_hbm(ctx.wl0, sku.hw)
    acc.choices.append(choice)
    if (w := _idle_warning(choice, ctx.pinned is not None)) is not None:
        acc.warnings.append(w)
    acc.evaluated += res.evaluated
    acc.valid += res.valid
    for k, v in res.rejected.items():
        acc.rejected[k] = acc.rejected.get(k, 0) + v
    raw = list(iter_rows(res.top))
    these = [_row(r, i + 1, sku, size, wl, terms, usable, tt, sku_cost) for i, r in enumerate(raw)]
    at_c: list[dict[str, _AtCorner]] = []
    if corners:
        at_c = [_at_corners(r, corners, wl, terms, size, ctx.opts, tt, sku_cost) for r in raw]
        these = [t.model_copy(update={"range": _row_range(t, a)}) for t, a in zip(these, at_c)]
    acc.rows.extend(these)
    if res.front is not None:
        acc.front.extend(_row(r, i + 1, sku, size, wl, terms, usable, tt, sku_cost)
                         for i, r in enumerate(iter_rows(res.front)))
    best = these[0] if these else None
    if best is not None and len(sizes) == 1:
        from mi400plan.api.totals import plan_totals

        acc.totals.append(plan_totals(raw[0], wl, terms, sku.name, size, layout_text(best.layout), tt))
    if best is None:
        near = nearest_working_sizes(wl, sku.hw, size, ctx.opts)
        acc.no_layout.append(NoLayout(sku=sku.name, gpus=size, why=_why(res.rejected), nearest_gpus=near))
        acc.warnings.append(f"{sku.name} on {size} GPUs: no layout is valid and fits ({_why(res.rejected)})"
                            + (f"; nearest GPU counts that work: {' and '.join(f'{n:,}' for n in near)}" if near else ""))
    if len(sizes) == 1 and best is not None:
        # The fastest layouts on either side of the scale-up-domain boundary, for the comparison.
        if res.best_crossing is not None:
            cr = next(iter_rows(res.best_crossing))
            acc.crossing.append(_row(cr, 0, sku, size, wl, terms, usable, tt, sku_cost))
        if res.best_inside is not None:
            ins = next(iter_rows(res.best_inside))
            acc.inside.append(_row(ins, 0, sku, size, wl, terms, usable, tt, sku_cost))
    per_gpu = best.tokens_per_s / size if best else None
    if per_gpu is not None and sc.base is None:
        sc.base = per_gpu
    eff = (per_gpu / sc.base) if (per_gpu is not None and sc.base) else None
    is_below = eff is not None and eff < SCALING_THRESHOLD
    if is_below and acc.below[sku.name] is None:
        acc.below[sku.name] = size
    if corners:
        _corner_range(ctx, acc, sku, corners, size, sizes, wl, sku_cost, sc, best, at_c, eff, group)
    if ctx.site_prof is not None and best is not None and best.days is not None:
        from mi400plan.cost import run_energy

        ren, ew = run_energy(ctx.cat, sku.name, size, best.days * DAY / HOUR * size, ctx.site_prof, ctx.site_v,
                             ctx.pricing.gpu_hour_cost)
        acc.energy.append(ren)
        acc.warnings.extend(w for w in ew if w not in acc.warnings)
    acc.scaling.append(ScalingPoint(
        sku=sku.name, gpus=size, layout=layout_text(best.layout) if best else None,
        step_time_s=best.step_time_s if best else None, tokens_per_s=best.tokens_per_s if best else None,
        tokens_per_s_per_gpu=per_gpu, mfu=best.mfu if best else None, scaling_efficiency=eff,
        below_90=is_below,
        per_replica_batch_tokens=(wl.global_batch * ctx.seq * best.replica_gpus / size) if best else None,
        days=best.days if best else None,
    ))
    acc.summaries.append(SkuSummary(
        sku=sku.name, gpus=size, step_time_s=best.step_time_s if best else None,
        tokens_per_s=best.tokens_per_s if best else None, tokens_per_s_per_gpu=per_gpu,
        tokens_per_s_per_rack=(per_gpu * sku.hw.gpus_per_rack) if per_gpu is not None else None,
        gpus_per_rack=sku.hw.gpus_per_rack, mfu=best.mfu if best else None,
        days=best.days if best else None, cost_usd=best.cost_usd if best else None,
        layout=layout_text(best.layout) if best else None,
    ))


def _corner_range(ctx: _Ctx, acc: _Acc, sku: Sku, corners: dict[str, Sku], size: int, sizes: list[int], wl: Any,
                  sku_cost: float | None, sc: _Scaling, best: SweepRow | None, at_c: list[dict[str, _AtCorner]],
                  eff: float | None, group: int) -> None:
    """The corners' own best layouts and scaling, the SKU's range and the conclusions that flip in it."""
    cbest = _corner_bests(ctx, sku, corners, size, wl, sku_cost)
    eff_c: dict[str, float | None] = {}
    for c, r_c in cbest.items():
        pg = r_c.tokens_per_s / size if r_c else None
        if pg is not None and sc.base_c[c] is None:
            sc.base_c[c] = pg
        eff_c[c] = (pg / sc.base_c[c]) if (pg is not None and sc.base_c[c]) else None
        if eff_c[c] is not None and eff_c[c] < SCALING_THRESHOLD and acc.below_c[sku.name][c] is None:
            acc.below_c[sku.name][c] = size
    sr = _sku_range(sku, corners, size, best, at_c[0] if at_c else None, cbest, eff, eff_c, len(sizes) > 1)
    acc.sku_ranges.append(sr)
    acc.range_groups.append(group)
    acc.flips.extend(_size_flips(sr, best, wl, corners, sku.hw.hbm_bytes))


def _sweep_sku(ctx: _Ctx, acc: _Acc, sku: Sku, corners: dict[str, Sku], gpus: str | None, racks: int | None) -> None:
    """Every size of one SKU."""
    sku_cost = ctx.pricing.gpu_hour_cost
    if sku_cost is None and ctx.site_prof is not None:
        from mi400plan.cost import model_gpu_hour_cost

        sku_cost = model_gpu_hour_cost(ctx.cat, sku.name, ctx.site_prof, ctx.site_v)
    sizes = parse_gpus(gpus) if gpus is not None else [int(racks) * sku.hw.gpus_per_rack]  # type: ignore[arg-type]
    if racks is not None and racks < 1:
        raise UsageError("--racks must be at least 1")
    acc.below[sku.name] = None
    sc = _Scaling(base_c={c: None for c in corners})
    if corners:
        acc.below_c[sku.name] = {c: None for c in corners}
    for size in sizes:
        # SKUs are compared at the same position: the same --gpus value, or the same --racks.
        _sweep_size(ctx, acc, sku, corners, size, sizes, sku_cost, sc, size if gpus is not None else 0)


def _result(ctx: _Ctx, acc: _Acc, skus: list[str], built: list[Sku], missing: list[SkuSummary],
            gpus: str | None) -> SweepResult:
    """The result: the SKU comparison, efficiency warnings, range flips, batch plan, and the saved plan."""
    from mi400plan.search import RULES, TIE_BREAK

    topts, rows, warnings = ctx.topts, acc.rows, acc.warnings
    summaries, scaling, flips = acc.summaries, acc.scaling, acc.flips
    for m in missing:
        warnings.append(f"{m.missing} (n/d in the SKU comparison)")
        summaries.extend(m.model_copy(update={"gpus": g}) for g in (parse_gpus(gpus) if gpus is not None else [0]))
    best_pg = max((s.tokens_per_s_per_gpu or 0.0) for s in summaries) if summaries else 0.0
    summaries = [s.model_copy(update={"relative": (s.tokens_per_s_per_gpu / best_pg) if (s.tokens_per_s_per_gpu and best_pg) else None}) for s in summaries]
    for e in built:
        if e.eff.matmul_status in ("assumed", "estimate", "unverified", "conflict"):
            warnings.append(
                f"{e.name}: matmul efficiency {e.eff.matmul:.2f} is {e.eff.matmul_status} ({e.eff.matmul_source or 'see the profile note'}); "
                "override with --matmul-efficiency from your own measurement"
            )
    if ctx.report.ranges:
        if len(built) > 1:
            flips.extend(ranking_flips(acc.sku_ranges, acc.range_groups))
        if len(scaling) > len(built):
            flips.extend(_scaling_flips(acc.below, acc.below_c))
        warnings.extend(f.detail for f in flips)
    gb = ctx.wl0.global_batch
    gb = rows[0].global_batch_seqs or gb if rows else gb
    seq, site_prof, multi = ctx.seq, ctx.site_prof, len(scaling) > len(built)
    result = SweepResult(
        model=ctx.spec.name, precision=topts.precision, seq_len=seq, global_batch_seqs=gb, global_batch_tokens=gb * seq,
        train_tokens=ctx.train_tokens, gpu_hour_cost=ctx.pricing.gpu_hour_cost, tie_break=TIE_BREAK,
        overlap={"tp": topts.overlap_tp, "ep": topts.overlap_ep, "pp": topts.overlap_pp, "cp": topts.overlap_cp,
                 "dp": topts.overlap_dp},
        split_embedding_loss=topts.split_embedding_loss, finetune=finetune_text(topts),
        packing=options_packing_text(topts, seq),
        evaluated=acc.evaluated, valid=acc.valid, rejected=acc.rejected, rejected_rules=dict(RULES), rows=rows,
        skus=summaries if len(skus) > 1 else [], scaling=scaling if multi else [],
        scaling_below_90_at=acc.below if multi else {},
        efficiencies=[b.eff for b in built], rack_crossing=acc.crossing, domain_inside=acc.inside, warnings=warnings,
        ranges_checked=ctx.report.ranges, ranges=acc.sku_ranges, flips=flips,
        scaling_below_90_at_corners=acc.below_c if multi else {},
        energy=acc.energy, site=None if site_prof is None else site_prof.name, pareto=acc.front,
        pareto_checked=ctx.report.pareto, no_layout=acc.no_layout,
    )
    result = result.model_copy(update={"totals": acc.totals,
                                       "batch": batch_plan(ctx.law, ctx.pinned is not None, acc.choices)})
    if ctx.report.save:
        if not rows:
            raise UsageError("nothing to save: no layout is valid and fits")
        write_plan(ctx.report.save, rows[0], ctx.spec.name, gb, seq, topts.precision, topts,
                   replace=ctx.report.overwrite)
        result = result.model_copy(update={"saved_plan": str(ctx.report.save)})
    return result


def sweep(
    cat: Any,
    model: str,
    skus: list[str],
    *,
    gpus: str | None = None,
    racks: int | None = None,
    global_batch: str | None = None,
    seq_len: int | None = None,
    tokens: str | None = None,
    options: Any = None,
    pins: dict[str, list[int]] | None = None,
    sku_overrides: SkuOverrides | None = None,
    pricing: Pricing | None = None,
    report: SweepReport | None = None,
    progress: ProgressFn | None = None,
) -> SweepResult:
    """Run the layout search. See ``mi400plan sweep --help`` for the meaning of each input.

    ``options`` (``specs.layout.TrainOptions``, the object ``fit`` takes too) carries the whole
    training recipe, the step-time model switches included (``search.SearchOptions``, where each is
    documented with its source): ``overlap_tp`` / ``overlap_ep`` hide TP/SP collectives / the EP
    all-to-all behind the GEMMs (off: exposed); ``overlap_pp`` (on, Megatron-LM's default
    ``overlap_p2p_comm``) hides the interleaved schedule's pipeline sends and receives behind the next
    chunk's compute except the ``2 (pp - 1)`` fill/drain transfers (VPP 1: always exposed);
    ``overlap_cp`` (on, ring attention) hides CP key/value exchanges behind attention compute (off:
    Llama 3's exposed all-gather CP); ``split_embedding_loss`` counts the embedding and the loss as one
    layer each in the pipeline split, so PP x VPP may divide layers + 2 (Megatron-Core
    ``--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split``). ``grad_dtype``
    (``fp32`` by default, the ``megatron`` recipe's main grads, which Megatron-LM reduces in fp32 for
    BF16/FP8 training; ``bf16`` as with ``--grad-reduce-in-bf16``) sets the gradient bytes of the memory
    model and of the DP reduction. ``sku_overrides`` (``hardware.SkuOverrides``) holds measured values
    that replace the SKU profiles'.

    With ``report.ranges`` (the default) each SKU is also searched at the pessimistic and optimistic
    corners of its estimate ranges (``build_sku(case=...)``), the listed layouts are evaluated there,
    and conclusions that change inside the ranges are reported in ``flips`` and ``warnings``.

    With ``tokens``, each SKU's best layout also gets the run's energy, emissions and cost
    (``cost.run_energy``): wall power from the SKU's cost profile at ``pricing.site`` (default
    ``us-2025``, with ``pricing.overrides``), and the cost model's all-in cost per GPU-hour when no
    ``pricing.gpu_hour_cost`` is given.
    """
    rep, ov = report or SweepReport(), sku_overrides or SkuOverrides()
    options, fp8_note = _stack_fp8(cat, skus, options)
    ctx = _context(cat, model, skus, gpus, racks, global_batch, seq_len, tokens, options, pins,
                   pricing or Pricing(), rep, progress)
    precision, offload = ctx.topts.precision, ctx.topts.offload_layers > 0
    stack_req = ctx.topts.stack_request()
    skus = expand_all(cat, skus)
    built, missing = _build_all(cat, skus, precision, **ov.as_kwargs(), offload=offload, stack=stack_req)
    names = [b.name for b in built] + [m.sku for m in missing]
    if len(set(names)) != len(names):
        raise UsageError("the same --sku is given twice")
    corners_of = {
        b.name: ({c: hardware.build_sku(cat, b.name, precision, **ov.as_kwargs(), case=c, offload=offload,
                                        stack=stack_req)
                  for c in CORNERS} if rep.ranges else {})
        for b in built
    }
    from mi400plan.search import RULES

    acc = _Acc(rejected={k: 0 for k in RULES})
    acc.warnings = [
        f"{s} is a roadmap entry (announced, not shipping): {r}"
        for s in skus if (r := cat.get("accelerators", s).spec.roadmap)
    ] + approximation_warnings(cat, skus) + ([fp8_note] if fp8_note else [])
    if ctx.topts.reserve is not None:
        from mi400plan.reserve_check import oversized_reserve

        acc.warnings += oversized_reserve(ctx.topts.reserve, ctx.wl0.recipe.reserve,
                                          [(b.name, b.hw.hbm_bytes) for b in built])
    acc.warnings += capacity_warnings(ctx.wl0.recipe, ctx.wl0.model.moe is not None)
    for sku in built:
        _sweep_sku(ctx, acc, sku, corners_of[sku.name], gpus, racks)
    return _result(ctx, acc, skus, built, missing, gpus)


def _stack_fp8(cat: Any, skus: list[str], options: Any) -> tuple[Any, str | None]:
    """``options`` with ``--precision fp8`` priced as the stacks' FP8 recipe on ``skus``
    (``stack_precision.fp8_as``), and the note that says so."""
    if options is None or options.precision != "fp8":
        return options, None
    from mi400plan.stack_precision import fp8_as

    accs = [cat.get("accelerators", s).spec for s in expand_all(cat, skus)]
    precision, note = fp8_as(cat, accs, options.precision, options.stack_request())
    return (options if precision == options.precision else options.model_copy(update={"precision": precision})), note


def capacity_warnings(recipe: Any, moe: bool) -> list[str]:
    """What a token-dropping capacity factor does to the run (``moe_dispatch.dropped_share``)."""
    from mi400plan.moe_dispatch import dropped_share

    f = recipe.expert_capacity_factor
    if f is None:
        return []
    if not moe:
        return ["--moe-capacity-factor applies to MoE models; the model is dense"]
    share = dropped_share(f)
    if share > 0:
        return [f"--moe-capacity-factor {f:g} drops {share:.0%} of the routed token copies even with balanced "
                "routing (each expert keeps that factor of its share); the model prices the kept tokens"]
    return []


# Where to look for GPU counts that work when one does not: multiples of 8 (an 8-GPU node or tray;
# every bundled scale-up domain is a multiple of it) from half to twice the count. A count with no
# valid structure is rejected before any layout is scored, so each probe costs little, but not
# nothing: a side with more than NEAREST_PROBES multiples (counts above about 500) is thinned to its
# NEAREST_CONSECUTIVE nearest and the rest spread at geometrically growing distances out to the end
# of the range, so the scan is bounded however large the count (a linear scan of 10,000,000 GPUs
# was over a million searches). Past the consecutive probes the answer is the nearest of the counts
# tried, not necessarily the nearest that works.
NEAREST_STEP = 8
NEAREST_PROBES = 64
NEAREST_CONSECUTIVE = 16


def nearest_candidates(size: int, step: int = NEAREST_STEP, probes: int = NEAREST_PROBES,
                       consecutive: int = NEAREST_CONSECUTIVE) -> tuple[list[int], list[int]]:
    """GPU counts to try below and above ``size``, nearest first: multiples of ``step`` within a
    factor of two, at most ``probes`` on each side (all of them when there are no more)."""
    base = size // step * step
    sides = (
        [n for n in range(base, max(size // 2, 1) - 1, -step) if 0 < n != size],
        list(range(base + step, 2 * size + 1, step)),
    )
    return tuple(_thin(side, size, probes, consecutive) for side in sides)  # type: ignore[return-value]


def _thin(side: list[int], size: int, probes: int, consecutive: int) -> list[int]:
    """``side`` (an arithmetic run moving away from ``size``) cut to ``probes`` entries: the first
    ``consecutive``, then entries whose distance from ``size`` grows by a constant factor up to the last."""
    if len(side) <= probes:
        return side
    first, last = abs(side[consecutive] - size), abs(side[-1] - size)
    step = abs(side[1] - side[0])
    rest = probes - consecutive
    picks = {consecutive + round((first * (last / first) ** (k / (rest - 1)) - first) / step) for k in range(rest)}
    return side[:consecutive] + [side[i] for i in sorted(picks) if i < len(side)]


def nearest_working_sizes(wl: Any, hw: Any, size: int, opts: Any) -> list[int]:
    """The closest GPU counts below and above ``size`` (of ``nearest_candidates``) on which some
    layout is valid and fits; either side may be missing."""
    from mi400plan.search import search

    found = []
    for side in nearest_candidates(size):
        n = next((n for n in side if search(wl, hw, n, opts, top_k=1).valid), None)
        if n is not None:
            found.append(n)
    return found


def _why(rej: dict[str, int]) -> str:
    top = sorted(((v, k) for k, v in rej.items() if v), reverse=True)[:3]
    return ", ".join(f"{k}: {v:,}" for v, k in top) or "no candidates"


def _recompute_pins_agree(levels: tuple[int, ...] | None, topts: Any) -> None:
    """--recompute-layers says what full recomputation covers and --recompute-modules what selective
    covers (as in ``fit``): refused when --recompute pins out the level they describe."""
    from mi400plan.search import RECOMPUTE_LABELS

    if not levels:
        return
    for given, code, flag, name in ((topts.recompute_layers > 0, 2, "--recompute-layers", "full"),
                                    (topts.recompute_modules is not None, 1, "--recompute-modules", "selective")):
        if given and code not in levels:
            pinned = ", ".join(RECOMPUTE_LABELS[int(x)] for x in levels)
            raise UsageError(f"{flag} says what --recompute {name} recomputes; --recompute allows only {pinned}",
                             hint=f"add --recompute {name}, or drop {flag}")


def _check_save_target(save: str) -> None:
    """A FIFO, device node, directory or link at --save is never replaced, --force or not: refused before the search."""
    from mi400plan.fileio import NotRegularFileError, check_replaceable

    try:
        check_replaceable(save)
    except NotRegularFileError as exc:
        raise UsageError(f"--save {save!r} {exc.strerror}", hint="choose a path that is free or a regular file") from None


def write_plan(path: str, row: SweepRow, model: str, global_batch: int, seq_len: int, precision: str,
               options: Any = None, *, replace: bool = False) -> None:
    """Write ``[plan]``, ``[layout]`` (exactly ``Layout``'s fields) and ``[recipe]`` (the ``TrainOptions``
    switches that differ from the defaults, which ``fit --plan`` reads back) atomically; without
    ``replace``, exclusively (a file another run created meanwhile is never replaced)."""
    from mi400plan.profiles import write_toml_atomic
    from mi400plan.specs.layout import Layout

    lay = Layout(**row.layout.model_dump())
    data = {
        "plan": {
            "model": model, "sku": row.sku, "gpus": row.gpus, "seq_len": seq_len,
            "global_batch": global_batch, "precision": precision,
        },
        "layout": lay.model_dump(mode="json"),
    }
    changed = options.changed() if options is not None else {}
    if changed:
        data["recipe"] = changed
    try:
        write_toml_atomic(path, data, replace=replace)
    except FileExistsError as exc:
        raise UsageError(f"plan file {path!r} {exc.strerror}",
                         hint="pass --force to replace it (a FIFO, device or link never is), or choose another path") from None
    except OSError as exc:
        raise UsageError(f"cannot write plan file {path!r}: {exc.strerror or exc}") from None
