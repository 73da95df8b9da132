"""Inference serving model behind ``mi400plan serve``: decode and prefill times, continuous batching,
KV-limited concurrency, and the vectorized layout x concurrency search.

Every candidate is one serving replica layout (TP, EP, attention data parallelism, PP) at one
concurrency ``B`` (sequences in flight per replica), held in numpy arrays. Units: seconds, bytes,
FLOP, tokens.

Sources and model
-----------------
* Weights and KV bytes: ``params`` (parameter counts, ``kv_cache_bytes_per_token``: GQA heads, MLA
  latent) and ``specs.layout.InferRecipe`` (bits per weight with block scales: MXFP4 4.25 bits, NVFP4
  4.5 bits; fp8 KV 1 byte). Memory per GPU and the KV-limited concurrency come from
  ``memory.infer_memory`` / ``memory.max_batch_x_context``: the ``fit --mode infer`` model, same code.
* GEMMs: every projection is priced at its own per-GPU shape by :func:`shaped_gemm_time`:
  ``max(gemm.gemm_math_seconds(M, N, K), (weight + activation bytes) / (HBM bandwidth x HBM
  efficiency))``, the shape-aware model ``sweep`` uses for training (tile and wave quantization over the
  SKU's compute units, saturating at the large-GEMM ceiling ``[efficiency] matmul_<precision>`` of the
  compute precision; FP6/FP4 GEMMs take the FP8 ceiling, as ``hardware.serve_hardware`` reads it). ``M`` is
  the tokens this GPU multiplies (decode: sequences x tokens per step; prefill: prompt tokens), ``N``
  and ``K`` the model's widths split by TP (``gemm.model_shapes``); routed experts are one grouped GEMM
  per projection over the experts the pass activates on this GPU, ``M = tokens x top_k / distinct
  active experts``. The bytes are the weights at the serving format's width plus the 16-bit input and
  output activations, so small-batch decode is bandwidth-bound and long prefills run at the
  shape-dependent fraction of peak. Decode GEMMs are charged per token row at the rate of the same
  ``N x K`` GEMM filling every compute unit (split-K / stream-K kernels; :func:`shaped_gemm_time`), so
  the cost per token never rises with the batch. The InferenceX calibration scales the ceiling and the
  attention efficiency per family (``serve_calibration``: ``matmul_scale``).
* Attention core: FLOPs at the flash-attention efficiency of the BF16 peak (``[efficiency] attention``,
  or ``search.ATTN_OVER_MATMUL`` x the ceiling: ``search.Hardware.attn_sku``), prefill with the wave
  quantization of ``gemm.flash_attention_seconds`` over (sequences x heads x 128-query blocks); decode
  without it (split-KV decode kernels spread the context over the compute units: FlashDecoding, Dao et
  al. 2023); the time is the larger of that and the KV bytes over the achieved HBM bandwidth.
* Decode step (one token per sequence, ``1 + n`` with ``n`` speculative tokens verified): weights read
  once per step per shard; routed experts only as far as the step activates them: with ``T`` tokens
  routed top-``k`` of ``E`` independently, the expected number of distinct experts is
  ``E (1 - (1 - k/E)^T)`` (:func:`expected_distinct_experts`), so each GPU reads that fraction of its
  expert bytes; KV bytes of every sequence's context (GQA: ``/min(TP, kv_heads)`` per rank; MLA latent
  replicated on each TP rank unless attention is data parallel).
* MLA decode attention runs in the absorbed form (DeepSeek-V2, arXiv 2405.04434, sec. 2.1.2; FlashMLA):
  per query head and context token ``2 (kv_lora + rope)`` FLOP for scores and ``2 kv_lora`` for the
  context; prefill uses the decompressed heads (``params.attention_flops_per_token``).
* Collectives: ``comms.placed_collective_time`` (alpha-beta; small decode all-reduces are latency-bound).
  TP: two all-reduces of the step's hidden states per layer. Attention data parallel (DP-attention,
  SGLang): attention replicated per rank on its own sequences, then all-gather / reduce-scatter around
  dense FFNs, and with EP the all-to-all dispatch and combine of ``k`` copies of each token (DeepEP).
  PP: one send/recv of the hidden states per stage boundary.
* Continuous batching steady state (one replica, ``B`` sequences, prompts of ``I`` and outputs of
  ``O`` tokens): requests per second ``X = 1 / (t_prefill + O t_step / (B a))`` (the replica's time
  budget: each request costs its prefill plus its share ``O / (B a)`` of decode steps; ``a`` = tokens
  per step per sequence, 1 without speculation); prefill utilisation ``rho = X t_prefill``; TPOT =
  ``t_step / (a (1 - rho))`` (decode steps stretched by the prefills interleaved with them, in iterations of
  their own or inside the decodes' iterations alike); TTFT = ``t_prefill`` + the wait before it under the
  serving stack's iteration rule (``[scheduler] prefill_with_decodes``, :func:`prompt_wait`): where prompts
  share iterations with the running decodes (TensorRT-LLM's in-flight batching, vLLM V1) the rest of the
  iteration in progress, then the prompt's own iteration carrying the whole decode batch (``t_step``) and the
  other prompts that arrived meanwhile (:func:`mixed_iteration_wait`: about ``1.5 t_step`` at low load, so the
  first token never comes sooner than one decode step); where prefill iterations run apart (SGLang) the M/D/1
  mean wait ``rho t_prefill / (2 (1 - rho))`` (Pollaczek-Khinchine, deterministic service) + the rest of the
  decode step a prompt arrives in, ``(1 - rho) t_step / 2``; + the per-request overhead outside the GPU model
  (``ServeHardware.request_overhead_s``, fitted per family in ``serve_calibration``).
* Per-kernel overhead: every kernel of a layer (counted from the architecture, ``KERNELS_*``) pays
  ``kernel_overhead_s`` (launch, synchronisation, the framework's work between kernels).
* Host work per iteration (:func:`host_bound_step`): the serving framework's CPU time for each scheduled
  sequence in every iteration (input preparation, sampling bookkeeping, stop checks, response updates;
  ``host_per_seq_s``, fitted per family and stack in ``serve_calibration``) adds to the GPU step; with
  ``host_overlap`` (a stack that hides it behind the GPU) the step is the larger of the two instead.
* Speculative decoding / MTP with ``n`` draft tokens of acceptance rate ``p`` each: expected tokens
  per step ``a = (1 - p^(n+1)) / (1 - p)`` (Leviathan et al. 2023, arXiv 2211.17192, eq. 1); each draft
  token costs one extra transformer layer (DeepSeek-V3's MTP module, arXiv 2412.19437 sec. 2.2).
* Disaggregated prefill/decode (DistServe, Zhong et al. 2024, arXiv 2401.09670): decode replicas
  without prefill interference, prefill replicas sized to the decode pool's request rate at
  utilisation ``DISAGG_PREFILL_UTILISATION``; the prompt's KV moves over the scale-out fabric.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from mi400plan.gemm import (ATTN_BLOCK_Q, TILE_M, AttnSku, GemmSku, LayerShapes, flash_attention_seconds,
                            gemm_math_seconds, model_shapes)
from mi400plan.params import ParamCounts, kv_cache_bytes_per_token
from mi400plan.serve_iterations import (BatchWait, Iterations, held_release, mixed_iteration_wait,
                                        prompt_iterations, release_count)
from mi400plan.specs.layout import InferRecipe
from mi400plan.specs.model import ModelSpec

ACT_BYTES = 2.0  # 16-bit activations and collective payloads
# Per token per layer elementwise traffic (norms, residual adds, rotary), in hidden-size elements:
# read + write of two norms and two residual adds (search.NORM_RESIDUAL_ELEMS_PER_H, forward only).
ELEMWISE_ELEMS_PER_H = 10
# Prefill replicas of a disaggregated deployment run at this utilisation (queueing keeps TTFT finite).
DISAGG_PREFILL_UTILISATION = 0.7
# Kernels per layer that each pay the fixed per-kernel overhead (launch, synchronisation, framework work
# between kernels), counted from the architecture as vLLM / SGLang run one decoder layer:
# attention, GQA: QKV projection, rotary, attention core, output projection = 4; MLA: q_a, q_b, kv_a,
# the two absorbed-projection batched GEMMs, rotary, attention core, output projection = 8;
# two RMSNorms (residual add fused) = 2; dense FFN: gate+up, activation, down = 3; MoE FFN: router GEMM,
# top-k, token permute (dispatch), grouped gate+up, activation, grouped down, unpermute (combine),
# shared-expert gate+up and down = 9.
KERNELS_ATTN_GQA = 4
KERNELS_ATTN_MLA = 8
KERNELS_NORMS = 2
KERNELS_FFN_DENSE = 3
KERNELS_FFN_MOE = 9

# Compute precision of the GEMMs for each weight format; int4 (GPTQ/AWQ) dequantizes to 16-bit.
COMPUTE_PRECISION = {"bf16": "bf16", "fp16": "bf16", "fp8": "fp8", "mxfp8": "fp8", "fp6": "fp6", "mxfp6": "fp6",
                     "fp4": "fp4", "mxfp4": "fp4", "nvfp4": "fp4", "int4": "bf16"}

RULES: dict[str, str] = {
    "tp-heads": "TP does not divide the attention heads (or the KV heads, or they it)",
    "pp-layers": "PP does not divide the layers",
    "replica-gpus": "TP x PP does not divide the GPUs given",
    "ep-needs-moe": "EP or DP-attention on a dense model",
    "ep-experts": "EP does not divide the routed experts",
    "memory": "the weights do not fit in HBM",
    "kv-capacity": "the concurrency's KV cache does not fit (the fit model's maximum concurrency)",
}


@dataclass(frozen=True)
class ServeHardware:
    """One SKU at one corner of its estimates, base units."""

    name: str
    peak_flops: float  # FLOP/s, dense, at the compute precision
    matmul_eff: float
    kernel_overhead_s: float
    hbm_bytes: float
    hbm_bw: float  # B/s
    hbm_eff: float
    scale_up: Any  # comms.TierParams
    scale_out: Any
    domain: int
    request_overhead_s: float = 0.0  # per-request CPU-side time before the first token (TTFT only)
    units: int = 0  # compute units (CUs / SMs) for wave quantization; 0 = unknown (``gemm``)
    attn_peak_flops: float = 0.0  # BF16 dense peak for the attention core, FLOP/s; 0 = peak_flops
    attn_eff: float = 0.0  # flash-attention fraction of attn_peak_flops; 0 = matmul_eff
    host_per_seq_s: float = 0.0  # framework CPU time per scheduled sequence per iteration (``host_bound_step``)
    host_overlap: bool = False  # True: that CPU time is hidden behind the GPU step (max), else it adds (sum)


@dataclass(frozen=True)
class Workload:
    model: ModelSpec
    counts: ParamCounts
    recipe: InferRecipe
    input_len: int
    output_len: int
    spec_tokens: int = 0  # draft tokens verified per step (0: no speculation)
    spec_acceptance: float = 0.0  # per-token acceptance probability
    output_cv2: float = 0.0  # Var / mean^2 of the output length (0: every request ``output_len`` tokens)


@dataclass(frozen=True)
class Terms:
    """Per-layer parameter groups and attention widths (counts, elements, FLOP per pair)."""

    layers: int
    moe_layers: int
    hidden: int
    attn: float  # attention projection params per layer (all, incl. kv and replicated parts)
    attn_kv: float
    attn_rep: float
    attn_out: float  # output projection params
    ffn_dense: float  # dense FFN params of a dense layer
    shared: float  # shared-expert params of an MoE layer
    routed: float  # all routed experts of an MoE layer
    expert: float  # one routed expert
    num_experts: int
    top_k: int
    ffn_width: float  # mean FFN width per token per layer (for elementwise traffic)
    head: float  # LM head params (padded vocabulary x hidden), read every step
    kv_heads: int
    mla: bool
    kv_elems_per_layer: float  # KV elements cached per token per layer
    decode_pair_flops: float  # attention FLOP per (query token, context token) per layer, decode
    prefill_pair_flops: float  # same, prefill (decompressed heads)
    shapes: LayerShapes  # unsplit GEMM widths (``gemm.model_shapes``, shared with training)


def terms(model: ModelSpec, counts: ParamCounts, recipe: InferRecipe) -> Terms:
    """Per-layer scalars from ``params`` (the single source of parameter counts)."""
    from mi400plan.memory import padded_vocab_size

    a = model.attention
    h = model.hidden_size
    lp0 = counts.layers[0]
    moe_l = [lp for lp in counts.layers if lp.is_moe]
    dense_l = [lp for lp in counts.layers if not lp.is_moe]
    m = model.moe
    if a.kind == "mla":
        assert a.kv_lora_rank and a.qk_rope_head_dim and a.qk_nope_head_dim and a.v_head_dim
        decode_pair = 2.0 * a.num_heads * (a.kv_lora_rank + a.qk_rope_head_dim) + 2.0 * a.num_heads * a.kv_lora_rank
        prefill_pair = 2.0 * a.num_heads * (a.qk_nope_head_dim + a.qk_rope_head_dim) + 2.0 * a.num_heads * a.v_head_dim
        attn_out = float(a.num_heads * a.v_head_dim * h)
    else:
        d = a.head_size(h)
        decode_pair = prefill_pair = 4.0 * a.num_heads * d
        attn_out = float(a.num_heads * d * h)
    ffn_w = float(model.ffn_dim)
    if m is not None:
        ffn_w = (len(dense_l) * model.ffn_dim + len(moe_l) * (m.top_k * m.expert_ffn_dim + m.num_shared_experts * (
            m.shared_expert_ffn_dim or m.expert_ffn_dim))) / model.num_layers
    vp = float(padded_vocab_size(model.vocab_size, recipe.vocab_padding_size))
    return Terms(
        layers=model.num_layers, moe_layers=len(moe_l), hidden=h,
        attn=float(lp0.attention), attn_kv=float(lp0.attn_kv), attn_rep=float(lp0.attn_replicated),
        attn_out=attn_out,
        ffn_dense=float(dense_l[0].mlp_dense) if dense_l else 0.0,
        shared=float(moe_l[0].shared_experts) if moe_l else 0.0,
        routed=float(moe_l[0].routed_experts) if moe_l else 0.0,
        expert=float(counts.routed_expert_params),
        num_experts=m.num_experts if m else 0, top_k=m.top_k if m else 0,
        ffn_width=ffn_w, head=vp * h, kv_heads=a.kv_heads if a.kind == "gqa" else 1, mla=a.kind == "mla",
        kv_elems_per_layer=kv_cache_bytes_per_token(model, 1.0) / model.num_layers,
        decode_pair_flops=decode_pair, prefill_pair_flops=prefill_pair,
        shapes=model_shapes(model, float(lp0.attention)),
    )


def expected_distinct_experts(num_experts: int, top_k: int, tokens: Any) -> np.ndarray:
    """Expected number of distinct experts ``T`` tokens activate, each routed to ``k`` of ``E`` experts
    independently and uniformly: ``E (1 - (1 - k/E)^T)`` (an expert is missed by one token with
    probability ``1 - k/E``). Count of experts (float)."""
    t = np.asarray(tokens, dtype=np.float64)
    return num_experts * (1.0 - (1.0 - top_k / num_experts) ** t)


def tokens_per_step(spec_tokens: int, acceptance: float) -> float:
    """Expected tokens a sequence gains per verification step with ``n`` draft tokens of acceptance
    ``p``: ``(1 - p^(n+1)) / (1 - p)`` (Leviathan et al. 2023, eq. 1); 1 without drafts."""
    n, p = int(spec_tokens), float(acceptance)
    if n <= 0:
        return 1.0
    if p >= 1.0:
        return float(n + 1)
    return (1.0 - p ** (n + 1)) / (1.0 - p)


def gemm_sku(hw: ServeHardware) -> GemmSku:
    """The shared GEMM model's view of ``hw`` (``mi400plan.gemm``; no per-kernel overhead: ``serve``
    counts kernels per layer, ``KERNELS_*``). Efficiency fields may be arrays (the calibration grid)."""
    return GemmSku(hw.peak_flops, hw.matmul_eff, hw.hbm_bw * hw.hbm_eff, hw.units, 0.0)  # type: ignore[arg-type]


def shaped_gemm_time(m: Any, n: Any, k: Any, hw: ServeHardware, weight_bytes: float, batch: Any = 1.0, *,
                     decode: bool = False) -> np.ndarray:
    """Seconds of one GEMM ``[M, K] x [K, N]`` (``batch`` copies, a grouped GEMM), no overhead: the larger
    of its compute time and ``(weight_bytes x K N + 2 B x (M K + M N)) x batch / (HBM bw x eff)`` (the
    weights at the serving format's width, block scales included, and the 16-bit activations in and out).

    Compute, prefill: ``gemm.gemm_math_seconds``, the shared shape-aware model (tile and wave quantization,
    saturating at the ceiling). Decode: the ``M x batch`` token rows at the per-row rate of the same
    ``N x K`` GEMM filling every compute unit (``M = TILE_M x units``: N-tile padding and the ceiling
    kept, no row padding and no wave tail). Decode GEMMs are a few rows over tens of tiles, which
    libraries run with skinny or swapped-operand tiles and split-K / stream-K (Osama et al. 2023,
    "Stream-K", PPoPP) rather than as idle waves; charging the rows exactly also keeps the cost per
    token from rising with the batch (the planner's stated simplification)."""
    m, n, k, b = (np.asarray(x, dtype=np.float64) for x in (m, n, k, batch))
    sku = gemm_sku(hw)
    if decode:
        full = float(TILE_M * max(hw.units, 1))
        comp = m * b / full * gemm_math_seconds(full, n, k, sku)
    else:
        comp = gemm_math_seconds(m, n, k, sku, b)
    mem = (weight_bytes * k * n + ACT_BYTES * m * (k + n)) * b / (hw.hbm_bw * hw.hbm_eff)
    return np.maximum(comp, mem)


def attention_time(flops: Any, bytes_: Any, items: Any, hw: ServeHardware) -> np.ndarray:
    """Seconds of the attention core: ``max(FLOP / (BF16 peak x attention efficiency x fill), KV bytes
    / (HBM bw x eff))``; ``fill`` is the wave quantization of ``items`` work items over the compute units
    (``gemm.flash_attention_seconds``, FlashAttention-2's grid); ``items = None``: none (split-KV decode)."""
    eff = hw.attn_eff if np.any(np.asarray(hw.attn_eff) > 0) else hw.matmul_eff
    sku = AttnSku(hw.attn_peak_flops or hw.peak_flops, eff, hw.units if items is not None else 0)  # type: ignore[arg-type]
    comp, _ = flash_attention_seconds(flops, 1.0 if items is None else items, sku)
    return np.maximum(comp, np.asarray(bytes_, dtype=np.float64) / (hw.hbm_bw * hw.hbm_eff))


def _coll(hw: ServeHardware, op: str, size: Any, group: Any, stride: Any) -> np.ndarray:
    from mi400plan import comms

    g = np.asarray(group, dtype=np.float64)
    t = comms.placed_collective_time(op, np.maximum(size, 1.0), np.maximum(g, 1.0), stride, hw.scale_up, hw.scale_out)
    return np.where(g > 1, t, 0.0)


@dataclass(frozen=True)
class StepParts:
    """Seconds of one forward pass through one pipeline stage, by term (numpy arrays)."""

    weights: np.ndarray  # GEMM time (max of compute and weight/activation traffic) of the projections
    attention: np.ndarray  # attention core (KV read or FLOPs)
    elementwise: np.ndarray  # norms, residuals
    overhead: np.ndarray  # per-kernel overhead
    tp: np.ndarray  # TP all-reduces / DP-attention all-gather + reduce-scatter
    ep: np.ndarray  # all-to-all dispatch + combine
    pp: np.ndarray  # send/recv to the next stage
    head: np.ndarray  # LM head on the last stage
    compute_s: np.ndarray  # FLOP-bound lower bound (all kernels at peak x matmul efficiency)
    memory_s: np.ndarray  # bytes-bound lower bound
    weight_bytes: np.ndarray  # weight bytes read per GPU per pass
    kv_bytes: np.ndarray  # KV bytes read per GPU per pass
    flops: np.ndarray  # FLOP per GPU per pass

    @property
    def total(self) -> np.ndarray:
        return self.weights + self.attention + self.elementwise + self.overhead + self.tp + self.ep + self.pp + self.head


def projection_times(T: Terms, wl: Workload, hw: ServeHardware, *, tp: Any, ep: Any, dpa: Any, tokens: Any,
                     attn_w: Any, decode: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Seconds per layer of the attention projections, of a dense FFN and of an MoE FFN on one GPU, each
    GEMM at its own shape (:func:`shaped_gemm_time`; module docstring). Arrays broadcast.

    Attention: QKV (the whole down/up chain for MLA, as ``gemm.model_shapes`` lumps it) ``M = tokens``
    this GPU attends (``tokens / tp`` with DP-attention), ``K = hidden``, ``N = its QKV weights / hidden``
    (``attn_w``: TP-split, GQA K/V by ``min(tp, kv_heads)``, replicated parts whole); output projection
    ``N = hidden``, ``K = heads x v_dim / tp`` (whole with DP-attention). Dense FFN and shared experts:
    column- then row-parallel over TP (Megatron-LM). Routed experts: ``D = expected_distinct_experts``
    of the pass, ``D / ep`` of them on this GPU as one grouped GEMM per projection with ``M = tokens x
    top_k / D`` rows each, widths split by ``tp / ep`` (expert tensor parallelism)."""
    sh, wb, h = T.shapes, wl.recipe.weight_bytes, float(T.hidden)

    def g(m: Any, n: Any, k: Any, batch: Any = 1.0) -> np.ndarray:
        return shaped_gemm_time(m, n, k, hw, wb, batch, decode=decode)

    t = np.asarray(tokens, dtype=np.float64)
    t_attn = np.where(dpa, t / tp, t)
    out_k = np.where(dpa, float(sh.attn_out_k), sh.attn_out_k / tp)
    attn = g(t_attn, attn_w / h - out_k, h) + g(t_attn, h, out_k)
    dense = g(t, sh.ffn_in / tp, h) + g(t, h, sh.ffn_out_k / tp)
    if not T.num_experts:
        return attn, dense, np.zeros_like(dense)
    active = expected_distinct_experts(T.num_experts, T.top_k, t)
    m_e, etp = t * T.top_k / active, tp / ep
    routed = g(m_e, sh.expert_in / etp, h, active / ep) + g(m_e, h, sh.expert_out_k / etp, active / ep)
    shared = g(t, sh.shared_in / tp, h) + g(t, h, sh.shared_out_k / tp) if sh.shared_in else 0.0
    return attn, dense, routed + shared


class AttnCore(NamedTuple):
    """One layer's attention on one GPU (:func:`attention_core`)."""

    weights: np.ndarray  # attention projection parameters held (TP-split, or whole with DP-attention)
    proj_flops: np.ndarray  # projection FLOP
    core_flops: np.ndarray  # score and context FLOP
    kv_bytes: np.ndarray  # KV-cache bytes read (prefill: written and read back once)
    items: Any  # prefill work items (sequence x head x 128-query block) for wave quantization; None in decode


def attention_core(T: Terms, wl: Workload, *, tp: np.ndarray, dpa: np.ndarray, t: np.ndarray, s: np.ndarray,
                   ctx: np.ndarray, causal: bool) -> AttnCore:
    """Attention of ``t`` tokens of ``s`` sequences at context ``ctx`` on one GPU of a ``tp``-wide stage.

    Projections TP-split (GQA K/V by ``min(tp, kv_heads)``, MLA down-projections whole) or, with
    DP-attention, whole on every rank that runs its own ``1/tp`` of the tokens. Core: every context
    token's KV of each sequence on this GPU; FLOP per (query, context) pair from ``Terms`` (decode: MLA
    absorbed; prefill: decompressed heads). Causal: ``t`` prompt tokens split evenly over the ``s``
    sequences, each of its ``t / s`` tokens attending to the ``ctx`` cached tokens and its own prefix
    (mean context ``ctx + t / (2 s)``), each sequence's new KV written and read back once."""
    kv_split = np.minimum(tp, float(T.kv_heads)) if not T.mla else tp
    attn_tp = (T.attn - T.attn_kv - T.attn_rep) / tp + T.attn_kv / kv_split + T.attn_rep
    attn_w = np.where(dpa, T.attn, attn_tp)
    t_attn = np.where(dpa, t / tp, t)
    kv_layer = T.kv_elems_per_layer * wl.recipe.kv_bytes
    kv_rank = np.where(dpa, kv_layer, np.where(T.mla, kv_layer, kv_layer / np.minimum(tp, float(T.kv_heads))))
    seqs_rank = np.where(dpa, s / tp, s)
    heads_frac = np.where(dpa, 1.0, 1.0 / tp)
    if causal:
        per_seq = t / np.maximum(s, 1.0)  # prompt tokens of each sequence
        core_flops = T.prefill_pair_flops * heads_frac * t_attn * (ctx + per_seq / 2.0)
        core_bytes = kv_rank * seqs_rank * (ctx + per_seq) * 2.0  # write the new KV, read it back once
        items = seqs_rank * T.shapes.heads * heads_frac * np.ceil(per_seq / ATTN_BLOCK_Q)
    else:
        core_flops = T.decode_pair_flops * heads_frac * t_attn * ctx
        core_bytes = kv_rank * seqs_rank * ctx
        items = None
    return AttnCore(attn_w, 2.0 * attn_w * t_attn, core_flops, core_bytes, items)


def stage_collectives(T: Terms, hw: ServeHardware, *, tp: np.ndarray, pp: np.ndarray, ep: np.ndarray,
                      dpa: np.ndarray, t: np.ndarray, L: Any, Ld: Any, Lm: Any) -> tuple[Any, Any, Any]:
    """(TP, EP, PP) seconds of one forward pass of ``t`` tokens through a stage of ``L`` layers (``Ld``
    dense, ``Lm`` MoE): two all-reduces of the hidden states per layer under TP; with DP-attention an
    all-gather and reduce-scatter around each dense FFN, and around each MoE FFN either the same
    (EP 1) or the all-to-all dispatch and combine of ``top_k`` copies of each token (EP > 1); one
    send/recv of the hidden states per stage boundary."""
    h = float(T.hidden)
    act = t * h * ACT_BYTES
    ar = _coll(hw, "all_reduce", act, tp, 1.0)
    agrs = _coll(hw, "all_gather", act, tp, 1.0) + _coll(hw, "reduce_scatter", act, tp, 1.0)
    a2a = _coll(hw, "all_to_all", t / tp * T.top_k * h * ACT_BYTES, ep, 1.0)
    moe_dpa = np.where(ep > 1, 2.0 * a2a, agrs)
    tp_t = np.where(dpa, Ld * agrs + Lm * np.where(ep > 1, 0.0, agrs), 2.0 * L * ar)
    ep_t = np.where(dpa, Lm * np.where(ep > 1, moe_dpa, 0.0), 0.0)
    pp_t = np.where(pp > 1, _coll(hw, "send_recv", act / tp, 2.0, tp), 0.0)
    return tp_t, ep_t, pp_t


def forward_stage(T: Terms, wl: Workload, hw: ServeHardware, *, tp: Any, pp: Any, ep: Any, dpa: Any,
                  tokens: Any, seqs: Any, context: Any, causal: bool) -> StepParts:
    """One forward pass of ``tokens`` tokens (``seqs`` sequences, each attending to ``context`` tokens;
    ``causal``: the tokens are ``seqs`` prompts of ``tokens / seqs`` tokens, each attending to its prefix) through
    one pipeline stage (``layers / pp`` layers; the LM head counted on every stage as the slowest one
    carries it), per GPU of a ``tp``-wide stage. Arrays broadcast."""
    tp, pp, ep = (np.asarray(x, dtype=np.float64) for x in (tp, pp, ep))
    dpa = np.asarray(dpa, dtype=bool)
    t = np.asarray(tokens, dtype=np.float64)
    s = np.asarray(seqs, dtype=np.float64)
    wb, h = wl.recipe.weight_bytes, float(T.hidden)
    L = T.layers / pp
    Lm = T.moe_layers / pp
    Ld = L - Lm
    a = attention_core(T, wl, tp=tp, dpa=dpa, t=t, s=s, ctx=np.asarray(context, dtype=np.float64), causal=causal)
    # FFNs: dense and shared experts TP-split; routed experts spread over the tp GPUs of the stage,
    # each reading only the experts the step activates.
    if T.num_experts:
        frac = expected_distinct_experts(T.num_experts, T.top_k, t) / T.num_experts
    else:
        frac = np.zeros_like(t)
    ffn_flops_dense = 2.0 * T.ffn_dense / tp * t
    ffn_flops_moe = 2.0 * (T.shared + T.top_k * T.expert) / tp * t
    t_a, t_d, t_m = projection_times(T, wl, hw, tp=tp, ep=ep, dpa=dpa, tokens=t, attn_w=a.weights, decode=not causal)
    weights = L * t_a + Ld * t_d + Lm * t_m
    attention = L * attention_time(a.core_flops, a.kv_bytes, a.items, hw)
    elem_bytes = ELEMWISE_ELEMS_PER_H * h * ACT_BYTES * np.where(dpa, t / tp, t) + 3.0 * T.ffn_width / tp * ACT_BYTES * t
    elementwise = L * elem_bytes / (hw.hbm_bw * hw.hbm_eff)
    k_attn = KERNELS_ATTN_MLA if T.mla else KERNELS_ATTN_GQA
    kernels = L * (k_attn + KERNELS_NORMS) + Ld * KERNELS_FFN_DENSE + Lm * KERNELS_FFN_MOE
    overhead = kernels * hw.kernel_overhead_s
    # LM head (vocab-parallel over TP, 16-bit weights), on the tokens that are sampled.
    sampled = np.where(causal, s, t)
    head_t = shaped_gemm_time(sampled, T.head / h / tp, h, hw, 2.0, decode=not causal) + hw.kernel_overhead_s
    tp_t, ep_t, pp_t = stage_collectives(T, hw, tp=tp, pp=pp, ep=ep, dpa=dpa, t=t, L=L, Ld=Ld, Lm=Lm)
    flops = (L * (a.proj_flops + a.core_flops) + Ld * ffn_flops_dense + Lm * ffn_flops_moe
             + 2.0 * T.head / tp * sampled)
    w_bytes = (L * wb * a.weights + Ld * wb * T.ffn_dense / tp + Lm * wb * (T.shared + T.routed * frac) / tp
               + 2.0 * T.head / tp)
    kv_bytes = L * a.kv_bytes
    all_bytes = w_bytes + kv_bytes + L * elem_bytes
    return StepParts(
        weights=weights, attention=attention, elementwise=elementwise, overhead=overhead + 0.0 * t,
        tp=tp_t, ep=ep_t, pp=pp_t, head=head_t, compute_s=flops / (hw.peak_flops * hw.matmul_eff),
        memory_s=all_bytes / (hw.hbm_bw * hw.hbm_eff), weight_bytes=w_bytes, kv_bytes=kv_bytes, flops=flops,
    )


# --- layouts -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Layouts:
    """Candidate replica layouts (numpy int arrays, one element per layout) and rejection counts."""

    tp: np.ndarray
    pp: np.ndarray
    ep: np.ndarray
    dpa: np.ndarray  # 1: attention data parallel over the TP ranks (DP-attention)
    rejected: dict[str, int]


def layout_grid(model: ModelSpec, gpus: int, concurrency: int, *, tp: list[int] | None = None,
                pp: list[int] | None = None, ep: list[int] | None = None, dpa: list[int] | None = None) -> Layouts:
    """Every (TP, PP, EP, DP-attention) replica of at most ``gpus`` GPUs that passes the structural rules.

    TP and PP take every divisor of ``gpus`` (a replica fills the GPUs given a whole number of times);
    EP is 1 or TP (experts spread over the whole TP group, as vLLM's and SGLang's expert parallelism
    does) and DP-attention on or off, both only for MoE models. Rejected candidates are counted per rule
    (first rule broken), once per concurrency value, so the counts add up with the concurrency grid."""
    from mi400plan.intmath import divisors

    divs = divisors(gpus)
    tps, pps = tp or divs, pp or divs
    moe = model.moe is not None
    eps = ep or [1, 0]  # 0 stands for "EP = TP"
    dpas = dpa if dpa is not None else [0, 1]
    a = model.attention
    out: list[tuple[int, int, int, int]] = []
    rej = {k: 0 for k in RULES}
    for t in tps:
        for p in pps:
            for e0 in eps:
                for d in dpas:
                    e = t if e0 == 0 else e0
                    if not moe and ep is None and dpa is None and (e0 == 0 or d):
                        continue  # EP and DP-attention variants exist only for MoE models
                    if e0 == 0 and t == 1 and 1 in eps:
                        continue  # "EP = TP" at TP 1 is EP 1: not a separate candidate
                    rule = None
                    kv = a.kv_heads if a.kind == "gqa" else a.num_heads
                    if a.num_heads % t or (kv % t and t % kv):
                        rule = "tp-heads"
                    elif model.num_layers % p:
                        rule = "pp-layers"
                    elif gpus % (t * p):
                        rule = "replica-gpus"
                    elif not moe and (e > 1 or d):
                        rule = "ep-needs-moe"
                    elif moe and (model.moe.num_experts % e or (e > 1 and t % e)):  # type: ignore[union-attr]
                        rule = "ep-experts"
                    elif d and t == 1:
                        continue  # DP-attention over one rank is plain TP1
                    if rule:
                        rej[rule] += concurrency
                        continue
                    out.append((t, p, e, d))
    arr = np.array(out, dtype=np.int64).reshape(-1, 4)
    return Layouts(arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3], rej)


# --- evaluation ------------------------------------------------------------------------------------


def memory(wl: Workload, hw: ServeHardware, *, tp: Any, pp: Any, dpa: Any, batch: Any) -> dict[str, np.ndarray]:
    """Per-GPU memory (bytes) of a replica serving ``batch`` sequences of ``input + output`` tokens, and
    whether the weights and the KV cache fit.

    Without DP-attention: ``memory.infer_memory`` and ``memory.max_batch_x_context`` exactly as
    ``fit --mode infer --tp T --pp P --batch B --seq I+O`` computes them (a concurrency fits when
    ``B x (I + O)`` cached tokens fit; with varied output lengths ``I + E[O^2] / E[O]`` per sequence, the
    length-biased mean of :func:`held_context`). With DP-attention every rank holds the whole attention block and
    the KV of its own ``ceil(B / TP)`` sequences (all KV heads, or the whole MLA latent): ``kv_dpa_per_token``
    bytes a cached token on such a rank."""
    from mi400plan.memory import infer_memory, max_batch_x_context, usable_bytes

    ctx = float(held_context(wl))
    tp = np.asarray(tp, dtype=np.float64)
    pp = np.asarray(pp, dtype=np.float64)
    b = np.asarray(batch, dtype=np.float64)
    dpa = np.asarray(dpa, dtype=bool)
    m = infer_memory(wl.model, wl.counts, wl.recipe, tp=tp, pp=pp, ep=1, batch=b, context=ctx)
    usable = float(usable_bytes(hw.hbm_bytes, wl.recipe.reserve))
    mt = max_batch_x_context(wl.model, wl.counts, wl.recipe, capacity_bytes=hw.hbm_bytes, tp=tp, pp=pp, ep=1, batch=b)
    T = terms(wl.model, wl.counts, wl.recipe)
    L = T.layers / pp
    kv_split = np.minimum(tp, float(T.kv_heads)) if not T.mla else tp
    attn_tp = (T.attn - T.attn_kv - T.attn_rep) / tp + T.attn_kv / kv_split + T.attn_rep
    extra_w = np.where(dpa, wl.recipe.weight_bytes * (T.attn - attn_tp) * L, 0.0)
    weights = m.weights + extra_w
    kv_full = T.kv_elems_per_layer * wl.recipe.kv_bytes * L  # bytes per token, all KV heads, the stage
    kv_dpa = kv_full * np.ceil(b / tp) * ctx
    kv = np.where(dpa, kv_dpa, m.kv_cache)
    base = weights + m.activations + m.reserve
    weights_fit = base <= usable
    kv_fit = np.where(dpa, base + kv_dpa <= usable, b * ctx <= mt)
    return {"weights": weights, "kv_cache": kv, "activations": m.activations, "reserve": m.reserve,
            "total": base + kv, "usable": np.full(weights.shape, usable), "weights_fit": weights_fit,
            "kv_fit": kv_fit & weights_fit, "kv_dpa_per_token": kv_full + 0.0 * weights}


def decode_context(wl: Workload) -> float:
    """Mean context (tokens) a decode step reads per sequence: ``I + E[O^2] / (2 E[O])``, the length-biased
    mean of the sequences in flight (``inflight.in_flight_tokens``; Kleinrock 1975 sec. 5.2), ``I + O / 2``
    when every output has the same length."""
    from mi400plan.inflight import in_flight_tokens

    return float(in_flight_tokens(float(wl.input_len), float(wl.output_len), wl.output_cv2))


def held_context(wl: Workload) -> float:
    """Tokens a sequence in flight reserves for its whole length: ``I + E[O^2] / E[O]``, length-biased as
    :func:`decode_context` (``I + O`` when every output has the same length)."""
    from mi400plan.inflight import in_flight_tokens

    return float(in_flight_tokens(wl.input_len, wl.output_len, wl.output_cv2, whole=True))


def decode_step(T: Terms, wl: Workload, hw: ServeHardware, *, tp: Any, pp: Any, ep: Any, dpa: Any, batch: Any,
                context: Any) -> tuple[StepParts, np.ndarray, np.ndarray]:
    """One decode step of ``batch`` sequences of mean context ``context`` tokens: the busiest stage's
    parts (``batch / pp`` sequences per micro-batch, ``1 + n`` tokens each with ``n`` drafts), the draft
    (MTP) layers' seconds, and the step's seconds ``pp x stage + draft`` (module docstring)."""
    n = int(wl.spec_tokens)
    pp = np.asarray(pp, dtype=np.float64)
    mb = np.asarray(batch, dtype=np.float64) / pp  # sequences per pipeline micro-batch
    d = forward_stage(T, wl, hw, tp=tp, pp=pp, ep=ep, dpa=dpa, tokens=mb * (1 + n), seqs=mb, context=context,
                      causal=False)
    per_layer = (d.weights + d.attention + d.elementwise + d.overhead + d.tp + d.ep) / (T.layers / pp)
    draft = n * per_layer
    return d, draft, host_bound_step(pp * d.total + draft, scheduled_seqs(batch, tp, dpa), hw)


def scheduled_seqs(batch: Any, tp: Any, dpa: Any) -> np.ndarray:
    """Sequences one scheduler handles per iteration: the replica's ``batch``, or with attention data
    parallel ``batch / tp``: TensorRT-LLM and SGLang run one scheduler per attention-DP rank, each on its own
    sequences (TensorRT-LLM tech blog 10, "ADP Balance Strategy", 2025; SGLang v0.4 blog, "Data Parallelism
    Attention", 2024-12-04)."""
    b = np.asarray(batch, dtype=np.float64)
    return np.where(np.asarray(dpa, dtype=bool), b / np.asarray(tp, dtype=np.float64), b)


def host_bound_step(gpu_s: Any, seqs: Any, hw: ServeHardware) -> np.ndarray:
    """Seconds of one decode iteration whose GPU work takes ``gpu_s`` and whose framework CPU work on the
    critical path takes ``host = host_per_seq_s x seqs`` (``seqs`` scheduled sequences): ``gpu_s + host``;
    ``max(gpu_s, host)`` where ``hw.host_overlap`` says the stack hides it behind the GPU step.

    Serving frameworks do CPU work for every sequence in every iteration: scheduling, preparing the step's
    inputs, sampling bookkeeping, stop checks and response updates. vLLM measured it at 62 % of a small model's
    serving time (API server 33 %, scheduling and input preparation 29 %; "vLLM v0.6.0: 2.7x Throughput
    Improvement and 5x Latency Reduction", vLLM blog, 2024-09-05) and at 5-6 ms between two decode steps of 256
    sequences on its V1 engine (about 20 us a sequence; vllm-project/vllm issue #10634, 2024-11-25); SGLang at
    "as much as half" of an unoptimised engine's time (SGLang v0.4 blog, 2024-12-04). Overlap schedulers run
    part of it beside the GPU (TensorRT-LLM's PyTorch-backend "Overlap Scheduler", on by default; SGLang's
    zero-overhead scheduler; vLLM's ``--async-scheduling``), but not all: TensorRT-LLM's overlap loop leaves the
    input preparation of the next step on the critical path, a GPU-idle gap between decode steps at 256
    sequences (NVIDIA/TensorRT-LLM pull request #16313, 2026-07-13), and vLLM's async scheduling overlapped
    input preparation and sampling only from pull request #23569 (2025-08-25). The InferenceX runs, every one
    with its stack's overlap on, show the time adding: TPOT grows by a constant time per sequence from 4
    sequences up, where the GPU step is far longer than any CPU work an overlap would hide (``serve_calibration``
    fits it so, ``INFERENCEX_HOST_OVERLAP``)."""
    g = np.asarray(gpu_s, dtype=np.float64)
    host = np.asarray(hw.host_per_seq_s, dtype=np.float64) * np.asarray(seqs, dtype=np.float64)
    return np.maximum(g, host) if hw.host_overlap else g + host


def prompts_per_prefill(input_len: float, prefill_tokens: int) -> int:
    """Prompts one full prefill pass runs: ``floor(prefill_tokens / input_len)``, at least 1.

    A scheduler whose queue always holds prompts (MLPerf Offline: every request queued at the start)
    fills each iteration to its token budget (vLLM ``max_num_batched_tokens``, TensorRT-LLM
    ``max_num_tokens``), so that many prompts' rows run as one GEMM and share the pass's kernel launches."""
    return max(1, int(prefill_tokens // max(float(input_len), 1.0)))


def md1_wait_median(wait_mean: Any, rho: Any) -> np.ndarray:
    """Median of a single-server queue's wait with mean ``wait_mean`` at utilisation ``rho``: an arrival finds
    the server idle with probability ``1 - rho`` (wait 0), else waits an exponential of mean ``wait_mean /
    rho``, the M/M/1 waiting-time law ``P(W > w) = rho exp(-w rho / E[W])`` (Kleinrock 1975, Queueing Systems
    I, sec. 3.2) with the queue's own mean (for M/D/1 Pollaczek-Khinchine's); so 0 when ``rho <= 1/2``, else
    ``E[W] / rho x ln(2 rho)``. Seconds. ``tests/test_serve_sim.py`` checks it against the simulation."""
    w, r = np.asarray(wait_mean, dtype=np.float64), np.asarray(rho, dtype=np.float64)
    safe = np.maximum(r, 1e-12)
    return np.where(r > 0.5, w / safe * np.log(np.maximum(2.0 * safe, 1.0)), 0.0)


def batch_hold(bw: BatchWait | None, t_step: Any, X: Any, batch: Any, input_len: float, decode_tokens: float,
               pf_lat: Any) -> tuple[np.ndarray, np.ndarray]:
    """Mean and median seconds a prompt's first token is delayed by TensorRT-LLM's batch waiting
    (:class:`BatchWait`) at ``X`` prompts per second on a replica decoding ``batch`` sequences, with prefill
    iterations apart (on in-flight batching ``serve_iterations.held_release`` prices the hold's cycle).

    A window opens when a prompt finds no other held and lasts ``W = min(iters x t_step, (k - 1) / X)``, ``k``
    the prompts whose tokens with the decodes' reach the threshold, ``ceil((tokens - batch x decode_tokens) /
    input_len)``, or ``BatchWait.prompts`` (``k <= 1``: the first prompt releases itself, no hold). The ``n = X W`` prompts arriving
    during it (Poisson) wait the rest of it, uniform on ``(0, W)``, and all ``1 + n`` are prefilled in one pass
    that lasts ``(1 + n)`` single prefills (``pf_lat``), each getting its first token at its end. Mean:
    ``W (1 + n / 2) / (1 + n) + n pf_lat``; median: the ``1 / (1 + n)`` that wait all of ``W`` hold the median
    while ``n <= 1`` (``W``), else ``W (1 + n) / (2 n)``; plus ``n pf_lat``."""
    z = np.zeros_like(np.asarray(t_step, dtype=np.float64) * np.asarray(X, dtype=np.float64))
    if bw is None or bw.iters <= 0:
        return z, z
    k = release_count(bw, np.broadcast(z, np.asarray(batch)).shape, batch, input_len, decode_tokens)
    on = k > 1.0
    w = np.where(on, np.minimum(bw.iters * np.asarray(t_step), np.maximum(k - 1.0, 0.0) / X), 0.0)
    n = X * w
    group = n * pf_lat
    mean = w * (1.0 + n / 2.0) / (1.0 + n) + group
    median = np.where(n <= 1.0, w, w * (1.0 + n) / (2.0 * np.maximum(n, 1e-12))) + group
    return mean + z, median + z


def prompt_wait(iterations: Iterations | None, t_step: Any, pf_busy: Any, X: Any, batch: Any, input_len: float,
                decode_tokens: float) -> tuple[np.ndarray, np.ndarray]:
    """Mean and median seconds between a prompt's arrival and its prefill pass on a replica that also decodes
    (TTFT = this + the prefill + the other terms of :func:`evaluate`).

    Prompts sharing iterations with the decodes (``iterations.mixed``): :func:`mixed_iteration_wait` over the
    :func:`prompt_iterations` the prompt spans. Prefill iterations apart (None or not mixed; prefill-first
    preemption, SGLang's and vLLM V0's rule): the M/D/1 mean wait ``rho P / (2 (1 - rho))`` for the prompts
    ahead (Pollaczek-Khinchine, deterministic service ``P = pf_busy``; median :func:`md1_wait_median`) + the rest
    of the decode step it arrives in, ``(1 - rho) t_step / 2`` (a step is in progress a share ``1 - rho`` of the
    time; the mean residual of a deterministic step is half of it)."""
    if iterations is not None and iterations.mixed:
        return mixed_iteration_wait(t_step, pf_busy, X, prompt_iterations(iterations, input_len, batch,
                                                                          decode_tokens))
    rho = np.asarray(X) * np.asarray(pf_busy)
    wq = rho * pf_busy / (2.0 * (1.0 - rho))
    residual = (1.0 - rho) * np.asarray(t_step) / 2.0
    return wq + residual, md1_wait_median(wq, rho) + residual


def evaluate(wl: Workload, hw: ServeHardware, *, tp: Any, pp: Any, ep: Any, dpa: Any, batch: Any,
             disagg: bool = False, prefill_prompts: int = 1, batch_waiting: BatchWait | None = None,
             iterations: Iterations | None = None) -> dict[str, np.ndarray]:
    """Steady-state serving metrics of replicas at concurrency ``batch`` (arrays broadcast).

    ``prefill_prompts``: prompts per prefill pass (default 1, a prompt runs alone). With ``k > 1`` the
    ``k`` prompts run as one pass (their rows one GEMM, the kernel launches shared): each costs the
    pass's GPU time over ``k``, its first token comes at the end of the whole pass, and a prompt
    arriving at random at the replica's request rate ``X`` first waits for the pass to fill: the
    ``i``-th of ``k`` waits ``(k - i) / X``, ``(k - 1) / (2 X)`` on average (added to TTFT as
    ``batch_wait``). Set it from the scheduler's configuration (:func:`prompts_per_prefill`).
    ``batch_waiting``: TensorRT-LLM's batch waiting where a launch configuration turns it on, added to TTFT as
    ``batch_hold`` (:func:`batch_hold`; with mixed ``iterations``, what ``serve_iterations.held_release``'s cycle
    adds to the iteration wait).

    ``iterations``: the serving stack's iteration rule (:class:`Iterations`; None: prefill iterations apart);
    it sets the wait before the prompt's prefill (:func:`prompt_wait`, reported as ``queue``).

    ``ttft`` is the mean; ``ttft_median`` the same terms with the queue's and the batch hold's medians
    (:func:`md1_wait_median`), the statistic benchmarks such as InferenceX publish.

    Returns seconds (``tpot``, ``ttft``, ``t_step``, ``t_prefill``, ``queue``, ``kv_transfer``; ``own_iterations``:
    the decode steps of the iterations the prompt itself runs in, the part of ``queue`` that does not wait on other
    requests), token rates
    (``out_tps_gpu``, ``total_tps_gpu``, ``tps_user``), ``rho`` (prefill share of the GPU time), GPUs per
    replica (``gpus``: both pools when disaggregated, per decode replica), the decode and prefill step
    breakdowns (``d_<term>``, ``p_<term>``), and ``mem_<term>`` bytes. See the module docstring."""
    T = terms(wl.model, wl.counts, wl.recipe)
    tp, pp, ep, b = (np.asarray(x, dtype=np.float64) for x in (tp, pp, ep, batch))
    dpa = np.asarray(dpa, dtype=bool)
    I, O = float(wl.input_len), float(wl.output_len)
    n = int(wl.spec_tokens)
    a = tokens_per_step(n, wl.spec_acceptance)
    d, draft, t_step = decode_step(T, wl, hw, tp=tp, pp=pp, ep=ep, dpa=dpa, batch=b, context=decode_context(wl))
    kp = float(max(int(prefill_prompts), 1))
    p = forward_stage(T, wl, hw, tp=tp, pp=pp, ep=ep, dpa=dpa, tokens=I * kp, seqs=kp, context=0.0, causal=True)
    pf_busy = p.total / kp  # GPU time per prompt on the busiest stage (prompts pipeline through stages)
    pf_lat = pp * p.total
    G = tp * pp
    out: dict[str, np.ndarray] = {}
    if not disagg:
        X = 1.0 / (pf_busy + O * t_step / (b * a))  # requests per second per replica
        rho = X * pf_busy
        tpot = t_step / (a * (1.0 - rho))
        queue, queue_median = prompt_wait(iterations, t_step, pf_busy, X, b, I, 1.0 + n)
        kv_tx = np.zeros_like(tpot)
        gpus = G
        n_pf = np.zeros_like(tpot)
    else:
        X = b * a / (O * t_step)
        tpot = t_step / a
        U = DISAGG_PREFILL_UTILISATION
        n_pf = X * pf_busy / U  # prefill replicas (same layout) per decode replica, fractional
        rho = n_pf * G / (G + n_pf * G)  # share of GPUs in the prefill pool
        queue = U * pf_busy / (2.0 * (1.0 - U))
        queue_median = md1_wait_median(queue, U)
        kv_total = kv_cache_bytes_per_token(wl.model, wl.recipe.kv_bytes) * I
        bw = hw.scale_out.bw_per_dir * hw.scale_out.efficiency
        kv_tx = kv_total / (G * bw) + hw.scale_out.latency
        gpus = G * (1.0 + n_pf)
    fill_wait = (kp - 1.0) / (2.0 * X)
    mixed = iterations is not None and iterations.mixed and not disagg
    if mixed and batch_waiting is not None and batch_waiting.iters > 0:
        # in-flight batching: the hold's cycle replaces the iteration wait (serve_iterations.held_release)
        held, held_median = held_release(batch_waiting, t_step, pf_busy, X, b, I, 1.0 + n)
        hold, hold_median = np.maximum(held - queue, 0.0), np.maximum(held_median - queue_median, 0.0)
    else:
        hold, hold_median = batch_hold(batch_waiting, t_step, X, b, I, 1.0 + n, pf_lat)
    ttft = pf_lat + queue + fill_wait + hold + kv_tx + hw.request_overhead_s
    ttft_median = pf_lat + queue_median + fill_wait + hold_median + kv_tx + hw.request_overhead_s
    own = prompt_iterations(iterations, I, b, 1.0 + n) * t_step if mixed else 0.0  # type: ignore[arg-type]
    out.update(tpot=tpot, ttft=ttft, ttft_median=ttft_median, request_overhead=hw.request_overhead_s + 0.0 * tpot,
               own_iterations=own + 0.0 * tpot,
               t_step=t_step, t_prefill=pf_lat, queue=queue, batch_wait=fill_wait, batch_hold=hold,
               kv_transfer=kv_tx, rho=rho,
               requests_per_s=X, out_tps_gpu=X * O / gpus, total_tps_gpu=X * (I + O) / gpus, tps_user=1.0 / tpot,
               gpus=gpus + 0.0 * tpot, prefill_replicas=n_pf + 0.0 * tpot, tokens_per_step=np.full(tpot.shape, a),
               draft=draft, compute_bound_step=pp * d.compute_s, memory_bound_step=pp * d.memory_s,
               weight_bytes=d.weight_bytes, kv_bytes=d.kv_bytes)
    for k in ("weights", "attention", "elementwise", "overhead", "tp", "ep", "pp", "head"):
        out[f"d_{k}"] = pp * getattr(d, k)
        out[f"p_{k}"] = pp * getattr(p, k)
    return out


def lockstep_rounds(t_prefill_one: Any, t_step: Any, conc: Any, output_len: Any) -> dict[str, np.ndarray]:
    """A closed-loop benchmark whose requests all have the same prompt and output length (``bench_serving
    --random-range-ratio 1 --max-concurrency c``): the ``c`` requests in flight start and finish together, so
    the run is a sequence of rounds. Each round serves ``c`` prefills one after another (prefill-first
    scheduling, the default of SGLang and vLLM: decode waits while prompts are pending), then ``O`` decode
    steps of the whole batch.

    Round time ``c t_p + O t_step``; output tokens/s ``c O / round``; request ``k`` (1..c) sees its first
    token after ``k t_p``, so mean TTFT ``t_p (c + 1) / 2``; its remaining ``O - 1`` tokens take
    ``(c - k) t_p + (O - 1) t_step``, so mean TPOT ``t_step + t_p (c - 1) / (2 (O - 1))``. Seconds, tokens/s.
    The steady state of :func:`evaluate` (requests desynchronised) is the other limit."""
    tp1, ts = np.asarray(t_prefill_one, dtype=np.float64), np.asarray(t_step, dtype=np.float64)
    c, o = np.asarray(conc, dtype=np.float64), np.asarray(output_len, dtype=np.float64)
    rnd = c * tp1 + o * ts
    return {"out_tps": c * o / rnd, "ttft": tp1 * (c + 1.0) / 2.0,
            "tpot": ts + tp1 * (c - 1.0) / (2.0 * np.maximum(o - 1.0, 1.0)), "round_s": rnd}


def pareto_front(interactivity: np.ndarray, throughput: np.ndarray) -> np.ndarray:
    """Indices of the points no other point beats in both tokens/s/user and tokens/s/GPU, ordered from
    the most interactive to the highest throughput (ties: the first index wins)."""
    order = np.lexsort((np.arange(len(throughput)), -throughput, -interactivity))
    best = -np.inf
    keep = []
    for i in order:
        if throughput[i] > best:
            keep.append(i)
            best = throughput[i]
    return np.array(keep, dtype=np.int64)
