"""Cluster sizes asked backwards: the smallest cluster that trains ``tokens`` by a deadline, or the
fastest one whose cost to train stays within a budget.

Candidate sizes are the GPU counts some layout can fill at all: ``replica x DP`` where the replica
``TP x CP x fold x PP`` passes the structural rules of ``search.structural_masks`` and ``DP``
divides the global batch (``batch-dp-mb`` with a micro-batch of 1), restricted to multiples of the
size step (whole 8-GPU nodes, or whole scale-up domains when the domain is a power of two) up to
``MAX_CLUSTER_GPUS``. Each size is priced by the layout search (``search.search``, vectorized over
layouts), so a size's days are those of its fastest layout.

Sizes are grouped by octave (``[s 2^j, s 2^(j+1))``, ``s`` the step). Days to train fall as GPUs grow
within the range where the model scales, so the search prices one size per octave (its largest
candidate) from the compute bound upward, stops at the first octave that meets the deadline, prices
every candidate of that octave (bisection when it holds more than ``EXHAUSTIVE_OCTAVE``), and then
walks down to the next smaller size that has a valid layout and checks that it misses the deadline
(moving down while it does not). No size below the compute bound ``tokens x model FLOPs per token /
(deadline x GPUs x dense peak)`` can meet a deadline (a step is never shorter than its compute at
peak: MFU <= 1), so none is priced.
"""

from __future__ import annotations

import math
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
EXHAUSTIVE_OCTAVE = 12  # price every candidate of the deciding octave up to this many, else bisect


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


def octaves(sizes: list[int], step: int) -> list[list[int]]:
    """``sizes`` grouped by octave ``[step 2^j, step 2^(j+1))``, ascending."""
    groups: dict[int, list[int]] = {}
    for s in sizes:
        groups.setdefault(int(math.floor(math.log2(s / step))), []).append(s)
    return [groups[k] for k in sorted(groups)]


@dataclass
class SizeSearch:
    """Outcome of a size search: ``found`` (None when no size qualifies) and every size priced."""

    found: SizePoint | None
    best: SizePoint | None  # the highest throughput priced (the best achievable)
    priced: list[SizePoint]


def smallest_meeting(sizes: list[int], step: int, price: Pricer, min_tps: float,
                     floor_gpus: float = 0.0) -> SizeSearch:
    """The smallest size whose fastest layout reaches ``min_tps`` tokens/s (see the module doc)."""

    def meets(p: SizePoint) -> bool:
        return p.tokens_per_s is not None and p.tokens_per_s >= min_tps

    groups = octaves([s for s in sizes if s >= floor_gpus], step)
    hit: list[int] | None = None
    for g in groups:
        if meets(price(g[-1])):
            hit = g
            break
    found = None
    if hit is None and sizes:
        price(sizes[-1])  # the largest cluster: the best achievable date
    if hit is not None:
        found = _first_meeting(hit, price, meets)
        below = [s for s in sizes if s < found.gpus and s >= floor_gpus]
        while below:  # the next smaller size with a layout must miss the deadline
            p = price(below.pop())
            if not p.valid:
                continue
            if not meets(p):
                break
            found = p
    return _outcome(found, price)


def _outcome(found: SizePoint | None, price: Pricer) -> SizeSearch:
    priced = sorted(price.seen.values(), key=lambda p: p.gpus)
    valid = [p for p in priced if p.valid]
    best = max(valid, key=lambda p: p.tokens_per_s or 0.0) if valid else None
    return SizeSearch(found, best, priced)


def fastest_within(sizes: list[int], step: int, price: Pricer, cost_of: Callable[[SizePoint], float],
                   budget: float) -> SizeSearch:
    """The fastest size whose cost to train (``cost_of``) stays within ``budget``: one size per
    octave, then every size of the octave above the fastest affordable one (cost grows with size
    once per-GPU throughput falls, so the answer sits at the edge)."""
    groups = octaves(sizes, step)

    def ok(p: SizePoint) -> bool:
        return p.valid and cost_of(p) <= budget

    reps = [price(g[-1]) for g in groups]
    good = [i for i, p in enumerate(reps) if ok(p)]
    if not good:
        return _outcome(None, price)
    i = max(good, key=lambda j: reps[j].tokens_per_s or 0.0)
    pool = [reps[i]] + ([price(s) for s in groups[i + 1][:-1]] if i + 1 < len(groups) else [])
    found = max((p for p in pool if ok(p)), key=lambda p: p.tokens_per_s or 0.0)
    return _outcome(found, price)


def _first_meeting(group: list[int], price: Callable[[int], SizePoint], meets: Callable[[SizePoint], bool]) -> SizePoint:
    """Smallest meeting size of one octave whose largest size meets: every size, or bisection."""
    if len(group) <= EXHAUSTIVE_OCTAVE:
        return next(price(s) for s in group if meets(price(s)))
    lo, hi = -1, len(group) - 1  # group[hi] meets; bisect assuming throughput grows with size
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if meets(price(group[mid])):
            hi = mid
        else:
            lo = mid
    return price(group[hi])


def limiting_term(row: dict[str, Any]) -> tuple[str, float]:
    """The largest part of a step other than compute (name from ``search.BREAKDOWN``, share of the step)."""
    shares = {k: row[f"t_{k}"] / row["step"] for k in BREAKDOWN if k != "compute"}
    name = max(shares, key=lambda k: shares[k])
    return name, float(shares[name])
