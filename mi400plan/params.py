"""Exact parameter counts, training FLOPs per token and KV-cache size of a ``ModelSpec``.

Counts are plain integers (numbers of parameters, no units). Every weight matrix and bias is
counted from the architecture; nothing is fitted to a published total. Conventions:

* GQA / MHA / MQA attention (Vaswani et al. 2017; Ainslie et al. 2023, arXiv 2305.13245):
  Q is ``hidden x heads*head_dim``, K and V are each ``hidden x kv_heads*head_dim``, O is
  ``heads*head_dim x hidden``. ``head_dim`` is explicit when the profile gives it (Qwen3: 128 with
  hidden 4096 and 64 heads), else ``hidden // heads``. ``qkv_bias`` adds Q/K/V biases (Qwen2);
  ``linear_bias`` adds them and the O bias (GPT-3). ``qk_norm`` adds two per-head norms of
  ``head_dim`` (Qwen3's q_norm and k_norm; counted under ``norms``).
* MLA (DeepSeek-V2, arXiv 2405.04434, section 2.1): q_a ``hidden x q_lora_rank`` + q_a_norm +
  q_b ``q_lora_rank x heads*(nope+rope)`` (without ``q_lora_rank``: one ``hidden x heads*(nope+rope)``),
  kv_a ``hidden x (kv_lora_rank + rope)`` + kv_a_norm, kv_b ``kv_lora_rank x heads*(nope+v)``,
  o ``heads*v x hidden``. The two internal norms are counted under ``norms``.
* FFN: SwiGLU (Shazeer 2020, arXiv 2002.05202) has gate, up and down matrices (3 x hidden x ffn);
  GELU (GPT-2/3) has 2. With ``linear_bias`` each projection has a bias.
* MoE: a routed expert and a shared expert are each a SwiGLU/GELU FFN of their own width; the router
  is ``hidden x num_experts`` (+ ``num_experts`` bias when ``router_bias``; + ``hidden`` for Qwen2-MoE's
  ``shared_expert_gate``). Layer placement follows
  ``ModelSpec.is_moe_layer``.
* Norms: RMSNorm has a weight of its width, LayerNorm a weight and a bias. Each layer has two
  (pre-attention, pre-FFN) plus MLA/QK norms; one final norm.
* Embedding: ``vocab x hidden`` (+ ``max_seq_len x hidden`` for learned positions). The output head is
  another ``vocab x hidden`` unless ``tie_embeddings``.
* Not counted: rotary tables and other non-trained buffers, and DeepSeek-V3's multi-token-prediction
  (MTP) module. DeepSeek's "671B total / 37B activated" excludes MTP (the released checkpoint is 685B
  with its 14B MTP weights, per the model card); the planner follows the published total.

``active`` is what one token touches: every parameter except the routed experts, plus ``top_k`` routed
experts in each MoE layer. It includes the embedding table and output head, as Mistral's "12.9B
active" for Mixtral 8x7B does.
"""

from __future__ import annotations


from mi400plan.records import record
from mi400plan.specs.model import ModelSpec


@record
class LayerParams:
    """Parameters of ONE transformer layer, grouped by how parallelism splits them."""

    attention: int  # Q/K/V/O (or MLA) projection weights + biases; split by TP
    mlp_dense: int  # dense FFN (0 in an MoE layer); split by TP
    shared_experts: int  # all shared experts of an MoE layer; split by TP
    routed_experts: int  # ALL routed experts of the layer; split by EP (and expert-TP)
    router: int  # router weights (+ bias); replicated
    norms: int  # norm weights (+ biases), incl. MLA's internal and Qwen3's q/k norms; replicated
    is_moe: bool
    # Parts of ``attention`` that TP does not split evenly (both already included in ``attention``):
    # GQA K and V projections (weights + biases), held ``/min(tp, kv_heads)`` per rank because a KV
    # head cannot be split (vLLM's QKVParallelLinear replicates it when tp > kv_heads);
    attn_kv: int = 0
    # MLA down-projections q_a and kv_a (weights + biases), replicated on every TP rank
    # (Megatron-Core builds linear_q_down_proj / linear_kv_down_proj with parallel_mode="duplicated";
    # vLLM uses ReplicatedLinear for them).
    attn_replicated: int = 0

    @property
    def total(self) -> int:
        return (
            self.attention
            + self.mlp_dense
            + self.shared_experts
            + self.routed_experts
            + self.router
            + self.norms
        )

    @property
    def dense_part(self) -> int:
        """Everything except the routed experts (what every token of the layer uses)."""
        return self.total - self.routed_experts


@record
class ParamCounts:
    """Whole-model parameter counts (numbers of parameters)."""

    embedding: int  # token embedding (+ learned position embedding); vocab-parallel over TP
    output_head: int  # LM head; 0 when tied to the embedding
    final_norm: int
    layers: tuple[LayerParams, ...]  # len == num_layers, in order
    routed_expert_params: int  # params of ONE routed expert (0 for a dense model)
    total: int
    active: int  # per token: all but routed experts, plus top_k routed experts per MoE layer

    @property
    def num_moe_layers(self) -> int:
        return sum(1 for layer in self.layers if layer.is_moe)

    @property
    def non_embedding(self) -> int:
        """Total minus the embedding table(s) and output head (Kaplan et al. 2020's N)."""
        return self.total - self.embedding - self.output_head


# --- building blocks (each returns (matmul weights, biases)) ---------------------------------------


def _ffn(model: ModelSpec, width: int) -> tuple[int, int]:
    """One FFN (dense, routed or shared expert) of intermediate ``width``: (weights, biases)."""
    h = model.hidden_size
    if model.ffn_kind == "swiglu":
        weights = 3 * h * width
        biases = (2 * width + h) if model.linear_bias else 0
    else:  # gelu: up (h x 4h) and down (4h x h)
        weights = 2 * h * width
        biases = (width + h) if model.linear_bias else 0
    return weights, biases


def _norm(model: ModelSpec, width: int) -> int:
    return 2 * width if model.norm == "layernorm" else width


def _attention(model: ModelSpec) -> tuple[int, int, int, int, int]:
    """Attention block of one layer: (matmul weights, biases, internal norm params, K/V projection
    weights + biases (GQA), TP-replicated down-projection weights + biases (MLA))."""
    a = model.attention
    h = model.hidden_size
    nh = a.num_heads
    if a.kind == "mla":
        assert a.kv_lora_rank and a.qk_nope_head_dim and a.qk_rope_head_dim and a.v_head_dim
        qk = a.qk_nope_head_dim + a.qk_rope_head_dim
        outs: list[tuple[int, int]] = []  # (in, out) of each projection
        norms = 0
        down: list[tuple[int, int]] = []  # q_a and kv_a: not split by TP
        if a.q_lora_rank:
            down.append((h, a.q_lora_rank))
            outs.append((a.q_lora_rank, nh * qk))
            norms += _norm(model, a.q_lora_rank)
        else:
            outs.append((h, nh * qk))
        down.append((h, a.kv_lora_rank + a.qk_rope_head_dim))
        norms += _norm(model, a.kv_lora_rank)
        outs.append((a.kv_lora_rank, nh * (a.qk_nope_head_dim + a.v_head_dim)))
        outs.append((nh * a.v_head_dim, h))
        outs += down
        weights = sum(i * o for i, o in outs)
        biases = sum(o for _, o in outs) if model.linear_bias else 0
        replicated = sum(i * o + (o if model.linear_bias else 0) for i, o in down)
        return weights, biases, norms, 0, replicated
    d = a.head_size(h)
    q, kv = nh * d, a.kv_heads * d
    weights = h * q + 2 * h * kv + q * h
    biases = 0
    kv_part = 2 * h * kv
    if a.qkv_bias or model.linear_bias:
        biases += q + 2 * kv
        kv_part += 2 * kv
    if model.linear_bias:
        biases += h
    norms = 2 * _norm(model, d) if a.qk_norm else 0
    return weights, biases, norms, kv_part, 0


def _layer(model: ModelSpec, index: int) -> tuple[LayerParams, int]:
    """One layer's parameters and its per-token active matmul weights."""
    h = model.hidden_size
    attn_w, attn_b, attn_norms, attn_kv, attn_rep = _attention(model)
    norms = 2 * _norm(model, h) + attn_norms
    m = model.moe
    if m is None or not model.is_moe_layer(index):
        w, b = _ffn(model, model.ffn_dim)
        lp = LayerParams(attn_w + attn_b, w + b, 0, 0, 0, norms, False, attn_kv=attn_kv, attn_replicated=attn_rep)
        return lp, attn_w + w
    ew, eb = _ffn(model, m.expert_ffn_dim)
    sw, sb = _ffn(model, m.shared_expert_ffn_dim or m.expert_ffn_dim)
    router_w = h * m.num_experts
    router_b = m.num_experts if m.router_bias else 0
    if m.shared_expert_gate:
        router_w += h
    lp = LayerParams(
        attention=attn_w + attn_b,
        mlp_dense=0,
        shared_experts=m.num_shared_experts * (sw + sb),
        routed_experts=m.num_experts * (ew + eb),
        router=router_w + router_b,
        norms=norms,
        is_moe=True,
        attn_kv=attn_kv,
        attn_replicated=attn_rep,
    )
    return lp, attn_w + m.num_shared_experts * sw + m.top_k * ew + router_w


def _routed_expert(model: ModelSpec) -> int:
    if model.moe is None:
        return 0
    w, b = _ffn(model, model.moe.expert_ffn_dim)
    return w + b


def count_params(model: ModelSpec) -> ParamCounts:
    """Exact parameter counts of ``model`` (see the module docstring for what is counted)."""
    h, v = model.hidden_size, model.vocab_size
    embedding = v * h
    if model.position_embedding == "learned":
        embedding += model.max_seq_len * h
    head = 0 if model.tie_embeddings else v * h
    final_norm = _norm(model, h)
    layers = tuple(_layer(model, i)[0] for i in range(model.num_layers))
    expert = _routed_expert(model)
    total = embedding + head + final_norm + sum(lp.total for lp in layers)
    top_k = model.moe.top_k if model.moe else 0
    active = embedding + head + final_norm + sum(
        lp.dense_part + (top_k * expert if lp.is_moe else 0) for lp in layers
    )
    return ParamCounts(
        embedding=embedding,
        output_head=head,
        final_norm=final_norm,
        layers=layers,
        routed_expert_params=expert,
        total=total,
        active=active,
    )


def matmul_params_per_token(model: ModelSpec) -> int:
    """Weights one token is multiplied by: active layer matrices + router + LM head.

    Excludes the embedding lookup (a gather, no FLOPs), norms and biases (elementwise). The LM head
    counts even when tied to the embedding, because the output projection is a real matmul.
    """
    layers = sum(_layer(model, i)[1] for i in range(model.num_layers))
    return layers + model.vocab_size * model.hidden_size


def attention_flops_per_token(model: ModelSpec, seq_len: int) -> float:
    """Forward attention score + context FLOPs per token, all layers (FLOP).

    Per layer: Q.K^T is 2 x s x (heads x qk_head_dim) and attention-weights x V is
    2 x s x (heads x v_head_dim) (one multiply-add = 2 FLOP) for a context of ``s = seq_len``.
    Causal masking is NOT halved, following the Megatron-LM (Narayanan et al. 2021, eq. 3) and PaLM
    (Chowdhery et al. 2022, appendix B) MFU convention; GQA/MLA do not change it (every query head
    still attends over the full context). GQA: 4 x s x heads x head_dim per layer.
    """
    if seq_len <= 0:
        raise ValueError("seq_len must be positive")
    a = model.attention
    if a.kind == "mla":
        assert a.qk_nope_head_dim and a.qk_rope_head_dim and a.v_head_dim
        qk, vd = a.qk_nope_head_dim + a.qk_rope_head_dim, a.v_head_dim
    else:
        qk = vd = a.head_size(model.hidden_size)
    per_layer = 2.0 * seq_len * a.num_heads * qk + 2.0 * seq_len * a.num_heads * vd
    return per_layer * model.num_layers


def mla_up_projection_widths(model: ModelSpec) -> tuple[int, int, int, int]:
    """MLA's up-projections as (q_lora, q_out, kv_lora, kv_out): ``q_lora -> heads x (nope + rope)``
    and ``kv_lora -> heads x (nope + v)`` (DeepSeek-V2, arXiv 2405.04434, section 2.1); zeros for a
    model without MLA (or without a query latent)."""
    a = model.attention
    if a.kind != "mla":
        return 0, 0, 0, 0
    nope, rope, v = a.qk_nope_head_dim or 0, a.qk_rope_head_dim or 0, a.v_head_dim or 0
    q_lora = a.q_lora_rank or 0
    return q_lora, (a.num_heads * (nope + rope) if q_lora else 0), a.kv_lora_rank or 0, a.num_heads * (nope + v)


def selective_recompute_flops_per_token(model: ModelSpec, seq_len: int, modules: tuple[str, ...]) -> float:
    """Forward FLOPs per token (all layers) that selective recomputation of ``modules`` runs again
    (Megatron-Core ``recompute_modules``; ``specs.layout.RECOMPUTE_MODULES``): "core_attn" the
    attention scores and context (:func:`attention_flops_per_token`); "mla_up_proj" MLA's
    up-projections; "mlp" the dense layers' FFN; "moe" the routed experts a token visits (top-k) and
    the shared experts; "shared_experts" the shared experts; 2 FLOP a weight. "moe_act" and
    "layernorm" re-run elementwise work only (no FLOPs counted)."""
    h = model.hidden_size
    mult = 3 if model.ffn_kind == "swiglu" else 2
    moe = model.moe
    n_moe = sum(1 for i in range(model.num_layers) if model.is_moe_layer(i)) if moe else 0
    flops = attention_flops_per_token(model, seq_len) if "core_attn" in modules else 0.0
    if "mla_up_proj" in modules:
        q_lora, q_out, kv_lora, kv_out = mla_up_projection_widths(model)
        flops += 2.0 * model.num_layers * (q_lora * q_out + kv_lora * kv_out)
    if "mlp" in modules:
        flops += 2.0 * (model.num_layers - n_moe) * mult * h * model.ffn_dim
    if moe is not None:
        shared = moe.num_shared_experts * (moe.shared_expert_ffn_dim or moe.expert_ffn_dim)
        if "moe" in modules:
            flops += 2.0 * n_moe * mult * h * (moe.top_k * moe.expert_ffn_dim + shared)
        elif "shared_experts" in modules:
            flops += 2.0 * n_moe * mult * h * shared
    return flops


def model_flops_per_token(model: ModelSpec, seq_len: int) -> float:
    """Training model FLOPs per token, forward + backward (FLOP), as used for MFU.

    ``6 x N_matmul + 3 x attention_flops_per_token``: forward is 2 FLOP per matmul weight per token
    (Kaplan et al. 2020, arXiv 2001.08361, section 2.1) and backward twice the forward, hence 6; the
    attention term is 3 x the forward score/context FLOPs, i.e. 12 x L x s x heads x head_dim for GQA
    (PaLM appendix B's 6N + 12LHQT). ``N_matmul`` is ``matmul_params_per_token`` (active weights incl.
    the LM head, excluding the embedding lookup, norms and biases). No activation recomputation is
    included: that is hardware FLOPs, not model FLOPs.
    """
    return 6.0 * matmul_params_per_token(model) + 3.0 * attention_flops_per_token(model, seq_len)


def kv_cache_bytes_per_token(model: ModelSpec, bytes_per_element: float) -> float:
    """KV-cache bytes per token of context for the whole model (all layers), in bytes.

    GQA: 2 (K and V) x kv_heads x head_dim x layers x bytes_per_element. MLA (DeepSeek-V2,
    arXiv 2405.04434, section 2.1.2) caches only the compressed latent and the shared RoPE key:
    (kv_lora_rank + qk_rope_head_dim) x layers x bytes_per_element.
    """
    a = model.attention
    if a.kind == "mla":
        assert a.kv_lora_rank and a.qk_rope_head_dim
        per_layer = a.kv_lora_rank + a.qk_rope_head_dim
    else:
        per_layer = 2 * a.kv_heads * a.head_size(model.hidden_size)
    return float(per_layer * model.num_layers) * bytes_per_element
