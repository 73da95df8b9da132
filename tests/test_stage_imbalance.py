"""The slowest pipeline stage (``memory.stage_imbalance``): the LM head on the last stage and uneven
layer counts, checked against hand arithmetic."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mi400plan.memory import stage_imbalance
from mi400plan.params import count_params

# GPT-3 175B at 2,048 tokens, FLOP per token (forward + backward): a layer's 6 x 12 h^2 matmuls plus
# 3 x its forward attention 4 s h; the LM head's 6 V h (h = 12,288, V = 50,257, s = 2,048).
LAYER = 6 * 12 * 12288**2 + 3 * 4 * 2048 * 12288
HEAD = 6 * 50257 * 12288


def _counts(catalog, name: str):
    model = catalog.get("models", name).spec
    return model, count_params(model)


def test_gpt3_head_on_the_last_stage(catalog) -> None:
    """96 layers on PP 8: 12 a stage, the last one also runs the head: (12 L + H) / ((96 L + H) / 8).
    With the embedding and loss counted as layers (Megatron-LM's account-for-* flags; 96 + 2 = 98 on
    PP 7: 13, 14 x 5, 13) the last stage holds 13 layers and the head, below the 14-layer stages:
    those set the pace, 14 L / ((96 L + H) / 7)."""
    model, counts = _counts(catalog, "gpt3-175b")
    assert (LAYER, HEAD) == (11_173_625_856, 3_705_348_096)
    mean = (96 * LAYER + HEAD) / 8
    imb = stage_imbalance(counts, 8, 1, 0, dense=LAYER, moe=0.0, head=HEAD)
    assert float(imb.work) == pytest.approx((12 * LAYER + HEAD) / mean)
    assert float(imb.work) == pytest.approx(1.024097, abs=1e-6)
    assert float(imb.layers) == 1.0 and float(imb.moe) == 1.0  # even layers, no MoE layer
    # PP 16 halves the layers a stage and doubles the head's weight in it.
    imb16 = stage_imbalance(counts, 16, 1, 0, dense=LAYER, moe=0.0, head=HEAD)
    assert float(imb16.work) == pytest.approx((6 * LAYER + HEAD) / ((96 * LAYER + HEAD) / 16))
    # Interleaving (VPP 4) keeps each stage's layer count, and so the ratio.
    assert float(stage_imbalance(counts, 8, 4, 0, dense=LAYER, moe=0.0, head=HEAD).work) == pytest.approx(
        float(imb.work))
    split = stage_imbalance(counts, 7, 1, 1, dense=LAYER, moe=0.0, head=HEAD)
    assert float(split.work) == pytest.approx(14 * LAYER / ((96 * LAYER + HEAD) / 7))
    assert float(split.layers) == pytest.approx(14 * 7 / 96)


def test_deepseek_v3_layers_and_moe_layers_on_pp16(catalog) -> None:
    """61 layers (3 dense, then 58 MoE) on PP 16 with the even split: 13 stages of 4 and 3 of 3. The
    busiest stage holds 4 layers against a mean of 61/16; the first stage's 4 hold the 3 dense ones,
    so the busiest in MoE layers holds 4 against 58/16."""
    model, counts = _counts(catalog, "deepseek-v3")
    assert (model.num_layers, counts.num_moe_layers) == (61, 58)
    imb = stage_imbalance(counts, 16, 1, 0, dense=1.0, moe=1.0, head=0.0)
    assert float(imb.layers) == pytest.approx(4 * 16 / 61)
    assert float(imb.moe) == pytest.approx(4 * 16 / 58)
    assert float(imb.work) == pytest.approx(4 * 16 / 61)


def test_one_stage_is_balanced(catalog) -> None:
    _, counts = _counts(catalog, "deepseek-v3")
    imb = stage_imbalance(counts, np.array([1, 1]), np.array([1, 1]), 0, dense=3.0, moe=5.0, head=7.0)
    for ratio in imb:
        assert ratio.tolist() == [1.0, 1.0]


@settings(max_examples=40, deadline=None)
@given(pp=st.sampled_from([2, 4, 8, 16]), dense=st.floats(0.1, 10.0), moe=st.floats(0.1, 10.0),
       head=st.floats(0.0, 10.0))
def test_ratios_are_at_least_one_and_at_most_the_whole_pipeline(catalog, pp, dense, moe, head) -> None:
    """The slowest stage is at least the mean stage and at most all the work (ratio <= pp)."""
    _, counts = _counts(catalog, "mixtral-8x7b")
    imb = stage_imbalance(counts, pp, 1, 0, dense=dense, moe=moe, head=head)
    for ratio in imb:
        assert 1.0 <= float(ratio) <= pp


def test_sweep_reports_the_slowest_stage(cli) -> None:
    """A row says how much longer its slowest stage takes than the mean one: GPT-3 175B in FP8 pinned at
    TP 8 x PP 8 on 64 Helios racks. The head's FLOPs (H / L = 0.33 of a layer's) run in BF16, a quarter
    of MI455X's FP8 peak, so the head takes x layers of time with 0.33 < x < 0.33 x (20,132.7 x 0.468)
    / (5,033.2 x 0.519) = 1.20 (the layers also cast their FP8 inputs), and the last stage
    (12 + x) / ((96 + x) / 8) of the mean; PP 1: 1."""
    import json

    base = ["sweep", "gpt3-175b", "--sku", "mi455x", "--racks", "64", "--precision", "fp8", "--tp", "8",
            "--global-batch", "4608", "--top", "1", "--no-ranges"]
    row = json.loads(cli([*base, "--pp", "8", "--vpp", "1", "--json"]).stdout)["data"]["rows"][0]
    assert row["pipeline_split"].startswith("even")
    hi = HEAD / LAYER * (20132.7 * 0.468) / (5033.2 * 0.519)
    assert hi == pytest.approx(1.196, abs=1e-3)
    ratio = row["stage_imbalance"]
    x = 12 * (ratio - 1) / (1 - ratio / 8)  # solves ratio = (12 + x) / ((96 + x) / 8)
    assert HEAD / LAYER < x < hi
    assert "Slowest pipeline stage" in cli([*base, "--pp", "8", "--vpp", "1"]).stdout
    flat = json.loads(cli([*base, "--pp", "1", "--json"]).stdout)["data"]["rows"]
    assert flat and all(r["stage_imbalance"] == 1.0 for r in flat)


def test_the_lm_head_runs_in_bf16_in_fp8_training(catalog) -> None:
    """Megatron-Core's output layer is not a Transformer Engine module, so FP8 training runs it as a
    BF16 GEMM: MI455X at the BF16 peak (5,033.2 TFLOP/s, a quarter of the 20,132.7 FP8 one) and the
    BF16 ceiling (0.519), 2-byte operands. In BF16 training it is the layers' own GEMM."""
    from mi400plan.hardware import build_sku

    fp8 = build_sku(catalog, "mi455x", "fp8").hw
    head, layers = fp8.head_gemm_sku(), fp8.gemm_sku()
    assert (layers.peak_flops, layers.ceiling, layers.operand_bytes) == (20132.7e12, 0.468, 1.0)
    assert (head.peak_flops, head.ceiling, head.operand_bytes) == (5033.2e12, 0.519, 2.0)
    bf16 = build_sku(catalog, "mi455x", "bf16").hw
    assert bf16.head_gemm_sku() == bf16.gemm_sku()
