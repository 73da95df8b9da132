"""Benchmark of the sweep search (prints figures; not a test).

Run: ``python benchmarks/bench_sweep.py``. Prints:

* for Llama-3.1-405B on 16,384 GPUs, the 2T MoE on 65,536 GPUs and every bundled model on
  131,072 GPUs: candidate layouts evaluated and wall time of the whole search (best of 3 runs);
  the slowest bundled model at 131,072 GPUs is named;
* the evaluation-kernel rate on 1,000,000 candidate layouts of Llama-3.1-405B on 16,384 GPUs:
  the step-time model alone (``search.step_time`` over the structure x (ZeRO, micro-batch,
  recompute, SP) grid, as the search runs it), and the full per-candidate evaluation
  (``search.evaluate_structures``: inner rules, step time, memory fit, top-K ranking).

Targets on a 2-core machine: >= 1,000,000 candidates/s for the kernel; every search < 5 s wall.
"""

from __future__ import annotations

import time

import numpy as np

from mi400plan.hardware import build_sku
from mi400plan.params import count_params
from mi400plan.profiles import Catalog
from mi400plan.search import (
    SearchOptions,
    Workload,
    evaluate_structures,
    grid_layouts,
    inner_size,
    make_coll,
    model_terms,
    search,
    step_time,
    structural_grid,
)
from mi400plan.specs.layout import train_recipe

SEQ_CAP = 8192
BIG_BATCH_TOKENS = 2**27  # 128Mi tokens per step: the most layouts pass the batch rule


def workload(cat: Catalog, model: str, seq: int, batch: int, prec: str) -> Workload:
    spec = cat.get("models", model).spec
    return Workload(spec, count_params(spec), train_recipe("megatron", precision=prec), seq, batch)


def timed_search(wl: Workload, hw, gpus: int, repeats: int = 3):
    best = np.inf
    res = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        res = search(wl, hw, gpus, top_k=10)
        best = min(best, time.perf_counter() - t0)
    return res, best


def line(model: str, sku: str, gpus: int, res, wall: float) -> str:
    return (f"{model:>16} on {gpus:>7,} x {sku:<7}: {res.evaluated:>11,} candidates, {res.valid:>8,} valid, "
            f"search {wall:5.2f} s wall ({res.evaluated / wall / 1e6:6.1f} M candidates/s overall)")


def kernel(cat: Catalog, n_target: int = 1_000_000) -> None:
    wl = workload(cat, "llama3.1-405b", 8192, 2048, "bf16")
    hw = build_sku(cat, "mi355x", "bf16").hw
    opts = SearchOptions()
    st = structural_grid(wl.model, wl.seq_len, 16384, opts, inner_size(opts))
    n_in = inner_size(opts)
    n_st = int(np.ceil(n_target / n_in))
    reps = int(np.ceil(n_st / st.cols["tp"].size))
    cols = {k: np.tile(v, reps)[:n_st] for k, v in st.cols.items()}
    n = n_st * n_in
    terms = model_terms(wl.model, wl.counts, wl.seq_len, wl.recipe)
    coll = make_coll(hw)
    g = grid_layouts(cols, opts)
    dt_step = dt_full = np.inf
    for _ in range(3):
        t0 = time.perf_counter()
        with np.errstate(all="ignore"):
            step_time(g, wl, hw, terms, opts, coll)
        dt_step = min(dt_step, time.perf_counter() - t0)
        t0 = time.perf_counter()
        evaluate_structures(cols, wl, hw, terms, opts, coll, 10)
        dt_full = min(dt_full, time.perf_counter() - t0)
    print(f"evaluation kernel, llama3.1-405b on 16,384 x mi355x, {n:,} candidates:")
    print(f"  step-time model (step_time):                  {n / dt_step / 1e6:6.2f} M candidates/s ({dt_step:.3f} s)")
    print(f"  full evaluation (rules, step, memory, top-K): {n / dt_full / 1e6:6.2f} M candidates/s ({dt_full:.3f} s)")


def main() -> None:
    cat = Catalog.default([])
    for model, sku, gpus, seq, batch, prec in (
        ("llama3.1-405b", "mi355x", 16384, 8192, 2048, "bf16"),
        ("moe-2t", "mi300x", 65536, 4096, 32768, "fp8"),
    ):
        res, wall = timed_search(workload(cat, model, seq, batch, prec), build_sku(cat, sku, prec).hw, gpus)
        print(line(model, sku, gpus, res, wall))
    print("every bundled model on 131,072 x mi455x, fp8, 128Mi tokens per step:")
    hw = build_sku(cat, "mi455x", "fp8").hw
    worst = ("", 0.0)
    for model in cat.names("models"):
        spec = cat.get("models", model).spec
        seq = min(spec.max_seq_len, SEQ_CAP)
        res, wall = timed_search(workload(cat, model, seq, BIG_BATCH_TOKENS // seq, "fp8"), hw, 131072)
        print(line(model, "mi455x", 131072, res, wall))
        if wall > worst[1]:
            worst = (model, wall)
    print(f"slowest bundled model at 131,072 GPUs: {worst[0]} ({worst[1]:.2f} s wall)")
    kernel(cat)


if __name__ == "__main__":
    main()
