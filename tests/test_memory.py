"""Memory model: hand-computed cases (arithmetic in the test) and direction properties."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from mi400plan.errors import LayoutError
from mi400plan.memory import (
    RECOMPUTE_CODES,
    infer_memory,
    max_batch_x_context,
    max_context,
    train_memory,
    usable_bytes,
)
from mi400plan.params import LayerParams, ParamCounts, count_params
from mi400plan.specs.layout import (
    InferRecipe,
    Layout,
    RuntimeReserve,
    TrainRecipe,
    check_layout,
    infer_recipe,
    parse_reserve,
    train_recipe,
)
from mi400plan.specs.model import ModelSpec
from mi400plan.units import GB, GiB

NO_RESERVE = RuntimeReserve(fixed_bytes=0, fraction=0)


def toy_gpt(**kw) -> ModelSpec:
    """GPT-style: LayerNorm, GELU FFN of 4h, MHA, 2 layers (Korthikanti's setting)."""
    base = dict(
        name="toy", display_name="toy", hidden_size=64, num_layers=2, vocab_size=1000, ffn_dim=256,
        ffn_kind="gelu", norm="layernorm", attention={"num_heads": 4}, max_seq_len=4096,
    )
    base.update(kw)
    return ModelSpec(**base)


def toy_moe(**kw) -> ModelSpec:
    base = dict(
        name="toymoe", display_name="toy MoE", hidden_size=128, num_layers=8, vocab_size=2000, ffn_dim=512,
        attention={"num_heads": 8, "num_kv_heads": 4},
        moe={"num_experts": 16, "top_k": 2, "expert_ffn_dim": 128, "num_shared_experts": 1, "first_k_dense": 1},
    )
    base.update(kw)
    return ModelSpec(**base)


def flat_counts(params: int, layers: int = 1) -> ParamCounts:
    """A model whose parameters are all TP-split attention weights (no embedding): exact totals."""
    per = params // layers
    lp = LayerParams(attention=per, mlp_dense=0, shared_experts=0, routed_experts=0, router=0, norms=0,
                     is_moe=False)
    return ParamCounts(embedding=0, output_head=0, final_norm=0, layers=(lp,) * layers, routed_expert_params=0,
                       total=per * layers, active=per * layers)


# --- must-hold figures ----------------------------------------------------------------------------


def test_175b_bf16_weights_do_not_fit_one_mi300x() -> None:
    # 175e9 params x 2 B (bf16) = 350e9 B = 350 GB > 192 GB (MI300X); headroom 192 - 350 = -158 GB.
    model = toy_gpt(num_layers=1)
    counts = flat_counts(175_000_000_000)
    rec = InferRecipe(weight_format="bf16", reserve=NO_RESERVE)
    mem = infer_memory(model, counts, rec, tp=1, batch=1, context=1)
    assert float(mem.weights) == 175e9 * 2 == 350e9
    headroom_weights_only = 192 * GB - float(mem.weights)
    assert headroom_weights_only == -158e9
    assert float(mem.total) > float(usable_bytes(192 * GB, NO_RESERVE))


def test_deepseek_v3_fp8_weights_fit_8_mi300x_not_8_h100(catalog) -> None:
    model = catalog.get("models", "deepseek-v3").spec
    counts = count_params(model)
    rec = InferRecipe(weight_format="fp8", reserve=NO_RESERVE)
    w = float(infer_memory(model, counts, rec, tp=8, batch=1, context=1).weights)
    # Block weights at 1 B/param; embedding + head (2 x 129280 x 7168 = 1,853,358,080) stay at 2 B.
    emb = 2 * 129280 * 7168
    rep = sum(lp.router + lp.norms for lp in counts.layers) + counts.final_norm
    # MLA down-projections q_a (7168 x 1536) and kv_a (7168 x (512 + 64)) are whole on every TP rank:
    # 7168 x 2112 x 61 layers = 923,467,776 params at 1 B on each of the 8 GPUs.
    down = 7168 * (1536 + 512 + 64) * 61
    assert down == 923_467_776
    expected = (counts.total - emb - rep - down) * 1 / 8 + down * 1 + emb * 2 / 8 + rep * 2
    assert w == pytest.approx(expected, rel=1e-12)
    # ~671e9 / 8 = 83.9 GB per GPU: fits 192 GB (MI300X), not 80 GB (H100).
    assert 80 * GB < w < 192 * GB
    assert 8 * w < 8 * 192 * GB and 8 * w > 8 * 80 * GB


def test_llama3_70b_kv_cache_bytes_per_token(catalog) -> None:
    model = catalog.get("models", "llama3.1-70b").spec
    counts = count_params(model)
    mem = infer_memory(model, counts, InferRecipe(kv_format="bf16"), tp=1, batch=1, context=1)
    # 2 (K,V) x 8 KV heads x 128 head_dim x 80 layers x 2 B = 327,680 B per token
    assert float(mem.kv_bytes_per_token) == 2 * 8 * 128 * 80 * 2 == 327_680


def test_llama_405b_fp8_fits_one_mi300x_node_and_context_it_buys(catalog) -> None:
    model = catalog.get("models", "llama3.1-405b").spec
    counts = count_params(model)
    rec = infer_recipe("fp8", kv_dtype="bf16")  # default reserve 2 GiB + 5%
    cap = 192 * GB
    tp, h, V, a, d, f = 8, 16384, 128256, 128, 128, 53248
    # Weights per GPU: block linears at 1 B / 8 ranks; embedding and head (V x h each) at 2 B / 8; norms at 2 B.
    emb = V * h
    norms = sum(lp.norms for lp in counts.layers) + counts.final_norm
    w = (counts.total - 2 * emb - norms) / 8 + 2 * emb * 2 / 8 + norms * 2
    # KV per token per GPU: 2 x 8 heads x 128 x 126 layers x 2 B = 516,096 B, split over 8 ranks = 64,512 B.
    kv_tok = 2 * 8 * 128 * 126 * 2 / 8
    assert kv_tok == 64_512
    # Scratch of one 8192-token step: 2 B x (2h + Q/8 + 2 KV heads x d + attn out/8 + 3 x ffn/8) per token,
    # plus fp32 logits of the one sampled sequence over V/8.
    scratch = 8192 * 2 * (2 * h + a * d / 8 + 2 * 1 * d + a * d / 8 + 3 * f / 8) + 1 * 4 * V / 8
    room = cap * 0.95 - 2 * GiB - w - scratch
    expected_tokens = np.floor(room / kv_tok)
    got = max_batch_x_context(model, counts, rec, capacity_bytes=cap, tp=tp, batch=1)
    assert float(got) == expected_tokens
    # Batch 4: four sampled sequences' logits (4 x 4*V/8 B), tokens shared by 4 sequences.
    room4 = room - 3 * 4 * V / 8
    assert float(max_context(model, counts, rec, capacity_bytes=cap, tp=tp, batch=4)) == np.floor(
        np.floor(room4 / kv_tok) / 4)
    # The room buys well over the 128K context the model supports (about 1.9M tokens).
    assert expected_tokens > 131072
    # The full-context request fits: weights + KV(131072) + scratch + reserve <= 192 GB.
    mem = infer_memory(model, counts, rec, tp=8, batch=1, context=131072)
    assert float(mem.total) <= float(usable_bytes(cap, rec.reserve))


# --- bytes per parameter ---------------------------------------------------------------------------


def test_megatron_18_and_zero_16_bytes_per_param() -> None:
    assert train_recipe("megatron").bytes_per_param(4096) == 2 + 4 + 4 + 8 == 18
    assert train_recipe("zero").bytes_per_param(4096) == 2 + 2 + 12 == 16
    assert train_recipe("megatron", optimizer="sgd").bytes_per_param(4096) == 2 + 4 + 4 + 4
    # FP8 (Transformer Engine): a row-wise and a transposed 1-byte copy of each GEMM weight
    assert train_recipe("megatron", precision="fp8").bytes_per_param(4096) == 18 + 2 * 1
    assert train_recipe("megatron", grad_dtype="bf16").bytes_per_param(4096) == 16
    # Adafactor: master 4 + factored second moment 4 x 2 / hidden per parameter
    assert train_recipe("megatron", optimizer="adafactor").bytes_per_param(4096) == 2 + 4 + 4 + 4 * 2 / 4096


def test_train_state_bytes_and_zero_stages() -> None:
    model = toy_gpt(num_layers=8)
    P = 8_000_000
    counts = flat_counts(P, layers=8)
    rec = train_recipe("megatron", reserve=NO_RESERVE)
    kw = dict(seq_len=16, micro_batch=1)
    m0 = train_memory(model, counts, rec, dp=1, zero=0, **kw)
    assert float(m0.weights + m0.gradients + m0.optimizer) == 18 * P
    # DP = 4: ZeRO-1 shards the 12 optimizer bytes: 2 + 4 + 12/4 = 9 B/param
    m1 = train_memory(model, counts, rec, dp=4, zero=1, **kw)
    assert float(m1.weights + m1.gradients + m1.optimizer) == (2 + 4 + 3) * P
    # ZeRO-2 also shards gradients: 2 + 1 + 3 = 6 B/param, but two layers' gradients (1e6 params each,
    # 4 B) are whole between their backward and their reduce-scatter: + 2 x 4 x 1e6 = 8e6 B
    m2 = train_memory(model, counts, rec, dp=4, zero=2, **kw)
    assert float(m2.gradients) == 1 * P + 2 * 4 * (P / 8)
    assert float(m2.weights + m2.gradients + m2.optimizer) == (2 + 1 + 3) * P + 2 * 4 * (P / 8)
    # ZeRO-3 shards weights (2/4 = 0.5 B) but keeps 2 gathered layers of 1e6 params x 2 B:
    # 0.5 x 8e6 + 2 x 2 x 1e6 = 8e6 B of weights; grads as ZeRO-2; optimizer 3 x 8e6
    m3 = train_memory(model, counts, rec, dp=4, zero=3, **kw)
    assert float(m3.weights) == 0.5 * P + 2 * 2 * (P / 8)
    assert float(m3.gradients + m3.optimizer) == (1 + 3) * P + 2 * 4 * (P / 8)
    # TP = 2 halves every TP-split parameter
    mt = train_memory(model, counts, rec, tp=2, dp=1, zero=0, **kw)
    assert float(mt.weights + mt.gradients + mt.optimizer) == 18 * P / 2


def test_zero_16_recipe_matches_paper_example() -> None:
    # ZeRO paper sec. 3.1: 7.5B params x 16 B = 120 GB; with Pos+g+p over 64 GPUs: 120 GB / 64 = 1.875 GB
    model = toy_gpt(num_layers=1)
    counts = flat_counts(7_500_000_000)
    rec = train_recipe("zero", reserve=NO_RESERVE)
    m = train_memory(model, counts, rec, dp=1, zero=0, seq_len=1)
    assert float(m.weights + m.gradients + m.optimizer) == 120e9
    m = train_memory(model, counts, rec, dp=64, zero=2, seq_len=1)  # Pos+g: 2 + 14/64 B/param
    # ... plus the gradients of the layer in backward and of the one being reduce-scattered, whole
    # (the paper's figure leaves these transients out): here the model is one layer, so all of them.
    assert float(m.weights + m.gradients + m.optimizer) == pytest.approx(7.5e9 * (2 + 2 + 12 / 64))
    # As 75 layers of 1e8 parameters: 2 + 14/64 B/param + 2 layers x 1e8 x 2 B
    m = train_memory(toy_gpt(num_layers=75), flat_counts(7_500_000_000, layers=75), rec, dp=64, zero=2, seq_len=1)
    assert float(m.weights + m.gradients + m.optimizer) == pytest.approx(7.5e9 * (2 + 14 / 64) + 2 * 1e8 * 2)


# --- activations (Korthikanti et al. 2022) ------------------------------------------------------------


def korthikanti_recipe() -> TrainRecipe:
    return TrainRecipe(flash_attention=False, dropout=True, reserve=NO_RESERVE)


@pytest.mark.parametrize(
    "tp,sp,recompute,per_layer",
    [
        # s*b*h*(34 + 5*a*s/h) = 128*2*64*(34 + 5*4*128/64) = 16384*74
        (1, False, "none", 16384 * 74),
        # TP=2 no SP: s*b*h*(10 + 24/t + 5*a*s/(h*t)) = 16384*(10 + 12 + 20)
        (2, False, "none", 16384 * (10 + 12 + 20)),
        # TP=2 with SP: s*b*h/t*(34 + 5*a*s/h) = 16384*74/2
        (2, True, "none", 16384 * 74 / 2),
        # selective recompute with SP: s*b*h*34/t
        (2, True, "selective", 16384 * 34 / 2),
    ],
)
def test_toy_activations_match_korthikanti(tp, sp, recompute, per_layer) -> None:
    model = toy_gpt()
    counts = count_params(model)
    s, b, h, V = 128, 2, 64, 1000
    m = train_memory(model, counts, korthikanti_recipe(), tp=tp, sequence_parallel=sp,
                     recompute=RECOMPUTE_CODES[recompute], seq_len=s, micro_batch=b)
    tsp = tp if sp else 1
    # Megatron pads the 1,000-token vocabulary to a multiple of 128 x TP: 1,024 at TP 1 (8 x 128) and
    # at TP 2 (4 x 256), so the fp32 logits are 1,024 wide.
    Vp = 1024
    assert Vp == -(-V // (128 * tp)) * 128 * tp
    # Two layers, plus the planner's extra terms: int64 token ids (8 B/token) and the embedding-dropout
    # mask (1 B x h/tsp, Megatron-LM theoretical_memory_usage) on the first stage and, on the last
    # stage, fp32 logits 4*Vp/t and the final-norm and head inputs 2 x 2*h/tsp per token.
    extras = s * b * (8 + h / tsp + 4 * Vp / tp + 2 * 2 * h / tsp)
    assert float(m.activations) == pytest.approx(2 * per_layer + extras, rel=1e-12)


def test_fp8_saves_gemm_inputs_at_one_byte(catalog) -> None:
    """Llama 3.1 70B layer (h 8,192, 64 heads of 128, 8 KV heads, SwiGLU 28,672), TP 4 with SP, flash
    attention, per token. BF16: norm and GEMM inputs 4 x 2 x 8,192 / 4 = 16,384; Q 2 x 64 x 128 / 4 =
    4,096; K and V 2 KV heads per rank x 2 x 256 = 1,024; output-projection input 4,096; SwiGLU
    2 x 3 x 28,672 / 4 = 43,008; log-sum-exp 4 x 64 / 4 = 64: 68,672 B. FP8 (Transformer Engine keeps
    the 1-byte copy of each GEMM input): QKV and FFN inputs at 1 B, (2 x 2 + 2 x 1) x 8,192 / 4 =
    12,288; output-projection input 2,048; down-projection input 1 B, (2 x 2 + 1) x 28,672 / 4 = 35,840;
    the rest as BF16: 12,288 + 4,096 + 1,024 + 2,048 + 35,840 + 64 = 55,360 B."""
    from mi400plan.memory import layer_activation_bytes_per_token

    model = catalog.get("models", "llama3.1-70b").spec

    def per_token(precision: str) -> float:
        rec = train_recipe("megatron", precision=precision)
        return float(layer_activation_bytes_per_token(model, rec, tp=4, etp=1, sequence_parallel=True,
                                                      recompute=0, seq_len=8192, moe=False))

    assert per_token("bf16") == pytest.approx(68_672, rel=1e-12)
    assert per_token("fp8") == pytest.approx(55_360, rel=1e-12)
    assert train_recipe("megatron", precision="fp32").gemm_input_bytes == 4.0


def test_full_recompute_keeps_layer_inputs_plus_one_layer() -> None:
    model = toy_gpt()
    counts = count_params(model)
    s, b, h, tp = 128, 2, 64, 2
    V = 1024  # 1,000 tokens padded to a multiple of 128 x 2 (Megatron-LM)
    m = train_memory(model, counts, korthikanti_recipe(), tp=tp, sequence_parallel=True, recompute=2,
                     seq_len=s, micro_batch=b)
    # 2 layers x 2*s*b*h/t (layer inputs) + one layer being recomputed, s*b*h*74/t, + extras as above
    expected = 2 * 2 * s * b * h / tp + s * b * h * 74 / tp + s * b * (8 + h / tp + 4 * V / tp + 2 * 2 * h / tp)
    assert float(m.activations) == pytest.approx(expected, rel=1e-12)


def test_flash_attention_removes_s_squared_term() -> None:
    model = toy_gpt()
    counts = count_params(model)
    rec = TrainRecipe(flash_attention=True, dropout=True, reserve=NO_RESERVE)
    s, b, h, a = 128, 2, 64, 4
    m = train_memory(model, counts, rec, seq_len=s, micro_batch=b)
    # 34*s*b*h per layer, plus fp32 log-sum-exp per head and token (4*a B), plus extras (token ids,
    # embedding-dropout mask h x 1 B, logits over the vocabulary padded to 1,024, final-norm and head inputs)
    expected = 2 * (34 * s * b * h + 4 * a * s * b) + s * b * (8 + h + 4 * 1024 + 2 * 2 * h)
    assert float(m.activations) == pytest.approx(expected, rel=1e-12)


def test_pipeline_in_flight_microbatches() -> None:
    model = toy_gpt(num_layers=8)
    counts = count_params(model)
    rec = korthikanti_recipe()
    s, b, h = 64, 1, 64
    per_layer = s * b * h * (34 + 5 * 4 * s / h)
    emb_in = 8 * s * b + s * b * h  # int64 token ids + 1-byte embedding-dropout mask per micro-batch
    # 1F1B, pp=4: stage 0 holds 4 micro-batches of its 2 layers = 8 layer-activations (+ embedding inputs)
    m = train_memory(model, counts, rec, pp=4, seq_len=s, micro_batch=b)
    assert int(m.stage) == 0
    assert float(m.activations) == pytest.approx(4 * (2 * per_layer + emb_in))
    # Interleaved, pp=4, vpp=2: pp*(1 + (pp-1)/(pp*vpp)) = 4*(1 + 3/8) = 5.5 micro-batches of 2 layers
    m = train_memory(model, counts, rec, pp=4, vpp=2, seq_len=s, micro_batch=b)
    assert float(m.activations) == pytest.approx(5.5 * (2 * per_layer + emb_in))
    # num_microbatches = 2 caps 1F1B in-flight at 2
    m = train_memory(model, counts, rec, pp=4, seq_len=s, micro_batch=b, num_microbatches=2)
    assert float(m.activations) == pytest.approx(2 * (2 * per_layer + emb_in))


def test_most_loaded_stage_with_dense_first_layers() -> None:
    model = toy_moe()
    counts = count_params(model)
    rec = train_recipe(reserve=NO_RESERVE)
    m = train_memory(model, counts, rec, pp=2, dp=1, zero=0, seq_len=1)
    # Stage 0: layers 0-3 (1 dense + 3 MoE) + embedding; stage 1: layers 4-7 (4 MoE) + head + final norm.
    # The 2,000-token vocabulary is padded to 2,048 rows (a multiple of 128 x TP 1): 48 x 128 more
    # parameters in the embedding and in the head.
    pad = (2048 - 2000) * 128
    lay = counts.layers
    st0 = sum(lp.total for lp in lay[:4]) + counts.embedding + pad
    st1 = sum(lp.total for lp in lay[4:]) + counts.output_head + pad + counts.final_norm
    assert float(m.weights + m.gradients + m.optimizer) == 18 * max(st0, st1)


def test_vectorized_equals_scalar() -> None:
    model = toy_moe()
    counts = count_params(model)
    rec = train_recipe()
    tp = np.array([1, 2, 4, 2])
    pp = np.array([1, 2, 4, 8])
    ep = np.array([1, 4, 16, 2])
    vec = train_memory(model, counts, rec, tp=tp, pp=pp, ep=ep, dp=16, zero=np.array([0, 1, 2, 3]), seq_len=256)
    for i in range(4):
        one = train_memory(model, counts, rec, tp=int(tp[i]), pp=int(pp[i]), ep=int(ep[i]), dp=16, zero=i, seq_len=256)
        assert float(vec.total[i]) == float(one.total)


def test_kv_replication_when_tp_exceeds_kv_heads() -> None:
    model = toy_moe()  # 4 KV heads of 16
    counts = count_params(model)
    r = InferRecipe()
    kv = [float(infer_memory(model, counts, r, tp=t).kv_bytes_per_token) for t in (1, 2, 4, 8)]
    full = 2 * 4 * 16 * 8 * 2  # 2 x kv_heads x head_dim x layers x 2 B
    assert kv == [full, full / 2, full / 4, full / 4]  # TP 8 > 4 KV heads: each head replicated twice


def test_mla_latent_is_not_split_by_tp(catalog) -> None:
    model = catalog.get("models", "deepseek-v3").spec
    counts = count_params(model)
    kv = [float(infer_memory(model, counts, InferRecipe(), tp=t).kv_bytes_per_token) for t in (1, 8)]
    # (kv_lora_rank 512 + rope 64) x 61 layers x 2 B on every TP rank
    assert kv == [(512 + 64) * 61 * 2] * 2


def test_block_scale_formats() -> None:
    bits = {f: InferRecipe(weight_format=f).weight_bytes * 8 for f in ("mxfp4", "fp4", "fp6", "mxfp8", "int4", "nvfp4")}
    # MX (OCP MX v1.0): one 8-bit E8M0 scale per 32 elements. NVFP4: one FP8 E4M3 scale per 16.
    # int4 GPTQ/AWQ: per 128-weight group one fp16 scale and one 4-bit zero point (packed 8 per int32
    # in qzeros): 4 + (16 + 4)/128 = 4.15625 bits, not the 4.25 an fp16 zero point would give.
    assert bits == {"mxfp4": 4 + 8 / 32, "fp4": 4.25, "fp6": 6 + 8 / 32, "mxfp8": 8.25, "int4": 4 + 20 / 128,
                    "nvfp4": 4 + 8 / 16}
    assert bits["int4"] == 4.15625


def test_reserve_parsing() -> None:
    r = parse_reserve("4GiB+8%")
    assert (r.fixed_bytes, r.fraction) == (4 * 2**30, 0.08)
    assert parse_reserve("0").bytes_for(192e9) == 0
    # training's default: the fixed part counted per layout (passed in here), none of HBM, 3 % of allocated
    assert RuntimeReserve().bytes_for(100e9, fixed=1e9, allocated=50e9) == 1e9 + 0.03 * 50e9
    f = parse_reserve("1GiB+3%alloc")
    assert (f.fixed_bytes, f.fraction, f.fragmentation) == (2**30, 0.0, 0.03)
    assert parse_reserve("4GiB+8%").fragmentation == 0  # a reserve as written holds no fragmentation share


def test_layout_rules_name_the_rule(catalog) -> None:
    llama = catalog.get("models", "llama3.1-70b").spec
    cases = [
        (Layout(tp=3), "tp-heads"),
        (Layout(pp=3), "pp-layers"),  # 80 layers
        (Layout(ep=2, dp=2), "ep-experts"),  # dense model
    ]
    for lay, rule in cases:
        with pytest.raises(LayoutError) as e:
            check_layout(lay, llama)
        assert e.value.rule == rule and f"[rule: {rule}]" in e.value.message
    moe = toy_moe()
    with pytest.raises(LayoutError) as e:
        check_layout(Layout(ep=3, dp=3), moe)
    assert e.value.rule == "ep-experts"
    with pytest.raises(LayoutError) as e:
        check_layout(Layout(ep=4, dp=2), moe)
    assert e.value.rule == "expert-grid"
    # 12 heads, 4 KV heads, TP 6: 6 divides 12 but neither 6 | 4 nor 4 | 6
    odd = toy_gpt(hidden_size=96, attention={"num_heads": 12, "num_kv_heads": 4})
    with pytest.raises(LayoutError) as e:
        check_layout(Layout(tp=6), odd)
    assert e.value.rule == "tp-kv-heads"
    check_layout(Layout(tp=12), odd)  # 12 = 3 x 4 KV heads: replicated, allowed


# --- properties --------------------------------------------------------------------------------------

MOE = toy_moe()
MOE_COUNTS = count_params(MOE)
DENSE = toy_gpt(num_layers=8, attention={"num_heads": 8, "num_kv_heads": 2}, ffn_kind="swiglu", norm="rmsnorm")
DENSE_COUNTS = count_params(DENSE)

layouts = st.fixed_dictionaries(
    {
        "tp": st.sampled_from([1, 2, 4]),
        "pp": st.sampled_from([1, 2, 4]),
        "ep": st.sampled_from([1, 2, 4, 8, 16]),
        "zero": st.integers(0, 3),
        "recompute": st.integers(0, 2),
        "sp": st.booleans(),
        "mb": st.sampled_from([1, 2]),
        "seq": st.sampled_from([64, 256]),
        "flash": st.booleans(),
    }
)


def _total(model, counts, d, **over) -> float:
    d = {**d, **over}
    rec = train_recipe(flash_attention=d["flash"])
    # The tensors only: the runtime reserve's communicator buffers do grow with each group a layout adds
    # (a TP group of 2 costs 16 channels x 2 peers x 9.19 MiB), so the law is about the allocated bytes.
    m = train_memory(model, counts, rec, tp=d["tp"], pp=d["pp"], ep=d["ep"], dp=8, zero=d["zero"],
                     recompute=d["recompute"], sequence_parallel=d["sp"], micro_batch=d["mb"], seq_len=d["seq"])
    return float(m.total - m.reserve)


@settings(max_examples=60, deadline=None)
@given(layouts, st.sampled_from(["tp", "pp", "ep", "zero"]))
def test_memory_never_grows_with_more_parallelism(d, knob) -> None:
    for model, counts in ((MOE, MOE_COUNTS), (DENSE, DENSE_COUNTS)):
        if model is DENSE:
            d = {**d, "ep": 1}
            if knob == "ep":
                continue
        elif knob == "pp":
            # Not a law for mixed layers: with a dense first layer, doubling PP can leave a stage of
            # MoE-only layers with more micro-batches in flight than the old mixed stage 0 (see
            # test_pp_can_grow_heaviest_stage_with_mixed_layers). Homogeneous models are checked.
            continue
        bigger = d[knob] + 1 if knob == "zero" else d[knob] * 2
        if knob == "zero" and bigger > 3:
            continue
        for lay in (d, {**d, knob: bigger}):
            try:
                check_layout(Layout(tp=lay["tp"], pp=lay["pp"], ep=lay["ep"], dp=8), model)
            except LayoutError:
                assume(False)  # only valid layouts are compared
        assert _total(model, counts, d, **{knob: bigger}) <= _total(model, counts, d) * (1 + 1e-12)


@settings(max_examples=60, deadline=None)
@given(layouts)
def test_total_is_sum_of_terms(d) -> None:
    rec = train_recipe(flash_attention=d["flash"])
    m = train_memory(MOE, MOE_COUNTS, rec, tp=d["tp"], pp=d["pp"], ep=d["ep"], dp=8, zero=d["zero"],
                     recompute=d["recompute"], sequence_parallel=d["sp"], micro_batch=d["mb"], seq_len=d["seq"])
    parts = m.weights + m.gradients + m.optimizer + m.activations + m.reserve
    assert float(m.total) == pytest.approx(float(parts), rel=1e-12)
    im = infer_memory(MOE, MOE_COUNTS, InferRecipe(), tp=d["tp"], pp=d["pp"], batch=d["mb"], context=d["seq"])
    assert float(im.total) == pytest.approx(float(im.weights + im.kv_cache + im.activations + im.reserve), rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 64), st.integers(1, 200_000), st.sampled_from([1, 2, 4]), st.sampled_from(["bf16", "fp8"]))
def test_kv_cache_linear_in_tokens(batch, context, tp, kv) -> None:
    r = InferRecipe(kv_format=kv)
    one = infer_memory(DENSE, DENSE_COUNTS, r, tp=tp, batch=1, context=1)
    m = infer_memory(DENSE, DENSE_COUNTS, r, tp=tp, batch=batch, context=context)
    assert float(m.kv_cache) == pytest.approx(float(one.kv_cache) * batch * context, rel=1e-12)
    # 2 x 2 KV heads x 8 head_dim x 8 layers x bytes, split over min(tp, 2) ranks
    assert float(one.kv_cache) == 2 * 2 * 8 * 8 * (2 if kv == "bf16" else 1) / min(tp, 2)


def test_pp_can_grow_heaviest_stage_with_mixed_layers() -> None:
    # toy MoE: layer 0 dense (lighter activations), layers 1-7 MoE. PP 4 -> 8 (1F1B: stage i holds pp - i):
    # PP 4: stage 0 = {0, 1} x 4 in flight = 4 dense + 4 MoE; stage 1 = {2, 3} x 3 = 6 MoE layer-activations
    # PP 8: stage 1 = {1} x 7 in flight = 7 MoE layer-activations > 6: the first all-MoE stage moved earlier.
    rec = train_recipe(flash_attention=False)
    kw = dict(tp=2, ep=1, dp=8, zero=2, recompute=1, sequence_parallel=False, micro_batch=2, seq_len=256)
    m4 = train_memory(MOE, MOE_COUNTS, rec, pp=4, **kw)
    m8 = train_memory(MOE, MOE_COUNTS, rec, pp=8, **kw)
    assert int(m4.stage) == 1 and int(m8.stage) == 1
    assert float(m8.activations) > float(m4.activations)


# --- audit regressions (hand arithmetic) --------------------------------------------------------------


def toy_gqa_1layer() -> ModelSpec:
    """hidden 64, 8 heads of 8, 2 KV heads, SwiGLU 128, 1 layer, vocab 100, RMSNorm, untied."""
    return ModelSpec(name="gqa1", display_name="gqa1", hidden_size=64, num_layers=1, vocab_size=100, ffn_dim=128,
                     attention={"num_heads": 8, "num_kv_heads": 2})


def test_kv_projection_weights_replicated_when_tp_exceeds_kv_heads() -> None:
    model = toy_gqa_1layer()
    counts = count_params(model)
    # Q and O: 64 x 64 each = 8192; K and V: 2 x 64 x (2 heads x 8) = 2048; FFN 3 x 64 x 128 = 24576;
    # norms 2 x 64 = 128; embedding = head = 100 x 64 = 6400; final norm 64.
    assert counts.layers[0].attention == 8192 + 2048 and counts.layers[0].attn_kv == 2048
    # TP 8 > 2 KV heads: each rank holds one whole KV head (K and V: 2 x 64 x 8 = 1024), not 2048 / 8 = 256.
    # Training pads the 100-token vocabulary to a multiple of 128 x 8 = 1,024 rows (Megatron-LM):
    # embedding and head 1,024 x 64 / 8 = 8,192 each per rank.
    per_rank = 8192 / 8 + 2048 / 2 + 24576 / 8 + 128 + 1024 * 64 / 8 + 1024 * 64 / 8 + 64
    assert per_rank == 21696
    rec = train_recipe("megatron", reserve=NO_RESERVE)
    m = train_memory(model, counts, rec, tp=8, zero=0, seq_len=8)
    assert float(m.weights + m.gradients + m.optimizer) == 18 * 21696
    # Inference pads to a multiple of 64 (vLLM): 128 rows, 128 x 64 / 8 = 1,024 per table per rank.
    im = infer_memory(model, counts, InferRecipe(weight_format="bf16", reserve=NO_RESERVE), tp=8, context=1)
    assert float(im.weights) == 2 * (8192 / 8 + 2048 / 2 + 24576 / 8 + 128 + 1024 + 1024 + 64) == 2 * 7360
    # TP 2 = KV heads: plain /tp; vocabulary padded to 256 rows (128 x 2): 256 x 64 / 2 = 8,192 per table.
    m2 = train_memory(model, counts, rec, tp=2, zero=0, seq_len=8)
    assert float(m2.weights + m2.gradients + m2.optimizer) == 18 * (10240 / 2 + 24576 / 2 + 128 + 8192 + 8192 + 64)


def toy_mla_1layer() -> ModelSpec:
    return ModelSpec(name="mla1", display_name="mla1", hidden_size=64, num_layers=1, vocab_size=100, ffn_dim=128,
                     attention={"kind": "mla", "num_heads": 4, "q_lora_rank": 16, "kv_lora_rank": 8,
                                "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 8})


def test_mla_down_projections_are_not_split_by_tp() -> None:
    model = toy_mla_1layer()
    counts = count_params(model)
    # q_a 64 x 16 = 1024, kv_a 64 x (8 + 4) = 768 (whole on every TP rank);
    # q_b 16 x 4 x (8 + 4) = 768, kv_b 8 x 4 x (8 + 8) = 512, o 4 x 8 x 64 = 2048 (split by TP).
    lp = counts.layers[0]
    assert lp.attention == 1024 + 768 + 768 + 512 + 2048 == 5120
    assert lp.attn_replicated == 1024 + 768 and lp.attn_kv == 0
    # TP 4: attention (768 + 512 + 2048)/4 + 1792 = 2624; FFN 24576/4 = 6144; norms 2 x 64 + 16 + 8 = 152;
    # final norm 64. Embedding and head: inference pads the 100 tokens to 128 rows (vLLM, multiple of 64),
    # 128 x 64 / 4 = 2,048 each; training to 512 rows (Megatron, 128 x TP 4), 512 x 64 / 4 = 8,192 each.
    layers = (768 + 512 + 2048) / 4 + 1792 + 24576 / 4 + 152 + 64
    assert layers == 8984 and layers + 2048 + 2048 == 13080 and layers + 8192 + 8192 == 25368
    im = infer_memory(model, counts, InferRecipe(weight_format="bf16", reserve=NO_RESERVE), tp=4, context=1)
    assert float(im.weights) == 2 * 13080
    m = train_memory(model, counts, train_recipe("megatron", reserve=NO_RESERVE), tp=4, zero=0, seq_len=8)
    assert float(m.weights + m.gradients + m.optimizer) == 18 * 25368


def test_moe_routed_activations_under_expert_tp() -> None:
    from mi400plan.memory import layer_activation_bytes_per_token

    model = ModelSpec(name="moe2", display_name="moe2", hidden_size=64, num_layers=2, vocab_size=100, ffn_dim=128,
                      attention={"num_heads": 4},
                      moe={"num_experts": 8, "top_k": 2, "expert_ffn_dim": 32})
    rec = TrainRecipe(reserve=NO_RESERVE)  # flash attention, no dropout, 2-byte activations, cf 1.25

    def per_token(etp: int) -> float:
        return float(layer_activation_bytes_per_token(model, rec, tp=2, etp=etp, sequence_parallel=True,
                                                      recompute=0, seq_len=128, moe=True))

    e, h, E, a, d, f, k, cf, t = 2, 64, 8, 4, 16, 32, 2, 1.25, 2
    replicated = (4 * e * h + 4 * E) / t  # norm, QKV, pre-FFN and FFN inputs + fp32 router probs, SP-split
    split = e * a * d / t + e * (a / t) * 2 * d + e * a * d / t  # Q, K+V (2 heads per rank), O input
    lse = 4 * a / t  # flash attention log-sum-exp
    # Routed: ETP all-gathers the dispatched tokens and their router probabilities over its etp ranks
    # (input e*h*etp, an fp32 probability 4*etp that the weighted SwiGLU keeps), and each rank computes etp x
    # the tokens at 1/etp of the width, so the SwiGLU intermediates stay 3*f*e per assignment. The expert
    # output is not kept (Megatron-Core applies the probabilities in the activation). Local tokens are
    # SP-split (/t).
    for etp in (1, 2):
        routed = k * cf * (e * h * etp + 4 * etp + e * 3 * f) / t
        assert per_token(etp) == pytest.approx(replicated + split + lse + routed, rel=1e-12)
    assert per_token(1) == 272 + 256 + 8 + 405
    assert per_token(2) == 272 + 256 + 8 + 570  # ETP 2 never needs less activation memory than ETP 1


def test_embedding_dropout_mask_counted_only_with_dropout() -> None:
    model = toy_gpt()
    counts = count_params(model)
    s, b, h = 128, 2, 64
    on = train_memory(model, counts, korthikanti_recipe(), seq_len=s, micro_batch=b)
    off = train_memory(model, counts, TrainRecipe(flash_attention=False, dropout=False, reserve=NO_RESERVE),
                       seq_len=s, micro_batch=b)
    # Dropout adds, per layer, 2 residual masks (2sbh x 1 B) + the attention-dropout mask and output
    # (a*s^2*b x (1 + 2) B), and on the first stage the embedding-dropout mask s*b*h x 1 B.
    a, L = 4, 2
    assert float(on.activations - off.activations) == L * (2 * s * b * h + 3 * a * s * s * b) + s * b * h


# --- fit (scalar) and sweep (vectorized) paths agree ----------------------------------------------------


def _random_layouts(model: ModelSpec, rng: np.random.Generator, n: int) -> list[dict]:
    out: list[dict] = []
    while len(out) < n:
        d = dict(
            tp=int(rng.choice([1, 2, 4, 8])), pp=int(rng.choice([1, 2, 4])), vpp=int(rng.choice([1, 2])),
            dp=int(rng.choice([1, 2, 4, 8])), ep=int(rng.choice([1, 2, 4, 8])) if model.moe else 1,
            etp=int(rng.choice([1, 2])) if model.moe else 1, cp=int(rng.choice([1, 2])),
            zero=int(rng.integers(0, 4)), micro_batch=int(rng.choice([1, 2])),
            recompute=str(rng.choice(["none", "selective", "full"])), sequence_parallel=bool(rng.integers(0, 2)),
        )
        try:
            lay = Layout(**d)
            check_layout(lay, model, seq_len=256)
        except (LayoutError, ValueError):
            continue
        out.append(d)
    return out


@pytest.mark.parametrize("which", ["moe", "dense", "mla", "moe-fp8", "dense-fp8"])
def test_fit_scalar_path_equals_sweep_vectorized_path_on_random_layouts(which: str) -> None:
    from mi400plan.api.fit import _train_terms
    from mi400plan.search import Workload, memory_total

    base = which.split("-")[0]
    model = {"moe": toy_moe(), "dense": DENSE, "mla": toy_mla_1layer().model_copy(update={"num_layers": 4})}[base]
    counts = count_params(model)
    if which.endswith("fp8"):  # the recipe fit and sweep build for --precision fp8 (and a capacity factor)
        rec = train_recipe("megatron", precision="fp8", capacity_factor=1.5 if model.moe else None)
        assert rec.fp8_weight_copies == 2
    else:
        rec = train_recipe("megatron", flash_attention=which != "dense")
    rng = np.random.default_rng(20240607)
    lays = _random_layouts(model, rng, 40)
    seq, gbs = 256, 64
    cols = {k: np.array([d[k] for d in lays]) for k in lays[0]}
    cols["recompute"] = np.array([RECOMPUTE_CODES[r] for r in cols["recompute"]])
    c = dict(cols, sp=cols.pop("sequence_parallel"))
    vec = memory_total(c, Workload(model=model, counts=counts, recipe=rec, seq_len=seq, global_batch=gbs))
    for i, d in enumerate(lays):
        lay = Layout(**d)
        one = _train_terms(model, counts, rec, lay, seq, gbs // (lay.dp * lay.micro_batch)).item()
        assert one == vec.item(i), (which, d)
    # Inference: one vectorized call over (tp, pp, ep) equals the scalar calls term by term.
    tps, pps = np.array([1, 2, 4, 8, 2]), np.array([1, 2, 4, 1, 4])
    eps = np.array([1, 2, 8, 8, 4]) if model.moe else np.ones(5, dtype=int)
    ir = infer_recipe("fp8")
    v = infer_memory(model, counts, ir, tp=tps, pp=pps, ep=eps, batch=3, context=1000)
    for i in range(5):
        s = infer_memory(model, counts, ir, tp=int(tps[i]), pp=int(pps[i]), ep=int(eps[i]), batch=3, context=1000)
        assert s.item() == v.item(i)


def test_mla_inference_scratch_attention_output_uses_v_head_dim() -> None:
    model = toy_mla_1layer()
    counts = count_params(model)
    im = infer_memory(model, counts, InferRecipe(reserve=NO_RESERVE), tp=1, batch=1, context=10)
    # 10 tokens x 2 B x (hidden in/out 2 x 64 + Q and K 4 heads x 12 x 2 + V 4 x 8 + attention output
    # 4 heads x v_head_dim 8 + SwiGLU 3 x 128) + fp32 logits of one sequence over the 100 tokens padded
    # to 128 (vLLM pads the vocabulary to a multiple of 64): 4 x 128
    per_token = 2 * (2 * 64 + 4 * 12 * 2 + 4 * 8 + 4 * 8 + 3 * 128)
    assert per_token == 1344
    assert float(im.activations) == 10 * 1344 + 4 * 128


# --- vocabulary padding, FP8 weight copies, MoE capacity factor (hand arithmetic) ----------------------


def test_padded_vocab_size_megatron_and_vllm_rules() -> None:
    from mi400plan.memory import padded_vocab_size

    # Megatron-LM: multiple of 128 x TP. Llama-3's 128,256 = 128 x 1,002: no padding at TP 1 or 2
    # (256 x 501); TP 4: ceil(128,256 / 512) = 251 -> 128,512; TP 8: ceil(128,256 / 1,024) = 126 -> 129,024.
    assert [float(padded_vocab_size(128_256, 128 * t)) for t in (1, 2, 4, 8)] == [128_256, 128_256, 128_512, 129_024]
    assert 126 * 1024 == 129_024 and 251 * 512 == 128_512
    # vLLM: multiple of 64 whatever the TP. GPT-3's 50,257 -> 786 x 64 = 50,304; Llama-3 unchanged.
    assert float(padded_vocab_size(50_257, 64)) == 786 * 64 == 50_304
    assert float(padded_vocab_size(128_256, 64)) == 128_256
    # Vectorized over TP as the sweep calls it.
    assert padded_vocab_size(128_256, 128 * np.array([1, 8])).tolist() == [128_256, 129_024]


def test_llama3_70b_vocab_padding_costs_memory_not_parameters(catalog) -> None:
    model = catalog.get("models", "llama3.1-70b").spec
    counts = count_params(model)
    # Parameter counts stay unpadded (the published 70.6B): 128,256 x 8,192 per embedding table.
    assert counts.total == 70_553_706_496 and counts.embedding == counts.output_head == 128_256 * 8192
    kw = dict(tp=8, zero=0, seq_len=4096, micro_batch=1)
    padded = train_memory(model, counts, train_recipe("megatron", reserve=NO_RESERVE), **kw)
    # vocab_divisible_by = 1 pads to a multiple of TP 8 only, and 128,256 = 8 x 16,032: no padding.
    plain = train_memory(model, counts, train_recipe("megatron", vocab_divisible_by=1, reserve=NO_RESERVE), **kw)
    # TP 8: 129,024 - 128,256 = 768 padded rows x 8,192 = 6,291,456 parameters in the embedding and as
    # many in the untied output layer; split over 8 ranks: 2 x 6,291,456 / 8 = 1,572,864 per GPU.
    extra = 2 * 768 * 8192 / 8
    assert extra == 1_572_864
    assert float(padded.weights - plain.weights) == 2 * extra  # bf16 params
    assert float(padded.gradients - plain.gradients) == 4 * extra  # fp32 main grads
    assert float(padded.optimizer - plain.optimizer) == 12 * extra  # fp32 master + Adam m, v
    # fp32 logits: 4 B x 768 / 8 padded columns per token x 4,096 tokens
    assert float(padded.activations - plain.activations) == 4 * 768 / 8 * 4096 == 1_572_864


def test_fp8_training_keeps_two_copies_of_block_gemm_weights(catalog) -> None:
    model = catalog.get("models", "llama3.1-70b").spec
    counts = count_params(model)
    # Block GEMM weights of one Llama-3.1-70B layer: Q and O 8,192 x 8,192 each, K and V 8,192 x 1,024
    # each (8 KV heads of 128), SwiGLU 3 x 8,192 x 28,672.
    layer = 2 * 8192 * 8192 + 2 * 8192 * 1024 + 3 * 8192 * 28672
    assert layer == 855_638_016
    gemm = 80 * layer  # 68,451,041,280: embedding, output layer and norms (2.1B) get no FP8 copy
    kw = dict(tp=8, zero=1, dp=1, seq_len=4096)
    bf16 = train_memory(model, counts, train_recipe("megatron", reserve=NO_RESERVE), **kw)
    fp8 = train_memory(model, counts, train_recipe("megatron", precision="fp8", reserve=NO_RESERVE), **kw)
    one = train_memory(model, counts, train_recipe("megatron", precision="fp8", fp8_weight_copies=1,
                                                   reserve=NO_RESERVE), **kw)
    # Transformer Engine (Hopper-style FP8): a row-wise and a transposed 1-byte copy: 2 B per GEMM weight.
    assert float(fp8.weights - bf16.weights) == 2 * gemm / 8 == 17_112_760_320
    assert float(one.weights - bf16.weights) == 1 * gemm / 8
    assert float(fp8.gradients) == float(bf16.gradients) and float(fp8.optimizer) == float(bf16.optimizer)
    # ZeRO-3 over DP 4 shards the copies with the weights (plus two gathered layers in flight):
    z3 = dict(kw, zero=3, dp=4)
    b3 = train_memory(model, counts, train_recipe("megatron", reserve=NO_RESERVE), **z3)
    f3 = train_memory(model, counts, train_recipe("megatron", precision="fp8", reserve=NO_RESERVE), **z3)
    assert float(f3.weights - b3.weights) == 2 * (gemm / 8 / 4 + 2 * layer / 8)


def test_fp8_copies_need_fp8_precision() -> None:
    from mi400plan.errors import UsageError

    assert train_recipe("megatron").fp8_weight_copies == 0
    assert train_recipe("megatron", precision="fp8").fp8_weight_copies == 2
    with pytest.raises(UsageError):
        train_recipe("megatron", fp8_weight_copies=2)
    with pytest.raises(UsageError):
        train_recipe("megatron", precision="fp8", fp8_weight_copies=3)
    with pytest.raises(UsageError):
        train_recipe("megatron", capacity_factor=0)


def test_fp8_parameters_replace_the_bf16_working_copy() -> None:
    """Bytes a block GEMM weight holds (``TrainRecipe.gemm_weight_bytes``): bf16 training 2; FP8 with
    Transformer Engine's casts 2 + 2 x 1 = 4; FP8 parameters (``--fp8-param-gather``) 1 each FP8 copy,
    2 with the transposed cache and 1 without; the rest of the model keeps its 2 B either way. Per
    parameter with Adam and fp32 grads: 1 + 4 + 4 + 8 = 17 B for FP8 parameters without the cache."""
    from mi400plan.errors import UsageError

    assert train_recipe("megatron").gemm_weight_bytes == 2.0
    assert train_recipe("megatron", precision="fp8").gemm_weight_bytes == 4.0
    assert train_recipe("megatron", precision="fp8", fp8_params=True).gemm_weight_bytes == 2.0
    one = train_recipe("megatron", precision="fp8", fp8_params=True, fp8_weight_copies=1)
    assert one.gemm_weight_bytes == 1.0 and one.param_bytes == 2.0
    assert one.bytes_per_param(8192) == 17.0
    with pytest.raises(UsageError):
        train_recipe("megatron", fp8_params=True)


def test_moe_capacity_factor_scales_routed_activations() -> None:
    from mi400plan.memory import layer_activation_bytes_per_token

    model = ModelSpec(name="moe2", display_name="moe2", hidden_size=64, num_layers=2, vocab_size=128, ffn_dim=128,
                      attention={"num_heads": 4}, moe={"num_experts": 8, "top_k": 2, "expert_ffn_dim": 32})

    def per_token(cf: float) -> float:
        rec = train_recipe("megatron", capacity_factor=cf, reserve=NO_RESERVE)
        return float(layer_activation_bytes_per_token(model, rec, tp=2, etp=1, sequence_parallel=True,
                                                      recompute=0, seq_len=128, moe=True))

    # Routed part per local token (SP over t = 2): top_k x cf x (dispatched input e*h + fp32 router
    # probability 4 + SwiGLU intermediates e*3*f) / t = 2 x cf x (128 + 4 + 192) / 2 = 324 x cf bytes.
    e, h, f, k, t = 2, 64, 32, 2, 2
    assert k * (e * h + 4 + e * 3 * f) / t == 324
    assert per_token(1.25) - per_token(1.0) == pytest.approx(324 * 0.25, rel=1e-12)
    assert per_token(2.0) - per_token(1.0) == pytest.approx(324 * 1.0, rel=1e-12)
    # The default is 1.25 (the test_moe_routed_activations_under_expert_tp figure: 405 = 324 x 1.25).
    assert per_token(1.25) == pytest.approx(float(layer_activation_bytes_per_token(
        model, TrainRecipe(reserve=NO_RESERVE), tp=2, etp=1, sequence_parallel=True, recompute=0, seq_len=128,
        moe=True)), rel=1e-12)


def test_peak_total_is_the_total_of_the_term_by_term_model(catalog) -> None:
    """``train_memory_peak`` (what a search reads for every candidate) equals ``train_memory(...).need``
    (the total without the fragmentation share) over a grid of layouts, uneven pipeline splits and ZeRO stages included."""
    from mi400plan.memory import train_memory, train_memory_peak

    spec = catalog.get("models", "deepseek-v3").spec
    counts = count_params(spec)
    recipe = train_recipe(precision="fp8")
    kw = dict(tp=np.array([1, 2, 4, 8])[:, None, None], pp=np.array([1, 4, 8, 16])[None, :, None],
              zero=np.array([0, 1, 3])[None, None, :], ep=8, dp=16, micro_batch=2, seq_len=4096, recompute=1,
              num_microbatches=64, pipeline_split=np.array([0, 2, 2, 2])[None, :, None])
    full = train_memory(spec, counts, recipe, **kw)
    peak = train_memory_peak(spec, counts, recipe, **kw)
    assert peak.shape == full.total.shape == (4, 4, 3)
    assert np.allclose(peak, full.need, rtol=1e-12, atol=0)
    assert np.allclose(full.total - peak, 0.03 * (full.total - full.reserve), rtol=1e-9)


def test_deepspeed_zero3_gathers_the_largest_module_plus_its_prefetch(catalog) -> None:
    """DeepSpeed ZeRO-3 (``zero3_gathering = "deepspeed_limits"``) on Mixtral 8x7B with EP 8: each rank holds one
    expert per layer, and Megatron-LM's grouped experts keep the fused gate and up projections in one
    weight, 2 x 14,336 x 4,096 = 117,440,512 parameters, larger than the attention block (4,096 x 6,144 +
    4,096 x 4,096 = 41,943,040). With a 5e7 prefetch bucket the gathered parameters are that module, the
    5e7 budget and one tensor of overshoot; with no bucket, the module alone: the difference is 117,440,512
    + 5e7 parameters at 2 B. Gradients: a 1e8-element larger reduce bucket adds 1e8 x 4 B (fp32)."""
    model = catalog.get("models", "mixtral-8x7b").spec
    counts = count_params(model)
    kw = dict(tp=1, pp=1, dp=64, ep=8, etp=1, cp=1, zero=3, micro_batch=1, seq_len=4096, recompute=2)
    base = train_recipe("megatron").model_copy(update={"zero3_gathering": "deepspeed_limits"})

    def mem(**upd):
        return train_memory(model, counts, base.model_copy(update=upd), **kw)

    module = 2 * 14336 * 4096
    assert module > 4096 * 6144 + 4096 * 4096
    with_bucket, no_bucket = mem(), mem(zero3_prefetch_bucket_size=0.0)
    assert float(with_bucket.weights - no_bucket.weights) == pytest.approx(2 * (module + 5e7), rel=1e-9)
    bigger = mem(zero3_reduce_bucket_size=6e8)
    assert float(bigger.gradients - with_bucket.gradients) == pytest.approx(4 * 1e8, rel=1e-9)
    assert float(with_bucket.weights) < float(train_memory(model, counts, train_recipe("megatron"), **kw).weights)
