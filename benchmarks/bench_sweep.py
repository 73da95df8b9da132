"""Benchmark of the sweep search (prints figures; not a test).

Run: ``python benchmarks/bench_sweep.py``. Prints, for each case, candidate layouts evaluated,
wall time of the whole search, and the evaluation-kernel rate (candidates per second through
``search.step_time``, the step-time model alone, on arrays of 1,000,000 layouts).
"""

from __future__ import annotations

import time

import numpy as np

from mi400plan.api.sweep import build_sku
from mi400plan.params import count_params
from mi400plan.profiles import Catalog
from mi400plan.search import SearchOptions, Workload, expand, inner_size, make_coll, model_terms, search, structural_grid, step_time
from mi400plan.specs.layout import train_recipe

CASES = [
    ("llama3.1-405b", "mi355x", 16384, 8192, 2048, "bf16"),
    ("moe-2t", "mi300x", 65536, 4096, 32768, "fp8"),
    ("deepseek-v3", "mi455x", 131072, 4096, 65536, "fp8"),
    ("llama3.1-70b", "mi455x", 131072, 8192, 16384, "fp8"),
]


def main() -> None:
    cat = Catalog.default([])
    for model, sku, gpus, seq, batch, prec in CASES:
        spec = cat.get("models", model).spec
        wl = Workload(spec, count_params(spec), train_recipe("megatron", precision=prec), seq, batch)
        hw = build_sku(cat, sku, prec).hw
        t0 = time.perf_counter()
        res = search(wl, hw, gpus, top_k=10)
        wall = time.perf_counter() - t0
        print(f"{model:>14} on {gpus:>7,} x {sku:<7}: {res.evaluated:>11,} candidates, {res.valid:>9,} valid, "
              f"search {wall:6.2f} s wall ({res.evaluated / wall / 1e6:6.2f} M candidates/s overall)")
    # kernel rate: the step-time model on 1,000,000 valid layouts
    spec = cat.get("models", "llama3.1-405b").spec
    wl = Workload(spec, count_params(spec), train_recipe("megatron"), 8192, 2048)
    hw = build_sku(cat, "mi355x", "bf16").hw
    opts = SearchOptions()
    st = structural_grid(spec, 8192, 16384, opts, inner_size(opts))
    c, _ = expand(st, opts)
    n = c["tp"].size
    reps = int(np.ceil(1_000_000 / n))
    c = {k: np.tile(v, reps)[:1_000_000] for k, v in c.items()}
    terms = model_terms(spec, wl.counts, 8192, wl.recipe)
    coll = make_coll(hw)
    t0 = time.perf_counter()
    step_time(c, wl, hw, terms, opts, coll)
    dt = time.perf_counter() - t0
    print(f"evaluation kernel (step_time): {1_000_000 / dt / 1e6:.2f} M candidates/s ({dt:.2f} s for 1,000,000)")


if __name__ == "__main__":
    main()
