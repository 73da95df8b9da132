"""Low-precision training recipes: which GEMMs run narrow, what the casts cost, which SKUs run them.

``--precision`` in training takes ``bf16``, ``fp32`` and four low-precision recipes:

==========  ==========  ===================================================================================
precision   GEMM peak   recipe
==========  ==========  ===================================================================================
``fp8``     FP8         per-tensor FP8 (Transformer Engine delayed or current scaling; blockwise FP8 with
                        128 x 128 / 1 x 128 scales prices the same): E4M3 tensors, one FP32 scale each
``mxfp8``   FP8         MXFP8 (TE ``MXFP8BlockScaling``): E4M3 values with an E8M0 scale per 32 elements
                        along one axis (OCP MX v1.0, 2023-09), so every tensor has a row-wise and a
                        column-wise copy, each made in one pass (no amax pass)
``nvfp4``   FP4         NVFP4 (NVIDIA, "Pretraining Large Language Models with NVFP4", arXiv 2509.25149,
                        2025-09-29; TE ``NVFP4BlockScaling``): E2M1 values, an E4M3 scale per 16
                        elements and an FP32 tensor scale; 2D 16 x 16 weight scaling, 16 x 16 random
                        Hadamard transforms on the weight-gradient GEMM's inputs, stochastic rounding
                        of gradients, about 15 % of the linear layers (most of them the last blocks)
                        kept in BF16
``mxfp4``   FP4         MXFP4 (OCP MX v1.0): E2M1 values with an E8M0 scale per 32 elements, trained with
                        the same Hadamard transforms and kept-BF16 share as NVFP4 (the paper's MXFP4
                        comparison runs)
==========  ==========  ===================================================================================

What stays BF16 in every recipe: attention's score and context products (flash attention runs at the
BF16 peak), the embedding, the LM head (Megatron-Core's output layer is not a Transformer Engine
module), norms and the router; the FP32 master weights, FP32 gradients and Adam moments are kept as the
BF16 recipe keeps them (the paper, section 4: "main weights, weight gradients and optimizer states are
kept in FP32").

Casts (``cast_bytes``): HBM bytes per element to quantize a BF16 GEMM input, once before the forward GEMM
(the activation X: row-wise for the forward, column-wise kept for the weight gradient) and once before the
backward (the output gradient dY: row-wise for the data gradient, column-wise for the weight gradient):

* ``fp8`` 6 B: an amax pass (read 2) and a cast pass (read 2, write 1 + 1) (``gemm.FP8_CAST_BYTES_TRAIN``).
* ``mxfp8`` 2 + 2 x (1 + 1/32) = 4.0625 B: one pass reads the BF16 tensor and writes both scaled copies
  (TE ``MXFP8Quantizer`` with row-wise and column-wise usage; each block's scale is its own amax).
* ``nvfp4`` 2 + (2 + 0.5625) + (2 + 0.5625) = 7.125 B: an amax pass for the FP32 tensor scales (TE
  computes the plain and the Hadamard-transformed amax in one read), the row-wise cast, and the
  column-wise Hadamard-and-cast of the weight-gradient operand, which reads the BF16 tensor again (the
  16 x 16 transform is 32 FLOP per element, 16 FLOP per byte read: memory-bound on every SKU here).
* ``mxfp4`` (2 + 0.53125) + (2 + 0.53125) = 5.0625 B: no tensor scale, so no amax pass.

The weights' narrow copies are made once a step, not per micro-batch, and are not priced (as for FP8).

GEMM ceilings (``matmul_estimate``): per-tensor FP8 runs at the profile's ``matmul_fp8``. MXFP8 GEMMs
run at ``MXFP8_OVER_FP8`` of it: fitted on the seven Megatron-Bridge rows that ran the same model and
layout both ways (``benchmarks/fit_mxfp8.py``). FP4 GEMMs are a rule: the same fraction of the FP4 peak
as the MXFP8 ceiling of the FP8 peak (block-scaled tensor-core instructions of the same generation), down
to ``FP4_CEILING_LOW`` of it, status ``assumed``: no release the calibration may use (Megatron-Bridge
25.09 / 25.11) has an FP4 row, so the 26.02 NVFP4 rows are validation only.
Leaf module (imports only errors and specs).
"""

from __future__ import annotations


from mi400plan.errors import UsageError
from mi400plan.records import record
from mi400plan.specs.common import Estimate


class PrecisionRefusal(UsageError):
    """A SKU that does not run the ``--precision`` asked for (exit 2); with several SKUs, sweep shows it as
    that SKU's n/d row."""


@record
class LowPrecision:
    """One low-precision training recipe (module docstring)."""

    name: str
    gemm: str  # the peak the block GEMMs run at: "fp8" or "fp4"
    element_bytes: float  # bytes per element of a quantized copy, scales included
    cast_bytes: float  # HBM bytes per BF16 element quantized before a GEMM (module docstring)
    bf16_share: float  # default share of the block linear layers kept in BF16
    label: str


# Bytes per element with scales: OCP MX: 8 or 4 bits + an 8-bit E8M0 scale per 32; NVFP4: 4 bits + an
# 8-bit E4M3 scale per 16 (specs.layout.WEIGHT_FORMAT_BITS); per-tensor FP8: 1 B (one scale a tensor).
MXFP8_BYTES = (8.0 + 8.0 / 32) / 8
NVFP4_BYTES = (4.0 + 8.0 / 16) / 8
MXFP4_BYTES = (4.0 + 8.0 / 32) / 8
# The NVFP4 paper (arXiv 2509.25149, section 4.1): "about 15 % of the linear layers" stay BF16.
FP4_BF16_SHARE = 0.15

RECIPES: dict[str, LowPrecision] = {
    "fp8": LowPrecision("fp8", "fp8", 1.0, 6.0, 0.0, "per-tensor FP8"),
    "mxfp8": LowPrecision("mxfp8", "fp8", MXFP8_BYTES, 2.0 + 2.0 * MXFP8_BYTES, 0.0, "MXFP8 (E8M0 scale per 32)"),
    "nvfp4": LowPrecision("nvfp4", "fp4", NVFP4_BYTES, 2.0 + 2.0 * (2.0 + NVFP4_BYTES), FP4_BF16_SHARE,
                          "NVFP4 (E4M3 scale per 16, Hadamard on wgrad inputs)"),
    "mxfp4": LowPrecision("mxfp4", "fp4", MXFP4_BYTES, 2.0 * (2.0 + MXFP4_BYTES), FP4_BF16_SHARE,
                          "MXFP4 (E8M0 scale per 32, Hadamard on wgrad inputs)"),
}
# ``fp4`` names OCP MXFP4 in training, as the inference formats read it.
ALIASES = {"fp4": "mxfp4"}

# MXFP8 GEMM ceiling over the per-tensor FP8 one (fitted, ``benchmarks/fit_mxfp8.py``: 7 paired rows
# of Megatron-Bridge 25.09 (2025-09) and 25.11 (2025-11) on B200, GB200 and GB300; low/high: the
# smallest and largest single-row fit).
MXFP8_OVER_FP8 = Estimate(nominal=0.925, low=0.905, high=0.95, status="measured",
                          source=["Megatron-Bridge 25.09 / 25.11 performance summary, FP8-CS vs FP8-MX rows"])
# FP4 ceiling over the MXFP8 one (fractions of each peak): a rule, 1.0 nominal, down to 0.6.
FP4_CEILING_LOW = 0.6


def recipe(precision: str) -> LowPrecision | None:
    """The low-precision recipe ``precision`` names, or None (bf16, fp32)."""
    return RECIPES.get(ALIASES.get(precision, precision))


def gemm_precision(precision: str) -> str:
    """The peak the block GEMMs of a training precision run at (``bf16`` for bf16 and fp32 runs, which
    this planner prices at the 16-bit peak)."""
    lp = recipe(precision)
    return lp.gemm if lp else ("bf16" if precision in ("fp32", "fp16") else precision)


def has_fp4(acc: object) -> bool:
    return bool(acc.compute.peak_flops("fp4").known)  # type: ignore[attr-defined]


def refusal(precision: str, acc: object) -> PrecisionRefusal | None:
    """The usage error (exit 2, naming --precision) for a SKU the recipe does not run on, or None.

    * NVFP4 is an NVIDIA Blackwell/Rubin format (``formats.format_refusal``).
    * FP4 recipes need FP4 tensor math: a disclosed dense FP4 peak (H100, MI300X: none).
    * MXFP8 needs block-scaled (OCP MX) tensor instructions: Transformer Engine runs it only on Blackwell
      ("MXFP8 ... supported on Blackwell and later", TE docs, "Using FP8 and FP4 with Transformer
      Engine", 2025); CDNA 4 (MI350/MI355) has MX math, CDNA 3 (MI300X/MI325X) has none. Every part in
      the catalog with MX math also discloses an FP4 peak, so that is the test.
    """
    lp = recipe(precision)
    if lp is None or lp.name == "fp8":
        return None
    name, vendor = acc.name, acc.vendor.strip().upper()  # type: ignore[attr-defined]
    if lp.name == "nvfp4" and vendor != "NVIDIA":
        return PrecisionRefusal(f"--precision nvfp4: {name} does not run NVFP4 (an NVIDIA Blackwell/Rubin format)",
                          hint="use --precision mxfp4 (OCP MX FP4) on this SKU")
    if not has_fp4(acc):
        what = "FP4 tensor math" if lp.gemm == "fp4" else "block-scaled (MX) tensor math"
        hint = ("use --precision fp8 (per-tensor FP8)" if acc.compute.peak_flops("fp8").known  # type: ignore[attr-defined]
                else "use --precision bf16")
        return PrecisionRefusal(f"--precision {lp.name}: {name} has no {what} (its profile discloses no dense FP4 peak)",
                          hint=hint)
    return None


def matmul_estimate(fp8: Estimate, precision: str) -> Estimate:
    """The block-GEMM ceiling of ``precision`` from the profile's per-tensor FP8 one (module docstring)."""
    lp = recipe(precision)
    if lp is None or lp.name == "fp8" or not fp8.known:
        return fp8
    lo, nom, hi = fp8.triple("FP8 matmul efficiency")
    mlo, mnom, mhi = MXFP8_OVER_FP8.triple("MXFP8 over FP8")
    if lp.gemm == "fp8":
        return Estimate(nominal=nom * mnom, low=lo * mlo, high=min(1.0, hi * mhi), status="estimate",
                        source=list(fp8.source) + list(MXFP8_OVER_FP8.source),
                        note=f"matmul_fp8 x {mnom} (MXFP8 over per-tensor FP8, fitted)")
    return Estimate(nominal=nom * mnom, low=lo * mlo * FP4_CEILING_LOW, high=min(1.0, hi * mhi), status="assumed",
                    source=list(fp8.source), note="rule: FP4 GEMMs reach the MXFP8 ceiling's fraction of their peak "
                    f"(down to {FP4_CEILING_LOW}x)")
