"""Totals behind a plan: FLOPs per token split and total, collective bytes per GPU per step (hand arithmetic)."""

from __future__ import annotations

import json

import pytest

from mi400plan.api import open_catalog
from mi400plan.params import count_params
from mi400plan.search import Workload, model_terms
from mi400plan.specs.layout import train_recipe
from mi400plan.totals import all_reduce_bytes, collective_bytes_per_step, flops_per_token, gather_bytes


@pytest.fixture(scope="module")
def llama8b():  # noqa: ANN201
    return open_catalog().get("models", "llama3.1-8b").spec


def test_volume_factors_by_hand() -> None:
    # nccl-tests: all-reduce 2(n-1)/n, all-gather / reduce-scatter / all-to-all (n-1)/n; 1 GB over 8 ranks
    assert all_reduce_bytes(1e9, 8) == pytest.approx(1.75e9)
    assert gather_bytes(1e9, 8) == pytest.approx(0.875e9)
    assert all_reduce_bytes(1e9, 1) == 0 and gather_bytes(1e9, 1) == 0


def test_flops_per_token_llama8b_by_hand(llama8b) -> None:  # noqa: ANN001
    # Llama 3.1 8B: d 4096, 32 layers, 32 heads, 8 KV heads of 128, FFN 14,336, vocab 128,256.
    attn = 4096 * 4096 * 2 + 4096 * 1024 * 2  # Q, O + K, V = 41,943,040
    ffn = 3 * 4096 * 14336  # 176,160,768
    matmul = 32 * (attn + ffn) + 128256 * 4096  # 6,979,321,856 + 525,336,576 = 7,504,658,432
    assert matmul == 7_504_658_432
    attn_fwd = 4 * 8192 * 32 * 128 * 32  # QK^T and AV at s = 8192: 4,294,967,296
    f = flops_per_token(llama8b, 8192, "none")
    assert f.dense_gemm == pytest.approx(6 * matmul) and f.attention == pytest.approx(3 * attn_fwd)
    assert f.recompute == 0 and f.model == pytest.approx(6 * matmul + 3 * attn_fwd)
    # selective recompute re-runs the attention core forward; full re-runs the layers' forward (a third)
    assert flops_per_token(llama8b, 8192, "selective").recompute == pytest.approx(attn_fwd)
    layers = 6 * matmul + 3 * attn_fwd - 6 * 128256 * 4096
    assert flops_per_token(llama8b, 8192, "full").recompute == pytest.approx(layers / 3)


def test_collective_bytes_by_hand(llama8b) -> None:  # noqa: ANN001
    recipe = train_recipe("megatron", precision="bf16")
    assert (recipe.activation_bytes, recipe.param_bytes, recipe.grad_bytes) == (2, 2, 4)
    counts = count_params(llama8b)
    assert counts.total == 8_030_261_248  # Meta's 8.03B
    wl = Workload(llama8b, counts, recipe, 8192, 64)
    lay = dict(tp=4, pp=2, vpp=1, cp=2, ep=1, etp=1, dp=4, zero=1, micro_batch=1, recompute=0, sp=1)
    b = collective_bytes_per_step(lay, wl, model_terms(llama8b, counts, 8192, recipe))
    m = 64 // 4  # micro-batches per step: 16
    s_act = 4096 * 4096 * 2  # a micro-batch's tokens on one CP rank (8192 / 2) x d x 2 B = 33,554,432
    # TP: 4 collectives per layer (SP: reduce-scatter + all-gather pairs, 2 x 3/4 x S each), 16 layers per stage
    assert b["tp"] == pytest.approx(m * 16 * 4 * 2 * 3 / 4 * s_act)  # 51,539,607,552
    # CP: K and V of 2 x 8 x 128 per token over TP 4 -> 4,194,304 B per rank; all-gather twice and
    # reduce-scatter once per layer over 2 ranks: (2-1)/2 of the 8,388,608-byte buffer each
    assert b["cp"] == pytest.approx(m * 16 * 3 * 0.5 * 8_388_608)  # 3,221,225,472
    # PP: one activation send and one gradient send per micro-batch, 1/TP of S each
    assert b["pp"] == pytest.approx(m * 2 * s_act / 4)  # 268,435,456
    # DP (ZeRO-1): reduce-scatter fp32 grads + all-gather bf16 weights over DP x CP = 8 ranks, once per step.
    # Local params: 8,029,995,008 TP-split / (TP 4 x PP 2) + 266,240 norm weights / PP 2 = 1,003,882,496
    local = (8_030_261_248 - 266_240) / 8 + 266_240 / 2
    assert b["dp"] == pytest.approx(7 / 8 * local * 4 + 7 / 8 * local * 2)  # 5,270,383,104
    assert b["ep"] == 0
    # FP8 parameters (--fp8-param-gather): the block GEMM weights gather at 1 B. Llama 3.1 8B's are
    # 32 x (41,943,040 + 176,160,768) = 6,979,321,856 of 8,030,261,248, so a parameter averages
    # 2 - 6,979,321,856 / 8,030,261,248 = 1.130 87 B on the wire; the gradients stay fp32.
    fp8 = Workload(llama8b, counts, train_recipe("megatron", precision="fp8", fp8_params=True), 8192, 64)
    wire = 2 - 6_979_321_856 / 8_030_261_248
    assert fp8.param_wire_bytes == pytest.approx(wire, rel=1e-12) and wl.param_wire_bytes == 2.0
    b8 = collective_bytes_per_step(lay, fp8, model_terms(llama8b, counts, 8192, fp8.recipe))
    assert b8["dp"] == pytest.approx(7 / 8 * local * 4 + 7 / 8 * local * wire)


def test_sweep_json_total_is_tokens_times_flops_per_token(cli) -> None:
    r = cli(["sweep", "llama3.1-8b", "--sku", "mi355x", "--gpus", "64", "--tokens", "2T", "--no-ranges", "--json"])
    assert r.exit_code == 0, r.output
    t = json.loads(r.stdout)["data"]["totals"][0]
    f = t["flops_per_token"]
    assert t["total_model_flops"] == pytest.approx(2e12 * f["model"], rel=1e-12)
    assert t["total_hardware_flops"] == pytest.approx(2e12 * (f["model"] + f["recompute"]), rel=1e-12)
    assert f["model"] == pytest.approx(f["dense_gemm"] + f["attention"])
    assert set(t["collective_bytes_per_step"]) == {"tp", "cp", "ep", "pp", "dp"}


def test_sweep_table_shows_totals(cli) -> None:
    r = cli(["sweep", "llama3.1-8b", "--sku", "mi355x", "--gpus", "64", "--tokens", "2T", "--no-ranges"])
    assert "Training FLOPs of the best layout" in r.output and "Bytes each GPU sends" in r.output
