"""Benchmark of the serve search (prints figures; not a test).

Run: ``python benchmarks/bench_serve.py``. For Llama-3.1-70B (dense) and DeepSeek-V3 (MoE, with EP and
DP-attention variants) on one 8-GPU node of 4 SKUs (MI300X, MI355X, H200, B200), every layout x
concurrency 1..1024: points evaluated and wall time (best of 3) of

* the search alone (``serve.memory`` + ``serve.evaluate`` over every point, nominal values), and
* the whole ``api.serve`` call (search, corners for the listed points and the SKU comparison).

Target on a 2-core machine: the full search of 4 SKUs under 1 s.
"""

from __future__ import annotations

import time

import numpy as np

from mi400plan import serve as core
from mi400plan.api.serve import serve
from mi400plan.hardware import serve_hardware as _hardware
from mi400plan.params import count_params
from mi400plan.profiles import Catalog
from mi400plan.specs.layout import infer_recipe

SKUS = ("mi300x", "mi355x", "h200", "b200")


def search_only(cat: Catalog, model: str) -> tuple[int, float]:
    spec = cat.get("models", model).spec
    wl = core.Workload(spec, count_params(spec), infer_recipe("fp8", kv_dtype="fp8"), 1024, 1024)
    conc = np.arange(1, 1025, dtype=np.float64)
    lay = core.layout_grid(spec, 8, len(conc))
    hws = [_hardware(cat, s, "fp8", "nominal", matmul=None, hbm=None, model_class="dense")[0] for s in SKUS]
    best = np.inf
    n = 0
    for _ in range(3):
        t0 = time.perf_counter()
        n = 0
        for hw in hws:
            tp, pp, ep, dpa = (np.repeat(x, len(conc)) for x in (lay.tp, lay.pp, lay.ep, lay.dpa))
            b = np.tile(conc, len(lay.tp))
            core.memory(wl, hw, tp=tp, pp=pp, dpa=dpa, batch=b)
            core.evaluate(wl, hw, tp=tp, pp=pp, ep=ep, dpa=dpa, batch=b)
            n += len(b)
        best = min(best, time.perf_counter() - t0)
    return n, best


def whole(cat: Catalog, model: str) -> tuple[int, float]:
    best = np.inf
    res = None
    for _ in range(3):
        t0 = time.perf_counter()
        res = serve(cat, model, list(SKUS))
        best = min(best, time.perf_counter() - t0)
    assert res is not None
    return res.evaluated, best


def main() -> None:
    cat = Catalog.default([])
    print(f"serve search, one 8-GPU node of {', '.join(SKUS)}, concurrency 1..1024, fp8 weights and KV, 1k/1k")
    for model in ("llama3.1-70b", "deepseek-v3"):
        n, t = search_only(cat, model)
        print(f"  {model:14s} search only : {n:>8,} layout x concurrency points in {t * 1e3:7.1f} ms "
              f"({n / t / 1e6:.2f} M points/s)")
        n, t = whole(cat, model)
        print(f"  {model:14s} api.serve   : {n:>8,} points (incl. rejected) in {t * 1e3:7.1f} ms, with corners "
              "and the SKU comparison")


if __name__ == "__main__":
    main()
