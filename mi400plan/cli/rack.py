"""``mi400plan rack``: rack and facility power, feeds and cooling budgets."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Optional

import typer

from mi400plan.cli.counts import count, name_list, one_sku
from mi400plan.cli.common import WidthOpt
from mi400plan.cli.common import (
    AsciiOpt, WideOpt, CheckOpt, ForceOpt, FormatOpt, JsonOpt, PlotOpt, ProfilesOpt, app, catalog, pick_format, run,
)


class Redundancy(str, Enum):
    N = "N"
    two_n = "2N"


class CoolantChoice(str, Enum):
    water = "water"
    glycol25 = "glycol25"


@app.command("rack")
def rack_cmd(
    names: Annotated[list[str], typer.Argument(callback=name_list, help="Rack profile name(s), alias(es) or TOML path(s); several (or a comma list) compare side by side.")],
    sku: Annotated[Optional[str], typer.Option("--sku", callback=one_sku, help="Accelerator profile replacing the rack's own SKU (one).")] = None,
    racks: Annotated[Optional[int], typer.Option("--racks", parser=count, metavar="N", help="Facility: number of racks.")] = None,
    gpus: Annotated[Optional[int], typer.Option("--gpus", parser=count, metavar="N", help="Facility: number of GPUs (racks = ceil(GPUs / GPUs per rack)).")] = None,
    feeds: Annotated[
        Optional[str],
        typer.Option("--feeds", help="Feed set replacing the profile's, e.g. 4x415V3ph60A, 2x480V3ph100A, 4x415V3ph60Apf0.95."),
    ] = None,
    derate: Annotated[float, typer.Option("--derate", help="Continuous-load factor of a feed's rating (NEC 80% rule).")] = 0.8,
    redundancy: Annotated[
        Optional[Redundancy], typer.Option("--redundancy", help="Feed redundancy: N (all feeds share) or 2N (A/B, one side carries all).")
    ] = None,
    gpu_power_cap: Annotated[Optional[float], typer.Option("--gpu-power-cap", help="GPU power cap in W (below TDP).")] = None,
    gpu_load: Annotated[float, typer.Option("--gpu-load", help="Average fraction of GPU power (after the cap) drawn.")] = 1.0,
    pue: Annotated[float, typer.Option("--pue", help="Power usage effectiveness for facility power.")] = 1.2,
    price_per_kwh: Annotated[Optional[float], typer.Option("--price-per-kwh", help="Electricity price in USD per kWh.")] = None,
    air_limit_kw: Annotated[float, typer.Option("--air-limit-kw", help="Air heat an air-cooled row removes per rack, kW.")] = 40.0,
    coolant: Annotated[CoolantChoice, typer.Option("--coolant", help="Liquid for the coolant-flow figure.")] = CoolantChoice.water,
    site: Annotated[Optional[str], typer.Option("--site", help="Cost site profile for facility capex and cost per day with --racks/--gpus (default us-2025).")] = None,
    json_: JsonOpt = False,
    fmt: FormatOpt = None,
    profiles: ProfilesOpt = None,
    check: CheckOpt = False,
    ascii_: AsciiOpt = False,
    wide: WideOpt = False,
    width: WidthOpt = None,
    plot: PlotOpt = None,
    force: ForceOpt = False,
) -> None:
    """Rack power by component, feed verdict with the arithmetic, coolant flow and airflow.

    With --check, exit 4 when the feeds cannot carry the nominal wall power or the air part exceeds
    --air-limit-kw.
    """
    f = pick_format(json_, fmt)

    def compute():  # noqa: ANN202
        from mi400plan.api.rack import rack

        return rack(
            catalog(profiles),
            list(names),
            sku=sku,
            racks=racks,
            gpus=gpus,
            feeds=feeds,
            derate=derate,
            redundancy=None if redundancy is None else redundancy.value,
            gpu_power_cap_w=gpu_power_cap,
            gpu_load=gpu_load,
            pue=pue,
            price_per_kwh=price_per_kwh,
            air_limit_kw=air_limit_kw,
            coolant=coolant.value,
            site=site,
        )

    run("rack", f, compute, check=check, ascii=ascii_, wide=wide, plot=plot, force=force)
