"""``calibrate --explain``: a measured step split into MFU and the losses, against hand arithmetic."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mi400plan.explain import LOSS_TERMS, explain_step

RUNS = Path(__file__).resolve().parent / "data" / "calibrate" / "runs.toml"

# Llama 3.1 8B, hand count (config: hidden 4096, 32 layers, 32 heads of 128, 8 KV heads, FFN 14336,
# vocabulary 128256): weights in matmuls per token = 32 x (q 4096^2 + k, v 2 x 4096 x 1024 + o 4096^2
# + 3 x 4096 x 14336) + LM head 128256 x 4096.
LLAMA31_8B_MATMUL = 32 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336) + 128256 * 4096
MI355X_BF16_DENSE = 2516.6e12  # AMD: 256 CU x 2.4 GHz x 4,096 FLOP/clk


def _terms(**over: float) -> dict[str, float]:
    t = {"t_compute": 6.0, "t_attention": 1.0, **{k: 0.0 for k, _ in LOSS_TERMS}}
    t.update(over)
    t["step"] = sum(v for k, v in t.items() if k != "step")
    return t


def test_waterfall_by_hand() -> None:
    # 1e9 model FLOP/token x 1,000 tokens / 1e12 FLOP/s = 1 s ideal; recompute 0.5e9 -> 0.5 s;
    # kernels below peak = 6 + 1 - 1 - 0.5 = 5.5 s; model 6 + 1 + 2 (TP) + 0.5 (bubble) = 9.5 s; measured 10 s.
    ex = explain_step(_terms(t_tp=2.0, t_bubble=0.5), 10.0, model_flops_per_token=1e9, recompute_flops_per_token=5e8,
                      tokens_per_gpu=1000.0, peak_flops=1e12)
    by = {t.key: t for t in ex.terms}
    assert ex.mfu == pytest.approx(0.10) and ex.hfu == pytest.approx(0.15)
    assert by["ideal"].seconds == pytest.approx(1.0) and by["recompute"].seconds == pytest.approx(0.5)
    assert by["below_peak"].seconds == pytest.approx(5.5)
    assert by["t_tp"].share == pytest.approx(0.2) and by["t_bubble"].share == pytest.approx(0.05)
    assert by["not_modelled"].seconds == pytest.approx(0.5)
    assert sum(t.share for t in ex.terms) == pytest.approx(1.0, abs=1e-12)
    assert ex.tokens_per_s_per_gpu == pytest.approx(100.0)


def test_model_slower_than_measured_gives_a_negative_remainder() -> None:
    ex = explain_step(_terms(), 5.0, model_flops_per_token=1e9, recompute_flops_per_token=0.0, tokens_per_gpu=1000.0,
                      peak_flops=1e12)
    assert {t.key: t.seconds for t in ex.terms}["not_modelled"] == pytest.approx(-2.0)


def test_terms_that_do_not_add_up_to_the_step_are_refused() -> None:
    t = _terms()
    t["step"] += 1.0
    with pytest.raises(ValueError, match="add up"):
        explain_step(t, 10.0, model_flops_per_token=1e9, recompute_flops_per_token=0.0, tokens_per_gpu=1.0,
                     peak_flops=1e12)


def test_cli_json_explains_every_run(cli, monkeypatch) -> None:
    monkeypatch.chdir(RUNS.parent)
    r = cli(["calibrate", RUNS.name, "--json"])
    assert r.exit_code == 0, r.output
    ex = json.loads(r.stdout)["data"]["explain"]
    assert [e["label"] for e in ex] == ["8b-tp1", "8b-tp2-mb1", "70b-tp8-pp4", "70b-tp4-pp8-vpp5", "405b-tp8-pp9-cp2"]
    for e in ex:
        assert sum(t["share"] for t in e["terms"]) == pytest.approx(1.0, abs=1e-9)
        assert sum(t["seconds"] for t in e["terms"]) == pytest.approx(e["measured_s"], rel=1e-9)
    first = ex[0]  # 8b-tp1: 8 GPUs, global batch 128 x 8192 tokens, 6.88 s
    tokens_per_s = 128 * 8192 / (8 * 6.88)
    flops = 6 * LLAMA31_8B_MATMUL + 12 * 32 * 4096 * 8192  # PaLM appendix B: 6N + 12 L H Q T
    assert first["tokens_per_s_per_gpu"] == pytest.approx(tokens_per_s, rel=1e-12)
    assert first["mfu"] == pytest.approx(tokens_per_s * flops / MI355X_BF16_DENSE, rel=1e-9)
    assert first["terms"][0]["share"] == pytest.approx(first["mfu"], rel=1e-12)
    assert first["totals"]["flops_per_token"]["model"] == pytest.approx(flops, rel=1e-12)


def test_cli_table_only_with_explain(cli, monkeypatch) -> None:
    monkeypatch.chdir(RUNS.parent)
    monkeypatch.setenv("COLUMNS", "80")
    plain = cli(["calibrate", RUNS.name])
    r = cli(["calibrate", RUNS.name, "--explain"])
    assert plain.exit_code == 0 and r.exit_code == 0, r.output
    assert "MFU" not in plain.stdout and "model FLOPs at peak (MFU)" in r.stdout
    assert "70b-tp8-pp4 (mi355x, 256 GPUs, bf16)" in r.stdout and "Training FLOPs of each run" in r.stdout
    assert max(len(line.rstrip()) for line in r.stdout.splitlines()) <= 80
