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

Placement (``placed_collective``): ranks are consecutive with ``stride`` between members.
``group * stride <= domain``: one scale-up domain. ``stride >= domain``: every member in a different
domain, scale-out only. Otherwise hierarchical (two-level): reduce-scatter inside the domain over
``g_in = domain // stride`` members, the cross-domain step over ``g_out = ceil(g / g_in)`` domains on
``S / g_in`` bytes over scale-out, then all-gather back (summed, not overlapped). All-to-all spills
``(g - g_in)/g`` of each rank's buffer over scale-out concurrently with the in-domain part
(time = the slower of the two).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

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


@dataclass(frozen=True)
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
        )


# ---------------------------------------------------------------------------------------------
# Single-tier costs
# ---------------------------------------------------------------------------------------------


def _torus_span(dims: tuple[int, ...], g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ring weight, ring latency steps per phase) for groups filling dims in order.

    The weight counts 1 for a dimension the group covers whole (a ring with its wraparound link)
    and 1/2 for one it covers in part (a line: one link per direction); see the module docstring.
    """
    w = np.zeros_like(g, dtype=float)
    steps = np.zeros_like(g, dtype=float)
    before = 1.0
    for d in dims:
        used = (g > before).astype(float)
        along = np.minimum(float(d), np.ceil(g / before))
        w += used * np.where(along >= d, 1.0, 0.5)
        steps += used * (along - 1.0)
        before *= d
    # A group larger than the torus is not on this tier; keep the formula finite.
    return np.maximum(w, 0.5), np.maximum(steps, 1.0)


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
        w, _ = _torus_span(tier.torus_dims, g)
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
                _, steps = _torus_span(tier.torus_dims, g)
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
    group_in: np.ndarray  # members per scale-up domain
    group_out: np.ndarray  # domains spanned


_INNER_OUTER = {
    # op -> (inner op before, outer op, inner op after); sizes: inner S, outer S / g_in
    "all_reduce": ("reduce_scatter", "all_reduce", "all_gather"),
    "reduce_scatter": ("reduce_scatter", "reduce_scatter", None),
    "all_gather": (None, "all_gather", "all_gather"),
    "broadcast": (None, "broadcast", "broadcast"),
    "reduce": ("reduce", "reduce", None),
}


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
    domain cost ``inf``. Broadcast/reduce across domains use the outer step on the full buffer.
    """
    S = np.asarray(size_bytes, dtype=float)
    g = np.asarray(group, dtype=float)
    st = np.maximum(np.asarray(stride, dtype=float), 1.0)
    S, g, st = np.broadcast_arrays(S, g, st)
    D = float(scale_up.domain_size)

    inside = g * st <= D
    apart = (st >= D) & ~inside
    g_in = np.where(inside, g, np.where(apart, 1.0, np.maximum(np.floor(D / st), 1.0)))
    g_in = np.minimum(g_in, g)
    g_out = np.where(inside, 1.0, np.ceil(g / g_in))

    up = collective_time(op, S, g, scale_up, algo)
    zeros = np.zeros(S.shape)
    inf = np.full(S.shape, np.inf)
    neg = np.full(S.shape, -1)
    if scale_out is not None:
        out = collective_time(op, S, g, scale_out, algo)
    else:
        out = TierTime(inf, inf, inf, neg)

    # hierarchical pieces
    if op in _INNER_OUTER:
        before, outer, after = _INNER_OUTER[op]
        outer_size = S / g_in if op in ("all_reduce", "reduce_scatter", "all_gather") else S
        parts_up = [collective_time(p, S, g_in, scale_up, algo) for p in (before, after) if p]
        if scale_out is not None:
            o = collective_time(outer, outer_size, g_out, scale_out, algo)
        else:
            o = TierTime(inf, inf, inf, neg)
        h_up_t = sum((p.time for p in parts_up), zeros)
        h_up_l = sum((p.latency for p in parts_up), zeros)
        h_algo_up = parts_up[0].algo
        h_t = h_up_t + o.time
        h_l = h_up_l + o.latency
        h_out_t, h_algo_out = o.time, o.algo
    elif op == "all_to_all":
        # in-domain part: a sub-all-to-all among g_in members with S * g_in / g bytes per rank
        pu = collective_time("all_to_all", S * g_in / g, g_in, scale_up, algo)
        spill = S * (g - g_in) / g  # bytes each rank sends to other domains
        if scale_out is not None:
            # every rank pushes its spill through its own scale-out port in one direct step
            po = collective_time("send_recv", spill, 2.0, scale_out, "direct")
        else:
            po = TierTime(inf, inf, inf, neg)
        h_up_t, h_out_t = pu.time, po.time
        h_t = np.maximum(pu.time, po.time)
        h_l = np.maximum(pu.latency, po.latency)
        h_algo_up, h_algo_out = pu.algo, np.where(np.isfinite(po.time), ALGOS.index("direct"), -1)
    else:  # send_recv: the slowest pair crosses domains
        h_up_t, h_out_t = zeros, out.time
        h_t, h_l = out.time, out.latency
        h_algo_up, h_algo_out = neg, out.algo

    tier = np.where(inside, 0, np.where(apart, 1, 2))
    time = np.where(inside, up.time, np.where(apart, out.time, h_t))
    lat = np.where(inside, up.latency, np.where(apart, out.latency, h_l))
    with np.errstate(invalid="ignore"):
        bw = np.where(np.isfinite(time), time - lat, np.inf)
    return PlacedTime(
        time=time,
        latency=lat,
        bandwidth=bw,
        scale_up_time=np.where(inside, up.time, np.where(apart, 0.0, h_up_t)),
        scale_out_time=np.where(inside, 0.0, np.where(apart, out.time, h_out_t)),
        tier=tier,
        algo_up=np.where(inside, up.algo, np.where(apart, -1, h_algo_up)),
        algo_out=np.where(inside, -1, np.where(apart, out.algo, h_algo_out)),
        group_in=g_in,
        group_out=g_out,
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
