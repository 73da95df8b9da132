"""Build a ``ModelSpec`` from a Hugging Face ``config.json`` (already parsed into a dict).

Supported ``model_type`` values and the keys read (names as in the ``transformers`` configuration
classes of each family):

* ``llama``, ``mistral``, ``qwen2``, ``qwen3`` (dense): hidden_size, num_hidden_layers,
  num_attention_heads, num_key_value_heads, head_dim, intermediate_size, vocab_size,
  max_position_embeddings, tie_word_embeddings, attention_bias / mlp_bias (llama).
  Qwen2 always has Q/K/V biases; Qwen3 always has per-head q_norm / k_norm.
* ``mixtral``: num_local_experts, num_experts_per_tok; every layer is MoE with experts of
  intermediate_size.
* ``qwen2_moe``, ``qwen3_moe``: num_experts, num_experts_per_tok, moe_intermediate_size,
  decoder_sparse_step, mlp_only_layers (must be empty), shared_expert_intermediate_size (qwen2_moe:
  one shared expert with a sigmoid gate).
* ``deepseek_v2``, ``deepseek_v3``: MLA (q_lora_rank, kv_lora_rank, qk_nope_head_dim,
  qk_rope_head_dim, v_head_dim) and DeepSeekMoE (n_routed_experts, num_experts_per_tok,
  moe_intermediate_size, n_shared_experts, first_k_dense_replace, moe_layer_freq). DeepSeek-V3's
  ``topk_method = "noaux_tc"`` router carries ``e_score_correction_bias`` (router_bias). Multi-token
  prediction layers (num_nextn_predict_layers) are not counted; see ``mi400plan.params``.

A missing required key, a value of the wrong type or an unsupported architecture raises
``ProfileError`` naming the file and the key, never ``KeyError``. Defaults for optional keys are the
defaults of the ``transformers`` configuration class of that family.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mi400plan.errors import ProfileError
from mi400plan.specs.model import ModelSpec
from mi400plan.validation import validation_error

SUPPORTED = (
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "qwen2_moe",
    "qwen3",
    "qwen3_moe",
    "deepseek_v2",
    "deepseek_v3",
)

# Default max_position_embeddings of each transformers configuration class, used when a config omits it.
_DEFAULT_MAX_POS = {
    "llama": 2048,
    "mistral": 4096 * 32,
    "mixtral": 4096 * 32,
    "qwen2": 32768,
    "qwen2_moe": 32768,
    "qwen3": 32768,
    "qwen3_moe": 32768,
    "deepseek_v2": 2048,
    "deepseek_v3": 4096,
}


# Plausible upper bounds of config integers (the model profile's bounds, specs/model.py): a value past
# them is a typo or an attack, refused naming the key before any loop runs over it.
_HF_MAX: dict[str, int] = {
    "num_attention_heads": 2**16, "num_key_value_heads": 2**16, "head_dim": 2**14, "hidden_size": 2**20,
    "num_hidden_layers": 2**14, "vocab_size": 2**24, "intermediate_size": 2**22, "moe_intermediate_size": 2**22,
    "shared_expert_intermediate_size": 2**22, "num_experts": 2**16, "num_local_experts": 2**16,
    "n_routed_experts": 2**16, "num_experts_per_tok": 2**10, "n_shared_experts": 2**10,
    "max_position_embeddings": 2**27, "kv_lora_rank": 2**20, "q_lora_rank": 2**20, "qk_nope_head_dim": 2**14,
    "qk_rope_head_dim": 2**14, "v_head_dim": 2**14, "first_k_dense_replace": 2**14, "moe_layer_freq": 2**14,
    "decoder_sparse_step": 2**14, "num_nextn_predict_layers": 2**10,
}
_HF_MAX_DEFAULT = 2**31


class _Reader:
    """Typed access to config keys with errors that name the file and key."""

    def __init__(self, data: dict[str, Any], path: str, model_type: str) -> None:
        self.data = data
        self.path = path
        self.model_type = model_type
        self.notes: list[str] = []

    def _fail(self, key: str, msg: str) -> ProfileError:
        return ProfileError(msg, path=self.path, field=key)

    def req_int(self, key: str, *, min_value: int = 1) -> int:
        if key not in self.data or self.data[key] is None:
            raise self._fail(
                key,
                f"missing key {key!r}: a {self.model_type} config needs it as an integer >= {min_value}",
            )
        return self._check_int(key, self.data[key], min_value)

    def opt_int(self, key: str, default: int | None, *, min_value: int = 1) -> int | None:
        v = self.data.get(key)
        if v is None:
            return default
        return self._check_int(key, v, min_value)

    def _check_int(self, key: str, v: Any, min_value: int) -> int:
        if isinstance(v, bool) or not isinstance(v, int):
            if isinstance(v, float) and v.is_integer():
                v = int(v)
            else:
                raise self._fail(key, f"expected an integer >= {min_value}, got {v!r}")
        if v < min_value:
            raise self._fail(key, f"expected an integer >= {min_value}, got {v!r}")
        top = _HF_MAX.get(key, _HF_MAX_DEFAULT)
        if v > top:
            raise self._fail(key, f"expected an integer from {min_value} to {top:,}, got {v!r} (not a plausible model)")
        return int(v)

    def opt_bool(self, key: str, default: bool) -> bool:
        v = self.data.get(key)
        if v is None:
            return default
        if not isinstance(v, bool):
            raise self._fail(key, f"expected true or false, got {v!r}")
        return v

    def int_list(self, key: str) -> list[int]:
        v = self.data.get(key)
        if v is None:
            return []
        if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            raise self._fail(key, f"expected a list of layer indices, got {str(v)[:60]!r}")
        if len(v) > 2**14 or any(not 0 <= x < 2**14 for x in v):
            raise self._fail(key, "expected layer indices from 0 to 16,383, at most 16,384 of them")
        return list(v)


def sanitize_name(raw: str) -> str:
    """A catalog-safe profile name: lowercase, ``[a-z0-9._-]``, starting with a letter or digit."""
    s = re.sub(r"[^a-z0-9._-]+", "-", raw.strip().lower())
    s = re.sub(r"-{2,}", "-", s).lstrip("._-").rstrip("-")
    return s or "hf-model"


def default_name(data: dict[str, Any], path: str) -> str:
    """``.../<model dir>/config.json`` -> the directory name; else ``_name_or_path``; else the file stem."""
    p = Path(path)
    if p.name.lower() == "config.json" and p.parent.name not in ("", ".", ".."):
        return sanitize_name(p.parent.name)
    nop = data.get("_name_or_path")
    if isinstance(nop, str) and nop.strip().strip("/"):
        return sanitize_name(nop.strip().rstrip("/").split("/")[-1])
    return sanitize_name(p.stem)


def _attention_biases(r: _Reader) -> tuple[bool, bool]:
    """(qkv_bias, linear_bias) for the llama-style ``attention_bias`` / ``mlp_bias`` keys."""
    attn = r.opt_bool("attention_bias", False)
    mlp = r.opt_bool("mlp_bias", False)
    if attn and mlp:
        return False, True
    if attn or mlp:
        key = "attention_bias" if attn else "mlp_bias"
        raise r._fail(
            key,
            "biases on only the attention or only the MLP projections are not supported; "
            "the planner models either Q/K/V biases (qkv_bias) or biases on every projection (linear_bias)",
        )
    return False, False


def _gqa(r: _Reader, hidden: int, *, qk_norm: bool, qkv_bias: bool) -> dict[str, Any]:
    heads = r.req_int("num_attention_heads")
    kv = r.opt_int("num_key_value_heads", heads)
    assert kv is not None
    if heads % kv:
        raise r._fail("num_key_value_heads", f"num_attention_heads ({heads}) must be a multiple of it ({kv})")
    head_dim = r.opt_int("head_dim", None)
    if head_dim is None and hidden % heads:
        raise r._fail("head_dim", f"hidden_size ({hidden}) is not a multiple of num_attention_heads ({heads}) "
                      "and no head_dim is given")
    return {
        "kind": "gqa",
        "num_heads": heads,
        "num_kv_heads": kv,
        "head_dim": head_dim or hidden // heads,
        "qkv_bias": qkv_bias,
        "qk_norm": qk_norm,
    }


def _qwen_moe(r: _Reader, num_layers: int, *, shared: bool) -> dict[str, Any] | None:
    n = r.opt_int("num_experts", 0, min_value=0) or 0
    if n == 0:
        return None
    if r.int_list("mlp_only_layers"):
        raise r._fail("mlp_only_layers", "a dense-layer list is not supported; only decoder_sparse_step placement is")
    step = r.opt_int("decoder_sparse_step", 1)
    assert step is not None
    if step - 1 >= num_layers:
        return None  # (layer + 1) % step == 0 never holds: no MoE layer
    moe: dict[str, Any] = {
        "num_experts": n,
        "top_k": r.req_int("num_experts_per_tok"),
        "expert_ffn_dim": r.req_int("moe_intermediate_size"),
        "first_k_dense": step - 1,  # HF: layer i is MoE when (i + 1) % step == 0
        "layer_freq": step,
    }
    if shared:
        width = r.opt_int("shared_expert_intermediate_size", 0, min_value=0)
        if width:
            moe.update(num_shared_experts=1, shared_expert_ffn_dim=width, shared_expert_gate=True)
    return moe


def _deepseek(r: _Reader, hidden: int, num_layers: int) -> tuple[dict[str, Any], dict[str, Any] | None]:
    if r.opt_bool("attention_bias", False):
        raise r._fail("attention_bias", "MLA with projection biases is not supported")
    heads = r.req_int("num_attention_heads")
    attention = {
        "kind": "mla",
        "num_heads": heads,
        "q_lora_rank": r.opt_int("q_lora_rank", None),
        "kv_lora_rank": r.req_int("kv_lora_rank"),
        "qk_nope_head_dim": r.req_int("qk_nope_head_dim"),
        "qk_rope_head_dim": r.req_int("qk_rope_head_dim"),
        "v_head_dim": r.req_int("v_head_dim"),
    }
    mtp = r.opt_int("num_nextn_predict_layers", 0, min_value=0)
    if mtp:
        r.notes.append(
            f"num_nextn_predict_layers = {mtp}: multi-token-prediction layers are not counted "
            "(as in DeepSeek's published totals)"
        )
    n = r.opt_int("n_routed_experts", None)
    if n is None:
        return attention, None
    freq = r.opt_int("moe_layer_freq", 1)
    k = r.opt_int("first_k_dense_replace", 0, min_value=0)
    assert freq is not None and k is not None
    # HF: layer i is MoE when i >= first_k_dense_replace and i % moe_layer_freq == 0.
    first = math.ceil(k / freq) * freq
    if first >= num_layers:
        return attention, None
    moe = {
        "num_experts": n,
        "top_k": r.req_int("num_experts_per_tok"),
        "expert_ffn_dim": r.req_int("moe_intermediate_size"),
        "num_shared_experts": r.opt_int("n_shared_experts", 0, min_value=0),
        "first_k_dense": first,
        "layer_freq": freq,
        "router_bias": r.data.get("topk_method") == "noaux_tc",
    }
    return attention, moe


def model_from_hf_config(data: dict[str, Any], *, path: str, name: str | None = None) -> ModelSpec:
    """Convert a parsed Hugging Face ``config.json`` into a ``ModelSpec`` (see the module docstring)."""
    if not isinstance(data, dict):
        raise ProfileError("expected a JSON object (a Hugging Face config.json)", path=path)
    mt = data.get("model_type")
    if not isinstance(mt, str) or not mt:
        raise ProfileError(
            "missing 'model_type': expected a Hugging Face config.json with one of " + ", ".join(SUPPORTED),
            path=path,
            field="model_type",
        )
    if mt not in SUPPORTED:
        raise ProfileError(
            f"unsupported model_type {mt!r}; supported: {', '.join(SUPPORTED)}",
            path=path,
            field="model_type",
            hint="write a model profile in TOML instead (see profiles/models/ for examples)",
        )
    r = _Reader(data, path, mt)
    hidden = r.req_int("hidden_size")
    num_layers = r.req_int("num_hidden_layers")
    vocab = r.req_int("vocab_size")
    moe: dict[str, Any] | None = None
    linear_bias = False
    if mt in ("llama", "mistral", "qwen3"):
        qkv_bias, linear_bias = _attention_biases(r)
        attention = _gqa(r, hidden, qk_norm=(mt == "qwen3"), qkv_bias=qkv_bias)
        ffn = r.req_int("intermediate_size")
    elif mt == "qwen2":
        attention = _gqa(r, hidden, qk_norm=False, qkv_bias=True)
        ffn = r.req_int("intermediate_size")
    elif mt == "mixtral":
        attention = _gqa(r, hidden, qk_norm=False, qkv_bias=False)
        ffn = r.req_int("intermediate_size")
        moe = {"num_experts": r.req_int("num_local_experts"), "top_k": r.req_int("num_experts_per_tok"),
               "expert_ffn_dim": ffn}
    elif mt in ("qwen2_moe", "qwen3_moe"):
        if mt == "qwen3_moe":
            qkv_bias, linear_bias = _attention_biases(r)
        else:
            qkv_bias = True
        attention = _gqa(r, hidden, qk_norm=(mt == "qwen3_moe"), qkv_bias=qkv_bias)
        moe = _qwen_moe(r, num_layers, shared=(mt == "qwen2_moe"))
        all_moe = moe is not None and moe["first_k_dense"] == 0 and moe["layer_freq"] == 1
        if all_moe and r.data.get("intermediate_size") is None:
            assert moe is not None
            ffn = moe["expert_ffn_dim"]  # no dense layer: the dense width is never used
        else:
            ffn = r.req_int("intermediate_size")
    else:  # deepseek_v2, deepseek_v3
        attention, moe = _deepseek(r, hidden, num_layers)
        ffn = r.req_int("intermediate_size")
    if moe is not None and moe["top_k"] > moe["num_experts"]:
        raise r._fail("num_experts_per_tok", f"{moe['top_k']} exceeds the number of experts ({moe['num_experts']})")

    max_pos = r.opt_int("max_position_embeddings", None)
    if max_pos is None:
        max_pos = _DEFAULT_MAX_POS[mt]
        r.notes.append(f"max_position_embeddings not given; using the {mt} default {max_pos}")
    model_name = sanitize_name(name) if name else default_name(data, path)
    nop = data.get("_name_or_path")
    display = nop if isinstance(nop, str) and nop.strip() else model_name
    raw: dict[str, Any] = {
        "name": model_name,
        "display_name": display,
        "family": mt,
        "description": f"Built from Hugging Face config {path} (model_type {mt}).",
        "sources": {"HF": path},
        "notes": r.notes,
        "hidden_size": hidden,
        "num_layers": num_layers,
        "vocab_size": vocab,
        "ffn_dim": ffn,
        "ffn_kind": "swiglu",  # every supported family uses a gated (3-matrix) MLP
        "linear_bias": linear_bias,
        "norm": "rmsnorm",
        "tie_embeddings": r.opt_bool("tie_word_embeddings", False),
        "position_embedding": "rope",
        "max_seq_len": max_pos,
        "attention": attention,
        "moe": moe,
    }
    try:
        return ModelSpec.model_validate(raw)
    except ValidationError as exc:
        raise validation_error(path, "", exc) from None
