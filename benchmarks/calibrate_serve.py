"""Fit the serving model per SKU family and model class on the InferenceX points in
tests/data/serve_inferencex.csv and print the constants for ``mi400plan/serve_calibration.py`` and the
calibration errors (not a test); then per family, class and serving stack (``STACK_CALIBRATION``),
for the stacks with enough points (``stack_fit_allowed``), naming the groups left to the family fit.

Run: ``python benchmarks/calibrate_serve.py``.
"""

from __future__ import annotations

import csv
import time
from pathlib import Path

from mi400plan.hardware import serve_hardware as _hardware
from mi400plan.profiles import Catalog
from mi400plan.serve_calibration import (PointGroup, calibrated_bases, calibration_groups, errors, fit_family,
                                         fitted_parameters, stack_fit_allowed)

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "serve_inferencex.csv"


def rows(path: Path = DATA) -> list[dict[str, str]]:
    return list(csv.DictReader(line for line in path.read_text().splitlines() if not line.startswith("#")))


def main() -> None:
    cat = Catalog.default([])
    print("CALIBRATION = {")
    for key, g in calibration_groups(cat, rows()).items():
        _fit(cat, key, g, "")
    print("}\nSTACK_CALIBRATION = {")
    for key, g in calibration_groups(cat, rows(), by_stack=True).items():
        if not stack_fit_allowed(g.fitted):
            print(f"    # {key}: {len(g.fitted)} points for {fitted_parameters(g.fitted)} fitted figures (fewer than "
                  f"3 per figure): served with the family fit, wider range")
            continue
        _fit(cat, key, g, key.split("/")[2])
    print("}")


def _fit(cat: Catalog, key: str, g: PointGroup, stack: str) -> None:
    t0 = time.perf_counter()
    base = {(p.sku, p.precision): _hardware(cat, p.sku, p.precision, "nominal", matmul=None, hbm=None,
                                            model_class=g.model_class, calibrated=False)[0]
            for p in g.fitted + g.older + g.waiting}
    cal = fit_family(cat, g.family, g.model_class, g.fitted, base, stack=stack)
    for what, left in ((f"older runs (before {g.cut})", g.older), ("queueing points", g.waiting)):
        if left:
            e = errors(cat, left, calibrated_bases(base, cal))
            print(f"    # {key}: {len(left)} {what} not fitted: tok/s/GPU error {e['tput'].mean():.0%} mean, "
                  f"{e['tput'].max():.0%} max; TPOT {e['tpot'].mean():.0%} mean; TTFT {e['ttft'].mean():.0%} mean")
    print(f"    {key!r}: FamilyCalibration({g.family!r}, {g.model_class!r}, {cal.hbm_efficiency}, "
          f"{cal.kernel_overhead_us}, {cal.matmul_scale}, {cal.request_overhead_ms}, {cal.points}, "
          f"{cal.tput_mean_err}, {cal.tput_max_err}, {cal.tpot_mean_err}, {cal.tpot_max_err}, "
          f"{cal.ttft_mean_err}, {g.dates[0] + '..' + g.dates[-1]!r}, {cal.matmul_precisions!r}"
          + (f", stack={stack!r}, status='stack fit'" if stack else "")
          + f", host_per_seq_us={cal.host_per_seq_us}"
          + (f", precision_fits={cal.precision_fits!r}" if cal.precision_fits else "") + "),"
          + f"  # {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
