"""The training runtime reserve: memory a process holds beyond its tensors, and the three-state verdict.

A training rank needs, beyond the bytes its tensors hold (``allocated``: weights, gradients, optimizer
states, activations):

* a **fixed part**, independent of the model:

  - the CUDA/HIP context with the kernel images loaded at start: ``CONTEXT_BYTES`` = 781 MB, the
    ``nvidia-smi`` figure of a PyTorch process that has touched the GPU and allocated nothing
    (pytorch/pytorch issue #34323, 2020-03; CUDA 12.2 and later load kernels lazily by default,
    NVIDIA developer forum, 2024-04, so a current process is at or below it);
  - the NCCL/RCCL communicator buffers, counted per communicator the layout runs collectives on
    (:func:`communicator_bytes`). NCCL ``src/init.cc`` (NVIDIA/nccl, 2.2x, 2024) allocates per
    connection a Simple-protocol buffer of ``NCCL_BUFFSIZE`` = 4 MiB (``DEFAULT_BUFFSIZE 1 << 22``,
    also the documented default of ``NCCL_BUFFSIZE`` in the NCCL user guide's environment variables,
    2024), an LL buffer of 8 x 512 x 8 x 16 B = 512 KiB and an LL128 buffer of 120 x 640 x 8 x 8 B =
    4,800 KiB (``DEFAULT_LL_BUFFSIZE``, ``DEFAULT_LL128_BUFFSIZE``); RCCL (ROCm/rccl ``src/init.cc``,
    2024) keeps the same defaults. A ring collective connects each channel to its previous and next
    rank (2 peers); point-to-point traffic (pipeline send/receive, the expert all-to-all) uses the
    Simple protocol only, on ``P2P_CHANNELS_PER_PEER`` channels a peer. Connections are made when a
    communicator first runs (``NCCL_RUNTIME_CONNECT``, default on since NCCL 2.22, 2024-06), so only
    the groups the step uses count;

* a **fragmentation share** of the allocated bytes: the PyTorch caching allocator's reserved but
  unallocated memory (block rounding, split blocks that cannot be merged). ``FRAGMENTATION`` = 3 %:
  a Megatron-LM training forward on an A100 80GB logs ``reserved`` above ``allocated`` by 1.4-2.8 %
  (36,659 / 37,246 MB to 40,699 / 41,854 MB; NVIDIA/Megatron-LM issue #965, 2024-08-05), rounded up.
  It grows with recomputation, offloading and irregular allocations: GMLake (Guo et al., ASPLOS 2024,
  arXiv 2401.08156, 2024-01) measures up to 33 % on A100 80GB under those techniques, which
  ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`` mostly removes.

The verdict (:func:`verdict_codes`): **fits** when allocated + fixed + fragmentation is within the
usable capacity; **tight** when only the fragmentation share is short (the layout runs if the
allocator fragments less than the share, e.g. with expandable segments); **does not fit** when
allocated + fixed alone exceed it. A layout that is tight is a valid candidate for ``sweep``
(published layouts that ran are tight or fit), flagged in its output.
"""

from __future__ import annotations

from typing import Any

import numpy as np

MiB = 2**20

CONTEXT_BYTES = 781e6  # PyTorch process with a CUDA context, nothing allocated (pytorch#34323, 2020-03)
SIMPLE_BUFFER = 4 * MiB  # NCCL_BUFFSIZE default (NCCL src/init.cc DEFAULT_BUFFSIZE; RCCL the same)
LL_BUFFER = 8 * 512 * 8 * 16  # NCCL_LL_LINES_PER_THREAD x NCCL_LL_MAX_NTHREADS x NCCL_STEPS x 16 B line
LL128_BUFFER = 120 * 640 * 8 * 8  # NCCL_LL128_ELEMS_PER_THREAD x NCCL_LL128_MAX_NTHREADS x NCCL_STEPS x 8 B
CONNECTION_BYTES = SIMPLE_BUFFER + LL_BUFFER + LL128_BUFFER  # one collective connection, all three protocols
# Channels of a collective communicator: NCCL's topology search picks 8 on a 2-node H20 job
# (NVIDIA/nccl issue #1189, 2024: "8 coll channels ... 2 p2p channels per peer") and 16 to 32 within
# an NVLink node; 16 taken, the middle of that range (a rule, not a fit).
COLL_CHANNELS = 16
P2P_CHANNELS_PER_PEER = 2  # NCCL_NCHANNELS_PER_NET_PEER default (same log, nccl#1189)
FRAGMENTATION = 0.03  # share of allocated bytes (Megatron-LM#965, 2024-08: 1.4-2.8 % measured)

FITS, TIGHT, DOES_NOT_FIT = 0, 1, 2
VERDICT_NAMES = ("fits", "tight", "does_not_fit")


def collective_bytes(n: Any) -> np.ndarray:
    """Buffer bytes of one ring-collective communicator of ``n`` ranks on each rank: 0 for ``n`` 1,
    else ``COLL_CHANNELS`` x 2 peers x ``CONNECTION_BYTES`` (16 x 2 x 9.19 MiB = 294 MiB)."""
    return np.where(np.asarray(n) > 1, COLL_CHANNELS * 2.0 * CONNECTION_BYTES, 0.0)


def p2p_bytes(peers: Any) -> np.ndarray:
    """Buffer bytes of point-to-point connections to ``peers`` ranks: Simple protocol only,
    ``P2P_CHANNELS_PER_PEER`` channels a peer (``peers`` x 2 x 4 MiB)."""
    return np.maximum(np.asarray(peers, dtype=np.float64), 0.0) * P2P_CHANNELS_PER_PEER * SIMPLE_BUFFER


def communicator_bytes(*, tp: Any, pp: Any, dp: Any, cp: Any, ep: Any, etp: Any) -> np.ndarray:
    """NCCL/RCCL buffer bytes per rank for the groups a Megatron-Core step runs collectives on.

    Collectives: TP (all-reduce / reduce-scatter + all-gather), CP (the attention exchange), the
    gradient group of DP x CP ranks, and for MoE layers the expert-tensor group (ETP) and the
    expert-data-parallel group ``tp*cp*dp/(ep*etp)``; point-to-point: the previous and next pipeline
    stage (PP > 1) and the ``ep - 1`` other ranks of the expert all-to-all (EP > 1). Arrays broadcast."""
    tp, pp, dp, cp, ep, etp = (np.asarray(x, dtype=np.float64) for x in (tp, pp, dp, cp, ep, etp))
    edp = np.maximum(tp * cp * dp / np.maximum(ep * etp, 1.0), 1.0)
    coll = collective_bytes(tp) + collective_bytes(cp) + collective_bytes(dp * cp)
    moe = np.where(ep > 1, collective_bytes(etp) + collective_bytes(edp) + p2p_bytes(ep - 1.0), 0.0)
    return coll + moe + p2p_bytes(np.where(pp > 1, 2.0, 0.0))


def fixed_bytes(*, tp: Any, pp: Any, dp: Any, cp: Any, ep: Any, etp: Any) -> np.ndarray:
    """The counted fixed part of the reserve: ``CONTEXT_BYTES`` + :func:`communicator_bytes`."""
    return CONTEXT_BYTES + communicator_bytes(tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, etp=etp)


def verdict_codes(hard: Any, total: Any, usable: Any) -> np.ndarray:
    """``FITS`` (total within usable), ``TIGHT`` (only the fragmentation share is short: ``hard`` =
    total without it is within usable) or ``DOES_NOT_FIT``, per element. Arrays broadcast."""
    hard, total, usable = (np.asarray(x, dtype=np.float64) for x in (hard, total, usable))
    return np.where(total <= usable, FITS, np.where(hard <= usable, TIGHT, DOES_NOT_FIT))


def verdict_name(hard: float, total: float, usable: float) -> str:
    """:func:`verdict_codes` of one layout as its JSON name ("fits", "tight", "does_not_fit")."""
    return VERDICT_NAMES[int(verdict_codes(hard, total, usable))]
