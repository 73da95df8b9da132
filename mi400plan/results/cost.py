"""Result models of ``mi400plan cost`` (the JSON contract under ``data``).

Money is in ``currency`` at the prices of the profiles' years (``capex_year``, ``site_year``);
powers in W; ``*_per_gpu_hour`` per GPU per hour owned; ``*_per_pflops_hour`` per dense PFLOP/s
(1e15 FLOP/s) per hour; ``tflops_per_w_*`` dense TFLOP/s per watt. A ``Range`` is (low, nominal,
high) across the estimate ranges of every input.
"""

from typing import ClassVar

from pydantic import Field

from mi400plan.factories import new_list, new_dict
from mi400plan.results.common import OutModel, Range, Result


class CostInput(OutModel):
    """One input as used: value (low/nominal/high), unit, status, sources, and where it came from."""

    field: str
    value: Range
    unit: str
    status: str  # profile status, or "given" for a command-line flag
    source: list[str] = Field(default_factory=new_list)
    origin: str  # profile name or the flag


class PerGpuHour(OutModel):
    """Nominal cost of one GPU-hour by term; ``total`` carries the range."""

    capex: float
    facility: float
    operating: float
    energy: float
    total: Range


class CostRow(OutModel):
    system: str
    display_name: str
    sku: str
    rack: str | None
    currency: str
    capex_year: int
    capex_per_gpu: Range  # server/rack + scale-out network
    network: str  # "included" (in the capex figure), "system" or "site" (where the network capex came from)
    power_basis: str  # where the wall power comes from
    wall_power_per_gpu_w: Range  # at the site's average GPU load
    provisioned_power_per_gpu_w: Range  # at full GPU load
    tdp_w: float | None
    per_gpu_hour: PerGpuHour
    capex_per_gpu_hour: Range  # capex term only (seed 002's "Total Upfront Cluster Capex, per GPU per Hour")
    dense_tflops: dict[str, float] = Field(default_factory=new_dict)  # per GPU, by precision
    tco_per_pflops_hour: dict[str, Range] = Field(default_factory=new_dict)  # all-in / dense PFLOP/s
    capex_per_pflops_hour: dict[str, float] = Field(default_factory=new_dict)  # capex term / dense PFLOP/s (seed's "TCO")
    tflops_per_w_tdp: dict[str, float] = Field(default_factory=new_dict)  # dense TFLOP/s / chip TDP
    tflops_per_w_wall: dict[str, float] = Field(default_factory=new_dict)  # dense TFLOP/s / provisioned wall W per GPU
    cost_per_mtok: Range | None = None  # with --tokens-per-s: all-in per GPU-hour / tokens per GPU-hour x 1e6
    tokens_per_s_per_mw: float | None = None  # with --tokens-per-s: per MW of facility power (provisioned x PUE)
    estimates: list[str] = Field(default_factory=new_list)  # inputs resting on estimates or assumptions
    inputs: list[CostInput] = Field(default_factory=new_list)  # the system's own inputs


class CostResult(Result):
    command: ClassVar[str] = "cost"
    site: str
    site_year: int
    currency: str
    facility: str  # owned or colocation
    gpu_load: float  # nominal average GPU load (fraction of TDP)
    pue: float  # nominal
    tokens_per_s_per_gpu: float | None = None  # serving rate given for cost per Mtok
    formula: list[str] = Field(default_factory=new_list)  # the cost model, one line per term
    site_inputs: list[CostInput] = Field(default_factory=new_list)
    rows: list[CostRow] = Field(default_factory=new_list)
    ranking_flips: list[str] = Field(default_factory=new_list)
    notes: list[str] = Field(default_factory=new_list)
