"""``cost``: all-in cost per GPU-hour, TCO per dense PFLOP/s-hour and TFLOP/s per watt of systems.

The cost model itself (sites, systems, cost per GPU-hour, run energy, facility cost, serving economics)
is the core ``mi400plan.cost``; its entry points are re-exported here for existing callers.
"""

from __future__ import annotations

from typing import Any

# The cost model lives in the core ``mi400plan.cost``; this module orchestrates the ``cost`` command.
from mi400plan.cost import (
    SITE_FLAGS,
    CostOverrides,
    GpuHourModel,
    _check_flag,
    _rng,
    capital_recovery_factor,
    cost_per_mtok,
    gpu_hour_model,
    load_site,
    resolve_system,
    tokens_per_s_per_mw,
)
from mi400plan.errors import UsageError
from mi400plan.results.cost import CostInput, CostResult, CostRow, PerGpuHour
from mi400plan.results.rack import Range
from mi400plan.specs.common import UNCERTAIN_STATUSES, Estimate
from mi400plan.specs.cost import CostProfile, SiteCost
from mi400plan.units import PFLOPS, TFLOPS

PRECISIONS = ("fp4", "fp6", "fp8", "bf16")
CORNER_NAMES = ("cheapest", "nominal", "dearest")

SEED_002_NOTE = (
    "Seed 002 (SemiAnalysis, June 2025): its 'TCO per PFLOPS' rows are capex only (capex per GPU-hour / "
    "dense PFLOP/s: 1.54 / 9 = 0.17 for B200 FP4), with no power, facility or operating cost; its "
    "amortization is not stated (all five capex-per-hour rows follow from 0.3009 of capex per year, e.g. "
    "a 5-year annuity at 15.4%); its text's 'MI355X TCO 33% lower than HGX B200' does not follow from its "
    "table (capex per GPU-hour 0.85 vs 1.54 is 45% lower); its TFLOP/s per watt uses chip TDP only."
)


def _input(name: str, est: Estimate, unit: str, origin: str, given: bool) -> CostInput:
    lo, nom, hi = est.triple(name)
    return CostInput(field=name, value=_rng(lo, nom, hi), unit=unit, status="given" if given else est.status,
                     source=list(est.source), origin=origin)


def _row(cat: Any, m: GpuHourModel) -> tuple[CostRow, dict[str, list[list[float]]]]:
    """The output row of one system and its metric matrices (for the ranking-flip check)."""
    prof, sysc = m.profile, m.profile.system
    assert sysc is not None
    accel = cat.get("accelerators", sysc.sku).spec
    g = m.breakdown
    matrices: dict[str, list[list[float]]] = {"per GPU-hour": [[g[s][k].total for k in range(3)] for s in range(3)]}
    tflops: dict[str, float] = {}
    tco: dict[str, Range] = {}
    capex_pf: dict[str, float] = {}
    per_w_tdp: dict[str, float] = {}
    per_w_wall: dict[str, float] = {}
    for p in PRECISIONS:
        est = accel.compute.peak_flops(p)
        if not est.known:
            continue
        f_lo, f_nom, f_hi = (x / PFLOPS for x in est.triple(f"{accel.name} {p} dense"))
        pick = (f_hi, f_nom, f_lo)  # the cheap corner has the most FLOP/s
        mat = [[g[s][k].total / pick[k] for k in range(3)] for s in range(3)]
        matrices[f"TCO per {p.upper()} PFLOP/s-hour"] = mat
        tflops[p] = f_nom * PFLOPS / TFLOPS
        tco[p] = _rng(mat[0][0], mat[1][1], mat[2][2])
        capex_pf[p] = g[1][1].capex / f_nom
        if m.power.tdp_w:
            per_w_tdp[p] = tflops[p] / m.power.tdp_w
        per_w_wall[p] = tflops[p] / m.power.provisioned[1]
    cur = prof.currency
    inputs = [_input("server_capex_per_gpu", sysc.server_capex_per_gpu, f"{cur}/GPU", prof.name, False)]
    if sysc.network_capex_per_gpu is not None:
        inputs.append(_input("network_capex_per_gpu", sysc.network_capex_per_gpu, f"{cur}/GPU", prof.name, False))
    if sysc.wall_power_per_gpu_w is not None:
        inputs.append(_input("wall_power_per_gpu_w", sysc.wall_power_per_gpu_w, "W", prof.name, False))
    estimates = [i.field for i in inputs if i.status in UNCERTAIN_STATUSES or i.value.low != i.value.high]
    if sysc.rack is not None:
        estimates.append(f"rack {sysc.rack} component powers (see `mi400plan rack {sysc.rack}`)")
    nb = m.nominal
    row = CostRow(
        system=prof.name, display_name=prof.display_name, sku=accel.name, rack=sysc.rack, currency=cur,
        capex_year=prof.year, capex_per_gpu=_rng(*m.capex), network=m.network, power_basis=m.power.basis,
        wall_power_per_gpu_w=_rng(*m.power.at_load[1]), provisioned_power_per_gpu_w=_rng(*m.power.provisioned),
        tdp_w=m.power.tdp_w,
        per_gpu_hour=PerGpuHour(capex=nb.capex, facility=nb.facility, operating=nb.operating, energy=nb.energy,
                                total=_rng(g[0][0].total, nb.total, g[2][2].total)),
        capex_per_gpu_hour=_rng(g[0][0].capex, nb.capex, g[2][2].capex),
        dense_tflops=tflops, tco_per_pflops_hour=tco, capex_per_pflops_hour=capex_pf,
        tflops_per_w_tdp=per_w_tdp, tflops_per_w_wall=per_w_wall, estimates=estimates, inputs=inputs,
    )
    return row, matrices


def ranking_flips(names: list[str], matrices: list[dict[str, list[list[float]]]], currency: str) -> list[str]:
    """Pairs whose order by a metric can reverse inside the estimate ranges.

    Both systems are compared at the same site corner (cheapest, nominal, dearest site inputs), each
    over its own system range: A (cheaper at nominal) and B flip when, at some site corner, A's
    dearest value exceeds B's cheapest.
    """
    out = []
    metrics = [k for k in matrices[0] if all(k in m for m in matrices)] if matrices else []
    for metric in metrics:
        for i in range(len(names)):
            for j in range(i + 1, len(names)):
                an, a_m, bn, b_m = names[i], matrices[i][metric], names[j], matrices[j][metric]
                if a_m[1][1] > b_m[1][1]:
                    an, a_m, bn, b_m = bn, b_m, an, a_m
                for s in range(3):
                    if a_m[s][2] > b_m[s][0]:
                        out.append(
                            f"{metric}: {an} is cheaper than {bn} at nominal ({a_m[1][1]:.3g} vs {b_m[1][1]:.3g} {currency}) "
                            f"but the order can reverse inside the estimate ranges ({an} up to {a_m[s][2]:.3g}, "
                            f"{bn} down to {b_m[s][0]:.3g} at the {CORNER_NAMES[s]} site inputs)"
                        )
                        break
    return out


def _site_inputs(site_prof: CostProfile, site: SiteCost, given: set[str]) -> list[CostInput]:
    cur = site_prof.currency
    return [
        _input(k, getattr(site, k), unit.format(cur=cur), flag if k in given else site_prof.name, k in given)
        for k, (flag, unit, _) in SITE_FLAGS.items()
    ]


def formula_lines(site: SiteCost) -> list[str]:
    r, n = site.cost_of_capital.nominal, site.depreciation_years.nominal
    assert r is not None and n is not None
    crf = capital_recovery_factor(r, n)
    fac = (
        "facility = facility capex per MW x provisioned MW per GPU x CRF(r, facility life) / 8760 "
        "+ operating cost per kW-month x provisioned kW per GPU / 730"
        if site.facility == "owned"
        else "facility = colocation per kW-month x provisioned kW per GPU / 730 (no facility capex, no separate O&M)"
    )
    return [
        f"capex = (server + network capex per GPU) x CRF(r, n) / 8760 h; CRF = r / (1 - (1 + r)^-n) "
        f"(capital recovery factor, annual payments; NREL LCOE documentation); r = {r:g}, n = {n:g} y: CRF = {crf:.4f}",
        fac,
        "energy = wall kW per GPU at the average GPU load x PUE x electricity price per kWh",
        "provisioned = rack wall power per GPU at full GPU load; TCO per PFLOP/s-hour = all-in per GPU-hour / dense PFLOP/s",
    ]


def _serving(row: CostRow, tokens_per_s_per_gpu: float, pue: float) -> CostRow:
    t = row.per_gpu_hour.total
    return row.model_copy(update={
        "cost_per_mtok": _rng(*(cost_per_mtok(x, tokens_per_s_per_gpu) for x in (t.low, t.nominal, t.high))),
        "tokens_per_s_per_mw": tokens_per_s_per_mw(tokens_per_s_per_gpu, row.provisioned_power_per_gpu_w.nominal, pue),
    })


def cost(cat: Any, names: list[str], *, site: str | None = None, overrides: CostOverrides | None = None,
         tokens_per_s_per_gpu: float | None = None) -> CostResult:
    """Compare systems (cost profile, rack or accelerator names) at one site.

    With ``tokens_per_s_per_gpu`` (a serving rate, e.g. from a benchmark) each row also gets its cost
    per million tokens and tokens/s per provisioned MW of facility power.
    """
    if not names:
        raise UsageError("give at least one system, rack or accelerator", hint="`mi400plan profiles list --kind costs`")
    ov = overrides or CostOverrides()
    if ov.capex_per_gpu is not None:
        _check_flag("--capex-per-gpu", ov.capex_per_gpu, False)
        if len(names) > 1:
            raise UsageError("--capex-per-gpu prices one system; give one name with it")
    if tokens_per_s_per_gpu is not None:
        _check_flag("--tokens-per-s", tokens_per_s_per_gpu, False)
    site_prof, site_v, given = load_site(cat, site, ov)
    profs = [resolve_system(cat, n) for n in names]
    if len({p.name for p in profs}) != len(profs):
        raise UsageError("the same system is named twice", hint=", ".join(p.name for p in profs))
    rows, mats = [], []
    for p in profs:
        row, mat = _row(cat, gpu_hour_model(cat, p, site_prof, site_v, ov.capex_per_gpu))
        if ov.capex_per_gpu is not None:
            row = row.model_copy(update={"estimates": [e for e in row.estimates if "capex" not in e]})
        if tokens_per_s_per_gpu is not None:
            row = _serving(row, tokens_per_s_per_gpu, site_v.pue.nominal or 1.0)
        rows.append(row)
        mats.append(mat)
    flips = ranking_flips([r.system for r in rows], mats, site_prof.currency) if len(rows) > 1 else []
    warnings = list(flips)
    for r in rows:
        if r.estimates:
            warnings.append(f"{r.system}: rests on estimates: {', '.join(r.estimates)}")
    uncertain = [i.field for i in _site_inputs(site_prof, site_v, given) if i.status in UNCERTAIN_STATUSES]
    if uncertain:
        warnings.append(f"site {site_prof.name}: assumed or estimated: {', '.join(uncertain)}")
    notes = []
    if any("S002" in e.source for p in profs for e in [p.system.server_capex_per_gpu]):  # type: ignore[union-attr]
        notes.append(SEED_002_NOTE)
    if site_prof.year != max(p.year for p in profs) or any(p.year != profs[0].year for p in profs):
        notes.append("money figures are compared at their own price years without inflation adjustment")
    return CostResult(
        site=site_prof.name, site_year=site_prof.year, currency=site_prof.currency, facility=site_v.facility,
        gpu_load=site_v.gpu_load.nominal or 0.0, pue=site_v.pue.nominal or 0.0, formula=formula_lines(site_v),
        site_inputs=_site_inputs(site_prof, site_v, given), rows=rows, ranking_flips=flips, notes=notes,
        warnings=warnings, tokens_per_s_per_gpu=tokens_per_s_per_gpu,
    )
