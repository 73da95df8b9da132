"""LoRA fine-tuning (``mi400plan.finetune``, ``--finetune lora``): adapter parameters, FLOPs and memory against
hand arithmetic, the refusals, and the CLI's JSON.

Llama 2 70B (Touvron et al. 2023, Table 1; the bundled ``llama2-70b`` profile): hidden 8,192, 80 layers,
64 query heads of 128 and 8 KV heads, SwiGLU FFN 28,672, vocabulary 32,000. The MLPerf Training LoRA
reference (mlcommons/training ``llama2_70b_lora``, 2024-04-18) trains rank 16 on the fused QKV and the
output projection: its log reports 44,564,480 trainable parameters, which the first test derives by hand.
"""

from __future__ import annotations

import json

import pytest

from mi400plan.errors import UsageError

H, LAYERS, FFN, VOCAB = 8192, 80, 28672, 32000
QKV_OUT = 64 * 128 + 2 * 8 * 128  # fused Q, K, V: 10,240
RANK = 16


def _llama2():  # noqa: ANN202
    from mi400plan.params import count_params
    from mi400plan.profiles import Catalog

    spec = Catalog.default([]).get("models", "llama2-70b").spec
    return spec, count_params(spec)


def _spec(rank: int, targets: tuple[str, ...]):  # noqa: ANN202
    from mi400plan.finetune import LoraSpec

    return LoraSpec(rank, targets)


def test_adapter_parameters_of_the_mlperf_reference_by_hand() -> None:
    from mi400plan.finetune import adapter_params

    model, counts = _llama2()
    # A is d_in x r, B is r x d_out: r (d_in + d_out) per target per layer.
    qkv = RANK * (H + QKV_OUT)  # 294,912
    proj = RANK * (H + H)  # 262,144
    assert qkv == 294_912 and proj == 262_144
    assert LAYERS * (qkv + proj) == 44_564_480  # the MLPerf reference's trainable parameters
    assert adapter_params(model, counts, _spec(RANK, ("qkv", "proj"))) == (44_564_480.0, 0.0)
    fc1 = RANK * (H + 2 * FFN)  # SwiGLU: gate and up fused in linear_fc1
    fc2 = RANK * (FFN + H)
    every = LAYERS * (qkv + proj + fc1 + fc2)
    assert every == 175_636_480
    assert adapter_params(model, counts, _spec(RANK, ("qkv", "proj", "fc1", "fc2"))) == (float(every), 0.0)


def test_moe_adapters_one_per_expert_by_hand(catalog) -> None:
    """Mixtral 8x7B (hidden 4,096, 32 MoE layers of 8 experts, top 2, expert FFN 14,336, SwiGLU): rank 16 on
    fc1 and fc2 adapts each routed expert, so parameters count all 8 experts and FLOPs the 2 a token runs;
    qkv and proj (32 heads of 128, 8 KV heads) are TP-split like a dense model's."""
    from mi400plan.finetune import adapter_flop_params_per_token, adapter_params
    from mi400plan.params import count_params

    spec = catalog.get("models", "mixtral-8x7b").spec
    counts = count_params(spec)
    per_expert = 16 * ((4096 + 2 * 14336) + (14336 + 4096))  # 819,200
    attn = 16 * ((4096 + 32 * 128 + 2 * 8 * 128) + (32 * 128 + 4096))  # 16 x (10,240 + 8,192)
    spec_all = _spec(16, ("qkv", "proj", "fc1", "fc2"))
    assert adapter_params(spec, counts, spec_all) == (32.0 * attn, 32.0 * 8 * per_expert)
    assert adapter_flop_params_per_token(spec, counts, spec_all) == 32 * (attn + 2 * per_expert)


def test_model_flops_drop_the_base_weight_gradient() -> None:
    """4 N + 6 N_adapter + 3 x attention for LoRA against 6 N + 3 x attention, at seq 8,192."""
    from mi400plan.finetune import lora_model_flops_per_token
    from mi400plan.params import model_flops_per_token

    model, counts = _llama2()
    layer = H * QKV_OUT + H * H + 3 * H * FFN  # attention and SwiGLU weights of one layer
    n = LAYERS * layer + VOCAB * H  # + the LM head
    assert n == 68_713_185_280
    attn = 4 * 8192 * 64 * 128 * LAYERS  # QK^T and PV forward, 2 FLOP a multiply-add, over seq 8,192
    full = 6 * n + 3 * attn
    lora = 4 * n + 6 * 44_564_480 + 3 * attn
    assert model_flops_per_token(model, 8192) == pytest.approx(full, rel=1e-12)
    got = lora_model_flops_per_token(model, counts, 8192, _spec(RANK, ("qkv", "proj")))
    assert got == pytest.approx(lora, rel=1e-12)
    assert got / full == pytest.approx(339_544_637_440 / 476_703_621_120, rel=1e-12)  # 0.712


def test_recipe_defaults_follow_the_mlperf_reference_and_refuse_nonsense() -> None:
    from mi400plan.finetune import parse_targets
    from mi400plan.specs.layout import TrainOptions, lora_fields, train_recipe

    r = TrainOptions(finetune="lora").train_recipe()
    assert (r.lora_rank, r.lora_targets) == (16, ("qkv", "proj"))
    assert train_recipe().lora_rank == 0  # pre-training by default
    assert parse_targets("linear_fc2,qkv_proj,o_proj") == ("qkv", "proj", "fc2")
    for bad, words in ((("lora", 0, None), "positive integer"), (("none", 8, None), "add --finetune lora"),
                       (("lora", None, "qkv,gate"), "unknown LoRA target(s) gate")):
        with pytest.raises(UsageError, match=words.replace("(", r"\(").replace(")", r"\)")):
            lora_fields(*bad)


def _fit(cli, *extra: str) -> dict:  # noqa: ANN001
    r = cli(["fit", "llama2-70b", "--sku", "mi355x", "--tp", "8", "--gpus", "8", "--zero", "0", "--json", *extra])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)["data"]


def test_memory_of_a_frozen_base_by_hand(cli) -> None:  # noqa: ANN001
    """TP 8, one replica: the base keeps its BF16 weights and loses its gradients and optimizer states; the
    adapters (44,564,480 / 8 per GPU) add 2 B of weights, 4 B of fp32 gradients and 12 B of fp32 master and
    Adam moments each, and each adapter's rank-16 intermediate per token (BF16) to the activations."""
    full, lora = _fit(cli), _fit(cli, "--finetune", "lora")
    fm, lm = full["rows"][0]["memory_bytes"], lora["rows"][0]["memory_bytes"]
    a = 44_564_480 / 8
    assert lm["weights"] - fm["weights"] == pytest.approx(2 * a, abs=1)
    assert lm["gradients"] == pytest.approx(4 * a, abs=1)
    assert lm["optimizer"] == pytest.approx(12 * a, abs=1)
    # 4,096 tokens x 80 layers (no recomputation, one micro-batch in flight): + 2 adapters x r 16 x 2 B, and
    # - the inputs the frozen FFN GEMMs without an adapter no longer save (Transformer Engine keeps a GEMM's
    # input only for its weight gradient): fc1's 8,192 and fc2's 28,672 elements, / TP 8 (SP on), 2 B each
    per_token = 2 * 16 * 2 - (2 * 8192 / 8 + 2 * 28672 / 8)
    assert lm["activations"] - fm["activations"] == pytest.approx(4096 * 80 * per_token, abs=1)
    # what the base no longer holds: 4 B of gradients + 12 B of optimizer state per parameter on the GPU
    saved = fm["gradients"] + fm["optimizer"] - lm["gradients"] - lm["optimizer"]
    assert saved / (fm["gradients"] + fm["optimizer"]) > 0.99
    assert lora["recipe"]["lora_rank"] == 16 and lora["recipe"]["lora_targets"] == ["qkv", "proj"]
    assert "MLPerf Training Llama 2 70B LoRA reference" in lora["recipe"]["finetune"]
    assert "finetune" not in full["recipe"]


def test_sweep_prices_lora_faster_and_names_the_rule(cli) -> None:  # noqa: ANN001
    base = ["sweep", "llama2-70b", "--sku", "mi355x", "--gpus", "16", "--tp", "8", "--pp", "1", "--zero", "0",
            "--micro-batch", "1", "--recompute", "none", "--seq", "4096", "--global-batch", "16", "--no-ranges",
            "--top", "1", "--json"]

    def run(*extra: str) -> dict:
        r = cli([*base, *extra])
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)["data"]

    full, lora = run(), run("--finetune", "lora")
    wide = run("--finetune", "lora", "--lora-rank", "64", "--lora-targets", "qkv,proj,fc1,fc2")
    f, lo, w = full["rows"][0], lora["rows"][0], wide["rows"][0]
    assert lo["step_time_s"] < f["step_time_s"]
    # GEMMs: forward and data gradient only (4 of 6 FLOPs per weight), plus the small adapters
    assert 4 / 6 <= lo["time_s"]["compute"] / f["time_s"]["compute"] < 0.72
    assert lo["time_s"]["compute"] < w["time_s"]["compute"]  # rank 64 on four targets costs more
    assert lo["time_s"]["optimizer"] < 0.01 * f["time_s"]["optimizer"]  # adapters only
    assert wide["finetune"].startswith("LoRA rank 64 on qkv,proj,fc1,fc2;")
    assert "(rank and targets: the MLPerf Training Llama 2 70B LoRA reference" in lora["finetune"]
    assert full["finetune"] is None
    # DP all-reduce (ZeRO-0, DP 2): the fp32 gradients of the adapters on a GPU, 2 (n-1)/n of them per GPU
    adapters = 80 * 64 * ((H + QKV_OUT) + 2 * H + (H + 2 * FFN) + (FFN + H))
    dp = wide["totals"][0]["collective_bytes_per_step"]["dp"]
    assert dp == pytest.approx(2 * (2 - 1) / 2 * 4 * adapters / 8, rel=1e-9)
    # MFU's model FLOPs per token: 4 N + 6 N_adapter + 3 x attention against 6 N + 3 x attention at seq 4,096
    n, attn = 68_713_185_280, 4 * 4096 * 64 * 128 * 80
    ratio = (4 * n + 6 * 44_564_480 + 3 * attn) / (6 * n + 3 * attn)
    assert lo["mfu"] * f["tokens_per_s"] / (f["mfu"] * lo["tokens_per_s"]) == pytest.approx(ratio, rel=1e-9)


@pytest.mark.parametrize("args,words", [
    (["fit", "llama2-70b", "--sku", "h100", "--finetune", "lora", "--lora-rank", "9000"], "exceeds llama2-70b's hidden size"),
    (["fit", "llama2-70b", "--sku", "h100", "--finetune", "lora", "--lora-rank", "0"], "positive integer"),
    (["fit", "llama2-70b", "--sku", "h100", "--finetune", "lora", "--lora-targets", "qkv,router"], "unknown LoRA target"),
    (["fit", "llama2-70b", "--sku", "h100", "--mode", "infer", "--finetune", "lora"], "training only"),
    (["fit", "llama2-70b", "--sku", "h100", "--lora-rank", "8"], "add --finetune lora"),
    (["sweep", "llama2-70b", "--sku", "h100", "--gpus", "8", "--lora-targets", "qkv"], "add --finetune lora"),
    (["sweep", "deepseek-v3", "--sku", "h100", "--gpus", "1024", "--finetune", "lora"], "no fused QKV"),
    (["sweep", "llama2-70b", "--sku", "h100", "--tokens", "1B", "--deadline", "3d", "--finetune", "lora",
      "--lora-rank", "-4"], "--lora-rank"),
])
def test_refusals_name_the_flag(cli, args: list[str], words: str) -> None:  # noqa: ANN001
    r = cli(args)
    assert r.exit_code == 2 and words in r.output, r.output


def test_calibrate_run_file_takes_lora_and_names_the_line(cli, tmp_path) -> None:  # noqa: ANN001
    """A runs file's ``finetune`` / ``lora_rank`` / ``lora_targets`` reach the priced workload (validate prices
    the run faster than the same run pre-training); a rank without ``finetune`` names the file and line."""
    run = ('[[run]]\nmodel = "llama3.1-70b"\nsku = "h100"\nprecision = "bf16"\nseq_len = 4096\nglobal_batch = 32\n'
           'tp = 4\npp = 4\nvpp = 5\ndp = 2\nstep_time_s = 10.0\n')
    plain, lora = tmp_path / "plain.toml", tmp_path / "lora.toml"
    plain.write_text(run)
    lora.write_text(run + 'finetune = "lora"\nlora_rank = 16\nlora_targets = "qkv"\n')
    errs = []
    for f in (plain, lora):
        r = cli(["validate", str(f), "--json"])
        assert r.exit_code == 0, r.output
        errs.append(json.loads(r.stdout)["data"]["rows"][0]["error"])
    assert errs[1] > errs[0]  # the same measured step against a faster prediction: more optimistic
    bad = tmp_path / "bad.toml"
    bad.write_text(run + "lora_rank = 16\n")
    r = cli(["calibrate", str(bad)])
    assert r.exit_code in (2, 3) and "add --finetune lora" in r.output and "bad.toml" in r.output, r.output
