"""Accelerator (GPU / TPU) profile spec.

TOML keys carry their units (``hbm_capacity_gb``: vendor GB = 1e9 B; ``hbm_capacity_gib``: 2**30 B;
``*_tflops``: 1e12 FLOP/s; ``tdp_w``: watts). Dense and 2:4-sparse peaks are separate keys. The
properties at the bottom convert to base units (bytes, B/s, FLOP/s) and are the only place the core
reads these numbers from.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from mi400plan.specs.common import ND, Est, Estimate, ProfileBase, StrictModel
from mi400plan.specs.efficiency import Efficiency
from mi400plan.units import GB, GiB, TB_PER_S, TFLOPS

Precision = Literal["fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp6", "fp4", "int8"]


class AcceleratorSilicon(StrictModel):
    """Descriptive silicon facts; used for identity checks (peak = units x clock x FLOP/clk)."""

    compute_units: Est = ND  # AMD CUs / NVIDIA SMs / TPU TensorCores, per package
    compute_unit_kind: Literal["CU", "SM", "TensorCore"] | None = None
    peak_clock_mhz: Est = ND  # MHz
    transistors_billion: Est = ND  # 1e9 transistors
    process: str | None = None
    dies: str | None = None


class AcceleratorMemory(StrictModel):
    hbm_type: str | None = None
    hbm_capacity_gb: Est | None = None  # vendor GB, 1e9 bytes
    hbm_capacity_gib: Est | None = None  # GiB, 2**30 bytes (ROCm tables, Google's TPU7x page)
    hbm_bandwidth_tb_per_s: Est = ND  # 1e12 B/s
    hbm_stacks: Est = ND

    @model_validator(mode="after")
    def _one_capacity_unit(self) -> "AcceleratorMemory":
        if (self.hbm_capacity_gb is None) == (self.hbm_capacity_gib is None):
            raise ValueError("give exactly one of hbm_capacity_gb (1e9 B) or hbm_capacity_gib (2**30 B)")
        return self

    @property
    def capacity_bytes(self) -> Estimate:
        if self.hbm_capacity_gb is not None:
            return self.hbm_capacity_gb.scaled(GB)
        assert self.hbm_capacity_gib is not None
        return self.hbm_capacity_gib.scaled(GiB)

    @property
    def bandwidth_bytes_per_s(self) -> Estimate:
        return self.hbm_bandwidth_tb_per_s.scaled(TB_PER_S)


class AcceleratorCompute(StrictModel):
    """Peak math rates per GPU package, TFLOP/s (TOPS for int8). ``dense`` and ``sparse`` (2:4)."""

    fp64_vector_dense_tflops: Est = ND
    fp64_matrix_dense_tflops: Est = ND
    fp32_dense_tflops: Est = ND
    tf32_dense_tflops: Est = ND
    tf32_sparse_tflops: Est = ND
    bf16_dense_tflops: Est = ND  # also FP16
    bf16_sparse_tflops: Est = ND
    fp8_dense_tflops: Est = ND
    fp8_sparse_tflops: Est = ND
    fp6_dense_tflops: Est = ND
    fp6_sparse_tflops: Est = ND
    fp4_dense_tflops: Est = ND
    fp4_sparse_tflops: Est = ND
    int8_dense_tops: Est = ND
    int8_sparse_tops: Est = ND
    fp4_basis_note: str | None = None  # where a vendor figure's dense/sparse basis is in doubt

    def peak_flops(self, precision: Precision, sparse: bool = False) -> Estimate:
        """Peak FLOP/s (base units) at ``precision``; dense unless ``sparse``."""
        p = {"fp16": "bf16", "fp64": "fp64_matrix"}.get(precision, precision)
        kind = "sparse" if sparse else "dense"
        unit = "tops" if precision == "int8" else "tflops"
        key = f"{p}_{kind}_{unit}"
        est: Estimate = getattr(self, key, ND)
        return est.scaled(TFLOPS)


class AcceleratorPower(StrictModel):
    tdp_w: Est = ND
    cooling: Literal["air", "liquid", "air_or_liquid"] | None = None


class AcceleratorInterconnect(StrictModel):
    """Default fabrics by profile name (``profiles/fabrics``); racks may override them."""

    scale_up_fabric: str | None = None
    scale_out_fabric: str | None = None
    host_link: str | None = None
    host_interface: str | None = None  # descriptive text ("PCIe Gen5 x16"); not a fabric profile name


class Accelerator(ProfileBase):
    vendor: str
    architecture: str | None = None
    form_factor: str | None = None
    year: int | None = None
    silicon: AcceleratorSilicon = Field(default_factory=AcceleratorSilicon)
    memory: AcceleratorMemory
    compute: AcceleratorCompute = Field(default_factory=AcceleratorCompute)
    power: AcceleratorPower = Field(default_factory=AcceleratorPower)
    interconnect: AcceleratorInterconnect = Field(default_factory=AcceleratorInterconnect)
    efficiency: Efficiency = Field(default_factory=Efficiency)

    @property
    def hbm_bytes(self) -> Estimate:
        return self.memory.capacity_bytes

    def consistency_errors(self) -> list[str]:
        """Cross-field checks run by ``profiles validate``.

        A 2:4 structured-sparse peak is never below the dense peak of the same precision
        (NVIDIA and AMD datasheets quote sparse = 2 x dense, Blackwell Ultra FP4 = 4/3 x).
        """
        errs: list[str] = []
        c = self.compute
        for name in type(c).model_fields:
            if "_sparse_" not in name:
                continue
            dense: Estimate = getattr(c, name.replace("_sparse_", "_dense_"), ND)
            sparse: Estimate = getattr(c, name)
            if dense.known and sparse.known and sparse.nominal < dense.nominal:  # type: ignore[operator]
                errs.append(
                    f"compute.{name} ({sparse.nominal:g}) is below "
                    f"compute.{name.replace('_sparse_', '_dense_')} ({dense.nominal:g})"
                )
        return errs
