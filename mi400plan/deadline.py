"""Cluster sizes asked backwards: the smallest cluster that trains ``tokens`` by a deadline, or the
fastest one whose cost to train stays within a budget.

Candidate sizes are the GPU counts some layout can fill at all: ``replica x DP`` where the replica
``TP x CP x fold x PP`` passes the structural rules of ``search.structural_masks`` and ``DP``
divides the global batch (``batch-dp-mb`` with a micro-batch of 1), restricted to multiples of the
size step (whole 8-GPU nodes, or whole scale-up domains when the domain is a power of two) up to
``MAX_CLUSTER_GPUS``. Each size is priced by the layout search (``search.search``, vectorized over
layouts), so a size's days are those of its fastest layout.

The search is exact and assumes nothing about how days fall as GPUs grow (they do not fall
monotonically: a size whose factors the model's layers or the global batch lack is slower than a
smaller one, e.g. 61-layer DeepSeek-V3 on 7,808 GPUs against 4,096). A deadline prices every candidate
from the compute bound upward and stops at the first that meets it, so every smaller candidate that
could have met it was priced and missed; the candidate right below the answer is priced too. No
size below the compute bound ``tokens x model FLOPs per token / (deadline x dense peak)`` GPUs can
meet a deadline (a step is never shorter than its FLOPs at peak: MFU <= 1), so none is priced. A
budget (alone) prices candidates from the largest down and keeps the fastest within it, stopping
where a size's tokens/s at 100% of peak falls to the best found; so does the best achievable date
when no size meets a deadline. With both, the answer is the smallest size that meets the deadline
within the budget.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mi400plan.search import (
    BREAKDOWN,
    Hardware,
    SearchOptions,
    Workload,
    dimension_values,
    fold_factor,
    iter_rows,
    search,
    structural_masks,
)

# The largest cluster the planner prices (2^17 GPUs: past the largest disclosed training clusters).
MAX_CLUSTER_GPUS = 131072
NODE_GPUS = 8  # every bundled scale-up domain is a whole number of 8-GPU nodes or trays


def size_step(domain: int) -> int:
    """GPUs per size step: the scale-up domain when it is a power of two (layouts of power-of-two
    groups fill it), else the largest power of two dividing it (an NVL72 rack's 72 GPUs: 8)."""
    d = max(1, int(domain))
    return d & -d


def candidate_sizes(wl: Workload, opts: SearchOptions, step: int, max_gpus: int = MAX_CLUSTER_GPUS) -> list[int]:
    """GPU counts (multiples of ``step``, at most ``max_gpus``) that some layout can fill exactly."""
    vals = dimension_values(wl.model, wl.seq_len, max_gpus, opts)
    names = ("tp", "pp", "vpp", "cp", "ep", "etp")
    grids = np.meshgrid(*[np.asarray(vals[n], dtype=np.int64) for n in names], indexing="ij")
    c = {n: g.ravel() for n, g in zip(names, grids)}
    masks = structural_masks(wl.model, wl.seq_len, max_gpus, c, opts.split_embedding_loss, opts.uneven_pp)
    masks.pop("world-replica", None)
    ok = np.ones(c["tp"].size, dtype=bool)
    for bad in masks.values():
        ok &= ~np.asarray(bad, dtype=bool)
    replicas = np.unique((c["tp"] * c["cp"] * c["pp"] * fold_factor(c["tp"], c["cp"], c["ep"], c["etp"]))[ok])
    from mi400plan.intmath import divisors

    dps = np.asarray(divisors(wl.global_batch), dtype=np.int64)
    sizes = np.unique(np.outer(replicas, dps).ravel())
    sizes = sizes[(sizes <= max_gpus) & (sizes % step == 0)]
    return [int(s) for s in sizes]


def compute_bound_gpus(tokens: float, flops_per_token: float, seconds: float, peak_flops: float) -> float:
    """GPUs below which ``tokens`` cannot be trained in ``seconds`` even at 100% of dense peak
    (FLOPs = tokens x FLOPs per token; a GPU does at most ``peak_flops`` per second)."""
    return tokens * flops_per_token / (seconds * peak_flops)


@dataclass
class SizePoint:
    """The fastest layout at one size (``row``: a ``search.iter_rows`` row), or None when none fits."""

    gpus: int
    row: dict[str, Any] | None
    tokens_per_s: float | None

    @property
    def valid(self) -> bool:
        return self.row is not None


@dataclass
class Pricer:
    """Prices sizes with the layout search and remembers every answer."""

    wl: Workload
    hw: Hardware
    opts: SearchOptions
    seen: dict[int, SizePoint] = field(default_factory=dict)

    def __call__(self, gpus: int) -> SizePoint:
        if gpus not in self.seen:
            res = search(self.wl, self.hw, gpus, self.opts, top_k=1)
            row = next(iter_rows(res.top), None) if res.valid else None
            tps = None if row is None else float(self.wl.global_batch) * self.wl.seq_len / row["step"]
            self.seen[gpus] = SizePoint(gpus, row, tps)
        return self.seen[gpus]


@dataclass
class SizeSearch:
    """Outcome of a size search: ``found`` (None when no size qualifies), ``best`` (the fastest candidate,
    when no size meets a deadline or for a budget), every size priced, and ``nearest`` (the smallest size
    that meets the deadline whatever it costs, when a budget is also given)."""

    found: SizePoint | None
    best: SizePoint | None
    priced: list[SizePoint]
    nearest: SizePoint | None = None


def smallest_meeting(sizes: list[int], price: Pricer, min_tps: float, tps_bound: Callable[[int], float],
                     ok: Callable[[SizePoint], bool] | None = None) -> SizeSearch:
    """The smallest candidate whose fastest layout reaches ``min_tps`` tokens/s (and passes ``ok``, the
    budget, when given), exactly: every candidate that ``tps_bound`` does not rule out is priced in
    ascending order and the first that qualifies is the answer (see the module doc). The candidate
    right below the answer is priced too (the ``next smaller`` size). With no answer, ``best`` is the
    fastest candidate (``fastest``)."""

    def meets(p: SizePoint) -> bool:
        return p.tokens_per_s is not None and p.tokens_per_s >= min_tps

    nearest = found = None
    for s in sizes:
        if tps_bound(s) < min_tps:
            continue
        p = price(s)
        if meets(p):
            nearest = nearest or p
            if ok is None or ok(p):
                found = p
                break
    if found is None:
        return SizeSearch(None, fastest(sizes, price, tps_bound).best, _priced(price), nearest)
    below = [s for s in sizes if s < found.gpus]
    if below:
        price(below[-1])
    return SizeSearch(found, None, _priced(price), nearest)


def fastest(sizes: list[int], price: Pricer, tps_bound: Callable[[int], float],
            ok: Callable[[SizePoint], bool] | None = None) -> SizeSearch:
    """The candidate with the highest throughput that passes ``ok`` (the budget), exactly: candidates are
    priced from the largest down, and the scan stops where ``tps_bound`` (an upper bound on a size's
    tokens/s that grows with the size) falls to the best throughput found, since no smaller size can
    beat it. ``best`` is the fastest size priced whatever ``ok`` says."""
    found: SizePoint | None = None
    for s in sorted(sizes, reverse=True):
        if found is not None and tps_bound(s) <= (found.tokens_per_s or 0.0):
            break
        p = price(s)
        if p.valid and (ok is None or ok(p)) and (found is None or _tps(p) > _tps(found)):
            found = p
    valid = [p for p in price.seen.values() if p.valid]
    best = max(valid, key=lambda p: (_tps(p), -p.gpus)) if valid else None
    return SizeSearch(found, best, _priced(price))


def _tps(p: SizePoint) -> float:
    return p.tokens_per_s or 0.0


def _priced(price: Pricer) -> list[SizePoint]:
    return sorted(price.seen.values(), key=lambda p: p.gpus)


def throughput_bound(peak_flops: float, flops_per_token: float) -> Callable[[int], float]:
    """Tokens/s that no layout on ``gpus`` GPUs can exceed: every GPU at 100% of its dense peak,
    ``gpus x peak / FLOPs per token`` (MFU <= 1; the inverse of ``compute_bound_gpus``)."""
    return lambda gpus: gpus * peak_flops / flops_per_token


def limiting_term(row: dict[str, Any]) -> tuple[str, float]:
    """The largest part of a step other than compute (name from ``search.BREAKDOWN``, share of the step)."""
    shares = {k: row[f"t_{k}"] / row["step"] for k in BREAKDOWN if k != "compute"}
    name = max(shares, key=lambda k: shares[k])
    return name, float(shares[name])
