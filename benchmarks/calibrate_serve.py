"""Fit the serving model per SKU family and model class on the InferenceX points in
tests/data/serve_inferencex.csv and print the constants for ``mi400plan/serve_calibration.py`` and the
calibration errors (not a test).

Run: ``python benchmarks/calibrate_serve.py``.
"""

from __future__ import annotations

import csv
import time
from datetime import date, timedelta
from pathlib import Path

from mi400plan.api.serve import _hardware
from mi400plan.profiles import Catalog
from mi400plan.serve_calibration import RECENT_DAYS, Point, apply, errors, fit_family, model_class, queued

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "serve_inferencex.csv"


def load(cat: Catalog, path: Path = DATA) -> dict[str, list[tuple[Point, str]]]:
    """``family/class`` -> [(point, run date)]."""
    rows = csv.DictReader(line for line in path.read_text().splitlines() if not line.startswith("#"))
    groups: dict[str, list[tuple[Point, str]]] = {}
    for r in rows:
        p = Point(r["sku"], r["model"], r["precision"], int(r["tp"]), int(r["ep"]), bool(int(r["dpa"])),
                  int(r["isl"]), int(r["osl"]), int(r["conc"]), float(r["tput_per_gpu"]),
                  float(r["median_tpot_s"]), float(r["median_ttft_s"]))
        key = f"{r['family']}/{model_class(cat.get('models', r['model']).spec)}"
        groups.setdefault(key, []).append((p, r["date"]))
    return groups


def main() -> None:
    cat = Catalog.default([])
    for key, items in load(cat).items():
        family, cls = key.split("/")
        t0 = time.perf_counter()
        newest = max(date.fromisoformat(d) for _, d in items)
        cut = newest - timedelta(days=RECENT_DAYS)
        points = [p for p, d in items if date.fromisoformat(d) >= cut and not queued(p)]
        old = [p for p, d in items if date.fromisoformat(d) < cut]
        waiting = [p for p, d in items if date.fromisoformat(d) >= cut and queued(p)]
        dates = sorted(d for _, d in items if date.fromisoformat(d) >= cut)
        base = {(p.sku, p.precision): _hardware(cat, p.sku, p.precision, "nominal", matmul=None, hbm=None,
                                                model_class=cls, calibrated=False)[0] for p, _ in items}
        cal = fit_family(cat, family, cls, points, base)
        for what, left in ((f"older runs (before {cut})", old), ("queueing points", waiting)):
            if left:
                e = errors(cat, left, {k: apply(v, cal) for k, v in base.items()})
                print(f"    # {key}: {len(left)} {what} not fitted: tok/s/GPU error {e['tput'].mean():.0%} mean, "
                      f"{e['tput'].max():.0%} max; TPOT {e['tpot'].mean():.0%} mean; TTFT {e['ttft'].mean():.0%} mean")
        print(f"    {key!r}: FamilyCalibration({family!r}, {cls!r}, {cal.hbm_efficiency}, {cal.kernel_overhead_us}, "
              f"{cal.matmul_scale}, {cal.request_overhead_ms}, {cal.points}, {cal.tput_mean_err}, "
              f"{cal.tput_max_err}, {cal.tpot_mean_err}, {cal.tpot_max_err}, {cal.ttft_mean_err}, "
              f"{dates[0] + '..' + dates[-1]!r}, {cal.matmul_precisions!r}),  # {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
