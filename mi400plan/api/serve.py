"""``serve``: inference throughput, latency, concurrency and cost per token, searched over layouts.

Names and strings in, ``ServeResult`` out. The model is ``mi400plan.serve``; memory is the ``fit``
inference model; collectives the ``comm`` model; the SKU's peaks, efficiencies and fabrics are read as
``sweep`` reads them (``api.sweep.build_sku``), at the nominal values and at both corners of their
estimate ranges.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from mi400plan.errors import LayoutError, MissingValueError, UsageError
from mi400plan.hardware import serve_hardware
from mi400plan.serve_sim import parse_length  # noqa: F401 - the one reader of --input-len/--output-len
from mi400plan.serve import COMPUTE_PRECISION
from mi400plan.serve_iterations import Iterations
from mi400plan.serve import RULES as RULES_TEXT
from mi400plan.results.serve import (
    Comparison,
    Curve,
    DecodeBreakdown,
    PrefillBreakdown,
    ServeLayout,
    ServeMemory,
    ServeResult,
    ServeRow,
    SkuInfo,
    Span,
    layout_text,
)
from mi400plan.serve_rank import RANK_BY, WHAT, default_rank_by, rule_text
from mi400plan.serve_rank import score as rank_score
from mi400plan.serve_rank import shown as rank_shown
from mi400plan.units import HOUR
from mi400plan.profiles import approximation_warnings
from mi400plan.serving_stacks import ResolvedServing

DEFAULT_GPUS = 8  # one 8-GPU node (HGX / MI3xx OAM platform)
DEFAULT_LEN = 1024  # InferenceX's 1k1k scenario: 1,024 input and 1,024 output tokens
MAX_CONCURRENCY = 1024
DEFAULT_TOP = 8
# Interactivity levels (tokens/s/user) of the SKU comparison.
LEVELS = (10.0, 20.0, 30.0, 50.0, 75.0, 100.0, 150.0, 200.0)
ORDER_TIES = ("one row per layout at its best concurrency; ties: lower TPOT, fewer GPUs per replica, smaller TP, "
              "PP, EP, DP-attention off, lower concurrency")
CORNERS = ("pessimistic", "optimistic")


def parse_concurrency(text: str | None) -> np.ndarray:
    """``1..1024`` (every integer), ``64``, ``1k`` or ``1,4,16,64`` -> sorted concurrencies (sequences per
    replica), read by ``units.parse_count_list``."""
    from mi400plan.units import UnitError, parse_count_list

    try:
        vals = parse_count_list(text or f"1..{MAX_CONCURRENCY}", "--concurrency", ranges="each", max_items=65536)
    except UnitError as exc:
        raise UsageError(f"{exc}; give 64, 1,4,16 or 1..1024") from None
    if not vals or min(vals) < 1 or max(vals) > 65536:
        raise UsageError(f"--concurrency {text!r} must list concurrencies between 1 and 65,536")
    return np.array(vals, dtype=np.float64)


def parse_seconds(text: str | None, what: str) -> float | None:
    if text is None:
        return None
    from mi400plan.units import UnitError, parse_duration

    try:
        v = parse_duration(str(text))
    except UnitError as exc:
        raise UsageError(f"cannot read {what} {text!r}: {exc}") from None
    if not v > 0:
        raise UsageError(f"{what} must be positive, got {text!r}")
    return v


def parse_interactivity(text: str | None) -> float | None:
    if text is None:
        return None
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(tok/s|tokens/s)?\s*", str(text))
    if not m or not float(m.group(1)) > 0:
        raise UsageError(f"cannot read --interactivity {text!r}: give tokens/s per user, e.g. 30 or 30tok/s")
    return float(m.group(1))


def parse_sla(tpot: str | None, ttft: str | None, interactivity: str | None) -> dict[str, float]:
    """The SLA terms given: ``tpot_s``, ``ttft_s`` (seconds) and ``interactivity`` (tokens/s per user)."""
    terms = {"tpot_s": parse_seconds(tpot, "--tpot"), "ttft_s": parse_seconds(ttft, "--ttft"),
             "interactivity": parse_interactivity(interactivity)}
    return {k: v for k, v in terms.items() if v is not None}


@dataclass(frozen=True)
class _Sku:
    name: str
    hw: dict[str, Any]  # case -> serve.ServeHardware
    info: SkuInfo
    rack: str | None
    stack: ResolvedServing | None = None  # None: no serving stack for the vendor
    iterations: Iterations | None = None  # the stack's iteration rule (``serving_stacks.scheduler_iterations``)


def _reserve_warning(text: str | None, recipe: Any, sk: list[_Sku]) -> list[str]:
    """``--reserve`` at least a SKU's whole usable HBM (``reserve_check``): a warning naming the SKUs."""
    if text is None:
        return []
    from mi400plan.reserve_check import oversized_reserve

    return oversized_reserve(text, recipe.reserve, [(s.name, s.hw["nominal"].hbm_bytes) for s in sk])


def _sku(cat: Any, name: str, precision: str, gpus: int, cost: float | None, *, matmul: float | None,
         hbm: float | None, model_class: str, stack: str | None = None) -> _Sku:
    from mi400plan.hardware import gpus_per_rack as _gpus_per_rack
    from mi400plan.serving_stacks import resolve_serving_stack, scheduler_iterations

    st = resolve_serving_stack(cat, cat.get("accelerators", name).spec, stack)
    hw: dict[str, Any] = {}
    for case in ("nominal",) + CORNERS:
        hw[case], sk = serve_hardware(cat, name, precision, case, matmul=matmul, hbm=hbm, model_class=model_class,
                                      stack=st.name if st else None)
        if case == "nominal":
            nominal_sku = sk
    h = hw["nominal"]
    rack_name = None
    _, basis = _gpus_per_rack(cat, h.name, h.domain)
    if basis.startswith("rack profile "):
        rack_name = basis.removeprefix("rack profile ")
    info = SkuInfo(
        sku=h.name, precision=precision, compute_precision=COMPUTE_PRECISION[precision], peak_flops=h.peak_flops,
        matmul=h.matmul_eff, hbm=h.hbm_eff, kernel_overhead_s=h.kernel_overhead_s, hbm_bandwidth=h.hbm_bw,
        hbm_capacity=h.hbm_bytes, domain=h.domain, gpus=gpus,
        calibration=_calibration_text(cat, name, nominal_sku, matmul, hbm, model_class, st.name if st else None,
                                      COMPUTE_PRECISION[precision]),
        gpu_hour_cost=cost, serving_stack=st.label() if st else None, serving_stack_basis=st.basis if st else None,
        calibration_status=_calibration_status(cat, name, matmul, hbm, model_class, st.name if st else None),
        host_per_seq_s=h.host_per_seq_s, host_overlap=h.host_overlap,
    )
    its = scheduler_iterations(st.scheduler if st else None, h.name, h.hbm_bytes)
    text = its.text() + ("" if st else "; no serving stack for the vendor: vLLM's defaults")
    return _Sku(h.name, hw, info.model_copy(update={"ttft_rule": text}), rack_name, st, its)


def _priced_skus(catalog: Any, skus: list[str], prec: str, n_gpus: int, wl: Any, gpu_hour_cost: float | None,
                 site: str | None, cost_overrides: Any, *, matmul: float | None,
                 hbm: float | None, stack: str | None = None) -> tuple[list[_Sku], dict[str, str], list[str]]:
    """The SKUs named (``all`` expanded, repeats dropped) with their hardware and price per GPU-hour: (SKUs,
    where each price came from, warnings: SKUs left out and SKUs no cost profile prices)."""
    from mi400plan.cost import gpu_hour_costs
    from mi400plan.hardware import expand_all
    from mi400plan.serve_calibration import model_class

    names: list[str] = []
    for s in expand_all(catalog, skus):
        c = catalog.resolve("accelerators", s)
        if c not in names:
            names.append(c)
    costs, cost_src, cost_warn = gpu_hour_costs(catalog, names, gpu_hour_cost, site, cost_overrides)
    sk, skipped = _skus(catalog, names, prec, n_gpus, costs, matmul=matmul, hbm=hbm, model_class=model_class(wl.model),
                        stack=stack)
    left_out = {w.split(":")[0] for w in skipped}
    return sk, cost_src, skipped + [w for w in cost_warn if w.split(":")[0] not in left_out]


def _skus(cat: Any, names: list[str], precision: str, gpus: int, costs: dict[str, float | None], *,
          matmul: float | None, hbm: float | None, model_class: str,
          stack: str | None = None) -> tuple[list[_Sku], list[str]]:
    """Each SKU's hardware; with several (``--sku all``), one that lacks a value the precision needs is left
    out with a warning naming what is missing instead of stopping the comparison."""
    from mi400plan.serving_stacks import StackVendorError

    out: list[_Sku] = []
    skipped: list[str] = []
    for n in names:
        try:
            out.append(_sku(cat, n, precision, gpus, costs[n], matmul=matmul, hbm=hbm, model_class=model_class,
                            stack=stack))
        except (MissingValueError, StackVendorError) as exc:
            if len(names) == 1:
                raise
            skipped.append(f"{n}: left out: {exc.message}")
    if not out and stack is not None and all("serving stack" in w for w in skipped):
        raise UsageError(f"--stack {stack}: no SKU named runs it: " + "; ".join(skipped))
    if not out:
        raise MissingValueError("no SKU has the values serving needs: " + "; ".join(skipped))
    return out, skipped


def _calibration_status(cat: Any, name: str, matmul: float | None, hbm: float | None, model_class: str,
                        stack: str | None) -> str | None:
    """Which calibration ``serve_hardware`` applied (``FamilyCalibration.status``); None: none applied."""
    from mi400plan.serve_calibration import stack_calibration_for

    if matmul is not None or hbm is not None:
        return None
    cal = stack_calibration_for(cat.get("accelerators", name).spec.architecture, model_class, stack)
    return cal.status if cal is not None else None


def _calibration_text(cat: Any, name: str, sku: Any, matmul: float | None, hbm: float | None,
                      model_class: str, stack: str | None = None, precision: str | None = None) -> str:
    from mi400plan.serve_calibration import at_precision, family_of, stack_calibration_for

    arch = cat.get("accelerators", name).spec.architecture
    cal = stack_calibration_for(arch, model_class, stack)
    if matmul is not None or hbm is not None:
        return "efficiencies given on the command line"
    if cal is None:
        fam = family_of(arch) or arch or "unknown"
        return (f"uncalibrated: no InferenceX points for the {fam} family; profile efficiencies "
                f"(matmul {sku.eff.matmul_status}, HBM {sku.eff.hbm_status})")
    kind = {"dense": "dense models", "moe": "MoE models"}[cal.model_class]
    first, _, last = cal.dates.partition("..")
    dates = first if last in ("", first) else cal.dates
    borrowed = "" if cal.model_class == model_class else f"; no points of {model_class} models on the family"
    whose = f" on {cal.stack}" if cal.status == "stack fit" else ""
    text = (f"calibrated on {cal.points} InferenceX points of {kind}{whose}, {cal.family} family, {dates}{borrowed}: "
            f"tok/s/GPU error {cal.tput_mean_err:.0%} mean, {cal.tput_max_err:.0%} max; "
            f"TPOT {cal.tpot_mean_err:.0%} mean")
    if any(p == precision for p, _, _ in cal.precision_fits):
        h, m = at_precision(cal, precision)
        text += f"; its {precision} points fitted apart (HBM efficiency {h:.2f}, matmul scale {m:.2f})"
    return text if cal.status in ("stack fit", "family fit") else f"{text}; {cal.status}"


def _gpus_per_mw(cat: Any, rack_name: str | None) -> float | None:
    """GPUs per MW of rack wall power from the rack power model (``mi400plan rack``), if the SKU has a rack."""
    if rack_name is None:
        return None
    from mi400plan.api.rack import rack

    try:
        return float(rack(cat, [rack_name]).rows[0].gpus_per_mw)
    except Exception:  # noqa: BLE001 - a rack profile that cannot be evaluated leaves the figure out
        return None


@dataclass(frozen=True)
class ServeRequest:
    """What a serving search prices beside the model and the SKUs: the request ``mi400plan serve`` builds
    from its flags (``mi400plan serve --help`` explains each; ``serve`` documents the rules)."""

    gpus: int | None = None
    input_len: str | int | None = None
    output_len: str | int | None = None
    precision: str | None = None
    kv_dtype: str | None = None
    concurrency: str | None = None
    tpot: str | None = None
    ttft: str | None = None
    interactivity: str | None = None
    disagg: bool = False
    gpu_hour_cost: float | None = None
    top: int = DEFAULT_TOP
    tp: list[int] | None = None
    pp: list[int] | None = None
    ep: list[int] | None = None
    dp_attention: bool | None = None
    spec_tokens: int = 0
    spec_acceptance: float = 0.0
    reserve: str | None = None
    matmul_efficiency: float | None = None
    hbm_efficiency: float | None = None
    ranges: bool = True
    site: str | None = None
    cost_overrides: Any = None
    rank_by: str | None = None
    scenario: Any = None
    stack: str | None = None  # serving stack profile (profiles/serving); None: each SKU's vendor default


def serve(catalog: Any, model_name: str, skus: list[str], request: ServeRequest | None = None) -> ServeResult:
    """Search serving layouts x concurrency for ``model_name`` on each SKU (see ``mi400plan.serve``).

    ``gpus`` (default 8, one node) bounds a replica (TP x PP divides it); ``concurrency`` is per replica.
    SLA: ``tpot``/``ttft`` durations (``50ms``, ``2s``), ``interactivity`` tokens/s per user. Raises
    ``UsageError`` for bad values (exit 2) and ``MissingValueError`` when a SKU does not disclose what the
    precision needs (exit 3). Without ``gpu_hour_cost`` the cost per GPU-hour is the cost model's all-in
    figure for each SKU's system at ``site`` (``cost.gpu_hour_costs``; ``cost_overrides`` a
    ``pricing.CostOverrides``). ``rank_by`` (``serve_rank.RANK_BY``; default ``serve_rank.default_rank_by``)
    orders the rows under an SLA and picks each comparison level's leader.
    ``scenario`` (``api.serve_scenario.ScenarioRequest``): an MLPerf Inference
    scenario simulated request by request on the best layouts (``scenario_rows``); ``input_len`` /
    ``output_len`` may be distributions (``serve_sim.parse_length_dist``), the search using their means.
    ``stack``: the serving stack profile (``serving_stacks.resolve_serving_stack``; None: each SKU's vendor
    default), which picks the calibration and the scenario's scheduler defaults."""
    req = request or ServeRequest()
    from mi400plan import serve as core
    from mi400plan.params import count_params
    from mi400plan.specs.layout import infer_recipe, parse_reserve

    if not skus:
        raise UsageError("name at least one --sku")
    model = catalog.get("models", model_name).spec
    from mi400plan.api import serve_scenario as scen

    scfg, I, O, out_cv2 = scen.prepare(model, req.input_len, req.output_len, req.scenario, req.disagg)
    prec = (req.precision or "fp8").lower()
    if prec not in COMPUTE_PRECISION:
        raise UsageError(f"unknown --precision {req.precision!r}; known: {', '.join(COMPUTE_PRECISION)}")
    kv = (req.kv_dtype or ("bf16" if prec in ("bf16", "fp16", "int4") else "fp8")).lower()
    recipe = infer_recipe(prec, kv_dtype=kv, reserve=parse_reserve(req.reserve) if req.reserve is not None else None)
    n_gpus = _checked_gpus(req.gpus, req.top, req.spec_tokens, req.spec_acceptance, req.gpu_hour_cost,
                           {"--tp": req.tp, "--pp": req.pp, "--ep": req.ep})
    sla = parse_sla(req.tpot, req.ttft, req.interactivity)
    conc = parse_concurrency(req.concurrency)
    wl = core.Workload(model, count_params(model), recipe, I, O, req.spec_tokens, req.spec_acceptance, out_cv2)
    lay = core.layout_grid(model, n_gpus, len(conc), tp=req.tp, pp=req.pp, ep=req.ep,
                           dpa=None if req.dp_attention is None else [int(req.dp_attention)])
    if not len(lay.tp):
        why = ", ".join(f"{k} ({RULES_TEXT[k]})" for k, v in lay.rejected.items() if v)
        raise LayoutError(f"no serving layout of {model.name} on {n_gpus} GPUs passes the rules: {why}",
                          rule=next((k for k, v in lay.rejected.items() if v), None),
                          hint="TP must divide the attention heads and the GPUs, PP the layers, EP the experts")
    sk, cost_src, cost_warn = _priced_skus(catalog, skus, prec, n_gpus, wl, req.gpu_hour_cost, req.site,
                                           req.cost_overrides, matmul=req.matmul_efficiency, hbm=req.hbm_efficiency,
                                           stack=req.stack or (req.scenario.stack if req.scenario else None))
    rank = _rank_by(req.rank_by, [s.info.gpu_hour_cost for s in sk])
    rows: list[ServeRow] = []
    rejected = dict(lay.rejected)
    rejected.setdefault("sla", 0)
    evaluated = (sum(lay.rejected.values()) + len(lay.tp) * len(conc)) * len(sk)
    for k in rejected:
        rejected[k] *= len(sk)
    valid = 0
    per_sku: dict[str, dict[str, Any]] = {}
    for s in sk:
        res = _search_sku(wl, s, lay, conc, n_gpus, sla, req.disagg, req.ranges)
        res["rank_by"] = rank
        res["stack"] = s.stack
        for k, v in res["rejected"].items():
            rejected[k] = rejected.get(k, 0) + v
        valid += res["valid"]
        per_sku[s.name] = res
        mw = _gpus_per_mw(catalog, s.rack)
        info = s.info.model_copy(update={"gpus_per_mw": mw, "sla_binding": res["binding"], "nearest": res["nearest"],
                                         "cost_source": cost_src[s.name]})
        s_info = info
        rows += [r.model_copy(update=_economics(r, s_info, I))
                 for r in _rows(wl, s, res, req.top, sla, req.disagg, n_gpus)]
        per_sku[s.name]["info"] = s_info
    scen_rows, scen_info = scen.run(wl, [(s.name, s.hw["nominal"]) for s in sk], per_sku, scfg, n_gpus)
    comparison, flips = _compare(per_sku, rank) if len(sk) > 1 else ([], [])
    for r in rows:
        if r.sla_flips:
            flips.append(f"{r.sku} #{r.rank}: the SLA verdict flips inside the estimate ranges")
    return ServeResult(
        model=model.name, input_len=I, output_len=O, precision=prec, kv_dtype=kv, disaggregated=req.disagg, sla=sla,
        decode_context_tokens=core.decode_context(wl), kv_tokens_per_sequence=core.held_context(wl),
        order=f"{WHAT[rank]}, {ORDER_TIES}" if sla else "Pareto points, most interactive first (no point beats "
                                                         "another in both tokens/s/user and tokens/s/GPU)",
        rank_by=rank, rank_rule=rule_text(rank, req.rank_by is not None),
        evaluated=evaluated, valid=valid, rejected={k: v for k, v in rejected.items() if v},
        skus=[per_sku[s.name]["info"] for s in sk], rows=rows, comparison=comparison, flips=flips, ranges=req.ranges,
        curves=[_curve(s.name, per_sku[s.name]) for s in sk],
        warnings=list(flips) + cost_warn + _reserve_warning(req.reserve, recipe, sk)
        + approximation_warnings(catalog, [s.name for s in sk]), scenario=scen_info, scenario_rows=scen_rows,
    )


def _checked_gpus(gpus: int | None, top: int, spec_tokens: int, spec_acceptance: float, gpu_hour_cost: float | None,
                  pins: dict[str, list[int] | None]) -> int:
    """The GPUs per replica (default ``DEFAULT_GPUS``), after the range checks of the plain numeric inputs."""
    n_gpus = int(gpus if gpus is not None else DEFAULT_GPUS)
    if n_gpus < 1 or n_gpus > 4096:
        raise UsageError(f"--gpus must be between 1 and 4,096, got {gpus}")
    if top < 1:
        raise UsageError(f"--top must be at least 1, got {top}")
    if spec_tokens < 0 or spec_tokens > 16:
        raise UsageError(f"--spec-tokens must be between 0 and 16, got {spec_tokens}")
    if not 0.0 <= spec_acceptance <= 1.0:
        raise UsageError(f"--spec-acceptance must be a probability in [0, 1], got {spec_acceptance}")
    if spec_tokens and spec_acceptance == 0.0:
        raise UsageError("--spec-tokens needs --spec-acceptance (the probability a draft token is accepted)")
    if gpu_hour_cost is not None and not gpu_hour_cost > 0:
        raise UsageError(f"--gpu-hour-cost must be positive, got {gpu_hour_cost}")
    for flag, vals in pins.items():
        if vals and min(vals) < 1:
            raise UsageError(f"{flag} values must be positive integers")
    return n_gpus


def _meets(ev: dict[str, np.ndarray], sla: dict[str, float]) -> np.ndarray:
    ok = np.ones(ev["tpot"].shape, dtype=bool)
    if "tpot_s" in sla:
        ok &= ev["tpot"] <= sla["tpot_s"]
    if "ttft_s" in sla:
        ok &= ev["ttft"] <= sla["ttft_s"]
    if "interactivity" in sla:
        ok &= ev["tps_user"] >= sla["interactivity"]
    return ok


def _search_sku(wl: Any, s: _Sku, lay: Any, conc: np.ndarray, gpus: int, sla: dict[str, float], disagg: bool,
                ranges: bool) -> dict[str, Any]:
    """Evaluate every layout x concurrency on one SKU at the nominal values (and, for the chosen points,
    at the corners). Returns arrays and the rejection counts."""
    from mi400plan import serve as core

    nL, nB = len(lay.tp), len(conc)
    tp = np.repeat(lay.tp, nB).astype(np.float64)
    pp = np.repeat(lay.pp, nB).astype(np.float64)
    ep = np.repeat(lay.ep, nB).astype(np.float64)
    dpa = np.repeat(lay.dpa, nB).astype(bool)
    b = np.tile(conc, nL)
    hw = s.hw["nominal"]
    mem = core.memory(wl, hw, tp=tp, pp=pp, dpa=dpa, batch=b)
    ev = core.evaluate(wl, hw, tp=tp, pp=pp, ep=ep, dpa=dpa, batch=b, disagg=disagg, iterations=s.iterations)
    fit = mem["kv_fit"]
    rej = {"memory": int((~mem["weights_fit"]).sum()), "kv-capacity": int((mem["weights_fit"] & ~mem["kv_fit"]).sum())}
    ok = _meets(ev, sla)
    rej["sla"] = int((fit & ~ok).sum())
    feasible = fit & ok
    binding, nearest = None, None
    if sla and not feasible.any():
        binding, nearest = _binding(ev, fit, sla, tp, pp, ep, dpa, b)
    # Largest concurrency that fits, per layout.
    fit2 = fit.reshape(nL, nB)
    max_c = np.where(fit2.any(axis=1), conc[np.where(fit2, np.arange(nB), -1).max(axis=1).clip(0)], 0)
    return dict(tp=tp, pp=pp, ep=ep, dpa=dpa, b=b, mem=mem, ev=ev, fit=fit, feasible=feasible, rejected=rej,
                valid=int(feasible.sum()), binding=binding, nearest=nearest, max_c=np.repeat(max_c, nB), sku=s,
                ranges=ranges, disagg=disagg, sla=sla, wl=wl)


def _binding(ev: dict[str, np.ndarray], fit: np.ndarray, sla: dict[str, float], tp: Any, pp: Any, ep: Any,
             dpa: Any, b: Any) -> tuple[str, str | None]:
    """Which SLA term no fitting point reaches, and the nearest fitting point (the one that comes closest
    to the binding term)."""
    if not fit.any():
        return "memory", None
    terms = []
    if "tpot_s" in sla and not (fit & (ev["tpot"] <= sla["tpot_s"])).any():
        terms.append(("tpot", ev["tpot"], sla["tpot_s"], "TPOT"))
    if "interactivity" in sla and not (fit & (ev["tps_user"] >= sla["interactivity"])).any():
        terms.append(("inter", 1.0 / ev["tps_user"], 1.0 / sla["interactivity"], "interactivity"))
    if "ttft_s" in sla and not (fit & (ev["ttft"] <= sla["ttft_s"])).any():
        terms.append(("ttft", ev["ttft"], sla["ttft_s"], "TTFT"))
    if not terms:
        return "combination", _point_text(ev, int(np.argmin(np.where(fit, ev["tpot"] * ev["ttft"], np.inf))), tp, pp, ep, dpa, b)
    key, arr, _, label = terms[0]
    i = int(np.argmin(np.where(fit, arr, np.inf)))
    return label, _point_text(ev, i, tp, pp, ep, dpa, b)


def _point_text(ev: dict[str, np.ndarray], i: int, tp: Any, pp: Any, ep: Any, dpa: Any, b: Any) -> str:
    return (f"{layout_text(tp[i], pp[i], ep[i], bool(dpa[i]))} at concurrency {int(b[i])}: TPOT "
            f"{ev['tpot'][i] * 1e3:.1f} ms ({ev['tps_user'][i]:.1f} tok/s/user), TTFT {ev['ttft'][i] * 1e3:,.0f} ms, "
            f"{ev['out_tps_gpu'][i]:,.0f} tok/s/GPU")


def _rank_by(rank_by: str | None, prices: list[float | None]) -> str:
    """``--rank-by`` checked against the prices, or the default rule (``serve_rank``)."""
    if rank_by is None:
        return default_rank_by(prices)
    key = rank_by.strip().lower()
    if key not in RANK_BY:
        raise UsageError(f"--rank-by: unknown order {rank_by!r}; known: {', '.join(RANK_BY)}")
    if key == "cost" and not all(p is not None for p in prices):
        raise UsageError("--rank-by cost needs a price per GPU-hour for every SKU",
                         hint="give --gpu-hour-cost, or rank by tok-per-gpu or ttft")
    return key


def _rank_key(ev: dict[str, np.ndarray], res: dict[str, Any], idx: np.ndarray) -> np.ndarray:
    """``idx`` ordered best first under ``res["rank_by"]`` (``serve_rank``), then the ties of ``ORDER_TIES``."""
    primary = rank_score(ev, res.get("rank_by", "tok-per-gpu"), res["sku"].info.gpu_hour_cost)[idx]
    cols = (res["b"][idx], res["dpa"][idx], res["ep"][idx], res["pp"][idx], res["tp"][idx], ev["gpus"][idx],
            ev["tpot"][idx], -ev["out_tps_gpu"][idx], -primary)
    return idx[np.lexsort(cols)]


def _pick_points(res: dict[str, Any], top: int, sla: dict[str, float]) -> np.ndarray:
    from mi400plan.serve import pareto_front

    ev = res["ev"]
    idx = np.nonzero(res["feasible"])[0]
    if not len(idx):
        return idx
    if sla:
        # Best first, one row per layout (its best concurrency): the next row is a different deployment.
        ranked = _rank_key(ev, res, idx)
        key = np.stack([res[k][ranked] for k in ("tp", "pp", "ep", "dpa")], axis=1)
        _, first = np.unique(key, axis=0, return_index=True)
        return ranked[np.sort(first)][:top]
    # Ties on both axes: keep the best-ranked of the tied points first.
    ranked = _rank_key(ev, res, idx)
    front = ranked[pareto_front(ev["tps_user"][ranked], ev["out_tps_gpu"][ranked])]
    if len(front) <= top:
        return front
    pick = np.unique(np.round(np.linspace(0, len(front) - 1, top)).astype(int))
    return front[pick]


MAX_CURVE_POINTS = 256


def _curve(name: str, res: dict[str, Any]) -> Curve:
    """The SKU's Pareto front over every point that fits (whatever the SLA), thinned to at most
    ``MAX_CURVE_POINTS``."""
    from mi400plan.serve import pareto_front

    ev = res["ev"]
    idx = np.nonzero(res["fit"])[0]
    if not len(idx):
        return Curve(sku=name, tokens_per_s_per_user=[], tokens_per_s_per_gpu=[])
    front = idx[pareto_front(ev["tps_user"][idx], ev["out_tps_gpu"][idx])][::-1]
    if len(front) > MAX_CURVE_POINTS:
        front = front[np.unique(np.round(np.linspace(0, len(front) - 1, MAX_CURVE_POINTS)).astype(int))]
    return Curve(sku=name, tokens_per_s_per_user=[round(float(x), 4) for x in ev["tps_user"][front]],
                 tokens_per_s_per_gpu=[round(float(x), 4) for x in ev["out_tps_gpu"][front]])


def _bound(d: dict[str, float]) -> str:
    comm = d["tp"] + d["ep"] + d["pp"]
    parts = {"memory": d["memory_bound"], "compute": d["compute_bound"], "communication": comm,
             "overhead": d["kernel_overhead"]}
    return max(parts, key=lambda k: parts[k])


def _rows(wl: Any, s: _Sku, res: dict[str, Any], top: int, sla: dict[str, float], disagg: bool,
          gpus: int) -> list[ServeRow]:
    from mi400plan import serve as core

    idx = _pick_points(res, top, sla)
    if not len(idx):
        return []
    ev, mem = res["ev"], res["mem"]
    sel = {k: res[k][idx] for k in ("tp", "pp", "ep", "dpa", "b")}
    corner_ev = {}
    if res["ranges"]:
        for case in CORNERS:
            corner_ev[case] = core.evaluate(wl, s.hw[case], tp=sel["tp"], pp=sel["pp"], ep=sel["ep"], dpa=sel["dpa"],
                                            batch=sel["b"], disagg=disagg, iterations=s.iterations)
    rows = []
    for j, i in enumerate(idx):
        f = {k: float(v[i]) for k, v in ev.items()}
        d = DecodeBreakdown(
            weights=f["d_weights"], attention=f["d_attention"], elementwise=f["d_elementwise"],
            kernel_overhead=f["d_overhead"], tp=f["d_tp"], ep=f["d_ep"], pp=f["d_pp"], lm_head=f["d_head"],
            draft=f["draft"], step=f["t_step"], compute_bound=f["compute_bound_step"],
            memory_bound=f["memory_bound_step"], weight_bytes_per_gpu=f["weight_bytes"], kv_bytes_per_gpu=f["kv_bytes"])
        p = PrefillBreakdown(
            weights=f["p_weights"], attention=f["p_attention"], elementwise=f["p_elementwise"],
            kernel_overhead=f["p_overhead"], tp=f["p_tp"], ep=f["p_ep"], pp=f["p_pp"], lm_head=f["p_head"],
            prefill=f["t_prefill"], queue=f["queue"], kv_transfer=f["kv_transfer"])
        g = int(res["tp"][i] * res["pp"][i])
        lay = ServeLayout(tp=int(res["tp"][i]), pp=int(res["pp"][i]), ep=int(res["ep"][i]),
                          dp_attention=bool(res["dpa"][i]), gpus_per_replica=g,
                          replicas=gpus // g, disaggregated=disagg,
                          prefill_gpus_per_decode_replica=f["prefill_replicas"] * g if disagg else 0.0)
        m = ServeMemory(weights=float(mem["weights"][i]), kv_cache=float(mem["kv_cache"][i]),
                        activations=float(mem["activations"][i]), reserve=float(mem["reserve"][i]),
                        total=float(mem["total"][i]), usable=float(mem["usable"][i]),
                        max_concurrency=int(res["max_c"][i]))
        rng: dict[str, Span] = {}
        meets = bool(_meets({k: ev[k][i:i + 1] for k in ("tpot", "ttft", "tps_user")}, sla)[0]) if sla else None
        flips = False
        if corner_ev:
            for key, name in (("out_tps_gpu", "tokens_per_s_per_gpu"), ("tpot", "tpot_s"), ("ttft", "ttft_s")):
                vals = [float(corner_ev[c][key][j]) for c in CORNERS]
                rng[name] = Span(low=min(vals), nominal=f[key], high=max(vals))
            if sla:
                verdicts = {bool(_meets({k: corner_ev[c][k][j:j + 1] for k in ("tpot", "ttft", "tps_user")}, sla)[0])
                            for c in CORNERS}
                flips = len(verdicts | {bool(meets)}) > 1
        notes = []
        if m.max_concurrency == int(res["b"].max()):  # the largest concurrency searched fits: a lower bound
            notes.append(f"KV room for at least {m.max_concurrency:,} sequences (the largest concurrency searched)")
        rows.append(ServeRow(
            sku=s.name, rank=j + 1, layout=lay, concurrency=int(res["b"][i]), gpus=f["gpus"],
            tokens_per_s_per_gpu=f["out_tps_gpu"], total_tokens_per_s_per_gpu=f["total_tps_gpu"],
            tokens_per_s_per_user=f["tps_user"], ttft_s=f["ttft"], ttft_median_s=f["ttft_median"],
            tpot_s=f["tpot"], requests_per_s=f["requests_per_s"],
            prefill_share=f["rho"], tokens_per_step=f["tokens_per_step"],
            bound=_bound({"memory_bound": d.memory_bound, "compute_bound": d.compute_bound, "tp": d.tp, "ep": d.ep,
                          "pp": d.pp, "kernel_overhead": d.kernel_overhead}),
            memory_bytes=m, decode_s=d, prefill_s=p, ranges=rng, meets_sla=meets, sla_flips=flips, notes=notes,
        ))
    return rows


def _economics(r: ServeRow, info: SkuInfo, input_len: int) -> dict[str, Any]:
    """$/Mtok from $/GPU-hour: output tokens carry the decode share of GPU time, input tokens the prefill
    share; tokens/s per MW of rack wall power from the rack power model."""
    out: dict[str, Any] = {}
    if info.gpu_hour_cost is not None:
        per_s = info.gpu_hour_cost / HOUR
        out["cost_per_mtok_output"] = per_s * (1.0 - r.prefill_share) / r.tokens_per_s_per_gpu * 1e6
        in_tps = r.total_tokens_per_s_per_gpu - r.tokens_per_s_per_gpu
        out["cost_per_mtok_input"] = per_s * r.prefill_share / in_tps * 1e6 if in_tps > 0 else None
    if info.gpus_per_mw is not None:
        out["output_tokens_per_s_per_mw"] = r.tokens_per_s_per_gpu * info.gpus_per_mw
    return out


def _level_mask(res: dict[str, Any], ev: dict[str, np.ndarray], level: float) -> np.ndarray:
    """Points that fit, meet the SLA's TPOT and TTFT bounds and give at least ``level`` tokens/s/user. The
    SLA's own interactivity floor is replaced by ``level``: a level below it shows the search without that
    floor (what the SKU does at the looser level), a level above it is the stricter of the two anyway."""
    sla = {k: v for k, v in res["sla"].items() if k != "interactivity"}
    return res["fit"] & _meets(ev, sla) & (ev["tps_user"] >= level)


def _best_at(res: dict[str, Any], ev: dict[str, np.ndarray], level: float, rank_by: str) -> float | None:
    """The best value of ``rank_by``'s score at ``level`` (``serve_rank.score``: higher is better)."""
    ok = _level_mask(res, ev, level)
    if not ok.any():
        return None
    return float(rank_score(ev, rank_by, res["sku"].info.gpu_hour_cost)[ok].max())


def _shown(v: float | None, rank_by: str) -> float | None:
    return None if v is None else rank_shown(v, rank_by)


def _compare(per_sku: dict[str, dict[str, Any]], rank_by: str = "tok-per-gpu") -> tuple[list[Comparison], list[str]]:
    """Each SKU's best output tokens/s/GPU and lowest $/Mtok output at each interactivity level (each its own
    optimum over the points at that level, ``_level_mask``), nominal and at the corners (the whole search
    re-run at the pessimistic and optimistic ends); the leader is the best under ``rank_by``, and a leader
    that changes inside the ranges is flagged."""
    from mi400plan import serve as core

    corner: dict[str, dict[str, dict[str, np.ndarray]]] = {}
    for name, res in per_sku.items():
        if not res["ranges"]:
            continue
        s = res["sku"]
        corner[name] = {c: core.evaluate(res["wl"], s.hw[c], tp=res["tp"], pp=res["pp"],
                                         ep=res["ep"], dpa=res["dpa"], batch=res["b"], disagg=res["disagg"],
                                         iterations=s.iterations)
                        for c in CORNERS}
    sla_floor = next((r["sla"].get("interactivity") for r in per_sku.values()), None)
    out, flips = [], []
    for level in LEVELS:
        best = {n: _best_at(r, r["ev"], level, "tok-per-gpu") for n, r in per_sku.items()}
        if all(v is None for v in best.values()):
            continue
        priced = all(r["sku"].info.gpu_hour_cost is not None for r in per_sku.values())
        cost = {n: _shown(_best_at(r, r["ev"], level, "cost"), "cost") if priced else None
                for n, r in per_sku.items()}
        score = {n: _best_at(r, r["ev"], level, rank_by) for n, r in per_sku.items()}
        at = {n: [v for c in CORNERS if (v := _best_at(r, corner[n][c], level, rank_by)) is not None]
              for n, r in per_sku.items() if n in corner}
        tps = {n: [v for c in CORNERS if (v := _best_at(r, corner[n][c], level, "tok-per-gpu")) is not None]
               for n, r in per_sku.items() if n in corner}
        low = {n: min(tps[n]) if tps.get(n) else None for n in per_sku}
        high = {n: max(tps[n]) if tps.get(n) else None for n in per_sku}
        ranked = sorted((v, n) for n, v in score.items() if v is not None)
        leader = ranked[-1][1] if ranked else None
        flip = False
        if leader is not None and corner:
            worst_lead = min(at.get(leader) or [-np.inf])
            for n in per_sku:
                rival = max(at.get(n) or [-np.inf])
                if n != leader and rival > worst_lead:
                    flip = True
                    flips.append(f"at {level:g} tok/s/user {leader} leads {n} by {rank_by} at the nominal values, but "
                                 f"{n} at its best corner ({_unit(rival, rank_by)}) beats {leader} at its worst "
                                 f"({_unit(worst_lead, rank_by)})")
        out.append(Comparison(interactivity=level, best=best, cost_per_mtok_output=cost, low=low, high=high,
                              leader=leader, flips=flip, below_sla=sla_floor is not None and level < sla_floor))
    return out, flips


def _unit(v: float, rank_by: str) -> str:
    if not np.isfinite(v):
        return "no point"
    x = rank_shown(v, rank_by)
    return {"cost": f"${x:,.3f}/Mtok", "ttft": f"{x * 1e3:,.0f} ms TTFT"}.get(rank_by, f"{x:,.0f} tok/s/GPU")
