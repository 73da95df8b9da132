"""An MoE layer's token dispatch priced by mechanism: the token dispatcher and the graph scope decide
what the host does per MoE layer and how many bytes the GPUs move.

Per MoE layer and per pass (forward, each of the two backward GEMM passes, the forward again where
the layer is recomputed) on one GPU:

* host-bound part (``moe_host_seconds``): the host prepares each local expert's two grouped-GEMM
  projections before they run (Transformer Engine's grouped linear splits the input and allocates
  outputs per expert on the host: "the CPU overheads of PyTorch ops, such as torch.split() and
  torch.empty() (2 x num_gemms calls)", TransformerEngine issue #1499, maintainer answer,
  2025-02-24), ``expert_host_us`` per expert GEMM (the accelerator profile's; fitted on AMD's
  DeepSeek-V2 run, the other kernels the layer's host issues folded in, since that run measures the
  host's whole time). The host can do it only once it knows each expert's token count: every
  dispatcher here copies those counts to the host (``DispatcherRule.host_sync``), so the preparation
  is on the critical path of an eager layer and a micro-batch runs at the slower of the host and the
  GPU (``search.step_time``). A CUDA/HIP graph removes it only where it captures the MoE layer, and
  it can capture it only with static shapes: ``full`` graphs with a token capacity
  (``moe_layer_captured``: "when --moe-expert-capacity-factor and --moe-pad-expert-input-to-capacity
  are not set, the resulting dynamic shapes make MoE layers uncapturable", Megatron-Core MoE README,
  2026-07). ``partial`` graphs (attention, router, preprocessing) leave the experts eager.
* GPU-bound part: permutation and unpermutation memory traffic (``permute_elems_per_token``: read and
  write of every routed copy of a token, twice, at HBM bandwidth, in ``search``'s memory-bound term),
  and the dispatch and combine communication (``dispatch_requests``: the bytes each rank sends,
  priced by ``comms`` on the EP group's links). DeepEP's kernels reach the links' bandwidth (DeepEP
  README, V1 tables, 2025-02-24: 153 GB/s dispatch and 158 GB/s combine intranode on H800's ~160 GB/s
  NVLink, 43-58 GB/s internode on ~50 GB/s 400 Gb/s RDMA; V2 table, 2026-04-30: 726-740 GB/s on B200
  NVLink), and ``comms`` prices the same transfers within 10 % of those figures (160 GB/s on H800,
  719 GB/s on B200, 45 GB/s over two H800 nodes: ``tests/test_moe_dispatch.py``), so the same link
  pricing holds for them; what the dispatcher changes is the bytes: DeepEP and HybridEP dispatch FP8 tokens and
  combine in BF16 (the DeepEP benchmarks' setting; "50% EP dispatch volume: dispatches tokens in FP8
  instead of BF16", Megatron-Core MoE README, 2026-07). DeepEP's FP8 input is the 1 x 128 blockwise
  layout (an FP8 tensor and one fp32 scale per 128 channels: ``deep_ep`` buffer docstring, 2026-04),
  so it applies where the FP8 recipe is blockwise: ``1 + 4 / 128`` bytes an element
  (``FP8_BLOCKWISE_BYTES``); per-tensor and MXFP8 recipes dispatch 16-bit tokens. The all-gather dispatcher
  gathers every EP rank's tokens instead of sending each routed copy once (all-gather, then
  reduce-scatter in the combine).

Capacity factor (``recipe.expert_capacity_factor``; None = dropless, Megatron-Core's default): each
expert takes at most ``capacity factor x routed tokens x top_k / experts`` tokens; tokens over
capacity are dropped and the expert inputs are padded up to capacity (Megatron-Core
``--moe-expert-capacity-factor --moe-pad-expert-input-to-capacity``), so the expert GEMMs, the
permutation traffic and the dispatched bytes are ``capacity factor`` times the routed tokens'
(``expert_padding``). Under the balanced routing the model prices, a factor below 1 drops ``1 - F`` of
the routed copies (``dropped_share``) and none is dropped at 1 or more; the share a real router's
imbalance drops above that is not modelled.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mi400plan.records import record

# FP8 tokens with DeepSeek-V3's 1 x 128 blockwise scales: 1 byte an element + a 4-byte scale per 128.
FP8_BLOCKWISE_BYTES = 1.0 + 4.0 / 128

# Permutation + unpermutation: read and write of top_k copies of each token's hidden vector, twice.
PERMUTE_ELEMS_PER_H_PER_K = 4


@record
class DispatcherRule:
    """What one token dispatcher does, and where that is stated."""

    name: str
    host_sync: bool  # the host reads the per-expert token counts back each MoE layer (device-to-host sync)
    fp8_dispatch: bool  # dispatches blockwise-FP8 tokens in such training (the combine at the activation width)
    gather: bool  # all-gathers every EP rank's tokens (and reduce-scatters the combine)
    source: str


DISPATCHERS: dict[str, DispatcherRule] = {
    "alltoall": DispatcherRule(
        "alltoall", True, False, False,
        "Megatron-Core MoEAlltoAllTokenDispatcher: per-expert counts and all-to-all splits moved to the host "
        "before the all-to-all (token_dispatcher.py); 16-bit tokens"),
    "allgather": DispatcherRule(
        "allgather", True, False, True,
        "Megatron-Core MoEAllGatherTokenDispatcher: gathers all tokens over the EP group, counts to the host "
        "for the grouped GEMM (token_dispatcher.py; MoE README, 'Token Dispatching', 2026-07)"),
    "deepep": DispatcherRule(
        "deepep", True, True, False,
        "DeepEP normal kernels: 'an implicit CPU wait for GPU received count signal' in dispatch, not CUDA-graph "
        "compatible (DeepEP README, V1, 2025-02-24); FP8 dispatch, BF16 combine (its benchmark setting)"),
    "hybridep": DispatcherRule(
        "hybridep", True, True, False,
        "HybridEP (Megatron-Core flex dispatcher backend, MoE README 2025-11): host sync not documented, taken "
        "as DeepEP's (rule); FP8 dispatch as DeepEP"),
    "none": DispatcherRule("none", True, False, False, "no dispatcher named: priced as alltoall"),
}


def dispatcher_rule(name: str | None) -> DispatcherRule:
    """The rule of dispatcher ``name`` (None: ``alltoall``, Megatron-Core's default for EP > 1)."""
    return DISPATCHERS[name or "alltoall"]


def expert_padding(capacity_factor: float | None) -> float:
    """Routed-token multiplier of the expert GEMMs, permutation and dispatch: the capacity factor where
    the expert inputs are padded to capacity, 1 when dropless (None)."""
    return 1.0 if capacity_factor is None else float(capacity_factor)


def dropped_share(capacity_factor: float | None) -> float:
    """Share of the routed token copies dropped under the balanced routing the step model prices:
    ``max(0, 1 - F)`` (each expert receives exactly its share and keeps ``F`` of it); 0 dropless."""
    return 0.0 if capacity_factor is None else max(0.0, 1.0 - float(capacity_factor))


def moe_layer_captured(graphs: str, capacity_factor: float | None) -> bool:
    """Whether a CUDA/HIP graph replays the MoE layer (its expert preparation and count read-back gone):
    ``full`` graph scope with static expert shapes (a capacity factor); dropless layers stay eager."""
    return graphs == "full" and capacity_factor is not None


def moe_host_seconds(local_experts: Any, prep_s: float, graphs: str, capacity_factor: float | None) -> Any:
    """Host seconds of one MoE layer's pass on one GPU: ``2 x local experts x prep_s`` (each local
    expert's FFN-in and FFN-out GEMM prepared on the host), 0 where the layer is captured."""
    if moe_layer_captured(graphs, capacity_factor):
        return 0.0 * np.asarray(local_experts, dtype=np.float64)
    return 2.0 * np.asarray(local_experts, dtype=np.float64) * prep_s


def permute_elems_per_token(top_k: int, hidden: int, capacity_factor: float | None) -> float:
    """Elements per token one MoE layer's permutation and unpermutation move through HBM in the forward:
    ``4 x top_k x hidden x padding`` (read + write of each routed copy, twice)."""
    return PERMUTE_ELEMS_PER_H_PER_K * top_k * hidden * expert_padding(capacity_factor)


def dispatch_requests(tok_rank: Any, hidden: int, top_k: int, act_bytes: float, ep: Any, etp: Any,
                      rule: DispatcherRule, fp8: bool, capacity_factor: float | None) -> dict[str, tuple]:
    """The collectives of one MoE layer's dispatch and combine (``search.price_many`` requests, bytes).

    ``tok_rank`` tokens enter the router on this rank. All-to-all dispatchers send each routed copy once:
    ``tok_rank x top_k x hidden x bytes x padding`` per rank (``ep_disp``: ``FP8_BLOCKWISE_BYTES`` where
    the dispatcher dispatches FP8 and ``fp8`` says the run trains in blockwise FP8; ``ep_comb``: the
    combine at ``act_bytes``). The all-gather
    dispatcher gathers ``tok_rank x hidden x bytes`` from each of the EP ranks (all-gather of the
    ``EP x`` buffer; the combine reduce-scatters it)."""
    pad = expert_padding(capacity_factor)
    if rule.gather:
        full = tok_rank * hidden * act_bytes * ep
        return {"ep_disp": ("all_gather", full, ep, etp), "ep_comb": ("reduce_scatter", full, ep, etp)}
    routed = tok_rank * top_k * hidden * pad
    d_bytes = FP8_BLOCKWISE_BYTES if (fp8 and rule.fp8_dispatch) else act_bytes
    return {"ep_disp": ("all_to_all", routed * d_bytes, ep, etp),
            "ep_comb": ("all_to_all", routed * act_bytes, ep, etp)}


def dispatch_seconds(price: dict[str, Any], again: Any) -> Any:
    """Dispatch and combine seconds of one MoE layer per micro-batch: forward dispatch and combine, their
    two backward counterparts (the combine's gradient is dispatched, the dispatch's combined, at the
    activation width), and the forward again where the layer is recomputed (``again``)."""
    return price["ep_disp"] * (1.0 + again) + price["ep_comb"] * (3.0 + again)
