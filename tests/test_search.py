"""The layout search: brute-force agreement, invariants, rejection reasons, placement across racks."""

from __future__ import annotations

import itertools

import numpy as np
import pytest


def _wl(catalog, model: str, seq: int, batch: int, precision: str = "bf16"):
    from mi400plan.params import count_params
    from mi400plan.search import Workload
    from mi400plan.specs.layout import train_recipe

    spec = catalog.get("models", model).spec
    return Workload(spec, count_params(spec), train_recipe("megatron", precision=precision), seq, batch)


def _hw(catalog, sku: str, precision: str = "bf16"):
    from mi400plan.api.sweep import build_sku

    return build_sku(catalog, sku, precision).hw


def test_best_equals_brute_force_minimum(catalog) -> None:
    """Explicit Python loop over every layout, calling the same scalar functions, finds the same best."""
    from mi400plan.search import SearchOptions, evaluate_one, iter_rows, layout_violations, search

    wl = _wl(catalog, "llama3.1-8b", 4096, 64)
    hw = _hw(catalog, "mi300x")
    world = 16
    dims = dict(tp=(1, 2, 4, 8), pp=(1, 2, 4), vpp=(1, 2), cp=(1, 2), ep=(1,), etp=(1,))
    inner = dict(zero=(0, 1, 3), micro_batch=(1, 2), recompute=(0, 2), sequence_parallel=(0, 1))
    opts = SearchOptions(**dims, **inner)
    res = search(wl, hw, world, opts, top_k=1)
    best = next(iter_rows(res.top))

    brute_min, n_valid, n_all = np.inf, 0, 0
    for tp, pp, vpp, cp, zero, mb, rc, sp in itertools.product(
        dims["tp"], dims["pp"], dims["vpp"], dims["cp"], *inner.values()
    ):
        n_all += 1
        lay = dict(tp=tp, pp=pp, vpp=vpp, cp=cp, ep=1, etp=1, zero=zero, micro_batch=mb, recompute=rc, sp=sp)
        if layout_violations(lay, wl, world):
            continue
        r = evaluate_one(lay, wl, hw, world, opts)
        if not r["fits"]:
            continue
        n_valid += 1
        brute_min = min(brute_min, r["step"])
    assert n_all == res.evaluated
    assert n_valid == res.valid
    assert best["step"] == pytest.approx(brute_min, rel=1e-12)


@pytest.mark.parametrize(
    "model,sku,gpus,seq,batch,precision",
    [
        ("llama3.1-70b", "mi355x", 1024, 8192, 512, "bf16"),
        ("mixtral-8x7b", "h100", 256, 4096, 1024, "bf16"),
        ("llama3.1-8b", "mi300x", 64, 8192, 256, "fp8"),
    ],
)
def test_mfu_at_most_one_and_step_at_least_compute(catalog, model, sku, gpus, seq, batch, precision) -> None:
    from mi400plan.search import iter_rows, metrics, model_terms, search

    wl = _wl(catalog, model, seq, batch, precision)
    hw = _hw(catalog, sku, precision)
    res = search(wl, hw, gpus, top_k=50)
    assert res.valid > 0
    terms = model_terms(wl.model, wl.counts, seq, wl.recipe)
    breakdown = ("t_compute", "t_gemm_overhead", "t_memory_bound", "t_tp", "t_cp", "t_ep", "t_pp", "t_bubble", "t_dp", "t_optimizer")
    for r in iter_rows(res.top):
        assert r["step"] >= r["compute_only"] > 0
        assert sum(r[k] for k in breakdown) == pytest.approx(r["step"], rel=1e-9)
        met = metrics(r["step"], wl, hw, gpus, terms, r["flops_hw_per_token"])
        assert 0 < met["mfu"] <= met["hfu"] <= 1.0
        # MFU can never beat the calibrated matmul efficiency (compute alone runs at that rate)
        assert met["mfu"] <= hw.matmul_eff + 1e-12


def test_counts_add_up(catalog) -> None:
    from mi400plan.search import search

    res = search(_wl(catalog, "llama3.1-70b", 8192, 512), _hw(catalog, "mi355x"), 1024, top_k=3)
    assert res.evaluated == res.valid + sum(res.rejected.values())


def test_world_not_multiple_of_replica_is_rejected(catalog) -> None:
    """Seed 004: a 384-GPU replica does not tile 65,536 GPUs (65,536 / 384 = 170.67)."""
    from mi400plan.search import SearchOptions, layout_violations, search

    assert 65536 % 384 == 256  # 170 x 384 = 65,280; 65,536 - 65,280 = 256 GPUs left over
    wl = _wl(catalog, "moe-2t", 4096, 32768)
    # TP 1 x CP 8 x PP 48 = 384 GPUs per replica
    lay = dict(tp=1, pp=48, vpp=1, cp=8, ep=8, etp=1, zero=1, micro_batch=1, recompute=0, sp=0)
    assert layout_violations(lay, wl, 65536)[0] == "world-replica"
    res = search(wl, _hw(catalog, "mi300x"), 65536, SearchOptions(tp=(1,), pp=(48,), cp=(8,), ep=(8,), etp=(1,)))
    assert res.valid == 0
    assert res.rejected["world-replica"] == res.evaluated


def test_helios_keeps_tp_and_pp_in_the_rack(catalog) -> None:
    """GPT-3 175B on Helios (72-GPU UALink domain) with TP 8 or 16 and PP 8 or 16: the best layouts
    keep TP x PP (64 GPUs) inside one rack; the best layout whose replica spans two racks
    (TP 8 x PP 16 = 128 > 72) is slower, and its pipeline traffic is what got slower."""
    from mi400plan.search import SearchOptions, iter_rows, search, tier_of

    wl = _wl(catalog, "gpt3-175b", 2048, 4608, "fp8")
    hw = _hw(catalog, "mi455x", "fp8")
    assert hw.domain == 72
    res = search(wl, hw, 4608, SearchOptions(tp=(8, 16), pp=(8, 16), cp=(1,)), top_k=5)
    rows = list(iter_rows(res.top))
    assert rows
    for r in rows:
        assert r["tp"] * r["pp"] * r["cp"] * r["fold"] <= 72
        assert str(tier_of(r["pp"], r["tp"], 72)) == "scale_up"
    assert res.best_crossing is not None
    cross = next(iter_rows(res.best_crossing))
    assert cross["tp"] * cross["pp"] > 72
    assert str(tier_of(cross["pp"], cross["tp"], 72)) == "hierarchical"
    assert cross["step"] > rows[0]["step"]
    # per pipeline transfer, the rack-crossing pipeline pays scale-out prices
    per_xfer_best = rows[0]["t_pp"] / (rows[0]["m"] * 2 * rows[0]["vpp"])
    per_xfer_cross = cross["t_pp"] / (cross["m"] * 2 * cross["vpp"])
    assert per_xfer_cross > per_xfer_best


def test_tp_wider_than_domain_pays_scale_out(catalog) -> None:
    """On MI300X (8-GPU xGMI domain) TP 16 spans two nodes: its collectives cost more than TP 8's."""
    from mi400plan.search import evaluate_one

    wl = _wl(catalog, "llama3.1-70b", 4096, 256)
    hw = _hw(catalog, "mi300x")
    base = dict(pp=1, vpp=1, cp=1, ep=1, etp=1, zero=1, micro_batch=1, recompute=2, sp=1)
    t8 = evaluate_one(dict(base, tp=8), wl, hw, 256)
    t16 = evaluate_one(dict(base, tp=16), wl, hw, 256)
    # same bytes per collective at TP 8 and 16 (full activation), but TP 16 leaves the xGMI domain
    assert t16["t_tp"] > 2 * t8["t_tp"]


def test_whitepaper_setting_scales_then_drops(catalog) -> None:
    """moe-2t, 128Mi tokens per step, MI300X nodes of 8 with 400 Gb/s: per-GPU throughput stays
    within 10% from 1,024 to 4,096 GPUs and falls below 90% once the per-replica batch shrinks."""
    from mi400plan.search import iter_rows, search

    wl = _wl(catalog, "moe-2t", 4096, 32768, "fp8")
    hw = _hw(catalog, "mi300x", "fp8")
    per_gpu = {}
    for g in (1024, 4096, 65536):
        best = next(iter_rows(search(wl, hw, g, top_k=1).top))
        per_gpu[g] = 32768 * 4096 / best["step"] / g
    assert per_gpu[4096] / per_gpu[1024] >= 0.9
    assert per_gpu[65536] / per_gpu[1024] < 0.9


@pytest.mark.parametrize(
    "model,sku,gpus,seq,batch,kw",
    [
        ("llama3.1-70b", "mi355x", 512, 8192, 256, {}),
        ("mixtral-8x7b", "mi300x", 128, 4096, 512, {"overlap_ep": True}),
    ],
)
def test_factored_evaluation_equals_flat_layouts(catalog, model, sku, gpus, seq, batch, kw) -> None:
    """The search evaluates collectives once per structure and broadcasts them over the (ZeRO,
    micro-batch, recompute, SP) grid. Evaluating every candidate as its own flat layout (one array
    element each, no sharing) must give bit-identical step times, counts and ranked rows."""
    from mi400plan.search import (
        SearchOptions, expand, inner_masks, inner_size, make_coll, memory_total, model_terms, rank_order, search,
        step_time, structural_grid, usable_hbm,
    )

    wl = _wl(catalog, model, seq, batch)
    hw = _hw(catalog, sku)
    opts = SearchOptions(**kw)
    res = search(wl, hw, gpus, opts, top_k=15)

    st = structural_grid(wl.model, seq, gpus, opts, inner_size(opts))
    flat, _ = expand(st, opts)
    alive = np.ones(flat["tp"].size, dtype=bool)
    for bad in inner_masks(flat, wl).values():
        alive &= ~bad
    c = {k: v[alive] for k, v in flat.items()}
    t = step_time(c, wl, hw, model_terms(wl.model, wl.counts, seq, wl.recipe), opts, make_coll(hw))
    mem = np.asarray(memory_total(c, wl).total, dtype=np.float64)
    fits = mem <= usable_hbm(wl, hw)
    assert int(fits.sum()) == res.valid
    step = np.asarray(t["step"], dtype=np.float64)[fits]
    order = rank_order(step, mem[fits], {k: v[fits] for k, v in c.items()})[:15]
    assert np.array_equal(res.top["step"], step[order])
    assert np.array_equal(res.top["mem_total"], mem[fits][order])
    for k in ("tp", "pp", "vpp", "cp", "ep", "etp", "zero", "micro_batch", "recompute", "sp"):
        assert np.array_equal(res.top[k], c[k][fits][order]), k
    for k in ("t_tp", "t_ep", "t_dp", "t_pp", "t_bubble"):
        assert np.array_equal(res.top[k], np.asarray(t[k], dtype=np.float64)[fits][order]), k
