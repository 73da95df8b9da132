"""Parallelism-layout search and the training step-time model behind ``mi400plan sweep``.

Candidates are numpy arrays (one element per layout, never one Python object per layout). They are
built in two stages: a *structural* grid over (TP, PP, VPP, CP, EP, ETP), checked against the
divisibility rules, then the surviving structures are expanded over (ZeRO stage, micro-batch,
recompute, sequence parallel) and evaluated in chunks. The expansion is a broadcast grid (one axis
per inner dimension, see ``grid_layouts``), so every term is computed at the shape of the
dimensions it depends on: collective times of the DP groups once per structure, those of the TP,
CP, EP and PP groups once per structure and micro-batch (and SP), never once per ZeRO x recompute
copy. Each element's arithmetic is the same as for a flat list of layouts, so results are
bit-identical to evaluating one layout at a time. Every candidate is counted exactly once:
either valid, or rejected under the *first* rule it breaks (order of ``RULES``), so
``evaluated == valid + sum(rejected)``.

Rank placement (Megatron-Core style, replica contiguous, data parallel outermost)::

    rank = tp_i + TP*(cp_i + CP*(f_i + F*(pp_i + PP*o_i)))

TP innermost (stride 1), then CP (stride TP), then ``F`` folded data-parallel ranks that exist so the
expert grid (ETP x EP, contiguous, stride ETP) fits inside one block of ``TP*CP*F = lcm(TP*CP,
EP*ETP)`` GPUs (EP folded over DP x CP, as Megatron-Core's MoE parallel folding does), then PP
(stride ``TP*CP*F``), then the outer data-parallel index ``o`` (stride = replica = ``TP*CP*F*PP``).
Each group's collectives go through ``comms.placed_collective_time`` with that stride, so a group
that spans more than the scale-up domain pays scale-out (or hierarchical) prices.

Step-time model (per GPU, one optimizer step; every term is reported):

* compute: every GEMM of a layer at its own (M, N, K) for the candidate's TP/EP/ETP split and
  micro-batch tokens, forward, data and weight gradient (+ forward again under full recompute),
  priced by the shape-aware GEMM model (``mi400plan/gemm.py``: roofline, tile and wave
  quantization, saturating to ``peak(precision) x matmul efficiency``); see ``compute_seconds``;
* attention: the attention core, flash attention at its own efficiency on the causal work done
  (unfused score GEMMs without flash attention);
* GEMM overhead: ``gemm_overhead_us`` per GEMM kernel (launch, prologue/epilogue), every local
  expert's GEMMs launched on their own (``moe_gemms_fwd_per_layer``);
* host: where the MoE layers' host-bound work (``mi400plan.moe_dispatch``: the local experts' GEMMs
  prepared on the host, ``expert_host_us`` each, unless a full graph captures a padded layer) takes the
  host longer than the micro-batch takes the GPU (``expert_host_seconds``), the difference;
* memory-bound work (norms, residual adds, activation functions, rotary, MoE token permutation)
  at ``HBM bandwidth x hbm efficiency``; optimizer step likewise;
* TP/SP collectives per layer, CP key/value exchanges, EP dispatch + combine (forward and backward;
  bytes and collective by token dispatcher and capacity factor, ``moe_dispatch.dispatch_requests``),
  PP point-to-point, DP gradient reduce-scatter/all-reduce and ZeRO parameter all-gathers
  (ZeRO-3/FSDP: every micro-batch);
* overlap (documented defaults, Megatron-Core / DeepSpeed behaviour): ZeRO-0/1 gradient
  all-reduce / reduce-scatter runs once per step, chunk by chunk during the last backwards, and
  ZeRO-1/2 parameter all-gathers once per step, chunk by chunk ahead of the first forwards
  (``chunked_exposure``: one micro-batch's backward/forward without interleaving, up to
  ``(v-1)*pp + 1`` chunk-times with it); ZeRO-2 reduce-scatters every micro-batch's gradients,
  hidden behind that micro-batch's compute; ZeRO-3/FSDP gathers each layer's parameters before its
  forward and its backward and reduce-scatters its gradients, with prefetch hiding them behind the
  neighbouring layer's compute (``fsdp``); CP ring exchanges hide
  behind the attention-core compute (``overlap_cp``, on: Megatron-Core / TE ring attention; off:
  Llama 3's all-gather CP); TP and EP traffic is exposed unless ``overlap_tp`` /
  ``overlap_ep`` is set (then it hides behind the micro-batch's GEMM time); PP transfers of the
  interleaved schedule hide behind the next chunk's compute except the ``2 (pp - 1)`` fill/drain
  transfers (``overlap_pp``, on: Megatron-LM's default ``overlap_p2p_comm``; off: every transfer
  exposed, Megatron-LM 2021); those of the plain 1F1B schedule (VPP 1) are always exposed;
* pipeline bubble of interleaved 1F1B: ``(pp - 1) / vpp`` micro-batch times, i.e. a fraction
  ``(p - 1) / (m * v)`` of the ``m`` micro-batches (Narayanan et al. 2021, section 2.2.2); of DualPipe
  (``recipe.pp_schedule``): ``(pp/2 - 1) x 2/3`` (DeepSeek-V3 report Table 2, ``mi400plan.dualpipe``).

``step = (m + (pp-1)/vpp) * t_microbatch + exposed DP + optimizer``, where ``t_microbatch`` is the
sum of the per-micro-batch terms; hence ``step >= compute-only time`` always, and
``MFU = model FLOPs / (step x GPUs x peak) <= 1``: each GEMM runs at most at the ceiling, and flash
attention does 3.5/2 of the half (causal) of the 3x forward FLOPs the MFU convention counts, so its
counted rate is 3 / 1.75 = 1.71 x its efficiency, under the peak for any attention efficiency up to
0.58 (the bundled profiles and the 0.495 x ceiling rule give at most about 0.37).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import numpy as np

from mi400plan import gemm
from mi400plan.dualpipe import DUALPIPE
from mi400plan.dualpipe import RULE as DUALPIPE_RULE
from mi400plan.dualpipe import RULE_TEXT as DUALPIPE_RULE_TEXT
from mi400plan.dualpipe import breaks_rule as dualpipe_breaks
from mi400plan.dualpipe import bubble_microbatches as dualpipe_bubble
from mi400plan.finetune import (
    LoraSpec, adapter_kernels_fwd_per_layer, adapter_params, check_lora, lora_gemm_seconds, lora_model_flops_per_token,
    lora_of,
)
from mi400plan.fsdp import fsdp_step_terms, fsdp_unit_bytes
from mi400plan.memory import forward_again, recompute_share, stage_count_ratios, stage_slot_table, stage_work_ratio
from mi400plan.moe_dispatch import (
    dispatch_requests, dispatch_seconds, dispatcher_rule, expert_padding, moe_host_seconds, permute_elems_per_token,
)
from mi400plan.params import (
    ParamCounts, attention_flops_per_token, model_flops_per_token, selective_recompute_flops_per_token,
)
from mi400plan.offload import RULE as OFFLOAD_RULE
from mi400plan.offload import RULE_TEXT as OFFLOAD_RULE_TEXT
from mi400plan.packing import PackedDocs, attention_span
from mi400plan.records import record
from mi400plan.specs.layout import DEFAULT_RECOMPUTE_MODULES
from mi400plan.specs.model import ModelSpec

# --- rules --------------------------------------------------------------------------------------

RULES: dict[str, str] = {
    "world-replica": "world size is not a whole multiple of the replica (TP x CP x fold x PP)",
    "tp-heads": "TP does not divide the attention heads / KV heads",
    "pp-layers": "PP x VPP does not divide the layers",
    "vpp-needs-pp": "virtual stages (VPP > 1) need PP >= 2",
    "cp-seq": "2 x CP does not divide the sequence length (load-balanced causal split)",
    "ep-experts": "EP does not divide the routed experts",
    "etp-ffn": "ETP does not divide the expert FFN width",
    "moe-tp-needs-sp": "an MoE model with TP > 1 needs sequence parallel (Megatron-Core rule)",
    "sp-needs-tp": "sequence parallel needs TP > 1",
    "batch-dp-mb": "DP x micro-batch does not divide the global batch",
    "vpp-microbatches": "the interleaved schedule needs micro-batches per replica to be a multiple of PP",
    DUALPIPE_RULE: DUALPIPE_RULE_TEXT,
    OFFLOAD_RULE: OFFLOAD_RULE_TEXT,
    "memory": "does not fit in HBM",
}
RULE_ORDER = tuple(RULES)

RECOMPUTE_LABELS = ("none", "selective", "full")

# GEMM kernels per layer per micro-batch, forward: QKV, attention core (one fused flash-attention
# kernel), output projection, FFN in (gate+up fused), FFN out = 5; backward: 2 per forward GEMM
# (data and weight gradients) = 10. Full recompute repeats the forward. An MoE layer's FFN is
# ``moe_gemms_fwd_per_layer``.
GEMMS_FWD_PER_LAYER = 5


def expert_gemms_fwd_per_layer(T: "ModelTerms", ep: Any) -> Any:
    """GEMM kernels of one MoE layer's local experts in the forward on one GPU: FFN in and out of each
    of the E / EP local experts, ``2 E / EP``."""
    return 2.0 * T.shapes.experts / np.asarray(ep, dtype=np.float64)


def lora_kernels(T: "ModelTerms", layers: Any, moe_layers: Any, layer_ratio: Any, moe_ratio: Any) -> Any:
    """Forward GEMM kernels of the LoRA adapters on the slowest stage per micro-batch
    (``finetune.adapter_kernels_fwd_per_layer``)."""
    m, lora = T.lora_model, T.lora
    assert lora is not None
    dense = (layers - moe_layers) * adapter_kernels_fwd_per_layer(m, lora, False) * layer_ratio
    return dense + moe_layers * adapter_kernels_fwd_per_layer(m, lora, True) * moe_ratio


def moe_gemms_fwd_per_layer(T: "ModelTerms", ep: Any) -> Any:
    """GEMM kernels of one MoE layer's forward on one GPU: QKV, attention core and output projection
    (3), the router (1), the shared experts' FFN in and out (2 where there are any), and FFN in and
    out of every local expert (``expert_gemms_fwd_per_layer``). Transformer Engine's grouped linear,
    which Megatron-Core's grouped-GEMM experts run on, launches one cuBLAS GEMM per expert over its
    compute streams (``nvte_multi_stream_cublas_gemm``: "For now, we only have multi-stream cublas
    backend"), so the per-kernel overhead is paid E / EP times per projection, not once."""
    return 4.0 + 2.0 * T.shared_tp + expert_gemms_fwd_per_layer(T, ep)


def expert_host_seconds(T: "ModelTerms", ep: Any, again: Any, moe_layers: Any, hw: "Hardware",
                        capacity_factor: float | None = None) -> Any:
    """Host (CPU) seconds of one micro-batch's MoE layers on one GPU: ``moe_layers x (3 + again)`` passes
    (forward, data- and weight-gradient GEMMs, the forward again where the layer is recomputed) of each
    layer's host-bound part (``moe_dispatch.moe_host_seconds``: ``2 E / EP`` expert GEMMs prepared at
    ``hw.expert_host_s`` each, none where a graph captures the layer). Megatron-Core's token dispatchers
    read the per-expert token counts back to the host (``moe_dispatch.DispatcherRule.host_sync``), so
    the GPU cannot be fed ahead of that work: ``step_time`` runs a micro-batch at
    ``max(GPU seconds, host seconds)``."""
    local = T.shapes.experts / np.asarray(ep, dtype=np.float64)
    per_pass = moe_host_seconds(local, hw.expert_host_s, hw.cuda_graphs, capacity_factor)
    return moe_layers * per_pass * (3.0 + again)


# Elementwise HBM traffic per token per layer, forward, in activation elements (bytes = x
# activation_bytes): two norms (read + write h each: 4h), two residual adds (2 reads + 1 write: 6h);
# activation function: SwiGLU reads 2 x ffn and writes ffn (3 ffn), GELU reads and writes ffn
# (2 ffn); rotary on Q and K (read + write: 2 x (q + kv) widths). Backward moves twice the forward
# bytes (gradient w.r.t. input and the saved input). Softmax is fused into flash attention (no
# extra HBM pass). Bias and dropout passes are not counted (modern LLM pre-training has neither).
NORM_RESIDUAL_ELEMS_PER_H = 10
# Without flash attention (``recipe.flash_attention = False``, e.g. Megatron-LM 2021) the s x s
# attention scores go through HBM: per token per layer ``heads x s`` elements. The QK^T GEMM's write
# and the AV GEMM's read belong to those GEMMs (their time is in the calibrated GEMM rate); the extra
# passes are the fused scale-mask-softmax's read and write (2); attention dropout adds read + write
# + a 1-byte mask (2.5 element-equivalents at 2 bytes).
SCORE_PASSES = 2.0
SCORE_DROPOUT_PASSES = 2.5
# Dropout on the two residual branches (``recipe.dropout``): read + write + mask, 2.5h each.
DROPOUT_ELEMS_PER_H = 5.0
# Adam(W) optimizer step HBM bytes per locally updated parameter: read fp32 master (4), fp32 grad
# (4), m (4), v (4); write master (4), m (4), v (4), 16-bit working copy (2) = 30 B.
OPTIMIZER_BYTES_PER_PARAM = 30.0
# Flash attention's fraction of peak relative to the BF16 large-GEMM ceiling where a profile gives
# no measured ``attention`` efficiency: the ratio fitted on H100 (Llama 3 405B, Table 4: attention
# 0.27 / ceiling 0.545 = 0.495, ``benchmarks/fit_gemm.py``), the only calibration run dominated by
# flash attention. A documented rule, not a measurement of the other SKUs.
ATTN_OVER_MATMUL = 0.495


def mtp_extra_flops_per_token(hidden: int, vocab: int) -> float:
    """FLOPs per token (forward + backward) of one multi-token-prediction module beyond its transformer
    layer (which the workload counts as one more layer): the ``2h -> h`` projection of the concatenated
    normalised hidden state and next-token embedding, ``6 x 2h x h``, and the shared output head's second
    pass, ``6 x V x h`` (DeepSeek-V3, arXiv 2412.19437, 2024-12, sec. 2.2: projection matrix ``M_k`` of
    ``d x 2d``, output head shared with the main model). DeepSeek-V3: 6 x 2 x 7,168^2 = 0.617 GFLOP and
    6 x 129,280 x 7,168 = 5.560 GFLOP a token."""
    return 6.0 * 2.0 * hidden * hidden + 6.0 * vocab * hidden


# --- inputs -------------------------------------------------------------------------------------


@record
class Hardware:
    """One SKU as the search sees it, in base units."""

    name: str
    peak_flops: float  # FLOP/s, dense, at the chosen precision
    matmul_eff: float  # fraction of peak on large GEMMs
    gemm_overhead_s: float  # seconds per GEMM kernel
    hbm_bytes: float  # bytes of HBM per GPU
    hbm_bw: float  # B/s peak HBM bandwidth
    hbm_eff: float  # fraction of HBM peak for streaming kernels
    scale_up: Any  # comms tier parameters (scale-up)
    scale_out: Any  # comms tier parameters (scale-out)
    domain: int  # GPUs in one scale-up domain
    gpus_per_rack: int  # for per-rack normalisation
    units: int = 0  # compute units (CUs / SMs) for wave quantization; 0 = unknown (``gemm``)
    attn_eff: float = 0.0  # flash-attention fraction of the BF16 peak; 0 = ``ATTN_OVER_MATMUL`` x matmul_eff
    peak_bf16_flops: float = 0.0  # BF16 dense peak for attention, FLOP/s; 0 = peak_flops
    operand_bytes: float = 2.0  # GEMM input element size, scales included (1 for FP8, ~0.56 for NVFP4)
    cast_bytes: float | None = None  # HBM bytes per element to quantize a GEMM input (``lowp``); None: gemm's rule
    # BF16 large-GEMM ceiling, for the LM head of FP8 training (``head_gemm_sku``); 0 = matmul_eff
    matmul_bf16_eff: float = 0.0
    host_bw: float = 0.0  # B/s per direction per GPU to host memory (activation offloading); 0 = unknown
    expert_host_s: float = 0.0  # host seconds per local-expert GEMM (``expert_host_seconds``); 0 = none
    moe_dispatcher: str = "alltoall"  # MoE token dispatcher of the stack (``moe_dispatch.DISPATCHERS``)
    cuda_graphs: str = "none"  # CUDA/HIP graph scope of the stack: none, partial, full
    fp8_recipe: str = "none"  # FP8 scaling recipe of the stack (blockwise: FP8 token dispatch, ``moe_dispatch``)
    attention_kernel: str = ""  # attention kernel generation of the stack (``gemm.attention_half_keys``); "": none named

    def gemm_sku(self) -> "gemm.GemmSku":
        """The GEMM model's view of this SKU (``mi400plan.gemm``)."""
        return gemm.GemmSku(self.peak_flops, self.matmul_eff, self.hbm_bw * self.hbm_eff, self.units,
                            self.gemm_overhead_s, self.operand_bytes, self.cast_bytes)

    def head_gemm_sku(self) -> "gemm.GemmSku":
        """The LM head's GEMM: BF16 in FP8 training. Megatron-Core builds the output layer as its own
        ``tensor_parallel.ColumnParallelLinear``, not a Transformer Engine module, so ``fp8_autocast``
        leaves it in the parameters' BF16 (``megatron/core/models/gpt/gpt_model.py``); torchtitan's
        float8 conversion skips ``output`` by default likewise; the NVFP4 recipe keeps it in BF16 too (arXiv
        2509.25149). Also the block GEMMs a low-precision recipe keeps in BF16. BF16 training: ``gemm_sku``."""
        if self.operand_bytes >= 2.0 or not self.peak_bf16_flops:
            return self.gemm_sku()
        return gemm.GemmSku(self.peak_bf16_flops, self.matmul_bf16_eff or self.matmul_eff, self.hbm_bw * self.hbm_eff,
                            self.units, self.gemm_overhead_s, 2.0)

    def attn_sku(self) -> "gemm.AttnSku":
        """The flash-attention model's view of this SKU (``mi400plan.gemm``)."""
        peak = self.peak_bf16_flops or self.peak_flops
        eff = self.attn_eff or ATTN_OVER_MATMUL * self.matmul_eff * self.peak_flops / peak
        return gemm.AttnSku(peak, min(eff, 1.0), self.units, gemm.attention_half_keys(self.attention_kernel))


@record
class Workload:
    model: ModelSpec
    counts: ParamCounts
    recipe: Any  # specs.layout.TrainRecipe
    seq_len: int
    global_batch: int  # sequences per optimizer step

    @property
    def param_wire_bytes(self) -> float:
        """Bytes a parameter takes in the DP parameter gathers (ZeRO-1's after the optimizer step,
        ZeRO-3's per unit): the working copy's dtype; with FP8 parameters (``recipe.fp8_params``,
        Megatron-Core ``--fp8-param-gather``, which gathers the FP8 tensors) the block GEMM weights at
        ``fp8_copy_bytes`` and the rest (embedding, head, norms, routers) at the working dtype,
        averaged over the whole model's parameters (a stage holding the embedding gathers a little more)."""
        r = self.recipe
        if not getattr(r, "fp8_params", False):
            return float(r.param_bytes)
        c = self.counts
        gemm_w = sum(x.attention + x.mlp_dense + x.shared_experts + x.routed_experts for x in c.layers)
        return float(r.param_bytes) + (float(r.fp8_copy_bytes) - float(r.param_bytes)) * gemm_w / c.total


@record
class SearchOptions:
    """Search space and model switches. ``None`` for a dimension means "search it"."""

    tp: tuple[int, ...] | None = None
    pp: tuple[int, ...] | None = None
    vpp: tuple[int, ...] | None = None
    cp: tuple[int, ...] | None = None
    ep: tuple[int, ...] | None = None
    etp: tuple[int, ...] | None = None
    zero: tuple[int, ...] = (0, 1, 2, 3)
    micro_batch: tuple[int, ...] = (1, 2, 4, 8)
    recompute: tuple[int, ...] = (0, 1, 2)
    sequence_parallel: tuple[int, ...] = (0, 1)
    max_tp: int = 64
    max_cp: int = 32
    max_vpp: int | None = None  # None: every VPP that divides a stage's layers
    overlap_tp: bool = False
    overlap_ep: bool = False
    overlap_dp: bool = True  # False: gradient reduction and parameter gathers run after backward (Megatron-LM 2021)
    # True (the default): PP point-to-point of the interleaved schedule (VPP > 1) runs asynchronously
    # behind the next chunk's compute, except the 2 (pp - 1) transfers of pipeline fill and drain.
    # This is Megatron-LM's training default: ``megatron/training/arguments.py`` defines
    # ``--no-overlap-p2p-communication`` (``action='store_false'``, ``dest='overlap_p2p_comm'``), so
    # ``overlap_p2p_comm`` is on unless that flag is given; ``validate_args`` forces it off for the
    # non-interleaved schedule, and ``--overlap-p2p-communication-warmup-flush`` (off by default)
    # would be needed to overlap warmup and flush too. Llama 3 likewise runs "asynchronous
    # point-to-point communication" (arXiv 2407.21783, section 3.3.2). VPP 1 is unaffected either way.
    # False: every transfer exposed, as in Megatron-LM 2021 (Narayanan et al., arXiv 2104.04473).
    overlap_pp: bool = True
    # CP key/value exchanges hide behind the attention-core compute (Megatron-Core / Transformer
    # Engine ring attention overlaps the next block's send/receive with the current block). False:
    # exposed, as in the all-gather-based CP of Llama 3 (arXiv 2407.21783, section 3.3.2: "the
    # all-gather communication latency is exposed in the critical path").
    overlap_cp: bool = True
    # Pipeline split that counts the input embedding and the loss (LM head) as one layer each
    # (Megatron-Core ``--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split``;
    # Llama 3 "reduce one Transformer layer each from the first and the last stages"), so PP x VPP
    # may divide layers + 2 instead of the layers. Off by default, as in Megatron-Core.
    split_embedding_loss: bool = False
    # Uneven pipeline split (Megatron-Core ``--decoder-first-pipeline-num-layers`` /
    # ``--decoder-last-pipeline-num-layers``): when PP x VPP does not divide the layers, the first and
    # the last stage hold fewer layers than the others (``pipeline.uneven_stage_layers``), so layer
    # counts with awkward factors (DeepSeek-V3's 61) still run at PP 8 or 16; with VPP, where that
    # cannot hold, a balanced custom layout (``pipeline.layout_chunk_layers``). On by default.
    uneven_pp: bool = True
    chunk: int = 1 << 19  # candidates evaluated per numpy chunk (bounds memory)


# --- candidate generation -----------------------------------------------------------------------


def divisors(n: int, limit: int | None = None) -> list[int]:
    """Positive divisors of ``n`` up to ``limit`` (ascending)."""
    from mi400plan.intmath import divisors as bounded_divisors

    return bounded_divisors(n, limit)


def powers_of_two(limit: int) -> list[int]:
    out, p = [], 1
    while p <= limit:
        out.append(p)
        p *= 2
    return out


def dimension_values(model: ModelSpec, seq_len: int, world: int, opts: SearchOptions) -> dict[str, list[int]]:
    """Values tried for each structural dimension (divisor generators, capped by the world size).

    TP: divisors of the head count and powers of two (up to ``max_tp``); PP: divisors of the layer
    count and powers of two; VPP: every divisor of a stage's layers (``vpp_values``); CP: powers of two up to
    ``max_cp``; EP: divisors of the routed experts and powers of two; ETP: powers of two up to 8.
    Values that break a rule are still generated, so the rejection counts show why they lose.
    """
    a = model.attention
    tp = sorted(set(divisors(a.num_heads, opts.max_tp)) | set(powers_of_two(opts.max_tp)))
    pp = sorted(set(divisors(model.num_layers)) | set(powers_of_two(model.num_layers)))
    vpp = vpp_values(model.num_layers, pp, opts)
    cp = powers_of_two(min(opts.max_cp, max(1, seq_len // 2)))
    if model.moe is not None:
        e = model.moe.num_experts
        ep = sorted(set(divisors(e)) | set(powers_of_two(e)))
        etp = powers_of_two(8)
    else:
        ep, etp = [1], [1]
    out = {"tp": tp, "pp": pp, "vpp": vpp, "cp": cp, "ep": ep, "etp": etp}
    for k in out:
        pinned = getattr(opts, k)
        if pinned is not None:
            out[k] = sorted(set(int(x) for x in pinned))
    out["tp"] = [x for x in out["tp"] if x <= world]
    out["pp"] = [x for x in out["pp"] if x <= world]
    out["cp"] = [x for x in out["cp"] if x <= world]
    out["ep"] = [x for x in out["ep"] if x <= world]
    return out


def vpp_values(layers: int, pps: list[int], opts: SearchOptions) -> list[int]:
    """Virtual-stage counts tried: 1-6 and 8, plus every divisor of a stage's layers for each PP tried
    (``L / PP``; ``(L + 2) / PP`` with ``split_embedding_loss``; the middle stages' ``ceil(L / PP)``
    and the layers beyond it with an uneven split), so a 112-layer model at PP 16 tries VPP 7.
    Capped by ``opts.max_vpp`` when set."""
    import math

    per_stage: set[int] = set()
    for p in pps:
        if p < 2:
            continue
        for n in (layers, layers + 2 if opts.split_embedding_loss else layers):
            if n % p == 0:
                per_stage.add(n // p)
        if opts.uneven_pp:
            k = math.ceil(layers / p)
            per_stage.update(range(k, min(2 * k, k + 8) + 1))
    out = {1, 2, 3, 4, 5, 6, 8}
    for n in per_stage:
        out.update(divisors(n))
    cap = opts.max_vpp
    return sorted(v for v in out if cap is None or v <= cap)


def fold_factor(tp: np.ndarray, cp: np.ndarray, ep: np.ndarray, etp: np.ndarray) -> np.ndarray:
    """Folded data-parallel ranks ``F = lcm(TP*CP, EP*ETP) / (TP*CP)`` inside one expert block."""
    inner = tp * cp
    eg = ep * etp
    return (inner * eg // np.gcd(inner, eg)) // inner


@record(frozen=False)
class Structures:
    """Valid structural combinations (arrays of equal length) and the rejected counts."""

    cols: dict[str, np.ndarray]
    rejected: dict[str, int]
    evaluated: int


def structural_grid(
    model: ModelSpec, seq_len: int, world: int, opts: SearchOptions, inner_size: int
) -> Structures:
    """The (TP, PP, VPP, CP, EP, ETP) grid with structural masks applied.

    ``inner_size`` is how many (ZeRO, micro-batch, recompute, SP) combinations each structure
    expands into; a rejected structure counts as that many rejected candidates.
    """
    vals = dimension_values(model, seq_len, world, opts)
    names = ("tp", "pp", "vpp", "cp", "ep", "etp")
    # Each dimension along its own axis (a sparse grid): every rule is evaluated at the shape of the
    # dimensions it reads (``tp-heads`` per TP value, ``pp-layers`` per (PP, VPP) pair) and only the
    # boolean mask has the grid's full shape; the passing structures' columns are read off their axes.
    values = [np.asarray(vals[k], dtype=np.int64) for k in names]
    c = dict(zip(names, np.meshgrid(*values, indexing="ij", sparse=True)))
    shape = tuple(v.size for v in values)
    n = math.prod(shape)
    rejected = {r: 0 for r in RULE_ORDER}
    alive = np.ones(shape, dtype=bool)

    def apply(rule: str, bad: np.ndarray) -> None:
        hit = alive & bad
        rejected[rule] += int(np.count_nonzero(hit)) * inner_size
        alive[hit] = False

    masks = structural_masks(model, seq_len, world, c, opts.split_embedding_loss, opts.uneven_pp)
    for rule, bad in masks.items():
        apply(rule, bad)
    where = np.nonzero(alive)  # C order: the order of the flattened full grid
    cols = {k: v[i] for k, v, i in zip(names, values, where)}
    cols["split"] = split_codes(model, cols, opts)
    cols["fold"] = fold_factor(cols["tp"], cols["cp"], cols["ep"], cols["etp"])
    cols["dp"] = world // (cols["tp"] * cols["cp"] * cols["pp"])
    return Structures(cols, rejected, n * inner_size)


def pp_layers_bad(layers: int, pp: Any, vpp: Any, split_embedding_loss: bool = False,
                  uneven: bool = False) -> Any:
    """True where no allowed pipeline split (``pipeline.pipeline_split_array``) holds the layers.

    Even split (Megatron-Core default): ``PP x VPP`` divides the layers. With
    ``split_embedding_loss`` the embedding and the loss count as one layer each, so a split of
    ``layers + 2`` also works (the first and last chunks hold one transformer layer fewer; Llama 3
    405B: 126 + 2 = 128 = 16 stages x 8). With ``uneven`` the first and the last stage may hold fewer
    layers (``pipeline.uneven_stage_layers``). The step-time model charges every stage the average
    work either way (layer FLOPs and the LM head spread over ``PP`` stages): the stages that hold
    fewer layers are the ones that also run the embedding and the loss.
    """
    from mi400plan.pipeline import SPLIT_NONE, pipeline_split_array

    return pipeline_split_array(layers, pp, vpp, split_embedding_loss, uneven) == SPLIT_NONE


def split_codes(model: ModelSpec, c: dict[str, Any], opts: SearchOptions | None) -> Any:
    """Pipeline split code of each layout (``pipeline``): -1 where no allowed split holds the layers."""
    from mi400plan.pipeline import pipeline_split_array

    o = opts or SearchOptions()
    return pipeline_split_array(model.num_layers, c["pp"], c["vpp"], o.split_embedding_loss, o.uneven_pp)


def structural_masks(model: ModelSpec, seq_len: int, world: int, c: dict[str, np.ndarray],
                     split_embedding_loss: bool = False, uneven: bool = False) -> dict[str, np.ndarray]:
    """``rule -> bad`` boolean arrays for the structural rules (in ``RULE_ORDER``)."""
    tp, pp, vpp, cp, ep, etp = (c[k] for k in ("tp", "pp", "vpp", "cp", "ep", "etp"))
    a = model.attention
    replica = tp * cp * pp * fold_factor(tp, cp, ep, etp)
    out: dict[str, np.ndarray] = {}
    out["world-replica"] = (world % replica) != 0
    heads_bad = (a.num_heads % tp) != 0
    if a.kind == "gqa":
        heads_bad |= (a.kv_heads % tp) != 0
    out["tp-heads"] = heads_bad
    out["pp-layers"] = pp_layers_bad(model.num_layers, pp, vpp, split_embedding_loss, uneven)
    out["vpp-needs-pp"] = (vpp > 1) & (pp < 2)
    out["cp-seq"] = (cp > 1) & ((seq_len % (2 * cp)) != 0)
    if model.moe is not None:
        out["ep-experts"] = (model.moe.num_experts % ep) != 0
        out["etp-ffn"] = (model.moe.expert_ffn_dim % etp) != 0
    return out


def expand(st: Structures, opts: SearchOptions) -> tuple[dict[str, np.ndarray], int]:
    """Cartesian product of valid structures with (zero, micro_batch, recompute, sp)."""
    inner = [np.asarray(x, dtype=np.int64) for x in (opts.zero, opts.micro_batch, opts.recompute, opts.sequence_parallel)]
    ig = np.meshgrid(*inner, indexing="ij")
    inner_cols = {k: g.ravel() for k, g in zip(("zero", "micro_batch", "recompute", "sp"), ig)}
    n_in = inner_cols["zero"].size
    n_st = st.cols["tp"].size
    out = {k: np.repeat(v, n_in) for k, v in st.cols.items()}
    for k, v in inner_cols.items():
        out[k] = np.tile(v, n_st)
    return out, n_in


def inner_size(opts: SearchOptions) -> int:
    return len(opts.zero) * len(opts.micro_batch) * len(opts.recompute) * len(opts.sequence_parallel)


# --- the per-layout model ----------------------------------------------------------------------


@record
class ModelTerms:
    """Per-token quantities of the model that the step-time model needs (scalars)."""

    flops_model: float  # model FLOPs per token (fwd + bwd), FLOP
    flops_layers: float  # of which transformer layers (excl. LM head), FLOP
    flops_attn_fwd: float  # forward attention score/context FLOPs per token, FLOP
    # forward FLOPs per token that selective recomputation runs again (the recipe's modules), FLOP
    flops_sel_fwd: float
    flops_expert_frac: float  # share of layer FLOPs in routed experts
    dense_params: float  # parameters split by TP (attention, dense FFN, shared experts, emb/head), count
    replicated_params: float  # norms, routers, MLA down-projections (every TP rank holds them), count
    expert_params: float  # all routed experts, count
    n_layers: int
    n_moe_layers: int
    elems_replicable: float  # per token per layer fwd elementwise elements split by TP only with SP
    elems_tp_split: float  # per token per layer fwd elementwise elements always split by TP
    elems_scores: float  # per token per layer fwd score elements (no flash attention), split by TP
    kv_width: int  # K + V widths per token per layer (elements)
    shapes: gemm.LayerShapes  # GEMM widths for the shape-aware compute model
    flash: bool  # flash attention (fused, causal blocks skipped) or the unfused score GEMMs
    hidden: int
    top_k: int
    shared_tp: int = 0  # 1 when MoE layers have shared experts (a TP-split MLP with its own TP/SP pair)
    recompute_modules: tuple[str, ...] = DEFAULT_RECOMPUTE_MODULES  # what "selective" recomputes
    mtp_layers: int = 0  # multi-token-prediction modules (their projection and LM-head pass: ``mtp_head_seconds``)
    # LoRA fine-tuning (``mi400plan.finetune``): the adapters (None: every weight trains), the model they
    # adapt, and their parameters (TP-split, routed-expert), count
    lora: LoraSpec | None = None
    lora_model: Any = None
    adapter_params: float = 0.0
    adapter_expert_params: float = 0.0
    # packed sequences (``mi400plan.packing``): the documents in each row (None: one sequence a row)
    packed_docs: PackedDocs | None = None


def model_terms(model: ModelSpec, counts: ParamCounts, seq_len: int, recipe: Any = None) -> ModelTerms:
    """Scalars from ``params`` (the single source of parameter and FLOP counts). With packed sequences
    (``recipe.packed_docs``) the attention FLOPs are each document's: the per-token context is the mean key
    span of ``packing.attention_span`` instead of the row (Megatron-Bridge counts its packed LoRA runs so:
    ``12 L h sum_i d_i^2`` a row, ``flop_utils.py``, 2026)."""
    h = model.hidden_size
    packed = None if recipe is None else getattr(recipe, "packed_docs", None)
    ctx = attention_span(packed, seq_len)  # the context attention FLOPs are counted over, per token
    f_model = model_flops_per_token(model, ctx)  # type: ignore[arg-type]
    f_attn = attention_flops_per_token(model, ctx)  # type: ignore[arg-type]
    f_head = 6.0 * model.vocab_size * h  # LM head matmul, fwd + bwd (params.matmul_params_per_token)
    f_layers = f_model - f_head
    modules = DEFAULT_RECOMPUTE_MODULES if recipe is None else tuple(recipe.recompute_modules)
    moe = model.moe
    n_moe = counts.num_moe_layers
    top_k = moe.top_k if moe else 0
    expert_w = 0.0
    if moe is not None:
        per_ffn = (3 if model.ffn_kind == "swiglu" else 2) * h * moe.expert_ffn_dim
        expert_w = 6.0 * top_k * per_ffn * n_moe
    # Held whole by every TP rank: norms, routers, and MLA's q/kv down-projections (Megatron-Core
    # builds them with parallel_mode="duplicated"; ``params.LayerParams.attn_replicated``, as the
    # memory model counts them).
    replicated = float(sum(lp.norms + lp.router + lp.attn_replicated for lp in counts.layers) + counts.final_norm)
    experts = float(sum(lp.routed_experts for lp in counts.layers))
    dense = float(counts.total) - replicated - experts
    a = model.attention
    if a.kind == "mla":
        q_w = a.num_heads * ((a.qk_nope_head_dim or 0) + (a.qk_rope_head_dim or 0))
        kv_w = (a.kv_lora_rank or 0) + (a.qk_rope_head_dim or 0)
        # What context parallelism exchanges: the up-projected K (per head: nope + the shared rope
        # part, broadcast to every head) and V (per head: v_head_dim). Megatron-Core's MLA builds
        # key = cat(k_no_pe, k_pos_emb expanded to every head) before core attention, and CP's ring
        # passes those K/V tensors (DeepSeek-V3: 128 x (128 + 64) + 128 x 128 = 40,960 per token).
        kv_width = a.num_heads * ((a.qk_nope_head_dim or 0) + (a.qk_rope_head_dim or 0) + (a.v_head_dim or 0))
    else:
        d = a.head_size(h)
        q_w, kv_w = a.num_heads * d, a.kv_heads * d
        kv_width = 2 * kv_w
    act_mult = 3 if model.ffn_kind == "swiglu" else 2
    # average FFN width touched per token per layer (dense layers and MoE layers)
    n_dense = model.num_layers - n_moe
    ffn_avg = n_dense * model.ffn_dim
    if moe is not None:
        shared = moe.num_shared_experts * (moe.shared_expert_ffn_dim or moe.expert_ffn_dim)
        ffn_avg += n_moe * (top_k * moe.expert_ffn_dim + shared)
    ffn_avg /= model.num_layers
    cap = None if recipe is None else getattr(recipe, "expert_capacity_factor", None)
    mtp = 0 if recipe is None else int(getattr(recipe, "mtp_layers", 0))
    permute = permute_elems_per_token(top_k, h, cap) * n_moe / model.num_layers
    flash = True if recipe is None else bool(recipe.flash_attention)
    dropout = False if recipe is None else bool(recipe.dropout)
    lora = None if recipe is None else lora_of(recipe)
    check_lora(model, lora)
    adapters = adapter_params(model, counts, lora) if lora is not None else (0.0, 0.0)
    if lora is not None:  # frozen base: no weight gradients (4N), adapters trained in full (6 N_adapter)
        f_model = lora_model_flops_per_token(model, counts, ctx, lora)  # type: ignore[arg-type]
    scores = 0.0 if flash else a.num_heads * seq_len * (SCORE_PASSES + (SCORE_DROPOUT_PASSES if dropout else 0.0))
    drop_h = DROPOUT_ELEMS_PER_H * h if dropout else 0.0
    return ModelTerms(
        flops_model=f_model + mtp * mtp_extra_flops_per_token(h, model.vocab_size),
        flops_layers=f_layers,
        flops_attn_fwd=f_attn,
        flops_sel_fwd=selective_recompute_flops_per_token(model, ctx, modules),  # type: ignore[arg-type]
        flops_expert_frac=(expert_w / f_layers) if f_layers > 0 else 0.0,
        dense_params=dense,
        replicated_params=replicated,
        expert_params=experts,
        n_layers=model.num_layers,
        n_moe_layers=n_moe,
        elems_replicable=NORM_RESIDUAL_ELEMS_PER_H * h + permute + drop_h,
        elems_tp_split=act_mult * ffn_avg + 2 * (q_w + kv_w),
        elems_scores=scores,
        kv_width=kv_width,
        shapes=dataclasses.replace(gemm.model_shapes(model, sum(lp.attention for lp in counts.layers)
                                                     / max(1, len(counts.layers))), expert_pad=expert_padding(cap)),
        flash=flash,
        hidden=h,
        top_k=top_k,
        shared_tp=int(moe is not None and moe.num_shared_experts > 0),
        recompute_modules=modules,
        mtp_layers=mtp,
        lora=lora,
        lora_model=model if lora is not None else None,
        adapter_params=adapters[0],
        adapter_expert_params=adapters[1],
        packed_docs=packed,
    )


CollFn = Callable[[str, Any, Any, Any], Any]
"""``coll(op, size_bytes, group, stride) -> seconds`` (numpy-broadcasting), bound to one SKU."""


CollReq = tuple[str, Any, Any, Any]
"""One collective to price: ``(op, size_bytes, group, stride)``, numpy-broadcasting."""


def make_coll(hw: Hardware) -> CollFn:
    """Bind ``comms.placed_collective_time`` to a SKU's tiers.

    Each element is priced on its own, so a grid is priced once per distinct (size, group, stride)
    and spread back (a search's grids repeat few of them: the TP group's message depends on TP, CP
    and the micro-batch only); a group of one costs nothing (``comms.collective_time``) and is not
    priced at all. ``coll.many(requests)`` prices a dict of named requests together: all requests of
    one op share one distinct-row pass and one ``comms`` call (:func:`price_many`).
    """
    from mi400plan import comms

    def coll(op: str, size: Any, group: Any, stride: Any) -> Any:
        return many({"": (op, size, group, stride)})[""]

    def many(requests: dict[str, CollReq]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        by_op: dict[str, list[tuple[str, np.ndarray, np.ndarray, np.ndarray]]] = {}
        for name, (op, size, group, stride) in requests.items():
            S, g, st = np.broadcast_arrays(np.asarray(size, dtype=np.float64),
                                           np.asarray(group, dtype=np.float64), np.asarray(stride, dtype=np.float64))
            if np.any(g > 1):
                by_op.setdefault(op, []).append((name, S, g, st))
            else:
                out[name] = np.zeros(S.shape)
        for op, items in by_op.items():
            cols = [np.concatenate([item[k].ravel() for item in items]) for k in (1, 2, 3)]
            first, inverse = distinct_rows(*cols)
            t = comms.placed_collective_time(op, cols[0][first], cols[1][first], cols[2][first], hw.scale_up,
                                             hw.scale_out)[inverse]
            at = 0
            for name, S, _, _ in items:
                out[name] = t[at:at + S.size].reshape(S.shape)
                at += S.size
        return out

    coll.many = many  # type: ignore[attr-defined]
    return coll


def price_many(coll: CollFn, requests: dict[str, CollReq]) -> dict[str, np.ndarray]:
    """Seconds of every named request: batched through ``coll.many`` when ``coll`` comes from
    :func:`make_coll` (one pricing pass per op; the same numbers as one call per request), else one
    ``coll`` call each."""
    many = getattr(coll, "many", None)
    if many is not None:
        return many(requests)
    return {name: coll(*req) for name, req in requests.items()}


def distinct_rows(*cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(index of one row per distinct tuple of ``cols``, which distinct tuple each row is), so that
    ``cols[k][first][inverse] == cols[k]``; one lexicographic sort (cheaper than ``np.unique(axis=0)``)."""
    n = cols[0].size
    order = np.lexsort(cols[::-1])
    new = np.zeros(n, dtype=bool)
    new[:1] = True
    for c in cols:
        sc = c[order]
        new[1:] |= sc[1:] != sc[:-1]
    inverse = np.empty(n, dtype=np.int64)
    inverse[order] = np.cumsum(new) - 1
    return order[new], inverse


def _inner_ops(op: str) -> tuple[str, ...]:
    """The in-domain steps of a two-level ``op`` (:func:`_two_level_requests`)."""
    return ("reduce_scatter", "all_gather") if op == "all_reduce" else (op,)


def _two_level_requests(name: str, op: str, size: Any, g_in: Any, s_in: Any, g_out: Any,
                        s_out: Any) -> dict[str, CollReq]:
    """The steps of a collective over a group made of ``g_in`` ranks at stride ``s_in`` times ``g_out``
    at ``s_out`` (:func:`_two_level_time` adds them up), as named requests.

    Hierarchical algorithm (as NCCL/RCCL do across tiers): all-reduce = reduce-scatter inside +
    all-reduce outside on ``1/g_in`` of the data + all-gather inside; reduce-scatter / all-gather =
    the inner step on the full buffer then the outer step on ``1/g_in`` of it. Either level may be 1.
    """
    reqs: dict[str, CollReq] = {f"{name}/in/{o}": (o, size, g_in, s_in) for o in _inner_ops(op)}
    reqs[f"{name}/out"] = (op, size / np.asarray(g_in), g_out, s_out)
    return reqs


def _two_level_time(prices: dict[str, np.ndarray], name: str, op: str, g_in: Any, g_out: Any) -> Any:
    """Seconds of the collective :func:`_two_level_requests` laid out as ``name``: each level only where
    its group has more than one rank."""
    inner = _inner_ops(op)
    t_in = prices[f"{name}/in/{inner[0]}"]
    for o in inner[1:]:
        t_in = t_in + prices[f"{name}/in/{o}"]
    return np.where(np.asarray(g_in) > 1, t_in, 0.0) + np.where(np.asarray(g_out) > 1, prices[f"{name}/out"], 0.0)


def chunked_exposure(comm: Any, compute: Any, pp: Any, vpp: Any) -> Any:
    """Exposed seconds of a once-per-step DP collective overlapped chunk by chunk (seconds).

    Megatron-Core's interleaved 1F1B schedule (``schedules.py``, ``grad_sync_func`` /
    ``param_sync_func``) launches each model chunk's gradient reduction when that chunk's last
    backward runs, and each chunk's parameter gather one chunk ahead of its first forward. On the
    first pipeline stage (the critical one: it starts first and finishes last) the last backwards
    come in groups of ``pp`` micro-batches per chunk, chunk ``v-1`` first and chunk 0 last, so chunk
    ``j``'s traffic (``comm / v``) can overlap ``j*pp + 1`` chunk-backwards (``compute / v`` each).
    The link serves the chunks in turn, so the exposed time is the largest of
    ``(j+1) comm/v - (j*pp + 1) compute/v`` over ``j``, which is linear in ``j``:
    ``max(0, (comm - compute)/v, comm - ((v-1)*pp + 1) * compute / v)``. Parameter gathers mirror it
    (chunk ``j`` needed after ``j*pp`` chunk-forwards). With ``v = 1`` this is
    ``max(0, comm - compute)``: the collective hides behind one micro-batch's backward (or forward).
    ``compute`` is one micro-batch's backward (or forward) time on the stage, all its chunks.
    """
    lead = ((vpp - 1.0) * pp + 1.0) * compute / vpp
    return np.maximum(0.0, np.maximum((comm - compute) / vpp, comm - lead))


BREAKDOWN = ("compute", "attention", "gemm_overhead", "memory_bound", "tp", "cp", "ep", "pp", "host", "bubble", "dp",
             "optimizer", "offload")


class StageCompute(NamedTuple):
    """GEMM and attention-core seconds of one micro-batch on the slowest pipeline stage, and that
    stage's compute time over the mean stage's (``memory.stage_imbalance``)."""

    gemm: Any
    attention: Any
    ratio: Any


def mtp_head_seconds(T: "ModelTerms", tok_mb: Any, tp: Any, hw: "Hardware") -> tuple[Any, Any]:
    """Forward and backward seconds of the last stage's output heads: the main LM head (vocabulary split
    over TP, ``gemm.head_gemm_seconds``) and, per multi-token-prediction module (Megatron-Core places them
    on the last pipeline stage), the head again and the ``2h -> h`` projection (split over TP)."""
    hf, hb = gemm.head_gemm_seconds(T.shapes, tok_mb, tp, hw.head_gemm_sku())
    if not T.mtp_layers:
        return hf, hb
    pf, pb = gemm.train_gemm_seconds(tok_mb, T.hidden / tp, 2.0 * T.hidden, hw.gemm_sku())
    k = float(T.mtp_layers)
    return hf * (1.0 + k) + k * pf, hb * (1.0 + k) + k * pb


def compute_seconds(T: ModelTerms, hw: Hardware, tok_mb: Any, mb: Any, s: float, c: dict[str, Any],
                    sp: Any, rc: Any, share: Any, counts: ParamCounts, slots: dict[str, np.ndarray],
                    bf16_share: float = 0.0) -> StageCompute:
    """GEMM and attention-core seconds of one micro-batch on one GPU (shape-aware, ``mi400plan.gemm``)
    on the pipeline's slowest stage.

    Every linear layer's forward, data-gradient and weight-gradient GEMM at its own (M, N, K) for
    this candidate's TP / EP / ETP split and micro-batch tokens, plus the forward again for the
    layers under full recomputation (``share`` of them, ``memory.recompute_share``); attention
    forward + backward (+ forward again for those layers, or under selective recomputation with
    "core_attn") at the flash-attention model; under selective recomputation the GEMMs of the
    recipe's other modules once more (``gemm.recompute_gemm_seconds``); the LM head once per
    micro-batch on the last stage (in BF16 under FP8, ``Hardware.head_gemm_sku``). A stage's time is
    its dense layers', MoE layers' and (last stage) head's seconds; the pipeline runs at the slowest
    stage's, the mean stage's times ``ratio`` (both terms scale by it); ``slots``: the layouts' stages
    (``memory.stage_slot_table``).
    """
    tp, pp, cp, ep, etp = (np.asarray(c[k], dtype=np.float64) for k in ("tp", "pp", "cp", "ep", "etp"))
    g = hw.gemm_sku()
    df, db, mf, mbw = gemm.layer_gemm_seconds(T.shapes, tok_mb, tp, ep, etp, sp, g)
    if bf16_share > 0.0:  # the block linear layers a low-precision recipe keeps in BF16 (``lowp``)
        hi = gemm.layer_gemm_seconds(T.shapes, tok_mb, tp, ep, etp, sp, hw.head_gemm_sku())
        df, db, mf, mbw = ((1.0 - bf16_share) * lo + bf16_share * h for lo, h in zip((df, db, mf, mbw), hi))
    hf, hb = mtp_head_seconds(T, tok_mb, tp, hw)
    if T.lora is not None:  # frozen base weights: no weight-gradient GEMMs; the adapters' GEMMs added
        lg = lora_gemm_seconds(T.lora_model, T.lora, T.shapes, tok_mb, tp, ep, etp, sp, g, hw.head_gemm_sku())
        df, db, mf, mbw, hb = df + lg.dense_fwd, db + lg.dense_bwd, mf + lg.moe_fwd, mbw + lg.moe_bwd, hb - lg.head_wgrad
    dense_gemm, moe_gemm = df * (1.0 + share) + db, mf * (1.0 + share) + mbw
    mods = T.recompute_modules
    if set(mods) - {"core_attn", "moe_act", "layernorm"}:  # selective recomputation re-runs GEMMs too
        rd, rm = gemm.recompute_gemm_seconds(T.shapes, tok_mb, tp, ep, etp, sp, g, mods)
        dense_gemm = dense_gemm + np.where(rc == 1, rd, 0.0)
        moe_gemm = moe_gemm + np.where(rc == 1, rm, 0.0)
    span = attention_span(T.packed_docs, int(s)) if T.packed_docs is not None else None  # per document
    af, ab = gemm.attention_seconds(T.shapes, mb, s, cp, tp, T.flash, g, hw.attn_sku(), span)
    attn = af * (1.0 + forward_again(rc, share, mods, "core_attn")) + ab  # one layer's
    moe = T.n_moe_layers / pp
    dense = T.n_layers / pp - moe
    gemm_mb = dense * dense_gemm + moe * moe_gemm + (hf + hb) / pp  # the mean stage's
    attn_mb = T.n_layers / pp * attn
    ratio = stage_work_ratio(counts, c["pp"], slots, dense=dense_gemm + attn, moe=moe_gemm + attn, head=hf + hb)
    return StageCompute(gemm_mb * ratio, attn_mb * ratio, ratio)


class _DpGroups:
    """The data-parallel groups of a layout and the parameters each GPU reduces over them.

    Non-expert parameters are replicated over DP x CP (CP ranks hold the same weights and see
    different tokens), so their gradients are reduced over the DP x CP group (Megatron-Core
    ``data_parallel_group_with_cp``; the distributed optimizer shards over it too): CP x fold ranks at
    stride TP inside the block, then the outer DP index at stride replica. Expert parameters over the
    expert-data-parallel ranks: ``TP x CP x fold / (EP x ETP)`` inside the block at stride EP x ETP,
    then the same outer index.
    """

    def __init__(self, T: ModelTerms, *, tp: Any, pp: Any, cp: Any, ep: Any, etp: Any, fold: Any, dp: Any) -> None:
        self.moe = T.expert_params > 0
        self.dense = T.dense_params / (tp * pp) + T.replicated_params / pp  # parameters on this GPU
        self.experts = T.expert_params / (ep * etp * pp)
        # What the gradient reductions, ZeRO-1's parameter gathers and the optimizer step move: every
        # parameter, or with LoRA the adapters alone (the frozen base has no gradient and no update).
        self.trained = (self.dense, self.experts)
        if T.lora is not None:
            self.trained = (T.adapter_params / (tp * pp), T.adapter_expert_params / (ep * etp * pp))
        inner = tp * cp * fold
        self.levels = {"dense": (cp * fold, tp), "exp": (inner / (ep * etp), ep * etp)}  # (group, stride) inside
        self.outer = (dp / fold, inner * pp)

    def requests(self, name: str, op: str, dense_bytes: Any, exp_bytes: Any) -> dict[str, CollReq]:
        """The two-level steps of one DP collective moving ``dense_bytes`` / ``exp_bytes`` per GPU."""
        reqs = _two_level_requests(f"{name}/dense", op, dense_bytes, *self.levels["dense"], *self.outer)
        if self.moe:
            reqs |= _two_level_requests(f"{name}/exp", op, exp_bytes, *self.levels["exp"], *self.outer)
        return reqs

    def time(self, price: dict[str, np.ndarray], name: str, op: str) -> Any:
        """Seconds of the DP collective requested as ``name``."""
        t = _two_level_time(price, f"{name}/dense", op, self.levels["dense"][0], self.outer[0])
        if self.moe:
            t = t + _two_level_time(price, f"{name}/exp", op, self.levels["exp"][0], self.outer[0])
        return t


def _step_requests(T: ModelTerms, wl: Workload, hw: Hardware, dpg: _DpGroups, *, tp: Any, pp: Any, cp: Any, ep: Any,
                   etp: Any, fold: Any, sp: Any, tok_mb: Any, layers: Any) -> dict[str, CollReq]:
    """Every collective one training step prices (``step_time`` reads each by name).

    TP: one full hidden activation of the micro-batch (bytes), all-reduced, or reduce-scattered and
    all-gathered with SP. ETP: after the EP all-to-all each ETP rank holds ``s_disp`` bytes of tokens
    for its experts and all-gathers them over the ETP group (Megatron-Core alltoall dispatcher:
    ``gather_from_sequence_parallel_region(global_input_tokens, group=tp_group)``), then
    reduce-scatters the expert output back: the full buffer (``S`` of ``comms``, nccl-tests' total
    array) is ``etp x s_disp``. EP: the dispatch and combine of the token bytes each rank routes (SP
    splits the sequence), by dispatcher (``moe_dispatch.dispatch_requests``). CP: this rank's K and V of one layer over the CP group. PP: the
    scatter/gather optimisation, each TP rank sends ``1/tp`` of the activation (Narayanan et al.
    2021). DP: gradients in the accumulation buffer's dtype and parameters in theirs, and ZeRO-3's
    per-unit gathers and reduce-scatters (``fsdp.fsdp_unit_bytes``)."""
    a_bytes = float(wl.recipe.activation_bytes)
    # Gradients are reduced in the dtype of the accumulation buffer (``recipe.grad_bytes``, the
    # buffer the memory model sizes): Megatron-Core reduce-scatters / all-reduces the grad buffer
    # itself (``param_and_grad_buffer``: fp32 when ``grad_reduce_in_fp32``), and Megatron-LM turns
    # that on for BF16 training ("accumulate and all-reduce gradients in fp32 for bfloat16 data
    # type", ``arguments.py``, unless ``--grad-reduce-in-bf16``); Llama 3 likewise "reduce-scatter[s]
    # gradients in FP32 across data parallel workers in FSDP" (arXiv 2407.21783, section 3.3.2). The
    # ``megatron`` recipe's 4-byte main grads therefore cost 4 bytes per gradient on the wire;
    # ``train_recipe(grad_dtype="bf16")`` gives 2.
    g_bytes, w_bytes = float(wl.recipe.grad_bytes), wl.param_wire_bytes
    s_act = tok_mb * T.hidden * a_bytes
    s_disp = tok_mb / np.where(sp, tp, 1.0) * T.top_k * T.hidden * a_bytes * T.shapes.expert_pad  # ETP's buffers
    kv_chunk = tok_mb * T.kv_width / tp * a_bytes
    reqs: dict[str, CollReq] = {
        "tp_ar": ("all_reduce", s_act, tp, 1), "tp_rs": ("reduce_scatter", s_act, tp, 1),
        "tp_ag": ("all_gather", s_act, tp, 1),
        "etp_rs": ("reduce_scatter", s_disp * etp, etp, 1), "etp_ag": ("all_gather", s_disp * etp, etp, 1),
        "cp_ag": ("all_gather", kv_chunk * cp, cp, tp), "cp_rs": ("reduce_scatter", kv_chunk * cp, cp, tp),
        "pp_p2p": ("send_recv", s_act / tp, pp, tp * cp * fold),
    }
    if T.top_k:  # dispatch and combine (``moe_dispatch``): blockwise FP8 training dispatches FP8 tokens
        fp8_blockwise = hw.operand_bytes == 1.0 and hw.fp8_recipe == "blockwise"
        reqs |= dispatch_requests(tok_mb / np.where(sp, tp, 1.0), T.hidden, T.top_k, a_bytes, ep, etp,
                                  dispatcher_rule(hw.moe_dispatcher), fp8_blockwise,
                                  getattr(wl.recipe, "expert_capacity_factor", None))
    t_dense, t_exp = dpg.trained
    reqs |= dpg.requests("grad_ar", "all_reduce", t_dense * g_bytes, t_exp * g_bytes)
    reqs |= dpg.requests("grad_rs", "reduce_scatter", t_dense * g_bytes, t_exp * g_bytes)
    reqs |= dpg.requests("param_ag", "all_gather", t_dense * w_bytes, t_exp * w_bytes)
    reqs |= dpg.requests("fsdp_ag", "all_gather", *fsdp_unit_bytes(dpg.dense, dpg.experts, w_bytes, layers))
    reqs |= dpg.requests("fsdp_rs", "reduce_scatter", *fsdp_unit_bytes(t_dense, t_exp, g_bytes, layers))
    return reqs


@record
class _Grid:
    """One batch of layouts as float arrays (``step_time``'s ``c``), and what every term below shares:
    the full-recompute share, layers per GPU, micro-batches per step, the slowest stage's load ratios
    and its compute time per micro-batch (seconds)."""

    tp: Any
    pp: Any
    vpp: Any
    cp: Any
    ep: Any
    etp: Any
    dp: Any
    zero: Any
    rc: Any
    sp: Any
    full: Any  # share of the layers full recomputation re-runs
    layers: Any  # layers held by one GPU (over all its virtual stages)
    moe_layers: Any
    m: Any  # micro-batches per replica per step
    layer_ratio: Any
    moe_ratio: Any
    gemm_mb: Any
    attn_mb: Any

    @property
    def comp_mb(self) -> Any:
        return self.gemm_mb + self.attn_mb


def _tp_seconds(g: _Grid, T: ModelTerms, price: dict[str, Any]) -> Any:
    """TP / SP collectives per micro-batch (before overlap)."""
    # One full hidden activation of the micro-batch (bytes): all-reduced, or with SP reduce-scattered
    # and all-gathered, over the TP group.
    per_coll = np.where(g.sp, price["tp_rs"] + price["tp_ag"], price["tp_ar"])
    dense_layers = g.layers - g.moe_layers
    # Dense layer: 2 fwd + 2 bwd (+2 recompute); MoE layer: attention block (1 + 1 (+1)), plus
    # the same again for shared experts, which Megatron-Core runs as a TP-split MLP on the TP group
    # (``SharedExpertMLP(MLP)``: SP all-gather before fc1, reduce-scatter after fc2), plus the
    # expert-TP pair on the ETP group when ETP > 1.
    k_full = 1.0 + 0.5 * g.full
    moe_pairs = 2.0 * (1.0 + T.shared_tp)
    tp_mb = np.where(g.tp > 1, per_coll * k_full * (4.0 * dense_layers + moe_pairs * g.moe_layers), 0.0)
    # The expert-TP pair on the ETP group (``_step_requests``).
    etp_pair = price["etp_rs"] + price["etp_ag"]
    return tp_mb * g.layer_ratio + np.where(g.etp > 1, etp_pair * k_full * 2.0 * g.moe_layers, 0.0) * g.moe_ratio


def _cp_seconds(g: _Grid, T: ModelTerms, price: dict[str, Any], opts: SearchOptions) -> Any:
    """CP exchange per micro-batch, less what hides behind core attention with ``overlap_cp``."""
    cp_ag, cp_rs = price["cp_ag"], price["cp_rs"]  # this rank's K and V of one layer, over the CP group
    # Forward all-gathers K/V, backward all-gathers them again and reduce-scatters dK/dV. Recompute
    # (full, or selective: Megatron-Core's ``core_attn`` module re-runs core attention, CP exchange
    # included) repeats the forward exchange.
    cp_again = forward_again(g.rc, g.full, T.recompute_modules, "core_attn")
    cp_raw = g.layers * ((2.0 + cp_again) * cp_ag + cp_rs) * g.layer_ratio
    cp_hide = g.attn_mb if opts.overlap_cp else 0.0
    return np.where(g.cp > 1, np.maximum(0.0, cp_raw - cp_hide), 0.0)


def _pp_seconds(g: _Grid, p2p: Any, opts: SearchOptions) -> tuple[Any, Any]:
    """(PP point-to-point per micro-batch, fill/drain transfers per step before the bubble's share)."""
    pp, vpp = g.pp, g.vpp
    # Each of the ``vpp`` chunks sends its forward activation and its backward gradient once per
    # micro-batch. With ``overlap_pp`` and the interleaved schedule (VPP > 1) a transfer runs while
    # the next chunk computes (Megatron-LM ``overlap_p2p_comm``): the forward send hides behind one
    # chunk-forward (``comp_mb / (3 vpp)``), the backward send behind one chunk-backward (twice that);
    # only the excess is exposed. Otherwise every transfer is exposed. Pipeline fill and drain
    # cannot hide them: a micro-batch's first forward reaches the last stage after ``pp - 1``
    # transfers and its last backward returns after ``pp - 1`` more, so ``2 (pp - 1)`` transfers
    # stay on the critical path (``pp_fill``; without overlap they are inside the bubble, which is
    # ``(pp - 1) / vpp`` micro-batch slots that each carry ``2 vpp`` transfers: the same amount).
    if opts.overlap_pp:
        chunk_fwd = np.where(vpp > 1, g.comp_mb / (3.0 * vpp), 0.0)
        pp_link = vpp * (np.maximum(0.0, p2p - chunk_fwd) + np.maximum(0.0, p2p - 2.0 * chunk_fwd))
        pp_fill = np.where((pp > 1) & (vpp > 1), 2.0 * (pp - 1.0) * p2p - (pp - 1.0) / vpp * pp_link, 0.0)
    else:
        pp_link = 2.0 * vpp * p2p
        pp_fill = 0.0
    return np.where(pp > 1, pp_link, 0.0), pp_fill


def _dp_seconds(g: _Grid, dpg: _DpGroups, price: dict[str, Any], opts: SearchOptions) -> tuple[Any, Any]:
    """(exposed, raw) DP / ZeRO collective seconds per step."""
    zero, pp, vpp, comp_mb = g.zero, g.pp, g.vpp, g.comp_mb
    grad_ar = dpg.time(price, "grad_ar", "all_reduce")
    grad_rs = dpg.time(price, "grad_rs", "reduce_scatter")
    param_ag = dpg.time(price, "param_ag", "all_gather")
    hide = 1.0 if opts.overlap_dp else 0.0
    bwd_mb = comp_mb * 2.0 / 3.0 * hide
    fwd_mb = comp_mb / 3.0 * hide
    # Once per step (Megatron-Core DDP / distributed optimizer): ZeRO-0 all-reduces and ZeRO-1
    # reduce-scatters the accumulated gradients, launched per model chunk when its last backward
    # starts; ZeRO-1 and ZeRO-2 all-gather the updated parameters, launched per model chunk before
    # its first forward of the next step (see ``chunked_exposure``).
    grad_t = np.where(zero == 0, grad_ar, grad_rs)
    grad_once = np.where(zero <= 1, grad_t, 0.0)
    dp_exposed = chunked_exposure(grad_once, bwd_mb, pp, vpp)
    ag_step = np.where((zero == 1) | (zero == 2), param_ag, 0.0)
    dp_exposed = dp_exposed + chunked_exposure(ag_step, fwd_mb, pp, vpp)
    # Every micro-batch: ZeRO-2 keeps only its shard of the gradients, so each backward's gradients
    # are reduce-scattered before the next one (DeepSpeed stage 2 reduces after every backward;
    # accumulating locally would need the unsharded buffer ZeRO-2 removes); ZeRO-3 / FSDP also
    # gathers the parameters before forward and again before backward. Hidden behind that
    # micro-batch's compute; the exposed rest stretches every micro-batch slot, bubble included.
    # ZeRO-3 / FSDP: per-layer gathers and reduce-scatters with prefetch (``fsdp.fsdp_step_terms``).
    fsdp = fsdp_step_terms(dpg.time(price, "fsdp_ag", "all_gather"), dpg.time(price, "fsdp_rs", "reduce_scatter"),
                           g.layers, comp_mb, opts.overlap_dp)
    per_mb = np.where(zero == 2, grad_rs, np.where(zero == 3, fsdp.raw, 0.0))
    per_mb_exposed = np.where(zero == 3, fsdp.exposed, np.maximum(0.0, per_mb - comp_mb * hide)) * (g.m + (pp - 1.0) / vpp)
    dp_exposed = dp_exposed + per_mb_exposed
    # No mask on DP = 1: the groups above are 1 (and cost 0) exactly when nothing is replicated;
    # with DP = 1, CP > 1 still reduces non-expert gradients and TP x CP > EP x ETP still reduces
    # expert gradients over the expert-data-parallel ranks inside the block.
    return dp_exposed, grad_once + ag_step + per_mb * g.m


def _optimizer_seconds(g: _Grid, dpg: _DpGroups, hw: Hardware) -> Any:
    """Optimizer step: the local (sharded) parameters' optimizer bytes read and written at HBM speed."""
    shard_d = np.where(g.zero >= 1, g.dp * g.cp, 1.0)  # distributed optimizer shards over DP x CP
    shard_e = np.where(g.zero >= 1, g.dp * g.tp * g.cp / (g.ep * g.etp), 1.0)
    p_opt = dpg.trained[0] / shard_d + dpg.trained[1] / shard_e
    return p_opt * OPTIMIZER_BYTES_PER_PARAM / (hw.hbm_bw * hw.hbm_eff)


def step_time(
    c: dict[str, Any], wl: Workload, hw: Hardware, terms: ModelTerms, opts: SearchOptions, coll: CollFn
) -> dict[str, Any]:
    """Step time and its breakdown (seconds) for layouts ``c`` (numpy arrays or scalars).

    ``c`` holds tp, pp, vpp, cp, ep, etp, dp, fold, zero, micro_batch, recompute (0/1/2), sp (0/1).
    Returns every ``BREAKDOWN`` term (keys ``t_<term>``) plus ``step``, ``compute_only``, ``m`` (micro-batches),
    ``flops_hw_per_token`` and exposed/raw communication times. Units: seconds, FLOP.
    """
    tp, pp, vpp, cp, ep, etp = (np.asarray(c[k], dtype=np.float64) for k in ("tp", "pp", "vpp", "cp", "ep", "etp"))
    dp, fold = np.asarray(c["dp"], dtype=np.float64), np.asarray(c["fold"], dtype=np.float64)
    zero, mb = np.asarray(c["zero"]), np.asarray(c["micro_batch"], dtype=np.float64)
    rc, sp = np.asarray(c["recompute"]), np.asarray(c["sp"]).astype(bool)
    s, B = float(wl.seq_len), float(wl.global_batch)
    a_bytes = float(wl.recipe.activation_bytes)
    T = terms
    m = B / (dp * mb)  # micro-batches per replica per step
    tok_mb = mb * s / cp  # tokens of one micro-batch on one CP rank
    layers = T.n_layers / pp  # layers held by one GPU (over all its virtual stages)
    moe_layers = T.n_moe_layers / pp
    # Every collective of the step, priced in one batch (``price_many``); each term below reads its own.
    # (Gradients travel in the accumulation buffer's dtype, ``recipe.grad_bytes``: see ``_step_requests``.)
    dpg = _DpGroups(T, tp=tp, pp=pp, cp=cp, ep=ep, etp=etp, fold=fold, dp=dp)
    price = price_many(coll, _step_requests(T, wl, hw, dpg, tp=tp, pp=pp, cp=cp, ep=ep, etp=etp, fold=fold, sp=sp,
                                            tok_mb=tok_mb, layers=layers))

    # ---- compute (per micro-batch, per GPU) ----------------------------------------------
    sel = rc == 1
    # The share of the layers full recomputation re-runs (all, or Megatron-Core's block method's first N
    # of each chunk): each "again" below is that share of one more forward.
    full = recompute_share(rc, wl.recipe.recompute_layers, layers / vpp)
    flops_hw_tok = T.flops_model + full * T.flops_layers / 3.0 + np.where(sel, T.flops_sel_fwd, 0.0)
    # expert GEMMs padded to a capacity factor run on the padding rows too (``moe_dispatch``)
    pad_extra = (T.shapes.expert_pad - 1.0) * T.flops_expert_frac * T.flops_layers
    flops_hw_tok = flops_hw_tok + pad_extra * (1.0 + full / 3.0)
    # The pipeline runs at its slowest stage's pace: each per-micro-batch term below is that stage's,
    # the mean stage's scaled by the load ratio of its kind (compute time, layers, MoE layers).
    slots = stage_slot_table(wl.counts, c["pp"], c["vpp"], c["split"] if "split" in c else 0,
                             mirror=wl.recipe.pp_schedule == DUALPIPE)
    layer_ratio, moe_ratio = stage_count_ratios(wl.counts, c["pp"], slots)
    stage = compute_seconds(T, hw, tok_mb, mb, s, c, sp, rc, full, wl.counts, slots,
                            float(getattr(wl.recipe, "bf16_gemm_share", 0.0)))
    g = _Grid(tp=tp, pp=pp, vpp=vpp, cp=cp, ep=ep, etp=etp, dp=dp, zero=zero, rc=rc, sp=sp, full=full, layers=layers,
              moe_layers=moe_layers, m=m, layer_ratio=layer_ratio, moe_ratio=moe_ratio, gemm_mb=stage.gemm,
              attn_mb=stage.attention)
    gemm_mb, comp_mb = g.gemm_mb, g.comp_mb
    n_gemm_dense = (layers - moe_layers) * GEMMS_FWD_PER_LAYER * layer_ratio
    n_gemm_moe = moe_layers * moe_gemms_fwd_per_layer(T, ep) * moe_ratio
    passes = 3.0 + full  # kernels per forward GEMM: forward, data and weight gradient (+ forward again)
    if T.lora is not None:  # frozen base: no weight-gradient kernels; each adapter GEMM runs all three
        n_adapter = lora_kernels(T, layers, moe_layers, layer_ratio, moe_ratio)
        ovh_mb = ((n_gemm_dense + n_gemm_moe) * (passes - 1.0) + n_adapter * passes) * hw.gemm_overhead_s
    else:
        ovh_mb = (n_gemm_dense + n_gemm_moe) * passes * hw.gemm_overhead_s

    # ---- memory-bound (per micro-batch) ------------------------------------------------------
    elems = (T.elems_tp_split + T.elems_scores) / tp + T.elems_replicable * np.where(sp, 1.0 / tp, 1.0)
    passes = 3.0 + full  # fwd + 2x bwd (+ fwd again under full recompute)
    mem_mb = elems * a_bytes * passes * tok_mb * layers / (hw.hbm_bw * hw.hbm_eff) * layer_ratio

    # ---- TP / SP, EP all-to-all and CP (per micro-batch), then the overlap of TP / EP ----------------
    tp_mb = _tp_seconds(g, T, price)
    # Dispatch and combine in the forward and twice in the backward, and again where the MoE layer's
    # forward is recomputed (full recomputation, or selective with "moe").
    again = forward_again(rc, full, T.recompute_modules, "moe")
    ep_mb = np.where(ep > 1, dispatch_seconds(price, again) * moe_layers, 0.0) * moe_ratio if T.top_k else 0.0
    cp_mb = _cp_seconds(g, T, price, opts)
    if opts.overlap_tp:
        tp_mb = np.maximum(0.0, tp_mb - gemm_mb)
    if opts.overlap_ep:
        ep_mb = np.maximum(0.0, ep_mb - gemm_mb)

    # ---- PP point-to-point ---------------------------------------------------------------------------
    pp_mb, pp_fill = _pp_seconds(g, price["pp_p2p"], opts)

    t_mb = comp_mb + ovh_mb + mem_mb + tp_mb + cp_mb + ep_mb + pp_mb
    # ---- host-bound expert GEMMs (per micro-batch): the part of the host's issue time beyond the GPU's
    host_mb = 0.0
    if hw.expert_host_s > 0.0 and T.shapes.experts:
        issue = expert_host_seconds(T, ep, again, moe_layers * moe_ratio, hw,
                                    getattr(wl.recipe, "expert_capacity_factor", None))
        gpu_mb, t_mb = t_mb, np.maximum(t_mb, issue)
        host_mb = t_mb - gpu_mb
    off_mb = 0.0
    if wl.recipe.offload_layers > 0:  # activation copies to and from host memory, exposed part
        off_mb = offload_exposed(c, wl, hw, comp_mb, layers)
        t_mb = t_mb + off_mb
    bubble = (pp - 1.0) / vpp * t_mb
    if wl.recipe.pp_schedule == DUALPIPE:  # (PP/2 - 1)(F&B + B - 3W), Table 2 (``mi400plan.dualpipe``)
        bubble = dualpipe_bubble(pp) * t_mb
    pp_fill = np.maximum(0.0, pp_fill)  # fill/drain transfers beyond those already in the bubble

    dp_exposed, dp_raw = _dp_seconds(g, dpg, price, opts)
    opt = _optimizer_seconds(g, dpg, hw)

    step = m * t_mb + bubble + pp_fill + dp_exposed + opt
    return {
        "t_compute": m * gemm_mb,
        "t_attention": m * g.attn_mb,
        "t_gemm_overhead": m * ovh_mb,
        "t_memory_bound": m * mem_mb,
        "t_tp": m * tp_mb,
        "t_cp": m * cp_mb,
        "t_ep": m * ep_mb,
        "t_pp": m * pp_mb + pp_fill,
        "t_host": m * host_mb,
        "t_bubble": bubble,
        "t_dp": dp_exposed,
        "t_optimizer": opt,
        "t_offload": m * off_mb if wl.recipe.offload_layers > 0 else 0.0,
        "step": step,
        "compute_only": m * comp_mb,
        "m": m,
        "flops_hw_per_token": flops_hw_tok,
        "dp_raw": dp_raw,
        "world": tp * cp * pp * dp,
        "tok_gpu_mb": tok_mb / tp,  # a micro-batch's tokens per GPU-equivalent of work within a stage
        "stage_imbalance": stage.ratio,
    }


def offload_seconds(n_layers: Any, layer_bytes: Any, fwd_s: Any, host_bw: float) -> Any:
    """Exposed seconds of activation offloading per micro-batch on one GPU.

    Transformer Engine's offload (``specs.layout.OFFLOAD_IN_FLIGHT``) copies each offloaded layer's
    saved activations (``layer_bytes``) device-to-host on a side stream while the next layer runs its
    forward (``fwd_s``), and host-to-device while the layer after it runs its backward (``2 x fwd_s``:
    backward is twice the forward's FLOPs). Each copy takes ``layer_bytes / host_bw`` (bytes over
    bytes/s per direction; the two directions do not overlap in time, one per pass); only the part
    longer than the compute it hides behind is exposed:
    ``n x (max(0, x - fwd) + max(0, x - 2 fwd))``, ``x = layer_bytes / host_bw``.
    """
    x = layer_bytes / host_bw
    return n_layers * (np.maximum(0.0, x - fwd_s) + np.maximum(0.0, x - 2.0 * fwd_s))


def offload_exposed(c: dict[str, Any], wl: Workload, hw: Hardware, comp_mb: Any, layers: Any) -> Any:
    """``offload_seconds`` for layouts ``c``: ``memory.offloaded_layers`` offloaded layers per
    micro-batch (``min(N, layers per chunk - 1) x vpp``), each of the mean layer's saved
    activations (``memory.layer_activation_bytes_per_token`` x the micro-batch's tokens on this GPU),
    behind one layer's forward: ``compute / (3 x layers)``."""
    from mi400plan.memory import layer_activation_bytes_per_token, offloaded_layers

    if hw.host_bw <= 0:
        raise ValueError(f"{hw.name}: activation offloading needs the host-link bandwidth")
    tp, vpp, cp, etp = (np.asarray(c[k], dtype=np.float64) for k in ("tp", "vpp", "cp", "etp"))
    mb, rc = np.asarray(c["micro_batch"], dtype=np.float64), np.asarray(c["recompute"])
    sp = np.asarray(c["sp"]).astype(bool)
    model, s = wl.model, float(wl.seq_len)
    kw = dict(tp=tp, etp=etp, sequence_parallel=sp, recompute=rc, seq_len=s)
    per_tok = layer_activation_bytes_per_token(model, wl.recipe, moe=False, **kw)
    if model.moe is not None:
        share = wl.counts.num_moe_layers / model.num_layers
        moe_tok = layer_activation_bytes_per_token(model, wl.recipe, moe=True, **kw)
        per_tok = (1.0 - share) * per_tok + share * moe_tok
    tokens = mb * s / cp
    n = offloaded_layers(wl.recipe.offload_layers, layers, vpp)
    return offload_seconds(n, tokens * per_tok, comp_mb / (3.0 * layers), hw.host_bw)


# --- memory ---------------------------------------------------------------------------------------


def _memory_layout(c: dict[str, Any], wl: Workload) -> dict[str, Any]:
    """The ``memory.train_memory`` keywords of the layout columns ``c``."""
    return dict(
        tp=c["tp"], pp=c["pp"], vpp=c["vpp"], dp=c["dp"], ep=c["ep"], etp=c["etp"], cp=c["cp"], zero=c["zero"],
        micro_batch=c["micro_batch"], seq_len=wl.seq_len, recompute=c["recompute"],
        sequence_parallel=np.asarray(c["sp"]).astype(bool),
        num_microbatches=np.asarray(wl.global_batch // (np.asarray(c["dp"]) * np.asarray(c["micro_batch"]))),
        pipeline_split=c["split"] if "split" in c else 0,
    )


def memory_total(c: dict[str, Any], wl: Workload) -> Any:
    """Per-GPU training memory in bytes, term by term (``memory.train_memory``, the ``fit`` model)."""
    from mi400plan.memory import train_memory

    return train_memory(wl.model, wl.counts, wl.recipe, **_memory_layout(c, wl))


def memory_peak(c: dict[str, Any], wl: Workload) -> np.ndarray:
    """The total of :func:`memory_total` alone (``memory.train_memory_peak``), for every candidate."""
    from mi400plan.memory import train_memory_peak

    return train_memory_peak(wl.model, wl.counts, wl.recipe, **_memory_layout(c, wl))


# --- the search -------------------------------------------------------------------------------------


@record(frozen=False)
class SearchResult:
    """Best layouts (arrays sorted best first) and the bookkeeping."""

    world: int
    evaluated: int
    valid: int
    rejected: dict[str, int]
    top: dict[str, np.ndarray]  # layout columns + every step_time output + memory, best first
    best_rejected_memory: dict[str, np.ndarray] | None = None  # fastest layouts that did not fit (if asked)
    best_crossing: dict[str, np.ndarray] | None = None  # fastest fitting layouts whose TP or PP span leaves the domain
    best_inside: dict[str, np.ndarray] | None = None  # fastest fitting layouts whose TP and replica span stay inside it
    front: dict[str, np.ndarray] | None = None  # with pareto=True: non-dominated on (step time, memory), fastest first


def crosses_domain(c: dict[str, Any], domain: int) -> Any:
    """True where the TP group, or the TP x CP x fold x PP span of a replica, is wider than the scale-up domain."""
    tp = np.asarray(c["tp"])
    span = tp * np.asarray(c["cp"]) * np.asarray(c["fold"]) * np.asarray(c["pp"])
    return (tp > domain) | (span > domain)


def tier_of(group: Any, stride: Any, domain: int) -> Any:
    """Tier a group's collectives land on, by the rule ``comms.placed_collective_time`` applies
    (``comms.domain_split``): ``none`` for a group of 1, ``scale_up`` when every member lies in one
    domain (span ``(g-1) stride + 1 <= domain``), ``scale_out`` when every member is in a different
    domain (the stride reaches past it), else ``hierarchical``."""
    from mi400plan.comms import domain_split

    g = np.asarray(group)
    split = domain_split(g, stride, domain)
    return np.where(g <= 1, "none", np.where(split.inside, "scale_up", np.where(split.apart, "scale_out", "hierarchical")))


def dp_tier(tp: Any, cp: Any, fold: Any, pp: Any, dp: Any, domain: int) -> Any:
    """Tier of the non-expert data-parallel group (DP x CP ranks, as ``step_time`` reduces them).

    The group is ``CP x fold`` ranks at stride ``TP`` inside the expert block, times ``DP / fold``
    blocks at stride ``replica = TP x CP x fold x PP`` (``_two_level_requests``). ``scale_up`` when the whole
    group lies in one domain, ``scale_out`` when both levels leave it (or the only level does),
    ``hierarchical`` when the inner level stays inside and the outer one crosses; ``none`` for a
    group of 1."""
    tp, cp, fold, pp, dp = (np.asarray(x) for x in (tp, cp, fold, pp, dp))
    g_in, g_out = cp * fold, dp // fold
    replica = tp * cp * fold * pp
    t_in, t_out = tier_of(g_in, tp, domain), tier_of(g_out, replica, domain)
    both = np.where((t_in == "scale_up") & (t_out == "scale_up"), "scale_up",
                    np.where((t_in == "scale_out") & (t_out == "scale_out"), "scale_out", "hierarchical"))
    return np.where(g_out <= 1, t_in, np.where(g_in <= 1, t_out, both))


SORT_KEYS = ("tp", "pp", "cp", "ep", "etp", "vpp", "zero", "micro_batch", "recompute", "sp")
TIE_BREAK = (
    "fastest step time first; equal step times are ordered by lower memory per GPU, then smaller "
    "TP, PP, CP, EP, ETP, VPP, ZeRO stage, micro-batch, recompute level, SP off before on"
)


def rank_order(step: np.ndarray, mem: np.ndarray, cols: dict[str, np.ndarray]) -> np.ndarray:
    """Indices best first (``TIE_BREAK``)."""
    keys = [cols[k] for k in reversed(SORT_KEYS)] + [mem, step]
    return np.lexsort(keys)


def pareto_indices(step: np.ndarray, mem: np.ndarray, cols: dict[str, np.ndarray]) -> np.ndarray:
    """Indices of the rows no other row dominates on (step time, memory per GPU), fastest first.

    Row b dominates row a when b is no slower and needs no more memory, and is better on one of the
    two. In ``rank_order`` (step time, then memory, then the tie-break) a row is therefore on the
    front exactly when its memory is below every earlier row's; of rows equal on both, the first in
    the tie-break order stands for them.
    """
    if step.size == 0:
        return np.zeros(0, dtype=np.int64)
    order = rank_order(step, mem, cols)
    m = np.asarray(mem, dtype=np.float64)[order]
    below_all_earlier = m < np.minimum.accumulate(np.concatenate(([np.inf], m[:-1])))
    return order[below_all_earlier]


def usable_hbm(wl: Workload, hw: Hardware) -> float:
    """HBM a layout may use: capacity minus the recipe's capacity-proportional reserve (bytes).

    (``memory.train_memory``'s total already holds the fixed part of the reserve.)
    """
    from mi400plan.memory import usable_bytes

    return float(usable_bytes(hw.hbm_bytes, wl.recipe.reserve))


def _fits(c: dict[str, np.ndarray], wl: Workload, hw: Hardware) -> tuple[np.ndarray, Any]:
    mem = memory_total(c, wl)  # valid (fits or tight): the need without the fragmentation share
    return np.asarray(mem.need, dtype=np.float64) <= usable_hbm(wl, hw), mem


INNER_KEYS = ("zero", "micro_batch", "recompute", "sp")


def inner_values(opts: SearchOptions) -> tuple[np.ndarray, ...]:
    """The (ZeRO, micro-batch, recompute, SP) values searched, as int64 arrays (``INNER_KEYS`` order)."""
    return tuple(np.asarray(x, dtype=np.int64) for x in (opts.zero, opts.micro_batch, opts.recompute, opts.sequence_parallel))


def grid_layouts(cols: dict[str, np.ndarray], opts: SearchOptions) -> dict[str, np.ndarray]:
    """Structures x (ZeRO, micro-batch, recompute, SP) as broadcastable arrays (no copies).

    Structural columns get shape ``(n, 1, 1, 1, 1)``; each inner dimension lies along its own axis
    (``zero`` axis 1, ``micro_batch`` 2, ``recompute`` 3, ``sp`` 4). Every numpy expression over
    these arrays is evaluated at the shape of the dimensions it depends on, so terms that do not
    depend on ZeRO, recompute or SP (collective times of the TP, CP, EP, PP and DP groups) are
    computed once per structure (and micro-batch) and broadcast over the rest; the arithmetic of
    each element is the same as for one flat layout. The C-order flattening of the full grid is
    the order of :func:`expand`.
    """
    out = {k: np.asarray(v).reshape(-1, 1, 1, 1, 1) for k, v in cols.items()}
    for axis, (k, vals) in enumerate(zip(INNER_KEYS, inner_values(opts)), start=1):
        shape = [1, 1, 1, 1, 1]
        shape[axis] = vals.size
        out[k] = vals.reshape(shape)
    return out


def grid_shape(n_structures: int, opts: SearchOptions) -> tuple[int, ...]:
    return (n_structures,) + tuple(v.size for v in inner_values(opts))


@record(frozen=False)
class ChunkResult:
    """What one block of structures contributes to a search."""

    rejected: dict[str, int]
    valid: int
    top: dict[str, np.ndarray]
    nofit: dict[str, np.ndarray]
    crossing: dict[str, np.ndarray]
    inside: dict[str, np.ndarray]
    front: dict[str, np.ndarray] | None = None


MEM_KEYS = ("weights", "gradients", "optimizer", "activations", "reserve", "total", "fragmentation")


def evaluate_structures(
    cols: dict[str, np.ndarray],
    wl: Workload,
    hw: Hardware,
    terms: ModelTerms,
    opts: SearchOptions,
    coll: CollFn,
    top_k: int,
    pareto: bool = False,
    nofit: bool = False,
) -> ChunkResult:
    """Evaluate every (ZeRO, micro-batch, recompute, SP) expansion of the structures ``cols``.

    Inner rules are applied in ``RULE_ORDER`` (each candidate counted under the first it breaks),
    the step-time model runs once over the broadcast grid (:func:`grid_layouts`), memory
    (``memory.train_memory``) runs on the candidates that pass the rules, and only the ``top_k``
    fastest fitting rows (plus the best rack-crossing one, and with ``nofit`` the three fastest that do
    not fit) are gathered into columns.
    """
    n_s = int(cols["tp"].size)
    shape = grid_shape(n_s, opts)
    g = grid_layouts(cols, opts)
    rejected = {r: 0 for r in RULE_ORDER}
    alive = np.ones(shape, dtype=bool)
    for rule, bad in inner_masks(g, wl).items():
        hit = alive & bad
        rejected[rule] += int(np.count_nonzero(hit))
        alive &= ~hit
    empty = {"tp": np.zeros(0, dtype=np.int64)}
    idx = np.flatnonzero(alive)
    if idx.size == 0:
        return ChunkResult(rejected, 0, empty, empty, empty, empty)
    with np.errstate(all="ignore"):  # rule-breaking grid points may divide by zero; they are dropped
        # The memory total runs on the broadcast grid too (each term at the shape of the dimensions it
        # depends on); the terms of the peak stage are computed again only for the rows gathered. It runs
        # first: its temporaries are freed before the step-time model's, whose terms stay for the gather,
        # so the two never hold their working arrays at once (fewer fresh pages).
        peak = memory_peak(g, wl)
        t = step_time(g, wl, hw, terms, opts, coll)
    ok = _Passing(g, shape, idx)
    total, step = ok.at(peak), ok.at(t["step"])
    keys = MEM_KEYS + (("offloaded",) if wl.recipe.offload_layers > 0 else ())
    fits = total <= usable_hbm(wl, hw)  # ``total`` is the need without fragmentation: fits or tight
    n_fit = int(np.count_nonzero(fits))
    rejected["memory"] += idx.size - n_fit

    def gather(sel: np.ndarray) -> dict[str, np.ndarray]:
        rows = {k: ok.col(k, sel) for k in g} | {k: ok.at(v, sel) for k, v in t.items()}
        if sel.size == 0:
            return rows | {f"mem_{k}": np.zeros(0) for k in keys}
        mem = memory_total(rows, wl)
        return rows | {f"mem_{k}": np.asarray(getattr(mem, k), dtype=np.float64).reshape(-1) for k in keys}

    def best(mask: np.ndarray, k: int) -> np.ndarray:
        where = np.flatnonzero(mask)
        return where[top_indices(step[where], total[where], ok.col, k, at=where)] if where.size else where

    crosses = crosses_domain({k: g[k].reshape(-1) for k in ("tp", "cp", "fold", "pp")}, hw.domain)[ok.structure]
    front = None
    if pareto:
        where = np.flatnonzero(fits)
        front = gather(where[pareto_indices(step[where], total[where], {key: ok.col(key, where) for key in SORT_KEYS})])
    picks = [best(fits, top_k), best(~fits, 3) if nofit else idx[:0], best(fits & crosses, 1),
             best(fits & ~crosses, 1)]
    # One gather (and one memory evaluation) for every pick: each row's terms are its own.
    rows, at = gather(np.concatenate(picks)), np.cumsum([0] + [p.size for p in picks])
    top, nofit_rows, crossing, inside = ({k: v[lo:hi] for k, v in rows.items()} if hi > lo else empty
                                         for lo, hi in zip(at[:-1], at[1:]))
    return ChunkResult(rejected, n_fit, top, nofit_rows, crossing, inside, front)


class _Passing:
    """The candidates of a structure x inner-option grid (``shape``) that pass the rules: flat
    indices ``idx`` into the grid, read without unravelling all of them (one flat take per array)."""

    def __init__(self, g: dict[str, np.ndarray], shape: tuple[int, ...], idx: np.ndarray) -> None:
        self.g, self.shape, self.idx = g, shape, idx
        self.structure = idx // int(np.prod(shape[1:]))  # the structure (axis 0) of each candidate

    def at(self, x: Any, rows: np.ndarray | None = None) -> np.ndarray:
        """Grid array ``x`` (broadcastable to the grid) at the candidates ``rows`` (indices into ``idx``; all)."""
        arr = np.asarray(x, dtype=np.float64)
        flat = self.idx if rows is None else self.idx[rows]
        if arr.shape == self.shape:
            return arr.reshape(-1)[flat]
        return np.broadcast_to(arr, self.shape)[np.unravel_index(flat, self.shape)]

    def col(self, k: str, rows: np.ndarray) -> np.ndarray:
        """Layout column ``k`` of the candidates ``rows`` (indices into ``idx``), read off its grid axis."""
        if k not in INNER_KEYS:
            return self.g[k].reshape(-1)[self.structure[rows]]
        axis = 1 + INNER_KEYS.index(k)
        return self.g[k].reshape(-1)[np.unravel_index(self.idx[rows], self.shape)[axis]]


def top_indices(step: np.ndarray, mem: np.ndarray, col: Callable[[str, np.ndarray], np.ndarray], k: int,
                at: np.ndarray) -> np.ndarray:
    """Indices of the ``k`` best rows, best first (``TIE_BREAK``), without sorting every row.

    Step time is the primary key, so only rows whose step time is at most the ``k``-th smallest
    (ties included) can be among the ``k`` best; those are ordered with :func:`rank_order`. Row ``i``
    of ``step`` and ``mem`` is row ``at[i]`` of the tie-break columns, which ``col(key, rows)`` reads
    for that pool only.
    """
    n = step.size
    pool = np.arange(n)
    if n > 4 * k:
        kth = np.partition(step, k - 1)[k - 1]
        if not np.isnan(kth):
            pool = np.flatnonzero(step <= kth)
    order = rank_order(step[pool], mem[pool], {key: col(key, at[pool]) for key in SORT_KEYS})
    return pool[order[:k]]


def search(
    wl: Workload,
    hw: Hardware,
    world: int,
    opts: SearchOptions | None = None,
    *,
    top_k: int = 10,
    coll: CollFn | None = None,
    progress: Callable[[int, int], None] | None = None,
    pareto: bool = False,
    rejected_memory: bool = False,
) -> SearchResult:
    """Evaluate every candidate layout for ``world`` GPUs and return the ``top_k`` fastest that fit
    (and, with ``pareto``, every fitting layout on the step-time / memory-per-GPU front; with
    ``rejected_memory``, the three fastest that pass every rule but do not fit)."""
    opts = opts or SearchOptions()
    coll = coll or make_coll(hw)
    terms = model_terms(wl.model, wl.counts, wl.seq_len, wl.recipe)
    n_in = inner_size(opts)
    st = structural_grid(wl.model, wl.seq_len, world, opts, n_in)
    rejected = dict(st.rejected)
    n_st = int(st.cols["tp"].size)
    n = n_st * n_in
    per = max(1, opts.chunk // max(n_in, 1))
    keep: list[dict[str, np.ndarray]] = []
    keep_nofit: list[dict[str, np.ndarray]] = []
    keep_cross: list[dict[str, np.ndarray]] = []
    keep_inside: list[dict[str, np.ndarray]] = []
    keep_front: list[dict[str, np.ndarray]] = []
    valid = 0
    for lo in range(0, n_st, per):
        hi = min(n_st, lo + per)
        part = evaluate_structures({k: v[lo:hi] for k, v in st.cols.items()}, wl, hw, terms, opts, coll, top_k,
                                   pareto, rejected_memory)
        for r, v in part.rejected.items():
            rejected[r] += v
        valid += part.valid
        keep.append(part.top)
        keep_nofit.append(part.nofit)
        keep_cross.append(part.crossing)
        keep_inside.append(part.inside)
        if part.front is not None:
            keep_front.append(part.front)
        if progress is not None:
            progress(hi * n_in, n)
    top = _merge(keep, top_k)
    nofit = _merge(keep_nofit, 3)
    crossing = _merge(keep_cross, 1)
    inside = _merge(keep_inside, 1)
    return SearchResult(
        world, st.evaluated, valid, rejected, top,
        nofit if nofit["tp"].size else None,
        crossing if crossing["tp"].size else None,
        inside if inside["tp"].size else None,
        _merge_front(keep_front) if pareto else None,
    )


def inner_masks(c: dict[str, np.ndarray], wl: Workload) -> dict[str, np.ndarray]:
    """Rules that depend on (ZeRO, micro-batch, recompute, SP)."""
    sp = c["sp"].astype(bool)
    out: dict[str, np.ndarray] = {}
    if wl.model.moe is not None:
        out["moe-tp-needs-sp"] = (c["tp"] > 1) & ~sp
    out["sp-needs-tp"] = sp & (c["tp"] == 1)
    out["batch-dp-mb"] = (wl.global_batch % (c["dp"] * c["micro_batch"])) != 0
    m = wl.global_batch // (c["dp"] * c["micro_batch"])
    out["vpp-microbatches"] = (c["vpp"] > 1) & ((m % c["pp"]) != 0)
    if wl.recipe.pp_schedule == DUALPIPE:
        out[DUALPIPE_RULE] = dualpipe_breaks(c["pp"], c["vpp"], m)
    if wl.recipe.offload_layers > 0:  # mi400plan.offload: Megatron-Core refuses these with CPU offloading
        out[OFFLOAD_RULE] = (c["pp"] > 1) | (c["recompute"] > 0)
    return out


def _topk(rows: dict[str, np.ndarray], k: int) -> dict[str, np.ndarray]:
    n = rows["tp"].size
    if n == 0:
        return rows
    order = rank_order(rows["step"], rows["mem_total"], rows)
    sel = order[:k]
    return {key: np.asarray(v)[sel] for key, v in rows.items()}


def _merge(parts: list[dict[str, np.ndarray]], k: int) -> dict[str, np.ndarray]:
    parts = [p for p in parts if p and p["tp"].size]
    if not parts:
        return {"tp": np.zeros(0, dtype=np.int64)}
    rows = {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}
    return _topk(rows, k)


def _merge_front(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The front of the union of the chunks' fronts (a row off its chunk's front is off the whole one)."""
    parts = [p for p in parts if p and p["tp"].size]
    if not parts:
        return {"tp": np.zeros(0, dtype=np.int64)}
    rows = {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}
    sel = pareto_indices(rows["step"], rows["mem_total"], rows)
    return {key: np.asarray(v)[sel] for key, v in rows.items()}


def evaluate_one(layout: dict[str, int], wl: Workload, hw: Hardware, world: int,
                 opts: SearchOptions | None = None, coll: CollFn | None = None) -> dict[str, float]:
    """The same model for one layout given as plain ints (for checks and brute-force tests).

    ``layout`` has tp, pp, vpp, cp, ep, etp, zero, micro_batch, recompute (0/1/2), sp (0/1);
    dp and the fold factor are derived from ``world``.
    """
    opts = opts or SearchOptions()
    coll = coll or make_coll(hw)
    terms = model_terms(wl.model, wl.counts, wl.seq_len, wl.recipe)
    c: dict[str, Any] = {k: np.asarray([int(v)]) for k, v in layout.items()}
    c["fold"] = fold_factor(c["tp"], c["cp"], c["ep"], c["etp"])
    c["dp"] = np.asarray([world // int(c["tp"][0] * c["cp"][0] * c["pp"][0])])
    c["split"] = np.maximum(split_codes(wl.model, c, opts), 0)
    t = step_time(c, wl, hw, terms, opts, coll)
    out = {k: float(np.asarray(v).ravel()[0]) for k, v in t.items()}
    mem = memory_total(c, wl)
    out["mem_total"] = float(np.asarray(mem.total).ravel()[0])
    out["mem_need"] = float(np.asarray(mem.need).ravel()[0])  # the total without the fragmentation share
    out["fits"] = float(out["mem_need"] <= usable_hbm(wl, hw))  # fits or tight
    return out


def layout_violations(layout: dict[str, int], wl: Workload, world: int,
                      opts: SearchOptions | None = None) -> list[str]:
    """Rules (names from ``RULES``, except memory) that one layout breaks, in ``RULE_ORDER``."""
    c = {k: np.asarray([int(v)]) for k, v in layout.items()}
    c["fold"] = fold_factor(c["tp"], c["cp"], c["ep"], c["etp"])
    c["dp"] = np.asarray([max(1, world // int(c["tp"][0] * c["cp"][0] * c["pp"][0]))])
    o = opts or SearchOptions()
    masks = structural_masks(wl.model, wl.seq_len, world, c, o.split_embedding_loss, o.uneven_pp)
    masks.update(inner_masks(c, wl))
    return [r for r in RULE_ORDER if r in masks and bool(np.asarray(masks[r]).ravel()[0])]


def metrics(step: Any, wl: Workload, hw: Hardware, world: int, terms: ModelTerms, flops_hw_tok: Any) -> dict[str, Any]:
    """Tokens/s, MFU and HFU for step times ``step`` (s). MFU uses model FLOPs only (no recompute)."""
    tokens = float(wl.global_batch) * wl.seq_len
    tps = tokens / step
    mfu = terms.flops_model * tps / (world * hw.peak_flops)
    hfu = flops_hw_tok * tps / (world * hw.peak_flops)
    return {"tokens_per_s": tps, "mfu": mfu, "hfu": hfu}


def iter_rows(top: dict[str, np.ndarray]) -> Iterator[dict[str, Any]]:
    """Rows of a ``top`` table as plain Python values (ints for layout, floats for the rest)."""
    n = top["tp"].size
    for i in range(n):
        yield {k: (int(v[i]) if np.issubdtype(np.asarray(v).dtype, np.integer) else float(v[i])) for k, v in top.items()}


__all__ = [
    "BREAKDOWN",
    "Hardware",
    "RULES",
    "SearchOptions",
    "SearchResult",
    "TIE_BREAK",
    "Workload",
    "evaluate_one",
    "evaluate_structures",
    "grid_layouts",
    "layout_violations",
    "metrics",
    "model_terms",
    "search",
    "step_time",
]
