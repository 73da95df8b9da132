"""Fit the MXFP8 GEMM ceiling over the per-tensor FP8 one (``lowp.MXFP8_OVER_FP8``) and print it (not a test).

Run from the repository root with the package installed: ``python benchmarks/fit_mxfp8.py``.

Calibration data, and only these: the rows of NVIDIA's NeMo Megatron-Bridge performance summary, releases
25.09 (2025-09) and 25.11 (2025-11), that ran one model on one system and layout both with per-tensor FP8
current scaling (FP8-CS) and with MXFP8 (FP8-MX, the figure in parentheses):
``tests/data/train_calibration_mxfp8.csv`` (7 pairs on B200, GB200 and GB300). Later releases (26.02's MXFP8
and NVFP4 rows) are validation only (``mi400plan/data/train_validation.csv``).

What is fitted: one number, the factor ``k`` on the SKU's per-tensor FP8 ceiling that the MXFP8 block
GEMMs run at. The model prices both runs of a pair (the MXFP8 casts as their own HBM traffic,
``lowp.RECIPES``), so the absolute FP8 error cancels: ``k`` is chosen so the predicted throughput
ratio MXFP8 / FP8-CS matches the measured one, by grid search on the mean absolute ratio error of the
7 pairs; each pair's own ``k`` (bisection) gives the low/high range.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np

from mi400plan import lowp
from mi400plan.hardware import build_sku
from mi400plan.api import open_catalog
from mi400plan.search import iter_rows, search
from mi400plan.specs.common import Estimate
from mi400plan.validate import row_options, row_workload

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "train_calibration_mxfp8.csv"


def step_s(cat: object, r: dict[str, str], k: float | None = None) -> float:
    """Predicted step of row ``r`` (its layout pinned), with the MXFP8 factor set to ``k``."""
    if k is not None:
        lowp.MXFP8_OVER_FP8 = Estimate(nominal=k, status="measured", source=["fit"])
    wl = row_workload(cat, r)
    hw = build_sku(cat, r["sku"], r["precision"]).hw
    for split in (False, True):
        res = search(wl, hw, int(r["gpus"]), row_options(r, split), top_k=1)
        if res.top["tp"].size:
            return float(next(iter_rows(res.top))["step"])
    raise SystemExit(f"{r['id']}: no valid layout")


def main() -> int:
    cat = open_catalog()
    with DATA.open() as f:
        rows = list(csv.DictReader(f))
    pairs = [(a, b) for a, b in zip(rows[::2], rows[1::2])]
    grid = np.round(np.arange(0.80, 1.0501, 0.005), 3)
    base = [step_s(cat, a) for a, _ in pairs]
    measured = [float(b["tokens_per_s_per_gpu"]) / float(a["tokens_per_s_per_gpu"]) for a, b in pairs]
    pred = np.array([[s0 / step_s(cat, b, k) for k in grid] for (a, b), s0 in zip(pairs, base)])
    err = np.abs(pred / np.array(measured)[:, None] - 1.0)
    best = int(np.argmin(err.mean(axis=0)))
    own = [float(grid[int(np.argmin(e))]) for e in err]
    for (a, _), m, p, k in zip(pairs, measured, pred[:, best], own):
        print(f"{a['id'][:-6]:32s} measured MXFP8/FP8-CS {m:.4f}  predicted {p:.4f}  own k {k:.3f}")
    print(f"MXFP8_OVER_FP8 = {grid[best]:.3f} (mean |ratio error| {err[:, best].mean():.2%}, max {err[:, best].max():.2%}; "
          f"per-pair k {min(own):.3f}..{max(own):.3f}; {len(pairs)} pairs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
