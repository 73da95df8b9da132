"""The hardware model: an accelerator profile, with its fabrics and rack, as the step-time search sees it.

``build_sku`` reads ``accelerators``, ``fabrics`` and ``racks`` profiles into a ``search.Hardware`` at the
nominal values or at a corner of their estimate ranges (``pessimistic``/``optimistic``); ``sweep``,
``deadline``, ``budget``, ``largest``, ``validate`` and ``calibrate`` all price runs on what it returns.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mi400plan.errors import MissingValueError, UsageError
from mi400plan.records import record
from mi400plan.results.sweep import SkuEfficiency, SkuSummary
from mi400plan.units import US
from mi400plan.lowp import PrecisionRefusal


@record
class Sku:
    name: str
    hw: Any  # search.Hardware
    eff: SkuEfficiency
    varied: tuple[str, ...] = ()  # inputs with an estimate range (text), applied at the corners
    stack: Any = None  # stacks.ResolvedStack the SKU is priced on (None: its vendor has no stack)


@record
class SkuOverrides:
    """Measured values that replace a SKU profile's (``sweep --matmul-efficiency`` and friends)."""

    matmul_efficiency: float | None = None
    hbm_efficiency: float | None = None
    gemm_overhead_us: float | None = None

    def as_kwargs(self) -> dict[str, float | None]:
        """The keyword arguments of ``build_sku``."""
        return {"matmul_efficiency": self.matmul_efficiency, "hbm_efficiency": self.hbm_efficiency,
                "gemm_overhead_us": self.gemm_overhead_us}


CORNERS = ("pessimistic", "optimistic")
_FABRIC_CASE = {"nominal": "nominal", "pessimistic": "slow", "optimistic": "fast"}


def _tiers(cat: Any, fabric_name: str | None, what: str, case: str = "nominal") -> tuple[Any, Any]:
    """(comms tier parameters at ``case``, Fabric spec) for a fabric profile name."""
    from mi400plan import comms

    if not fabric_name:
        raise MissingValueError(f"{what} fabric is not named in the accelerator profile")
    fab = cat.get("fabrics", fabric_name).spec
    return comms.TierParams.from_fabric(fab, _FABRIC_CASE[case]), fab


def gpus_per_rack(cat: Any, acc_name: str, domain: int) -> tuple[int, str]:
    """GPUs in the first (by name) rack profile built from ``acc_name`` that is not a variant of another."""
    for name in cat.names_with("racks", "sku", acc_name):
        try:
            r = cat.get("racks", name).spec
        except Exception:  # noqa: BLE001 - a broken rack profile is reported by `profiles validate`
            continue
        if getattr(r, "sku", None) == acc_name and getattr(r, "variant_of", None) in (None, ""):
            return int(r.gpus), f"rack profile {r.name}"
    return domain, "scale-up domain (no rack profile for this SKU)"


def pick(est: Any, what: str, case: str, *, higher_is_better: bool) -> float:
    """``est`` at a corner: nominal, or the low/high end that is worse (pessimistic) or better (optimistic)."""
    lo, nom, hi = est.triple(what)
    if case == "nominal":
        return nom
    return hi if (case == "optimistic") == higher_is_better else lo


def _span_text(label: str, est: Any, scale: float, unit: str, digits: int = 2) -> str | None:
    if not est.is_range:
        return None
    return f"{label} {est.lo / scale:.{digits}f}..{est.hi / scale:.{digits}f}{unit} ({est.status})"


def _gemm_fields(acc: Any, precision: str, case: str, eff: Any = None) -> dict[str, Any]:
    """Shape-aware GEMM / attention inputs of ``search.Hardware`` (``mi400plan.gemm``): compute units
    (0 where not disclosed: no wave quantization), the BF16 peak and the measured flash-attention
    efficiency (0 where the profile has none: ``search.ATTN_OVER_MATMUL`` rule), operand width, and
    the host time per local-expert GEMM (0 where the profile has none: no host term)."""
    eff = eff if eff is not None else acc.efficiency  # the stack-adjusted [efficiency] (stacks.stack_efficiency)
    units = acc.silicon.compute_units
    bf16 = acc.compute.peak_flops("bf16")
    att = eff.attention
    mm16 = eff.matmul("bf16")
    host = eff.expert_host_us
    return {
        "matmul_bf16_eff": pick(mm16, f"{acc.name} bf16 matmul efficiency", case, higher_is_better=True)
        if mm16.known else 0.0,
        "units": int(units.nominal) if units.known else 0,
        "peak_bf16_flops": pick(bf16, f"{acc.name} dense bf16 peak", case, higher_is_better=True) if bf16.known else 0.0,
        "attn_eff": pick(att, f"{acc.name} attention efficiency", case, higher_is_better=True) if att.known else 0.0,
        **_operand_fields(precision),
        "expert_host_s": pick(host, f"{acc.name} expert host time", case, higher_is_better=False) * US
        if host.known else 0.0,
    }


def _operand_fields(precision: str) -> dict[str, float]:
    """GEMM input bytes per element and activation-cast bytes per element of a training precision
    (``mi400plan.lowp``: the format's bytes with scales; BF16: 2 and no cast)."""
    from mi400plan.lowp import recipe

    lp = recipe(precision)
    return {"operand_bytes": lp.element_bytes, "cast_bytes": lp.cast_bytes} if lp else {"operand_bytes": 2.0}


def build_sku(
    cat: Any,
    name: str,
    precision: str,
    *,
    matmul_efficiency: float | None = None,
    hbm_efficiency: float | None = None,
    gemm_overhead_us: float | None = None,
    case: str = "nominal",
    offload: bool = False,
    stack: Any = None,
) -> Sku:
    """A SKU as the search sees it, at ``case``: ``nominal``, or a corner of its estimate ranges.

    ``pessimistic`` takes the low end of peak FLOP/s, matmul and HBM efficiency, HBM bandwidth and
    capacity, the high end of the GEMM overhead, and the ``slow`` fabric case (``comms.TierParams
    .from_fabric``: low bandwidth and efficiency, high latency); ``optimistic`` the opposite ends.
    Values given on the command line are measurements and stay fixed at every corner. ``offload``
    (activation offloading asked for): the SKU's host-link bandwidth is required, ``MissingValueError``
    without it. ``stack`` (a ``stacks.StackRequest``; None: the vendor default) moves the
    software-dependent efficiencies (``stacks.stack_efficiency``).
    """
    from mi400plan.search import Hardware
    from mi400plan.stacks import resolve_stack, stack_efficiency

    if case not in ("nominal",) + CORNERS:
        raise ValueError(f"case must be nominal, pessimistic or optimistic, got {case!r}")
    from mi400plan import lowp

    acc = cat.get("accelerators", name).spec
    refused = lowp.refusal(precision, acc)
    if refused is not None:
        raise refused
    train_precision, precision = precision, lowp.gemm_precision(precision)
    peak_est = acc.compute.peak_flops(precision)
    if not peak_est.known:
        others = [p for p in ("bf16", "fp8") if p != precision and acc.compute.peak_flops(p).known]
        src = f" (sources: {', '.join(peak_est.source)})" if peak_est.source else ""
        raise MissingValueError(
            f"{acc.name} dense {precision} peak is not disclosed{src}; the planner will not invent it",
            hint=(f"{acc.name} discloses {others[0]}: use --precision {others[0]}, or " if others else "")
            + f"give compute.{precision}_dense_tflops in a user profile (--profiles DIR)",
        )
    peak = pick(peak_est, f"{acc.name} dense {precision} peak", case, higher_is_better=True)
    resolved = resolve_stack(cat, acc, stack)
    eff = stack_efficiency(acc, resolved)
    mm_est = (lowp.matmul_estimate(eff.matmul("fp8"), train_precision) if lowp.recipe(train_precision)
              else eff.matmul(precision))
    varied = [_span_text(f"peak {precision}", peak_est, 1e12, " TFLOP/s", 0)]
    if matmul_efficiency is not None:
        mm, mm_status, mm_src = matmul_efficiency, "measured", "user (--matmul-efficiency)"
    else:
        key = "fp8" if lowp.recipe(train_precision) else precision
        what = f"{acc.name} achievable {train_precision} matmul efficiency ([efficiency] matmul_{key})"
        mm_est.require(what)
        mm = pick(mm_est, what, case, higher_is_better=True)
        mm_status, mm_src = mm_est.status, ", ".join(mm_est.source)
        varied.append(_span_text(f"matmul {precision}", mm_est, 1.0, ""))
    if hbm_efficiency is not None:
        hb, hb_status = hbm_efficiency, "measured"
    else:
        what = f"{acc.name} achievable HBM bandwidth fraction ([efficiency] hbm_bandwidth)"
        eff.hbm_bandwidth.require(what)
        hb = pick(eff.hbm_bandwidth, what, case, higher_is_better=True)
        hb_status = eff.hbm_bandwidth.status
        varied.append(_span_text("HBM efficiency", eff.hbm_bandwidth, 1.0, ""))
    if gemm_overhead_us is not None:
        ovh = gemm_overhead_us
    else:
        what = f"{acc.name} per-GEMM overhead ([efficiency] gemm_overhead_us)"
        eff.gemm_overhead_us.require(what)
        ovh = pick(eff.gemm_overhead_us, what, case, higher_is_better=False)
        varied.append(_span_text("GEMM overhead", eff.gemm_overhead_us, 1.0, " us", 0))
    if eff.expert_host_us.known:
        varied.append(_span_text("expert host time", eff.expert_host_us, 1.0, " us", 0))
    for label, v in (("matmul efficiency", mm), ("HBM efficiency", hb)):
        if not 0 < v <= 1:
            raise UsageError(f"{label} must be a fraction in (0, 1], got {v}")
    up, up_fab = _tiers(cat, acc.interconnect.scale_up_fabric, f"{acc.name} scale-up", case)
    out, out_fab = _tiers(cat, acc.interconnect.scale_out_fabric, f"{acc.name} scale-out", case)
    for tier, fab in (("scale-up", up_fab), ("scale-out", out_fab)):
        varied.append(_span_text(f"{tier} bandwidth", fab.bw_per_dir_bytes_per_s, 1e9, " GB/s", 0))
        if fab.hop_latency_us.known:
            varied.append(_span_text(f"{tier} latency", fab.hop_latency_us, 1.0, " us", 1))
        if fab.efficiency.known:
            varied.append(_span_text(f"{tier} efficiency", fab.efficiency, 1.0, ""))
    domain = int(up_fab.domain_size.require(f"{up_fab.name} domain size"))
    per_rack, basis = gpus_per_rack(cat, acc.name, domain)
    cap_est = acc.hbm_bytes
    cap_est.require(f"{acc.name} HBM capacity")
    bw_est = acc.memory.bandwidth_bytes_per_s
    bw_est.require(f"{acc.name} HBM bandwidth")
    varied.append(_span_text("HBM capacity", cap_est, 1e9, " GB", 0))
    varied.append(_span_text("HBM bandwidth", bw_est, 1e12, " TB/s", 1))
    hw = Hardware(
        name=acc.name,
        peak_flops=peak,
        matmul_eff=mm,
        gemm_overhead_s=ovh * US,
        hbm_bytes=pick(cap_est, f"{acc.name} HBM capacity", case, higher_is_better=True),
        hbm_bw=pick(bw_est, f"{acc.name} HBM bandwidth", case, higher_is_better=True),
        hbm_eff=hb,
        scale_up=up,
        scale_out=out,
        domain=domain,
        gpus_per_rack=per_rack,
        host_bw=_host_bw(acc, offload),
        **_gemm_fields(acc, train_precision, case, eff),
        **_stack_fields(resolved),
    )
    info = SkuEfficiency(
        sku=acc.name, peak_flops=peak, matmul=mm, matmul_status=mm_status, matmul_source=mm_src,
        hbm=hb, hbm_status=hb_status, gemm_overhead_s=ovh * US, scale_up_domain=domain,
        gpus_per_rack=per_rack, rack_basis=basis,
        stack=resolved.name if resolved else None, stack_label=resolved.label() if resolved else None,
        stack_basis=resolved.basis if resolved else None, stack_settings=dict(resolved.settings) if resolved else {},
    )
    return Sku(acc.name, hw, info, tuple(v for v in varied if v), resolved)


def _stack_fields(resolved: Any) -> dict[str, str]:
    """The stack settings the MoE terms read (``moe_dispatch``): token dispatcher, graph scope and FP8 recipe
    (alltoall, eager and none where no stack is named, Megatron-Core's defaults), and the attention kernel
    generation that sets flash attention's rate by sequence length (``gemm.attention_half_keys``)."""
    if resolved is None:
        return {}
    return {k: resolved.settings[k] for k in ("moe_dispatcher", "cuda_graphs", "fp8_recipe", "attention_kernel")}


def _host_bw(acc: Any, offload: bool) -> float:
    """Host-link bytes/s per direction per GPU (``[interconnect] host_link_gb_per_s``); 0 when unknown.
    Activation offloading needs it: ``MissingValueError`` when ``offload`` and it is not disclosed."""
    est = acc.interconnect.host_link_gb_per_s
    if offload and not est.known:
        raise MissingValueError(
            f"{acc.name} host-link bandwidth ([interconnect] host_link_gb_per_s) is not disclosed, and "
            "--offload-layers needs it to time the activation copies; the planner will not invent it",
            hint="add host_link_gb_per_s (GB/s per direction per GPU) to a user profile (--profiles DIR), "
                 "or drop --offload-layers")
    return float(est.nominal) * 1e9 if est.known else 0.0


def expand_all(cat: Any, skus: list[str]) -> list[str]:
    """``--sku all`` (alone or among others): every accelerator in the catalog, in catalog order."""
    if any(s.strip().lower() == "all" for s in skus):
        return list(cat.names("accelerators"))
    return list(skus)


def build_all(cat: Any, skus: list[str], precision: str, **kw: Any) -> tuple[list[Sku], list[SkuSummary]]:
    """Build each SKU; with several, one that lacks a value (an undisclosed peak, no fabric) becomes an
    n/d summary row naming what is missing instead of stopping the sweep."""
    built: list[Sku] = []
    missing: list[SkuSummary] = []
    for s in skus:
        try:
            built.append(build_sku(cat, s, precision, **kw))
        except (MissingValueError, PrecisionRefusal) as exc:
            if len(skus) == 1:
                raise
            name = cat.get("accelerators", s).spec.name
            missing.append(SkuSummary(sku=name, gpus=0, step_time_s=None, tokens_per_s=None,
                                      tokens_per_s_per_gpu=None, tokens_per_s_per_rack=None, gpus_per_rack=None,
                                      mfu=None, missing=exc.message))
    if not built:
        raise MissingValueError("no SKU has the values a sweep needs: " + "; ".join(
            f"{m.sku}: {m.missing}" for m in missing))
    return built, missing


def serve_hardware(cat: Any, name: str, precision: str, case: str, *, matmul: float | None, hbm: float | None,
              model_class: str, calibrated: bool = True, stack: str | None = None) -> Any:
    """``serve.ServeHardware`` at ``case`` and the ``Sku`` it reads: ``sweep``'s SKU reading with the peak of the compute precision, and
    (``calibrated``, no efficiency given on the command line) the SKU family's InferenceX calibration for
    models of ``model_class`` on serving stack ``stack`` (``serve_calibration.stack_calibration_for``; None:
    the family's fit over every stack) in place of the profile's assumed efficiencies."""
    from mi400plan.serve import COMPUTE_PRECISION, ServeHardware

    comp = COMPUTE_PRECISION[precision]
    acc = cat.get("accelerators", name).spec
    from mi400plan.formats import format_refusal

    refused = format_refusal(precision, acc.name, acc.vendor)
    if refused is not None:
        raise refused
    peak_est = acc.compute.peak_flops(comp)
    if not peak_est.known:
        raise MissingValueError(f"{acc.name} does not disclose a dense {comp} peak (needed for --precision {precision})",
                                hint="choose a precision the SKU discloses (see `mi400plan profiles show "
                                     f"{acc.name}`), or give compute.{comp}_dense_tflops in a user profile")
    eff_prec = "bf16" if comp == "bf16" else "fp8"  # FP6/FP4 GEMMs: the FP8 efficiency (no published figure)
    sku = build_sku(cat, name, eff_prec, matmul_efficiency=matmul, hbm_efficiency=hbm, case=case)
    h = sku.hw
    peak = pick(peak_est, f"{acc.name} dense {comp} peak", case, higher_is_better=True)
    hw = ServeHardware(name=h.name, peak_flops=peak, matmul_eff=h.matmul_eff, kernel_overhead_s=h.gemm_overhead_s,
                       hbm_bytes=h.hbm_bytes, hbm_bw=h.hbm_bw, hbm_eff=h.hbm_eff, scale_up=h.scale_up,
                       scale_out=h.scale_out, domain=h.domain, units=h.units,
                       attn_peak_flops=h.attn_sku().peak_flops, attn_eff=h.attn_sku().efficiency)
    from mi400plan.serve_calibration import apply, stack_calibration_for

    cal = (stack_calibration_for(acc.architecture, model_class, stack) if calibrated and matmul is None and hbm is None
           else None)
    if cal is not None:
        if case != "nominal" and comp in cal.matmul_precisions:
            # The scale was fitted on the nominal ceiling: the calibrated product moves at a corner by the
            # fit's spread only (``apply``), as the calibrated HBM efficiency does.
            nom = build_sku(cat, name, eff_prec, case="nominal").hw
            hw = replace(hw, matmul_eff=nom.matmul_eff, attn_eff=nom.attn_sku().efficiency)
        hw = apply(hw, cal, case, comp)
    if stack is not None:
        host = cat.get("serving", stack).spec.host
        hw = replace(hw, host_overlap=False if host is None else host.overlap)
    return hw, sku
