"""Fit the per-SKU GEMM / attention efficiencies on the calibration set and print the fit (not a test).

Run from the repository root with the package installed: ``python benchmarks/fit_gemm.py``.

Calibration data, and only these (the validation runs in ``mi400plan/data/train_validation.csv`` are
never used here):

* A100: Narayanan et al. 2021, Table 1 (``tests/test_calibration.py``): the large-GEMM ceiling
  ``matmul_bf16`` and the streaming-kernel efficiency ``hbm_bandwidth``, by grid search on the mean
  absolute error of the ten rows.
* H100: Llama 3 405B, Table 4 (``tests/test_calibration_h100.py``): ``matmul_bf16`` on the two 8K
  rows, then the flash-attention efficiency ``attention`` on the 128K row (attention is 57 % of
  its model FLOPs).
* MI300X / MI325X: AMD's published max-achievable FLOPs (ROCm blog "Measuring Max-Achievable FLOPs
  - Part 2", 2025): the kernel ceiling MAF / dense peak, printed here from the published figures, the
  top of the profiles' ranges; the nominal ceilings come from the training fit below and the CDNA 3
  rules (``cdna3_rules``).
* AMD Instinct training runs (``tests/data/train_calibration_amd.csv``, ``tests/test_calibration_amd.py``):
  the BF16 / FP8 ceiling of each (SKU, precision) with measured rows, by grid search on their mean
  absolute error. Rows without a measured figure are listed as pending and not fitted; with no
  measured row a SKU keeps its max-achievable-FLOPs ceiling.
* AMD's measured MoE runs in the same file (DeepSeek-V2 on 32 MI355X): the host time per local-expert
  GEMM ``expert_host_us`` (``search.expert_host_seconds``), by grid search, the ceilings held at their
  dense-run fit; the MoE runs are left out of the ceiling fit.
* NVIDIA H100 FP8, B200 BF16 / FP8: published GEMM benchmark figures with their shapes
  (``tests/data/gemm_vendor.csv``, ``tests/test_gemm_vendor.py``): each ``fit`` figure inverted through
  the GEMM model (the ceiling that gives it back at its shape), the mean per (SKU, precision); the
  ``check`` figures are printed with the model's error. H200 takes the H100 value (same die), GB200,
  B300 and GB300 the B200 fractions (rule, no figure of their own).

The printed values are what the profiles carry (``[efficiency]``, with these sources).
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import test_calibration as nar21  # noqa: E402
import test_calibration_amd as amdcal  # noqa: E402
import test_calibration_h100 as ll3  # noqa: E402
import test_gemm_vendor as vendor  # noqa: E402
from test_validation_train import hardware_replaced  # noqa: E402

from mi400plan import gemm  # noqa: E402
from mi400plan.profiles import Catalog  # noqa: E402

# AMD, "Measuring Max-Achievable FLOPs - Part 2" (ROCm blog, 2025), Table 1, TFLOP/s; dense peaks
# from the same blog's footnotes (MI300X / MI325X: 1,307.4 BF16, twice that FP8).
AMD_MAF = {("mi300x", "bf16"): 708, ("mi300x", "fp8"): 1273, ("mi325x", "bf16"): 843, ("mi325x", "fp8"): 1519}
AMD_PEAK_BF16 = 1307.4


def errors(mod, rows, col: int, **hw_update) -> np.ndarray:
    """Relative errors of the calibration test's rows with ``search.Hardware`` fields replaced."""
    with hardware_replaced(**hw_update):
        cat = Catalog.default([])
        out = []
        for r in rows:
            v = mod.achieved_tflops(cat, r)
            out.append((v[0] if isinstance(v, tuple) else v) / r[col] - 1.0)
        return np.array(out)


def fit_a100() -> tuple[float, float, float]:
    """Grid search of (ceiling, HBM efficiency, small-tile efficiency) on Narayanan 2021 Table 1.

    HBM efficiency is searched within 0.80-0.90 (streaming kernels' measured range, see the
    profiles' note); the small-tile efficiency (``gemm.SMALL_TILE_EFF``) is one value for every SKU.
    """
    best = (np.inf, 0.0, 0.0, 0.0)
    grid = itertools.product(np.arange(0.64, 0.721, 0.005), np.arange(0.80, 0.901, 0.025), (0.85, 0.9, 0.95, 1.0))
    for mm, hb, se in grid:
        gemm.TILES = ((gemm.TILE_M, gemm.TILE_N, 1.0), (gemm.SMALL_TILE_M, gemm.TILE_N, se))
        e = errors(nar21, nar21.TABLE_1, -1, matmul_eff=mm, hbm_eff=hb)
        score = np.abs(e).mean() + 0.25 * np.abs(e).max()
        if score < best[0]:
            best = (score, mm, hb, se)
    _, mm, hb, se = best
    gemm.TILES = ((gemm.TILE_M, gemm.TILE_N, 1.0), (gemm.SMALL_TILE_M, gemm.TILE_N, se))
    e = errors(nar21, nar21.TABLE_1, -1, matmul_eff=mm, hbm_eff=hb)
    print(f"A100  matmul_bf16 {mm:.3f}  hbm_bandwidth {hb:.3f}  SMALL_TILE_EFF {se:.2f}  errors % {np.round(e * 100, 1)}"
          f"  mean {np.abs(e).mean() * 100:.1f}  max {np.abs(e).max() * 100:.1f}")
    return mm, hb, se


def fit_h100() -> tuple[float, float]:
    """Ceiling on the two 8K rows of Llama 3 Table 4, then attention on the 128K row."""
    rows8k, row128k = ll3.TABLE_4[:2], ll3.TABLE_4[2:]
    mm, att = 0.53, 0.30
    for _ in range(3):  # alternate: the 8K rows carry a little attention time, the 128K row GEMM time
        mm = min(np.arange(0.50, 0.601, 0.005), key=lambda x: np.abs(errors(ll3, rows8k, 7, matmul_eff=x, attn_eff=att)).mean())
        att = min(np.arange(0.20, 0.451, 0.005), key=lambda x: abs(errors(ll3, row128k, 7, matmul_eff=mm, attn_eff=x)[0]))
    e = errors(ll3, ll3.TABLE_4, 7, matmul_eff=mm, attn_eff=att)
    print(f"H100  matmul_bf16 {mm:.3f}  attention {att:.3f}  errors % {np.round(e * 100, 1)}"
          f"  mean {np.abs(e).mean() * 100:.1f}  max {np.abs(e).max() * 100:.1f}")
    return mm, att


def amd_ceilings() -> None:
    """Large-GEMM ceilings from AMD's published max-achievable FLOPs."""
    for (sku, prec), maf in AMD_MAF.items():
        peak = AMD_PEAK_BF16 * (2 if prec == "fp8" else 1)
        print(f"{sku:<7} matmul_{prec} {maf / peak:.3f}  (MAF {maf} / peak {peak:.1f} TFLOP/s)")


def amd_errors(group: list[dict[str, str]], **hw_update) -> np.ndarray:
    """Relative errors of AMD calibration runs with ``search.Hardware`` fields replaced."""
    with hardware_replaced(**hw_update):
        cat = Catalog.default([])
        return np.array([amdcal.val.predict(cat, r) / float(r["tokens_per_s_per_gpu"]) - 1.0 for r in group])


def fit_amd_training() -> dict[tuple[str, str], float]:
    """Ceiling per (SKU, precision) on AMD's measured training runs; pending rows are only listed."""
    measured = amdcal.measured()
    done = [r for r in measured if not is_moe(r)]
    pending = [r["id"] for r in amdcal.rows() if r not in measured]
    print(f"AMD dense training runs: {len(done)} measured; {len(pending)} runs pending (no figure transcribed): {pending}")
    out: dict[tuple[str, str], float] = {}
    for key in sorted({(r["sku"], r["precision"]) for r in done}):
        group = [r for r in done if (r["sku"], r["precision"]) == key]

        def err(mm: float, group=group) -> np.ndarray:
            # The BF16 ceiling moves with the FP8 one by the CDNA rule (it prices the LM head, BF16 in FP8
            # training: ``search.Hardware.head_gemm_sku``), so the fit is the rule's fixed point.
            bf16 = mm / AMD_FP8_OVER_BF16 if key[1] == "fp8" else 0.0
            return amd_errors(group, matmul_eff=mm, matmul_bf16_eff=bf16)

        mm = min(np.arange(0.25, 0.801, 0.0025), key=lambda x: np.abs(err(x)).mean())
        e = err(mm)
        out[key] = float(mm)
        print(f"{key[0]:<7} matmul_{key[1]} {mm:.4f}  errors % {np.round(e * 100, 1)}  mean {np.abs(e).mean() * 100:.1f}")
    return out


def is_moe(r: dict[str, str]) -> bool:
    """Whether a calibration run trains a mixture-of-experts model (it fits ``expert_host_us``)."""
    return amdcal.val.model_spec(Catalog.default([]), r["model"], int(r["seq"])).moe is not None


def fit_expert_host() -> float:
    """Host microseconds per local-expert GEMM (``expert_host_us``) on AMD's measured MoE runs, by grid
    search on their mean absolute error; the GEMM ceilings stay as fitted on the dense runs."""
    group = [r for r in amdcal.measured() if is_moe(r)]

    def err(us: float) -> np.ndarray:
        return amd_errors(group, expert_host_s=us * 1e-6)

    us = min(np.arange(0.0, 600.1, 1.0), key=lambda x: np.abs(err(x)).mean())
    e0, e = err(0.0), err(us)
    print(f"expert_host_us {us:.0f}  on {[r['id'] for r in group]}: errors % {np.round(e * 100, 1)}"
          f"  (without the host term {np.round(e0 * 100, 1)})")
    return float(us)


def nvidia_ceilings() -> dict[tuple[str, str], float]:
    """Hopper FP8 and Blackwell ceilings from the published GEMM figures (module docstring)."""
    cat = Catalog.default([])
    for r in vendor.rows():
        c = vendor.implied_ceiling(vendor.gemm_sku(cat, r), r)
        err = vendor.predicted_tflops(cat, r) / float(r["tflops"]) - 1.0
        m, n, k = vendor.shape(r)
        print(f"{r['role']:<5} {r['sku']:<5} {r['precision']:<4} M={m:<6} N={n:<6} K={k:<6} {float(r['tflops']):>8.1f} TFLOP/s"
              f"  implied ceiling {c:.4f}  profile error {err * 100:+5.1f}%  ({r['id']})")
    fit = vendor.fitted_ceilings(cat)
    factor = vendor.at_scale_factor(cat)
    for (sku, prec), c in fit.items():
        print(f"{sku:<7} matmul_{prec} {c * factor:.3f}  (kernel ceiling {c:.3f}, the mean of the fit figures,"
              f" x the H100 at-scale factor {factor:.3f})")
    h100 = cat.get("accelerators", "h100").spec.efficiency.matmul("bf16").nominal
    fb = {r["precision"]: float(r["tflops"]) for r in vendor.rows() if r["id"].startswith("fbgemm-h100-500w")}
    ratio = (fb["fp8"] / 1978.9) / (fb["bf16"] / 989.4)
    print(f"h100    matmul_fp8 {h100 * ratio:.3f}  (rule: BF16 ceiling {h100} x FBGEMM's FP8/BF16 ratio {ratio:.4f};"
          f" range top = the 'high' figure's implied ceiling); h200 the same")
    for sku in vendor.RULE_FROM_B200:
        print(f"{sku:<7} matmul_bf16 {fit[('b200', 'bf16')] * factor:.3f}  matmul_fp8 {fit[('b200', 'fp8')] * factor:.3f}"
              "  (rule: B200 fractions)")
    return fit


# AMD's FP8/BF16 ratio of max-achievable fractions (MI325X: (1,519 / 2,614.9) / (843 / 1,307.4) = 0.90).
AMD_FP8_OVER_BF16 = 0.90


def cdna3_rules(fit: dict[tuple[str, str], float]) -> None:
    """CDNA 3 ceilings without a training run of their own, from MI325X's fitted FP8 ceiling: MI325X BF16 =
    that / 0.90; MI300X FP8 = that x MI300X / MI325X max-achievable FP8 (1,273 / 1,519, the same die at
    750 W against 1,000 W), MI300X BF16 = that / 0.90."""
    f8 = fit[("mi325x", "fp8")]
    x = AMD_MAF[("mi300x", "fp8")] / AMD_MAF[("mi325x", "fp8")]
    print(f"mi325x  matmul_bf16 {f8 / AMD_FP8_OVER_BF16:.3f}  (rule: fitted FP8 {f8:.3f} / {AMD_FP8_OVER_BF16})")
    print(f"mi300x  matmul_fp8 {f8 * x:.3f}  matmul_bf16 {f8 * x / AMD_FP8_OVER_BF16:.3f}  (rule: MI325X fitted FP8 x "
          f"MAF ratio {x:.4f}; BF16 / {AMD_FP8_OVER_BF16})")


if __name__ == "__main__":
    nvidia_ceilings()
    amd_ceilings()
    cdna3_rules(fit_amd_training())
    fit_expert_host()
    fit_a100()  # sets gemm.TILES to the fitted small-tile efficiency, used by the H100 fit
    fit_h100()
