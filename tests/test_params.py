"""Parameter counts, FLOPs and KV cache checked against published figures and hand arithmetic."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from mi400plan.params import (
    attention_flops_per_token,
    count_params,
    kv_cache_bytes_per_token,
    matmul_params_per_token,
    model_flops_per_token,
)
from mi400plan.specs.model import ModelSpec


def spec(**kw) -> ModelSpec:
    base = {"name": "toy", "display_name": "toy"}
    base.update(kw)
    return ModelSpec.model_validate(base)


# --- published figures -------------------------------------------------------------------------
# (profile, published total in billions, published active in billions or None, citation)
PUBLISHED = [
    ("llama3.1-8b", 8.03, None, "Meta Llama 3.1 model card / HF safetensors: 8.03B"),
    ("llama3.1-70b", 70.6, None, "Meta Llama 3.1 model card / HF safetensors: 70.6B"),
    ("llama3.1-405b", 405.9, None, "HF safetensors 405.9B (paper: 405B)"),
    ("llama2-70b", 68.98, None, "Llama-2-70b-chat-hf safetensors: 68,976,648,192 (paper: 70B)"),
    ("mixtral-8x7b", 46.7, 12.9, "Jiang et al. 2024 / Mistral: 46.7B total, 12.9B active"),
    ("mixtral-8x22b", 141.0, 39.0, "Mistral 8x22B announcement: 141B total, 39B active"),
    ("deepseek-v3", 671.0, 37.0, "DeepSeek-V3 report arXiv 2412.19437: 671B total, 37B activated"),
    ("qwen3-235b-a22b", 235.0, 22.0, "Qwen3 report arXiv 2505.09388 Table 2: 235B total, 22B activated"),
    ("gpt3-175b", 175.0, None, "Brown et al. 2020 Table 2.1: 175.0B"),
    ("gpt-1t", 1008.0, None, "Narayanan et al. 2021 Table 1: 1008B"),
    ("moe-2t", 2000.0, None, "AMD at-scale training whitepaper (S004): '2T parameter MoE'"),
]


@pytest.mark.parametrize(("name", "total_b", "active_b", "cite"), PUBLISHED, ids=[p[0] for p in PUBLISHED])
def test_total_matches_published(catalog, name, total_b, active_b, cite) -> None:
    m = catalog.get("models", name).spec
    c = count_params(m)
    assert c.total / 1e9 == pytest.approx(total_b, rel=0.01), cite
    # The profile states the same figure it is checked against.
    assert m.published_params_total_billion.nominal == pytest.approx(total_b)
    if not m.is_moe:
        # Dense: everything is active, and the profile says so.
        assert c.active == c.total
        assert m.published_params_active_billion.nominal == pytest.approx(total_b)


def test_every_bundled_model_is_covered_and_sourced(catalog) -> None:
    assert sorted(catalog.names("models")) == sorted(p[0] for p in PUBLISHED)
    for loaded in catalog.all("models"):
        m = loaded.spec
        assert m.display_name and m.family and m.sources
        for est in (m.published_params_total_billion, m.published_params_active_billion):
            assert est.source, f"{m.name}: published figure without a source"
    aliases = {"llama3-8b": "llama3.1-8b", "llama3-70b": "llama3.1-70b", "llama3-405b": "llama3.1-405b",
               "gpt3": "gpt3-175b"}
    for alias, name in aliases.items():
        assert catalog.resolve("models", alias) == name


ROUNDED_ACTIVE = {"deepseek-v3", "mixtral-8x22b", "qwen3-235b-a22b"}


@pytest.mark.parametrize(
    ("name", "total_b", "active_b", "cite"),
    [p for p in PUBLISHED if p[2] is not None],
    ids=[p[0] for p in PUBLISHED if p[2] is not None],
)
def test_active_matches_published(catalog, name, total_b, active_b, cite) -> None:
    m = catalog.get("models", name).spec
    c = count_params(m)
    got = c.active / 1e9
    if name in ROUNDED_ACTIVE:
        # Published to the nearest billion: "37B" means 36.5..37.5B. Allow 1% beyond that interval.
        # DeepSeek-V3 by hand: 2 x 0.927B (embedding + head) + 3 dense layers x 0.5835B
        # + 58 MoE layers x (0.1871B attention + 9 x 0.04404B experts + 0.0018B router) = 37.55B.
        assert (active_b - 0.5) * 0.99 <= got <= (active_b + 0.5) * 1.01, cite
    else:
        assert got == pytest.approx(active_b, rel=0.01), cite
    assert m.published_params_active_billion.nominal == pytest.approx(active_b)


def test_llama31_exact_safetensors_counts(catalog) -> None:
    """HF safetensors metadata totals for the Llama 3.1 releases (exact integers)."""
    expected = {
        "llama3.1-8b": 8_030_261_248,
        "llama3.1-70b": 70_553_706_496,
        "llama3.1-405b": 405_853_388_800,
    }
    for name, n in expected.items():
        assert count_params(catalog.get("models", name).spec).total == n


def test_llama2_70b_by_hand(catalog) -> None:
    """80 layers x (attention 2 x 8192^2 + 2 x 8192 x 1024 = 150,994,944; SwiGLU 3 x 8192 x 28672 =
    704,643,072; two norms 16,384) = 68,452,352,000, plus embedding and head 2 x 32000 x 8192 =
    524,288,000 and the final norm 8,192: 68,976,648,192, the safetensors total."""
    assert count_params(catalog.get("models", "llama2-70b").spec).total == 68_976_648_192


def test_llama3_8b_by_hand(catalog) -> None:
    c = count_params(catalog.get("models", "llama3-8b").spec)
    emb = 128256 * 4096  # 525,336,576
    attn = 4096 * 4096 * 2 + 4096 * 1024 * 2  # Q,O 4096x4096; K,V 4096x(8x128)
    mlp = 3 * 4096 * 14336
    norms = 2 * 4096
    assert c.embedding == emb and c.output_head == emb and c.final_norm == 4096
    assert c.layers[0].attention == attn == 41_943_040
    assert c.layers[0].mlp_dense == mlp == 176_160_768
    assert c.layers[0].norms == norms
    assert c.total == 2 * emb + 4096 + 32 * (attn + mlp + norms) == 8_030_261_248


def test_megatron_formula_for_gpt_1t(catalog) -> None:
    """Narayanan et al. 2021 eq.: P = 12 l h^2 (1 + 13/(12h) + (V + s)/(12 l h)), plus the final LayerNorm (2h)."""
    m = catalog.get("models", "gpt-1t").spec
    l, h, V, s = 128, 25600, 51200, 2048
    p = 12 * l * h * h + 13 * l * h + (V + s) * h  # the formula multiplied out (integers)
    assert count_params(m).total == p + 2 * h
    # 1,006,632,960,000 + 42,598,400 + 1,363,148,800 = 1,008,038,707,200: "1008B" in Table 1.
    assert p == 1_008_038_707_200


def test_deepseek_v3_layer_breakdown(catalog) -> None:
    c = count_params(catalog.get("models", "deepseek-v3").spec)
    h = 7168
    q = h * 1536 + 1536 * 128 * (128 + 64)  # q_a + q_b
    kv = h * (512 + 64) + 512 * 128 * (128 + 128)  # kv_a + kv_b
    o = 128 * 128 * h
    assert c.layers[0].attention == q + kv + o == 187_105_280
    # q_a and kv_a are whole on every TP rank (Megatron-Core "duplicated", vLLM ReplicatedLinear).
    assert c.layers[0].attn_replicated == h * 1536 + h * (512 + 64) == 15_138_816
    assert c.layers[0].attn_kv == 0
    assert c.layers[0].norms == 2 * h + 1536 + 512  # two layer norms + q_a_norm + kv_a_norm
    expert = 3 * h * 2048
    assert c.routed_expert_params == expert == 44_040_192
    assert [lp.is_moe for lp in c.layers[:4]] == [False, False, False, True]
    assert c.num_moe_layers == 58
    moe = c.layers[3]
    assert moe.routed_experts == 256 * expert
    assert moe.shared_experts == expert
    assert moe.router == h * 256 + 256  # weights + e_score_correction_bias
    assert moe.mlp_dense == 0 and c.layers[0].mlp_dense == 3 * h * 18432


def test_qwen3_qk_norm_and_explicit_head_dim(catalog) -> None:
    c = count_params(catalog.get("models", "qwen3-235b-a22b").spec)
    h, d = 4096, 128
    # head_dim 128 x 64 heads = 8192 != hidden 4096: Q is 4096x8192, O is 8192x4096, K/V 4096x(4x128).
    assert c.layers[0].attention == h * 8192 * 2 + h * 512 * 2
    assert c.layers[0].attn_kv == 2 * h * 4 * 128  # K and V: 4 KV heads x 128, split by min(TP, 4)
    assert c.layers[0].attn_replicated == 0
    assert c.layers[0].norms == 2 * h + 2 * d  # input/post-attention norms + q_norm + k_norm


# --- hand-computed toy models ------------------------------------------------------------------


def test_toy_dense_swiglu_gqa() -> None:
    m = spec(
        hidden_size=8, num_layers=2, vocab_size=10, ffn_dim=16,
        attention={"num_heads": 2, "num_kv_heads": 1},
    )
    c = count_params(m)
    # head_dim = 8 / 2 = 4. Q: 8x8 = 64, K: 8x4 = 32, V: 32, O: 64 -> 192.
    # SwiGLU: 3 x 8 x 16 = 384. Norms: 2 x 8 = 16. Layer = 592.
    # Embedding 10 x 8 = 80, head 80, final norm 8. Total = 80 + 80 + 8 + 2 x 592 = 1352.
    assert c.layers[0].attention == 192
    assert c.layers[0].mlp_dense == 384
    assert c.layers[0].norms == 16
    assert c.total == 1352 == c.active
    # KV cache: 2 x 1 kv head x 4 x 2 layers x 2 bytes = 32 bytes per token.
    assert kv_cache_bytes_per_token(m, 2) == 32
    # FLOPs at s = 5: matmul weights 2 x (192 + 384) + head 80 = 1232 -> 6 x 1232 = 7392.
    # Attention forward 2 layers x 4 x 5 x 2 heads x 4 = 320; x3 = 960. Total 8352.
    assert matmul_params_per_token(m) == 1232
    assert attention_flops_per_token(m, 5) == 320
    assert model_flops_per_token(m, 5) == 8352


def test_toy_gpt_style_biases_layernorm_learned_positions_tied() -> None:
    m = spec(
        hidden_size=4, num_layers=2, vocab_size=10, ffn_dim=16, ffn_kind="gelu",
        linear_bias=True, norm="layernorm", tie_embeddings=True,
        position_embedding="learned", max_seq_len=6,
        attention={"num_heads": 2},
    )
    c = count_params(m)
    # Attention: 4 x 4^2 = 64 weights + q,k,v,o biases 4 x 4 = 16 -> 80.
    # MLP: 4x16 + 16x4 = 128 weights + biases 16 + 4 = 20 -> 148.
    # Two LayerNorms: 2 x (4 + 4) = 16. Layer = 244.
    # Embedding 10 x 4 + positions 6 x 4 = 64; tied head 0; final LayerNorm 8.
    assert (c.layers[1].attention, c.layers[1].mlp_dense, c.layers[1].norms) == (80, 148, 16)
    # K and V with their biases (the part TP splits by min(TP, KV heads)): 2 x (4 x 4 + 4) = 40.
    assert c.layers[1].attn_kv == 40
    assert c.embedding == 64 and c.output_head == 0 and c.final_norm == 8
    assert c.total == 64 + 8 + 2 * 244 == 560
    # Tied head is still a matmul: 2 x (64 + 128) + 10 x 4 = 424.
    assert matmul_params_per_token(m) == 424


def test_toy_moe_with_dense_prefix_shared_expert_and_router_bias() -> None:
    m = spec(
        hidden_size=4, num_layers=3, vocab_size=10, ffn_dim=12,
        attention={"num_heads": 2, "num_kv_heads": 2},
        moe={"num_experts": 4, "top_k": 2, "expert_ffn_dim": 2, "num_shared_experts": 1,
             "shared_expert_ffn_dim": 6, "first_k_dense": 1, "router_bias": True},
    )
    c = count_params(m)
    # Attention 4 x 16 = 64, norms 8 in every layer.
    # Layer 0 dense: SwiGLU 3 x 4 x 12 = 144 -> 216.
    # Layers 1, 2 MoE: routed expert 3 x 4 x 2 = 24, x4 = 96; shared 3 x 4 x 6 = 72;
    #   router 4 x 4 + 4 = 20 -> 64 + 96 + 72 + 20 + 8 = 260.
    # Total: 40 + 40 + 4 + 216 + 2 x 260 = 820.
    assert [lp.is_moe for lp in c.layers] == [False, True, True]
    assert c.routed_expert_params == 24
    assert (c.layers[1].routed_experts, c.layers[1].shared_experts, c.layers[1].router) == (96, 72, 20)
    assert c.total == 820
    # Active: the two MoE layers use 2 of 4 experts: 820 - 2 x (2 x 24) = 724.
    assert c.active == 724
    assert c.num_moe_layers == 2
    # Matmul weights: layer 0 64 + 144; MoE layers 64 + 72 + 2 x 24 + 16 (router, no bias) each; head 40.
    assert matmul_params_per_token(m) == 208 + 2 * 200 + 40


def test_toy_mla() -> None:
    m = spec(
        hidden_size=8, num_layers=1, vocab_size=10, ffn_dim=4,
        attention={"kind": "mla", "num_heads": 2, "q_lora_rank": 3, "kv_lora_rank": 4,
                   "qk_nope_head_dim": 2, "qk_rope_head_dim": 1, "v_head_dim": 2},
    )
    c = count_params(m)
    # q_a 8x3 = 24, q_b 3 x 2x(2+1) = 18, kv_a 8 x (4+1) = 40, kv_b 4 x 2x(2+2) = 32, o 2x2 x 8 = 32.
    assert c.layers[0].attention == 24 + 18 + 40 + 32 + 32 == 146
    assert c.layers[0].norms == 2 * 8 + 3 + 4
    # Latent cache: (4 + 1) x 1 layer x 2 bytes.
    assert kv_cache_bytes_per_token(m, 2) == 10
    # Attention forward at s = 3: 2 x 3 x 2 heads x 3 (qk) + 2 x 3 x 2 x 2 (v) = 36 + 24.
    assert attention_flops_per_token(m, 3) == 60


def test_mla_without_q_lora() -> None:
    m = spec(
        hidden_size=8, num_layers=1, vocab_size=10, ffn_dim=4,
        attention={"kind": "mla", "num_heads": 2, "kv_lora_rank": 4,
                   "qk_nope_head_dim": 2, "qk_rope_head_dim": 1, "v_head_dim": 2},
    )
    # q: 8 x 2x3 = 48 replaces q_a + q_b; no q_a_norm.
    assert count_params(m).layers[0].attention == 48 + 40 + 32 + 32
    assert count_params(m).layers[0].norms == 16 + 4


def test_moe_layer_frequency() -> None:
    m = spec(
        hidden_size=4, num_layers=7, vocab_size=10, ffn_dim=8,
        attention={"num_heads": 1},
        moe={"num_experts": 2, "top_k": 1, "expert_ffn_dim": 4, "first_k_dense": 1, "layer_freq": 2},
    )
    assert [lp.is_moe for lp in count_params(m).layers] == [False, True, False, True, False, True, False]


# --- KV cache and FLOPs on real models ----------------------------------------------------------


def test_kv_cache_llama3_70b_bf16(catalog) -> None:
    m = catalog.get("models", "llama3-70b").spec
    assert kv_cache_bytes_per_token(m, 2) == 2 * 8 * 128 * 80 * 2 == 327_680


def test_kv_cache_deepseek_v3_latent(catalog) -> None:
    m = catalog.get("models", "deepseek-v3").spec
    assert kv_cache_bytes_per_token(m, 1) == (512 + 64) * 61 == 35_136


def test_model_flops_llama3_70b_by_hand(catalog) -> None:
    m = catalog.get("models", "llama3-70b").spec
    s = 8192
    # Matmul weights = total 70,553,706,496 - embedding 1,050,673,152 - norms (80 x 2 + 1) x 8192.
    n = 70_553_706_496 - 128256 * 8192 - 161 * 8192
    assert matmul_params_per_token(m) == n == 69_501_714_432
    # PaLM appendix B: 6N + 12 L H Q T with H x Q = 64 x 128 = 8192, T = s.
    assert model_flops_per_token(m, s) == 6 * n + 12 * 80 * 8192 * s


def test_flops_grow_with_sequence(catalog) -> None:
    m = catalog.get("models", "llama3-8b").spec
    assert model_flops_per_token(m, 8192) > model_flops_per_token(m, 2048)
    with pytest.raises(ValueError):
        attention_flops_per_token(m, 0)


# --- validation ----------------------------------------------------------------------------------


def test_rejects_dense_prefix_covering_all_layers() -> None:
    with pytest.raises(ValidationError, match="first_k_dense"):
        spec(hidden_size=4, num_layers=2, vocab_size=10, ffn_dim=8, attention={"num_heads": 1},
             moe={"num_experts": 2, "top_k": 1, "expert_ffn_dim": 4, "first_k_dense": 2})


def test_rejects_indivisible_hidden_without_head_dim() -> None:
    with pytest.raises(ValidationError, match="head_dim"):
        spec(hidden_size=10, num_layers=1, vocab_size=10, ffn_dim=8, attention={"num_heads": 3})


# --- properties ----------------------------------------------------------------------------------


@st.composite
def models(draw) -> ModelSpec:
    heads = draw(st.sampled_from([1, 2, 4, 8]))
    kv = draw(st.sampled_from([k for k in (1, 2, 4, 8) if heads % k == 0]))
    head_dim = draw(st.integers(1, 16))
    hidden = draw(st.integers(1, 64))
    layers = draw(st.integers(1, 6))
    kw: dict = {
        "hidden_size": hidden, "num_layers": layers, "vocab_size": draw(st.integers(1, 100)),
        "ffn_dim": draw(st.integers(1, 64)), "ffn_kind": draw(st.sampled_from(["swiglu", "gelu"])),
        "linear_bias": draw(st.booleans()), "norm": draw(st.sampled_from(["rmsnorm", "layernorm"])),
        "tie_embeddings": draw(st.booleans()),
        "position_embedding": draw(st.sampled_from(["rope", "learned"])),
        "max_seq_len": draw(st.integers(1, 64)),
        "attention": {"num_heads": heads, "num_kv_heads": kv, "head_dim": head_dim,
                      "qkv_bias": draw(st.booleans()), "qk_norm": draw(st.booleans())},
    }
    if draw(st.booleans()):
        n = draw(st.integers(1, 8))
        kw["moe"] = {
            "num_experts": n, "top_k": draw(st.integers(1, n)), "expert_ffn_dim": draw(st.integers(1, 32)),
            "num_shared_experts": draw(st.integers(0, 2)), "first_k_dense": draw(st.integers(0, layers - 1)),
            "layer_freq": draw(st.integers(1, 3)), "router_bias": draw(st.booleans()),
        }
    return spec(**kw)


@settings(max_examples=150, deadline=None)
@given(models())
def test_total_is_sum_of_parts_and_active_bounded(m: ModelSpec) -> None:
    c = count_params(m)
    assert len(c.layers) == m.num_layers
    assert c.total == c.embedding + c.output_head + c.final_norm + sum(lp.total for lp in c.layers)
    assert 0 < c.active <= c.total
    if m.moe is None or c.num_moe_layers == 0:
        assert c.active == c.total
    else:
        # Each MoE layer leaves (num_experts - top_k) routed experts inactive.
        idle = c.num_moe_layers * (m.moe.num_experts - m.moe.top_k) * c.routed_expert_params
        assert c.total - c.active == idle
    for lp in c.layers:
        assert lp.dense_part == lp.total - lp.routed_experts
        if not lp.is_moe:
            assert lp.routed_experts == lp.shared_experts == lp.router == 0
    assert matmul_params_per_token(m) <= c.active + m.vocab_size * m.hidden_size
    assert model_flops_per_token(m, 16) >= 6 * matmul_params_per_token(m)
