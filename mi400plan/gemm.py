"""Shape-aware GEMM and flash-attention time model (numpy-vectorised; used by ``sweep`` and ``serve``).

A GEMM ``C[M, N] = A[M, K] @ B[K, N]`` (``batch`` independent copies, one kernel) costs

    t = max(t_math, t_hbm) + overhead

* ``t_math = 2 M N K batch / (peak x ceiling x wave_fill)``: the library tiles ``C`` into
  ``tile_m x tile_n`` output tiles, one per compute unit (CU / SM) at a time; the last wave and the
  padded edge tiles leave CUs idle (tile and wave quantization, as in NVIDIA's "Matrix
  Multiplication Background User's Guide", sections "Tile quantization" and "Wave quantization").
  ``wave_fill = useful output elements / (waves x CUs x tile area)`` is at most 1. ``ceiling`` is
  the measured large-GEMM fraction of the dense peak of the precision (the fitted per-SKU figure).
* ``t_hbm = bytes moved / (HBM bandwidth x HBM efficiency)``, bytes = inputs ``(M K + K N)`` at the
  operand width plus the 16-bit output ``M N`` (roofline on arithmetic intensity, Williams et al.
  2009, "Roofline: an insightful visual performance model").
* ``overhead``: fixed per-kernel time (launch, prologue/epilogue), the profile's ``gemm_overhead_us``.

So the achieved fraction of peak ``2 M N K / (t x peak)`` never exceeds ``ceiling``: small or skinny
GEMMs (large TP, small micro-batches, fine-grained experts, short sequences) fall below it, large
ones saturate at it.

Flash attention (Dao et al. 2022, "FlashAttention"; Dao 2023, "FlashAttention-2") is one fused
kernel per layer and pass whose matmul FLOPs run at its own measured fraction of the BF16 peak
(``attention`` efficiency, lower than the GEMM ceiling: softmax and masking share the CUs), with
the same wave quantization over (batch x heads x query blocks of ``ATTN_BLOCK_Q``) work items.
That fraction is the kernel's long-sequence rate; a query block's fixed work (its diagonal block run
masked, loading Q, rescaling and writing O) is amortized over the keys it loops over, so the rate on
``keys`` keys is ``keys / (keys + s_half)`` of it, ``s_half`` per kernel generation fitted on its
published kernel benchmark (:func:`attention_length_factor`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mi400plan.params import mla_up_projection_widths
from mi400plan.records import record

# Output tile of a large BF16/FP8 GEMM kernel (M x N). 256 x 128 is the macro tile that hipBLASLt's
# tuned MI300X kernels (MT256x128) and CUTLASS's Hopper warp-specialised kernels (128x256 /
# 256x128 clusters) use for large LLM GEMMs; one tile per CU/SM at a time. Assumed, documented.
TILE_M = 256
TILE_N = 128
# The smaller tile a library falls back to when the large one leaves CUs idle, and its throughput
# relative to the large tile on a full wave (less operand reuse). Fitted (``benchmarks/fit_gemm.py``)
# on the calibration runs, one value for every SKU.
SMALL_TILE_M = 128
# Smallest tile edge: the 16-row/column granularity of the matrix instructions (CDNA MFMA 16x16,
# NVIDIA mma 16x8); a GEMM narrower than a tile runs in a tile cut down to this multiple.
MIN_TILE = 16
SMALL_TILE_EFF = 1.0
TILES = ((TILE_M, TILE_N, 1.0), (SMALL_TILE_M, TILE_N, SMALL_TILE_EFF))
# Query rows per flash-attention work item (FlashAttention-2 forward block size, 128).
ATTN_BLOCK_Q = 128
# Below this many compute units the part is not a CU/SM array (TPU TensorCores, NeuronCores):
# wave quantization over 256 x 128 tiles does not describe it and is not applied.
MIN_UNITS_FOR_WAVES = 32
# FLOPs of flash attention's backward pass relative to its forward: 5 matmuls (recompute QK^T, dV,
# dP, dQ, dK) against 2 (QK^T, PV) = 2.5 (Dao 2023, FlashAttention-2, section 3.1.2).
ATTN_BWD_OVER_FWD = 2.5
# Causal flash-attention forward rate, TFLOP/s (causal FLOPs), BF16, head dim 128, on one H100 80GB SXM5
# at sequence lengths ATTN_BENCH_SEQ (batch x sequence = 16k tokens, hidden 2,048): Shah et al.,
# "FlashAttention-3", arXiv 2407.08608, 2024-07-11, Figure 5 (forward, causal mask, head dim 128), per
# kernel generation of ``stacks`` (fa2 = FlashAttention-2, cudnn = cuDNN fused attention, fa3).
ATTN_BENCH_SEQ = (512, 1024, 2048, 4096, 8192, 16384)
ATTN_BENCH_TFLOPS = {
    "fa2": (191.0, 260.0, 298.0, 319.0, 333.0, 335.0),
    "cudnn": (315.0, 410.0, 484.0, 518.0, 529.0, 539.0),
    "fa3": (292.0, 423.0, 521.0, 579.0, 602.0, 616.0),
}
# Keys at which each generation runs at half its long-sequence rate: ``rate(s) = r_inf s / (s + s_half)``
# fitted (r_inf and s_half, six points, least relative squares) on ATTN_BENCH_TFLOPS by
# ``benchmarks/fit_attention_length.py``: fa2 r_inf 351 TFLOP/s, cudnn 561, fa3 655; every point within
# 3.3 %. The Triton kernel of the same figure (146 to 378 TFLOP/s) misses by up to 17 % on this form and
# is not fitted: ``triton`` and ``ck`` (no kernel benchmark in the catalog) and a vendor with no stack
# take FlashAttention-2's value, the algorithm those kernels implement (a rule).
ATTN_HALF_KEYS = {"fa2": 402.0, "cudnn": 387.0, "fa3": 602.0}
ATTN_HALF_KEYS_RULE = ATTN_HALF_KEYS["fa2"]


@record
class GemmSku:
    """What the GEMM model needs of one SKU at one precision (base units)."""

    peak_flops: float  # dense peak of the GEMM precision, FLOP/s
    ceiling: float  # large-GEMM fraction of that peak (measured / fitted)
    hbm_bytes_per_s: float  # achievable HBM bandwidth (peak x streaming efficiency), B/s
    units: int  # compute units (CUs / SMs); 0 = unknown (no wave quantization)
    overhead_s: float  # fixed cost per kernel, s
    operand_bytes: float = 2.0  # bytes per input element, scales included (2 BF16, 1 FP8, 0.5625 NVFP4)
    # HBM bytes per element to quantize a GEMM's activation input (``mi400plan.lowp``); None: 6 B
    # (``FP8_CAST_BYTES_TRAIN``) for 1-byte operands, none for 16-bit ones
    cast_bytes: float | None = None

    @property
    def train_cast_bytes(self) -> float:
        if self.cast_bytes is not None:
            return self.cast_bytes
        return FP8_CAST_BYTES_TRAIN if self.operand_bytes == 1.0 else 0.0


def tile_fill(m: Any, n: Any, batch: Any, units: int, tile_m: int, tile_n: int) -> Any:
    """Useful fraction of the issued ``tile_m x tile_n`` tile slots over ``units`` CUs (tile and wave
    quantization, NVIDIA "Matrix Multiplication Background User's Guide"). A dimension smaller than
    the tile gets a tile cut down to it, rounded up to the ``MIN_TILE`` matrix-instruction granularity
    (the skinny kernels libraries pick for small M, e.g. decode)."""
    tile_m = np.minimum(tile_m, np.ceil(m / MIN_TILE) * MIN_TILE)
    tile_n = np.minimum(tile_n, np.ceil(n / MIN_TILE) * MIN_TILE)
    tiles = np.ceil(m / tile_m) * np.ceil(n / tile_n) * batch
    waves = np.maximum(1.0, np.ceil(tiles / units))
    return (m * n * batch) / (waves * units * tile_m * tile_n)


def wave_fill(m: Any, n: Any, batch: Any, units: int) -> Any:
    """Best quantization-adjusted fraction over the library's tile menu (``TILES``): the large tile, or
    the half-height tile at its lower per-tile efficiency when that wastes fewer CU slots (what
    hipBLASLt / cuBLAS heuristics do for GEMMs a few waves deep)."""
    if units < MIN_UNITS_FOR_WAVES:
        return np.ones_like(np.asarray(m * n * batch, dtype=np.float64))
    best = None
    for tm, tn, eff in TILES:
        f = eff * tile_fill(m, n, batch, units, tm, tn)
        best = f if best is None else np.maximum(best, f)
    return best


def gemm_math_seconds(m: Any, n: Any, k: Any, sku: GemmSku, batch: Any = 1.0) -> Any:
    """Compute time of a GEMM, ``2 M N K batch / (peak x ceiling x wave_fill)``, seconds (module
    docstring); no memory term, no overhead. ``serve`` pairs it with its own byte count (weights at
    the serving format's width)."""
    m, n, k = (np.maximum(np.asarray(x, dtype=np.float64), 1.0) for x in (m, n, k))
    return 2.0 * m * n * k * batch / (sku.peak_flops * sku.ceiling * wave_fill(m, n, batch, sku.units))


def gemm_seconds(m: Any, n: Any, k: Any, sku: GemmSku, batch: Any = 1.0) -> Any:
    """Roofline time of a GEMM without the per-kernel overhead, seconds (module docstring)."""
    t_math = gemm_math_seconds(m, n, k, sku, batch)
    m, n, k = (np.maximum(np.asarray(x, dtype=np.float64), 1.0) for x in (m, n, k))
    bytes_moved = ((m * k + k * n) * sku.operand_bytes + 2.0 * m * n) * batch
    return np.maximum(t_math, bytes_moved / sku.hbm_bytes_per_s)


def gemm_time(m: Any, n: Any, k: Any, sku: GemmSku, batch: Any = 1.0) -> Any:
    """Time of one GEMM kernel ``[M, K] x [K, N]`` (``batch`` copies), overhead included, seconds."""
    return gemm_seconds(m, n, k, sku, batch) + sku.overhead_s


def gemm_efficiency(m: Any, n: Any, k: Any, sku: GemmSku, batch: Any = 1.0) -> Any:
    """Achieved fraction of the dense peak, ``2 M N K batch / (t x peak)`` (always <= ``ceiling``)."""
    m, n, k = (np.maximum(np.asarray(x, dtype=np.float64), 1.0) for x in (m, n, k))
    return 2.0 * m * n * k * batch / (gemm_time(m, n, k, sku, batch) * sku.peak_flops)


# HBM bytes per element to quantize a GEMM input to FP8 with per-tensor current scaling (Transformer
# Engine's ``Float8CurrentScalingQuantizer``, the FP8 recipe of the Megatron-Bridge runs): one pass reads
# the BF16 tensor for its amax (2 B), a second reads it again (2 B) and writes the row-wise FP8 copy
# (1 B) and, for the weight gradient's transposed operand, the column-wise one (1 B). Inference
# quantization writes no transposed copy: 5 B (``tests/test_gemm_vendor.py`` checks it against vLLM's
# GEMM timed with its quantization kernel).
FP8_CAST_BYTES_TRAIN = 6.0
FP8_CAST_BYTES_INFER = 5.0


def fp8_cast_seconds(elems: Any, sku: GemmSku, bytes_per_elem: float = FP8_CAST_BYTES_TRAIN) -> Any:
    """Seconds to quantize ``elems`` BF16 elements to FP8 (streaming, at the achievable HBM rate)."""
    return np.asarray(elems, dtype=np.float64) * bytes_per_elem / sku.hbm_bytes_per_s


def train_gemm_seconds(m: Any, n: Any, k: Any, sku: GemmSku, batch: Any = 1.0) -> tuple[Any, Any]:
    """Forward and backward (data + weight gradient) time of a linear layer, seconds, no overhead.

    Forward ``Y[M,N] = X[M,K] W[K,N]``; backward ``dX[M,K] = dY[M,N] W^T`` (dgrad: M x K, inner N)
    and ``dW[K,N] = X^T dY`` (wgrad: K x N, inner M), the two GEMMs every framework launches. In a
    low-precision recipe (FP8, MXFP8, NVFP4, MXFP4) each GEMM's activation input is quantized first:
    ``X`` before the forward and ``dY`` before the backward, at the recipe's ``GemmSku.train_cast_bytes``
    (:func:`fp8_cast_seconds`; ``mi400plan.lowp``; the weights' narrow copies are made once a step).
    """
    fwd = gemm_seconds(m, n, k, sku, batch)
    bwd = gemm_seconds(m, k, n, sku, batch) + gemm_seconds(k, n, m, sku, batch)
    cast = sku.train_cast_bytes
    if cast > 0.0:
        mm, nn, kk = (np.maximum(np.asarray(x, dtype=np.float64), 1.0) for x in (m, n, k))
        fwd = fwd + fp8_cast_seconds(mm * kk * batch, sku, cast)
        bwd = bwd + fp8_cast_seconds(mm * nn * batch, sku, cast)
    return fwd, bwd


@record
class AttnSku:
    """What the flash-attention model needs (base units)."""

    peak_flops: float  # dense BF16 peak, FLOP/s (attention runs in BF16 also in FP8 recipes)
    efficiency: float  # measured fraction of that peak on long causal sequences
    units: int  # compute units; 0 = unknown
    half_keys: float = 0.0  # keys at which the kernel runs at half its long-sequence rate; 0 = no length factor


def attention_half_keys(kernel: str | None) -> float:
    """``s_half`` of an attention kernel generation (``ATTN_HALF_KEYS``; other kernels and none: the rule)."""
    return ATTN_HALF_KEYS.get(kernel or "", ATTN_HALF_KEYS_RULE)


def attention_length_factor(keys: Any, half_keys: float) -> Any:
    """Fraction of its long-sequence rate a flash-attention kernel reaches when each query loops over
    ``keys`` keys: ``keys / (keys + s_half)`` (module docstring; FA3 paper Figure 5, ``ATTN_BENCH_TFLOPS``).
    FlashAttention-2 (s_half 402): 0.836 at 2,048 keys, 0.953 at 8,192, 0.997 at 131,072."""
    k = np.maximum(np.asarray(keys, dtype=np.float64), 1.0)
    return k / (k + half_keys) if half_keys > 0.0 else np.ones_like(k)


def attention_fill(items: Any, units: int) -> Any:
    """Useful fraction of the issued (batch x head x query-block) work-item slots (wave quantization)."""
    items = np.maximum(np.asarray(items, dtype=np.float64), 1.0)
    if units < MIN_UNITS_FOR_WAVES:
        return np.ones_like(items)
    return items / (np.ceil(items / units) * units)


def flash_attention_seconds(flops_fwd: Any, items: Any, sku: AttnSku, keys: Any = None) -> tuple[Any, Any]:
    """Forward and backward time of flash attention doing ``flops_fwd`` forward matmul FLOPs, seconds.

    ``items`` = sequences x heads x query blocks on this GPU (the kernel's grid). Backward does
    ``ATTN_BWD_OVER_FWD`` times the forward FLOPs (FlashAttention-2, section 3.1.2). ``keys``: the keys
    each query loops over, which set the kernel's rate (:func:`attention_length_factor`); None: the
    long-sequence rate.
    """
    eff = sku.efficiency * attention_fill(items, sku.units)
    if keys is not None:
        eff = eff * attention_length_factor(keys, sku.half_keys)
    t = np.asarray(flops_fwd, dtype=np.float64) / (sku.peak_flops * eff)
    return t, ATTN_BWD_OVER_FWD * t


# --- the GEMMs of one transformer training micro-batch -------------------------------------------


@record
class LayerShapes:
    """Unsplit GEMM widths of a model (elements per token); TP/EP/ETP splits are applied per candidate."""

    hidden: int
    attn_in: float  # QKV projection output width (MLA: the down/up-projection chain, same FLOPs)
    attn_out_k: float  # output projection input width (heads x v_head_dim)
    ffn_in: float  # dense FFN first GEMM output width (2 x ffn when gated)
    ffn_out_k: float  # dense FFN second GEMM input width (ffn)
    shared_in: float  # shared experts, first GEMM width (0: none), TP-split
    shared_out_k: float
    expert_in: float  # one routed expert, first GEMM width (ETP-split)
    expert_out_k: float
    experts: int  # routed experts (0: dense model)
    top_k: int
    vocab: int
    heads: int
    qk_dim: int  # per-head query/key width
    v_dim: int  # per-head value width
    # MLA up-projections (``params.mla_up_projection_widths``): q_lora -> q_up, kv_lora -> kv_up; 0 without MLA
    q_lora: int = 0
    q_up: int = 0
    kv_lora: int = 0
    kv_up: int = 0
    # Routed tokens an expert GEMM runs on over the balanced share: the capacity factor where expert inputs
    # are padded to capacity, 1 dropless (``moe_dispatch.expert_padding``).
    expert_pad: float = 1.0


def model_shapes(model: Any, attention_params_per_layer: float) -> LayerShapes:
    """GEMM widths from the architecture (``ModelSpec``); the attention input width is taken from the
    per-layer attention weight count (``params``) so MLA's projection chain keeps its FLOPs."""
    h, a, moe = model.hidden_size, model.attention, model.moe
    gated = 2 if model.ffn_kind == "swiglu" else 1
    if a.kind == "mla":
        qk, vd = (a.qk_nope_head_dim or 0) + (a.qk_rope_head_dim or 0), a.v_head_dim or 0
    else:
        qk = vd = a.head_size(h)
    out_k = a.num_heads * vd
    shared = (moe.num_shared_experts * (moe.shared_expert_ffn_dim or moe.expert_ffn_dim)) if moe else 0
    return LayerShapes(
        hidden=h, attn_in=max(1.0, attention_params_per_layer / h - out_k), attn_out_k=out_k,
        ffn_in=gated * model.ffn_dim, ffn_out_k=model.ffn_dim, shared_in=gated * shared, shared_out_k=shared,
        expert_in=gated * (moe.expert_ffn_dim if moe else 0), expert_out_k=moe.expert_ffn_dim if moe else 0,
        experts=moe.num_experts if moe else 0, top_k=moe.top_k if moe else 0, vocab=model.vocab_size,
        heads=a.num_heads, qk_dim=qk, v_dim=vd,
        **dict(zip(("q_lora", "q_up", "kv_lora", "kv_up"), mla_up_projection_widths(model))),
    )


def _mlp(tok: Any, w_in: float, w_out_k: float, split: Any, h: int, sku: GemmSku, batch: Any = 1.0) -> tuple[Any, Any]:
    """Forward and backward seconds of a two-GEMM MLP block (column- then row-parallel over ``split``)."""
    f1, b1 = train_gemm_seconds(tok, w_in / split, h, sku, batch)
    f2, b2 = train_gemm_seconds(tok, h, w_out_k / split, sku, batch)
    return f1 + f2, b1 + b2


def _expert_tokens(sh: LayerShapes, tok: Any, tp: Any, ep: Any, etp: Any, sp: Any) -> Any:
    """Tokens each local expert runs on: ``EP x ETP x routed tokens x top_k / E`` (balanced routing;
    routed tokens per rank = ``tok / TP`` with sequence parallelism), times ``expert_pad`` where the
    inputs are padded to a capacity factor."""
    return ep * etp * (tok / np.where(sp, tp, 1.0)) * sh.top_k / sh.experts * sh.expert_pad


def layer_gemm_seconds(sh: LayerShapes, tok: Any, tp: Any, ep: Any, etp: Any, sp: Any, sku: GemmSku) -> tuple[Any, Any, Any, Any]:
    """Forward/backward GEMM seconds of one dense layer and of one MoE layer for ``tok`` tokens per TP group.

    Megatron-style splits: QKV and FFN-in column-parallel, attention-out and FFN-out row-parallel
    over TP (Shoeybi et al. 2019, section 3); routed experts as one grouped GEMM per projection over
    the ``E / EP`` local experts, each receiving ``EP x ETP x routed tokens x top_k / E`` tokens
    (balanced routing; routed tokens per rank = ``tok / TP`` with sequence parallelism), width split
    by ETP; shared experts TP-split like a dense MLP.
    """
    h = sh.hidden
    qf, qb = train_gemm_seconds(tok, sh.attn_in / tp, h, sku)
    of, ob = train_gemm_seconds(tok, h, sh.attn_out_k / tp, sku)
    mf, mb = _mlp(tok, sh.ffn_in, sh.ffn_out_k, tp, h, sku)
    dense_f, dense_b = qf + of + mf, qb + ob + mb
    if sh.experts == 0:
        return dense_f, dense_b, dense_f, dense_b
    ef, eb = _mlp(_expert_tokens(sh, tok, tp, ep, etp, sp), sh.expert_in, sh.expert_out_k, etp, h, sku,
                  batch=sh.experts / ep)
    sf, sb = _mlp(tok, sh.shared_in, sh.shared_out_k, tp, h, sku) if sh.shared_in else (0.0, 0.0)
    return dense_f, dense_b, qf + of + ef + sf, qb + ob + eb + sb


def recompute_gemm_seconds(sh: LayerShapes, tok: Any, tp: Any, ep: Any, etp: Any, sp: Any, sku: GemmSku,
                           modules: tuple[str, ...]) -> tuple[Any, Any]:
    """Forward GEMM seconds that selective recomputation of ``modules`` runs again in one dense and in
    one MoE layer (Megatron-Core ``recompute_modules``; the FLOPs are
    ``params.selective_recompute_flops_per_token``): "mla_up_proj" the MLA up-projections (TP-split
    heads), "mlp" a dense layer's FFN, "moe" the routed (as :func:`layer_gemm_seconds` splits them)
    and shared experts, "shared_experts" the shared experts alone. "core_attn" is attention, not a
    GEMM (:func:`attention_seconds`)."""
    h = sh.hidden
    up = 0.0
    if "mla_up_proj" in modules and sh.kv_up:
        up = train_gemm_seconds(tok, sh.kv_up / tp, sh.kv_lora, sku)[0]
        if sh.q_up:
            up = up + train_gemm_seconds(tok, sh.q_up / tp, sh.q_lora, sku)[0]
    dense = up + (_mlp(tok, sh.ffn_in, sh.ffn_out_k, tp, h, sku)[0] if "mlp" in modules else 0.0)
    if sh.experts == 0:
        return dense, dense
    moe = up
    shared = _mlp(tok, sh.shared_in, sh.shared_out_k, tp, h, sku)[0] if sh.shared_in else 0.0
    if "moe" in modules:
        tok_e = _expert_tokens(sh, tok, tp, ep, etp, sp)
        moe = moe + _mlp(tok_e, sh.expert_in, sh.expert_out_k, etp, h, sku, batch=sh.experts / ep)[0] + shared
    elif "shared_experts" in modules:
        moe = moe + shared
    return dense, moe


def head_gemm_seconds(sh: LayerShapes, tok: Any, tp: Any, sku: GemmSku) -> tuple[Any, Any]:
    """Forward/backward seconds of the LM-head GEMM (vocabulary split over TP, Megatron-LM)."""
    return train_gemm_seconds(tok, sh.vocab / tp, sh.hidden, sku)


def attention_seconds(sh: LayerShapes, mb: Any, seq: float, cp: Any, tp: Any, flash: bool,
                      gsku: GemmSku, asku: AttnSku, span: float | None = None) -> tuple[Any, Any]:
    """Forward/backward seconds of one layer's attention core for ``mb`` sequences on one GPU.

    Flash (causal): half of the ``2 s^2 heads (qk + v)`` score/context FLOPs per sequence are done
    (the masked blocks are skipped), split over CP ranks (load-balanced) and TP (heads), at the
    attention efficiency. Packed sequences (``span``, ``packing.attention_span``): each of a row's
    ``s`` queries attends within its own document, ``span`` keys on average instead of ``s``, so the
    work is ``s x span`` (``span`` = ``s``: one sequence a row); the kernel's rate is that of ``span`` keys
    (:func:`attention_length_factor`; with CP the keys of the whole sequence, as a load-balanced
    all-gather kernel loops over them). Without flash: the two batched GEMMs
    ``Q K^T`` (s x s, inner qk) and ``P V`` (s x v, inner s) over ``mb x heads / TP`` copies, the full
    (unmasked) matrix, at the GEMM model (Megatron-LM 2021's unfused path).
    """
    heads = sh.heads / tp
    q_len = seq / cp
    if flash:
        keys = seq if span is None else span
        flops = mb * heads * q_len * keys * (sh.qk_dim + sh.v_dim)  # 2 s_q s (qk + v) / 2 (causal)
        items = mb * heads * np.ceil(q_len / ATTN_BLOCK_Q)
        return flash_attention_seconds(flops, items, asku, keys)
    batch = mb * heads
    sf, sb = train_gemm_seconds(q_len, seq, sh.qk_dim, gsku, batch)
    cf, cb = train_gemm_seconds(q_len, sh.v_dim, seq, gsku, batch)
    return sf + cf, sb + cb
