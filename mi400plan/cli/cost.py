"""``mi400plan cost``: all-in cost per GPU-hour, TCO per dense PFLOP/s-hour, TFLOP/s per watt."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Optional

import typer

from mi400plan.cli.counts import name_list
from mi400plan.cli.common import AsciiOpt, WideOpt, WidthOpt, FormatOpt, JsonOpt, ProfilesOpt, app, catalog, pick_format, run


class Facility(str, Enum):
    owned = "owned"
    colocation = "colocation"


SiteOpt = Annotated[Optional[str], typer.Option("--site", help="Site cost profile (default us-2025): life, cost of capital, power price, PUE, facility.")]
PriceOpt = Annotated[Optional[float], typer.Option("--electricity-price", help="Electricity price, site currency per kWh.")]
PueOpt = Annotated[Optional[float], typer.Option("--pue", help="Power usage effectiveness (>= 1).")]
RateOpt = Annotated[Optional[float], typer.Option("--cost-of-capital", help="Cost of capital, fraction per year (0.10 = 10%).")]
LifeOpt = Annotated[Optional[float], typer.Option("--depreciation-years", help="Server and network depreciation life, years.")]
LoadOpt = Annotated[Optional[float], typer.Option("--gpu-load", help="Average GPU power as a fraction of TDP, (0, 1].")]
GridOpt = Annotated[Optional[float], typer.Option("--grid-intensity", help="Grid carbon intensity, kg CO2e per kWh.")]
FacilityOpt = Annotated[Optional[Facility], typer.Option("--facility", help="owned (facility capex + O&M) or colocation (rent per kW-month).")]
ColoOpt = Annotated[Optional[float], typer.Option("--colocation-per-kw-month", help="Colocation rent, site currency per kW-month.")]
FacCapexOpt = Annotated[Optional[float], typer.Option("--facility-capex-per-mw", help="Facility build cost, site currency per MW of IT.")]
NetOpt = Annotated[Optional[float], typer.Option("--network-capex-per-gpu", help="Scale-out network capex per GPU (systems that do not state their own).")]


def site_overrides(price: float | None, pue: float | None, rate: float | None, life: float | None,
                   load: float | None, grid: float | None, facility: Facility | None, colo: float | None = None,
                   fac_capex: float | None = None, network: float | None = None, capex: float | None = None):  # noqa: ANN201
    """The flags as ``pricing.CostOverrides`` (None: keep the site profile's value)."""
    from mi400plan.pricing import CostOverrides

    given = {
        "electricity_price_per_kwh": price, "pue": pue, "cost_of_capital": rate, "depreciation_years": life,
        "gpu_load": load, "grid_kg_co2e_per_kwh": grid, "colocation_per_kw_month": colo,
        "facility_capex_per_mw": fac_capex, "network_capex_per_gpu": network,
    }
    return CostOverrides(site={k: v for k, v in given.items() if v is not None},
                         facility=None if facility is None else facility.value, capex_per_gpu=capex)


@app.command("cost")
def cost_cmd(
    names: Annotated[list[str], typer.Argument(callback=name_list, help="System cost profile(s), rack(s) or accelerator(s); several (or a comma list) compare side by side.")],
    site: SiteOpt = None,
    electricity_price: PriceOpt = None,
    pue: PueOpt = None,
    cost_of_capital: RateOpt = None,
    depreciation_years: LifeOpt = None,
    gpu_load: LoadOpt = None,
    grid_intensity: GridOpt = None,
    facility: FacilityOpt = None,
    colocation_per_kw_month: ColoOpt = None,
    facility_capex_per_mw: FacCapexOpt = None,
    network_capex_per_gpu: NetOpt = None,
    capex_per_gpu: Annotated[Optional[float], typer.Option("--capex-per-gpu", help="Server + network capex per GPU replacing the profile's (one system).")] = None,
    tokens_per_s: Annotated[Optional[float], typer.Option("--tokens-per-s", help="Serving tokens/s per GPU: adds cost per million tokens and tokens/s per provisioned MW.")] = None,
    json_: JsonOpt = False,
    fmt: FormatOpt = None,
    profiles: ProfilesOpt = None,
    ascii_: AsciiOpt = False,
    wide: WideOpt = False,
    width: WidthOpt = None,
) -> None:
    """All-in cost per GPU-hour (capex annuity, facility, energy), TCO per dense PFLOP/s-hour and
    TFLOP/s per watt, with estimate ranges and ranking flips."""
    f = pick_format(json_, fmt)

    def compute():  # noqa: ANN202
        from mi400plan.api.cost import cost

        ov = site_overrides(electricity_price, pue, cost_of_capital, depreciation_years, gpu_load, grid_intensity,
                            facility, colocation_per_kw_month, facility_capex_per_mw, network_capex_per_gpu, capex_per_gpu)
        return cost(catalog(profiles), list(names), site=site, overrides=ov, tokens_per_s_per_gpu=tokens_per_s)

    run("cost", f, compute, ascii=ascii_, wide=wide)
