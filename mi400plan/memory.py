"""Per-GPU memory of training and inference, vectorized over layouts (numpy, float64, bytes).

Every layout argument of :func:`train_memory` and :func:`infer_memory` may be a Python scalar or a
numpy array; they broadcast together, so ``sweep`` sizes millions of candidate layouts in one call.
All results are bytes on the MOST LOADED RANK (the pipeline stage whose total is largest).

Sources
-------
* Parameter grouping and most-loaded stage: Megatron-LM ``theoretical_memory_usage.py`` (first stage
  holds the embedding, last stage the output head; TP-split vs replicated vs expert-split groups).
* Bytes per parameter, ZeRO stages 1-3: Rajbhandari et al. 2020, "ZeRO" (arXiv 1910.02054), sec. 5.
* Activations: Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
  Models" (arXiv 2205.05198), sec. 4: per layer ``s*b*h*(34 + 5*a*s/h)`` bytes with 16-bit
  activations and 1-byte dropout masks, ``/t`` for the TP-split parts, everything ``/t`` with
  sequence parallelism, selective recompute drops the attention core, full recompute keeps the
  layer input only. Generalized here term by term (see :func:`layer_activation_bytes_per_token`).
* In-flight micro-batches: Narayanan et al. 2021 (arXiv 2104.04473), sec. 2.2: 1F1B stage ``i``
  holds ``pp - i`` micro-batches; the interleaved schedule holds ``pp*(1 + (pp-1)/(pp*vpp))`` at
  stage 0 (Megatron's warm-up count ``2*(pp - i - 1) + (vpp - 1)*pp`` chunks, plus the current one).
  DualPipe (``recipe.pp_schedule``; DeepSeek-V3 report arXiv 2412.19437, Table 2): rank ``i`` holds
  stages ``i`` and ``pp - 1 - i`` (two stages' parameters) and ``pp + 1`` micro-batches of one stage's
  activations (``mi400plan.dualpipe``).
* KV cache: ``params.kv_cache_bytes_per_token`` (GQA: 2*kv_heads*head_dim per layer; MLA latent).
* Vocabulary padding (memory only; ``params`` counts stay unpadded): training pads the vocabulary to
  a multiple of ``recipe.vocab_divisible_by x tp`` as Megatron-LM does (``_vocab_size_with_padding``,
  ``--make-vocab-size-divisible-by`` 128: Llama-3's 128,256 -> 129,024 rows at TP 8); the padded rows of
  the embedding and output layer carry gradients and optimizer states, and the logits are
  ``padded/tp`` wide. Inference pads to a multiple of ``recipe.vocab_padding_size`` (vLLM's
  ``DEFAULT_VOCAB_PADDING_SIZE`` = 64, independent of TP). See :func:`padded_vocab_size`.
* FP8 training: ``recipe.fp8_weight_copies`` cached FP8 casts (Transformer Engine: row-wise + transposed)
  of the transformer-block GEMM weights only; embedding, output layer, norms and router have none.
  With ``recipe.fp8_params`` (``--fp8-param-gather``) those weights are the FP8 tensors themselves, with
  no bf16 working copy (``TrainRecipe.gemm_weight_bytes``).

What the frameworks hold, and what they free early
------------------------------------------------
* Megatron-Core's distributed optimizer (ZeRO-1): BF16 weights and an fp32 gradient buffer
  (``grad_bytes``, ``param_and_grad_buffer``) whole on every DP rank; fp32 master weights and Adam
  moments sharded over DP x CP. ZeRO-2 / FSDP with parameters kept after forward (Llama 3's FSDP,
  arXiv 2407.21783 sec. 3.3.2): gradients sharded too, except the two layers whose gradients exist
  whole between their backward and their reduce-scatter. ZeRO-3 / FSDP: parameters sharded, two
  gathered layers (current + prefetched).
* Pipeline stages: each stage holds its own layers under the split in use (``pipeline``: even,
  embedding and loss as layers, uneven first/last stages); stage ``i`` of 1F1B holds ``pp - i``
  micro-batches, capped by the step's micro-batches. A stage's output tensor is not held after it is
  sent (Megatron-Core ``deallocate_output_tensor``; Llama 3 frees the stage inputs and outputs it no
  longer needs): the next stage's first layer holds it as its input, counted once. The last stage
  holds one micro-batch's fp32 logits (1F1B runs its backward at once; 16-bit under Transformer
  Engine's fused cross entropy, ``TrainRecipe.logit_bytes``), and as many again per multi-token-prediction
  module (``TrainRecipe.mtp_layers``): each runs the shared output layer on its own hidden states and keeps
  its own vocabulary logits for its loss's backward (Megatron-Core ``process_mtp_loss``,
  ``megatron/core/transformer/multi_token_prediction.py``, 2025-2026: ``mtp_logits = output_layer(...)``,
  ``compute_language_model_loss(mtp_labels, mtp_logits)``, every module's loss backpropagated with the main
  one; DeepSeek-V3, arXiv 2412.19437, sec. 2.2: each MTP module's output head shares the main model's).
* Allocator fragmentation: the PyTorch caching allocator rounds blocks up and cannot always reuse
  freed segments, so ``reserved`` exceeds ``allocated``; the planner counts it as the fragmentation
  share of the runtime reserve (``RuntimeReserve.fragmentation``, 3 % of the allocated bytes), with
  the CUDA/HIP context and the communicator buffers of the layout as its fixed part
  (``mi400plan.reserve``). ``fit`` and ``sweep`` both report totals with the whole reserve included,
  and share one verdict: fits, tight (only the fragmentation share short), does not fit.

Sharding conventions (documented choices)
-----------------------------------------
* Attention, dense FFN and shared experts: ``/tp``, except the GQA K/V projections, ``/min(tp,
  kv_heads)`` (a KV head is replicated on ``tp/kv_heads`` ranks when TP exceeds the KV heads, as
  vLLM's QKVParallelLinear does), and MLA's q/kv down-projections, replicated on every TP rank
  (Megatron-Core ``parallel_mode="duplicated"``, vLLM ``ReplicatedLinear``). Embedding and output
  head: vocab-parallel ``/tp``. Norms and router: replicated. Routed experts: ``/(ep*etp)``.
* ZeRO shards over the data-parallel ranks that hold the same parameters. Dense parameters: the
  ``dp*cp`` ranks (Megatron's distributed optimizer shards over DP x CP). Expert parameters: the
  expert-data-parallel size ``edp = tp*cp*dp/(ep*etp)``, because Megatron-Core lays the expert grid
  (ETP x EP x EDP) over the same ranks as the dense grid (TP x CP x DP).
* ZeRO-3 keeps the gathered weights of the current and the prefetched layer (FSDP's forward
  prefetch): ``min(unsharded, sharded + 2 x largest layer)``; under DeepSpeed's rule
  (``recipe.zero3_gathering`` "deepspeed_limits") the largest module plus its bounded prefetch
  (:func:`deepspeed_gathered`), and gradients of that module plus the reduce bucket.
* Tied embeddings with ``pp > 1``: the last stage keeps its own copy of the embedding for the head.

Direction: memory per rank never grows with TP, EP or the ZeRO stage, nor with PP for models whose
layers are all alike. With mixed layers (dense first layers before MoE layers) a finer pipeline can
leave an MoE-only stage with more micro-batches in flight than the old mixed first stage, so the
heaviest stage can grow slightly when PP doubles; the interleaved schedule's stage-0 factor
``1 + (pp-1)/(pp*vpp)`` also grows with PP.

Recompute codes: ``RECOMPUTE_CODES`` (0 none, 1 selective, 2 full).
"""

from __future__ import annotations

import functools
from dataclasses import field, fields
from typing import Any, NamedTuple

import numpy as np

from mi400plan.dualpipe import DUALPIPE
from mi400plan.dualpipe import inflight_stage_microbatches as dualpipe_inflight
from mi400plan.finetune import adapter_saved_elems_per_token, lora_of, stage_adapter_params
from mi400plan.intmath import key_groups
from mi400plan.params import ParamCounts, kv_cache_bytes_per_token
from mi400plan.pipeline import N_SPLIT_CODES, chunk_layers
from mi400plan.records import record
from mi400plan.reserve import fixed_bytes as reserve_fixed_bytes
from mi400plan.specs.layout import OFFLOAD_IN_FLIGHT, RECOMPUTE_CODES, RECOMPUTE_NAMES, InferRecipe, RuntimeReserve, TrainRecipe
from mi400plan.specs.model import ModelSpec

__all__ = [
    "RECOMPUTE_CODES",
    "RECOMPUTE_NAMES",
    "TrainMemory",
    "InferMemory",
    "train_memory",
    "train_memory_peak",
    "offloaded_layers",
    "infer_memory",
    "max_batch_x_context",
    "max_context",
    "padded_vocab_size",
    "usable_bytes",
    "layer_activation_bytes_per_token",
]

ArrayLike = Any  # int | float | np.ndarray

TOKEN_ID_BYTES = 8  # int64 input ids held by the first stage (Megatron theoretical_memory_usage)
LOGIT_BYTES = 4  # fp32 logits: sampling (inference); training reads ``TrainRecipe.logit_bytes``
MASK_BYTES = 1  # dropout masks are 1 byte per element (Korthikanti et al. 2022, sec. 4.1)
LSE_BYTES = 4  # flash attention saves one fp32 log-sum-exp per head and query (Dao et al. 2022)
# The router probability of one routed token copy, kept by Megatron-Core's weighted SwiGLU for its backward:
# fp32, as Megatron-Bridge's DeepSeek model providers set ``moe_router_dtype`` (2 B with Megatron-Core's default, None:
# the router's input dtype, bf16).
PROB_BYTES = 4


@record
class TrainMemory:
    """Bytes per GPU on the most loaded rank (numpy float64 arrays, broadcast shape of the inputs).

    ``reserve`` is the capacity-independent part of the runtime reserve: its fixed part (the
    context and the communicator buffers of the layout, ``mi400plan.reserve``, or the user's
    ``fixed_bytes``) plus ``fragmentation``, the allocator's share of the allocated bytes; the
    capacity fraction is applied by the caller through :func:`usable_bytes`. ``total`` is the sum
    of the five terms. ``stage`` is the index of the most loaded pipeline stage. ``offloaded`` is the
    activation bytes this rank keeps in pinned host memory (activation offloading; 0 without it): the
    host memory per GPU the offloading needs, already taken out of ``activations``.
    """

    weights: np.ndarray
    gradients: np.ndarray
    optimizer: np.ndarray
    activations: np.ndarray
    reserve: np.ndarray
    total: np.ndarray
    stage: np.ndarray
    offloaded: np.ndarray  # activation bytes held in host memory (``recipe.offload_layers``); not in total
    fragmentation: np.ndarray  # the fragmentation share of the reserve (part of ``reserve`` and ``total``)

    @property
    def need(self) -> np.ndarray:
        """The capacity need without the fragmentation share: within the usable capacity, the layout
        is valid (``reserve.verdict_codes``: fits or tight)."""
        return self.total - self.fragmentation

    def item(self, i: Any = ()) -> dict[str, float]:
        """The terms of one layout (index ``i``) as plain floats."""
        return {f.name: float(np.asarray(getattr(self, f.name))[i]) for f in fields(self)}


@record
class InferMemory:
    """Inference bytes per GPU on the most loaded rank; ``activations`` is the forward scratch."""

    weights: np.ndarray
    kv_cache: np.ndarray
    activations: np.ndarray
    reserve: np.ndarray
    total: np.ndarray
    stage: np.ndarray
    kv_bytes_per_token: np.ndarray  # KV bytes per token of context on this rank

    def item(self, i: Any = ()) -> dict[str, float]:
        return {f.name: float(np.asarray(getattr(self, f.name))[i]) for f in fields(self)}


def usable_bytes(capacity_bytes: ArrayLike, reserve: RuntimeReserve) -> np.ndarray:
    """HBM left after the capacity-proportional part of the reserve: ``capacity * (1 - fraction)``.

    A layout fits when ``total <= usable_bytes(capacity, reserve)`` (``total`` already holds the
    fixed part of the reserve).
    """
    return np.asarray(capacity_bytes, dtype=np.float64) * (1.0 - reserve.fraction)


def padded_vocab_size(vocab_size: int, multiple: ArrayLike) -> np.ndarray:
    """Rows of the vocab-parallel embedding and output layer: ``ceil(V / multiple) * multiple``.

    Training (Megatron-LM ``_vocab_size_with_padding``): ``multiple = make_vocab_size_divisible_by x tp``
    (default 128 x TP), e.g. Llama-3: 128,256 -> ceil(128,256 / 1,024) x 1,024 = 129,024 at TP 8.
    Inference (vLLM ``pad_vocab_size``): ``multiple = 64`` whatever the TP. Number of rows (no unit).
    """
    m = np.asarray(multiple, dtype=np.float64)
    return np.ceil(float(vocab_size) / m) * m


# --- per-layer parameter tables -------------------------------------------------------------------


@record
class _LayerTable:
    """Cumulative sums over layers (length L+1) of the parameter groups and of MoE layers."""

    c_tp: np.ndarray  # attention + dense FFN + shared experts (TP-split, incl. the two below)
    c_kv: np.ndarray  # GQA K/V projections (part of c_tp; split by min(tp, kv_heads))
    c_arep: np.ndarray  # MLA down-projections (part of c_tp; replicated over TP)
    c_exp: np.ndarray  # routed experts (EP x ETP split)
    c_rep: np.ndarray  # router + norms (replicated)
    c_moe: np.ndarray  # number of MoE layers
    max_tp: float
    max_kv: float
    max_arep: float
    max_exp: float
    max_rep: float
    num_layers: int
    # (pp, vpp, split, mirror) -> that pipeline's stage slots, filled by :func:`_stage_slots` (the table
    # is cached per model, so a search computes each pipeline's slots once)
    slots: dict[tuple[int, int, int, bool], _StageSlots] = field(default_factory=dict, compare=False, repr=False)


@functools.lru_cache(maxsize=64)
def _layer_table(counts: ParamCounts) -> _LayerTable:
    lay = counts.layers
    tp = np.array([lp.attention + lp.mlp_dense + lp.shared_experts for lp in lay], dtype=np.float64)
    kv = np.array([lp.attn_kv for lp in lay], dtype=np.float64)
    arep = np.array([lp.attn_replicated for lp in lay], dtype=np.float64)
    ex = np.array([lp.routed_experts for lp in lay], dtype=np.float64)
    rep = np.array([lp.router + lp.norms for lp in lay], dtype=np.float64)
    moe = np.array([1.0 if lp.is_moe else 0.0 for lp in lay])

    def cs(x: np.ndarray) -> np.ndarray:
        return np.concatenate([[0.0], np.cumsum(x)])

    return _LayerTable(cs(tp), cs(kv), cs(arep), cs(ex), cs(rep), cs(moe),
                       float(tp.max()), float(kv.max()), float(arep.max()), float(ex.max()), float(rep.max()),
                       len(lay))


@record
class _StageSlots:
    """Per (pp, vpp) group: the stages that can be the most loaded one, with their sums.

    Within a run of consecutive stages holding the same parameters and the same layer mix, the first
    one has the most micro-batches in flight, so only run starts (plus the last stage, which holds
    the head and the logits) need evaluating.
    """

    stage: np.ndarray  # stage index per slot
    tp: np.ndarray
    kv: np.ndarray
    arep: np.ndarray
    exp: np.ndarray
    rep: np.ndarray
    moe: np.ndarray
    layers: np.ndarray  # transformer layers on the stage (all its chunks)
    first: np.ndarray
    last: np.ndarray

    @functools.cached_property
    def packed(self) -> np.ndarray:
        """Every ``SLOT_FIELDS`` array as a row, then a row of ones (the slots' validity), float64."""
        return np.stack([*(getattr(self, name) for name in SLOT_FIELDS), np.ones(len(self.stage))])


def _stage_slots(t: _LayerTable, pp: int, vpp: int, split: int = 0, mirror: bool = False) -> _StageSlots:
    """The stage slots of one pipeline (memoized on the layer table ``t``)."""
    hit = t.slots.get((pp, vpp, split, mirror))
    if hit is None:
        hit = t.slots[(pp, vpp, split, mirror)] = _compute_stage_slots(t, pp, vpp, split, mirror)
    return hit


def _compute_stage_slots(t: _LayerTable, pp: int, vpp: int, split: int, mirror: bool = False) -> _StageSlots:
    """Per-stage sums, one slot per run of alike stages. ``mirror`` (DualPipe, ``mi400plan.dualpipe``): rank
    ``i`` holds stages ``i`` and ``pp - 1 - i``, so each of the first ``pp / 2`` slots sums the two."""
    L = t.num_layers
    # Layers per model chunk under the pipeline split (``pipeline.chunk_layers``: even, embedding and
    # loss counted as layers, or uneven first/last stages), in chunk order.
    bounds = np.concatenate([[0], np.cumsum(chunk_layers(L, pp, vpp, split))]).astype(np.int64)
    s = np.arange(pp)
    # Stage s holds model chunks s, s+pp, s+2*pp, ... (Narayanan et al. 2021, interleaved schedule)
    chunk_idx = s[:, None] + np.arange(vpp)[None, :] * pp

    def stage_sum(cum: np.ndarray) -> np.ndarray:
        return (cum[bounds[chunk_idx + 1]] - cum[bounds[chunk_idx]]).sum(axis=1)

    tp, kv, arep, ex, rep, moe = (stage_sum(x) for x in (t.c_tp, t.c_kv, t.c_arep, t.c_exp, t.c_rep, t.c_moe))
    layers = (bounds[chunk_idx + 1] - bounds[chunk_idx]).sum(axis=1).astype(np.float64)
    first = (s == 0).astype(np.float64)
    last = (s == pp - 1).astype(np.float64)
    if mirror and pp >= 2 and pp % 2 == 0:
        half = pp // 2
        s = s[:half]
        tp, kv, arep, ex, rep, moe, layers, first, last = (
            x[:half] + x[::-1][:half] for x in (tp, kv, arep, ex, rep, moe, layers, first, last))
        pp = half
    key = np.stack([tp, kv, arep, ex, rep, moe, layers, first, last], axis=1)
    keep = np.ones(pp, dtype=bool)
    keep[1:] = np.any(key[1:] != key[:-1], axis=1)
    idx = np.nonzero(keep)[0]
    return _StageSlots(idx.astype(np.float64), tp[idx], kv[idx], arep[idx], ex[idx], rep[idx], moe[idx],
                       layers[idx], first[idx], last[idx])


SLOT_FIELDS = ("stage", "tp", "kv", "arep", "exp", "rep", "moe", "layers", "first", "last")


def _gather_slots(counts: ParamCounts, pp: np.ndarray, vpp: np.ndarray,
                  split: np.ndarray | None = None, mirror: bool = False) -> dict[str, np.ndarray]:
    """Slot tables broadcast to the candidates: arrays of shape ``pp.shape + (S,)`` and a mask
    (``mirror``: DualPipe's two stages per rank, :func:`_compute_stage_slots`)."""
    # Group candidates by (pp, vpp, split) in O(N): small integer keys (``intmath.key_groups``).
    if split is None:
        split = np.zeros_like(pp)
    split = np.broadcast_to(np.maximum(np.asarray(split, dtype=np.int64), 0), pp.shape)
    width = int(vpp.max()) + 1 if vpp.size else 1
    codes = N_SPLIT_CODES
    present, inverse = key_groups((pp.ravel() * width + vpp.ravel()) * codes + split.ravel())
    lt = _layer_table(counts)
    tabs = [_stage_slots(lt, int(k // codes // width), int(k // codes % width), int(k % codes), mirror)
            for k in present]
    S = max(len(tb.stage) for tb in tabs)
    F = len(SLOT_FIELDS)
    table = np.zeros((len(tabs), F + 1, S))  # every field, then the validity mask, per group
    for g, tb in enumerate(tabs):
        table[g, :, : len(tb.stage)] = tb.packed
    picked = table[inverse.ravel()]  # one gather for all fields
    out = {name: picked[:, f, :].reshape(pp.shape + (S,)) for f, name in enumerate(SLOT_FIELDS)}
    out["valid"] = picked[:, F, :].reshape(pp.shape + (S,)) > 0.0
    return out


def stage_slot_table(counts: ParamCounts, pp: ArrayLike, vpp: ArrayLike, split: ArrayLike,
                     mirror: bool = False) -> dict[str, np.ndarray]:
    """Each layout's pipeline stages (layers, MoE layers, last-stage flag, validity mask), arrays of
    shape ``pp.shape + (S,)``: what :func:`stage_imbalance` weighs. ``mirror`` (DualPipe): each slot is a
    rank holding stages ``i`` and ``pp - 1 - i``, which runs half the micro-batches through each, so its
    work per micro-batch is the mean of the two (the sums halved; the mean stage stays ``total / pp``)."""
    pp = np.asarray(pp, dtype=np.int64)
    vpp = np.broadcast_to(np.asarray(vpp, dtype=np.int64), pp.shape)
    sl = _gather_slots(counts, pp, vpp, np.broadcast_to(np.asarray(split, dtype=np.int64), pp.shape), mirror=mirror)
    if mirror:
        sl = {k: (v if k in ("stage", "valid") else v / 2.0) for k, v in sl.items()}
    return sl


class StageImbalance(NamedTuple):
    """The slowest pipeline stage over the mean stage, per kind of per-micro-batch work (each >= 1)."""

    work: np.ndarray  # the ``dense`` / ``moe`` / ``head`` weights (FLOPs or seconds), :func:`stage_work_ratio`
    layers: np.ndarray  # transformer layers (per-layer kernels, TP/CP exchanges)
    moe: np.ndarray  # MoE layers (EP all-to-all)


def _peak_over_mean(sl: dict[str, np.ndarray], pp: np.ndarray, per_stage: np.ndarray, total: ArrayLike) -> np.ndarray:
    """``max_s W_s / (total / pp)``, at least 1; 1 where ``total`` is 0 (nothing of that kind)."""
    peak = np.where(sl["valid"], per_stage, 0.0).max(axis=-1)
    total = np.asarray(total, dtype=np.float64)
    ok = total > 0.0
    return np.where(ok, np.maximum(peak * pp / np.where(ok, total, 1.0), 1.0), 1.0)


def stage_work_ratio(counts: ParamCounts, pp: ArrayLike, slots: dict[str, np.ndarray], *, dense: ArrayLike,
                     moe: ArrayLike, head: ArrayLike) -> np.ndarray:
    """The slowest pipeline stage's work over the mean stage's, ``max_s W_s / (sum_s W_s / pp)``, with
    ``W_s`` = the stage's dense layers x ``dense`` + its MoE layers x ``moe`` + ``head`` on the last
    stage (the LM head and loss; the embedding lookup does no FLOPs). A 1F1B or interleaved pipeline
    runs at its slowest stage's pace (Narayanan et al. 2021, section 2.2). Weights are FLOPs per
    token or seconds per micro-batch, arrays broadcast over the layouts of ``slots``
    (:func:`stage_slot_table`); 1 with PP 1."""
    pp = np.asarray(pp, dtype=np.int64)
    n_moe = float(counts.num_moe_layers)
    n_dense = len(counts.layers) - n_moe
    d, m, h = (np.asarray(x, dtype=np.float64) for x in (dense, moe, head))
    work = (slots["layers"] - slots["moe"]) * d[..., None] + slots["moe"] * m[..., None] + slots["last"] * h[..., None]
    return _peak_over_mean(slots, pp, work, n_dense * d + n_moe * m + h)


def stage_count_ratios(counts: ParamCounts, pp: ArrayLike, slots: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The slowest pipeline stage's transformer layers and MoE layers over the mean stage's (each 1
    where the model has none), for the layouts of ``slots`` (:func:`stage_slot_table`)."""
    pp = np.asarray(pp, dtype=np.int64)
    return (_peak_over_mean(slots, pp, slots["layers"], float(len(counts.layers))),
            _peak_over_mean(slots, pp, slots["moe"], float(counts.num_moe_layers)))


def stage_imbalance(counts: ParamCounts, pp: ArrayLike, vpp: ArrayLike, split: ArrayLike, *, dense: ArrayLike,
                    moe: ArrayLike, head: ArrayLike) -> StageImbalance:
    """The slowest pipeline stage's load over the mean stage's, per kind: ``work`` weighed by
    ``dense`` / ``moe`` / ``head`` (:func:`stage_work_ratio`), ``layers`` counting transformer layers,
    ``moe`` MoE layers (1 where the model has none). Each per-micro-batch term of the step scales by
    the ratio of its own kind. Layers per stage come from the pipeline split (``pipeline.chunk_layers``:
    even, embedding and loss counted as layers, or uneven first/last stages). All 1 with PP 1; arrays
    broadcast."""
    sl = stage_slot_table(counts, pp, vpp, split)
    layers, moe_layers = stage_count_ratios(counts, pp, sl)
    return StageImbalance(work=stage_work_ratio(counts, pp, sl, dense=dense, moe=moe, head=head),
                          layers=layers, moe=moe_layers)


def _tp_group_per_rank(model: ModelSpec, tp_sum: ArrayLike, kv_sum: ArrayLike, arep_sum: ArrayLike,
                       tp: ArrayLike) -> ArrayLike:
    """Parameters per TP rank of the TP-split group (attention, dense FFN, shared experts).

    Everything is ``/tp`` except the GQA K/V projections, ``/min(tp, kv_heads)`` (a KV head is never
    split: with ``tp > kv_heads`` each rank holds one whole head, replicated ``tp/kv_heads`` times,
    as vLLM's ``QKVParallelLinear`` does), and MLA's q_a/kv_a down-projections, whole on every rank
    (Megatron-Core ``multi_latent_attention.py`` builds them with ``parallel_mode="duplicated"``;
    vLLM uses ``ReplicatedLinear``).
    """
    a = model.attention
    kv_split = np.minimum(tp, float(a.kv_heads)) if a.kind == "gqa" else tp
    return (tp_sum - kv_sum - arep_sum) / tp + kv_sum / kv_split + arep_sum


# --- activations -------------------------------------------------------------------------------


def _ffn_elems(model: ModelSpec, width: ArrayLike) -> ArrayLike:
    """Saved FFN intermediate elements per token: SwiGLU keeps gate and up outputs (the activation is
    recomputed in the fused backward) and the down-projection input, 3 x width; GELU keeps the GELU
    input and the down-projection input, 2 x width (Korthikanti: 8sbh + 8sbh for width 4h)."""
    return (3.0 if model.ffn_kind == "swiglu" else 2.0) * width


def _ffn_bytes(model: ModelSpec, width: ArrayLike, e: float, g: float) -> ArrayLike:
    """Saved FFN intermediate bytes per token (:func:`_ffn_elems`): the down-projection input, a GEMM
    input, at ``g`` bytes an element, the gate/up outputs (SwiGLU) or the GELU input at ``e``."""
    return (_ffn_elems(model, width) - width) * e + width * g


def layer_activation_bytes_per_token(
    model: ModelSpec,
    recipe: TrainRecipe,
    *,
    tp: ArrayLike,
    etp: ArrayLike,
    sequence_parallel: ArrayLike,
    recompute: ArrayLike,
    seq_len: ArrayLike,
    moe: bool,
) -> np.ndarray:
    """Activation bytes saved for backward per token of one micro-batch, one layer, per TP rank.

    Korthikanti et al. 2022 (sec. 4.1), term by term, with ``e`` = activation bytes (2), ``t`` = TP:

    * replicated over TP unless SP (``/t`` with SP): pre-attention norm input ``e*h``, QKV input
      ``e*h``, pre-FFN norm input ``e*h``, FFN input ``e*h``; dropout masks ``h`` + ``h`` if
      ``recipe.dropout``; MLA latents ``e*(2*q_lora + 2*kv_lora + rope)`` (norm and up-projection
      inputs); MoE router probabilities in fp32 ``4*E``.
    * split by TP: Q ``e*a*d_qk/t``, K and V ``e*kv_r*(d_qk + d_v)`` with ``kv_r = max(g/t, 1)`` KV heads
      per rank (replicated when t > g; MLA: ``a/t`` decompressed heads), output-projection input
      ``e*a*d_v/t``, FFN intermediates ``e*3*ffn/t`` (SwiGLU) or ``e*2*ffn/t`` (GELU), shared experts
      likewise.
    * attention core, no flash attention, no recompute: softmax output ``e*a*s/t`` (+ mask ``a*s/t`` +
      dropout output ``e*a*s/t`` with dropout) per token: Korthikanti's ``5*a*s/h`` term. Flash
      attention (Dao et al. 2022) keeps only an fp32 log-sum-exp per head, ``4*a/t``. Selective
      recompute drops the core.
    * MoE routed path (tokens split by SP): ``top_k * cf`` copies of each local token (``cf`` =
      ``recipe.moe_capacity_factor``). Megatron-Core's default MoE is dropless (no capacity, no dropped
      tokens), so a perfectly balanced router would send each rank ``top_k`` copies per local token on
      average; ``cf`` (default 1.25) is the load-imbalance allowance for the busiest rank's dispatch
      buffers and expert activations, or the real capacity factor when tokens are dropped. Expert tensor parallelism all-gathers the dispatched tokens over the ``etp``
      ranks of an expert (Megatron-Core ``MoEAlltoAllTokenDispatcher``: all-to-all over EP, then an
      all-gather over expert-TP) and each of them computes ``1/etp`` of the FFN width, so per rank:
      dispatched input ``e*h*etp``, the router probability of each copy (``PROB_BYTES``) and FFN
      intermediates ``e*3*ffn_e`` (``etp`` times the tokens at ``1/etp`` of the width: ETP does not
      shrink them). The expert output is not kept: Megatron-Core applies the router probabilities
      inside the experts' activation (``weighted_bias_swiglu_impl``, which keeps its input and the
      probabilities) and unpermutes without them, so the combine's backward needs only the
      permutation map (NVIDIA/Megatron-LM commit 2659630, "Memory efficient token permutation",
      2025-04-09, Megatron-Core 0.13; unchanged at commit d98e8a6, 2026-08-22).
    * selective recompute (``rc`` 1) of ``recipe.recompute_modules`` (Megatron-Core ``recompute_modules``,
      ``specs.layout.RECOMPUTE_MODULES``): "core_attn" drops the core as above; "mla_up_proj" the
      up-projected Q, K and V (MLA); "layernorm" the two norm outputs (the QKV and FFN inputs,
      ``g*h`` each); "mlp" a dense layer's FFN (its input and intermediates: the checkpoint keeps the
      norm input, counted anyway); "moe" the routed path, shared experts and router probabilities;
      "shared_experts" the shared experts' intermediates; "moe_act" the routed experts'
      down-projection input (the activation output). What a module recomputes lives for one layer's
      backward at a time and is not counted.
    * full recompute: only the layer input ``e*h`` (``/t`` with SP).
    * FP8 training (``recipe.gemm_input_bytes`` = 1): the inputs of the block's GEMMs (QKV input, the
      output-projection input, the FFN input, the down-projection input, the MLA up-projection inputs,
      the dispatched expert tokens) are saved as their FP8 copy, 1 byte an element, as Transformer
      Engine 2.x does (``Linear``/``LayerNormLinear``/``GroupedLinear`` keep only the quantized
      column-wise input the weight-gradient GEMM reads); norm inputs, Q/K/V for attention and the
      gate/up outputs stay 16-bit.

    Check: GPT (GELU, ffn 4h, MHA), dropout on, no flash, no SP: ``10*h + 24*h/t + 5*a*s/t`` per token,
    i.e. Korthikanti's ``s*b*h*(10 + 24/t + 5*a*s/(h*t))`` divided by ``s*b``.
    """
    h = float(model.hidden_size)
    e = recipe.activation_bytes
    tp = np.asarray(tp, dtype=np.float64)
    rc = np.asarray(recompute)
    tsp = np.where(np.asarray(sequence_parallel, dtype=bool), tp, 1.0)
    keep = _Kept(rc, recipe.recompute_modules)
    rep_a, split_a, core = _attention_saved(model, recipe, tp=tp, seq_len=seq_len, keep=keep)
    rep_f, split_f, routed = _ffn_saved(model, recipe, tp=tp, etp=etp, moe=moe, keep=keep)
    lora = lora_of(recipe)
    if lora is not None:  # frozen GEMMs without an adapter keep no input (``_frozen_inputs``)
        rep_x, split_x = _frozen_inputs(model, recipe, lora.targets, tp=tp, keep=keep, moe=moe)
        rep_a, split_a = rep_a - rep_x, split_a - split_x
    full = (rep_a + rep_f) / tsp + split_a + split_f + core + routed / tsp
    return np.where(rc >= 2, e * h / tsp, full)


def _frozen_inputs(model: ModelSpec, recipe: TrainRecipe, targets: tuple[str, ...], *, tp: np.ndarray, keep: Any,
                   moe: bool) -> tuple[Any, Any]:
    """(replicated unless SP, split by TP) GEMM-input bytes per token that LoRA's frozen layers without an
    adapter do not save: Transformer Engine's ``Linear`` / ``LayerNormLinear`` keep their input only for the
    weight gradient (``backward_needs_input = is_grad_enabled and weight.requires_grad``,
    ``transformer_engine/pytorch/module/linear.py``), and a frozen weight has none; an adapted layer's input
    stays (the adapter's ``A`` reads it for ``dA``). Counted for the QKV and output-projection inputs and a
    dense layer's FFN input and down-projection input; an MoE layer's expert inputs are kept (an upper
    bound)."""
    a, h, g = model.attention, float(model.hidden_size), recipe.gemm_input_bytes
    d_v = float(a.v_head_dim or 0) if a.kind == "mla" else float(a.head_size(model.hidden_size))
    rep = 0.0 if "qkv" in targets else keep("layernorm", g * h)
    split = 0.0 if "proj" in targets else g * a.num_heads * d_v / tp
    if not moe:
        rep = rep + (0.0 if "fc1" in targets else keep("mlp", keep("layernorm", g * h)))
        split = split + (0.0 if "fc2" in targets else keep("mlp", g * model.ffn_dim / tp))
    return rep, split


class _Kept:
    """Bytes selective recomputation keeps: ``keep(module, x)`` is ``x``, or 0 where the layout
    recomputes selectively (code 1) and ``module`` is one of ``modules``."""

    def __init__(self, rc: np.ndarray, modules: tuple[str, ...]) -> None:
        self.sel = rc == 1
        self.modules = set(modules)

    def __call__(self, module: str, x: Any) -> Any:
        return np.where(self.sel, 0.0, x) if module in self.modules else x


def _attention_saved(model: ModelSpec, recipe: TrainRecipe, *, tp: np.ndarray, seq_len: ArrayLike,
                     keep: _Kept) -> tuple[Any, Any, Any]:
    """The attention block's saved bytes per token (:func:`layer_activation_bytes_per_token`): those
    replicated over TP unless SP (norm inputs, the QKV input, dropout masks, MLA latents), those split
    by TP (Q, K, V, the output-projection input) and the core's."""
    a = model.attention
    h = float(model.hidden_size)
    e, g = recipe.activation_bytes, recipe.gemm_input_bytes
    drop = 1.0 if recipe.dropout else 0.0
    heads = float(a.num_heads)
    if a.kind == "mla":
        assert a.qk_nope_head_dim and a.qk_rope_head_dim and a.v_head_dim and a.kv_lora_rank
        d_qk = float(a.qk_nope_head_dim + a.qk_rope_head_dim)
        d_v = float(a.v_head_dim)
        kv_r = heads / tp
        lora = float((a.q_lora_rank or 0) + a.kv_lora_rank)
        latent = e * (lora + a.qk_rope_head_dim) + g * lora  # norm inputs 16-bit, up-projection inputs
    else:
        d_qk = d_v = float(a.head_size(model.hidden_size))
        kv_r = np.maximum(a.kv_heads / tp, 1.0)
        latent = 0.0
    qkv = e * heads * d_qk / tp + e * kv_r * (d_qk + d_v)  # Q, K, V for the attention core
    replicated = 2.0 * e * h + keep("layernorm", g * h) + drop * 2.0 * h * MASK_BYTES + latent
    split = (keep("mla_up_proj", qkv) if a.kind == "mla" else qkv) + g * heads * d_v / tp
    s = np.asarray(seq_len, dtype=np.float64)
    if recipe.flash_attention:  # flash attention keeps only the log-sum-exp whatever is recomputed
        core = LSE_BYTES * heads / tp + 0.0 * s
    else:
        core = keep("core_attn", (e + drop * (MASK_BYTES + e)) * heads * s / tp)
    return replicated, split, core


def _ffn_saved(model: ModelSpec, recipe: TrainRecipe, *, tp: np.ndarray, etp: ArrayLike, moe: bool,
               keep: _Kept) -> tuple[Any, Any, Any]:
    """The FFN block's saved bytes per token (:func:`layer_activation_bytes_per_token`): replicated
    over TP unless SP (the FFN input, router probabilities), split by TP (dense FFN or shared-expert
    intermediates) and the routed path (``top_k x capacity factor`` copies, split by SP)."""
    h = float(model.hidden_size)
    e, g = recipe.activation_bytes, recipe.gemm_input_bytes
    ffn_in = keep("layernorm", g * h)  # the FFN input (the pre-FFN norm's output)
    if not moe:
        return keep("mlp", ffn_in), keep("mlp", _ffn_bytes(model, model.ffn_dim, e, g) / tp), 0.0
    m = model.moe
    assert m is not None
    width = float(m.expert_ffn_dim)
    shared = m.num_shared_experts * (m.shared_expert_ffn_dim or m.expert_ffn_dim)
    etp_a = np.asarray(etp, dtype=np.float64)
    act_out = g * width  # the activation's output, the down-projection input
    e_in = recipe.moe_swiglu_input_bytes or e  # the SwiGLU input (gate and up outputs), 16-bit by default
    # Per routed copy: the dispatched tokens (the fc1 input), the probability the weighted SwiGLU keeps,
    # the SwiGLU input and the down-projection input; not the expert output (module docstring).
    expert = (g * h + PROB_BYTES) * etp_a + (_ffn_bytes(model, width, e_in, g) - act_out) + keep("moe_act", act_out)
    routed = keep("moe", m.top_k * recipe.moe_capacity_factor * expert)
    replicated = ffn_in + keep("moe", 4.0 * m.num_experts)
    split = keep("moe", keep("shared_experts", _ffn_bytes(model, shared, e, g) / tp))
    return replicated, split, routed


# --- training ----------------------------------------------------------------------------------


def _arr(x: ArrayLike, dtype: Any = np.float64) -> np.ndarray:
    return np.asarray(x, dtype=dtype)


# The layout keywords of ``train_memory`` and their defaults (a dense, unsharded single-GPU layout).
LAYOUT_DEFAULTS: dict[str, ArrayLike | None] = {
    "tp": 1, "pp": 1, "vpp": 1, "dp": 1, "ep": 1, "etp": 1, "cp": 1, "zero": 0, "micro_batch": 1, "seq_len": 4096,
    "recompute": 0, "sequence_parallel": True, "num_microbatches": None, "pipeline_split": 0,
}


def _stage_terms(model: ModelSpec, counts: ParamCounts, recipe: TrainRecipe,
                 layout: dict[str, ArrayLike | None]) -> _StageTerms:
    """Training memory per GPU, every term per pipeline-stage slot (bytes; arrays broadcast); the
    peak stage is taken by :func:`train_memory`.

    ``recompute`` is an int code (``RECOMPUTE_CODES``) or an array of them. ``num_microbatches``
    (global batch / (micro_batch x dp)) caps the micro-batches in flight; ``None`` = no cap.
    ``pipeline_split`` is a ``pipeline`` split code (0 even, 1 embedding and loss counted as layers,
    2 uneven first/last stages): each stage's parameters and activations count its own layers.
    Layout validity (divisibility) is not checked here: see ``specs.layout.check_layout``.

    Per stage, with ``P`` parameters on the rank (TP/EP split as in the module docstring), ``G`` of
    them transformer-block GEMM weights (attention, dense FFN, shared and routed experts), and ZeRO
    shard ``d`` (dense: dp*cp; experts: tp*cp*dp/(ep*etp)):
    weights = (P - G) x param bytes + G x ``recipe.gemm_weight_bytes`` (param bytes + FP8-copy bytes,
    or the FP8 copies alone with FP8 parameters) [/d at ZeRO-3], gradients = P x grad bytes
    [/d at ZeRO>=2], optimizer = P x (master + moments) bytes [/d at ZeRO>=1] (Rajbhandari et al. 2020,
    fig. 1). The embedding and output layer hold ``padded_vocab_size(V, vocab_divisible_by x tp) x h /
    tp`` parameters (Megatron-LM vocabulary padding; a tied output layer on a separate last stage is a
    copy of the word embedding).
    Activations: ``tokens x (in_flight x stage layers x per-layer bytes)`` plus the first stage's token
    ids (and embedding-dropout mask when ``recipe.dropout``), the last stage's logits
    ``recipe.logit_bytes*Vp/t`` per token (``Vp`` the padded vocabulary; an fp32 copy, 4 B, or 16-bit
    under a fused cross entropy) and output-layer input, ``1 + recipe.mtp_layers`` times (each
    multi-token-prediction module keeps its own), and under full recompute one
    layer's full activations while it is recomputed.
    """
    unknown = set(layout) - set(LAYOUT_DEFAULTS)
    if unknown:
        raise TypeError(f"unknown layout keywords: {', '.join(sorted(unknown))}")
    g = {**LAYOUT_DEFAULTS, **layout}
    tp, pp, vpp, dp, ep, etp, cp, zero = (g[k] for k in ("tp", "pp", "vpp", "dp", "ep", "etp", "cp", "zero"))
    micro_batch, seq_len, recompute, sequence_parallel = (
        g[k] for k in ("micro_batch", "seq_len", "recompute", "sequence_parallel"))
    num_microbatches, pipeline_split = g["num_microbatches"], g["pipeline_split"]
    if isinstance(recompute, str):
        recompute = RECOMPUTE_CODES[recompute]
    # Inputs keep their own (broadcastable) shapes, so each term is computed at the shape of what it
    # depends on (a sweep passes a grid: parameter terms per structure x ZeRO stage, activations per
    # structure x micro-batch x recompute x SP) and only the sum is formed at the full shape.
    b = (
        _arr(tp), _arr(pp), _arr(vpp), _arr(dp), _arr(ep), _arr(etp), _arr(cp), _arr(zero),
        _arr(micro_batch), _arr(seq_len), _arr(recompute), _arr(sequence_parallel, bool),
        _arr(np.inf if num_microbatches is None else num_microbatches), _arr(pipeline_split, np.int64),
    )
    tp, pp, vpp, dp, ep, etp, cp, zero, mb, seq, rc, sp, nmb, split = b
    shape = np.broadcast_shapes(*(x.shape for x in b))
    pps, vpps, splits = np.broadcast_arrays(pp.astype(np.int64), vpp.astype(np.int64), split)
    dual = recipe.pp_schedule == DUALPIPE
    slots = _gather_slots(counts, pps, vpps, splits, mirror=dual)
    weights, grads, optim = _parameter_bytes(model, counts, recipe, slots, tp=tp, pp=pp, dp=dp, ep=ep, etp=etp, cp=cp,
                                             zero=zero)
    acts, offloaded = _activation_bytes(model, recipe, slots, tp=tp, pp=pp, vpp=vpp, etp=etp, cp=cp, mb=mb, seq=seq,
                                        rc=rc, sp=sp, nmb=nmb)
    # The parameter terms (and the padding mask) have the small shape of the structure x ZeRO stage:
    # summed first, they meet the activations in one full-size addition.
    res = recipe.reserve
    counted = reserve_fixed_bytes(tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, etp=etp) if res.fixed_bytes is None else None
    fixed_res = np.asarray(res.fixed_bytes if counted is None else counted, dtype=np.float64)[..., None]
    fixed = np.where(slots["valid"], weights + grads + optim + fixed_res, -np.inf)
    return _StageTerms(shape, weights, grads, optim, acts, fixed_res, fixed, slots["stage"], offloaded,
                       res.fragmentation)


def recompute_share(rc: ArrayLike, recompute_layers: int, layers_per_chunk: ArrayLike) -> np.ndarray:
    """The share of a stage's layers that full recomputation re-runs: 1 under ``rc`` 2 (full) with
    every layer recomputed (``recompute_layers`` 0), ``min(N, layers per chunk) / layers per chunk``
    with Megatron-Core's block method (``--recompute-method block --recompute-num-layers N``: the first
    ``N`` layers of each model chunk), 0 otherwise (none, selective). Arrays broadcast."""
    rc = np.asarray(rc)
    lc = np.maximum(np.asarray(layers_per_chunk, dtype=np.float64), 1.0)
    part = 1.0 if recompute_layers <= 0 else np.minimum(float(recompute_layers), lc) / lc
    return np.where(rc >= 2, part, 0.0)


def forward_again(rc: ArrayLike, full_share: ArrayLike, modules: tuple[str, ...], module: str) -> np.ndarray:
    """The share of a layer's ``module`` forward that recomputation runs again: ``full_share`` of it
    under full recomputation (:func:`recompute_share`), all of it under selective recomputation that
    lists ``module`` (``recipe.recompute_modules``), none otherwise. Arrays broadcast."""
    sel = (np.asarray(rc) == 1) & (module in modules)
    return np.maximum(full_share, np.where(sel, 1.0, 0.0))


def _per_slot(x: np.ndarray) -> np.ndarray:
    """A per-candidate array broadcast against the stage-slot axis."""
    return x[..., None]


def _padded_vocab(model: ModelSpec, recipe: TrainRecipe, tp: np.ndarray) -> np.ndarray:
    """Megatron-LM's padded vocabulary at each candidate's TP (per slot axis)."""
    return padded_vocab_size(model.vocab_size, recipe.vocab_divisible_by * _per_slot(tp))


def _parameter_bytes(model: ModelSpec, counts: ParamCounts, recipe: TrainRecipe, slots: dict[str, np.ndarray], *,
                     tp: np.ndarray, pp: np.ndarray, dp: np.ndarray, ep: np.ndarray, etp: np.ndarray, cp: np.ndarray,
                     zero: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(weights, gradients, optimizer state) bytes per rank and stage slot (:func:`_stage_terms`)."""
    X = _per_slot
    h = model.hidden_size
    # Parameters on this rank. Padded vocabulary rows (Megatron-LM) extend the embedding and head
    # tables (when the counts have them).
    vp = _padded_vocab(model, recipe, tp)
    pad = (vp - model.vocab_size) * h if counts.embedding else 0.0 * vp
    emb = counts.embedding + pad
    word = (model.vocab_size * h + pad) if counts.embedding else 0.0  # word embedding a tied head copies
    head = counts.output_head + pad if counts.output_head else np.where(X(pp) > 1, word, 0.0)
    p_gemm = _tp_group_per_rank(model, slots["tp"], slots["kv"], slots["arep"], X(tp))
    p_dense = (
        p_gemm
        + slots["rep"]
        + slots["first"] * emb / X(tp)
        + slots["last"] * (head / X(tp) + counts.final_norm)
    )
    p_exp = slots["exp"] / X(ep * etp)
    d_dense = X(dp * cp)
    d_exp = X(dp * cp * tp / (ep * etp))
    z = X(zero)
    pb = recipe.param_bytes  # everything but the block GEMM weights (embedding, head, norms, router)
    gb = recipe.gemm_weight_bytes  # block GEMM weights: working copy + cached FP8 casts, or FP8 alone

    lt = _layer_table(counts)
    has_exp = lt.max_exp > 0

    def sharded(p_d: np.ndarray, stage: int) -> np.ndarray:
        """Dense parameters ``p_d`` (and the experts) per rank with ZeRO ``>= stage`` sharding them.
        The divisor is chosen per candidate first (shape ``(..., 1)``), so the slot-wide work is one
        division: ``p / d`` where sharded, ``p / 1`` elsewhere."""
        out = p_d / np.where(z >= stage, d_dense, 1.0)
        return out + p_exp / np.where(z >= stage, d_exp, 1.0) if has_exp else out

    w_full = pb * (p_dense - p_gemm) + gb * (p_gemm + p_exp)
    # pb x everything + (gb - pb) x the GEMM weights, each sharded (gb - pb < 0 with FP8 parameters).
    w_shard = pb * sharded(p_dense, 3) + (gb - pb) * sharded(p_gemm, 3)
    lora = lora_of(recipe)
    if not recipe.sharded_working_copy and lora is None:  # PyTorch FSDP: the fp32 shard is the master copy
        w_shard = np.zeros_like(w_shard)
    gemm_max = _tp_group_per_rank(model, lt.max_tp, lt.max_kv, lt.max_arep, X(tp)) + lt.max_exp / X(ep * etp)
    layer_max = gb * gemm_max + pb * lt.max_rep
    g_layer = recipe.grad_bytes * (gemm_max + lt.max_rep)
    if recipe.zero3_gathering == "fsdp_unit":  # per-layer units: the current and the prefetched layer gathered
        gathered, g_live = 2.0 * layer_max, 2.0 * g_layer
    else:  # DeepSpeed: per module, within its live-parameter and bucket limits
        mod = _largest_module(model, counts, tp, ep, etp)
        gathered = gb * deepspeed_gathered(mod, recipe.zero3_max_live_parameters, recipe.zero3_prefetch_bucket_size)
        g_live = recipe.grad_bytes * (mod + recipe.zero3_reduce_bucket_size)
    weights = np.where(z >= 3, np.minimum(w_full, w_shard + gathered), w_full)
    # ZeRO-2/3 (FSDP) keep only a shard of the gradients, but a layer's gradients exist whole from its
    # backward until their reduce-scatter completes: the layer being differentiated plus the one
    # being reduce-scattered (PyTorch FSDP ``_post_backward_hook`` reduce-scatters per unit while the
    # next unit's backward runs), so two layers' worth stays unsharded.
    g_full = recipe.grad_bytes * (p_dense + p_exp)
    g_shard = recipe.grad_bytes * sharded(p_dense, 2)
    grads = np.where(z >= 3, np.minimum(g_full, g_shard + g_live),
                     np.where(z >= 2, np.minimum(g_full, g_shard + 2.0 * g_layer), g_full))
    ob = recipe.optimizer_state_bytes(h)
    optim = ob * sharded(p_dense, 1)
    if lora is not None:  # frozen base (``mi400plan.finetune``): gradients and optimizer states of the adapters only
        a = stage_adapter_params(model, lora, slots["layers"], slots["moe"], X(tp), X(ep * etp))
        weights = weights + pb * a
        grads = recipe.grad_bytes * a / np.where(z >= 2, d_dense, 1.0)
        optim = ob * a / np.where(z >= 1, d_dense, 1.0)
    return weights, grads, optim


def deepspeed_gathered(module: ArrayLike, max_live: float, prefetch_bucket: float) -> np.ndarray:
    """Parameters (elements) DeepSpeed ZeRO-3 holds gathered at once on a rank whose largest leaf
    module has ``module`` parameters (``specs.layout.ZERO3_GATHERING_RULES``): the current module, plus what
    ``fetch_sub_module`` prefetches, ``min(max_live - module, prefetch_bucket)`` overshot by at most one
    tensor (no larger than the largest module), and nothing when the module alone reaches ``max_live``
    (DeepSpeed ``partitioned_param_coordinator.py``, commit 38327e0, 2025-02-21). Arrays broadcast."""
    m = np.asarray(module, dtype=np.float64)
    budget = np.minimum(float(max_live) - m, float(prefetch_bucket))
    return m + np.where(budget > 0.0, budget + m, 0.0)


def _largest_module(model: ModelSpec, counts: ParamCounts, tp: np.ndarray, ep: np.ndarray,
                    etp: np.ndarray) -> np.ndarray:
    """Parameters per rank of the largest leaf module DeepSpeed gathers as one (per candidate, on the
    slot axis): a layer's attention block (at most; Megatron-LM fuses Q, K and V), or an FFN's input
    projection, the larger of its two: Megatron-LM's ``linear_fc1`` fuses the SwiGLU gate and up
    projections (2/3 of the FFN's weights; 1/2 for a GELU FFN), and its ``GroupedMLP`` keeps all local
    experts' ``fc1`` in one weight (the routed experts per rank over ``ep x etp``)."""
    X = _per_slot
    lay = counts.layers
    top = max(lay, key=lambda lp: lp.attention)
    attn = _tp_group_per_rank(model, top.attention, top.attn_kv, top.attn_replicated, X(tp))
    fc1 = 2.0 / 3.0 if model.ffn_kind == "swiglu" else 0.5
    dense = max(lp.mlp_dense + lp.shared_experts for lp in lay) * fc1 / X(tp)
    experts = max(lp.routed_experts for lp in lay) * fc1 / X(ep * etp)
    return np.maximum(np.maximum(attn, dense), experts)


def _activation_bytes(model: ModelSpec, recipe: TrainRecipe, slots: dict[str, np.ndarray], *, tp: np.ndarray,
                      pp: np.ndarray, vpp: np.ndarray, etp: np.ndarray, cp: np.ndarray, mb: np.ndarray,
                      seq: np.ndarray, rc: np.ndarray, sp: np.ndarray, nmb: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray | None]:
    """(activation bytes in HBM, activation bytes offloaded to host or None) per rank and stage slot
    (:func:`_stage_terms`)."""
    X = _per_slot
    h = model.hidden_size
    vp = _padded_vocab(model, recipe, tp)
    kw = dict(tp=tp, etp=etp, sequence_parallel=sp, recompute=rc, seq_len=seq)
    act_dense = layer_activation_bytes_per_token(model, recipe, moe=False, **kw)
    act_moe = layer_activation_bytes_per_token(model, recipe, moe=True, **kw) if model.moe else act_dense
    lora = lora_of(recipe)
    if lora is not None:  # each adapter's intermediate x A, kept for dB (recomputed under full recomputation)
        kept_a = np.where(np.asarray(rc) >= 2, 0.0, recipe.activation_bytes)
        act_dense = act_dense + kept_a * adapter_saved_elems_per_token(model, lora, False)
        act_moe = act_moe + kept_a * adapter_saved_elems_per_token(model, lora, True)
    stage_act = (slots["layers"] - slots["moe"]) * X(act_dense) + slots["moe"] * X(act_moe)
    s_idx = slots["stage"]
    P, V = X(pp), X(vpp)
    # Every activation of a layer, as no recomputation keeps them.
    none = dict(kw, recompute=np.zeros_like(rc))
    d0 = layer_activation_bytes_per_token(model, recipe, moe=False, **none)
    m0 = layer_activation_bytes_per_token(model, recipe, moe=True, **none) if model.moe else d0
    if recipe.recompute_layers > 0:  # full recomputation of the first N layers of each chunk only
        kept = (slots["layers"] - slots["moe"]) * X(d0) + slots["moe"] * X(m0)
        f = recompute_share(X(rc), recipe.recompute_layers, slots["layers"] / V)
        stage_act = np.where(X(rc) >= 2, f * stage_act + (1.0 - f) * kept, stage_act)
    inflight_1f1b = np.minimum(P - s_idx, X(nmb))
    chunks = np.minimum(2.0 * (P - s_idx - 1.0) + (V - 1.0) * P + 1.0, X(nmb) * V)
    inflight = np.where(V > 1, chunks / V, inflight_1f1b)
    if recipe.pp_schedule == DUALPIPE:  # PP + 1 micro-batches of one stage; the slot sums the rank's two stages
        inflight = dualpipe_inflight(P, X(nmb)) / 2.0 + 0.0 * s_idx
    tokens = X(seq * mb / cp)
    tsp = X(np.where(sp, tp, 1.0))
    e = recipe.activation_bytes
    # padded logits + final norm/head input, once for the main loss and once per multi-token-prediction module
    last_extra = (1.0 + recipe.mtp_layers) * (recipe.logit_bytes * vp / X(tp) + 2.0 * e * h / tsp)
    # First stage: int64 token ids, and with dropout the embedding-dropout mask (1 byte per element;
    # Megatron-LM theoretical_memory_usage "Dropout in embedding layer", pp micro-batches in flight).
    first_extra = TOKEN_ID_BYTES + (MASK_BYTES * h / tsp if recipe.dropout else 0.0)
    working = np.where(X(rc) >= 2, X(np.maximum(d0, m0)), 0.0)
    acts = tokens * (
        inflight * (stage_act + slots["first"] * first_extra) + slots["last"] * last_extra + working
    )
    offloaded = None
    if recipe.offload_layers > 0:
        host, kept = _offloaded_per_token(recipe.offload_layers, stage_act, slots["layers"], V, inflight)
        offloaded = tokens * host
        acts = acts - offloaded + tokens * kept
    return acts, offloaded


@record
class _StageTerms:
    """Every memory term per candidate and pipeline-stage slot (last axis), before the peak is taken;
    ``total`` is ``-inf`` on padding slots."""

    shape: tuple[int, ...]
    weights: np.ndarray
    grads: np.ndarray
    optim: np.ndarray
    acts: np.ndarray
    reserve: np.ndarray  # the fixed part of the runtime reserve (context + communicator buffers)
    # weights + gradients + optimizer + the fixed reserve, ``-inf`` on padding slots: it does not depend on
    # the micro-batch, recompute or SP, so it keeps the small shape of the structures x ZeRO stage
    fixed: np.ndarray
    stage: np.ndarray
    offloaded: np.ndarray | None
    fragmentation: float  # the fragmentation share of allocated bytes (``RuntimeReserve.fragmentation``)

    @functools.cached_property
    def total(self) -> np.ndarray:
        """Allocated + fixed reserve: the capacity need without fragmentation, every slot at full shape."""
        return self.acts + self.fixed


def train_memory(model: ModelSpec, counts: ParamCounts, recipe: TrainRecipe, **layout: ArrayLike) -> TrainMemory:
    """Training memory per GPU on the most loaded pipeline stage, term by term (bytes; arrays
    broadcast; the layout keywords are those of ``LAYOUT_DEFAULTS``, computed by :func:`_stage_terms`)."""
    st = _stage_terms(model, counts, recipe, layout)
    k = np.argmax(st.total, axis=-1)[..., None]

    def pick(x: np.ndarray) -> np.ndarray:
        return np.take_along_axis(np.broadcast_to(x, st.total.shape), k, axis=-1)[..., 0]

    fixed = pick(st.reserve)
    hard = pick(st.total)
    frag = st.fragmentation * (hard - fixed)
    return TrainMemory(
        weights=pick(st.weights),
        gradients=pick(st.grads),
        optimizer=pick(st.optim),
        activations=pick(st.acts),
        reserve=fixed + frag,
        total=hard + frag,
        fragmentation=frag,
        stage=pick(st.stage),
        offloaded=np.broadcast_to(0.0, st.shape) if st.offloaded is None else pick(st.offloaded),
    )


def train_memory_peak(model: ModelSpec, counts: ParamCounts, recipe: TrainRecipe, **layout: ArrayLike) -> np.ndarray:
    """The capacity need of :func:`train_memory` alone (bytes per GPU on the most loaded stage:
    ``total - fragmentation``, what must be within the usable capacity for the layout to be valid,
    fits or tight): what a search needs for every candidate, without gathering the other terms."""
    st = _stage_terms(model, counts, recipe, layout)
    # Slot by slot (numpy reduces a short trailing axis far slower than it compares whole arrays), each
    # slot's total formed on its own: the totals of every slot at the full shape are never held at once.
    acts, fixed = st.acts, st.fixed
    peak = np.asarray(acts[..., 0] + fixed[..., 0], dtype=np.float64)
    for s in range(1, max(acts.shape[-1], fixed.shape[-1])):
        np.maximum(peak, acts[..., s] + fixed[..., s], out=peak)
    return peak


def offloaded_layers(n: int, layers: Any, vpp: Any) -> Any:
    """Layers a pipeline stage of ``layers`` layers in ``vpp`` model chunks offloads per micro-batch
    under ``--offload-layers n``: ``min(n, layers per chunk - 1) x vpp`` (Transformer Engine never
    offloads a chunk's last layer; :func:`_offloaded_per_token`). Arrays broadcast."""
    return np.minimum(float(n), np.maximum(layers / vpp - 1.0, 0.0)) * vpp


def _offloaded_per_token(n: int, stage_act: np.ndarray, layers: np.ndarray, vpp: np.ndarray,
                         inflight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Activation offloading per token of a micro-batch: (bytes in host memory, bytes kept in HBM for it).

    Megatron-Core ``--cpu-offloading-num-layers n`` wraps each model chunk in Transformer Engine's
    offload context (``specs.layout.OFFLOAD_IN_FLIGHT``): the saved activations of the chunk's first
    ``n`` layers leave HBM, at most ``layers per chunk - 1`` of them (TE never offloads a chunk's last
    layer, so a larger ``n`` is clamped here). A stage of ``vpp`` chunks offloads ``vpp x n_eff``
    layers per micro-batch, for each of its ``inflight`` micro-batches: host bytes = inflight x
    vpp x n_eff x per-layer bytes, per-layer bytes = the stage's mean. ``OFFLOAD_IN_FLIGHT`` (1) of
    those layers stays in HBM, once per stage: only one layer's copy-out or prefetch runs at a time.
    """
    per_layer = stage_act / np.maximum(layers, 1.0)
    n_eff = offloaded_layers(n, layers, vpp)
    host = inflight * n_eff * per_layer
    kept = np.minimum(np.minimum(n_eff, float(OFFLOAD_IN_FLIGHT)) * per_layer, host)
    return host, kept


# --- inference ---------------------------------------------------------------------------------


def _kv_per_layer_token(model: ModelSpec, recipe: InferRecipe) -> float:
    return kv_cache_bytes_per_token(model, recipe.kv_bytes) / model.num_layers


def infer_memory(
    model: ModelSpec,
    counts: ParamCounts,
    recipe: InferRecipe,
    *,
    tp: ArrayLike = 1,
    pp: ArrayLike = 1,
    ep: ArrayLike = 1,
    batch: ArrayLike = 1,
    context: ArrayLike = 4096,
) -> InferMemory:
    """Inference memory per GPU on the most loaded pipeline stage (bytes; arrays broadcast).

    * Weights: block linear weights (attention, dense FFN, shared experts) ``/tp`` (GQA K/V
      ``/min(tp, kv_heads)``, MLA down-projections whole on every rank) at the recipe's
      format (bits incl. block scales); routed experts ``/max(tp, ep)`` at that format (experts spread
      over the TP group, or over ``ep`` ranks with attention data-parallel when ``ep > tp``);
      embedding and head vocab-parallel ``/tp`` over the vocabulary padded to a multiple of
      ``recipe.vocab_padding_size`` (vLLM: 64), norms and router replicated, all 16-bit.
    * KV cache: ``kv_cache_bytes_per_token`` per layer x the stage's layers x batch x context.
      GQA K/V heads split by TP, but never below one head per rank: ``/min(tp, kv_heads)`` (when
      ``tp > kv_heads`` each head is replicated on ``tp/kv_heads`` ranks). MLA's compressed latent is
      shared by all heads, so every TP rank keeps the full latent (no TP split), as vLLM and SGLang do.
    * Activations (scratch of one forward step): ``T = min(batch x context, max_batched_tokens)``
      tokens x (hidden states ``2*e*h`` + Q/K/V and attention output + FFN intermediates ``/tp``) plus
      fp32 logits ``4*Vp/tp`` (padded vocabulary) for each of the ``batch`` sequences being sampled.
      Freed layer by layer.
    * ``batch`` counts the sequences served by one ``tp x pp`` model replica.
    """
    b = np.broadcast_arrays(_arr(tp), _arr(pp), _arr(ep), _arr(batch), _arr(context))
    tp, pp, ep, batch, ctx = (np.array(x) for x in b)
    shape = tp.shape
    slots = _gather_slots(counts, pp.astype(np.int64), np.ones_like(pp, dtype=np.int64))
    X = lambda x: x[..., None]  # noqa: E731
    wb = recipe.weight_bytes
    vp = float(padded_vocab_size(model.vocab_size, recipe.vocab_padding_size))
    pad = (vp - model.vocab_size) * model.hidden_size if counts.embedding else 0.0
    emb = counts.embedding + pad
    word = (model.vocab_size * model.hidden_size + pad) if counts.embedding else 0.0
    head = counts.output_head + pad if counts.output_head else np.where(X(pp) > 1, word, 0.0)
    weights = (
        wb * _tp_group_per_rank(model, slots["tp"], slots["kv"], slots["arep"], X(tp))
        + wb * slots["exp"] / X(np.maximum(tp, ep))
        + 2.0 * slots["rep"]
        + 2.0 * slots["first"] * emb / X(tp)
        + 2.0 * slots["last"] * (head / X(tp) + counts.final_norm)
    )
    a = model.attention
    if a.kind == "mla":
        kv_split = np.ones_like(tp)
    else:
        kv_split = np.minimum(tp, float(a.kv_heads))
    kv_tok = _kv_per_layer_token(model, recipe) * (model.num_layers / pp) / kv_split
    kv = kv_tok * batch * ctx
    acts = _infer_scratch(model, recipe, tp=tp, batch=batch, tokens=np.minimum(batch * ctx, recipe.max_batched_tokens))
    fixed_res = recipe.reserve.fixed_bytes  # None: counted (context + the TP, PP and EP groups' buffers)
    if fixed_res is None:
        fixed_res = reserve_fixed_bytes(tp=tp, pp=pp, dp=1, cp=1, ep=ep, etp=1)
    reserve = np.broadcast_to(np.asarray(fixed_res, dtype=np.float64), shape).copy()
    w = weights.max(axis=-1, where=slots["valid"], initial=0.0)
    stage = np.take_along_axis(slots["stage"], np.argmax(np.where(slots["valid"], weights, -np.inf), axis=-1)[..., None], axis=-1)[..., 0]
    total = w + kv + acts + reserve
    return InferMemory(weights=w, kv_cache=kv, activations=acts, reserve=reserve, total=total, stage=stage,
                       kv_bytes_per_token=kv_tok)


def _infer_scratch(model: ModelSpec, recipe: InferRecipe, *, tp: np.ndarray, batch: np.ndarray,
                   tokens: np.ndarray) -> np.ndarray:
    """Forward-step scratch per rank (bytes); see :func:`infer_memory`."""
    e = 2.0
    h = float(model.hidden_size)
    a = model.attention
    d = float(model.head_dim)
    if a.kind == "mla":
        qkv = a.num_heads * (2.0 * d + (a.v_head_dim or d)) / tp
        attn_out = a.num_heads * float(a.v_head_dim or d) / tp  # heads x v_head_dim (DeepSeek-V2 eq. 18)
    else:
        qkv = a.num_heads * d / tp + 2.0 * np.maximum(a.kv_heads / tp, 1.0) * d
        attn_out = a.num_heads * d / tp
    if model.moe is not None:
        m = model.moe
        width = m.top_k * m.expert_ffn_dim + m.num_shared_experts * (m.shared_expert_ffn_dim or m.expert_ffn_dim)
        width = max(float(width), float(model.ffn_dim))
    else:
        width = float(model.ffn_dim)
    per_token = e * (2.0 * h + qkv + attn_out + _ffn_elems(model, width) / tp)
    vp = float(padded_vocab_size(model.vocab_size, recipe.vocab_padding_size))
    return tokens * per_token + batch * LOGIT_BYTES * vp / tp


def max_batch_x_context(
    model: ModelSpec,
    counts: ParamCounts,
    recipe: InferRecipe,
    *,
    capacity_bytes: ArrayLike,
    tp: ArrayLike = 1,
    pp: ArrayLike = 1,
    ep: ArrayLike = 1,
    batch: ArrayLike = 1,
) -> np.ndarray:
    """Largest number of cached tokens (batch x context) that fits per replica (float64, floored; 0 if
    nothing fits). The scratch is sized for a full ``max_batched_tokens`` step and ``batch`` sampled
    sequences: ``floor((usable - weights - scratch - fixed reserve) / kv_bytes_per_token)``."""
    base = infer_memory(model, counts, recipe, tp=tp, pp=pp, ep=ep, batch=batch,
                        context=np.maximum(recipe.max_batched_tokens / np.maximum(_arr(batch), 1.0), 1.0))
    room = usable_bytes(capacity_bytes, recipe.reserve) - (base.weights + base.activations + base.reserve)
    return np.maximum(np.floor(room / base.kv_bytes_per_token), 0.0)


def max_context(
    model: ModelSpec,
    counts: ParamCounts,
    recipe: InferRecipe,
    *,
    capacity_bytes: ArrayLike,
    batch: ArrayLike,
    tp: ArrayLike = 1,
    pp: ArrayLike = 1,
    ep: ArrayLike = 1,
) -> np.ndarray:
    """Longest context per sequence for ``batch`` concurrent sequences (tokens, floored)."""
    tokens = max_batch_x_context(model, counts, recipe, capacity_bytes=capacity_bytes, tp=tp, pp=pp, ep=ep,
                                 batch=batch)
    return np.floor(tokens / np.maximum(_arr(batch), 1.0))
