"""Achievable-efficiency figures for an accelerator (used by ``sweep``).

Each figure is a fraction of the datasheet peak, calibrated from a published measured run or a
vendor "max achievable" figure, with its source. Users override them with their own measurements.
"""

from __future__ import annotations

from mi400plan.specs.common import ND, Est, StrictModel


class Efficiency(StrictModel):
    matmul_bf16: Est = ND  # achievable fraction of dense BF16 peak on large GEMMs
    matmul_fp8: Est = ND  # achievable fraction of dense FP8 peak on large GEMMs
    hbm_bandwidth: Est = ND  # achievable fraction of HBM peak for streaming kernels
