"""Rack profile spec: trays and their components, power shelves, facility feeds, cooling.

A rack is a list of tray groups (``[[trays]]``: ``count`` identical trays), each holding components
(``[[trays.components]]``: GPUs, CPUs, DIMMs, NICs, drives, fans, switch ASICs, board overhead) with
a per-item power ``power_w`` (watts, an estimate with a range) and the fraction of that heat captured
by liquid (``liquid_fraction``, 0..1; the rest goes to air). A GPU component may omit ``power_w``:
its power then comes from the accelerator profile's ``power.tdp_w`` (the rack's ``sku``).

``[power]`` describes the rack power shelves (PSU count, rating in W, AC->DC efficiency, redundancy)
and the DC distribution efficiency (busbar and intermediate bus converters) between the PSUs and the
components. ``[feeds]`` is the facility supply the profile assumes (count, line-to-line voltage,
phases, breaker current, power factor, A/B redundancy); the command line can replace it.
``[cooling]`` holds coolant supply temperature and delta-T and the air delta-T.

Every number is an ``Est`` with status and sources; most rack figures are estimates and carry ranges.
"""

import math

from typing import Any, Literal

from pydantic import Field, model_validator

from mi400plan.factories import new_list
from mi400plan.specs.common import ND, Est, Estimate, Fraction, NonNeg, PosFraction, ProfileBase, StrictModel, est_in

ComponentKind = Literal[
    "gpu", "cpu", "dimm", "nic", "dpu", "drive", "fan", "switch_asic", "board", "memory", "other"
]
TrayRole = Literal["compute", "switch", "nic", "management", "power", "other"]


def _fraction(est: Estimate, what: str) -> None:
    for x in (est.lo, est.nominal, est.hi):
        if x is not None and not 0.0 <= x <= 1.0:
            raise ValueError(f"{what} must be between 0 and 1, got {x}")


class Component(StrictModel):
    """``count`` identical items in one tray. ``power_w`` is per item (W)."""

    kind: ComponentKind
    name: str
    count: int = Field(ge=0, le=10**5)
    power_w: NonNeg | None = None  # per item, W; required except for GPUs (taken from the SKU TDP)
    liquid_fraction: Fraction = Field(default_factory=lambda: Estimate.exact(0.0, "assumed"))
    note: str | None = None

    @model_validator(mode="after")
    def _check(self) -> "Component":
        if self.power_w is None and self.kind != "gpu":
            raise ValueError(f"component {self.name!r}: power_w is required (only a GPU may take it from the SKU)")
        _fraction(self.liquid_fraction, f"component {self.name!r} liquid_fraction")
        return self


class Tray(StrictModel):
    """``count`` identical trays (or servers, for 8-GPU server racks)."""

    name: str
    role: TrayRole = "compute"
    count: int = Field(ge=0, le=10**5)
    height_u: float | None = Field(default=None, gt=0, le=100)  # rack units (OU or U), descriptive
    components: list[Component] = Field(default_factory=new_list)

    @property
    def gpus_per_tray(self) -> int:
        return sum(c.count for c in self.components if c.kind == "gpu")

    @property
    def cpus_per_tray(self) -> int:
        return sum(c.count for c in self.components if c.kind == "cpu")

    @property
    def switch_asics_per_tray(self) -> int:
        return sum(c.count for c in self.components if c.kind == "switch_asic")


PsuRedundancy = Literal["N", "N+1", "N+N"]


class PowerShelves(StrictModel):
    """Rack power conversion: AC (or HVDC) in, DC busbar out.

    ``redundancy``: ``N`` (every PSU carries load), ``N+1`` (one spare PSU per shelf), ``N+N``
    (half the PSUs are spares).
    """

    shelves: int = Field(ge=1, le=10**3)
    psus_per_shelf: int = Field(ge=1, le=10**3)
    psu_rating_w: Est  # DC output rating per PSU, W
    psu_efficiency: PosFraction  # AC in -> DC out, 0..1
    redundancy: PsuRedundancy = "N+1"
    dc_distribution_efficiency: PosFraction = Field(default_factory=lambda: Estimate.exact(1.0, "assumed"))
    output_voltage_v: float | None = Field(default=None, gt=0, le=1e5)  # busbar voltage, descriptive
    note: str | None = None

    @model_validator(mode="after")
    def _check(self) -> "PowerShelves":
        _fraction(self.psu_efficiency, "psu_efficiency")
        _fraction(self.dc_distribution_efficiency, "dc_distribution_efficiency")
        if (self.psu_efficiency.lo or 0) <= 0 or (self.dc_distribution_efficiency.lo or 0) <= 0:
            raise ValueError("efficiencies must be above 0")
        if self.redundancy == "N+N" and (self.shelves * self.psus_per_shelf) % 2:
            raise ValueError("N+N redundancy needs an even number of PSUs")
        return self

    @property
    def psu_count(self) -> int:
        return self.shelves * self.psus_per_shelf

    @property
    def spare_psus(self) -> int:
        if self.redundancy == "N+1":
            return self.shelves
        if self.redundancy == "N+N":
            return self.psu_count // 2
        return 0


FeedRedundancy = Literal["N", "2N"]


FEED_COUNT_MAX = 10**3  # feeds to one rack (a profile's [feeds] and `rack --feeds` alike)
FEED_VALUE_MAX = 1e5  # volts and amps of one feed


class Feeds(StrictModel):
    """Facility feeds to the rack. ``voltage_v`` is line-to-line for three-phase."""

    count: int = Field(ge=1, le=FEED_COUNT_MAX)
    voltage_v: float = Field(gt=0, le=FEED_VALUE_MAX)
    phases: Literal[1, 3] = 3
    current_a: float = Field(gt=0, le=FEED_VALUE_MAX)  # breaker / circuit rating, A
    power_factor: PosFraction = Field(default_factory=lambda: Estimate.exact(1.0, "assumed"))
    redundancy: FeedRedundancy = "2N"  # A/B feeds: one side must carry the whole rack
    status: str = "assumed"  # where this feed plan comes from
    source: list[str] = Field(default_factory=new_list)
    note: str | None = None

    @model_validator(mode="after")
    def _check(self) -> "Feeds":
        _fraction(self.power_factor, "feeds.power_factor")
        if not self.power_factor.known:
            raise ValueError(
                "feeds.power_factor is not disclosed, and the feeds' capacity (and the --check verdict) "
                "depends on it: give a value in (0, 1] (0.95-0.99 is typical of server PSUs)"
            )
        if (self.power_factor.lo or 0) <= 0:
            raise ValueError("feeds.power_factor must be above 0")
        if self.redundancy == "2N" and self.count % 2:
            raise ValueError("2N (A/B) feeds need an even count")
        return self


class Cooling(StrictModel):
    """Coolant and air temperatures (degC / K). Liquid capture is per component."""

    method: Literal["liquid", "air", "hybrid"] = "liquid"
    coolant_supply_c: est_in(-50.0, 150.0, lo_open=False) | None = None  # facility / CDU secondary supply, degC
    coolant_delta_t_k: est_in(0.0, 200.0) = Field(default_factory=lambda: Estimate.exact(10.0, "assumed"))
    air_delta_t_k: est_in(0.0, 200.0) = Field(default_factory=lambda: Estimate.exact(15.0, "assumed"))
    conversion_loss_liquid_fraction: Fraction = Field(default_factory=lambda: Estimate.exact(0.0, "assumed"))
    note: str | None = None

    @model_validator(mode="after")
    def _check(self) -> "Cooling":
        _fraction(self.conversion_loss_liquid_fraction, "conversion_loss_liquid_fraction")
        for name in ("coolant_delta_t_k", "air_delta_t_k"):
            est: Estimate = getattr(self, name)
            if (est.lo or 0) <= 0:
                raise ValueError(f"{name} must be above 0 K")
        return self


class RackPublished(StrictModel):
    """Rack totals a vendor publishes, kept only to be checked against ``gpus`` x the per-GPU figure
    of the rack's accelerator profile (:func:`published_total_errors`); no computation reads them."""

    hbm_bandwidth_tb_per_s: Est = ND  # whole rack, 1e12 B/s
    fp8_dense_pflops: Est = ND  # whole rack, 1e15 FLOP/s
    fp4_dense_pflops: Est = ND


# published field -> (accelerator property path, factor from the per-GPU unit to the rack unit)
_PER_GPU = {
    "hbm_bandwidth_tb_per_s": (("memory", "hbm_bandwidth_tb_per_s"), 1.0),
    "fp8_dense_pflops": (("compute", "fp8_dense_tflops"), 1e-3),
    "fp4_dense_pflops": (("compute", "fp4_dense_tflops"), 1e-3),
}


def _rounding_half_unit(x: float) -> float:
    """Half a unit in the second significant digit of ``x``: vendors round rack totals to two
    significant figures (2.9 EF, 1.4 EF, 576 TB/s is exact), so a total is consistent when the
    computed value rounds to the published one at that precision."""
    return 0.5 * 10 ** (math.floor(math.log10(abs(x))) - 1)


def published_total_errors(rack: "Rack", acc: Any) -> list[str]:
    """Published rack totals against ``gpus`` x the accelerator profile's per-GPU value.

    Rule: |gpus x per-GPU - published| <= half a unit in the published figure's second significant
    digit (e.g. Helios FP8: 72 x 20,132.7 TF = 1,449.6 PF against AMD's 1.4 EF: within 50 PF).
    A per-GPU value that is not disclosed skips the check.
    """
    if rack.published is None:
        return []
    errs: list[str] = []
    for name, (path, factor) in _PER_GPU.items():
        pub: Estimate = getattr(rack.published, name)
        per_gpu: Estimate = getattr(getattr(acc, path[0]), path[1])
        if not (pub.known and per_gpu.known):
            continue
        computed = rack.gpus * float(per_gpu.nominal) * factor  # type: ignore[arg-type]
        if abs(computed - float(pub.nominal)) > _rounding_half_unit(float(pub.nominal)):  # type: ignore[arg-type]
            errs.append(
                f"published.{name} = {pub.nominal:,g} but gpus x {rack.sku} {path[0]}.{path[1]} = "
                f"{rack.gpus} x {per_gpu.nominal:,g} = {computed:,.1f} (rule: equal to two significant figures)"
            )
    return errs


class Rack(ProfileBase):
    vendor: str
    sku: str  # accelerator profile name
    variant_of: str | None = None  # another rack profile this one is a variant of
    form_factor: str | None = None
    gpus: int = Field(ge=1, le=10**5)  # declared; must equal the sum over trays
    cpus: int | None = Field(default=None, ge=0, le=10**5)  # declared; checked if given
    switch_asics: int | None = Field(default=None, ge=0, le=10**5)  # declared scale-up switch ASICs; checked if given
    scale_up_world: int | None = Field(default=None, ge=1, le=10**6)  # GPUs in one scale-up domain
    racks_per_domain: int = Field(default=1, ge=1, le=10**3)  # IFoE128: one domain spans 2 racks; a profile is one rack
    trays: list[Tray]
    power: PowerShelves
    feeds: Feeds
    cooling: Cooling = Field(default_factory=Cooling)
    reference_power_w: Est | None = None  # a published / claimed rack power to compare with, W
    published: RackPublished | None = None  # vendor rack totals, checked against gpus x per-GPU

    @model_validator(mode="after")
    def _check(self) -> "Rack":
        # Every per-GPU figure divides by the GPUs the trays hold; a declared ``gpus`` that the trays
        # do not back is reported by ``consistency_errors``, an empty rack cannot be evaluated at all.
        if self.gpus_in_trays < 1:
            raise ValueError("the trays hold no GPU: a rack needs a component of kind = \"gpu\" with count >= 1 "
                             "in a tray with count >= 1")
        return self

    @property
    def gpus_in_trays(self) -> int:
        return sum(t.count * t.gpus_per_tray for t in self.trays)

    @property
    def cpus_in_trays(self) -> int:
        return sum(t.count * t.cpus_per_tray for t in self.trays)

    @property
    def switch_asics_in_trays(self) -> int:
        return sum(t.count * t.switch_asics_per_tray for t in self.trays)

    def consistency_errors(self) -> list[str]:
        """Declared totals against the tray contents (run by ``profiles validate``).

        GPU count = sum over tray groups of trays x GPUs per tray; likewise CPUs and switch ASICs.
        Also the text rules every profile follows (``ProfileBase.consistency_errors``).
        """
        errs: list[str] = super().consistency_errors()
        parts = " + ".join(f"{t.count} x {t.gpus_per_tray}" for t in self.trays if t.gpus_per_tray)
        if self.gpus_in_trays != self.gpus:
            errs.append(f"gpus = {self.gpus} but trays hold {parts or '0'} = {self.gpus_in_trays}")
        if self.cpus is not None and self.cpus_in_trays != self.cpus:
            errs.append(f"cpus = {self.cpus} but trays hold {self.cpus_in_trays}")
        if self.switch_asics is not None and self.switch_asics_in_trays != self.switch_asics:
            errs.append(f"switch_asics = {self.switch_asics} but switch trays hold {self.switch_asics_in_trays}")
        if self.scale_up_world is not None and self.scale_up_world > self.gpus * self.racks_per_domain:
            errs.append(
                f"scale_up_world = {self.scale_up_world} exceeds gpus x racks_per_domain = "
                f"{self.gpus} x {self.racks_per_domain}"
            )
        return errs
