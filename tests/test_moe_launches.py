"""GEMM kernel launches of an MoE layer (``search.moe_gemms_fwd_per_layer``): Transformer Engine's
grouped linear launches one cuBLAS GEMM per local expert, so the per-kernel overhead of an MoE layer
grows with E / EP. Checked against hand counts and against the step's ``t_gemm_overhead``. The host
time to issue those expert GEMMs (``search.expert_host_seconds``) holds a micro-batch when it is longer
than the GPU's time for it: checked by hand on AMD's DeepSeek-V2 run and shown to leave GPU-bound and
dense layouts alone."""

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
    from mi400plan.hardware import build_sku

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


def _dsv2_row(catalog, host_us: float | None = None, micro_batch: int = 1):
    """AMD's DeepSeek-V2 run on 32 MI355X (tests/data/train_calibration_amd.csv), its layout pinned, at
    the profile's host time or ``host_us``."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    import test_calibration_amd as amdcal
    import test_validation_train as val

    row = next(r for r in amdcal.rows() if r["id"] == "amd2512-mi355x-dsv2")
    row = {**row, "mbs": str(micro_batch)}
    if host_us is None:
        return val.run_row(catalog, row, lift=True)  # only the time is checked here
    with val.hardware_replaced(expert_host_s=host_us * 1e-6):
        return val.run_row(catalog, row, lift=True)


def test_host_bound_micro_batch_by_hand(catalog) -> None:
    """DeepSeek-V2 (60 layers, the first dense; 160 experts) on PP 4 x VP 5 = 20 chunks of 3 layers: the
    busiest stage holds 15 MoE layers (the one with the dense layer 14). At EP 8 each GPU runs 20 experts, so a
    micro-batch issues 15 x 2 x 20 x 3 = 1,800 expert GEMMs: at the profile's 219 us, 0.3942 s, longer than the
    GPU's time for it. The micro-batch then takes the host's 0.3942 s, and the interleaved bubble is (PP - 1) / VP =
    0.6 of it. Without a host term the row is the GPU's alone."""
    eff = catalog.get("accelerators", "mi355x").spec.efficiency.expert_host_us
    assert (eff.nominal, eff.status) == (219.0, "measured")
    row = _dsv2_row(catalog)
    issue = 15 * 2 * 20 * 3 * 219e-6
    assert issue == pytest.approx(0.3942, rel=1e-12)
    assert row["t_bubble"] == pytest.approx(0.6 * issue, rel=1e-9)
    gpu = _dsv2_row(catalog, host_us=0.0)
    assert gpu["t_host"] == 0.0 and gpu["t_bubble"] / 0.6 < 0.6 * issue
    assert row["t_host"] == pytest.approx(row["m"] * (issue - gpu["t_bubble"] / 0.6), rel=1e-9)
    assert row["step"] == pytest.approx(gpu["step"] + row["t_host"] * (1 + 0.6 / row["m"]), rel=1e-9)


def test_host_time_moves_only_host_bound_layouts(catalog) -> None:
    """At micro-batch 8 the same run's GPU time per micro-batch is longer than the 1,800 x 219 us the host
    takes (the host's issue time does not grow with the tokens), so the host term is zero and the step is
    the GPU's; a host 5x as slow makes it host-bound again. A dense model's step is the same at any host
    time (no experts to issue)."""
    from mi400plan.hardware import build_sku

    row, gpu = _dsv2_row(catalog, micro_batch=8), _dsv2_row(catalog, host_us=0.0, micro_batch=8)
    assert gpu["t_bubble"] / 0.6 > 1800 * 219e-6
    assert row["t_host"] == 0.0 and row["step"] == gpu["step"]
    slow = _dsv2_row(catalog, host_us=1000.0, micro_batch=8)
    assert slow["t_host"] > 0 and slow["step"] > row["step"]
    spec = catalog.get("models", "llama3.1-8b").spec
    wl = Workload(spec, count_params(spec), train_recipe("megatron", precision="bf16"), 4096, 64)
    hw = build_sku(catalog, "mi355x", "bf16").hw
    opts = SearchOptions(tp=(1,), pp=(1,), micro_batch=(1,), recompute=(0,), zero=(1,))
    steps = [next(iter_rows(search(wl, dataclasses.replace(hw, expert_host_s=h), 8, opts, top_k=1).top))
             for h in (0.0, 219e-6, 1e-2)]
    assert steps[0]["step"] == steps[1]["step"] == steps[2]["step"] and steps[2]["t_host"] == 0.0
