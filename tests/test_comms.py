"""Collective cost model: hand-derived alpha-beta numbers, seed checks, placement cliff, properties."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mi400plan import comms
from mi400plan.comms import TierParams, busbw, busbw_factor, collective_time, placed_collective, usable_bandwidth

GB = 1e9


def tier(catalog, name, case="nominal"):
    return TierParams.from_fabric(catalog.get("fabrics", name).spec, case)


# --- seed 000: ring all-reduce wire floor -------------------------------------------------------


def test_seed000_ring_allreduce_32MB_vs_32MiB() -> None:
    t = TierParams.from_bandwidth(300 * GB, latency=0.0)  # 300 GB/s per direction, no latency
    # 32 MB (decimal): 2 x 7/8 x 32e6 B = 56e6 B; 56e6 / 300e9 s = 186.67 us
    floor_mb = 2 * 7 / 8 * 32e6 / 300e9
    assert floor_mb == pytest.approx(186.667e-6, rel=1e-4)
    # 4096 x 4096 bf16 = 4096 * 4096 * 2 B = 33,554,432 B = 32 MiB; 2 x 7/8 x 33,554,432 / 300e9 = 195.73 us
    mib = 4096 * 4096 * 2
    assert mib == 32 * 2**20
    floor_mib = 2 * 7 / 8 * mib / 300e9
    assert floor_mib == pytest.approx(195.734e-6, rel=1e-4)
    got = collective_time("all_reduce", [32e6, mib], 8, t, "ring").time
    assert got[0] == pytest.approx(186.667e-6, rel=1e-4)
    assert got[1] == pytest.approx(195.734e-6, rel=1e-4)
    # the best algorithm cannot beat the bandwidth floor either
    assert collective_time("all_reduce", 32e6, 8, t).time == pytest.approx(186.667e-6, rel=1e-4)


def test_ring_latency_term() -> None:
    t = TierParams.from_bandwidth(100 * GB, latency=2e-6)
    # ring all-reduce on 8: 2 x 7 steps x 2 us = 28 us + 2 x 7/8 x 1e6 / 1e11 = 17.5 us -> 45.5 us
    r = collective_time("all_reduce", 1e6, 8, t, "ring")
    assert r.latency == pytest.approx(28e-6)
    assert r.bandwidth == pytest.approx(17.5e-6)
    assert r.time == pytest.approx(45.5e-6)
    # recursive halving/doubling: 2 x log2(8) = 6 steps x 2 us = 12 us + same 17.5 us
    assert collective_time("all_reduce", 1e6, 8, t, "rhd").time == pytest.approx(29.5e-6)
    # not a power of two -> not valid
    assert np.isinf(collective_time("all_reduce", 1e6, 6, t, "rhd").time)
    # double binary tree: 2 x ceil(log2 8) = 6 steps (12 us) + 2 x 1e6 / 1e11 = 20 us -> 32 us
    assert collective_time("all_reduce", 1e6, 8, t, "tree").time == pytest.approx(32e-6)
    # direct two-shot: 2 steps (4 us) + 17.5 us
    assert collective_time("all_reduce", 1e6, 8, t, "direct").time == pytest.approx(21.5e-6)


# --- seed 004: all-to-all per-GPU bandwidth in an 8-GPU node --------------------------------------


def test_seed004_all_to_all_bandwidth_in_node(catalog) -> None:
    mi300 = tier(catalog, "xgmi-mi300", "peak")
    mi355 = tier(catalog, "xgmi-mi350", "peak")
    # direct all-to-all reaches all 7 peers at once: 7 x 64 = 448 GB/s, 7 x 76.8 = 537.6 GB/s per direction
    assert usable_bandwidth(mi300, "direct", 8) == pytest.approx(448 * GB)
    assert usable_bandwidth(mi355, "direct", 8) == pytest.approx(537.6 * GB)
    # timed: an all-to-all of S moves 7/8 S per GPU; S = 8 GB -> 7 GB / 448 GB/s = 15.625 ms (+1 step latency)
    t = collective_time("all_to_all", 8e9, 8, mi300)
    assert comms.ALGOS[int(t.algo)] == "direct"
    assert t.bandwidth == pytest.approx(7e9 / 448e9)
    # busbw = algbw x 7/8 = (8e9 / t) x 7/8 -> 448 GB/s at the bandwidth limit
    assert busbw("all_to_all", 8e9, 8, t.bandwidth) == pytest.approx(448 * GB)


def test_full_mesh_link_model(catalog) -> None:
    x = tier(catalog, "xgmi-mi300", "peak")
    # a group of 4 on the 8-GPU mesh reaches 3 peers over 3 links: 3 x 64 = 192 GB/s
    assert usable_bandwidth(x, "direct", 4) == pytest.approx(192 * GB)
    # a ring talks to one neighbour per step: one 64 GB/s link
    assert usable_bandwidth(x, "ring", 8) == pytest.approx(64 * GB)
    # so on the mesh direct all-reduce is 7x the ring's bandwidth: 2 x 7/8 x 1e9 / 64e9 vs / 448e9
    ring = collective_time("all_reduce", 1e9, 8, x, "ring")
    direct = collective_time("all_reduce", 1e9, 8, x, "direct")
    assert ring.bandwidth == pytest.approx(2 * 7 / 8 * 1e9 / 64e9)
    assert direct.bandwidth == pytest.approx(2 * 7 / 8 * 1e9 / 448e9)


def test_switched_gives_full_port(catalog) -> None:
    nv = tier(catalog, "nvlink4-hgx8", "peak")
    for algo in ("ring", "direct", "tree"):
        assert usable_bandwidth(nv, algo, 4) == pytest.approx(450 * GB)


def test_torus_per_dimension_rings(catalog) -> None:
    v6e = tier(catalog, "ici-v6e", "peak")
    # 400 GB/s per direction over 4 links (2D torus). A group inside one 16-chip row runs a
    # bidirectional ring on 2 of the 4 links: 200 GB/s; spanning both dimensions uses all 4: 400 GB/s.
    assert usable_bandwidth(v6e, "ring", 16) == pytest.approx(200 * GB)
    assert usable_bandwidth(v6e, "ring", 256) == pytest.approx(400 * GB)
    assert np.isnan(usable_bandwidth(v6e, "direct", 16))
    # full pod all-reduce: latency steps per phase = (16-1) + (16-1) = 30, two phases = 60 x 1 us
    r = collective_time("all_reduce", 1e9, 256, v6e, "ring")
    assert r.latency == pytest.approx(60e-6)
    assert r.bandwidth == pytest.approx(2 * 255 / 256 * 1e9 / 400e9)


def test_torus_group_shorter_than_a_dimension_is_a_line(catalog) -> None:
    """A group covering part of a torus dimension has no wraparound link: one link per direction.

    Fabrics without a slice list fill the dimensions in order (this is ici-v6e with its list removed).
    ici-v6e: 16 x 16, 400 GB/s per direction over 4 links = L = 100 GB/s per link per direction.
    4 GPUs in a row form a line 0-1-2-3. Bisection bound for an all-reduce of S: after it, 2 and 3
    need the sum of 0 and 1's data (S bytes) and vice versa, through the single 1-2 link each way:
    t >= S / L = 1e9 / 100e9 = 10 ms. A ring on the line gets L: 2 x 3/4 x 1e9 / 100e9 = 15 ms
    (>= 10 ms). At 2L (a bidirectional ring, which needs the wraparound) it would be 7.5 ms < 10 ms.
    """
    v6e = dataclasses.replace(tier(catalog, "ici-v6e", "peak"), torus_slices=())
    L = 100 * GB
    assert usable_bandwidth(v6e, "ring", 4) == pytest.approx(L)
    r = collective_time("all_reduce", 1e9, 4, v6e, "ring")
    assert r.bandwidth == pytest.approx(2 * 3 / 4 * 1e9 / 100e9)
    assert r.bandwidth >= 1e9 / L
    # all-gather on the same line: 2 and 3 need the shards of 0 and 1 (2 x S/4) over one link:
    # t >= 0.5e9 / 100e9 = 5 ms; the model gives 3/4 x 1e9 / 100e9 = 7.5 ms
    ag = collective_time("all_gather", 1e9, 4, v6e, "ring")
    assert ag.bandwidth == pytest.approx(3 / 4 * 1e9 / 100e9) and ag.bandwidth >= 0.5e9 / L
    # a whole row of 16 closes the ring: 2 links per direction = 200 GB/s (unchanged)
    assert usable_bandwidth(v6e, "ring", 16) == pytest.approx(2 * L)
    # 32 = a whole row (ring, weight 1) x 2 rows (a line, weight 1/2): 400 x (1 + 1/2) / 2 = 300 GB/s
    assert usable_bandwidth(v6e, "ring", 32) == pytest.approx(300 * GB)
    # ring steps are unchanged: a logical ring over 4 GPUs still takes 3 steps per phase
    assert collective_time("all_reduce", 1.0, 4, TierParams("t", "scale_up", "torus", 256, 400 * GB, 1e-6,
                                                            links=4, torus_dims=(16, 16))).latency == pytest.approx(6e-6)


def test_physical_ring_partial_group_is_a_line() -> None:
    # an 8-GPU bidirectional ring, 2 links of 50 GB/s per direction (P = 100 GB/s): all 8 close the
    # ring (2L = 100 GB/s); 4 of them form a line (L = 50 GB/s)
    t = TierParams("r", "scale_up", "ring", 8, 100 * GB, 0.0, links=2)
    assert usable_bandwidth(t, "ring", 8) == pytest.approx(100 * GB)
    assert usable_bandwidth(t, "ring", 4) == pytest.approx(50 * GB)


def test_oneshot_is_not_the_two_shot_direct_algorithm() -> None:
    assert comms.normalize_algo("oneshot") is None and comms.normalize_algo("one-shot") is None
    assert comms.normalize_algo("two-shot") == "direct"


def test_busbw_factors_follow_nccl_tests() -> None:
    # doc/PERFORMANCE.md: all-reduce 2(n-1)/n; all-gather, reduce-scatter, all-to-all (n-1)/n; others 1
    assert busbw_factor("all_reduce", 8) == pytest.approx(2 * 7 / 8)
    for op in ("all_gather", "reduce_scatter", "all_to_all"):
        assert busbw_factor(op, 8) == pytest.approx(7 / 8)
    for op in ("broadcast", "reduce", "send_recv"):
        assert busbw_factor(op, 8) == 1.0


def test_op_spellings() -> None:
    for a, b in [("allreduce", "all_reduce"), ("all-reduce", "all_reduce"), ("AllToAll", "all_to_all"),
                 ("all-to-all", "all_to_all"), ("reducescatter", "reduce_scatter"), ("allgather", "all_gather"),
                 ("send-recv", "send_recv"), ("sendrecv", "send_recv"), ("broadcast", "broadcast")]:
        assert comms.normalize_op(a) == b
    assert comms.normalize_op("allreduse") is None


# --- placement and the scale-out cliff ------------------------------------------------------------


def test_placement_tiers(catalog) -> None:
    up, out = tier(catalog, "xgmi-mi350"), tier(catalog, "pollara-400")
    r = placed_collective("all_reduce", 1e9, [8, 4, 16, 8, 8], [1, 2, 1, 8, 4], up, out)
    # 8x1 fits (8 <= 8); 4x2 fits; 16x1 spans 2 domains; stride 8 puts every member in its own domain;
    # 8 members at stride 4: 2 per domain across 4 domains -> hierarchical
    assert [comms.TIER_NAMES[i] for i in r.tier] == ["scale_up", "scale_up", "hierarchical", "scale_out", "hierarchical"]
    assert list(r.group_in) == [8, 4, 8, 1, 2]
    assert list(r.group_out) == [1, 1, 2, 8, 4]


def test_hierarchical_all_reduce_arithmetic(catalog) -> None:
    up, out = tier(catalog, "xgmi-mi350", "peak"), tier(catalog, "pollara-400", "peak")
    S = 8e9
    r = placed_collective("all_reduce", S, 72, 1, up, out)
    # reduce-scatter in the node (direct, 7 x 76.8 GB/s): 7/8 x 8e9 / 537.6e9 = 13.02 ms; all-gather the same;
    # cross-node all-reduce of S/8 = 1e9 B over 9 nodes at 50 GB/s: 2 x 8/9 x 1e9 / 50e9 = 35.56 ms
    rs = 7 / 8 * S / 537.6e9
    cross = 2 * 8 / 9 * (S / 8) / 50e9
    assert r.bandwidth == pytest.approx(2 * rs + cross, rel=1e-6)
    assert r.scale_out_time == pytest.approx(cross + 2 * 5e-6, rel=1e-6)


def test_seed002_nvl72_vs_nine_mi355x_nodes(catalog) -> None:
    """Seed 002: 'MI355X collectives at least 18x slower than GB200 NVL72' (900 GB/s vs 400 Gb/s = 50 GB/s).

    Wire peak (efficiency 1), large buffer so latency is negligible.
    """
    nvl = tier(catalog, "nvlink5-nvl72", "peak")
    mi, nic = tier(catalog, "xgmi-mi350", "peak"), tier(catalog, "pollara-400", "peak")
    S = 8e9
    # (a) the split-mask 0x7 all-reduce (seed 002's example): 9 ranks, one per 8-GPU node (stride 8).
    #     NVL72: 2 x 8/9 x S / 900e9; MI355X: 2 x 8/9 x S / 50e9 -> ratio 900 / 50 = 18.0
    a_nvl = placed_collective("all_reduce", S, 9, 8, nvl, None).time
    a_mi = placed_collective("all_reduce", S, 9, 8, mi, nic).time
    assert a_mi / a_nvl == pytest.approx(18.0, rel=0.01)
    # (b) all-to-all over all 72: NVL72 moves 71/72 S at 900 GB/s; MI355X spills 64/72 S over 50 GB/s
    #     ratio = (64/72 / 50) / (71/72 / 900) = 64 x 900 / (71 x 50) = 16.2
    b_nvl = placed_collective("all_to_all", S, 72, 1, nvl, None).time
    b_mi = placed_collective("all_to_all", S, 72, 1, mi, nic).time
    assert b_mi / b_nvl == pytest.approx(64 * 900 / (71 * 50), rel=0.01)
    assert b_mi / b_nvl >= 10  # an order of magnitude
    # (c) a contiguous 72-GPU all-reduce is hierarchical: each node's 8 NICs carry 1/8 of the buffer,
    #     so the gap is smaller than 18x:
    #     MI355X: 2 x 7/8 / 537.6e9 + 2 x 8/9 / 8 / 50e9 per byte; NVL72: 2 x 71/72 / 900e9 per byte
    c_nvl = placed_collective("all_reduce", S, 72, 1, nvl, None).time
    c_mi = placed_collective("all_reduce", S, 72, 1, mi, nic).time
    expect = (2 * 7 / 8 / 537.6e9 + 2 * 8 / 9 / 8 / 50e9) / (2 * 71 / 72 / 900e9)
    assert expect == pytest.approx(3.51, abs=0.01)
    assert c_mi / c_nvl == pytest.approx(expect, rel=0.01)


def test_missing_scale_out_is_inf(catalog) -> None:
    up = tier(catalog, "xgmi-mi350")
    assert np.isinf(placed_collective("all_reduce", 1e6, 16, 1, up, None).time)


def test_group_of_one_is_free(catalog) -> None:
    up = tier(catalog, "xgmi-mi350")
    assert collective_time("all_reduce", 1e9, 1, up).time == 0.0


def test_vectorised_over_candidates(catalog) -> None:
    up, out = tier(catalog, "helios-ualoe72"), tier(catalog, "vulcano-800x3")
    g = np.array([2, 8, 72, 144, 576] * 200)
    st_ = np.array([1, 1, 1, 1, 8] * 200)
    t = comms.placed_collective_time("all_reduce", 64e6, g, st_, up, out)
    assert t.shape == g.shape and np.all(np.isfinite(t)) and np.all(t > 0)
    single = [comms.placed_collective_time("all_reduce", 64e6, int(a), int(b), up, out) for a, b in zip(g[:5], st_[:5])]
    assert np.allclose(t[:5], single)


# --- properties -----------------------------------------------------------------------------------

FABRICS_UP = ["xgmi-mi300", "xgmi-mi350", "helios-ualoe72", "nvlink5-nvl72", "ici-v6e", "ifoe64"]
FABRICS_OUT = ["pollara-400", "vulcano-800x3", "ib-ndr-400"]


@settings(max_examples=150, deadline=None)
@given(
    op=st.sampled_from(comms.OPS),
    fab=st.sampled_from(FABRICS_UP),
    g=st.integers(2, 64),
    s1=st.floats(1.0, 1e10),
    s2=st.floats(1.0, 1e10),
    algo=st.sampled_from([None, *comms.ALGOS]),
)
def test_single_tier_properties(catalog, op, fab, g, s1, s2, algo) -> None:
    t = tier(catalog, fab)
    g = min(g, t.domain_size)
    lo, hi = sorted((s1, s2))
    a = collective_time(op, lo, g, t, algo)
    b = collective_time(op, hi, g, t, algo)
    if not np.isfinite(a.time):
        assert not np.isfinite(b.time)  # validity does not depend on size
        return
    assert a.time >= a.latency >= t.latency  # at least one message step
    assert b.time >= a.time  # non-decreasing in size
    # busbw never above the tier's achievable per-GPU bandwidth
    assert busbw(op, hi, g, b.time) <= t.effective_bw * (1 + 1e-9)


@settings(max_examples=150, deadline=None)
@given(
    op=st.sampled_from(comms.OPS),
    up=st.sampled_from(FABRICS_UP),
    out=st.sampled_from(FABRICS_OUT),
    g=st.integers(2, 600),
    stride=st.sampled_from([1, 2, 4, 8, 16, 72]),
    s1=st.floats(1.0, 1e10),
    s2=st.floats(1.0, 1e10),
)
def test_placed_properties(catalog, op, up, out, g, stride, s1, s2) -> None:
    tu, to = tier(catalog, up), tier(catalog, out)
    lo, hi = sorted((s1, s2))
    a = placed_collective(op, lo, g, stride, tu, to)
    b = placed_collective(op, hi, g, stride, tu, to)
    if not np.isfinite(a.time):  # e.g. all-to-all on a torus is not modelled
        return
    assert a.time >= a.latency > 0
    assert b.time >= a.time
    bus = busbw(op, hi, g, b.time)
    if op == "all_to_all" and int(b.tier) == 2:
        # in-domain and spill traffic use different ports at once
        assert bus <= (tu.effective_bw + to.effective_bw) * (1 + 1e-9)
    else:
        assert bus <= max(tu.effective_bw, to.effective_bw) * (1 + 1e-9)


# --- partly filled domains, strides that do not divide the domain -------------------------------------

MESH8 = TierParams("mesh8", "scale_up", "full_mesh", 8, 537.6 * GB, 0.0, links=7)  # 7 x 76.8 GB/s, no latency
NIC50 = TierParams.from_bandwidth(50 * GB, kind="scale_out")  # 400 Gb/s NIC per GPU
SW72 = TierParams("sw72", "scale_up", "switched", 72, 1800 * GB, 0.0)  # Helios-like: 72 GPUs, 1.8 TB/s
NIC300 = TierParams.from_bandwidth(300 * GB, kind="scale_out")  # 3 x 800 Gb/s per GPU


def _counts(g: int, stride: int, domain: int) -> list[int]:
    """Members per domain, by listing them: member k sits at GPU k x stride, domain = GPU // domain."""
    per: dict[int, int] = {}
    for k in range(g):
        per[(k * stride) // domain] = per.get((k * stride) // domain, 0) + 1
    return list(per.values())


@settings(max_examples=300, deadline=None)
@given(g=st.integers(1, 400), stride=st.integers(1, 200), domain=st.sampled_from([4, 8, 64, 72, 100, 128]))
def test_domain_split_matches_listing_the_members(g, stride, domain) -> None:
    counts = _counts(g, stride, domain)
    s = comms.domain_split(g, stride, domain)
    assert int(s.domains) == len(counts)
    assert int(s.n_min) == min(counts) and int(s.n_max) == max(counts)
    assert bool(s.inside) == (len(counts) == 1)
    assert bool(s.apart) == (len(counts) > 1 and stride >= domain)


def test_partly_filled_domain_all_reduce() -> None:
    """12 GPUs on 8-GPU full-mesh nodes: one node holds 8 members, the other 4 (S = 8 GB, no latency).

    Reduce-scatter inside: 8 members, direct over 7 links: 7/8 x 8e9 / 537.6e9 = 13.02 ms; 4 members
    reach 3 peers over 3 links of 76.8 GB/s: 3/4 x 8e9 / 230.4e9 = 26.04 ms -> the 4-member node bounds it.
    Across the 2 nodes: the 4-member node must exchange its partial sums (S each way) over its 4 NICs:
    an all-reduce of S/4 = 2e9 over 2 domains, 2 x 1/2 x 2e9 / 50e9 = 40 ms (bisection: 8e9 B each way
    over 4 x 50 GB/s is 40 ms, so this is exact). All-gather back: 26.04 ms. Total 92.08 ms.
    (Counting 8 members per domain, S/8 over the NICs, gave 2 x 13.02 + 20 = 46.04 ms: half the time.)
    """
    rs4 = 3 / 4 * 8e9 / (3 * 76.8e9)
    assert rs4 == pytest.approx(26.0417e-3, rel=1e-4)
    cross = 2 * (1 / 2) * (8e9 / 4) / 50e9
    assert cross == pytest.approx(40e-3)
    r = placed_collective("all_reduce", 8e9, 12, 1, MESH8, NIC50)
    assert comms.TIER_NAMES[int(r.tier)] == "hierarchical"
    assert (int(r.group_out), int(r.group_in), int(r.group_in_min)) == (2, 8, 4)
    assert float(r.time) == pytest.approx(2 * rs4 + cross, rel=1e-9)
    assert float(r.scale_out_time) == pytest.approx(cross, rel=1e-9)
    assert comms.ALGOS[int(r.algo_up)] == "direct"


def test_partly_filled_domain_reduce_scatter_and_all_to_all() -> None:
    """Same 8 + 4 split, S = 12 GB (the whole array / one rank's send buffer), no latency.

    reduce-scatter: inside, the 4-member node: 3/4 x 12e9 / 230.4e9 = 39.06 ms (8 members: 19.53 ms).
    Across: the 4-member node keeps 4/12 of the array and sends the other 8/12 x 12e9 = 8e9 B over its
    4 NICs: 2e9 B / 50e9 = 40 ms. Total 79.06 ms.
    all-to-all: each rank of the 4-member node sends (12-4)/12 x 12e9 = 8e9 B over its own NIC:
    8e9 / 50e9 = 160 ms, concurrently with the in-node part (13.02 ms), so 160 ms (was 4e9 B, 80 ms).
    """
    rs = placed_collective("reduce_scatter", 12e9, 12, 1, MESH8, NIC50)
    assert float(rs.time) == pytest.approx(3 / 4 * 12e9 / (3 * 76.8e9) + (8 / 12 * 12e9 / 4) / 50e9, rel=1e-9)
    ag = placed_collective("all_gather", 12e9, 12, 1, MESH8, NIC50)
    assert float(ag.time) == pytest.approx(float(rs.time), rel=1e-9)  # the mirror image
    a2a = placed_collective("all_to_all", 12e9, 12, 1, MESH8, NIC50)
    assert float(a2a.time) == pytest.approx(8 / 12 * 12e9 / 50e9, rel=1e-9)
    # full domains are unchanged: 16 = 8 + 8, S = 16e9: 7/8 x 16e9 / 537.6e9 + (8/16 x 16e9 / 8) / 50e9
    full = placed_collective("reduce_scatter", 16e9, 16, 1, MESH8, NIC50)
    assert float(full.time) == pytest.approx(7 / 8 * 16e9 / 537.6e9 + 1e9 / 50e9, rel=1e-9)


def test_stride_that_does_not_divide_the_domain() -> None:
    """72-GPU domains, stride 16 (16 does not divide 72).

    5 members sit at GPUs 0, 16, 32, 48, 64: all in the first domain, so scale-up only (the rule
    "group x stride <= domain" called 5 x 16 = 80 > 72 hierarchical).
    9 members: GPUs 0..64 (5) in domain 0, 80..128 (4) in domain 1: 2 domains of 5 and 4 (the old
    floor(72/16) = 4 per domain made it 3 domains). All-reduce of S = 36 GB on a 1.8 TB/s switch and
    300 GB/s NICs, no latency: reduce-scatter among 5 (the slower): 4/5 x 36e9 / 1.8e12 = 16 ms; across,
    the 4-member domain's NICs: 2 x 1/2 x (36e9 / 4) / 300e9 = 30 ms; all-gather 16 ms: 62 ms.
    """
    five = placed_collective("all_reduce", 36e9, 5, 16, SW72, NIC300)
    assert comms.TIER_NAMES[int(five.tier)] == "scale_up" and float(five.scale_out_time) == 0.0
    assert float(five.time) == pytest.approx(2 * 4 / 5 * 36e9 / 1800e9, rel=1e-9)
    nine = placed_collective("all_reduce", 36e9, 9, 16, SW72, NIC300)
    assert (int(nine.group_out), int(nine.group_in), int(nine.group_in_min)) == (2, 5, 4)
    assert float(nine.time) == pytest.approx(16e-3 + 30e-3 + 16e-3, rel=1e-9)


def test_single_member_domains_take_the_flat_scale_out_collective() -> None:
    """72 members at stride 64 on 72-GPU domains: 8 domains hold 2 members, 56 hold 1 (64 domains).

    A domain with one member has one NIC, which must carry that member's whole cross-domain share;
    reducing inside the 2-member domains first only adds time, so the flat ring over every member's
    NIC is the faster valid scheme: 2 x 71/72 x 8e9 / 300e9 = 52.59 ms.
    """
    counts = _counts(72, 64, 72)
    assert len(counts) == 64 and sorted(counts).count(2) == 8 and min(counts) == 1
    r = placed_collective("all_reduce", 8e9, 72, 64, SW72, NIC300)
    assert comms.TIER_NAMES[int(r.tier)] == "hierarchical" and int(r.algo_up) == -1
    assert float(r.time) == pytest.approx(2 * 71 / 72 * 8e9 / 300e9, rel=1e-9)


def test_hierarchical_broadcast_splits_over_the_domain_nics() -> None:
    """Broadcast of S = 8 GB to 16 GPUs on two 8-GPU full-mesh nodes with 50 GB/s NICs, no latency.

    (a) one NIC per node carries the whole buffer: across, a pipelined broadcast of S to the other node,
        8e9 / 50e9 = 160 ms; inside, the best broadcast of S over 8 (a double binary tree over 2 of the
        7 links, 8e9 / 153.6e9 = 52.08 ms): 212.08 ms (the former model).
    (b) scatter inside the root's node (as a reduce-scatter: 7/8 x 8e9 / 537.6e9 = 13.02 ms), each of the
        8 ranks broadcasts its 1 GB share to its peer in the other node (1e9 / 50e9 = 20 ms), all-gather
        inside (13.02 ms): 46.04 ms. The model takes the faster, (b). Reduce is the mirror image.
    """
    a = 8e9 / 50e9 + 8e9 / (2 * 76.8e9)
    b = 2 * 7 / 8 * 8e9 / 537.6e9 + 1e9 / 50e9
    assert a == pytest.approx(212.08e-3, rel=1e-4) and b == pytest.approx(46.04e-3, rel=1e-4)
    for op in ("broadcast", "reduce"):
        r = placed_collective(op, 8e9, 16, 1, MESH8, NIC50)
        assert float(r.time) == pytest.approx(b, rel=1e-9), op
        assert float(r.scale_out_time) == pytest.approx(20e-3, rel=1e-9), op
    # With 1 us per step inside and 5 us across, a 1 KB broadcast: (a) 5 us + 3 x 1 us (tree) = 8 us,
    # (b) 1 us + 5 us + 1 us = 7 us (scatter and all-gather are one direct step each on the mesh), and
    # the flat one-step broadcast over the 50 GB/s NICs (every member has one): 5 us + 15 x 1e3 / 50e9
    # = 5.3 us, the fastest.
    lat_up, lat_out = dataclasses.replace(MESH8, latency=1e-6), TierParams.from_bandwidth(50e9, 5e-6, kind="scale_out")
    small = placed_collective("broadcast", 1e3, 16, 1, lat_up, lat_out)
    assert float(small.time) == pytest.approx(5e-6 + 15 * 1e3 / 50e9, rel=1e-9)
    assert int(small.algo_up) == -1 and comms.ALGOS[int(small.algo_out)] == "direct"


# --- torus slice shapes ----------------------------------------------------------------------------


def test_tpu7x_64_chips_get_a_4x4x4_cube(catalog) -> None:
    """64 TPU7x chips are one 4x4x4 cube (Google allocates 4x4x4), a torus in all three dimensions.

    600 GB/s per direction over 6 links (L = 100 GB/s). Per-dimension rings, each whole with its
    wraparound: weight 3 of 3 -> 600 GB/s; latency steps per phase 3 + 3 + 3 = 9.
    Ring all-reduce of 1 GB at peak: 2 x 63/64 x 1e9 / 600e9 = 3.281 ms + 2 x 9 x 1 us.
    Bisection check: cutting the cube into two 4x4x2 halves cuts 16 x 2 = 32 links (the middle and the
    wraparound) of 100 GB/s each way; all-reduce needs >= S across: 1e9 / 3.2e12 = 0.31 ms <= 3.28 ms.
    Filling the 16 x 24 x 24 pod dimension by dimension instead made it 16 x 4: 1 + 1/2 -> 300 GB/s and
    15 + 3 = 18 steps.
    """
    t = tier(catalog, "ici-tpu7x", "peak")
    assert comms.torus_slice(t, 64) == ((4, 4, 4), (True, True, True), (4, 4, 4))
    assert usable_bandwidth(t, "ring", 64) == pytest.approx(600 * GB)
    r = collective_time("all_reduce", 1e9, 64, t, "ring")
    assert r.bandwidth == pytest.approx(2 * 63 / 64 * 1e9 / 600e9)
    assert r.latency == pytest.approx(2 * 9 * 1e-6)
    assert r.bandwidth >= 1e9 / (32 * 100e9)
    old = dataclasses.replace(t, torus_slices=())  # a fabric without a slice list keeps the old rule
    assert comms.torus_slice(old, 64)[0] == (16, 4, 1)
    assert usable_bandwidth(old, "ring", 64) == pytest.approx(300 * GB)
    assert collective_time("all_reduce", 1e9, 64, old, "ring").latency == pytest.approx(2 * 18 * 1e-6)


def test_tpu7x_smaller_and_unlisted_slices(catalog) -> None:
    """Below one cube the slices are meshes; an unlisted size fills the smallest listed slice.

    32 chips = 2x4x4, no wraparound: 3 lines, weight 3 x 1/2 = 1.5 -> 600 x 1.5 / 3 = 300 GB/s; steps 1+3+3 = 7.
    4 chips = 2x2x1: two lines of 2, weight 1 -> 200 GB/s = one 100 GB/s link in each of 2 dimensions.
      (Bisection: 2 links of 100 GB/s cross the middle each way, all-reduce >= 1e9 / 200e9 = 5 ms; the
      ring gives 2 x 3/4 x 1e9 / 200e9 = 7.5 ms.)
    48 chips = 4 x 4 x 3 of a 4x4x4 cube: two whole wrapped dimensions and a line: 2.5 -> 500 GB/s; steps 3+3+2 = 8.
    128 chips = 4x4x8, a torus: 600 GB/s; steps 3+3+7 = 13.
    """
    t = tier(catalog, "ici-tpu7x", "peak")
    cases = {32: (300, 7), 4: (200, 2), 48: (500, 8), 128: (600, 13)}
    for g, (gbs, steps) in cases.items():
        assert usable_bandwidth(t, "ring", g) == pytest.approx(gbs * GB), g
        assert collective_time("reduce_scatter", 1.0, g, t, "ring").latency == pytest.approx(steps * 1e-6), g
    assert comms.torus_slice(t, 48) == ((4, 4, 3), (True, True, False), (4, 4, 4))
    assert 2 * 3 / 4 * 1e9 / (200 * GB) >= 1e9 / (2 * 100 * GB)


def test_v6e_only_the_pod_has_wraparound(catalog) -> None:
    """TPU v6e slices 2x2 .. 16x16; only the 256-chip pod is documented as a (2D) torus.

    400 GB/s over 4 links, L = 100 GB/s. 256 = 16x16 torus: weight 2 -> 400 GB/s.
    128 = 8x16 and 16 = 4x4: two lines, weight 1 -> 200 GB/s; steps 7 + 15 = 22 and 3 + 3 = 6.
    """
    t = tier(catalog, "ici-v6e", "peak")
    assert comms.torus_slice(t, 256)[:2] == ((16, 16), (True, True))
    assert comms.torus_slice(t, 128)[:2] == ((8, 16), (False, False))
    assert usable_bandwidth(t, "ring", 256) == pytest.approx(400 * GB)
    assert usable_bandwidth(t, "ring", 128) == pytest.approx(200 * GB)
    assert collective_time("all_gather", 1.0, 128, t, "ring").latency == pytest.approx(22e-6)
    assert collective_time("all_gather", 1.0, 16, t, "ring").latency == pytest.approx(6e-6)
    assert math.prod(comms.torus_slice(t, 64)[0]) == 64
