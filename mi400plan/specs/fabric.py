"""Fabric (interconnect tier) profile spec: one scale-up or scale-out network as seen by one GPU.

Every bandwidth key names its unit *and* its direction: ``*_per_dir_*`` is one direction (what a
GPU can send while it also receives the same amount), ``*_bidir_*`` is the sum of both directions
(how NVLink and AMD marketing quote it). ``*_gb_per_s`` is 1e9 bytes/s, ``*_gbit_per_s`` is
1e9 bits/s (divide by 8 for bytes), ``*_tbit_per_s`` is 1e12 bits/s. Latency is in microseconds.

``bw_per_gpu_per_dir_gb_per_s`` is the one figure the collective model reads for bandwidth; the
link, lane, NIC and switch keys exist so that ``consistency_errors`` can check the identities that
tie them together (links x per-link rate, lanes x lane rate, ASICs x ASIC capacity, ...).
"""

import math
from typing import Annotated, Literal

from pydantic import Field, model_validator

from mi400plan.factories import new_list
from mi400plan.specs.common import ND, Est, Estimate, GBps, Latency, PosFraction, ProfileBase, StrictModel
from mi400plan.units import GB_PER_S, US

# One torus dimension: 1 to 4,096 chips (TPU v5p pods are 16 x 20 x 28); at most 8 dimensions.
TorusDim = Annotated[int, Field(ge=1, le=4096)]

Topology = Literal["switched", "full_mesh", "p2p_mesh", "ring", "torus"]
TierKind = Literal["scale_up", "scale_out"]

# Relative tolerance for identities: vendor figures are rounded to 3-4 significant digits.
IDENTITY_RTOL = 0.01


class SwitchPlane(StrictModel):
    """The switch ASICs that make up a switched scale-up domain (for radix and aggregate checks).

    ``lanes_per_gpu_per_asic`` x ``asics`` must equal the fabric's ``lanes_per_gpu``;
    ``domain_size`` x ``lanes_per_gpu_per_asic`` x lane rate must equal ``asic_capacity_tbit_per_s``;
    ``asics`` x ``asic_capacity_tbit_per_s`` must equal ``aggregate_tbit_per_s_per_dir``.
    """

    part: str | None = None
    asics: Est = ND
    asic_capacity_tbit_per_s: Est = ND  # per direction, 1e12 bit/s
    lanes_per_gpu_per_asic: Est = ND
    aggregate_tbit_per_s_per_dir: Est = ND  # whole domain, one direction
    switch_trays: Est = ND


class TorusSlice(StrictModel):
    """A slice shape the vendor allocates on a torus fabric (e.g. TPU7x ``4x4x4`` = 64 chips).

    ``shape``: chips along each torus dimension (same number of dimensions as ``torus_dims``).
    ``wrap``: per dimension, whether the slice has wraparound links there (a ring) or not (a line);
    mark a dimension wrapped only where the vendor documents it. A group whose size equals the
    slice's chip count gets this shape (the first listed one when two shapes have the same size);
    see ``mi400plan.comms.torus_slice``.
    """

    shape: list[TorusDim] = Field(min_length=1, max_length=8)
    wrap: list[bool] = Field(max_length=8)
    source: list[str] = Field(default_factory=new_list)
    note: str | None = None

    @property
    def chips(self) -> int:
        return math.prod(self.shape)

    def label(self) -> str:
        """``4x4x4 (wraparound: all)``, ``2x4x4 (wraparound: none)``, ``8x16 (wraparound: dim 2)``."""
        dims = [i + 1 for i, w in enumerate(self.wrap) if w]
        wr = "all" if len(dims) == len(self.shape) else ("none" if not dims else "dim " + ", ".join(map(str, dims)))
        return "x".join(map(str, self.shape)) + f" (wraparound: {wr})"


class Conflict(StrictModel):
    """A source that states a different value for a field, and how the profile resolves it."""

    field: str
    claim: str
    source: list[str]
    resolution: str


class Fabric(ProfileBase):
    tier: TierKind
    vendor: str | None = None
    technology: str | None = None
    topology: Topology
    torus_dims: list[TorusDim] | None = Field(default=None, min_length=1, max_length=8)  # GPUs along each torus dimension (torus only)
    torus_unit_dims: list[TorusDim] | None = Field(default=None, min_length=1, max_length=8)  # smallest rewirable block (e.g. a 4x4x4 TPU cube)
    torus_slices: list[TorusSlice] | None = Field(default=None, max_length=256)  # slice shapes groups get (torus only); see TorusSlice
    domain_size: Est  # GPUs in one domain; for scale-out the largest cluster the network builds

    links_per_gpu: Est = ND
    link_bw_per_dir_gb_per_s: GBps = ND
    link_bw_bidir_gb_per_s: GBps = ND
    lanes_per_gpu: Est = ND
    lane_gbit_per_s: Est = ND  # per direction
    nics_per_gpu: Est = ND
    nic_gbit_per_s: Est = ND  # per direction

    bw_per_gpu_per_dir_gb_per_s: Est
    bw_per_gpu_bidir_gb_per_s: Est = ND
    bidir_converted: bool = False  # true when the per-dir figure was derived by halving a bidir quote

    hop_latency_us: Latency = ND  # alpha: one message step between two GPUs on this tier, microseconds
    efficiency: PosFraction = ND  # achievable fraction of the per-direction bandwidth for large transfers

    switch: SwitchPlane | None = None
    conflicts: list[Conflict] = Field(default_factory=new_list)
    # The real topology cannot be represented by the model: this text names what stands in for it
    # ("Boardfly modelled as one non-blocking switch ..."); every result that uses the fabric says so
    # (profiles.approximation_warnings).
    approximation: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _shape(self) -> "Fabric":
        if self.topology == "torus":
            if not self.torus_dims:
                raise ValueError("a torus needs torus_dims (GPUs along each dimension)")
            if any(d < 2 for d in self.torus_dims):
                raise ValueError("every torus dimension needs at least 2 GPUs")
            if math.prod(self.torus_dims) > 2**24:
                raise ValueError(f"torus_dims {self.torus_dims} make more than 2**24 GPUs; not a plausible pod")
        elif self.torus_dims is not None:
            raise ValueError("torus_dims is only meaningful for topology = 'torus'")
        if self.torus_slices is not None:
            if self.topology != "torus":
                raise ValueError("torus_slices is only meaningful for topology = 'torus'")
            pod = math.prod(self.torus_dims or [])
            for i, sl in enumerate(self.torus_slices):
                where = f"torus_slices[{i}] ({'x'.join(map(str, sl.shape))})"
                if len(sl.shape) != len(self.torus_dims or []):
                    raise ValueError(f"{where}: needs {len(self.torus_dims or [])} dimensions like torus_dims")
                if len(sl.wrap) != len(sl.shape):
                    raise ValueError(f"{where}: wrap needs one true/false per dimension")
                if any(d < 1 for d in sl.shape):
                    raise ValueError(f"{where}: every dimension needs at least 1 chip")
                if any(w and d < 2 for d, w in zip(sl.shape, sl.wrap)):
                    raise ValueError(f"{where}: a dimension of 1 chip cannot wrap around")
                if sl.chips > pod:
                    raise ValueError(f"{where}: {sl.chips} chips, more than the {pod}-chip torus")
                missing = [k for k in sl.source if k not in self.sources]
                if missing:
                    raise ValueError(f"{where}: source keys not defined in [sources]: {', '.join(missing)}")
        if self.tier == "scale_up" and not self.domain_size.known:
            raise ValueError("a scale-up fabric needs a domain_size")
        eff = self.efficiency
        if eff.known and not (0.0 < (eff.lo or 0) and (eff.hi or 0) <= 1.0):
            raise ValueError("efficiency is a fraction in (0, 1]")
        return self

    # --- base-unit views ------------------------------------------------------------------
    @property
    def bw_per_dir_bytes_per_s(self) -> Estimate:
        """Per-GPU bandwidth in one direction, B/s (1 GB/s = 1e9 B/s)."""
        return self.bw_per_gpu_per_dir_gb_per_s.scaled(GB_PER_S)

    @property
    def link_bw_per_dir_bytes_per_s(self) -> Estimate:
        """One link's bandwidth in one direction, B/s; falls back to per-GPU / links."""
        if self.link_bw_per_dir_gb_per_s.known:
            return self.link_bw_per_dir_gb_per_s.scaled(GB_PER_S)
        if self.bw_per_gpu_per_dir_gb_per_s.known and self.links_per_gpu.known:
            return self.bw_per_gpu_per_dir_gb_per_s.scaled(GB_PER_S / self.links_per_gpu.nominal)  # type: ignore[operator]
        return ND

    @property
    def hop_latency_s(self) -> Estimate:
        return self.hop_latency_us.scaled(US)

    # --- identities -------------------------------------------------------------------------
    def consistency_errors(self) -> list[str]:
        """Declared identities that do not hold (empty when the profile is consistent).

        Checked on nominal values with a 1% tolerance (vendor rounding):
        per-GPU = links x per-link; per-link bidir = 2 x per-link per-dir; per-GPU bidir = 2 x per-dir;
        per-GPU = lanes x lane rate / 8; per-GPU = NICs x NIC rate / 8; torus: product(dims) =
        domain and links = 2 x dims; switch plane: lanes per ASIC x ASICs = lanes per GPU,
        domain x lanes per ASIC x lane rate = ASIC capacity, ASICs x capacity = aggregate,
        domain x per-GPU = aggregate. Also the text rules every profile follows
        (``ProfileBase.consistency_errors``).
        """
        errs: list[str] = [f"{self.name}: {e}" for e in super().consistency_errors()]

        def v(e: Estimate) -> float | None:
            return e.nominal

        def check(label: str, lhs: float | None, rhs: float | None, unit: str) -> None:
            if lhs is None or rhs is None:
                return
            if not math.isclose(lhs, rhs, rel_tol=IDENTITY_RTOL):
                errs.append(f"{self.name}: {label}: {lhs:g} {unit} != {rhs:g} {unit}")

        per_gpu = v(self.bw_per_gpu_per_dir_gb_per_s)  # GB/s per dir
        links, link = v(self.links_per_gpu), v(self.link_bw_per_dir_gb_per_s)
        if links is not None and link is not None:
            check("links_per_gpu x link_bw_per_dir_gb_per_s vs bw_per_gpu_per_dir_gb_per_s", links * link, per_gpu, "GB/s")
        if link is not None and v(self.link_bw_bidir_gb_per_s) is not None:
            check("2 x link_bw_per_dir_gb_per_s vs link_bw_bidir_gb_per_s", 2 * link, v(self.link_bw_bidir_gb_per_s), "GB/s")
        if per_gpu is not None:
            check("2 x bw_per_gpu_per_dir_gb_per_s vs bw_per_gpu_bidir_gb_per_s", 2 * per_gpu, v(self.bw_per_gpu_bidir_gb_per_s), "GB/s")
        lanes, lane = v(self.lanes_per_gpu), v(self.lane_gbit_per_s)
        if lanes is not None and lane is not None:
            # Gb/s -> GB/s: x 1e9/8 bytes per Gb, / 1e9
            check("lanes_per_gpu x lane_gbit_per_s / 8 vs bw_per_gpu_per_dir_gb_per_s", lanes * lane / 8, per_gpu, "GB/s")
        nics, nic = v(self.nics_per_gpu), v(self.nic_gbit_per_s)
        if nics is not None and nic is not None:
            check("nics_per_gpu x nic_gbit_per_s / 8 vs bw_per_gpu_per_dir_gb_per_s", nics * nic / 8, per_gpu, "GB/s")
        dom = v(self.domain_size)
        if self.topology == "torus" and self.torus_dims:
            check("product(torus_dims) vs domain_size", float(math.prod(self.torus_dims)), dom, "GPUs")
            check("2 x len(torus_dims) vs links_per_gpu", 2.0 * len(self.torus_dims), links, "links")
            if self.torus_unit_dims:
                if len(self.torus_unit_dims) != len(self.torus_dims) or any(
                    d % u for d, u in zip(self.torus_dims, self.torus_unit_dims)
                ):
                    errs.append(f"{self.name}: torus_unit_dims {self.torus_unit_dims} do not tile torus_dims {self.torus_dims}")
        if self.topology in ("full_mesh", "p2p_mesh") and dom is not None:
            check("links_per_gpu vs domain_size - 1 (a full mesh links every pair)", links, dom - 1, "links")
        sw = self.switch
        if sw is not None:
            asics, cap, per_asic, agg = v(sw.asics), v(sw.asic_capacity_tbit_per_s), v(sw.lanes_per_gpu_per_asic), v(sw.aggregate_tbit_per_s_per_dir)
            if asics is not None and per_asic is not None:
                check("switch.asics x switch.lanes_per_gpu_per_asic vs lanes_per_gpu", asics * per_asic, lanes, "lanes")
            if dom is not None and per_asic is not None and lane is not None:
                check(
                    "domain_size x switch.lanes_per_gpu_per_asic x lane_gbit_per_s vs switch.asic_capacity_tbit_per_s",
                    dom * per_asic * lane / 1000.0,
                    cap,
                    "Tb/s",
                )
            if asics is not None and cap is not None:
                check("switch.asics x switch.asic_capacity_tbit_per_s vs switch.aggregate_tbit_per_s_per_dir", asics * cap, agg, "Tb/s")
            if dom is not None and per_gpu is not None:
                # GB/s -> Tb/s: x 8 bits per byte, / 1000
                check("domain_size x bw_per_gpu_per_dir_gb_per_s x 8 / 1000 vs switch.aggregate_tbit_per_s_per_dir", dom * per_gpu * 8 / 1000.0, agg, "Tb/s")
        return errs
