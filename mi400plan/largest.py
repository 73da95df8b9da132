"""The largest model of a family that a cluster holds, for training or inference.

Training: a family model fits ``gpus`` GPUs when the layout search (``search.search``, the ``sweep``
model: every TP/PP/VPP/CP/EP/ZeRO/micro-batch/recompute layout, memory from ``memory.train_memory``)
finds a valid layout that fits; the layout reported is the fastest of them. Inference: a model fits
one replica of ``gpus`` GPUs (``max(TP, EP) x PP = gpus``) at ``batch`` sequences of ``context``
tokens when ``memory.max_context`` at some such layout is at least ``context``: the same rule
``fit --mode infer`` reports as its maximum context, so ``--largest`` and ``--max-context`` agree.

Memory grows with the family's width, so fitting is searched by bisection over the ladder
(``family.FamilyTemplate.widths``), keeping a step that fits below and one that does not above; the
answer's next larger step has therefore been checked not to fit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mi400plan.family import FamilyTemplate


@dataclass(frozen=True)
class Verdict:
    """One family step on the cluster: whether it fits and, if so, the layout (a dict) that does it."""

    width: int
    fits: bool
    layout: dict[str, Any] | None = None
    detail: dict[str, float] | None = None  # train: step and memory; infer: max context, memory


@dataclass(frozen=True)
class Largest:
    largest: Verdict | None  # None: not even the smallest step fits
    next_larger: Verdict | None  # None: the largest step of the ladder fits
    checked: list[Verdict]


def largest_fitting(template: FamilyTemplate, judge: Callable[[Any], Verdict]) -> Largest:
    """Bisect the ladder for the last step that ``judge`` says fits (see the module doc)."""
    widths = template.widths()
    seen: dict[int, Verdict] = {}

    def at(i: int) -> Verdict:
        w = widths[i]
        if w not in seen:
            seen[w] = judge(template.model(w))
        return seen[w]

    if not at(0).fits:
        return Largest(None, at(0), list(seen.values()))
    if at(len(widths) - 1).fits:
        return Largest(at(len(widths) - 1), None, list(seen.values()))
    lo, hi = 0, len(widths) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if at(mid).fits:
            lo = mid
        else:
            hi = mid
    return Largest(at(lo), at(hi), sorted(seen.values(), key=lambda v: v.width))


def train_judge(hw: Any, gpus: int, workload: Callable[[Any], Any], opts: Any) -> Callable[[Any], Verdict]:
    """Training fit on ``gpus`` GPUs by the layout search; ``workload(spec)`` builds its Workload."""
    from mi400plan.search import iter_rows, search

    def judge(spec: Any) -> Verdict:
        res = search(workload(spec), hw, gpus, opts, top_k=1)
        row = next(iter_rows(res.top), None) if res.valid else None
        if row is None:
            return Verdict(spec.hidden_size, False)
        return Verdict(spec.hidden_size, True, row, {"step_s": row["step"], "memory_bytes": row["mem_total"]})

    return judge


def infer_layouts(spec: Any, gpus: int) -> list[tuple[int, int, int]]:
    """(TP, PP, EP) with max(TP, EP) x PP = ``gpus``: TP divides the query and KV heads, PP the layers,
    EP the routed experts (EP > TP only as a multiple of TP)."""
    a = spec.attention
    out = []
    for pp in (p for p in range(1, gpus + 1) if gpus % p == 0 and spec.num_layers % p == 0):
        width = gpus // pp
        tps = [t for t in range(1, width + 1) if width % t == 0 and a.num_heads % t == 0 and a.kv_heads % t == 0]
        for tp in tps:
            if tp == width:
                out.append((tp, pp, 1))  # experts, if any, split by TP like the dense FFN
            if spec.moe is not None and width > 1 and spec.moe.num_experts % width == 0:
                out.append((tp, pp, width))  # experts over the replica's GPUs, attention TP x data-parallel
    return out


def infer_judge(capacity_bytes: float, recipe: Any, gpus: int, batch: int, context: int,
                pins: dict[str, int] | None = None) -> Callable[[Any], Verdict]:
    """Inference fit: ``memory.max_context`` at the best (TP, PP, EP) of ``gpus`` GPUs >= ``context``;
    ``pins`` ({"tp": 4, ...}) keep only the layouts with those sizes."""
    import numpy as np

    from mi400plan.memory import max_context
    from mi400plan.params import count_params

    def judge(spec: Any) -> Verdict:
        lays = [x for x in infer_layouts(spec, gpus)
                if all(dict(zip(("tp", "pp", "ep"), x))[k] == v for k, v in (pins or {}).items())]
        if not lays:
            return Verdict(spec.hidden_size, False)
        tp, pp, ep = (np.asarray(x) for x in zip(*lays))
        mc = max_context(spec, count_params(spec), recipe, capacity_bytes=capacity_bytes, batch=batch, tp=tp, pp=pp,
                         ep=ep)
        i = int(np.argmax(mc))
        lay = {"tp": int(tp[i]), "pp": int(pp[i]), "ep": int(ep[i]), "batch": batch, "context": context}
        return Verdict(spec.hidden_size, bool(mc[i] >= context), lay, {"max_context": float(mc[i])})

    return judge
