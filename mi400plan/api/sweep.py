"""``sweep``: search parallelism layouts for a model on one or more SKUs and cluster sizes.

Inputs are names and strings (as typed on the command line); unit parsing happens here. The search
itself is ``mi400plan.search``; memory comes from ``mi400plan.memory`` (the ``fit`` model) and
collective times from ``mi400plan.comms`` (the ``comm`` model).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mi400plan.errors import MissingValueError, UsageError
from mi400plan.results.sweep import (
    MemoryBytes,
    Placement,
    ScalingPoint,
    SkuEfficiency,
    SkuSummary,
    SweepLayout,
    SweepResult,
    SweepRow,
    TimeBreakdown,
)
from mi400plan.units import DAY, HOUR, UnitError, US, parse_count

DEFAULT_GLOBAL_BATCH_TOKENS = 2**22  # 4Mi tokens (Llama 3 pre-training began at 4M tokens per step)
DEFAULT_SEQ_CAP = 8192
PRECISIONS = ("bf16", "fp8")
SCALING_THRESHOLD = 0.90

ProgressFn = Callable[[str, int, int], None]  # (label, done, total)


@dataclass(frozen=True)
class Sku:
    name: str
    hw: Any  # search.Hardware
    eff: SkuEfficiency


def parse_gpus(text: str) -> list[int]:
    """``1024`` / ``512,1024,2048`` / ``512..65536`` (doubling) -> sorted GPU counts."""
    t = text.replace(" ", "").replace("_", "")
    try:
        if ".." in t:
            lo_t, hi_t = t.split("..", 1)
            lo, hi = int(parse_count(lo_t)), int(parse_count(hi_t))
            if lo < 1 or hi < lo:
                raise UsageError(f"--gpus range {text!r} must go from a positive count up to a larger one")
            out, g = [], lo
            while g <= hi:
                out.append(g)
                g *= 2
            return out
        vals = sorted({int(parse_count(x)) for x in t.split(",") if x})
    except UnitError as exc:
        raise UsageError(f"cannot read --gpus {text!r}: {exc}") from None
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
            raise UsageError(
                f"--global-batch {text!r} is {value:.0f} tokens, not a whole number of {seq_len}-token sequences",
                hint="use a power-of-two token count such as 4Mi or 128Mi, or give sequences",
            )
        return int(round(seqs))
    if abs(value - round(value)) > 1e-9 or value < 1:
        raise UsageError(f"--global-batch {text!r}: a number of sequences must be a positive integer")
    return int(round(value))


def _tiers(cat: Any, fabric_name: str | None, what: str) -> tuple[Any, Any]:
    """(comms tier parameters, Fabric spec) for a fabric profile name."""
    from mi400plan import comms

    if not fabric_name:
        raise MissingValueError(f"{what} fabric is not named in the accelerator profile")
    fab = cat.get("fabrics", fabric_name).spec
    return comms.TierParams.from_fabric(fab), fab


def _gpus_per_rack(cat: Any, acc_name: str, domain: int) -> tuple[int, str]:
    for name in cat.names("racks"):
        try:
            r = cat.get("racks", name).spec
        except Exception:  # noqa: BLE001 - a broken rack profile is reported by `profiles validate`
            continue
        if getattr(r, "sku", None) == acc_name and getattr(r, "variant_of", None) in (None, ""):
            return int(r.gpus), f"rack profile {r.name}"
    return domain, "scale-up domain (no rack profile for this SKU)"


def build_sku(
    cat: Any,
    name: str,
    precision: str,
    *,
    matmul_efficiency: float | None = None,
    hbm_efficiency: float | None = None,
    gemm_overhead_us: float | None = None,
) -> Sku:
    from mi400plan.search import Hardware

    acc = cat.get("accelerators", name).spec
    peak = acc.compute.peak_flops(precision).require(f"{acc.name} dense {precision} peak")
    eff = acc.efficiency
    mm_est = eff.matmul(precision)
    if matmul_efficiency is not None:
        mm, mm_status, mm_src = matmul_efficiency, "measured", "user (--matmul-efficiency)"
    else:
        mm = mm_est.require(f"{acc.name} achievable {precision} matmul efficiency ([efficiency] matmul_{precision})")
        mm_status, mm_src = mm_est.status, ", ".join(mm_est.source)
    if hbm_efficiency is not None:
        hb, hb_status = hbm_efficiency, "measured"
    else:
        hb = eff.hbm_bandwidth.require(f"{acc.name} achievable HBM bandwidth fraction ([efficiency] hbm_bandwidth)")
        hb_status = eff.hbm_bandwidth.status
    ovh = gemm_overhead_us if gemm_overhead_us is not None else eff.gemm_overhead_us.require(
        f"{acc.name} per-GEMM overhead ([efficiency] gemm_overhead_us)"
    )
    for label, v in (("matmul efficiency", mm), ("HBM efficiency", hb)):
        if not 0 < v <= 1:
            raise UsageError(f"{label} must be a fraction in (0, 1], got {v}")
    up, up_fab = _tiers(cat, acc.interconnect.scale_up_fabric, f"{acc.name} scale-up")
    out, _ = _tiers(cat, acc.interconnect.scale_out_fabric, f"{acc.name} scale-out")
    domain = int(up_fab.domain_size.require(f"{up_fab.name} domain size"))
    per_rack, basis = _gpus_per_rack(cat, acc.name, domain)
    hw = Hardware(
        name=acc.name,
        peak_flops=peak,
        matmul_eff=mm,
        gemm_overhead_s=ovh * US,
        hbm_bytes=acc.hbm_bytes.require(f"{acc.name} HBM capacity"),
        hbm_bw=acc.memory.bandwidth_bytes_per_s.require(f"{acc.name} HBM bandwidth"),
        hbm_eff=hb,
        scale_up=up,
        scale_out=out,
        domain=domain,
        gpus_per_rack=per_rack,
    )
    info = SkuEfficiency(
        sku=acc.name, peak_flops=peak, matmul=mm, matmul_status=mm_status, matmul_source=mm_src,
        hbm=hb, hbm_status=hb_status, gemm_overhead_s=ovh * US, scale_up_domain=domain,
        gpus_per_rack=per_rack, rack_basis=basis,
    )
    return Sku(acc.name, hw, info)


def layout_text(lay: SweepLayout) -> str:
    parts = [f"TP{lay.tp}", f"PP{lay.pp}"]
    if lay.vpp > 1:
        parts.append(f"VPP{lay.vpp}")
    if lay.cp > 1:
        parts.append(f"CP{lay.cp}")
    if lay.ep > 1:
        parts.append(f"EP{lay.ep}")
    if lay.etp > 1:
        parts.append(f"ETP{lay.etp}")
    parts.append(f"DP{lay.dp}")
    parts.append(f"Z{lay.zero}")
    parts.append(f"mb{lay.micro_batch}")
    if lay.recompute != "none":
        parts.append(f"rc:{lay.recompute}")
    if lay.tp > 1 and not lay.sequence_parallel:
        parts.append("no-SP")
    return " ".join(parts)


def _row(r: dict[str, Any], rank: int, sku: Sku, gpus: int, wl: Any, terms: Any, usable: float,
         train_tokens: float | None, cost: float | None) -> SweepRow:
    from mi400plan.search import RECOMPUTE_LABELS, metrics, tier_of

    hw = sku.hw
    lay = SweepLayout(
        tp=r["tp"], pp=r["pp"], vpp=r["vpp"], dp=r["dp"], ep=r["ep"], etp=r["etp"], cp=r["cp"],
        zero=r["zero"], micro_batch=r["micro_batch"], recompute=RECOMPUTE_LABELS[r["recompute"]],
        sequence_parallel=bool(r["sp"]),
    )
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
    dp_tier = str(tier_of(r["dp"], inner * pp if fold == 1 else tp * cp, dom)) if fold == 1 else (
        "hierarchical" if r["dp"] > fold else str(tier_of(fold, tp * cp, dom))
    )
    placement = Placement(
        tp=str(tier_of(tp, 1, dom)), cp=str(tier_of(cp, tp, dom)), ep=str(tier_of(ep, etp, dom)),
        pp=str(tier_of(pp, inner, dom)), dp=dp_tier,
    )
    return SweepRow(
        rank=rank, sku=sku.name, gpus=gpus, layout=lay, replica_gpus=int(inner * pp),
        microbatches=int(round(r["m"])),
        memory_bytes=MemoryBytes(
            weights=r["mem_weights"], gradients=r["mem_gradients"], optimizer=r["mem_optimizer"],
            activations=r["mem_activations"], reserve=r["mem_reserve"], total=r["mem_total"], capacity=usable,
        ),
        step_time_s=r["step"], compute_only_s=r["compute_only"],
        time_s=TimeBreakdown(**{k: r[f"t_{k}"] for k in TimeBreakdown.model_fields}),
        placement=placement, tokens_per_s=tps, mfu=float(met["mfu"]), hfu=float(met["hfu"]),
        days=days, cost_usd=cst,
    )


def sweep(
    cat: Any,
    model: str,
    skus: list[str],
    *,
    gpus: str | None = None,
    racks: int | None = None,
    global_batch: str | None = None,
    seq_len: int | None = None,
    precision: str = "bf16",
    tokens: str | None = None,
    gpu_hour_cost: float | None = None,
    top: int = 5,
    matmul_efficiency: float | None = None,
    hbm_efficiency: float | None = None,
    gemm_overhead_us: float | None = None,
    overlap_tp: bool = False,
    overlap_ep: bool = False,
    pins: dict[str, list[int]] | None = None,
    save: str | None = None,
    progress: ProgressFn | None = None,
) -> SweepResult:
    """Run the layout search. See ``mi400plan sweep --help`` for the meaning of each input."""
    from mi400plan.params import count_params
    from mi400plan.search import RULES, TIE_BREAK, SearchOptions, Workload, iter_rows, model_terms, search, usable_hbm
    from mi400plan.specs.layout import train_recipe

    if not skus:
        raise UsageError("give at least one --sku")
    if precision not in PRECISIONS:
        raise UsageError(f"unknown --precision {precision!r}; choose from {', '.join(PRECISIONS)}")
    if top < 1:
        raise UsageError("--top must be at least 1")
    if (gpus is None) == (racks is None):
        raise UsageError("give exactly one of --gpus or --racks")
    spec = cat.get("models", model).spec
    counts = count_params(spec)
    seq = int(seq_len) if seq_len else min(spec.max_seq_len, DEFAULT_SEQ_CAP)
    if seq < 1:
        raise UsageError("--seq must be positive")
    gb = parse_global_batch(global_batch, seq) if global_batch else max(1, DEFAULT_GLOBAL_BATCH_TOKENS // seq)
    train_tokens = None
    if tokens:
        try:
            train_tokens = parse_count(tokens)
        except UnitError as exc:
            raise UsageError(f"cannot read --tokens {tokens!r}: {exc}") from None
    if gpu_hour_cost is not None and gpu_hour_cost < 0:
        raise UsageError("--gpu-hour-cost cannot be negative")
    recipe = train_recipe("megatron", precision=precision)
    wl = Workload(spec, counts, recipe, seq, gb)
    terms = model_terms(spec, counts, seq)
    pin_kw: dict[str, Any] = {}
    for k, v in (pins or {}).items():
        if v:
            if k == "recompute":
                pin_kw[k] = tuple(v)
            elif k == "sequence_parallel":
                pin_kw[k] = tuple(int(x) for x in v)
            else:
                pin_kw[k] = tuple(int(x) for x in v)
            if any(int(x) < 0 for x in v):
                raise UsageError(f"--{k.replace('_', '-')} values must be non-negative")
    opts = SearchOptions(overlap_tp=overlap_tp, overlap_ep=overlap_ep, **pin_kw)

    built = [build_sku(cat, s, precision, matmul_efficiency=matmul_efficiency,
                       hbm_efficiency=hbm_efficiency, gemm_overhead_us=gemm_overhead_us) for s in skus]
    names = [b.name for b in built]
    if len(set(names)) != len(names):
        raise UsageError("the same --sku is given twice")

    rows: list[SweepRow] = []
    summaries: list[SkuSummary] = []
    scaling: list[ScalingPoint] = []
    below: dict[str, int | None] = {}
    crossing: list[SweepRow] = []
    evaluated = valid = 0
    rejected = {k: 0 for k in RULES}
    warnings: list[str] = []
    for sku in built:
        sizes = parse_gpus(gpus) if gpus is not None else [int(racks) * sku.hw.gpus_per_rack]  # type: ignore[arg-type]
        if racks is not None and racks < 1:
            raise UsageError("--racks must be at least 1")
        usable = usable_hbm(wl, sku.hw)
        base_per_gpu: float | None = None
        below[sku.name] = None
        for size in sizes:
            label = f"{sku.name} x {size}"
            cb = (lambda d, n, _l=label: progress(_l, d, n)) if progress else None
            res = search(wl, sku.hw, size, opts, top_k=top, progress=cb)
            evaluated += res.evaluated
            valid += res.valid
            for k, v in res.rejected.items():
                rejected[k] = rejected.get(k, 0) + v
            these = [
                _row(r, i + 1, sku, size, wl, terms, usable, train_tokens, gpu_hour_cost)
                for i, r in enumerate(iter_rows(res.top))
            ]
            rows.extend(these)
            best = these[0] if these else None
            if best is None:
                warnings.append(f"{sku.name} on {size} GPUs: no layout is valid and fits ({_why(res.rejected)})")
            if res.best_crossing is not None and best is not None and len(crossing) < len(built) * 1 + 1:
                cr = next(iter_rows(res.best_crossing))
                if len(sizes) == 1:
                    crossing.append(_row(cr, 0, sku, size, wl, terms, usable, train_tokens, gpu_hour_cost))
            per_gpu = best.tokens_per_s / size if best else None
            if per_gpu is not None and base_per_gpu is None:
                base_per_gpu = per_gpu
            eff = (per_gpu / base_per_gpu) if (per_gpu is not None and base_per_gpu) else None
            is_below = eff is not None and eff < SCALING_THRESHOLD
            if is_below and below[sku.name] is None:
                below[sku.name] = size
            scaling.append(ScalingPoint(
                sku=sku.name, gpus=size, layout=layout_text(best.layout) if best else None,
                step_time_s=best.step_time_s if best else None, tokens_per_s=best.tokens_per_s if best else None,
                tokens_per_s_per_gpu=per_gpu, mfu=best.mfu if best else None, scaling_efficiency=eff,
                below_90=is_below,
                per_replica_batch_tokens=(gb * seq / best.layout.dp) if best else None,
                days=best.days if best else None,
            ))
            summaries.append(SkuSummary(
                sku=sku.name, gpus=size, step_time_s=best.step_time_s if best else None,
                tokens_per_s=best.tokens_per_s if best else None, tokens_per_s_per_gpu=per_gpu,
                tokens_per_s_per_rack=(per_gpu * sku.hw.gpus_per_rack) if per_gpu is not None else None,
                gpus_per_rack=sku.hw.gpus_per_rack, mfu=best.mfu if best else None,
                days=best.days if best else None, cost_usd=best.cost_usd if best else None,
                layout=layout_text(best.layout) if best else None,
            ))
    best_pg = max((s.tokens_per_s_per_gpu or 0.0) for s in summaries) if summaries else 0.0
    summaries = [s.model_copy(update={"relative": (s.tokens_per_s_per_gpu / best_pg) if (s.tokens_per_s_per_gpu and best_pg) else None}) for s in summaries]
    for e in built:
        if e.eff.matmul_status in ("assumed", "estimate", "unverified", "conflict"):
            warnings.append(
                f"{e.name}: matmul efficiency {e.eff.matmul:.2f} is {e.eff.matmul_status} ({e.eff.matmul_source or 'see the profile note'}); "
                "override with --matmul-efficiency from your own measurement"
            )
    result = SweepResult(
        model=spec.name, precision=precision, seq_len=seq, global_batch_seqs=gb, global_batch_tokens=gb * seq,
        train_tokens=train_tokens, gpu_hour_cost=gpu_hour_cost, tie_break=TIE_BREAK,
        overlap={"tp": overlap_tp, "ep": overlap_ep, "dp": True, "cp": True},
        evaluated=evaluated, valid=valid, rejected=rejected, rejected_rules=dict(RULES), rows=rows,
        skus=summaries if len(built) > 1 else [], scaling=scaling if len(scaling) > len(built) else [],
        scaling_below_90_at=below if len(scaling) > len(built) else {},
        efficiencies=[b.eff for b in built], rack_crossing=crossing, warnings=warnings,
    )
    if save:
        if not rows:
            raise UsageError("nothing to save: no layout is valid and fits")
        write_plan(save, rows[0], spec.name, gb, seq, precision)
        result = result.model_copy(update={"saved_plan": str(save)})
    return result


def _why(rej: dict[str, int]) -> str:
    top = sorted(((v, k) for k, v in rej.items() if v), reverse=True)[:3]
    return ", ".join(f"{k}: {v:,}" for v, k in top) or "no candidates"


def write_plan(path: str, row: SweepRow, model: str, global_batch: int, seq_len: int, precision: str) -> None:
    """Write ``[plan]`` and ``[layout]`` (exactly ``Layout``'s fields) atomically."""
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
    try:
        write_toml_atomic(path, data)
    except OSError as exc:
        raise UsageError(f"cannot write plan file {path!r}: {exc}") from None
