"""Errors of the per-stack serving calibration against the family-only one (not a test).

Calibration (in sample): each ``family/class/stack`` group's fitted InferenceX points, predicted with the
family fit over every stack and with the stack's own fit (``STACK_CALIBRATION``). Validation (never
fitted): ``tests/data/serve_validation.csv`` by (source, family), with the family fit and with the fit of
the stack each source measured (``VALIDATION_STACKS``). Signed errors: + = optimistic (throughput too
high, latencies too low); mean, mean |error| and max |error|.

Run: ``python benchmarks/serve_stack_errors.py``.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from mi400plan.hardware import serve_hardware
from mi400plan.profiles import Catalog
from mi400plan.serve_calibration import (VALIDATION_STACKS, Measured, calibration_groups, errors, family_of, model_class,
                                         predict_measured)

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"


def rows(name: str) -> list[dict[str, str]]:
    text = (DATA / name).read_text(encoding="utf-8").splitlines()
    return list(csv.DictReader(line for line in text if not line.startswith("#")))


def measured(r: dict[str, str]) -> Measured:
    from mi400plan.serve_validate import measured_from_row

    return measured_from_row(r)


def _stats(e: list[float] | np.ndarray) -> str:
    a = np.asarray(e, dtype=float)
    if not len(a):
        return "        -         "
    return f"{a.mean():+6.1%} {np.abs(a).mean():5.1%} {np.abs(a).max():6.1%}"


def calibration_table(cat: Catalog) -> None:
    print("in sample: signed mean, mean |err|, max |err|   family fit -> stack fit")
    for key, g in calibration_groups(cat, rows("serve_inferencex.csv"), by_stack=True).items():
        stack = key.split("/")[2]
        out = {}
        for which, st in (("family", None), ("stack", stack)):
            hw = {(p.sku, p.precision): serve_hardware(cat, p.sku, p.precision, "nominal", matmul=None, hbm=None,
                                                       model_class=g.model_class, stack=st)[0] for p in g.fitted}
            out[which] = errors(cat, g.fitted, hw, signed=True)
        print(f"{key:32s} n={len(g.fitted):3d}")
        for m in ("tput", "ttft", "tpot"):
            print(f"    {m:5s} {_stats(out['family'][m])}  ->  {_stats(out['stack'][m])}")


def validation_table(cat: Catalog) -> None:
    print("validation (serve_validation.csv, never fitted): signed mean, mean |err|, max |err|   family -> stack")
    groups: dict[tuple[str, str], list[Measured]] = {}
    for r in rows("serve_validation.csv"):
        m = measured(r)
        acc = cat.get("accelerators", m.sku).spec
        groups.setdefault((m.source, family_of(acc.architecture) or "?", acc.vendor), []).append(m)
    for (src, fam, vendor), ms in sorted(groups.items()):
        stack = VALIDATION_STACKS.get((src, vendor))
        res = {}
        for which, st in (("family", None), ("stack", stack)):
            e: dict[str, list[float]] = {"output_tps": [], "ttft": [], "tpot": []}
            for m in ms:
                cls = model_class(cat.get("models", m.model).spec)
                hw, _ = serve_hardware(cat, m.sku, m.precision, "nominal", matmul=None, hbm=None, model_class=cls,
                                       stack=st)
                pr = predict_measured(cat, m, hw)
                e["output_tps"].append(pr["output_tps"] / m.output_tps - 1.0)
                for k, meas in (("tpot", m.tpot_s), ("ttft", m.ttft_s)):
                    if meas is not None:
                        e[k].append(1.0 - pr[k] / meas)
            res[which] = e
        print(f"{src} {fam:17s} {stack or '-':10s} n={len(ms)}")
        for k in ("output_tps", "ttft", "tpot"):
            if res["family"][k]:
                print(f"    {k:10s} {_stats(res['family'][k])}  ->  {_stats(res['stack'][k])}")


def main() -> None:
    cat = Catalog.default([])
    calibration_table(cat)
    validation_table(cat)


if __name__ == "__main__":
    main()
