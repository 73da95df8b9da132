"""Accelerator (GPU / TPU) profile spec.

Numbers carry their units in the key (``*_tflops``: 1e12 FLOP/s; ``tdp_w``: watts;
``hbm_bandwidth_tb_per_s``: 1e12 B/s) or, for memory capacities, in an explicit ``unit``:
``hbm_capacity = { nominal = 80, unit = "GiB", stated = "80 GB" }``. Vendors' HBM "GB" is binary
(an "80 GB" H100 has 80 x 2**30 B of HBM and its driver reports 81,559 MiB usable), so a capacity
without its unit is rejected. ``hbm_usable`` is the capacity the driver reports (``nvidia-smi``,
``rocm-smi``), where published; every computation uses it when given, else the stated capacity.

Peak rates: ``*_dense_*`` keys hold dense rates, ``*_sparse_*`` 2:4 structured-sparse rates,
``*_compressed_*`` rates that rely on something else than dense math (NVIDIA Rubin's 50 PF NVFP4
"adaptive compression" inference figure). A value may declare ``basis`` (dense / sparse /
compressed); see :meth:`AcceleratorCompute._basis_rules` for the rules a profile must meet.
The properties at the bottom convert to base units (bytes, B/s, FLOP/s) and are the only place the
core reads these numbers from.
"""

from typing import Any, Literal

from pydantic import Field, model_validator

from mi400plan.specs.common import ND, Est, Estimate, GBytes, ProfileBase, StrictModel, TBps, Tflops, Watts, est_in
from mi400plan.specs.efficiency import Efficiency
from mi400plan.units import GB, MB, TB, TB_PER_S, TFLOPS, GiB, MiB, TiB

Precision = Literal["fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp6", "fp4", "int8"]


class AcceleratorSilicon(StrictModel):
    """Descriptive silicon facts; used for identity checks (peak = units x clock x FLOP/clk)."""

    compute_units: Est = ND  # AMD CUs / NVIDIA SMs / TPU TensorCores, per package
    compute_unit_kind: Literal["CU", "SM", "TensorCore"] | None = None
    peak_clock_mhz: Est = ND  # MHz
    transistors_billion: Est = ND  # 1e9 transistors
    process: str | None = None
    dies: str | None = None


CapacityUnit = Literal["B", "MB", "MiB", "GB", "GiB", "TB", "TiB"]
CAPACITY_UNIT_BYTES: dict[str, int] = {"B": 1, "MB": MB, "MiB": MiB, "GB": GB, "GiB": GiB, "TB": TB, "TiB": TiB}


CAPACITY_MAX_BYTES = 2**50  # 1 PiB per package: thousands of times any announced part


class Capacity(Estimate):
    """A memory capacity with its unit stated (``unit``), and the vendor's own words (``stated``).

    ``unit = "GiB"`` for a vendor's HBM "GB" (binary-sized stacks), ``"MiB"`` for an ``nvidia-smi``
    figure, ``"B"`` for a ``rocm-smi`` byte count, ``"GB"`` only where 1e9 B is really meant.
    """

    unit: CapacityUnit
    stated: str | None = None  # the vendor's text, e.g. "80 GB"

    @model_validator(mode="before")
    @classmethod
    def _needs_unit(cls, data: Any) -> Any:
        if isinstance(data, bool) or not isinstance(data, dict) or "unit" not in data:
            raise ValueError(
                "a capacity needs its unit: write { nominal = N, unit = \"GiB\" } (units: "
                + ", ".join(CAPACITY_UNIT_BYTES)
                + "); vendors' HBM \"GB\" is binary, so an \"80 GB\" part is unit = \"GiB\""
            )
        return data

    @model_validator(mode="after")
    def _positive(self) -> "Capacity":
        # Memory fit divides by the capacity: zero, negative or absurd sizes are refused here, as
        # every other profile number is by its domain (specs.common.est_in).
        for x in (self.nominal, self.low, self.high):
            if x is not None and not 0 < x * CAPACITY_UNIT_BYTES[self.unit] <= CAPACITY_MAX_BYTES:
                raise ValueError(f"a capacity must be above 0 and at most 1 PiB, got {x:g} {self.unit}")
        return self

    def in_bytes(self) -> Estimate:
        """The same value in bytes (a plain ``Estimate``, ranges scaled with it)."""
        est = Estimate.model_validate(self.model_dump(exclude={"unit", "stated"}))
        return est.scaled(CAPACITY_UNIT_BYTES[self.unit])


class AcceleratorMemory(StrictModel):
    """HBM per package. Capacity: exactly one of ``hbm_capacity`` (with ``unit``) or the older
    unit-in-key forms ``hbm_capacity_gb`` (1e9 B) / ``hbm_capacity_gib`` (2**30 B)."""

    hbm_type: str | None = None
    hbm_capacity: Capacity | None = None  # what the vendor states, in its real unit
    hbm_capacity_gb: GBytes | None = None  # 1e9 bytes (unit in the key)
    hbm_capacity_gib: GBytes | None = None  # 2**30 bytes (unit in the key)
    hbm_usable: Capacity | None = None  # driver-reported usable capacity, where published
    hbm_bandwidth_tb_per_s: TBps = ND  # 1e12 B/s
    hbm_stacks: Est = ND

    @model_validator(mode="after")
    def _one_capacity_unit(self) -> "AcceleratorMemory":
        given = [x for x in (self.hbm_capacity, self.hbm_capacity_gb, self.hbm_capacity_gib) if x is not None]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of hbm_capacity = { nominal = N, unit = \"GiB\" }, "
                "hbm_capacity_gb (1e9 B) or hbm_capacity_gib (2**30 B)"
            )
        usable = self.usable_bytes
        stated = self.capacity_bytes
        if usable.known and stated.known and usable.nominal > stated.hi:  # type: ignore[operator]
            raise ValueError(
                f"hbm_usable ({usable.nominal:,.0f} B) exceeds the stated capacity "
                f"({stated.hi:,.0f} B): a driver cannot report more memory than the package has"
            )
        return self

    @property
    def capacity_bytes(self) -> Estimate:
        """The vendor's stated capacity in bytes."""
        if self.hbm_capacity is not None:
            return self.hbm_capacity.in_bytes()
        if self.hbm_capacity_gb is not None:
            return self.hbm_capacity_gb.scaled(GB)
        assert self.hbm_capacity_gib is not None
        return self.hbm_capacity_gib.scaled(GiB)

    @property
    def usable_bytes(self) -> Estimate:
        """Driver-reported usable bytes where published, else the stated capacity."""
        return self.hbm_usable.in_bytes() if self.hbm_usable is not None else self.capacity_bytes

    @property
    def capacity_basis(self) -> str:
        """What the capacity every output uses is: ``usable`` (driver-reported) or ``stated``."""
        return "usable" if self.hbm_usable is not None else "stated"

    @property
    def bandwidth_bytes_per_s(self) -> Estimate:
        return self.hbm_bandwidth_tb_per_s.scaled(TB_PER_S)


_BASIS_OF_KEY = (("_dense_", "dense"), ("_sparse_", "sparse"), ("_compressed_", "compressed"))


def key_basis(key: str) -> str | None:
    """The math basis a compute key names: ``dense``, ``sparse`` (2:4) or ``compressed``."""
    for part, basis in _BASIS_OF_KEY:
        if part in key:
            return basis
    return None


class AcceleratorCompute(StrictModel):
    """Peak math rates per GPU package, TFLOP/s (TOPS for int8).

    ``*_dense_*``: dense math. ``*_sparse_*``: 2:4 structured sparsity. ``*_compressed_*``: a
    vendor rate that needs neither, but is not dense math either (Rubin's 50 PF NVFP4 inference
    figure with "adaptive compression"); no computation reads it, it is kept so the figure has a
    home that is never a dense key.
    """

    fp64_vector_dense_tflops: Tflops = ND
    fp64_matrix_dense_tflops: Tflops = ND
    fp32_dense_tflops: Tflops = ND
    tf32_dense_tflops: Tflops = ND
    tf32_sparse_tflops: Tflops = ND
    bf16_dense_tflops: Tflops = ND  # also FP16
    bf16_sparse_tflops: Tflops = ND
    fp8_dense_tflops: Tflops = ND
    fp8_sparse_tflops: Tflops = ND
    fp6_dense_tflops: Tflops = ND
    fp6_sparse_tflops: Tflops = ND
    fp4_dense_tflops: Tflops = ND
    fp4_sparse_tflops: Tflops = ND
    int8_dense_tops: Tflops = ND
    int8_sparse_tops: Tflops = ND
    fp4_compressed_tflops: Tflops = ND
    fp4_basis_note: str | None = None  # where a vendor figure's dense/sparse basis is in doubt

    @model_validator(mode="after")
    def _basis_rules(self) -> "AcceleratorCompute":
        """Reject a sparse (or compressed) rate stored under a dense key. Two rules:

        1. A value that declares ``basis`` must sit under a key of that basis: ``basis = "sparse"``
           only in ``*_sparse_*``, ``"compressed"`` only in ``*_compressed_*``, ``"dense"`` only in
           ``*_dense_*``.
        2. Where the dense and the 2:4-sparse rate of one precision are both given, the sparse rate
           is above the dense one and at most twice it: dense < sparse <= 2 x dense (nominal
           values, with 0.1 % slack on the 2x for vendors' rounding: H200 989.4 / 1,978.9).
           Structured 2:4 sparsity skips half the products, so no part exceeds 2x
           (NVIDIA H100/B200 and AMD MI300X datasheets: exactly 2x; Blackwell Ultra FP4: 4/3x).
           Equal rates mean one key holds the other's figure; a part without a sparse speed-up
           leaves ``*_sparse_*`` as "n/d".
        """
        for name in type(self).model_fields:
            est = getattr(self, name)
            if not isinstance(est, Estimate) or est.basis is None:
                continue
            if key_basis(name) != est.basis:
                raise ValueError(
                    f"compute.{name} declares basis = {est.basis!r} but the key holds "
                    f"{key_basis(name) or 'no'} rates (rule: a {est.basis} rate goes under a "
                    f"*_{est.basis}_* key)"
                )
        for name in type(self).model_fields:
            if "_sparse_" not in name:
                continue
            dense_key = name.replace("_sparse_", "_dense_")
            dense: Estimate = getattr(self, dense_key, ND)
            sparse: Estimate = getattr(self, name)
            if not (dense.known and sparse.known):
                continue
            d, sp = float(dense.nominal), float(sparse.nominal)  # type: ignore[arg-type]
            if not d < sp <= 2 * d * 1.001:
                raise ValueError(
                    f"compute.{dense_key} = {d:g} with compute.{name} = {sp:g} breaks the rule "
                    "dense < sparse <= 2 x dense (2:4 sparsity at most doubles the rate; equal "
                    "rates mean a sparse figure sits under the dense key)"
                )
        return self

    def peak_flops(self, precision: Precision, sparse: bool = False) -> Estimate:
        """Peak FLOP/s (base units) at ``precision``; dense unless ``sparse``."""
        p = {"fp16": "bf16", "fp64": "fp64_matrix"}.get(precision, precision)
        kind = "sparse" if sparse else "dense"
        unit = "tops" if precision == "int8" else "tflops"
        key = f"{p}_{kind}_{unit}"
        est: Estimate = getattr(self, key, ND)
        return est.scaled(TFLOPS)


class AcceleratorPower(StrictModel):
    tdp_w: Watts = ND
    cooling: Literal["air", "liquid", "air_or_liquid"] | None = None


HostLinkGBps = est_in(0.0, 1e4)
"""A host-link bandwidth in GB/s per direction, (0, 10,000]: no CPU-GPU link comes near 10 TB/s."""


class AcceleratorInterconnect(StrictModel):
    """Default fabrics by profile name (``profiles/fabrics``); racks may override them."""

    scale_up_fabric: str | None = None
    scale_out_fabric: str | None = None
    host_link: str | None = None
    host_interface: str | None = None  # descriptive text ("PCIe Gen5 x16"); not a fabric profile name
    # GPU <-> host memory bandwidth, GB/s per direction per GPU (10^9 B/s): what activation offloading
    # (--offload-layers) copies over. PCIe 5.0 x16 = 64; NVLink-C2C's share on Grace superchips.
    host_link_gb_per_s: HostLinkGBps = ND


class Accelerator(ProfileBase):
    vendor: str
    architecture: str | None = None
    form_factor: str | None = None
    year: int | None = Field(default=None, ge=1990, le=2100)
    silicon: AcceleratorSilicon = Field(default_factory=AcceleratorSilicon)
    memory: AcceleratorMemory
    compute: AcceleratorCompute = Field(default_factory=AcceleratorCompute)
    power: AcceleratorPower = Field(default_factory=AcceleratorPower)
    interconnect: AcceleratorInterconnect = Field(default_factory=AcceleratorInterconnect)
    efficiency: Efficiency = Field(default_factory=Efficiency)

    @property
    def hbm_bytes(self) -> Estimate:
        """HBM bytes every computation uses: driver-reported usable where published, else stated."""
        return self.memory.usable_bytes
