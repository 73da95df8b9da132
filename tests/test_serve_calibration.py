"""The serving model's calibration (InferenceX points, per SKU family) and its validation points.

Calibration: re-running the fit on ``tests/data/serve_inferencex.csv`` gives exactly the constants in
``mi400plan/serve_calibration.py`` (so they are derived, not typed in), and their stated errors.
Validation: published measurements that are NOT InferenceX (``tests/data/serve_validation.csv``) are
run and their errors checked against the figures the README reports; they never feed the fit.
"""

from __future__ import annotations

import csv
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import pytest

from mi400plan import serve as core
from mi400plan.serve_calibration import CALIBRATION, RECENT_DAYS, Point, apply, errors, family_of, fit_family

DATA = Path(__file__).resolve().parent / "data"


def _rows(name: str) -> list[dict[str, str]]:
    text = (DATA / name).read_text(encoding="utf-8").splitlines()
    return list(csv.DictReader(line for line in text if not line.startswith("#")))


def _points(family: str) -> tuple[list[Point], list[Point]]:
    rows = [r for r in _rows("serve_inferencex.csv") if r["family"] == family]
    newest = max(date.fromisoformat(r["date"]) for r in rows)
    recent, old = [], []
    for r in rows:
        p = Point(r["sku"], r["model"], r["precision"], int(r["tp"]), int(r["ep"]), bool(int(r["dpa"])), int(r["isl"]),
                  int(r["osl"]), int(r["conc"]), float(r["tput_per_gpu"]), float(r["median_tpot_s"]),
                  float(r["median_ttft_s"]))
        (recent if date.fromisoformat(r["date"]) >= newest - timedelta(days=RECENT_DAYS) else old).append(p)
    return recent, old


def _base(catalog, points: list[Point]) -> dict:
    from mi400plan.api.serve import _hardware

    return {(p.sku, p.precision): _hardware(catalog, p.sku, p.precision, "nominal", matmul=None, hbm=None,
                                            calibrated=False)[0] for p in points}


def test_family_of_architecture() -> None:
    assert family_of("CDNA 4 (gfx950)") == "amd-cdna4"
    assert family_of("CDNA 3 (gfx942)") == "amd-cdna3"
    assert family_of("Blackwell Ultra") == "nvidia-blackwell"
    assert family_of("Hopper (GH100)") == "nvidia-hopper"
    assert family_of("CDNA next (press: CDNA 5)") is None  # MI400 family: no InferenceX points, uncalibrated
    assert family_of("Rubin") is None


@pytest.mark.parametrize("family", sorted(CALIBRATION))
def test_fit_reproduces_the_stored_constants(catalog, family: str) -> None:
    points, _ = _points(family)
    assert len(points) == CALIBRATION[family].points
    cal = fit_family(catalog, family, points, _base(catalog, points))
    stored = CALIBRATION[family]
    for f in ("hbm_efficiency", "kernel_overhead_us", "matmul_efficiency", "request_overhead_ms", "tput_mean_err",
              "tput_max_err", "tpot_mean_err", "tpot_max_err", "ttft_mean_err"):
        assert getattr(cal, f) == pytest.approx(getattr(stored, f), abs=1e-4), f


@pytest.mark.parametrize("family", sorted(CALIBRATION))
def test_calibration_errors(catalog, family: str) -> None:
    """The stored errors are the model's errors on the points with the stored constants (the serve
    command applies them through ``_hardware``)."""
    from mi400plan.api.serve import _hardware

    points, _ = _points(family)
    hw = {(p.sku, p.precision): _hardware(catalog, p.sku, p.precision, "nominal", matmul=None, hbm=None)[0]
          for p in points}
    e = errors(catalog, points, hw)
    c = CALIBRATION[family]
    assert e["tput"].mean() == pytest.approx(c.tput_mean_err, abs=1e-3)
    assert e["tpot"].max() == pytest.approx(c.tpot_max_err, abs=1e-3)


def test_corners_bracket_the_calibration(catalog) -> None:
    from mi400plan.api.serve import _hardware

    lo, _ = _hardware(catalog, "b200", "fp8", "pessimistic", matmul=None, hbm=None)
    nom, _ = _hardware(catalog, "b200", "fp8", "nominal", matmul=None, hbm=None)
    hi, _ = _hardware(catalog, "b200", "fp8", "optimistic", matmul=None, hbm=None)
    assert lo.hbm_eff < nom.hbm_eff < hi.hbm_eff
    assert lo.kernel_overhead_s > nom.kernel_overhead_s > hi.kernel_overhead_s
    assert nom.hbm_eff == CALIBRATION["nvidia-blackwell"].hbm_efficiency


# --- validation (not fitted) ----------------------------------------------------------------------------

# The README's validation table: (source, SKU) -> (mean, max |relative error| of output tokens/s, mean
# |relative error| of median TPOT or None).
VALIDATION_REPORTED = {
    ("O1", "mi300x"): (0.29, 0.47, None),
    ("D1", "mi300x"): (0.56, 0.93, 0.25),
    ("D1", "h200"): (1.77, 2.67, 0.58),
}


def _workload(catalog, r: dict[str, str]):
    from mi400plan.api.serve import _hardware
    from mi400plan.params import count_params
    from mi400plan.specs.layout import infer_recipe

    m = catalog.get("models", r["model"]).spec
    wl = core.Workload(m, count_params(m), infer_recipe(r["precision"], kv_dtype=r["kv"]), int(r["isl"]), int(r["osl"]))
    hw, _ = _hardware(catalog, r["sku"], r["precision"], "nominal", matmul=None, hbm=None)
    return wl, hw


def _predict(catalog, r: dict[str, str]) -> tuple[float, float | None]:
    """(output tokens/s of the server, TPOT or None). A static batch (vLLM benchmark_latency) is the
    batch's prefill, then ``osl`` decode steps at the mean context ``isl + osl / 2``; a serving point is
    the continuous-batching steady state at ``conc`` requests in flight."""
    wl, hw = _workload(catalog, r)
    b, i, o, tp = float(r["conc"]), int(r["isl"]), int(r["osl"]), int(r["tp"])
    if r["kind"] == "serving":
        ev = core.evaluate(wl, hw, tp=tp, pp=1, ep=1, dpa=False, batch=b)
        return float(ev["out_tps_gpu"]) * tp, float(ev["tpot"])
    T = core.terms(wl.model, wl.counts, wl.recipe)
    pf = core.forward_stage(T, wl, hw, tp=tp, pp=1, ep=1, dpa=False, tokens=i * b, seqs=b, context=0.0, causal=True)
    st = core.forward_stage(T, wl, hw, tp=tp, pp=1, ep=1, dpa=False, tokens=b, seqs=b, context=i + o / 2, causal=False)
    return b * o / float(pf.total + o * st.total), None


@pytest.mark.parametrize("key", sorted(VALIDATION_REPORTED))
def test_validation_errors_are_the_reported_ones(catalog, key: tuple[str, str]) -> None:
    rows = [r for r in _rows("serve_validation.csv") if (r["source"], r["sku"]) == key]
    pred = [_predict(catalog, r) for r in rows]
    err = np.array([abs(p[0] / float(r["output_tps"]) - 1.0) for p, r in zip(pred, rows)])
    mean, mx, tpot_mean = VALIDATION_REPORTED[key]
    assert err.mean() == pytest.approx(mean, abs=0.01)
    assert err.max() == pytest.approx(mx, abs=0.01)
    if tpot_mean is not None:
        e = np.array([abs(p[1] / float(r["tpot_s"]) - 1.0) for p, r in zip(pred, rows)])
        assert e.mean() == pytest.approx(tpot_mean, abs=0.01)
