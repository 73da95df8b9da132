"""Collective communication cost model (alpha-beta), vectorised with numpy.

Units: sizes in bytes, bandwidths in bytes/s **per direction per GPU**, times in seconds.

Model
-----
Every algorithm costs ``t = steps * alpha + volume / B`` (Hockney's alpha-beta model), where
``alpha`` is the tier's per-step latency, ``volume`` the bytes one GPU must push through its
busiest port, and ``B = usable_bw(topology, algorithm, group) * efficiency``. Cost terms follow
Thakur, Rabenseifner & Gropp, "Optimization of Collective Communication Operations in MPICH",
IJHPCA 19(1), 2005 (ring, recursive halving/doubling, Rabenseifner reduce and broadcast); ring
bandwidth optimality is from Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for
clusters of workstations", JPDC 69(2), 2009; the double-binary-tree costs follow NCCL's trees
(Sanders, Speck & Traeff 2009 two-tree broadcast/reduce). ``S`` and the bus-bandwidth factors are
those of nccl-tests ``doc/PERFORMANCE.md``: all-reduce and broadcast/reduce use the buffer size;
all-gather and reduce-scatter use the *total* array (per-rank count x n); all-to-all uses one
rank's whole send buffer.

=================  =========================  ===========================  =====================
op (S as above)    ring                       recursive halving/doubling   direct (one step)
=================  =========================  ===========================  =====================
all_reduce         2(n-1)a + 2(n-1)/n S/B     2 log2(n) a + 2(n-1)/n S/B   2a + 2(n-1)/n S/B
reduce_scatter     (n-1)a + (n-1)/n S/B       log2(n) a + (n-1)/n S/B      a + (n-1)/n S/B
all_gather         (n-1)a + (n-1)/n S/B       log2(n) a + (n-1)/n S/B      a + (n-1)/n S/B
all_to_all         (n-1)a + (n-1)/n S/B       --                           a + (n-1)/n S/B
broadcast, reduce  (n-1)a + S/B (pipelined)   2 log2(n) a + 2(n-1)/n S/B   a + (n-1) S/B
send_recv          --                         --                           a + S/B
=================  =========================  ===========================  =====================

Double binary tree: all_reduce ``2 ceil(log2 n) a + 2 S/B``; broadcast/reduce
``ceil(log2 n) a + S/B``. Recursive halving/doubling needs a power-of-two group. Direct all-reduce
is the two-shot scheme (direct reduce-scatter, then direct all-gather).

Topology (what ``B`` an algorithm can use; ``L`` = one link per direction, ``P`` = per-GPU port):

- ``switched``: every algorithm gets the full per-GPU port bandwidth ``P``.
- ``full_mesh`` / ``p2p_mesh``: direct algorithms talk to all peers at once over ``g-1`` links
  (a group smaller than the mesh uses proportionally fewer links); a ring or recursive
  halving/doubling talks to one peer per step: one link, ``L``; a tree uses ``min(2, g-1)`` links.
  (Libraries can run several rings over disjoint links; "direct" stands for that best case.)
- ``torus``: per-dimension rings. A group that covers a whole dimension has its wraparound link and
  runs a bidirectional ring on that dimension's 2 links; a group that covers only part of a
  dimension is a line there (no wraparound): a logical ring on a line sends its closing hop back over
  the reverse links, so it gets one link per direction, half a ring. ``B = P w / d`` with
  ``w = sum over spanned dimensions of 1 (whole) or 1/2 (part)``; latency steps are
  ``sum(d_i - 1)`` over the dimensions it spans. (Bisection check: 4 GPUs on a line, ``L`` per link
  and direction, must move S across the middle link each way, ``t >= S/L``; the ring at ``B = L``
  gives ``2 (3/4) S/L = 1.5 S/L``, at ``2L`` it would give an impossible ``0.75 S/L``.)
  Only ring algorithms (and point-to-point) are valid.
- ``ring``: a bidirectional physical ring, ``B = 2L`` for a group that closes the ring; a group of
  fewer GPUs than the ring is a line, ``B = L``; ring algorithms only.

Placement (``placed_collective``): ranks ``0, stride, 2 stride, ...`` starting at a domain
boundary; domains are blocks of ``D`` consecutive GPUs (``domain_split``). All members in one domain
(span ``(g-1) stride + 1 <= D``): one scale-up domain. ``stride >= D``: every member in a different
domain, scale-out only. Otherwise hierarchical (two-level) over the ``d`` domains spanned, holding
between ``n_min`` and ``n_max`` members each (they differ when ``g`` is not a multiple of the
members per domain, the last domain partly filled, or when the stride does not divide ``D``).
**The slowest member bounds the time**: a domain with fewer members has fewer NICs to carry its
share of the cross-domain step, so each of them carries more; the in-domain steps take the slower
of the least- and the most-filled domain (on a mesh a smaller group also has fewer links).

- all-reduce: reduce-scatter inside, all-reduce across the ``d`` domains of ``S / n_min`` per rank
  (a ring over domains moves ``2 (d-1)/d S`` out of every domain, spread over its ``n_min`` NICs),
  all-gather back; the parts are summed, not overlapped.
- reduce-scatter / all-gather: inside step, then (before) the cross-domain step of size
  ``X = S (g - n_min) d / (n_min g (d - 1))``, chosen so that each NIC of the least-filled domain
  moves its exact share ``(S / n_min)(1 - n_min / g)`` (``X = S / n`` when every domain is full).
- broadcast / reduce: the faster valid one of (a) one NIC per domain carrying the whole buffer
  (outer step on ``S``, inner on ``S``) and (b) the two-level split of Thakur et al. 2005's long-message
  algorithms (broadcast = scatter + all-gather, reduce = reduce-scatter + gather): scatter
  (reduce-scatter) inside, the cross-domain step per rank on ``S / n_min``, all-gather (gather)
  inside. Scatter and gather move ``(n-1)/n S`` through the root's port in the same steps as
  reduce-scatter and all-gather and are costed as those. Each candidate takes the faster of
  (a) and (b); (b) wins for large buffers (each NIC carries ``1/n`` of the buffer).
- all-to-all: each rank of the least-filled domain spills ``(g - n_min)/g`` of its buffer over
  scale-out concurrently with the in-domain part (time = the slower of the two).
- send/recv: the slowest pair crosses domains.

Every member also has its own scale-out port, so the flat collective over scale-out (as if every
member sat in its own domain) is valid as well; a hierarchical candidate takes the faster of the
two-level scheme and the flat one (the flat one wins when a domain holds a single member: its NIC
carries the whole cross-domain share anyway, and the in-domain steps would only add time). Such
rows keep the ``hierarchical`` tier (the group still spans partly filled domains) with no
scale-up algorithm.

Torus slices (``torus_slice``): on a torus tier whose profile lists slice shapes (the shapes the
vendor allocates, e.g. TPU7x 4x4x4 = 64 chips, 4x4x8 = 128; TPU v6e 2x2 .. 16x16), a group whose
size is listed gets that shape, with wraparound links only in the dimensions the profile marks as
wrapped (the vendor documents which slices are tori); a smaller group fills the smallest listed
slice that holds it dimension by dimension and is wrapped only along a dimension it covers whole
that wraps in that slice. Without a list, groups fill ``torus_dims`` in order and a whole
dimension is a ring (the pod torus). Per-dimension ring weights and latency steps then follow the
``torus`` rule above.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, NamedTuple

import numpy as np

from mi400plan.records import record

OPS: tuple[str, ...] = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "broadcast",
    "reduce",
    "send_recv",
)
ALGOS: tuple[str, ...] = ("ring", "tree", "rhd", "direct")
ALGO_NAMES = {
    "ring": "ring",
    "tree": "double binary tree",
    "rhd": "recursive halving/doubling",
    "direct": "direct",
}
TIER_NAMES: tuple[str, ...] = ("scale_up", "scale_out", "hierarchical")
TOPOLOGIES = ("switched", "full_mesh", "p2p_mesh", "ring", "torus")

_OP_KEYS = {op.replace("_", ""): op for op in OPS}
_OP_KEYS.update({"a2a": "all_to_all", "p2p": "send_recv", "sendrecv": "send_recv", "bcast": "broadcast"})
_ALGO_KEYS = {
    "ring": "ring",
    "tree": "tree",
    "doublebinarytree": "tree",
    "dbt": "tree",
    "rhd": "rhd",
    "recursivehalvingdoubling": "rhd",
    "recursivedoubling": "rhd",
    "rabenseifner": "rhd",
    "direct": "direct",
    # "direct" all-reduce is the two-shot scheme (2a + 2(n-1)/n S/B); one-shot (every rank sends
    # all of S to every peer, a + (n-1) S/B) is a different cost and is not an alias.
    "twoshot": "direct",
}


def normalize_op(name: str) -> str | None:
    """``allreduce``, ``all-reduce``, ``all_reduce``, ``AllReduce`` -> ``all_reduce``; None if unknown."""
    key = name.strip().lower().replace("-", "").replace("_", "").replace(" ", "")
    return _OP_KEYS.get(key)


def normalize_algo(name: str) -> str | None:
    """``ring``, ``tree``, ``rhd``, ``direct`` (and long spellings) -> canonical key; None if unknown."""
    key = name.strip().lower().replace("-", "").replace("_", "").replace(" ", "").replace("/", "")
    return _ALGO_KEYS.get(key)


# ---------------------------------------------------------------------------------------------
# Tier parameters
# ---------------------------------------------------------------------------------------------


@record
class TierParams:
    """Effective parameters of one network tier, in base units, as the cost model reads them.

    ``bw_per_dir``: per-GPU peak bandwidth, one direction, B/s. ``link_bw_per_dir``: one link,
    one direction, B/s (equal to ``bw_per_dir`` on a switched tier). ``latency``: alpha, seconds
    per message step. ``efficiency``: achievable fraction of bandwidth (1.0 = wire peak).
    """

    name: str
    kind: str  # "scale_up" | "scale_out"
    topology: str
    domain_size: int
    bw_per_dir: float
    latency: float
    efficiency: float = 1.0
    links: int = 1
    link_bw_per_dir: float = 0.0
    torus_dims: tuple[int, ...] = ()
    # Slice shapes a group of a given size gets on a torus: ((shape, wraparound per dim), ...),
    # e.g. (((4, 4, 4), (True, True, True)), ...). Empty: groups fill ``torus_dims`` in order.
    torus_slices: tuple[tuple[tuple[int, ...], tuple[bool, ...]], ...] = ()

    def __post_init__(self) -> None:
        if self.topology not in TOPOLOGIES:
            raise ValueError(f"unknown topology {self.topology!r}")
        if not (self.bw_per_dir > 0 and math.isfinite(self.bw_per_dir)):
            raise ValueError("bw_per_dir must be a positive number of B/s")
        if self.latency < 0 or not (0 < self.efficiency <= 1):
            raise ValueError("latency must be >= 0 s and efficiency in (0, 1]")
        if self.link_bw_per_dir <= 0:
            object.__setattr__(self, "link_bw_per_dir", self.bw_per_dir / max(self.links, 1))

    @property
    def effective_bw(self) -> float:
        """Per-GPU achievable bandwidth per direction, B/s."""
        return self.bw_per_dir * self.efficiency

    @classmethod
    def from_bandwidth(
        cls,
        bw_per_dir: float,
        latency: float = 0.0,
        *,
        kind: str = "scale_up",
        domain_size: int = 2**31 - 1,
        efficiency: float = 1.0,
        name: str = "custom",
    ) -> "TierParams":
        """A switched tier giving every GPU ``bw_per_dir`` B/s (e.g. from ``--bw 300GB/s``)."""
        return cls(name, kind, "switched", domain_size, float(bw_per_dir), float(latency), efficiency)

    @classmethod
    def from_fabric(cls, fabric: Any, case: str = "nominal") -> "TierParams":
        """Parameters from a ``Fabric`` profile.

        ``case``: ``nominal``; ``peak`` (nominal bandwidth at efficiency 1, the wire floor);
        ``fast`` (high bandwidth, high efficiency, low latency); ``slow`` (the opposite).
        Raises ``MissingValueError`` if the profile does not disclose the bandwidth.
        """
        bw_lo, bw_nom, bw_hi = fabric.bw_per_dir_bytes_per_s.triple(f"{fabric.name}: per-GPU bandwidth")
        if fabric.hop_latency_us.known:
            lat_lo, lat_nom, lat_hi = fabric.hop_latency_s.triple(f"{fabric.name}: hop latency")
        else:
            lat_lo = lat_nom = lat_hi = 0.0
        if fabric.efficiency.known:
            eff_lo, eff_nom, eff_hi = fabric.efficiency.triple(f"{fabric.name}: efficiency")
        else:
            eff_lo = eff_nom = eff_hi = 1.0
        pick = {
            "nominal": (bw_nom, lat_nom, eff_nom),
            "peak": (bw_nom, lat_nom, 1.0),
            "fast": (bw_hi, lat_lo, eff_hi),
            "slow": (bw_lo, lat_hi, eff_lo),
        }
        if case not in pick:
            raise ValueError(f"case must be one of {sorted(pick)}")
        bw, lat, eff = pick[case]
        links = int(fabric.links_per_gpu.nominal) if fabric.links_per_gpu.known else 1
        link_bw = bw / links
        if fabric.topology == "switched":
            links, link_bw = 1, bw
        dom = int(fabric.domain_size.nominal) if fabric.domain_size.known else 2**31 - 1
        return cls(
            name=fabric.name,
            kind=fabric.tier,
            topology=fabric.topology,
            domain_size=dom,
            bw_per_dir=float(bw),
            latency=float(lat),
            efficiency=float(eff),
            links=links,
            link_bw_per_dir=float(link_bw),
            torus_dims=tuple(fabric.torus_dims or ()),
            torus_slices=tuple(
                (tuple(int(d) for d in sl.shape), tuple(bool(w) for w in sl.wrap))
                for sl in (getattr(fabric, "torus_slices", None) or ())
            ),
        )


# ---------------------------------------------------------------------------------------------
# Single-tier costs
# ---------------------------------------------------------------------------------------------


def torus_slice(tier: TierParams, group: int) -> tuple[tuple[int, ...], tuple[bool, ...], tuple[int, ...] | None]:
    """Chips along each dimension, wraparound per dimension, and the slice they sit in, for ``group`` chips.

    Rule (see the module docstring, "Torus slices"): a group whose size is a listed slice gets
    that shape, with wraparound where the profile says the slice has it; a group smaller than a
    listed slice fills the smallest listed slice that holds it, dimension by dimension, and has
    wraparound only along a dimension it covers whole *and* that wraps in that slice; without a
    list (or beyond the largest listed slice) the group fills ``torus_dims`` in order and a whole
    dimension counts as wrapped (the pod torus). The third item is the listed slice the group sits
    in (None when it fills ``torus_dims``).
    """
    g = max(int(group), 1)
    sizes = [(math.prod(shape), shape, wrap) for shape, wrap in tier.torus_slices]
    for n, shape, wrap in sizes:
        if n == g:
            return shape, tuple(w and d > 1 for d, w in zip(shape, wrap)), shape
    holders = sorted((n, i) for i, (n, _, _) in enumerate(sizes) if n > g)
    if holders:
        _, i = holders[0]
        parent, pwrap = sizes[i][1], sizes[i][2]
    else:
        parent, pwrap = tuple(tier.torus_dims), tuple(True for _ in tier.torus_dims)
    along: list[int] = []
    wrap: list[bool] = []
    before = 1
    for d, w in zip(parent, pwrap):
        a = max(1, min(d, -(-g // before)))  # ceil(g / before), at most the dimension
        along.append(a)
        wrap.append(bool(w and a == d and d > 1))
        before *= d
    return tuple(along), tuple(wrap), (parent if holders else None)


@lru_cache(maxsize=64)
def _torus_table(
    dims: tuple[int, ...], slices: tuple[tuple[tuple[int, ...], tuple[bool, ...]], ...]
) -> tuple[np.ndarray, np.ndarray]:
    """(ring weight, ring latency steps per phase) for every group size 0..prod(dims)."""
    tier = TierParams("t", "scale_up", "torus", math.prod(dims), 1.0, 0.0, torus_dims=dims, torus_slices=slices)
    n = math.prod(dims)
    w = np.empty(n + 1)
    steps = np.empty(n + 1)
    for g in range(n + 1):
        along, wrap, _ = torus_slice(tier, g)
        used = [(a, wr) for a, wr in zip(along, wrap) if a > 1]
        w[g] = sum(1.0 if wr else 0.5 for _, wr in used)
        steps[g] = sum(a - 1 for a, _ in used)
    # A group larger than the torus is not on this tier; keep the formula finite.
    return np.maximum(w, 0.5), np.maximum(steps, 1.0)


def _torus_span(tier: TierParams, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ring weight, ring latency steps per phase) for groups of ``g`` chips (``torus_slice``).

    The weight counts 1 for a dimension the group covers whole with its wraparound link (a ring)
    and 1/2 for one it covers in part or without wraparound (a line: one link per direction); see
    the module docstring.
    """
    w, steps = _torus_table(tuple(tier.torus_dims), tier.torus_slices)
    idx = np.clip(np.asarray(g, dtype=float), 0, len(w) - 1).astype(np.int64)
    return w[idx], steps[idx]


def usable_bandwidth(tier: TierParams, algo: str, group: Any) -> np.ndarray:
    """Peak per-direction bandwidth (B/s) one GPU can use with ``algo`` in a group of ``group``.

    NaN where the algorithm is not valid on the topology (see the module docstring).
    """
    g = np.asarray(group, dtype=float)
    P, L = tier.bw_per_dir, tier.link_bw_per_dir
    nan = np.full_like(g, np.nan)
    topo = tier.topology
    if topo == "switched":
        return np.full_like(g, P)
    if topo in ("full_mesh", "p2p_mesh"):
        if algo == "direct":
            return np.minimum(np.maximum(g - 1.0, 1.0), float(tier.links)) * L
        if algo == "tree":
            return np.minimum(np.maximum(g - 1.0, 1.0), min(2.0, float(tier.links))) * L
        return np.full_like(g, L)  # ring, rhd: one peer per step
    if topo == "torus":
        if algo != "ring":
            return nan
        w, _ = _torus_span(tier, g)
        return P * w / max(len(tier.torus_dims), 1)
    if topo == "ring":
        if algo != "ring":
            return nan
        return np.where(g >= tier.domain_size, 2.0 * L, L)  # a partial ring is a line
    return nan  # pragma: no cover


def _log2ceil(g: np.ndarray) -> np.ndarray:
    return np.ceil(np.log2(np.maximum(g, 1.0)))


_RING_LAT = {"all_reduce": 2.0, "reduce_scatter": 1.0, "all_gather": 1.0}
_RHD = {  # op -> (latency steps per log2(n), volume as multiples of (n-1)/n S)
    "all_reduce": (2.0, 2.0),
    "reduce_scatter": (1.0, 1.0),
    "all_gather": (1.0, 1.0),
    "broadcast": (2.0, 2.0),
    "reduce": (2.0, 2.0),
}
_DIRECT_LAT = {"all_reduce": 2.0, "reduce_scatter": 1.0, "all_gather": 1.0, "all_to_all": 1.0, "broadcast": 1.0, "reduce": 1.0}


def _algo_cost(op: str, algo: str, S: np.ndarray, g: np.ndarray, tier: TierParams) -> tuple[Any, Any] | None:
    """(latency term s, bandwidth term s) of one algorithm on one tier, or None if not valid.

    Results may contain ``inf`` where the algorithm is invalid for some group sizes only.
    """
    a = tier.latency
    eff = tier.efficiency
    if op == "send_recv":
        if algo != "direct":
            return None
        # one link to the peer on a mesh or torus; the full port on a switch
        Bp = (tier.bw_per_dir if tier.topology == "switched" else tier.link_bw_per_dir) * eff
        return a + 0.0 * S, S / Bp + 0.0 * g
    B = usable_bandwidth(tier, algo, g) * eff
    if np.all(np.isnan(B)):
        return None
    frac = (g - 1.0) / np.maximum(g, 1.0)
    if algo == "ring":
        if op == "all_to_all" and tier.topology == "torus":
            return None  # bisection-bound on a torus; not modelled
        if op in _RING_LAT:
            steps = g - 1.0
            if tier.topology == "torus":
                _, steps = _torus_span(tier, g)
            k = _RING_LAT[op]
            return k * steps * a, k * frac * S / B
        if op == "all_to_all":
            return (g - 1.0) * a, frac * S / B
        return (g - 1.0) * a, S / B  # broadcast, reduce: pipelined chain
    if algo == "tree":
        if op == "all_reduce":
            return 2.0 * _log2ceil(g) * a, 2.0 * S / B
        if op in ("broadcast", "reduce"):
            return _log2ceil(g) * a, S / B
        return None
    if algo == "rhd":
        if op not in _RHD:
            return None
        kl, kv = _RHD[op]
        lg = np.log2(np.maximum(g, 1.0))
        pow2 = lg == np.round(lg)
        return np.where(pow2, kl * lg * a, np.inf), kv * frac * S / B
    if algo == "direct":
        if op not in _DIRECT_LAT:
            return None
        if op in ("broadcast", "reduce"):
            return a + 0.0 * g, (g - 1.0) * S / B
        k = _DIRECT_LAT[op]
        return k * a + 0.0 * g, k * frac * S / B
    raise ValueError(f"unknown algorithm {algo!r}")


class TierTime(NamedTuple):
    """Cost of a collective on one tier. Arrays broadcast over size and group."""

    time: np.ndarray  # s
    latency: np.ndarray  # s, alpha part
    bandwidth: np.ndarray  # s, beta part
    algo: np.ndarray  # index into ALGOS; -1 when nothing is valid or group <= 1


def collective_time(op: str, size_bytes: Any, group: Any, tier: TierParams, algo: str | None = None) -> TierTime:
    """Time of ``op`` over ``group`` GPUs of one tier. ``algo=None`` picks the fastest valid one.

    ``size_bytes`` is S as nccl-tests defines it for ``op``. Groups of 1 cost nothing.
    Invalid combinations (e.g. recursive halving on 6 GPUs) give ``inf``.
    """
    if op not in OPS:
        raise ValueError(f"unknown op {op!r}")
    S = np.asarray(size_bytes, dtype=float)
    g = np.asarray(group, dtype=float)
    shape = np.broadcast(S, g).shape
    if algo is not None and algo not in ALGOS:
        raise ValueError(f"unknown algorithm {algo!r}")
    best_t = np.full(shape, np.inf)
    best_l = np.full(shape, np.inf)
    best_a = np.full(shape, -1, dtype=np.int64)
    for name in ALGOS if algo is None else (algo,):
        cost = _algo_cost(op, name, S, g, tier)
        if cost is None:
            continue
        la, bw = cost
        with np.errstate(invalid="ignore"):
            tot = la + bw
            tot = np.where(np.isnan(tot), np.inf, tot)
        better = tot < best_t
        best_t = np.where(better, tot, best_t)
        best_l = np.where(better, la, best_l)
        best_a = np.where(better, ALGOS.index(name), best_a)
    one = g <= 1
    with np.errstate(invalid="ignore"):
        best_b = np.where(np.isfinite(best_t), best_t - best_l, np.inf)
    return TierTime(
        np.where(one, 0.0, best_t), np.where(one, 0.0, best_l), np.where(one, 0.0, best_b), np.where(one, -1, best_a)
    )


# ---------------------------------------------------------------------------------------------
# Placement over two tiers
# ---------------------------------------------------------------------------------------------


class PlacedTime(NamedTuple):
    """Cost of a placed collective. All arrays broadcast over size, group and stride."""

    time: np.ndarray  # s, total
    latency: np.ndarray  # s, alpha part of the total
    bandwidth: np.ndarray  # s, beta part of the total
    scale_up_time: np.ndarray  # s spent on the scale-up tier
    scale_out_time: np.ndarray  # s spent on the scale-out tier
    tier: np.ndarray  # index into TIER_NAMES: 0 scale_up, 1 scale_out, 2 hierarchical
    algo_up: np.ndarray  # index into ALGOS, -1 if the tier is not used
    algo_out: np.ndarray
    group_in: np.ndarray  # members in the fullest scale-up domain spanned
    group_out: np.ndarray  # domains spanned
    group_in_min: np.ndarray  # members in the least-filled scale-up domain spanned


class DomainSplit(NamedTuple):
    """How ``group`` ranks at ``stride`` fall into scale-up domains (``domain_split``)."""

    inside: np.ndarray  # bool: every member in one domain
    apart: np.ndarray  # bool: every member in its own domain
    domains: np.ndarray  # domains spanned (int64)
    n_min: np.ndarray  # members in the least-filled domain (int64)
    n_max: np.ndarray  # members in the fullest domain (int64)


def domain_split(group: Any, stride: Any, domain: int) -> DomainSplit:
    """Members per scale-up domain for ranks ``0, stride, 2 stride, ...`` (``group`` of them).

    Domains are blocks of ``domain`` consecutive GPUs and the group starts at a domain boundary.
    Member ``k`` sits in domain ``floor(k stride / D)``, so the group spans
    ``J + 1`` domains with ``J = floor((g-1) stride / D)``; the first ``J`` (full) domains hold
    ``c = ceil(J D / stride)`` members between them, each ``floor(D/stride)`` or
    ``floor(D/stride) + 1`` (all equal when the stride divides D), and the last domain holds the
    remaining ``g - c``. Least filled: the smaller of ``g - c`` and ``floor(D/stride)`` (when
    ``c < J (floor(D/stride) + 1)``, i.e. some full domain holds only the floor) or
    ``floor(D/stride) + 1``. Integer arithmetic throughout.
    """
    g = np.rint(np.asarray(group, dtype=float)).astype(np.int64)
    st = np.maximum(np.rint(np.asarray(stride, dtype=float)).astype(np.int64), 1)
    g, st = np.broadcast_arrays(g, st)
    D = np.int64(max(int(domain), 1))
    J = ((np.maximum(g, 1) - 1) * st) // D
    inside = J == 0
    apart = ~inside & (st >= D)
    c = -((-J * D) // st)  # ceil(J D / stride): members in the J full domains
    q = D // st
    last = g - c
    n_int_min = np.where(c < J * (q + 1), q, q + 1)
    n_int_max = np.where(c > J * q, q + 1, q)
    n_min = np.where(inside, g, np.where(apart, 1, np.minimum(n_int_min, last)))
    n_max = np.where(inside, g, np.where(apart, 1, np.maximum(n_int_max, last)))
    domains = np.where(inside, 1, np.where(apart, g, J + 1))
    return DomainSplit(inside, apart, domains, n_min, n_max)


_INNER_OUTER = {
    # op -> (inner op before, outer op, inner op after)
    "all_reduce": ("reduce_scatter", "all_reduce", "all_gather"),
    "reduce_scatter": ("reduce_scatter", "reduce_scatter", None),
    "all_gather": (None, "all_gather", "all_gather"),
}


def _add(*parts: TierTime) -> tuple[np.ndarray, np.ndarray]:
    """(time, latency) of steps run one after the other."""
    return sum(p.time for p in parts), sum(p.latency for p in parts)  # type: ignore[return-value]


def _slowest(op: str, size: Any, n_min: np.ndarray, n_max: np.ndarray, same: bool, tier: TierParams,
             algo: str | None) -> TierTime:
    """The in-domain step bounded by the slower of the least- and the most-filled domain.

    ``size`` is S, or a function of the member count giving S for that domain.
    """
    a = collective_time(op, size(n_min) if callable(size) else size, n_min, tier, algo)
    if same:
        return a
    b = collective_time(op, size(n_max) if callable(size) else size, n_max, tier, algo)
    pick = b.time > a.time
    return TierTime(*(np.where(pick, y, x) for x, y in zip(a, b)))


def _hierarchical(op: str, S: np.ndarray, g: np.ndarray, d: np.ndarray, n_min: np.ndarray, n_max: np.ndarray,
                  scale_up: TierParams, scale_out: TierParams | None, algo: str | None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(time, latency, scale-up time, scale-out time, algo up, algo out) of the two-level schemes.

    Arrays are 1-D over the hierarchical candidates only (``d >= 2`` domains, ``n_min >= 1``).
    """
    gf, df = g.astype(float), d.astype(float)
    nmin_f = n_min.astype(float)
    same = bool(np.array_equal(n_min, n_max))
    shape = S.shape
    inf = np.full(shape, np.inf)
    neg = np.full(shape, -1)
    none = TierTime(inf, inf, inf, neg)

    def outer(o: str, size: Any, group: Any, alg: str | None = algo) -> TierTime:
        return none if scale_out is None else collective_time(o, size, group, scale_out, alg)

    if op in _INNER_OUTER:
        before, o_op, after = _INNER_OUTER[op]
        if op == "all_reduce":
            # each domain's NICs carry 2 (d-1)/d S between them (ring over domains): S / n per NIC
            o_size = S / nmin_f
        else:
            # the least-filled domain sends (reduce-scatter) or receives (all-gather) the
            # S (1 - n/g) bytes that belong to other domains over its n NICs; the outer step of
            # size X moves (d-1)/d X per NIC, so X = S (g - n) d / (n g (d - 1)) (= S/n when full)
            o_size = S * (gf - nmin_f) * df / (nmin_f * gf * (df - 1.0))
        parts_up = [_slowest(p, S, n_min, n_max, same, scale_up, algo) for p in (before, after) if p]
        o = outer(o_op, o_size, df)
        up_t, up_l = _add(*parts_up)
        return up_t + o.time, up_l + o.latency, up_t, o.time, parts_up[0].algo, o.algo
    if op in ("broadcast", "reduce"):
        # (a) one NIC per domain carries the whole buffer: outer on S, inner on S
        inner_a = _slowest(op, S, n_min, n_max, same, scale_up, algo)
        out_a = outer(op, S, df)
        # (b) split over the domain's NICs (Thakur et al. 2005 long-message broadcast = scatter +
        #     all-gather, reduce = reduce-scatter + gather): scatter (broadcast) or reduce-scatter
        #     (reduce) inside, the outer step per rank on S / n, all-gather (broadcast) or gather
        #     (reduce) inside. Scatter and gather move (n-1)/n S through the root's port in the
        #     same steps as reduce-scatter and all-gather, and are costed as those.
        first = _slowest("reduce_scatter", S, n_min, n_max, same, scale_up, algo)
        last = _slowest("all_gather", S, n_min, n_max, same, scale_up, algo)
        out_b = outer(op, S / nmin_f, df)
        ta, la = _add(inner_a, out_a)
        up_b, upl_b = _add(first, last)
        tb, lb = up_b + out_b.time, upl_b + out_b.latency
        with np.errstate(invalid="ignore"):
            use_b = tb < ta
        return (np.where(use_b, tb, ta), np.where(use_b, lb, la), np.where(use_b, up_b, inner_a.time),
                np.where(use_b, out_b.time, out_a.time), np.where(use_b, first.algo, inner_a.algo),
                np.where(use_b, out_b.algo, out_a.algo))
    if op == "all_to_all":
        # in-domain part: an all-to-all among the n members of a domain, S n / g bytes per rank
        pu = _slowest("all_to_all", lambda n: S * n.astype(float) / gf, n_min, n_max, same, scale_up, algo)
        # every rank of the least-filled domain pushes S (g - n) / g bytes to other domains
        # through its own scale-out port in one direct step, concurrently with the in-domain part
        po = outer("send_recv", S * (gf - nmin_f) / gf, 2.0, "direct")
        return (np.maximum(pu.time, po.time), np.maximum(pu.latency, po.latency), pu.time, po.time, pu.algo,
                np.where(np.isfinite(po.time), ALGOS.index("direct"), -1))
    # send_recv: the slowest pair crosses domains
    o = outer("send_recv", S, 2.0)
    return o.time, o.latency, np.zeros(shape), o.time, neg, o.algo


def placed_collective(
    op: str,
    size_bytes: Any,
    group: Any,
    stride: Any,
    scale_up: TierParams,
    scale_out: TierParams | None,
    algo: str | None = None,
) -> PlacedTime:
    """Cost of ``op`` on ``group`` ranks spaced ``stride`` apart, over a scale-up and a scale-out tier.

    See the module docstring for the placement rule. ``algo`` forces the algorithm on every tier
    step (``inf`` where it is not valid). Without a scale-out tier, groups that leave the scale-up
    domain cost ``inf``. Each candidate is costed on its own path only (one domain, scale-out
    only, or hierarchical).
    """
    S = np.asarray(size_bytes, dtype=float)
    g = np.asarray(group, dtype=float)
    st = np.maximum(np.asarray(stride, dtype=float), 1.0)
    shape = np.broadcast_shapes(S.shape, g.shape, st.shape)
    S = np.broadcast_to(S, shape).reshape(-1)
    g = np.broadcast_to(g, shape).reshape(-1)
    st = np.broadcast_to(st, shape).reshape(-1)
    split = domain_split(g, st, scale_up.domain_size)
    inside, apart = split.inside, split.apart
    hier = ~(inside | apart)
    n = S.size

    time = np.empty(n)
    lat = np.empty(n)
    up_t = np.zeros(n)
    out_t = np.zeros(n)
    algo_up = np.full(n, -1, dtype=np.int64)
    algo_out = np.full(n, -1, dtype=np.int64)

    def take(mask: np.ndarray, *arrs: np.ndarray) -> list[np.ndarray]:
        return [a if mask.all() else a[mask] for a in arrs]

    if inside.any():
        s_, g_ = take(inside, S, g)
        r = collective_time(op, s_, g_, scale_up, algo)
        time[inside], lat[inside], up_t[inside], algo_up[inside] = r.time, r.latency, r.time, r.algo
    if apart.any():
        s_, g_ = take(apart, S, g)
        if scale_out is not None:
            r = collective_time(op, s_, g_, scale_out, algo)
        else:
            r = TierTime(np.full(s_.shape, np.inf), np.full(s_.shape, np.inf), np.full(s_.shape, np.inf),
                         np.full(s_.shape, -1))
        time[apart], lat[apart], out_t[apart], algo_out[apart] = r.time, r.latency, r.time, r.algo
    if hier.any():
        s_, g_, d_, nmin_, nmax_ = take(hier, S, g, split.domains, split.n_min, split.n_max)
        t, la, tu, to, au, ao = _hierarchical(op, s_, g_, d_, nmin_, nmax_, scale_up, scale_out, algo)
        if scale_out is not None and op != "send_recv":
            # every member also has its own scale-out port: the flat collective over scale-out is
            # valid too (it wins when a domain holds a single member, whose NIC carries the whole
            # cross-domain share anyway, so the in-domain steps only add time)
            f = collective_time(op, s_, g_, scale_out, algo)
            flat = f.time < t
            if flat.any():
                t, la = np.where(flat, f.time, t), np.where(flat, f.latency, la)
                tu, to = np.where(flat, 0.0, tu), np.where(flat, f.time, to)
                au, ao = np.where(flat, -1, au), np.where(flat, f.algo, ao)
        time[hier], lat[hier], up_t[hier], out_t[hier], algo_up[hier], algo_out[hier] = t, la, tu, to, au, ao

    with np.errstate(invalid="ignore"):
        bw = np.where(np.isfinite(time), time - lat, np.inf)
    tier = np.where(inside, 0, np.where(apart, 1, 2))
    return PlacedTime(
        time=time.reshape(shape),
        latency=lat.reshape(shape),
        bandwidth=bw.reshape(shape),
        scale_up_time=up_t.reshape(shape),
        scale_out_time=out_t.reshape(shape),
        tier=tier.reshape(shape),
        algo_up=algo_up.reshape(shape),
        algo_out=algo_out.reshape(shape),
        group_in=split.n_max.astype(float).reshape(shape),
        group_out=split.domains.astype(float).reshape(shape),
        group_in_min=split.n_min.astype(float).reshape(shape),
    )


def placed_collective_time(
    op: str,
    size_bytes: Any,
    group: Any,
    stride: Any,
    scale_up: TierParams,
    scale_out: TierParams | None,
    algo: str | None = None,
) -> np.ndarray:
    """Seconds for ``op`` placed as in ``placed_collective`` (the hot-path entry point for sweeps)."""
    return placed_collective(op, size_bytes, group, stride, scale_up, scale_out, algo).time


# ---------------------------------------------------------------------------------------------
# nccl-tests reporting
# ---------------------------------------------------------------------------------------------


def busbw_factor(op: str, group: Any) -> np.ndarray:
    """nccl-tests bus-bandwidth factor: busbw = algbw x factor (doc/PERFORMANCE.md).

    all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all (n-1)/n; broadcast, reduce,
    send_recv 1.
    """
    n = np.asarray(group, dtype=float)
    frac = (n - 1.0) / np.maximum(n, 1.0)
    if op == "all_reduce":
        return 2.0 * frac
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return frac
    if op in ("broadcast", "reduce", "send_recv"):
        return np.ones_like(n)
    raise ValueError(f"unknown op {op!r}")


def algbw(size_bytes: Any, time_s: Any) -> np.ndarray:
    """nccl-tests algorithm bandwidth S / t, B/s (0 where t is 0 or infinite)."""
    S = np.asarray(size_bytes, dtype=float)
    t = np.asarray(time_s, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where((t > 0) & np.isfinite(t), S / t, 0.0)
    return out


def busbw(op: str, size_bytes: Any, group: Any, time_s: Any) -> np.ndarray:
    """nccl-tests bus bandwidth, B/s."""
    return algbw(size_bytes, time_s) * busbw_factor(op, group)


def algo_label(index: int) -> str:
    return ALGOS[index] if 0 <= index < len(ALGOS) else "-"
