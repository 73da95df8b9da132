"""Cost, energy and emissions: pure functions of validated numbers (money in the profiles' currency).

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
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mi400plan.errors import UsageError
from mi400plan.units import HOUR, KW, MW

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
