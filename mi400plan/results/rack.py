"""Result models of ``mi400plan rack`` (the JSON contract under ``data``).

All powers in watts, flows in L/min and m^3/h (CFM alongside), temperatures in degC / K.
A ``Range`` is (low, nominal, high) of one quantity across the estimate range of its inputs.
"""

from typing import Any, ClassVar

from pydantic import Field

from mi400plan.factories import new_list
from mi400plan.results.common import OutModel, Range, Result, flatten_model


class ComponentLine(OutModel):
    """One component line of the breakdown: ``count`` items in the whole rack."""

    tray: str
    component: str
    kind: str
    count: int
    each_w: Range
    total_w: Range
    liquid_fraction: float
    status: str
    source: list[str] = Field(default_factory=new_list)


class FeedLoading(OutModel):
    """The rack's wall power seen on its feeds (what an electrician checks)."""

    load_va: Range  # apparent power of the rack load: wall power / PF, VA
    carrying_feeds: int  # feeds sharing the load in the worst case (2N: one side)
    line_current_a: Range  # current per phase conductor of each carrying feed, A
    overcurrent_device_a: int | None  # smallest NEC 240.6(A) rating >= high current / derate; None above 6,000 A
    arithmetic: str


class FeedVerdict(OutModel):
    """Feed capacity against the rack's wall power, with the arithmetic as text."""

    spec: str  # e.g. "2x415V3ph60A"
    count: int
    voltage_v: float
    phases: int
    current_a: float
    power_factor: float
    derate: float
    redundancy: str  # N or 2N
    per_feed_va: float  # apparent power of one feed at its rating, VA
    per_feed_usable_w: float  # x PF x derate, W
    usable_w: float  # what the rack may draw under the redundancy rule, W
    load_w: Range  # wall power
    headroom_w: float  # usable - nominal load (negative: deficit)
    ok: bool  # nominal load fits
    ok_low: bool
    ok_high: bool
    arithmetic: str
    needed: str | None = None  # first of ``alternatives``: the given feeds with the smallest standard rating carrying the high load
    needed_usable_w: float | None = None
    alternatives: list[str] = Field(default_factory=new_list)  # every fix, what it keeps first (rack.feed_fixes)
    source_status: str = "assumed"
    loading: FeedLoading | None = None


class PsuVerdict(OutModel):
    psus: int
    spare_psus: int
    redundancy: str
    psu_rating_w: float
    usable_w: float  # (psus - spares) x rating, DC output
    dc_load_w: Range  # component power divided by the DC distribution efficiency
    ok: bool
    ok_high: bool


class CoolingOut(OutModel):
    coolant: str
    rho_kg_per_m3: float
    cp_j_per_kg_k: float
    coolant_supply_c: float | None
    coolant_delta_t_k: float
    coolant_return_c: float | None
    liquid_heat_w: Range
    air_heat_w: Range
    coolant_l_per_min: Range
    air_delta_t_k: float
    airflow_m3_per_h: Range
    airflow_cfm: Range
    air_limit_w: float
    air_ok: bool
    air_ok_low: bool
    air_ok_high: bool


class ReferenceCheck(OutModel):
    """The model's wall power against a published or claimed rack power."""

    reference_w: Range
    source: list[str]
    verdict: str  # agrees | overlaps | below | above
    message: str


class FacilityCost(OutModel):
    """What ``rack --racks N`` adds from the cost model: facility capex and all-in cost per day."""

    site: str
    currency: str
    price_year: int
    facility_capex: Range  # facility capex per MW x IT MW of the racks
    system: str | None  # cost profile priced (None: none prices this rack)
    cost_per_gpu_hour: Range | None  # all-in, at the rack command's GPU load and PUE
    cost_per_day: Range | None  # all-in per GPU-hour x 24 h x GPUs


class FacilityOut(OutModel):
    racks: int
    gpus: int
    gpus_requested: int | None
    it_power_w: Range  # wall power of all racks
    pue: float
    facility_power_w: Range  # it x PUE
    gpus_per_mw_it: float
    gpus_per_mw_facility: float
    energy_kwh_per_day: float  # facility, nominal
    price_per_kwh_usd: float | None
    cost_per_day_usd: float | None  # energy only, at --price-per-kwh
    cost: FacilityCost | None = None  # facility capex and all-in cost per day from the cost model


class RackRow(OutModel):
    rack: str
    display_name: str
    roadmap: str | None = None  # the rack profile's roadmap note: an announced, not shipping, system
    variant_of: str | None
    sku: str
    gpus: int
    racks_per_domain: int
    scale_up_world: int | None
    gpu_power_w: Range  # per GPU after cap and load
    gpu_power_cap_w: float | None
    gpu_load: float
    it_power_w: Range  # sum of component power (DC side), W
    wall_power_w: float  # AC input, nominal, W
    wall_power_range_w: Range
    conversion_loss_w: float
    feed_capacity_w: float  # usable under derate and redundancy
    feeds_ok: bool
    liquid_heat_w: float
    air_heat_w: float
    coolant_l_per_min: float
    airflow_m3_per_h: float
    airflow_cfm: float
    cooling_ok: bool
    over_budget: bool
    kw_per_gpu: float
    gpus_per_mw: float  # per MW of rack wall power
    fp8_pflops: float | None  # dense, rack total
    fp8_pflops_per_kw: float | None
    components: list[ComponentLine]
    feeds: FeedVerdict
    psu: PsuVerdict
    cooling: CoolingOut
    reference: ReferenceCheck | None
    facility: FacilityOut | None


class RackResult(Result):
    command: ClassVar[str] = "rack"
    rows: list[RackRow]

    def csv_rows(self) -> list[dict[str, Any]]:
        """One CSV row per component of each rack (``component.*`` columns) after the rack's own
        columns, so a spreadsheet can sum or filter the breakdown; no JSON text in a cell."""
        out: list[dict[str, Any]] = []
        for r in self.rows:
            rack = {k: v for k, v in flatten_model(RackRow, r.model_dump(mode="json")).items() if k != "components"}
            for c in r.components:
                out.append({**rack, **flatten_model(ComponentLine, c.model_dump(mode="json"), "component.")})
        return out

    def check_failed(self) -> bool:
        """Over budget: feeds cannot carry the nominal wall power, or the air part exceeds the limit."""
        return any(r.over_budget for r in self.rows)
