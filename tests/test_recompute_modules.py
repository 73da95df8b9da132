"""Selective recomputation of named modules (Megatron-Core ``recompute_modules``), PyTorch FSDP's
mixed-precision recipe, and the published layouts they let fit. Every expected number is written out
by hand from the architectures (DeepSeek-V3: hidden 7,168, 128 heads of 128 + 64 query/key and 128
value, q_lora 1,536, kv_lora 512, 61 layers of which the first 3 dense (FFN 18,432), 256 experts of
2,048 with top-8 and one shared expert; Llama 3.1 8B: hidden 4,096, FFN 14,336, 32 layers)."""

from __future__ import annotations

import json

import pytest

from mi400plan.errors import UsageError
from mi400plan.memory import layer_activation_bytes_per_token, train_memory
from mi400plan.params import count_params, model_flops_per_token, selective_recompute_flops_per_token
from mi400plan.specs.layout import train_recipe


def _per_token(spec, modules, *, moe, rc=1, **kw):  # noqa: ANN001, ANN202
    recipe = train_recipe("megatron", recompute_modules=modules, capacity_factor=1.0, **kw)
    return float(layer_activation_bytes_per_token(spec, recipe, tp=1, etp=1, sequence_parallel=False,
                                                  recompute=rc, seq_len=4096, moe=moe))


def test_each_module_drops_what_it_recomputes(catalog) -> None:
    """Per token, one layer, TP 1, bf16 (2 B an element), capacity factor 1.0, flash attention.

    mla_up_proj: Q 128 x 192 x 2 = 49,152 and K, V 128 x (192 + 128) x 2 = 81,920: 131,072 B.
    moe_act: each of the 8 routed copies drops its down-projection input, 2,048 x 2: 32,768 B.
    layernorm: the QKV and the FFN inputs, 2 x 7,168 x 2 = 28,672 B.
    shared_experts: gate and up outputs 2 x 2,048 x 2 + down input 2,048 x 2 = 12,288 B.
    moe: the routed path 8 x (dispatched input 14,336 + its fp32 probability 4 + 12,288) = 213,024 (the expert
    output is not kept: Megatron-Core applies the probabilities in the activation), the shared expert's
    12,288 and the fp32 router probabilities 4 x 256 = 1,024: 226,336 B.
    """
    ds = catalog.get("models", "deepseek-v3").spec
    base = _per_token(ds, ("core_attn",), moe=True)  # flash attention: the core keeps its log-sum-exp anyway
    assert base == _per_token(ds, ("core_attn",), moe=True, rc=0)
    assert base - _per_token(ds, ("mla_up_proj",), moe=True) == 131_072
    assert base - _per_token(ds, ("moe_act",), moe=True) == 32_768
    assert base - _per_token(ds, ("layernorm",), moe=True) == 28_672
    assert base - _per_token(ds, ("shared_experts",), moe=True) == 12_288
    assert base - _per_token(ds, ("moe",), moe=True) == 8 * (14_336 + 4 + 12_288) + 12_288 + 1_024
    # The modules add up, and none of them touches a run without selective recomputation.
    both = _per_token(ds, ("mla_up_proj", "moe_act"), moe=True)
    assert base - both == 131_072 + 32_768
    assert _per_token(ds, ("mla_up_proj", "moe_act"), moe=True, rc=0) == base


def test_mlp_recompute_on_a_dense_layer(catalog) -> None:
    """Llama 3.1 8B dense layer, bf16: the FFN input 4,096 x 2 = 8,192 and the intermediates, gate
    and up 2 x 14,336 x 2 = 57,344 and the down input 14,336 x 2 = 28,672: 94,208 B a token. Without
    flash attention the softmax output stays unless core_attn is listed: 32 heads x 4,096 x 2 B."""
    ll = catalog.get("models", "llama3.1-8b").spec
    assert _per_token(ll, ("core_attn",), moe=False) - _per_token(ll, ("mlp",), moe=False) == 94_208
    kept = _per_token(ll, ("mlp",), moe=False, flash_attention=False)
    dropped = _per_token(ll, ("mlp", "core_attn"), moe=False, flash_attention=False)
    assert kept - dropped == 32 * 4096 * 2


def test_recomputed_forward_flops_by_hand(catalog) -> None:
    """mla_up_proj: 61 x 2 x (1,536 x 128 x 192 + 512 x 128 x (128 + 128)) = 6,652,166,144 FLOP a token;
    mlp: 3 dense layers x 2 x 3 x 7,168 x 18,432 = 2,378,170,368; moe: 58 x 2 x 3 x 7,168 x (8 x 2,048 +
    2,048) = 45,977,960,448; moe_act and layernorm add none; core_attn is the attention forward."""
    ds = catalog.get("models", "deepseek-v3").spec
    assert selective_recompute_flops_per_token(ds, 4096, ("mla_up_proj",)) == 6_652_166_144
    assert selective_recompute_flops_per_token(ds, 4096, ("mlp",)) == 2_378_170_368
    assert selective_recompute_flops_per_token(ds, 4096, ("moe",)) == 45_977_960_448
    assert selective_recompute_flops_per_token(ds, 4096, ("moe_act", "layernorm")) == 0
    # core_attn: 61 x (2 x 4,096 x 128 x 192 + 2 x 4,096 x 128 x 128) = 61 x 335,544,320
    assert selective_recompute_flops_per_token(ds, 4096, ("core_attn",)) == 61 * 335_544_320


def test_selective_step_time_grows_with_what_it_recomputes(cli, catalog) -> None:
    """DeepSeek-V3 on 256 GB200 as NVIDIA's GB200 recipe lays it out (PP 4 x VPP 4, EP 64, capacity
    factor 1.0 as its forced load balancing gives): recomputing more modules holds less, the hardware
    FLOPs count the recomputed forward (mlp and moe add 2,378,170,368 + 45,977,960,448 FLOP a token,
    test above), and the step is slower where the slowest pipeline stage recomputes more: "moe" on every
    stage, "mlp" only on the dense FFNs of the first three layers, on the first stage, which is not the
    slowest (the last one runs the LM head), so it costs no step time."""
    def step(modules: str) -> dict:
        r = cli(["sweep", "deepseek-v3", "--sku", "gb200", "--gpus", "256", "--seq", "4096", "--global-batch", "4096",
                 "--tp", "1", "--pp", "4", "--vpp", "4", "--ep", "64", "--cp", "1", "--zero", "1", "--micro-batch", "1",
                 "--recompute", "selective", "--recompute-modules", modules, "--capacity-factor", "1.0",
                 "--no-ranges", "--top", "1", "--json"])
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)["data"]["rows"][0]

    up, mlp, moe = step("mla_up_proj"), step("mla_up_proj,mlp"), step("mla_up_proj,mlp,moe")
    assert up["step_time_s"] == pytest.approx(mlp["step_time_s"], rel=1e-9) and mlp["step_time_s"] < moe["step_time_s"]
    assert up["stage_imbalance"] > mlp["stage_imbalance"] > 1.0  # the first stage got busier, not the slowest
    assert up["memory_bytes"]["activations"] > mlp["memory_bytes"]["activations"] > moe["memory_bytes"]["activations"]
    # Hardware FLOPs a token grow by the recomputed forward (hand figures in the test above).
    model_flops = model_flops_per_token(catalog.get("models", "deepseek-v3").spec, 4096)
    extra = (moe["hfu"] / moe["mfu"] - up["hfu"] / up["mfu"]) * model_flops
    assert extra == pytest.approx(2_378_170_368 + 45_977_960_448, rel=1e-3)


def test_pytorch_fsdp_recipe_keeps_no_bf16_shard(catalog) -> None:
    """``--recipe fsdp`` (PyTorch FSDP mixed precision): the fp32 shard is the master copy, so the
    weights term at ZeRO-3 is only the two gathered bf16 layers. Llama 3.1 8B on 8 GPUs: a layer's
    weights 4,096 x (4,096 + 2 x 1,024 + 4,096) + 3 x 4,096 x 14,336 = 218,103,808 and its two norms
    8,192, at 2 B: 2 x 436,224,000 = 872,448,000 B. The megatron recipe adds its bf16 shard,
    2 x 8,030,261,248 / 8 = 2,007,565,312 B. Optimizer state is 12 B/param sharded in both."""
    spec = catalog.get("models", "llama3.1-8b").spec
    counts = count_params(spec)
    kw = dict(tp=1, pp=1, vpp=1, dp=8, ep=1, etp=1, cp=1, zero=3, micro_batch=1, seq_len=4096, recompute=0,
              sequence_parallel=False, num_microbatches=1)
    fsdp = train_memory(spec, counts, train_recipe("fsdp"), **kw)
    meg = train_memory(spec, counts, train_recipe("megatron"), **kw)
    assert float(fsdp.weights) == 2 * (218_103_808 + 8_192) * 2 == 872_448_000
    assert float(meg.weights - fsdp.weights) == pytest.approx(2 * 8_030_261_248 / 8, abs=1)
    assert float(fsdp.optimizer) == float(meg.optimizer) == pytest.approx(12 * 8_030_261_248 / 8, abs=1)


def test_bad_modules_and_contradictions_are_refused(cli) -> None:
    with pytest.raises(UsageError, match="unknown recompute module"):
        train_recipe("megatron", recompute_modules="core_attn,attention")
    r = cli(["fit", "deepseek-v3", "--sku", "gb200", "--recompute-modules", "mla_up_prj"])
    assert r.exit_code == 2 and "known: core_attn" in r.output and "Traceback" not in r.output
    r = cli(["fit", "deepseek-v3", "--sku", "gb200", "--recompute", "full", "--recompute-modules", "moe_act"])
    assert r.exit_code == 2 and "--recompute selective" in r.output
    r = cli(["fit", "deepseek-v3", "--sku", "gb200", "--gpus", "256", "--ep", "64", "--pp", "4",
             "--recompute-modules", "mla_up_proj", "--json"])
    assert r.exit_code in (0, 4), r.output
    data = json.loads(r.stdout)["data"]
    assert data["rows"][0]["layout"]["recompute"] == "selective"
    assert data["recipe"]["recompute_modules"] == ["mla_up_proj"]
    r = cli(["fit", "deepseek-v3", "--sku", "gb200", "--mode", "infer", "--recompute-modules", "moe"])
    assert r.exit_code == 2 and "training" in r.output


@pytest.mark.parametrize("name", ["deepseek-v3", "llama3.1-8b", "mixtral-8x7b", "qwen3-235b-a22b"])
def test_more_modules_never_hold_more_or_recompute_less(catalog, name) -> None:
    """Property: adding a module to what selective recomputation covers never raises a layer's saved
    bytes and never lowers the recomputed FLOPs (every subset of the seven modules, MoE and dense
    layers, TP 1 and 4 with and without SP)."""
    from itertools import combinations

    from mi400plan.specs.layout import RECOMPUTE_MODULES

    spec = catalog.get("models", name).spec
    subsets = [c for k in range(len(RECOMPUTE_MODULES) + 1) for c in combinations(RECOMPUTE_MODULES, k)]
    for tp, sp in ((1, False), (4, True), (4, False)):
        for moe in ((False, True) if spec.moe else (False,)):
            def saved(mods: tuple[str, ...]) -> float:
                rec = train_recipe("megatron", recompute_modules=mods or ("core_attn",), flash_attention=False)
                rc = 1 if mods else 0
                return float(layer_activation_bytes_per_token(spec, rec, tp=tp, etp=1, sequence_parallel=sp,
                                                              recompute=rc, seq_len=2048, moe=moe))
            cache = {m: saved(m) for m in subsets}
            for m in subsets:
                for extra in RECOMPUTE_MODULES:
                    if extra not in m:
                        bigger = tuple(x for x in RECOMPUTE_MODULES if x in m or x == extra)
                        assert cache[bigger] <= cache[m] + 1e-9, (name, m, extra)
                        assert (selective_recompute_flops_per_token(spec, 2048, bigger)
                                >= selective_recompute_flops_per_token(spec, 2048, m))


@pytest.mark.parametrize("value, words", [('["mlp", "nope"]', "unknown recompute module(s) nope"),
                                          ("3", "a list of module names")])
def test_a_bad_plan_value_names_file_line_and_field(cli, tmp_path, value, words) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(
        '[plan]\nmodel = "llama3.1-8b"\nsku = "h100"\ngpus = 8\nseq_len = 4096\nglobal_batch = 64\n\n'
        "[layout]\ntp = 1\npp = 1\nvpp = 1\ndp = 8\nep = 1\netp = 1\ncp = 1\nzero = 1\nmicro_batch = 1\n"
        'recompute = "selective"\nsequence_parallel = false\n\n'
        f"[recipe]\nrecompute_modules = {value}\n", encoding="utf-8")
    r = cli(["fit", "--plan", str(plan)])
    assert r.exit_code == 3 and "Traceback" not in r.output and "internal error" not in r.output
    out = " ".join(r.output.split())
    assert "plan.toml:22 [recipe.recompute_modules]" in out and words in out and "Value error" not in out


def test_full_recomputation_of_the_first_layers_of_each_chunk_by_hand(cli) -> None:
    """``--recompute-layers 8`` (Megatron-Core's block method) on Llama 3.1 8B, TP 1, one 8,192-token
    sequence. A layer keeps per token, bf16 and flash attention: norm inputs 2 x 2 x 4,096 and the QKV
    and FFN inputs 2 x 2 x 4,096 (32,768), Q 2 x 4,096, K and V 2 x 2 x 1,024, the output-projection
    input 2 x 4,096 (20,480), the log-sum-exp 4 x 32 = 128 and the SwiGLU intermediates 2 x 2 x 14,336 +
    2 x 14,336 = 86,016: 139,392 B; recomputed, only its input, 2 x 4,096 = 8,192 B. So 24 of 32 layers
    kept whole add 24 x (139,392 - 8,192) x 8,192 = 25,794,969,600 B to full recomputation."""
    def acts(*extra: str) -> int:
        r = cli(["fit", "llama3.1-8b", "--sku", "h100", "--seq", "8192", "--micro-batch", "1", *extra, "--json"])
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)["data"]["rows"][0]["memory_bytes"]["activations"]

    full, part = acts("--recompute", "full"), acts("--recompute-layers", "8")
    assert part - full == 24 * (139_392 - 8_192) * 8_192 == 25_794_969_600
    assert acts("--recompute-layers", "32") == acts("--recompute-layers", "40") == full


def test_partial_full_recomputation_step_flops_by_hand(cli) -> None:
    """Hardware FLOPs a token: the model's plus a quarter (8 of 32 layers) of the layers' forward. Llama
    3.1 8B at 8,192: layers = 6 x 7,504,658,432 + 3 x 4,294,967,296 - 6 x 128,256 x 4,096 =
    54,760,833,024 FLOP, a forward a third of that; a quarter of it is 4,563,402,752."""
    def row(*extra: str) -> dict:
        r = cli(["sweep", "llama3.1-8b", "--sku", "mi300x", "--gpus", "8", "--seq", "8192", "--global-batch", "64",
                 "--tp", "1", "--pp", "1", "--cp", "1", "--micro-batch", "1", "--zero", "1", *extra,
                 "--no-ranges", "--top", "1", "--json"])
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)["data"]["rows"][0]

    none, part, full = row("--recompute", "none"), row("--recompute", "full", "--recompute-layers", "8"), \
        row("--recompute", "full")
    model = 6 * 7_504_658_432 + 3 * 4_294_967_296
    assert part["hfu"] / part["mfu"] * model - model == pytest.approx(4_563_402_752, rel=1e-3)
    assert none["step_time_s"] < part["step_time_s"] < full["step_time_s"]


def test_recompute_layers_need_full_recomputation(cli) -> None:
    r = cli(["fit", "llama3.1-8b", "--sku", "h100", "--recompute", "selective", "--recompute-layers", "4"])
    assert r.exit_code == 2 and "--recompute full" in r.output
    r = cli(["fit", "llama3.1-8b", "--sku", "h100", "--recompute-layers", "4", "--recompute-modules", "mlp"])
    assert r.exit_code == 2 and "give the one" in " ".join(r.output.split())
    r = cli(["fit", "llama3.1-8b", "--sku", "h100", "--recompute-layers", "-1"])
    assert r.exit_code == 2 and "Traceback" not in r.output
