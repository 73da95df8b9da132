"""The cost model: cost, energy and emissions of systems at sites (money in the profiles' currency).

All-in cost of one GPU-hour (every term per GPU, per hour of wall-clock time the GPU is owned)::

    capex     = (server + network capex) x CRF(r, n_server) / 8760
    facility  = owned:      facility capex per MW x P_prov [MW] x CRF(r, n_facility) / 8760
                            + operating cost per kW-month x P_prov [kW] / 730
                colocation: colocation per kW-month x P_prov [kW] / 730
    energy    = P_load [kW] x PUE x electricity price per kWh
    total     = capex + facility + energy

``P_prov`` is the per-GPU share of rack wall power at full GPU load (what a facility must provision
and what colocation is billed on); ``P_load`` the same share at the average GPU load (what the meter
sees). A year is 8760 h (365 d), a month 8760 / 12 = 730 h.

Energy of a run (MWh) = GPU-hours x P_load [MW] x PUE; emissions (t CO2e) = MWh x grid kg/kWh
(1 MWh = 1000 kWh, 1 t = 1000 kg, so the factors cancel).

The formulas are pure functions of numbers; below them, the entry points that read the catalog:
``load_site`` (a site profile with command-line overrides), ``resolve_system`` (a system cost profile from
a system, rack or accelerator name), ``gpu_hour_model`` (cost per GPU-hour and wall power per GPU of one
system at one site), ``run_energy``, ``facility_cost``, ``serving_economics`` and ``gpu_hour_costs``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mi400plan.errors import MissingValueError, ProfileError, UnknownNameError, UsageError
from mi400plan.pricing import CostOverrides
from mi400plan.results.energy import RunEnergy
from mi400plan.specs.common import Estimate
from mi400plan.units import HOUR, KW, MW

if TYPE_CHECKING:  # the rack command's result models (imported where a range or facility cost is built) and the
    # cost profile models (the catalog imports them with the first cost profile it reads)
    from mi400plan.results.rack import FacilityCost, Range
    from mi400plan.specs.cost import CostProfile, SiteCost

HOURS_PER_YEAR = 8760.0  # 365 d x 24 h
HOURS_PER_MONTH = HOURS_PER_YEAR / 12.0  # 730 h
MTOK = 1e6


def capital_recovery_factor(rate: float, years: float) -> float:
    """Annual payment per unit of capital repaid over ``years`` at interest ``rate`` per year.

    CRF = r (1 + r)^n / ((1 + r)^n - 1) = r / (1 - (1 + r)^-n); r = 0 gives straight-line 1 / n.
    (The capital recovery factor of NREL's "Simple Levelized Cost of Energy (LCOE) Calculator
    Documentation" and of any engineering-economics text, e.g. Newnan, "Engineering Economic
    Analysis", the (A/P, i, n) factor.) Payments are annual, in arrears.
    """
    if years <= 0:
        raise UsageError(f"depreciation life must be above 0 years, got {years:g}")
    if rate < 0:
        raise UsageError(f"cost of capital must not be negative, got {rate:g}")
    denom = -math.expm1(-years * math.log1p(rate))  # 1 - (1 + r)^-n, accurate for small r
    if rate == 0 or denom == 0:
        return 1.0 / years
    return rate / denom


def capex_per_hour(capex: float, rate: float, years: float) -> float:
    """Capex amortized as an annuity: capex x CRF(r, n) / 8760 h, per hour."""
    return capex * capital_recovery_factor(rate, years) / HOURS_PER_YEAR


def per_kw_month_to_hour(price_per_kw_month: float, power_w: float) -> float:
    """A charge per kW per month on ``power_w`` watts, per hour: price x kW / 730 h."""
    return price_per_kw_month * (power_w / KW) / HOURS_PER_MONTH


def energy_cost_per_hour(wall_w: float, pue: float, price_per_kwh: float) -> float:
    """Electricity for one hour: wall kW x PUE x price per kWh (PUE: The Green Grid / ISO/IEC 30134-2)."""
    return wall_w / KW * pue * price_per_kwh


def run_energy_mwh(gpu_hours: float, wall_w_per_gpu: float, pue: float) -> float:
    """Facility energy of a run: GPU-hours x per-GPU wall power [MW] x PUE, MWh."""
    return gpu_hours * (wall_w_per_gpu / MW) * pue


def emissions_t(energy_mwh: float, kg_per_kwh: float) -> float:
    """t CO2e = MWh x 1000 kWh/MWh x kg/kWh / 1000 kg/t = MWh x kg/kWh (location-based)."""
    return energy_mwh * kg_per_kwh


def cost_per_mtok(cost_per_gpu_hour: float, tokens_per_s_per_gpu: float) -> float:
    """Cost per million tokens: cost per GPU-hour / (tokens/s per GPU x 3600 s) x 1e6."""
    if tokens_per_s_per_gpu <= 0:
        raise UsageError(f"tokens/s per GPU must be above 0, got {tokens_per_s_per_gpu:g}")
    return cost_per_gpu_hour / (tokens_per_s_per_gpu * HOUR) * MTOK


def tokens_per_s_per_mw(tokens_per_s_per_gpu: float, provisioned_w_per_gpu: float, pue: float = 1.0) -> float:
    """Tokens/s per provisioned MW: tokens/s per GPU / (per-GPU provisioned wall power [MW] x PUE).

    With ``pue`` 1 the MW is critical IT power (rack wall power at full GPU load); with the site's
    PUE it is facility power, the basis of InferenceMAX's "tokens per provisioned megawatt".
    """
    if provisioned_w_per_gpu <= 0 or pue < 1:
        raise UsageError("provisioned power must be above 0 W and PUE at least 1")
    return tokens_per_s_per_gpu / (provisioned_w_per_gpu / MW * pue)


@dataclass(frozen=True)
class CostInputs:
    """Scalar inputs of one GPU-hour (one corner of the estimate ranges). Money in one currency."""

    capex_per_gpu: float  # server/rack + scale-out network
    depreciation_years: float
    cost_of_capital: float  # per year
    wall_w_load: float  # per-GPU wall power at the average load, W
    wall_w_provisioned: float  # per-GPU wall power at full load, W
    pue: float
    electricity_price_per_kwh: float
    facility: str  # "owned" or "colocation"
    facility_capex_per_mw: float
    facility_life_years: float
    operating_cost_per_kw_month: float
    colocation_per_kw_month: float


@dataclass(frozen=True)
class Breakdown:
    """Cost of one GPU-hour by term (same currency as the inputs)."""

    capex: float
    facility: float  # owned: facility capex annuity; colocation: rent
    operating: float  # owned: facility O&M; colocation: 0 (in the rent)
    energy: float

    @property
    def total(self) -> float:
        return self.capex + self.facility + self.operating + self.energy


def per_gpu_hour(i: CostInputs) -> Breakdown:
    """All-in cost of one GPU-hour (module docstring for the formula)."""
    capex = capex_per_hour(i.capex_per_gpu, i.cost_of_capital, i.depreciation_years)
    energy = energy_cost_per_hour(i.wall_w_load, i.pue, i.electricity_price_per_kwh)
    if i.facility == "colocation":
        return Breakdown(capex, per_kw_month_to_hour(i.colocation_per_kw_month, i.wall_w_provisioned), 0.0, energy)
    if i.facility != "owned":
        raise UsageError(f"facility must be 'owned' or 'colocation', not {i.facility!r}")
    fac = capex_per_hour(i.facility_capex_per_mw * i.wall_w_provisioned / MW, i.cost_of_capital, i.facility_life_years)
    ops = per_kw_month_to_hour(i.operating_cost_per_kw_month, i.wall_w_provisioned)
    return Breakdown(capex, fac, ops, energy)


# Which way each input moves the cost: +1 raises it, -1 lowers it (a longer life spreads capex).
DIRECTION: dict[str, int] = {
    "capex_per_gpu": 1, "depreciation_years": -1, "cost_of_capital": 1, "wall_w_load": 1,
    "wall_w_provisioned": 1, "pue": 1, "electricity_price_per_kwh": 1, "facility_capex_per_mw": 1,
    "facility_life_years": -1, "operating_cost_per_kw_month": 1, "colocation_per_kw_month": 1,
}
SYSTEM_FIELDS = frozenset({"capex_per_gpu", "wall_w_load", "wall_w_provisioned"})


def corner(triples: dict[str, tuple[float, float, float]], facility: str, system: int, site: int) -> CostInputs:
    """Inputs at one corner: ``system`` and ``site`` are 0 (cheapest), 1 (nominal) or 2 (dearest).

    ``triples`` maps each ``CostInputs`` field to (low, nominal, high). A field that lowers the cost
    when it grows (a life) takes its high value at the cheap corner. System inputs (capex, power)
    follow ``system``; site inputs follow ``site``, so two systems can be compared at one site.
    """
    vals: dict[str, float] = {}
    for name, (lo, nom, hi) in triples.items():
        k = system if name in SYSTEM_FIELDS else site
        pick = (lo, nom, hi) if DIRECTION[name] > 0 else (hi, nom, lo)
        vals[name] = pick[k]
    return CostInputs(facility=facility, **vals)


# --- the model over cost profiles -------------------------------------------------------------------

DEFAULT_SITE = "us-2025"

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
    from mi400plan.results.rack import Range

    return Range(low=a, nominal=b, high=c)


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
    from mi400plan.results.rack import FacilityCost

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
