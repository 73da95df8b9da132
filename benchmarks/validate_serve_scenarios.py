"""Signed errors of ``serve --scenario`` (the request-level simulation) on the published MLPerf Inference
v5.1 results in ``tests/data/serve_validation.csv`` (sources M1, M2), beside the steady-state model's.

+ = optimistic: predicted throughput above the measured, predicted latency below it. Never fitted: the
simulation has no constants of its own; the hardware is the planner's calibrated reading (InferenceX).

    python benchmarks/validate_serve_scenarios.py
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def rows() -> list[dict[str, str]]:
    text = (ROOT / "tests" / "data" / "serve_validation.csv").read_text(encoding="utf-8").splitlines()
    return [r for r in csv.DictReader(x for x in text if not x.startswith("#"))
            if r["kind"] in ("max_throughput", "slo_throughput") and r["source"].startswith("M")]


def main() -> int:
    from mi400plan.hardware import serve_hardware as _hardware
    from mi400plan.profiles import Catalog
    from mi400plan.serve_calibration import VALIDATION_STACKS, model_class, predict_measured
    from mi400plan.serve_validate import measured_from_row
    from mi400plan.serve_sim import predict_mlperf

    cat = Catalog.default([])
    print("| source | SKU | scenario | measured tok/s | simulated | error | steady state | error | TTFT error | TPOT error |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows():
        m = measured_from_row(r)
        cls = model_class(cat.get("models", m.model).spec)
        hw, _ = _hardware(cat, m.sku, m.precision, "nominal", matmul=None, hbm=None, model_class=cls)
        stack = VALIDATION_STACKS.get((m.source, cat.get("accelerators", m.sku).spec.vendor))
        sim = predict_mlperf(cat, m, hw, stack)
        ss = predict_measured(cat, m, hw, stack)
        lat = ["", ""]
        if m.ttft_s:
            lat = [f"{m.ttft_s / sim['ttft'] - 1:+.0%}", f"{m.tpot_s / sim['tpot'] - 1:+.0%}"]
        scen = "Offline" if m.kind == "max_throughput" else "Server"
        print(f"| {m.source} | {m.sku} | {scen} | {m.output_tps:,.0f} | {sim['output_tps']:,.0f} | "
              f"{sim['output_tps'] / m.output_tps - 1:+.0%} | {ss['output_tps']:,.0f} | "
              f"{ss['output_tps'] / m.output_tps - 1:+.0%} | {lat[0]} | {lat[1]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
