"""Hugging Face config.json -> ModelSpec: same counts as the bundled profiles; clear errors otherwise."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mi400plan.errors import ProfileError
from mi400plan.hfconfig import default_name, model_from_hf_config, sanitize_name
from mi400plan.params import count_params, kv_cache_bytes_per_token
from mi400plan.profiles import load_file

DATA = Path(__file__).parent / "data" / "hf"


def load(name: str) -> dict:
    return json.loads((DATA / name).read_text())


@pytest.mark.parametrize(
    ("config", "profile"),
    [
        ("llama-3.1-8b.json", "llama3.1-8b"),
        ("mixtral-8x7b.json", "mixtral-8x7b"),
        ("qwen3-235b-a22b.json", "qwen3-235b-a22b"),
        ("deepseek-v3.json", "deepseek-v3"),
    ],
)
def test_config_counts_equal_bundled_profile(catalog, config: str, profile: str) -> None:
    path = str(DATA / config)
    m = model_from_hf_config(load(config), path=path)
    ref = catalog.get("models", profile).spec
    got, want = count_params(m), count_params(ref)
    assert got == want  # every group of every layer, total and active
    assert kv_cache_bytes_per_token(m, 2) == kv_cache_bytes_per_token(ref, 2)
    assert m.max_seq_len == ref.max_seq_len
    assert list(m.sources) == ["HF"] and m.sources["HF"].title == path and m.sources["HF"].date is None


def test_llama_config_through_catalog(catalog) -> None:
    """Catalog.get routes a .json path to the HF loader."""
    loaded = catalog.get("models", str(DATA / "llama-3.1-8b.json"))
    assert loaded.origin == "file"
    assert loaded.spec.name == "llama-3.1-8b"  # from the file stem (not a config.json)
    assert loaded.spec.display_name == "meta-llama/Llama-3.1-8B"
    assert count_params(loaded.spec).total == 8_030_261_248


def test_qwen2_biases_and_tied_embeddings() -> None:
    """Qwen2-0.5B: 494,032,768 parameters (Qwen2 / Qwen2.5 reports: 0.49B total, 0.36B non-embedding)."""
    m = model_from_hf_config(load("qwen2-0.5b.json"), path="qwen2-0.5b.json")
    c = count_params(m)
    # Attention: Q,O 896x896; K,V 896x(2x64) + Q/K/V biases 896 + 128 + 128.
    attn = 2 * 896 * 896 + 2 * 896 * 128 + 896 + 2 * 128
    assert c.layers[0].attention == attn == 1_836_160
    layer = attn + 3 * 896 * 4864 + 2 * 896
    assert c.output_head == 0
    assert c.total == 151936 * 896 + 896 + 24 * layer == 494_032_768
    assert round(c.non_embedding / 1e9, 2) == 0.36


def test_deepseek_v3_mtp_noted_and_router_bias() -> None:
    m = model_from_hf_config(load("deepseek-v3.json"), path="x/deepseek-v3.json")
    assert m.moe is not None and m.moe.router_bias
    assert any("num_nextn_predict_layers" in n for n in m.notes)


def test_deepseek_v2_lite_shape() -> None:
    """DeepSeek-V2-Lite (no q_lora_rank, first layer dense): 15.7B total per arXiv 2405.04434."""
    cfg = {
        "model_type": "deepseek_v2", "hidden_size": 2048, "num_hidden_layers": 27, "vocab_size": 102400,
        "intermediate_size": 10944, "num_attention_heads": 16, "num_key_value_heads": 16,
        "q_lora_rank": None, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
        "v_head_dim": 128, "n_routed_experts": 64, "n_shared_experts": 2, "num_experts_per_tok": 6,
        "moe_intermediate_size": 1408, "first_k_dense_replace": 1, "moe_layer_freq": 1,
        "max_position_embeddings": 163840, "tie_word_embeddings": False, "topk_method": "greedy",
    }
    m = model_from_hf_config(cfg, path="v2lite.json")
    c = count_params(m)
    assert m.attention.q_lora_rank is None and not m.moe.router_bias
    assert c.num_moe_layers == 26
    assert c.total / 1e9 == pytest.approx(15.7, rel=0.01)


def test_qwen2_moe_sparse_step_and_shared_expert() -> None:
    base = {
        "model_type": "qwen2_moe", "hidden_size": 8, "num_hidden_layers": 4, "vocab_size": 10,
        "intermediate_size": 12, "num_attention_heads": 2, "num_key_value_heads": 2,
        "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 2,
        "shared_expert_intermediate_size": 6, "decoder_sparse_step": 2, "max_position_embeddings": 64,
    }
    m = model_from_hf_config(base, path="toy.json")
    c = count_params(m)
    # HF places MoE where (i + 1) % 2 == 0: layers 1 and 3.
    assert [lp.is_moe for lp in c.layers] == [False, True, False, True]
    # Router 8x4 plus the shared-expert gate 8x1.
    assert c.layers[1].router == 8 * 4 + 8
    assert c.layers[1].shared_experts == 3 * 8 * 6
    assert c.layers[0].mlp_dense == 3 * 8 * 12


@pytest.mark.parametrize(
    ("mutate", "field", "words"),
    [
        (lambda d: d.pop("intermediate_size"), "intermediate_size", "missing key"),
        (lambda d: d.update(hidden_size="4096"), "hidden_size", "integer"),
        (lambda d: d.update(num_hidden_layers=0), "num_hidden_layers", "integer >= 1"),
        (lambda d: d.update(tie_word_embeddings="no"), "tie_word_embeddings", "true or false"),
        (lambda d: d.update(num_key_value_heads=5), "num_key_value_heads", "multiple"),
        (lambda d: d.update(attention_bias=True), "attention_bias", "not supported"),
        (lambda d: d.pop("model_type"), "model_type", "model_type"),
    ],
)
def test_bad_values_name_the_key(mutate, field: str, words: str) -> None:
    d = load("llama-3.1-8b.json")
    mutate(d)
    with pytest.raises(ProfileError) as e:
        model_from_hf_config(d, path="cfg.json")
    assert e.value.field == field and e.value.path == "cfg.json"
    assert words in str(e.value)


def test_unsupported_model_type_lists_supported() -> None:
    with pytest.raises(ProfileError, match="unsupported model_type 'gpt2'.*llama") as e:
        model_from_hf_config(load("unsupported-gpt2.json"), path="g.json")
    assert e.value.field == "model_type"


def test_missing_key_file_through_load_file() -> None:
    with pytest.raises(ProfileError, match="missing key 'intermediate_size'"):
        load_file("models", DATA / "missing-key.json")


def test_malformed_json_gives_line() -> None:
    with pytest.raises(ProfileError, match="malformed JSON") as e:
        load_file("models", DATA / "malformed.json")
    assert e.value.line is not None


def test_non_object_root() -> None:
    with pytest.raises(ProfileError, match="JSON object"):
        model_from_hf_config([1, 2], path="list.json")  # type: ignore[arg-type]


def test_top_k_above_experts() -> None:
    d = load("mixtral-8x7b.json")
    d["num_experts_per_tok"] = 9
    with pytest.raises(ProfileError) as e:
        model_from_hf_config(d, path="m.json")
    assert e.value.field == "num_experts_per_tok"


def test_names(tmp_path: Path) -> None:
    assert sanitize_name("Meta-Llama/Llama 3.1 8B!") == "meta-llama-llama-3.1-8b"
    assert sanitize_name("___") == "hf-model"
    # A config.json takes its model directory's name.
    d = tmp_path / "Mixtral-8x7B-Instruct-v0.1"
    d.mkdir()
    shutil.copy(DATA / "mixtral-8x7b.json", d / "config.json")
    assert load_file("models", d / "config.json").spec.name == "mixtral-8x7b-instruct-v0.1"
    # Otherwise _name_or_path's last component, else the file stem.
    assert default_name({"_name_or_path": "org/Qwen3-30B-A3B"}, "x/cfg.json") == "qwen3-30b-a3b"
    assert default_name({}, "x/My_Model.json") == "my_model"
    # An explicit name wins.
    m = model_from_hf_config(load("mixtral-8x7b.json"), path="m.json", name="My Mixtral")
    assert m.name == "my-mixtral"


def test_missing_max_position_uses_family_default() -> None:
    d = load("llama-3.1-8b.json")
    del d["max_position_embeddings"]
    m = model_from_hf_config(d, path="c.json")
    assert m.max_seq_len == 2048  # transformers LlamaConfig default
    assert any("max_position_embeddings" in n for n in m.notes)


def test_qwen3_30b_a3b_matches_model_card() -> None:
    """Qwen3-30B-A3B model card: 30.5B total, 3.3B activated."""
    m = model_from_hf_config(load("qwen3-30b-a3b.json"), path="q.json")
    c = count_params(m)
    assert c.total / 1e9 == pytest.approx(30.5, rel=0.01)
    assert c.active / 1e9 == pytest.approx(3.3, rel=0.02)  # "3.3B" has two significant figures
    # Hand: attention 2048x4096 x2 + 2048x512 x2 = 18,874,368; expert 3 x 2048 x 768 = 4,718,592;
    # router 2048 x 128; norms 2 x 2048 + 2 x 128 (q/k norm).
    layer = 18_874_368 + 128 * 4_718_592 + 2048 * 128 + 2 * 2048 + 2 * 128
    assert c.total == 2 * 151936 * 2048 + 2048 + 48 * layer


def test_mistral_7b() -> None:
    """Mistral-7B-v0.1: 7,241,732,096 parameters (HF safetensors metadata, "7.24B")."""
    cfg = {
        "model_type": "mistral", "hidden_size": 4096, "num_hidden_layers": 32, "vocab_size": 32000,
        "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8,
        "max_position_embeddings": 32768, "tie_word_embeddings": False, "sliding_window": 4096,
    }
    c = count_params(model_from_hf_config(cfg, path="mistral.json"))
    assert c.total == 2 * 32000 * 4096 + 4096 + 32 * (41_943_040 + 176_160_768 + 8192) == 7_241_732_096
