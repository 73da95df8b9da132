"""GEMM kernel launches of an MoE layer (``search.moe_gemms_fwd_per_layer``): Transformer Engine's
grouped linear launches one cuBLAS GEMM per local expert, so the per-kernel overhead of an MoE layer
grows with E / EP. Checked against hand counts and against the step's ``t_gemm_overhead``."""

from __future__ import annotations

import dataclasses

import pytest

from mi400plan.params import count_params
from mi400plan.search import SearchOptions, Workload, iter_rows, model_terms, moe_gemms_fwd_per_layer, search
from mi400plan.specs.layout import train_recipe


def _terms(catalog, name: str):
    spec = catalog.get("models", name).spec
    return model_terms(spec, count_params(spec), 4096)


def test_kernels_per_moe_layer_by_hand(catalog) -> None:
    """Forward kernels: QKV, attention core, output projection, router (4), shared experts' in and out
    (2 if any), each local expert's in and out (2 E / EP).
    Qwen3-235B-A22B (128 experts, none shared): EP 8 -> 4 + 2 x 16 = 36; EP 32 -> 4 + 2 x 4 = 12.
    DeepSeek-V3 (256 experts, 1 shared): EP 32 -> 4 + 2 + 2 x 8 = 22; EP 64 -> 4 + 2 + 8 = 14.
    Mixtral 8x7B (8 experts, none shared): EP 8 -> 4 + 2 = 6, EP 1 -> 4 + 16 = 20."""
    qwen, dsv3, mixtral = (_terms(catalog, n) for n in ("qwen3-235b-a22b", "deepseek-v3", "mixtral-8x7b"))
    assert float(moe_gemms_fwd_per_layer(qwen, 8)) == 36 and float(moe_gemms_fwd_per_layer(qwen, 32)) == 12
    assert float(moe_gemms_fwd_per_layer(dsv3, 32)) == 22 and float(moe_gemms_fwd_per_layer(dsv3, 64)) == 14
    assert float(moe_gemms_fwd_per_layer(mixtral, 8)) == 6 and float(moe_gemms_fwd_per_layer(mixtral, 1)) == 20


def test_step_overhead_counts_every_expert_gemm(catalog) -> None:
    """Mixtral 8x7B (32 layers, all MoE) on 8 MI300X at TP 1, PP 1, EP 8, micro-batch 1, no
    recomputation, 4,096 tokens, global batch 64: DP 8, so 64 / 8 = 8 micro-batches. Each runs
    32 layers x 6 forward kernels x 3 (forward, data and weight gradients) = 576 kernels at the
    profile's 5 us: 2.88 ms, 23.04 ms a step. At EP 1 each GPU holds all 8 experts: 20 kernels a layer,
    1,920 a micro-batch, 9.6 ms and 76.8 ms a step."""
    from mi400plan.api.sweep import build_sku

    spec = catalog.get("models", "mixtral-8x7b").spec
    assert spec.num_layers == 32 and count_params(spec).num_moe_layers == 32
    wl = Workload(spec, count_params(spec), train_recipe("megatron", precision="bf16"), 4096, 64)
    hw = build_sku(catalog, "mi300x", "bf16").hw
    hw = dataclasses.replace(hw, hbm_bytes=8 * hw.hbm_bytes)  # only the time is checked here
    assert hw.gemm_overhead_s == pytest.approx(5e-6)
    for ep, per_step in ((8, 23.04e-3), (1, 76.8e-3)):
        opts = SearchOptions(tp=(1,), pp=(1,), vpp=(1,), cp=(1,), ep=(ep,), etp=(1,), zero=(1,), micro_batch=(1,),
                             recompute=(0,))
        row = next(iter_rows(search(wl, hw, 8, opts, top_k=1).top))
        assert row["m"] == 8
        assert row["t_gemm_overhead"] == pytest.approx(per_step, rel=1e-9)
