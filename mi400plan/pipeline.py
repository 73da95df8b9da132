"""How a model's layers are split over pipeline stages and virtual stages (model chunks).

A split is named by a small integer code so the vectorized search can carry it per layout:

* ``SPLIT_EVEN`` (0): ``PP x VPP`` divides the layers; every model chunk holds ``L / (PP x VPP)``
  (Megatron-Core's default).
* ``SPLIT_EMBEDDING_LOSS`` (1): the input embedding and the loss count as one layer each
  (Megatron-Core ``--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split``),
  so ``PP x VPP`` divides ``L + 2``; the first model chunk and the last one hold one transformer
  layer fewer. Llama 3 405B: "reduce one Transformer layer each from the first and the last stages"
  (arXiv 2407.21783, sec. 3.3.2): 126 + 2 = 128 = 16 stages x 8, stages 0 and 15 hold 7.
* ``SPLIT_UNEVEN`` (2): the first and the last pipeline stage hold fewer layers than the others
  (Megatron-Core ``--decoder-first-pipeline-num-layers`` / ``--decoder-last-pipeline-num-layers``),
  for layer counts with awkward factors (DeepSeek-V3's 61). The planner derives the counts with
  :func:`uneven_stage_layers`: middle stages hold ``k = ceil(L / PP)`` rounded up to a multiple of
  VPP, the first and the last share the rest (first ``<=`` last ``<= k``, each a multiple of VPP,
  since Megatron-Core splits every stage's layers evenly over its VPP chunks).
* ``SPLIT_LAYOUT`` (3): a custom layout (Megatron-Core ``--pipeline-model-parallel-layout``, which
  lets every model chunk hold its own layer count, so VPP works with uneven splits: DeepSeek-V3's
  61 layers at PP 4 x VPP 4 or PP 8 x VPP 4 as NVIDIA's Megatron-Bridge recipes run them). The planner
  spreads the layers as evenly as possible over the ``PP x VPP`` chunks (:func:`layout_chunk_layers`),
  the chunks with one layer fewer placed from the outside in (first, last, second, ...), where the
  embedding and the loss run.
* ``SPLIT_NONE`` (-1): none of the allowed splits holds the layers (rule ``pp-layers``).

An even split is used whenever it exists; otherwise the embedding/loss split when allowed, then the
uneven one, then the custom layout, both when uneven splits are allowed (:func:`pipeline_split`).
No numpy at import (specs import this module).
"""

from __future__ import annotations

import functools
import math
from typing import Any

from mi400plan.intmath import key_groups

SPLIT_NONE = -1
SPLIT_EVEN = 0
SPLIT_EMBEDDING_LOSS = 1
SPLIT_UNEVEN = 2
SPLIT_LAYOUT = 3
# Layers whose activations one model chunk may offload to host memory (``--offload-layers``): no
# published model has more layers per chunk; larger is a typo. Here, not in ``specs``, so the command
# line can bound the flag without importing pydantic.
MAX_OFFLOAD_LAYERS = 1024
N_SPLIT_CODES = 4  # codes 0..3 (packed into integer keys by the memory model)
SPLIT_NAMES = {SPLIT_EVEN: "even", SPLIT_EMBEDDING_LOSS: "embedding-loss", SPLIT_UNEVEN: "uneven",
               SPLIT_LAYOUT: "layout"}


@functools.lru_cache(maxsize=4096)
def uneven_stage_layers(layers: int, pp: int, vpp: int = 1) -> tuple[int, int, int] | None:
    """``(first, middle, last)`` transformer layers per pipeline stage for an uneven split, or None.

    Middle stages hold ``k = ceil(L / PP)`` rounded up to a multiple of ``vpp``; the first and the
    last stage share ``r = L - (PP - 2) k``: ``first = vpp * floor(r / (2 vpp))``, ``last = r - first``
    (the first stage also holds the embedding and the most micro-batches in flight, so it gets the
    smaller half). Valid when ``1 <= first <= last <= k`` and both are multiples of ``vpp``; PP 2 has
    no middle stage (``r = L``). Examples: DeepSeek-V3, 61 layers: PP 16 -> (2, 4, 3), PP 8 -> (6, 8, 7);
    Llama 3 405B, 126 layers at PP 16 -> (7, 8, 7).
    """
    if pp < 2 or vpp < 1 or layers < 2:
        return None
    k = math.ceil(layers / pp)
    k = math.ceil(k / vpp) * vpp
    r = layers - (pp - 2) * k if pp > 2 else layers
    first = vpp * (r // (2 * vpp))
    last = r - first
    if first < 1 or last % vpp or last < first or (pp > 2 and last > k):
        return None
    return first, k, last


@functools.lru_cache(maxsize=4096)
def layout_chunk_layers(layers: int, pp: int, vpp: int) -> tuple[int, ...] | None:
    """Transformer layers of each model chunk under the balanced custom layout, or None.

    ``base, extra = divmod(L, PP x VPP)``: ``extra`` chunks hold ``base + 1`` layers, the others
    ``base``, the smaller ones placed from the outside in (chunk 0, the last chunk, chunk 1, the one
    before the last, ...). Valid when every chunk holds a layer, ``pp >= 2``, and no stage holds more
    than ``ceil(L / PP)`` layers (the stages are as balanced as any split can make them, which the
    step-time model's average-stage charge assumes). DeepSeek-V3, 61 layers at PP 4 x VPP 4: 16
    chunks, 13 of 4 layers and chunks 0, 15 and 1 of 3; stages hold 15, 15, 16 and 15 layers.
    """
    chunks = pp * vpp
    if pp < 2 or vpp < 1 or layers < chunks:
        return None
    base, extra = divmod(layers, chunks)
    out = [base + 1] * chunks
    order = [j for pair in zip(range(chunks), range(chunks - 1, -1, -1)) for j in pair]
    small = list(dict.fromkeys(order))[: chunks - extra]
    for j in small:
        out[j] = base
    if max(sum(out[s::pp]) for s in range(pp)) > math.ceil(layers / pp):
        return None
    return tuple(out)


def pipeline_split(layers: int, pp: int, vpp: int, split_embedding_loss: bool = False,
                   uneven: bool = False) -> int:
    """The split code used for ``pp`` stages x ``vpp`` chunks (see the module docstring)."""
    chunks = pp * vpp
    if layers % chunks == 0:
        return SPLIT_EVEN
    if split_embedding_loss and (layers + 2) % chunks == 0 and (layers + 2) // chunks >= 1 and pp >= 2:
        return SPLIT_EMBEDDING_LOSS
    if uneven and uneven_stage_layers(layers, pp, vpp) is not None:
        return SPLIT_UNEVEN
    if uneven and vpp > 1 and layout_chunk_layers(layers, pp, vpp) is not None:
        return SPLIT_LAYOUT
    return SPLIT_NONE


def pipeline_split_array(layers: int, pp: Any, vpp: Any, split_embedding_loss: bool = False,
                         uneven: bool = False) -> Any:
    """:func:`pipeline_split` over numpy arrays ``pp`` and ``vpp`` (int64 codes, broadcast shape).

    Evaluated once per distinct (PP, VPP) pair, found in O(N) through the integer key
    ``pp x (max VPP + 1) + vpp`` (``intmath.key_groups``, no sort), so a grid of millions of layouts
    costs a few lookups.
    """
    import numpy as np

    p, v = np.broadcast_arrays(np.asarray(pp, dtype=np.int64), np.asarray(vpp, dtype=np.int64))
    if p.size == 0:
        return np.zeros(p.shape, dtype=np.int64)
    if p.min() < 0 or v.min() < 0:
        raise ValueError("pipeline sizes must be non-negative")
    width = int(v.max()) + 1
    present, inverse = key_groups(p * width + v)
    codes = np.array([pipeline_split(layers, int(k // width), int(k % width), split_embedding_loss, uneven)
                      for k in present], dtype=np.int64)
    return codes[inverse].reshape(p.shape)


def chunk_layers(layers: int, pp: int, vpp: int, code: int) -> list[int]:
    """Transformer layers of each model chunk, in chunk order (chunk ``j`` runs on stage ``j % pp``).

    An even code on layers that ``pp x vpp`` does not divide spreads the remainder over the first
    chunks (a fallback for direct callers; the layout rules reject it).
    """
    chunks = pp * vpp
    if code == SPLIT_EMBEDDING_LOSS:
        c = (layers + 2) // chunks
        out = [c] * chunks
        out[0] -= 1
        out[-1] -= 1
        return out
    if code == SPLIT_UNEVEN:
        split = uneven_stage_layers(layers, pp, vpp)
        if split is not None:
            first, mid, last = split
            return [(first if j % pp == 0 else last if j % pp == pp - 1 else mid) // vpp for j in range(chunks)]
    if code == SPLIT_LAYOUT:
        per_chunk = layout_chunk_layers(layers, pp, vpp)
        if per_chunk is not None:
            return list(per_chunk)
    base, extra = divmod(layers, chunks)
    return [base + (1 if j < extra else 0) for j in range(chunks)]


def stage_layers(layers: int, pp: int, vpp: int, code: int) -> list[int]:
    """Transformer layers held by each pipeline stage (all its chunks)."""
    per_chunk = chunk_layers(layers, pp, vpp, code)
    return [sum(per_chunk[s::pp]) for s in range(pp)]


def split_text(layers: int, pp: int, vpp: int, code: int) -> str:
    """A short description, e.g. ``"uneven: 2 + 14 x 4 + 3 layers"``."""
    per = stage_layers(layers, pp, vpp, code)
    if code == SPLIT_EVEN or pp < 2:
        return f"even: {per[0]} layers per stage"
    mid = per[1:-1]
    middle = f" + {len(mid)} x {mid[0]}" if len(mid) > 1 and len(set(mid)) == 1 else "".join(f" + {m}" for m in mid)
    stages = f"{per[0]}{middle} + {per[-1]} layers"
    if code == SPLIT_LAYOUT:
        chunks = chunk_layers(layers, pp, vpp, code)
        return f"layout: {len(chunks)} chunks of {min(chunks)}-{max(chunks)} layers, stages {stages}"
    return f"{SPLIT_NAMES.get(code, 'uneven')}: {stages}"
