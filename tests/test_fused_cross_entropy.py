"""``--fused-cross-entropy``: the loss keeps its 16-bit logits instead of an fp32 copy (Transformer Engine's
fused cross entropy writes the gradient into the logits in the forward). One switch of the shared
training options, so ``fit``, ``sweep`` and a saved plan agree."""

from __future__ import annotations

import json
import tomllib

from mi400plan.api.fit import LayoutPins, fit
from mi400plan.specs.layout import TrainOptions, train_recipe


def test_recipe_keeps_16_bit_logits() -> None:
    assert train_recipe("megatron").logit_bytes == 4.0
    assert train_recipe("megatron", fused_cross_entropy=True).logit_bytes == 2.0
    assert train_recipe("megatron", precision="fp8", fused_cross_entropy=True).logit_bytes == 2.0
    assert TrainOptions(fused_cross_entropy=True).train_recipe().logit_bytes == 2.0
    assert TrainOptions(fused_cross_entropy=True).changed() == {"fused_cross_entropy": True}


def test_fit_saves_the_fp32_copy_by_hand(catalog) -> None:
    """Llama 3.1 8B on one MI355X, micro-batch 8 of 4,096 tokens, TP 1: the last stage's logits are
    32,768 tokens x 128,256 rows (already a multiple of 128). fp32: 4 B each, fused: 2 B; the difference
    is 32,768 x 128,256 x 2 = 8,405,385,216 B, and nothing else moves."""
    assert 128_256 % 128 == 0 and 8 * 4096 * 128_256 * 2 == 8_405_385_216
    base = fit(catalog, "llama3.1-8b", ["mi355x"], "train",
               layout=LayoutPins(micro_batch=8), seq=4096).rows[0].memory_bytes
    fused = fit(catalog, "llama3.1-8b", ["mi355x"], "train", layout=LayoutPins(micro_batch=8), seq=4096,
                options=TrainOptions(fused_cross_entropy=True)).rows[0].memory_bytes
    assert base.activations - fused.activations == 8_405_385_216
    assert (base.weights, base.gradients, base.optimizer) == (fused.weights, fused.gradients, fused.optimizer)


def test_cli_fit_sweep_and_plan_agree(cli, tmp_path) -> None:
    plan = tmp_path / "plan.toml"
    args = ["--sku", "mi355x", "--tp", "1", "--pp", "1", "--cp", "1", "--zero", "1", "--micro-batch", "4",
            "--recompute", "none", "--seq", "4096"]
    r = cli(["sweep", "llama3.1-8b", "--gpus", "8", *args, "--fused-cross-entropy", "--json", "--save", str(plan)])
    assert r.exit_code == 0, r.output
    swept = json.loads(r.stdout)["data"]["rows"][0]["memory_bytes"]
    assert tomllib.loads(plan.read_text())["recipe"] == {"fused_cross_entropy": True}
    fitted = json.loads(cli(["fit", "--plan", str(plan), "--json"]).stdout)["data"]["rows"][0]["memory_bytes"]
    assert fitted["activations"] == swept["activations"]
    plain = json.loads(cli(["sweep", "llama3.1-8b", "--gpus", "8", *args, "--json"]).stdout)["data"]["rows"][0]
    assert plain["memory_bytes"]["activations"] - swept["activations"] == 4 * 4096 * 128_256 * 2
    shown = cli(["fit", "--plan", str(plan)], env={"COLUMNS": "200"}).stdout
    assert "fused cross entropy (--fused-cross-entropy), logits kept at 2 B" in shown
    bad = cli(["fit", "llama3.1-8b", "--sku", "mi355x", "--mode", "infer", "--fused-cross-entropy"])
    assert bad.exit_code == 2 and "training only" in bad.output and "Traceback" not in bad.output
