"""Cost profile spec (``profiles/costs/*.toml``): what a system costs to buy and a site costs to run.

One kind, two shapes. A **system** profile (``[system]``) prices one bundled system per GPU: the
server/rack capex (GPUs, hosts, scale-up switches, rack) and the scale-out network capex, and names
the accelerator (``sku``) and the rack profile whose wall power it draws (``rack``). A **site**
profile (``[site]``) holds everything about owning and running the GPUs: depreciation life, cost of
capital, electricity price, PUE, facility capex per MW or colocation per kW-month, operating cost,
grid carbon intensity and the average GPU load.

Every money figure is in the profile's ``currency`` at the prices of its ``year`` (no exchange rates
and no inflation adjustment are applied: a system and a site in different currencies is an error).
Keys carry their units: ``*_per_gpu`` (currency per GPU), ``*_per_mw`` (currency per MW of critical
IT power), ``*_per_kw_month`` (currency per kW of critical IT power per month), ``*_per_kwh``
(currency per kWh), ``*_years``, ``cost_of_capital`` (fraction per year), ``pue`` (ratio),
``grid_kg_co2e_per_kwh`` (kg CO2-equivalent per kWh drawn), ``gpu_load`` (fraction of TDP).
"""

from typing import Literal

from pydantic import Field, model_validator

from mi400plan.specs.common import Est, Estimate, Fraction, NonNeg, PosFraction, ProfileBase, StrictModel, Years, est_in

# ISO 4217 codes the planner accepts. Figures are never converted between them.
CURRENCIES = frozenset({"USD", "EUR", "GBP", "JPY", "CNY", "KRW", "TWD", "CAD", "AUD", "CHF", "INR", "SGD"})


def _positive(est: Estimate | None, what: str, *, allow_zero: bool = False) -> None:
    """Every stated value (low, nominal, high) of a price, life or intensity is finite and > 0."""
    if est is None or not est.known:
        return
    for x in (est.lo, est.nominal, est.hi):
        if x is None:
            continue
        if x < 0 or (x == 0 and not allow_zero):
            raise ValueError(f"{what} must be {'>= 0' if allow_zero else 'above 0'}, got {x:g}")


def check_currency(code: str) -> str:
    c = code.strip().upper()
    if c not in CURRENCIES:
        raise ValueError(f"unknown currency {code!r}; use an ISO 4217 code: {', '.join(sorted(CURRENCIES))}")
    return c


class SystemCost(StrictModel):
    """Capex of one bundled system, per GPU, in the profile's currency and year."""

    sku: str  # accelerator profile name
    rack: str | None = None  # rack profile whose wall power the GPUs draw; None: wall_power_per_gpu_w
    server_capex_per_gpu: NonNeg  # servers / rack with GPUs, hosts, scale-up switches; per GPU
    network_capex_per_gpu: NonNeg | None = None  # scale-out network per GPU; None: the site's default
    network_included: bool = False  # the capex figure already includes the scale-out network
    wall_power_per_gpu_w: Est | None = None  # system wall power per GPU at full load, W (no rack profile)
    note: str | None = None

    @model_validator(mode="after")
    def _check(self) -> "SystemCost":
        _positive(self.server_capex_per_gpu, "server_capex_per_gpu")
        _positive(self.network_capex_per_gpu, "network_capex_per_gpu")
        _positive(self.wall_power_per_gpu_w, "wall_power_per_gpu_w")
        if self.rack is None and self.wall_power_per_gpu_w is None:
            raise ValueError("give rack (a rack profile) or wall_power_per_gpu_w")
        if self.network_included and self.network_capex_per_gpu is not None:
            raise ValueError("network_included = true and network_capex_per_gpu contradict each other")
        return self


class SiteCost(StrictModel):
    """Owning and running GPUs at one site."""

    depreciation_years: Years  # server and network life, years
    cost_of_capital: Fraction  # fraction per year (0.10 = 10%)
    electricity_price_per_kwh: est_in(1e-6, 1e3, lo_open=False)  # site currency per kWh
    pue: est_in(1.0, 10.0, lo_open=False)  # total facility energy / IT energy, >= 1
    facility: Literal["owned", "colocation"] = "owned"
    facility_capex_per_mw: NonNeg  # per MW of critical IT power (owned facility)
    facility_life_years: Years  # owned facility life, years
    operating_cost_per_kw_month: NonNeg  # owned facility O&M per kW of critical IT per month
    colocation_per_kw_month: Est  # colocation rent per kW of critical IT per month (covers the facility)
    network_capex_per_gpu: NonNeg  # scale-out network per GPU when a system does not state its own
    gpu_load: PosFraction  # average GPU power / TDP while running
    grid_kg_co2e_per_kwh: est_in(0.0, 10.0, lo_open=False)  # grid carbon intensity, kg CO2e per kWh drawn

    @model_validator(mode="after")
    def _check(self) -> "SiteCost":
        for name in ("depreciation_years", "electricity_price_per_kwh", "facility_capex_per_mw",
                     "facility_life_years", "operating_cost_per_kw_month", "colocation_per_kw_month",
                     "network_capex_per_gpu", "gpu_load"):
            _positive(getattr(self, name), name)
        _positive(self.cost_of_capital, "cost_of_capital", allow_zero=True)
        _positive(self.grid_kg_co2e_per_kwh, "grid_kg_co2e_per_kwh", allow_zero=True)
        for x in (self.pue.lo, self.pue.nominal, self.pue.hi):
            if x is not None and x < 1:
                raise ValueError(f"pue must be at least 1.0 (facility energy / IT energy), got {x:g}")
        for x in (self.gpu_load.lo, self.gpu_load.nominal, self.gpu_load.hi):
            if x is not None and x > 1:
                raise ValueError(f"gpu_load is a fraction of TDP in (0, 1], got {x:g}")
        for x in (self.cost_of_capital.lo, self.cost_of_capital.nominal, self.cost_of_capital.hi):
            if x is not None and x >= 1:
                raise ValueError(f"cost_of_capital is a fraction per year (0.10 = 10%), got {x:g}")
        return self


class CostProfile(ProfileBase):
    currency: str  # ISO 4217 code of every money figure in the file
    year: int = Field(ge=1990, le=2100)  # price year of every money figure in the file
    system: SystemCost | None = None
    site: SiteCost | None = None

    @model_validator(mode="after")
    def _check(self) -> "CostProfile":
        object.__setattr__(self, "currency", check_currency(self.currency))
        if (self.system is None) == (self.site is None):
            raise ValueError("a cost profile has exactly one of [system] or [site]")
        return self

    @property
    def kind(self) -> Literal["system", "site"]:
        return "system" if self.system is not None else "site"
