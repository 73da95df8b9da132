"""``cost``: all-in cost per GPU-hour, TCO per dense PFLOP/s-hour and TFLOP/s per watt of systems.

Also the entry points other commands use: ``load_site`` (a site profile with command-line
overrides), ``resolve_system`` (a system cost profile from a system, rack or accelerator name) and
``gpu_hour_model`` (cost per GPU-hour and wall power per GPU of one system at one site).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from mi400plan.cost import (
    DIRECTION,
    Breakdown,
    capital_recovery_factor,
    corner,
    cost_per_mtok,
    emissions_t,
    per_gpu_hour,
    run_energy_mwh,
    tokens_per_s_per_mw,
)
from mi400plan.errors import MissingValueError, ProfileError, UnknownNameError, UsageError
from mi400plan.results.cost import CostInput, CostResult, CostRow, PerGpuHour, RunEnergy
from mi400plan.results.rack import FacilityCost, Range
from mi400plan.specs.common import UNCERTAIN_STATUSES, Estimate
from mi400plan.specs.cost import CostProfile, SiteCost
from mi400plan.units import PFLOPS, TFLOPS

DEFAULT_SITE = "us-2025"
PRECISIONS = ("fp4", "fp6", "fp8", "bf16")
CORNER_NAMES = ("cheapest", "nominal", "dearest")

# Site field -> (command-line flag, unit, zero allowed)
SITE_FLAGS: dict[str, tuple[str, str, bool]] = {
    "depreciation_years": ("--depreciation-years", "years", False),
    "cost_of_capital": ("--cost-of-capital", "fraction/year", True),
    "electricity_price_per_kwh": ("--electricity-price", "{cur}/kWh", False),
    "pue": ("--pue", "ratio", False),
    "facility_capex_per_mw": ("--facility-capex-per-mw", "{cur}/MW", False),
    "facility_life_years": ("--facility-life-years", "years", False),
    "operating_cost_per_kw_month": ("--operating-cost-per-kw-month", "{cur}/kW-month", False),
    "colocation_per_kw_month": ("--colocation-per-kw-month", "{cur}/kW-month", False),
    "network_capex_per_gpu": ("--network-capex-per-gpu", "{cur}/GPU", False),
    "gpu_load": ("--gpu-load", "fraction of TDP", False),
    "grid_kg_co2e_per_kwh": ("--grid-intensity", "kg CO2e/kWh", True),
}

SEED_002_NOTE = (
    "Seed 002 (SemiAnalysis, June 2025): its 'TCO per PFLOPS' rows are capex only (capex per GPU-hour / "
    "dense PFLOP/s: 1.54 / 9 = 0.17 for B200 FP4), with no power, facility or operating cost; its "
    "amortization is not stated (all five capex-per-hour rows follow from 0.3009 of capex per year, e.g. "
    "a 5-year annuity at 15.4%); its text's 'MI355X TCO 33% lower than HGX B200' does not follow from its "
    "table (capex per GPU-hour 0.85 vs 1.54 is 45% lower); its TFLOP/s per watt uses chip TDP only."
)


@dataclass
class CostOverrides:
    """Command-line replacements for profile values (None: keep the profile's)."""

    site: dict[str, float] = field(default_factory=dict)  # SiteCost field -> value
    facility: str | None = None  # owned | colocation
    capex_per_gpu: float | None = None  # replaces server + network capex of the (single) system


def _check_flag(flag: str, value: float, zero_ok: bool) -> None:
    if not math.isfinite(value):
        raise UsageError(f"{flag} must be a finite number, got {value:g}")
    if value < 0 or (value == 0 and not zero_ok):
        raise UsageError(f"{flag} must be {'>= 0' if zero_ok else 'above 0'}, got {value:g}")


def load_site(cat: Any, name: str | None, overrides: CostOverrides | None = None) -> tuple[CostProfile, SiteCost, set[str]]:
    """The site profile ``name`` (default ``us-2025``) with the overrides applied and checked.

    Returns (profile, site values, names of the fields given on the command line).
    """
    prof: CostProfile = cat.get("costs", name or DEFAULT_SITE).spec
    if prof.site is None:
        raise UsageError(f"cost profile {prof.name!r} is a system, not a site", hint="--site takes a site profile such as us-2025")
    ov = overrides or CostOverrides()
    update: dict[str, Any] = {}
    for key, value in ov.site.items():
        flag, _, zero_ok = SITE_FLAGS[key]
        _check_flag(flag, value, zero_ok)
        if key == "pue" and value < 1:
            raise UsageError(f"--pue must be at least 1.0 (facility energy / IT energy), got {value:g}")
        if key == "gpu_load" and value > 1:
            raise UsageError(f"--gpu-load is a fraction of TDP in (0, 1], got {value:g}")
        if key == "cost_of_capital" and value >= 1:
            raise UsageError(f"--cost-of-capital is a fraction per year (0.10 = 10%), got {value:g}")
        update[key] = Estimate.exact(value, "measured")
    if ov.facility is not None:
        if ov.facility not in ("owned", "colocation"):
            raise UsageError(f"--facility must be owned or colocation, got {ov.facility!r}")
        update["facility"] = ov.facility
    return prof, prof.site.model_copy(update=update), set(ov.site)


def _systems(cat: Any) -> list[CostProfile]:
    """Every valid system cost profile. A cost profile that cannot be read or validated is skipped with a
    warning, as a bad accelerator file is when listing SKUs: it only stops a command that names it."""
    out = []
    for n in cat.names("costs"):
        try:
            spec = cat.get("costs", n).spec
        except ProfileError as exc:
            cat.warn(f"{exc.message}; skipped")
            continue
        if spec.system is not None:
            out.append(spec)
    return out


def resolve_system(cat: Any, name: str) -> CostProfile:
    """A system cost profile by its own name, a rack profile name or an accelerator name."""
    try:
        prof: CostProfile = cat.get("costs", name).spec
    except UnknownNameError:
        prof = None  # type: ignore[assignment]
    if prof is not None:
        if prof.system is None:
            raise UsageError(f"{name!r} is a site cost profile, not a system", hint="give it with --site")
        return prof
    for kind, attr in (("racks", "rack"), ("accelerators", "sku")):
        try:
            canonical = cat.resolve(kind, name)
        except UnknownNameError:
            continue
        hits = [p for p in _systems(cat) if getattr(p.system, attr) == canonical]
        if hits:
            hits.sort(key=lambda p: (p.system.rack is None, p.name))  # a rack-backed profile first
            return hits[0]
        raise MissingValueError(
            f"no cost profile prices the {kind[:-1]} {canonical!r}; the planner will not invent its capex",
            hint="write one under costs/ in a --profiles directory (see `mi400plan profiles show b200-hgx --kind costs`)",
        )
    raise UnknownNameError("system, rack or accelerator", name, [], [p.name for p in _systems(cat)])


def _triple(est: Estimate, what: str) -> tuple[float, float, float]:
    return est.triple(what)


@dataclass(frozen=True)
class SystemPower:
    """Per-GPU wall power: at full load (provisioned) and at each site-load corner, W."""

    provisioned: tuple[float, float, float]
    at_load: tuple[tuple[float, float, float], ...]  # indexed by site corner (low, nominal, high load)
    basis: str
    tdp_w: float | None


def system_power(cat: Any, prof: CostProfile, loads: tuple[float, float, float]) -> SystemPower:
    """Wall power per GPU from the rack model (``rack.evaluate``) or the profile's per-GPU figure."""
    from mi400plan.rack import RackOptions, evaluate

    sysc = prof.system
    assert sysc is not None
    accel = cat.get("accelerators", sysc.sku).spec
    tdp = accel.power.tdp_w.nominal
    if sysc.rack is not None:
        rack = cat.get("racks", sysc.rack).spec
        overridden = accel.name != rack.sku

        def per_gpu(load: float) -> tuple[float, float, float]:
            row, _ = evaluate(rack, accel, RackOptions(gpu_load=load), sku_overridden=overridden)
            w = row.wall_power_range_w
            return (w.low / row.gpus, w.nominal / row.gpus, w.high / row.gpus)

        return SystemPower(per_gpu(1.0), tuple(per_gpu(x) for x in loads), f"rack {rack.name} wall power / {rack.gpus_in_trays} GPUs", tdp)
    assert sysc.wall_power_per_gpu_w is not None
    full = _triple(sysc.wall_power_per_gpu_w, f"{prof.name} system.wall_power_per_gpu_w")
    if tdp is None:
        raise MissingValueError(f"{accel.name} TDP is not disclosed; the load share of {prof.name}'s wall power needs it")
    # Below full load only the GPUs draw less: wall(load) = wall(full) - TDP x (1 - load).
    at = tuple(tuple(max(w - tdp * (1.0 - x), 0.0) for w in full) for x in loads)
    return SystemPower(full, at, f"{prof.name} wall_power_per_gpu_w (full load) - TDP x (1 - load)", tdp)  # type: ignore[arg-type]


def _capex(prof: CostProfile, site: SiteCost, capex_override: float | None) -> tuple[tuple[float, float, float], str]:
    sysc = prof.system
    assert sysc is not None
    if capex_override is not None:
        return (capex_override,) * 3, "given"
    server = _triple(sysc.server_capex_per_gpu, f"{prof.name} system.server_capex_per_gpu")
    if sysc.network_included:
        return server, "included"
    net_est, where = (sysc.network_capex_per_gpu, "system") if sysc.network_capex_per_gpu is not None else (site.network_capex_per_gpu, "site")
    net = _triple(net_est, "network_capex_per_gpu")
    return tuple(s + n for s, n in zip(server, net)), where  # type: ignore[return-value]


def _site_triples(site: SiteCost) -> dict[str, tuple[float, float, float]]:
    return {k: _triple(getattr(site, k), f"site {k}") for k in DIRECTION if k not in ("capex_per_gpu", "wall_w_load", "wall_w_provisioned")}


@dataclass(frozen=True)
class GpuHourModel:
    """One system at one site: the cost matrix over (site corner, system corner) and its parts."""

    profile: CostProfile
    power: SystemPower
    capex: tuple[float, float, float]
    network: str
    breakdown: tuple[tuple[Breakdown, ...], ...]  # [site corner][system corner]

    @property
    def nominal(self) -> Breakdown:
        return self.breakdown[1][1]

    def total(self, s: int, k: int) -> float:
        return self.breakdown[s][k].total


def gpu_hour_model(cat: Any, prof: CostProfile, site_prof: CostProfile, site: SiteCost,
                   capex_override: float | None = None) -> GpuHourModel:
    """Cost of one GPU-hour of system ``prof`` at ``site`` at every corner of the estimate ranges."""
    if prof.currency != site_prof.currency:
        raise ProfileError(
            f"system {prof.name!r} is priced in {prof.currency} but site {site_prof.name!r} in {site_prof.currency}; "
            "no exchange rates are applied",
            path=cat.get("costs", site_prof.name).path,
            field="currency",
            hint="give the system and the site in one currency",
        )
    loads = _triple(site.gpu_load, "site gpu_load")
    power = system_power(cat, prof, loads)
    capex, network = _capex(prof, site, capex_override)
    base = _site_triples(site)
    grid = []
    for s in range(3):
        triples = dict(base, capex_per_gpu=capex, wall_w_load=power.at_load[s], wall_w_provisioned=power.provisioned)
        grid.append(tuple(per_gpu_hour(corner(triples, site.facility, k, s)) for k in range(3)))
    return GpuHourModel(prof, power, capex, network, tuple(grid))


def _rng(a: float, b: float, c: float) -> Range:
    return Range(low=a, nominal=b, high=c)


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


# --- what the other commands use ------------------------------------------------------------------


def _total_range(m: GpuHourModel) -> Range:
    return _rng(m.total(0, 0), m.total(1, 1), m.total(2, 2))


def run_energy(cat: Any, sku: str, gpus: int, gpu_hours: float, site_prof: CostProfile, site: SiteCost,
               gpu_hour_cost: float | None) -> tuple[RunEnergy, list[str]]:
    """Energy, emissions and cost of ``gpu_hours`` on ``sku`` (its cost profile's wall power) at ``site``.

    Wall power per GPU is the system's rack wall power per GPU at the site's average GPU load; cost per
    GPU-hour is ``gpu_hour_cost`` when given (US dollars) or the cost model's all-in figure.
    """
    warnings: list[str] = []
    pue = _rng(*_triple(site.pue, "site pue"))
    grid = site.grid_kg_co2e_per_kwh.nominal or 0.0
    try:
        prof = resolve_system(cat, sku)
    except (MissingValueError, UnknownNameError):
        prof = None
        warnings.append(f"{sku}: no cost profile prices this SKU, so no energy or model cost; "
                        "write one under costs/ (see `mi400plan profiles show b200-hgx --kind costs`)")
    wall = energy = em = per_hour = None
    source, currency, year = "none", site_prof.currency, None
    if prof is not None:
        m = gpu_hour_model(cat, prof, site_prof, site)
        w = m.power.at_load
        wall = _rng(w[0][0], w[1][1], w[2][2])
        e = (run_energy_mwh(gpu_hours, wall.low, pue.low), run_energy_mwh(gpu_hours, wall.nominal, pue.nominal),
             run_energy_mwh(gpu_hours, wall.high, pue.high))
        energy = _rng(*e)
        em = _rng(*(emissions_t(x, grid) for x in e))
        if gpu_hour_cost is None:
            per_hour, source, year = _total_range(m), f"model: {prof.name} at {site_prof.name}", max(prof.year, site_prof.year)
    if gpu_hour_cost is not None:
        per_hour, source, currency = _rng(gpu_hour_cost, gpu_hour_cost, gpu_hour_cost), "--gpu-hour-cost", "USD"
    return RunEnergy(
        sku=sku, gpus=gpus, system=None if prof is None else prof.name, site=site_prof.name, gpu_hours=gpu_hours,
        gpu_load=site.gpu_load.nominal or 0.0, wall_power_per_gpu_w=wall, pue=pue, energy_mwh=energy,
        grid_kg_co2e_per_kwh=grid, emissions_t=em, currency=currency, price_year=year, cost_per_gpu_hour=per_hour,
        cost_source=source,
        cost=None if per_hour is None else _rng(*(gpu_hours * x for x in (per_hour.low, per_hour.nominal, per_hour.high))),
    ), warnings


def model_gpu_hour_cost(cat: Any, sku: str, site_prof: CostProfile, site: SiteCost) -> float | None:
    """Nominal all-in cost per GPU-hour of the SKU's cost profile in US dollars, or None."""
    try:
        prof = resolve_system(cat, sku)
    except (MissingValueError, UnknownNameError):
        return None
    if site_prof.currency != "USD":
        return None
    return gpu_hour_model(cat, prof, site_prof, site).nominal.total


def facility_cost(cat: Any, rack_name: str, racks_it_w: tuple[float, float, float], gpus: int, *, gpu_load: float,
                  pue: float, price_per_kwh: float | None, site_name: str | None = None) -> tuple[FacilityCost, list[str]]:
    """Facility capex (site capex per MW x IT MW) and all-in cost per day of ``gpus`` GPUs of a rack.

    The cost model runs at the rack command's GPU load and PUE (and its electricity price when given),
    so the day's cost and the rack's power figures rest on the same inputs.
    """
    ov = CostOverrides(site={"gpu_load": gpu_load, "pue": pue})
    if price_per_kwh is not None:
        ov.site["electricity_price_per_kwh"] = price_per_kwh
    site_prof, site, _ = load_site(cat, site_name, ov)
    f_lo, f_nom, f_hi = _triple(site.facility_capex_per_mw, "site facility_capex_per_mw")
    capex = _rng(f_lo * racks_it_w[0] / 1e6, f_nom * racks_it_w[1] / 1e6, f_hi * racks_it_w[2] / 1e6)
    warnings: list[str] = []
    prof = next((p for p in _systems(cat) if p.system is not None and p.system.rack == rack_name), None)
    per_hour = per_day = None
    if prof is None:
        warnings.append(f"{rack_name}: no cost profile prices this rack, so no cost per day")
    else:
        per_hour = _total_range(gpu_hour_model(cat, prof, site_prof, site))
        per_day = _rng(*(x * 24.0 * gpus for x in (per_hour.low, per_hour.nominal, per_hour.high)))
    return FacilityCost(site=site_prof.name, currency=site_prof.currency, price_year=site_prof.year, facility_capex=capex,
                        system=None if prof is None else prof.name, cost_per_gpu_hour=per_hour, cost_per_day=per_day), warnings


@dataclass(frozen=True)
class ServingEconomics:
    """Cost per million tokens and tokens/s per provisioned MW of one system (nominal values)."""

    system: str
    currency: str
    cost_per_gpu_hour: float
    cost_per_mtok: float
    tokens_per_s_per_mw_it: float  # per MW of rack wall power at full GPU load
    tokens_per_s_per_mw_facility: float  # the same x PUE


def serving_economics(cat: Any, name: str, tokens_per_s_per_gpu: float, *, site: str | None = None,
                      overrides: CostOverrides | None = None) -> ServingEconomics:
    """$/Mtok and tokens/s per provisioned MW for a system (cost profile, rack or SKU name) serving at
    ``tokens_per_s_per_gpu``: the cost model's all-in cost per GPU-hour / tokens per GPU-hour."""
    site_prof, site_v, _ = load_site(cat, site, overrides)
    prof = resolve_system(cat, name)
    m = gpu_hour_model(cat, prof, site_prof, site_v)
    per_hour = m.nominal.total
    prov = m.power.provisioned[1]
    return ServingEconomics(
        system=prof.name, currency=site_prof.currency, cost_per_gpu_hour=per_hour,
        cost_per_mtok=cost_per_mtok(per_hour, tokens_per_s_per_gpu),
        tokens_per_s_per_mw_it=tokens_per_s_per_mw(tokens_per_s_per_gpu, prov, 1.0),
        tokens_per_s_per_mw_facility=tokens_per_s_per_mw(tokens_per_s_per_gpu, prov, site_v.pue.nominal or 1.0),
    )


def gpu_hour_costs(cat: Any, skus: list[str], gpu_hour_cost: float | None, site: str | None = None,
                   overrides: CostOverrides | None = None) -> tuple[dict[str, float | None], dict[str, str], list[str]]:
    """Cost per GPU-hour (US dollars) for each accelerator: ``gpu_hour_cost`` when given, otherwise the
    cost model's nominal all-in figure for the SKU's system at ``site``. Returns (cost by SKU, where each
    came from, warnings for SKUs no cost profile prices)."""
    if gpu_hour_cost is not None:
        return dict.fromkeys(skus, gpu_hour_cost), dict.fromkeys(skus, "--gpu-hour-cost"), []
    site_prof, site_v, _ = load_site(cat, site, overrides)
    costs: dict[str, float | None] = {}
    sources: dict[str, str] = {}
    warnings: list[str] = []
    for s in skus:
        try:
            prof = resolve_system(cat, s)
        except (MissingValueError, UnknownNameError):
            costs[s], sources[s] = None, "none"
            warnings.append(f"{s}: no cost profile prices this SKU; give --gpu-hour-cost for its cost per token")
            continue
        if site_prof.currency != "USD":
            costs[s], sources[s] = None, "none"
            warnings.append(f"site {site_prof.name} is priced in {site_prof.currency}; cost per token is in USD only")
            continue
        costs[s] = gpu_hour_model(cat, prof, site_prof, site_v).nominal.total
        sources[s] = f"model: {prof.name} at {site_prof.name} ({site_prof.currency} {max(prof.year, site_prof.year)})"
    return costs, sources, warnings
