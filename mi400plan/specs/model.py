"""LLM architecture spec (the model being planned; "model" never means a pydantic model here).

Fields follow the Hugging Face ``config.json`` vocabulary where one exists, so a config converts
one-to-one. Counts are plain integers (no units). Parameter counting lives in ``params.py``.
"""

from typing import Literal

from pydantic import Field, model_validator

from mi400plan.specs.common import ND, Est, ProfileBase, StrictModel


class Attention(StrictModel):
    """Attention block. ``kind = "gqa"`` covers MHA (kv_heads == heads), GQA and MQA.

    ``kind = "mla"`` is DeepSeek's multi-head latent attention (DeepSeek-V2, arXiv 2405.04434):
    queries through an optional low-rank ``q_lora_rank``, keys/values through a compressed latent of
    ``kv_lora_rank`` plus a shared decoupled RoPE key of ``qk_rope_head_dim``.
    """

    kind: Literal["gqa", "mla"] = "gqa"
    num_heads: int = Field(gt=0, le=2**16)
    num_kv_heads: int | None = Field(default=None, gt=0, le=2**16)  # None: = num_heads (MHA); MLA: unused
    head_dim: int | None = Field(default=None, gt=0, le=2**14)  # None: hidden_size // num_heads
    qkv_bias: bool = False  # biases on the Q/K/V projections only (Qwen2); linear_bias implies it
    # Per-head RMSNorm (weight of head_dim, shared by all heads) on queries and keys: Qwen3, OLMo-2 style.
    qk_norm: bool = False
    # MLA only
    q_lora_rank: int | None = Field(default=None, gt=0, le=2**20)
    kv_lora_rank: int | None = Field(default=None, gt=0, le=2**20)
    qk_nope_head_dim: int | None = Field(default=None, gt=0, le=2**14)
    qk_rope_head_dim: int | None = Field(default=None, gt=0, le=2**14)
    v_head_dim: int | None = Field(default=None, gt=0, le=2**14)

    @model_validator(mode="after")
    def _check(self) -> "Attention":
        if self.kind == "mla":
            for f in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
                if getattr(self, f) is None:
                    raise ValueError(f"MLA attention needs {f}")
            if self.num_kv_heads is not None and self.num_kv_heads != self.num_heads:
                raise ValueError("MLA attention has no separate key/value heads; leave num_kv_heads unset")
        else:
            kv = self.num_kv_heads or self.num_heads
            if self.num_heads % kv:
                raise ValueError(f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads ({kv})")
        return self

    @property
    def kv_heads(self) -> int:
        return self.num_kv_heads or self.num_heads

    def head_size(self, hidden_size: int) -> int:
        """Per-head query/key width of a GQA block: explicit ``head_dim`` or hidden_size // num_heads."""
        return self.head_dim or hidden_size // self.num_heads


class MoE(StrictModel):
    """Mixture-of-experts FFN (GShard / Switch / DeepSeekMoE vocabulary)."""

    num_experts: int = Field(gt=0, le=2**16)  # routed experts per MoE layer
    top_k: int = Field(gt=0, le=2**10)  # routed experts per token
    expert_ffn_dim: int = Field(gt=0, le=2**22)  # intermediate size of one routed expert
    num_shared_experts: int = Field(default=0, ge=0, le=2**10)
    shared_expert_ffn_dim: int | None = Field(default=None, gt=0, le=2**22)  # per shared expert; None: expert_ffn_dim
    first_k_dense: int = Field(default=0, ge=0, le=2**14)  # leading layers with a dense FFN (DeepSeek-V3: 3)
    layer_freq: int = Field(default=1, gt=0, le=2**14)  # every n-th layer (after first_k_dense) is MoE
    # A per-expert bias on the router scores. DeepSeek-V3's ``e_score_correction_bias`` (one value per
    # routed expert, adjusted by the auxiliary-loss-free balancing rule rather than by gradients) is
    # stored in the checkpoint; profiles set router_bias = true for it and it is counted as a router
    # parameter (num_experts values per MoE layer).
    router_bias: bool = False
    # Qwen2-MoE's sigmoid gate on the shared-expert output: a hidden x 1 weight per MoE layer,
    # counted with the router.
    shared_expert_gate: bool = False

    @model_validator(mode="after")
    def _check(self) -> "MoE":
        if self.top_k > self.num_experts:
            raise ValueError(f"top_k ({self.top_k}) cannot exceed num_experts ({self.num_experts})")
        return self


class ModelSpec(ProfileBase):
    family: str | None = None
    hidden_size: int = Field(gt=0, le=2**20)
    num_layers: int = Field(gt=0, le=2**14)
    vocab_size: int = Field(gt=0, le=2**24)
    ffn_dim: int = Field(gt=0, le=2**22)  # intermediate size of the dense FFN
    ffn_kind: Literal["swiglu", "gelu"] = "swiglu"  # swiglu: 3 matrices; gelu: 2
    linear_bias: bool = False  # biases on attention and MLP projections (GPT-3: yes)
    norm: Literal["rmsnorm", "layernorm"] = "rmsnorm"
    tie_embeddings: bool = False
    position_embedding: Literal["rope", "learned"] = "rope"
    max_seq_len: int = Field(default=8192, gt=0, le=2**27)
    attention: Attention
    moe: MoE | None = None
    # Published counts, for checking the architecture arithmetic (billions of parameters).
    published_params_total_billion: Est = ND
    published_params_active_billion: Est = ND

    @model_validator(mode="after")
    def _check_model(self) -> "ModelSpec":
        if self.moe is not None and self.moe.first_k_dense >= self.num_layers:
            raise ValueError(
                f"moe.first_k_dense ({self.moe.first_k_dense}) must be smaller than num_layers ({self.num_layers})"
            )
        if self.attention.kind == "gqa" and self.attention.head_dim is None:
            if self.hidden_size % self.attention.num_heads:
                raise ValueError(
                    f"hidden_size ({self.hidden_size}) is not a multiple of attention.num_heads "
                    f"({self.attention.num_heads}); give attention.head_dim explicitly"
                )
        return self

    @property
    def is_moe(self) -> bool:
        return self.moe is not None

    @property
    def head_dim(self) -> int:
        """Per-head query/key width (GQA: head_dim; MLA: qk_nope_head_dim + qk_rope_head_dim)."""
        a = self.attention
        if a.kind == "mla":
            assert a.qk_nope_head_dim is not None and a.qk_rope_head_dim is not None
            return a.qk_nope_head_dim + a.qk_rope_head_dim
        return a.head_size(self.hidden_size)

    def is_moe_layer(self, index: int) -> bool:
        """Whether layer ``index`` (0-based) has an MoE FFN.

        Layers ``[0, first_k_dense)`` are dense; from ``first_k_dense`` on, every ``layer_freq``-th layer
        is MoE, starting with layer ``first_k_dense`` itself. (Hugging Face's Qwen2-MoE
        ``decoder_sparse_step = s`` maps to first_k_dense = s - 1, layer_freq = s; DeepSeek's
        ``first_k_dense_replace = k, moe_layer_freq = f`` maps to first_k_dense = ceil(k / f) * f.)
        """
        m = self.moe
        if m is None or index < m.first_k_dense:
            return False
        return (index - m.first_k_dense) % m.layer_freq == 0
