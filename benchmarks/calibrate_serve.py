"""Fit the serving model per SKU family on the InferenceX points in tests/data/serve_inferencex.csv and
print the constants for ``mi400plan/serve_calibration.py`` and the calibration errors (not a test).

Run: ``python benchmarks/calibrate_serve.py``.
"""

from __future__ import annotations

import csv
import time
from pathlib import Path

from mi400plan.api.serve import _hardware
from mi400plan.profiles import Catalog
from datetime import date, timedelta

from mi400plan.serve_calibration import RECENT_DAYS, Point, errors, fit_family

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "serve_inferencex.csv"


def load(path: Path = DATA) -> dict[str, list[tuple[Point, str]]]:
    rows = csv.DictReader(line for line in path.read_text().splitlines() if not line.startswith("#"))
    fam: dict[str, list[tuple[Point, str]]] = {}
    for r in rows:
        p = Point(r["sku"], r["model"], r["precision"], int(r["tp"]), int(r["ep"]), bool(int(r["dpa"])),
                  int(r["isl"]), int(r["osl"]), int(r["conc"]), float(r["tput_per_gpu"]),
                  float(r["median_tpot_s"]), float(r["median_ttft_s"]))
        fam.setdefault(r["family"], []).append((p, r["date"]))
    return fam


def main() -> None:
    cat = Catalog.default([])
    for family, items in load().items():
        t0 = time.perf_counter()
        newest = max(date.fromisoformat(d) for _, d in items)
        cut = newest - timedelta(days=RECENT_DAYS)
        points = [p for p, d in items if date.fromisoformat(d) >= cut]
        old = [p for p, d in items if date.fromisoformat(d) < cut]
        dates = sorted(d for _, d in items if date.fromisoformat(d) >= cut)
        base = {(p.sku, p.precision): _hardware(cat, p.sku, p.precision, "nominal", matmul=None, hbm=None,
                                                calibrated=False)[0] for p, _ in items}
        cal = fit_family(cat, family, points, base)
        if old:
            from mi400plan.serve_calibration import apply

            e = errors(cat, old, {k: apply(v, cal) for k, v in base.items()})
            print(f"    # {family}: {len(old)} older runs (before {cut}) not fitted: tok/s/GPU error "
                  f"{e['tput'].mean():.0%} mean, {e['tput'].max():.0%} max; TPOT {e['tpot'].mean():.0%} mean")
        print(f"    {family!r}: FamilyCalibration({family!r}, {cal.hbm_efficiency}, {cal.kernel_overhead_us}, "
              f"{cal.matmul_scale}, {cal.request_overhead_ms}, {cal.points}, {cal.tput_mean_err}, "
              f"{cal.tput_max_err}, {cal.tpot_mean_err}, {cal.tpot_max_err}, {cal.ttft_mean_err}, "
              f"{dates[0] + '..' + dates[-1]!r}, {cal.matmul_precisions!r}),  # {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
