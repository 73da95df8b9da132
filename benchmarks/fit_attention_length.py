"""Fit flash attention's rate by sequence length per kernel generation and print it (not a test).

Run from the repository root with the package installed: ``python benchmarks/fit_attention_length.py``.

Calibration data, and only this: the published kernel benchmark ``gemm.ATTN_BENCH_TFLOPS`` (Shah et al.,
"FlashAttention-3", arXiv 2407.08608, 2024-07-11, Figure 5: forward, causal mask, head dim 128, BF16,
H100 80GB SXM5, six sequence lengths per kernel). For each generation the two parameters of
``rate(s) = r_inf s / (s + s_half)`` are fitted by least squares on the relative error (``1 / rate`` is
linear in ``1 / s``: ``1 / rate = a + b / s``, ``r_inf = 1 / a``, ``s_half = b / a``), three points a
parameter. The model keeps ``s_half`` (``gemm.ATTN_HALF_KEYS``); the long-sequence rate itself is the
accelerator profile's ``attention`` efficiency, moved between generations by ``stacks``.
"""

from __future__ import annotations

import numpy as np

from mi400plan import gemm


def fit(rates: tuple[float, ...]) -> tuple[float, float, np.ndarray]:
    """(r_inf TFLOP/s, s_half keys, relative errors) of one kernel's published rates."""
    s = np.asarray(gemm.ATTN_BENCH_SEQ, dtype=float)
    r = np.asarray(rates, dtype=float)
    (a, b), *_ = np.linalg.lstsq(np.vstack([r, r / s]).T, np.ones_like(s), rcond=None)  # r (a + b/s) = 1
    r_inf, s_half = 1.0 / a, b / a
    return r_inf, s_half, r_inf * s / (s + s_half) / r - 1.0


def main() -> None:
    for kernel, rates in gemm.ATTN_BENCH_TFLOPS.items():
        r_inf, s_half, err = fit(rates)
        print(f"{kernel:<6} r_inf {r_inf:6.1f} TFLOP/s  s_half {s_half:6.1f} keys  (catalog {gemm.ATTN_HALF_KEYS[kernel]:.0f})"
              f"  errors % {np.round(err * 100, 1)}  max {np.abs(err).max() * 100:.1f}")


if __name__ == "__main__":
    main()
