"""Which weight formats a SKU runs: the one rule ``fit --mode infer`` and ``serve`` share.

NVFP4 (FP4 E2M1 values with an FP8 E4M3 scale per 16 elements) is an NVIDIA Blackwell format: the
fifth-generation Tensor Cores run it (NVIDIA, "Introducing NVFP4 for Efficient and Accurate
Low-Precision Inference", developer blog, 2025-06-24); other vendors' parts run the OCP MX formats
(MXFP4: a power-of-two scale per 32 elements, OCP Microscaling Formats (MX) Specification v1.0,
2023-09) instead.
Leaf module.
"""

from __future__ import annotations

from mi400plan.errors import MissingValueError


def format_refusal(weight_format: str, sku: str, vendor: str) -> MissingValueError | None:
    """The error for a SKU that does not run ``weight_format`` (exit 3, as an undisclosed value), or None."""
    if weight_format.lower() == "nvfp4" and vendor.strip().upper() != "NVIDIA":
        return MissingValueError(f"{sku} does not run NVFP4 (an NVIDIA Blackwell format)",
                                 hint="use --precision mxfp4 (OCP MX) on this SKU")
    return None
