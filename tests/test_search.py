"""The layout search: brute-force agreement, invariants, rejection reasons, placement across racks."""

from __future__ import annotations

import itertools

import numpy as np
import pytest


def _wl(catalog, model: str, seq: int, batch: int, precision: str = "bf16"):
    from mi400plan.params import count_params
    from mi400plan.search import Workload
    from mi400plan.specs.layout import train_recipe

    spec = catalog.get("models", model).spec
    return Workload(spec, count_params(spec), train_recipe("megatron", precision=precision), seq, batch)


def _hw(catalog, sku: str, precision: str = "bf16"):
    from mi400plan.hardware import build_sku

    return build_sku(catalog, sku, precision).hw


def _first_rule_broken(lay: dict, model, seq: int, batch: int, world: int) -> str | None:
    """The rules of ``search.RULES`` written out again, independently of the search code, in order."""
    import math

    tp, pp, vpp, cp, ep, etp = (lay[k] for k in ("tp", "pp", "vpp", "cp", "ep", "etp"))
    inner = tp * cp
    replica = inner * pp * (math.lcm(inner, ep * etp) // inner)
    if world % replica:
        return "world-replica"
    a = model.attention
    if a.num_heads % tp or (a.kind == "gqa" and a.kv_heads % tp):
        return "tp-heads"
    if model.num_layers % (pp * vpp):
        return "pp-layers"
    if vpp > 1 and pp < 2:
        return "vpp-needs-pp"
    if cp > 1 and seq % (2 * cp):
        return "cp-seq"
    if model.moe is not None and model.moe.num_experts % ep:
        return "ep-experts"
    if model.moe is not None and model.moe.expert_ffn_dim % etp:
        return "etp-ffn"
    if model.moe is not None and tp > 1 and not lay["sp"]:
        return "moe-tp-needs-sp"
    if lay["sp"] and tp == 1:
        return "sp-needs-tp"
    dp = world // (tp * cp * pp)
    if batch % (dp * lay["micro_batch"]):
        return "batch-dp-mb"
    if vpp > 1 and (batch // (dp * lay["micro_batch"])) % pp:
        return "vpp-microbatches"
    return None


@pytest.mark.slow  # brute force over every layout: 5-10 s
@pytest.mark.parametrize(
    "model,seq,batch,world,dims,inner",
    [
        # dense, with CP
        ("llama3.1-8b", 4096, 64, 16, dict(tp=(1, 2, 4, 8), pp=(1, 2, 4), vpp=(1, 2), cp=(1, 2), ep=(1,), etp=(1,)),
         dict(zero=(0, 1, 3), micro_batch=(1, 2), recompute=(0, 2), sequence_parallel=(0, 1))),
        # MoE: EP folded over DP x CP, expert-TP, CP, the MoE SP rule
        ("mixtral-8x7b", 4096, 48, 16, dict(tp=(1, 2), pp=(1, 2), vpp=(1, 2), cp=(1, 2), ep=(1, 2, 8), etp=(1, 2)),
         dict(zero=(1, 3), micro_batch=(1, 2), recompute=(0, 1), sequence_parallel=(0, 1))),
    ],
    ids=["dense-cp", "moe-ep-etp-cp"],
)
def test_best_equals_brute_force_minimum(catalog, model, seq, batch, world, dims, inner) -> None:
    """An explicit Python loop over every layout finds the same best step time, the same number of
    valid layouts and the same rejection counts (each candidate under the first rule it breaks,
    rules re-implemented above), as the vectorised search."""
    from mi400plan.search import SearchOptions, evaluate_one, iter_rows, search

    wl = _wl(catalog, model, seq, batch)
    hw = _hw(catalog, "mi300x")
    opts = SearchOptions(**dims, **inner)
    res = search(wl, hw, world, opts, top_k=3)
    top = list(iter_rows(res.top))

    rejected = {r: 0 for r in res.rejected}
    steps = []
    n_all = 0
    keys = ("tp", "pp", "vpp", "cp", "ep", "etp", "zero", "micro_batch", "recompute", "sp")
    for vals in itertools.product(*dims.values(), *inner.values()):
        n_all += 1
        lay = dict(zip(keys, vals))
        rule = _first_rule_broken(lay, wl.model, seq, batch, world)
        if rule is not None:
            rejected[rule] += 1
            continue
        r = evaluate_one(lay, wl, hw, world, opts)
        if not r["fits"]:
            rejected["memory"] += 1
            continue
        steps.append(r["step"])
    assert n_all == res.evaluated
    assert len(steps) == res.valid > 3
    assert rejected == res.rejected
    assert sum(rejected.values()) + res.valid == n_all
    steps.sort()
    assert [t["step"] for t in top] == pytest.approx(steps[:3], rel=1e-12)
    if model == "mixtral-8x7b":  # the MoE case really exercises EP, ETP and CP in the valid set
        assert res.rejected["moe-tp-needs-sp"] > 0 and res.rejected["world-replica"] > 0


@pytest.mark.parametrize(
    "model,sku,gpus,seq,batch,precision",
    [
        ("llama3.1-70b", "mi355x", 1024, 8192, 512, "bf16"),
        ("mixtral-8x7b", "h100", 256, 4096, 1024, "bf16"),
        ("llama3.1-8b", "mi300x", 64, 8192, 256, "fp8"),
    ],
)
def test_mfu_at_most_one_and_step_at_least_compute(catalog, model, sku, gpus, seq, batch, precision) -> None:
    from mi400plan.search import iter_rows, metrics, model_terms, search

    wl = _wl(catalog, model, seq, batch, precision)
    hw = _hw(catalog, sku, precision)
    res = search(wl, hw, gpus, top_k=50)
    assert res.valid > 0
    terms = model_terms(wl.model, wl.counts, seq, wl.recipe)
    breakdown = ("t_compute", "t_attention", "t_gemm_overhead", "t_memory_bound", "t_tp", "t_cp", "t_ep", "t_pp", "t_bubble", "t_dp", "t_optimizer")
    for r in iter_rows(res.top):
        assert r["step"] >= r["compute_only"] > 0
        assert sum(r[k] for k in breakdown) == pytest.approx(r["step"], rel=1e-9)
        met = metrics(r["step"], wl, hw, gpus, terms, r["flops_hw_per_token"])
        assert 0 < met["mfu"] <= met["hfu"] <= 1.0
        # MFU can never beat the calibrated matmul efficiency (compute alone runs at that rate)
        assert met["mfu"] <= hw.matmul_eff + 1e-12


def test_counts_add_up(catalog) -> None:
    from mi400plan.search import search

    res = search(_wl(catalog, "llama3.1-70b", 8192, 512), _hw(catalog, "mi355x"), 1024, top_k=3)
    assert res.evaluated == res.valid + sum(res.rejected.values())


def test_world_not_multiple_of_replica_is_rejected(catalog) -> None:
    """Seed 004: a 384-GPU replica does not tile 65,536 GPUs (65,536 / 384 = 170.67). moe-2t has
    96 layers, so the replica itself (TP 1 x CP 8 x PP 48, EP 8 inside the CP x TP block) is valid
    and only the tiling rule rejects it."""
    from mi400plan.search import SearchOptions, layout_violations, search

    assert 65536 % 384 == 256  # 170 x 384 = 65,280; 65,536 - 65,280 = 256 GPUs left over
    wl = _wl(catalog, "moe-2t", 4096, 32768)
    # TP 1 x CP 8 x PP 48 = 384 GPUs per replica
    lay = dict(tp=1, pp=48, vpp=1, cp=8, ep=8, etp=1, zero=1, micro_batch=1, recompute=0, sp=0)
    assert layout_violations(lay, wl, 65536)[0] == "world-replica"
    assert layout_violations(lay, wl, 768) == []  # 768 = 2 x 384: the whitepaper's cluster
    res = search(wl, _hw(catalog, "mi300x"), 65536, SearchOptions(tp=(1,), pp=(48,), cp=(8,), ep=(8,), etp=(1,)))
    assert res.valid == 0
    assert res.rejected["world-replica"] == res.evaluated


def test_helios_keeps_tp_and_pp_in_the_rack(catalog) -> None:
    """GPT-3 175B (FP8, 2,048-token sequences, 4,608 of them) on 4,608 MI455X = 64 Helios racks
    (72-GPU UALink domain), TP 8 or 16 and PP 8 or 16. TP 8 x PP 8 = 64 GPUs fits a rack; TP 8 x PP 16
    = 128 does not, so that pipeline crosses racks and prices its hops at scale-out rates
    (``comms.placed_collective``: a send/recv group is as slow as its slowest pair).

    Seed 000's reasoning (every pipeline transfer on the critical path, Megatron-LM 2021: no
    ``overlap_p2p_comm``): every one of the ``m x 2 x vpp`` transfers crosses at scale-out prices,
    all five best layouts keep TP and PP inside the rack and the crossing layout is several percent
    slower.

    With Megatron-LM's default ``overlap_p2p_comm`` (``overlap_pp``) the interleaved schedule hides
    every steady-state send behind the next chunk's compute: a chunk-forward (0.2-0.8 ms here) is
    longer than one transfer (12.6 MB at micro-batch 2: ~52 us across racks, ~9 us on UALink). What
    the rack crossing still costs is pipeline fill and drain: ``2 (pp - 1)`` transfers on the critical
    path, each at the scale-out price instead of the UALink one. That is about what the deeper
    pipeline saves (half the parameters per GPU, so half the fp32 gradient reduce-scatter and
    parameter all-gather, and a smaller micro-batch with a shorter bubble). What separates them is
    the LM head: it runs on the last stage (``memory.stage_imbalance``), and the pipeline runs at
    that stage's pace. Its 6 V h = 3.71 GFLOP a token is 0.33 of a layer's 6 x 12 h^2 + 12 s h =
    11.17 GFLOP, and it runs in BF16 (``Hardware.head_gemm_sku``), a quarter of MI455X's FP8 peak:
    at the GEMM rates alone 0.33 x (20,132.7 x 0.468) / (5,033.2 x 0.519) = 1.20 layers of time, a
    little less as the layers also cast their FP8 inputs (``gemm.fp8_cast_seconds``): about 1.04. The
    last stage then takes (12 + 1.04) / ((96 + 1.04) / 8) = 7.5 % longer than the mean stage at PP 8
    and 16 % at PP 16: the in-rack layout is about 4 % faster. (The fill/drain count is an upper bound on the crossing
    cost: only the hops between racks are really scale-out, but the comm model prices the whole group
    at its slowest pair.)"""
    from mi400plan.comms import placed_collective_time
    from mi400plan.search import SearchOptions, iter_rows, search, tier_of

    wl = _wl(catalog, "gpt3-175b", 2048, 4608, "fp8")
    hw = _hw(catalog, "mi455x", "fp8")
    assert hw.domain == 72 and wl.model.hidden_size == 12288

    def p2p(r) -> float:
        """One pipeline transfer: micro-batch x 2,048 tokens x 12,288 x 2 bytes, split over TP 8."""
        size = r["micro_batch"] * 2048 * 12288 * 2 / r["tp"]
        return float(placed_collective_time("send_recv", size, r["pp"], r["tp"] * r["cp"] * r["fold"],
                                            hw.scale_up, hw.scale_out))

    def span(r) -> int:
        return r["tp"] * r["pp"] * r["cp"] * r["fold"]

    # Megatron-LM's default: interleaved p2p overlapped.
    # VPP pinned to the values this comparison was worked out for (96 layers also admit VPP 12 at PP 8),
    # with Megatron-Core's default even split (a custom layout admits VPP 5 and 8 at PP 8 too).
    vpps = (1, 2, 3, 4, 5, 6, 8)
    res = search(wl, hw, 4608, SearchOptions(tp=(8, 16), pp=(8, 16), cp=(1,), vpp=vpps, uneven_pp=False), top_k=10)
    rows = list(iter_rows(res.top))
    best_in = next(r for r in rows if span(r) <= 72)
    assert str(tier_of(best_in["pp"], best_in["tp"], 72)) == "scale_up"
    assert res.best_crossing is not None
    cross = next(iter_rows(res.best_crossing))
    assert cross["tp"] * cross["pp"] > 72
    assert str(tier_of(cross["pp"], cross["tp"], 72)) == "hierarchical"
    assert best_in["step"] == rows[0]["step"]
    assert 0.03 < cross["step"] / best_in["step"] - 1.0 < 0.06
    # The head's share (docstring). Its time in layers, x, from PP 8's ratio r = (12 + x) / ((96 + x) / 8),
    # is the BF16 head's FLOPs at BF16 speed over a layer's at FP8 speed (within the GEMM shapes' fill),
    # and the same x gives PP 16's ratio; each step's compute scales by its ratio.
    W = 6 * 12 * 12288**2 + 12 * 2048 * 12288  # one layer, FLOP per token (fwd + bwd)
    H = 6 * 50257 * 12288  # the LM head
    assert W == 11_173_625_856 and H == 3_705_348_096
    twin = next(r for r in rows if span(r) <= 72 and (r["micro_batch"], r["vpp"], r["zero"]) ==
                (cross["micro_batch"], cross["vpp"], cross["zero"]))
    r8 = twin["stage_imbalance"]
    x = 12 * (r8 - 1) / (1 - r8 / 8)
    assert H / W < x < H / W * (20132.7e12 * 0.468) / (5033.2e12 * 0.519)
    assert cross["stage_imbalance"] == pytest.approx((6 + x) / ((96 + x) / 16), rel=1e-9)
    assert cross["t_compute"] / twin["t_compute"] == pytest.approx(cross["stage_imbalance"] / r8, rel=1e-9)
    # the deeper pipeline halves the parameters per GPU, so it moves less DP traffic
    assert cross["pp"] == 2 * best_in["pp"] and cross["t_dp"] < best_in["t_dp"]
    # Both run virtual stages; their exposed pipeline time is exactly the fill/drain transfers.
    assert best_in["vpp"] > 1 and cross["vpp"] > 1
    assert best_in["t_pp"] == pytest.approx(2 * (best_in["pp"] - 1) * p2p(best_in), rel=1e-9)
    assert cross["t_pp"] == pytest.approx(2 * (cross["pp"] - 1) * p2p(cross), rel=1e-9)
    # ... and a transfer that leaves the rack costs more than the same bytes on UALink.
    same_in_rack = float(placed_collective_time("send_recv", cross["micro_batch"] * 2048 * 12288 * 2 / 8, 8, 8,
                                                hw.scale_up, hw.scale_out))
    assert p2p(cross) > same_in_rack
    assert cross["t_pp"] > 2 * (cross["pp"] - 1) * same_in_rack

    # Megatron-LM 2021 (no p2p overlap): every transfer exposed; the rack costs several percent.
    off = search(wl, hw, 4608, SearchOptions(tp=(8, 16), pp=(8, 16), cp=(1,), vpp=vpps, overlap_pp=False,
                                                   uneven_pp=False), top_k=5)
    rows = list(iter_rows(off.top))
    assert len(rows) == 5
    for r in rows:
        assert r["tp"] * r["pp"] * r["cp"] * r["fold"] <= 72
        assert str(tier_of(r["pp"], r["tp"], 72)) == "scale_up"
    cross_off = next(iter_rows(off.best_crossing))
    assert cross_off["step"] > 1.05 * rows[0]["step"]
    # per pipeline transfer (m x 2 x vpp of them per step), the rack-crossing pipeline pays scale-out prices
    per_xfer_best = rows[0]["t_pp"] / (rows[0]["m"] * 2 * rows[0]["vpp"])
    per_xfer_cross = cross_off["t_pp"] / (cross_off["m"] * 2 * cross_off["vpp"])
    assert per_xfer_best == pytest.approx(p2p(rows[0]), rel=1e-9)
    assert per_xfer_cross == pytest.approx(p2p(cross_off), rel=1e-9)
    assert per_xfer_cross > per_xfer_best


def test_tp_wider_than_domain_pays_scale_out(catalog) -> None:
    """On MI300X (8-GPU xGMI domain) TP 16 spans two nodes: its collectives cost more than TP 8's."""
    from mi400plan.search import evaluate_one

    wl = _wl(catalog, "llama3.1-70b", 4096, 256)
    hw = _hw(catalog, "mi300x")
    base = dict(pp=1, vpp=1, cp=1, ep=1, etp=1, zero=1, micro_batch=1, recompute=2, sp=1)
    t8 = evaluate_one(dict(base, tp=8), wl, hw, 256)
    t16 = evaluate_one(dict(base, tp=16), wl, hw, 256)
    # same bytes per collective at TP 8 and 16 (full activation), but TP 16 leaves the xGMI domain
    assert t16["t_tp"] > 2 * t8["t_tp"]


@pytest.mark.slow  # searches up to 65,536 GPUs: about a minute
def test_whitepaper_setting_scales_near_linearly(catalog) -> None:
    """Seed 004's setting: moe-2t (2.011T, 96 layers, hidden 8,192), 32,768 x 4,096 = 2^27 = 128Mi
    tokens per step, MI300X nodes of 8 (xGMI domain 8) with one 400 Gb/s NIC per GPU (50 GB/s per
    direction), FP8, all-to-all overlapped with compute (the whitepaper uses DeepEP-like overlap:
    ``overlap_ep``), interleaved-pipeline p2p overlapped (Megatron-LM's default, ``overlap_pp``).

    Scaling efficiency = tokens/s per GPU relative to 768 GPUs (the ``sweep`` scaling view's
    definition: the smallest size; threshold ``SCALING_THRESHOLD`` = 0.90). The arithmetic below runs
    at AMD's max-achievable FP8 kernel ceiling for MI300X (1,273 / 2,614.9 = 0.487 of peak, the top of
    the profile's range); at the profile's nominal ceiling, fitted on AMD's MI325X training run (0.379),
    each step computes longer (checked at the end; the README's table). What the arithmetic says:

    * 768 GPUs (the baseline) cannot run virtual stages. 768 = 3 x 256: a power-of-two replica leaves
      DP with a factor 3 that does not divide 32,768 sequences (``batch-dp-mb``), and TP, CP and EP
      are powers of two (64 heads, 256 experts), so PP carries the factor 3 (the best has PP 12).
      Micro-batches per replica (32,768 / (DP x micro-batch)) are then a power of two, never a
      multiple of PP, so the interleaved schedule is out (``vpp-microbatches``). The pipeline runs
      plain 1F1B and all ``m x 2`` transfers are exposed: 1.5 s, 0.9 % of the step.
    * 1,024..32,768 GPUs: >= 0.94, on the interleaved schedule (PP 16, VPP 6): only the 2 (PP - 1)
      fill/drain transfers stay exposed. The LM head runs on the last stage (``memory.stage_imbalance``),
      in BF16 (``Hardware.head_gemm_sku``), so that stage takes 1.27-1.35x the mean stage's time.
    * No best layout waits on the host. With EP 8 each GPU holds 32 of the 256 experts, and at one
      sequence a micro-batch issuing their GEMMs (219 us each, the profile's ``expert_host_us``) takes
      the host about four times as long as the GPU takes to run them (pinned below), so the best
      layouts run EP 32 (8 local experts) or two-sequence micro-batches.
    * The mechanism of the DP cost, on the whitepaper-like PP 32 replica (TP 1 x CP 4 x EP 8 inside a
      node, PP 32 x VPP 3 across nodes) pinned at 16,384 GPUs with one-sequence micro-batches: the
      per-step DP traffic of a GPU does not depend on how many replicas there are: it reduce-scatters
      its gradients and all-gathers its parameters once per step, each about (d-1)/d of its shard over
      its own NIC. Gradients travel in the dtype of the ``megatron`` recipe's fp32 main-grad buffer (4
      bytes; Megatron-LM reduces in fp32 for BF16/FP8 training), parameters in 16 bits. With TP 1 x CP
      4 x PP 32 x EP 8 the GPU holds 26.7B/32 non-expert + 1,984.7B/(8 x 32) expert parameters =
      8.59B. The expert part (7.75B) is reduced over d = 64 replicas at 50 GB/s x 0.9: 0.678 s for the
      fp32 reduce-scatter, 0.339 s for the 16-bit all-gather. The non-expert part (0.83B) is reduced
      over DP x CP: first the 8 GPUs of a node (CP 4 x 2 folded DP ranks) over xGMI, then 64 nodes on
      1/8 of it: 0.026 s both ways. With VPP 3 each model chunk's collective starts when its last
      backward (forward) runs, so it hides behind (3-1) x 32 + 1 = 65 chunk-times of one micro-batch's
      GPU compute (``chunked_exposure``): 0.65 s. About 0.39 s stays exposed.
    * The same replica is host-bound: PP 32 x VPP 3 = 96 chunks of one layer, the first three dense, so
      the busiest stage holds 3 MoE layers, whose 32 local experts' GEMMs take the host 3 x 2 x 32 x 3
      (forward, data and weight gradients) x 219 us = 0.1261 s a micro-batch; every one of the 256
      micro-batches and the (PP - 1) / VPP = 31/3 slots of the bubble run at that pace, about 4x the
      best 16,384-GPU step.
    * 768 = 2 x 384: the whitepaper's own replica (EP 8 x CP 8 x PP 48, DP 2) is expressible; its
      best micro-batch escapes the host (8 sequences with full recomputation), and it is about 1.4x as
      slow as the best 768-GPU layout: with two layers a stage, the stage that also runs the LM head
      takes 1.8x the mean stage's time; 65,536 / 384 is not whole (see the rejection test), so at
      65,536 GPUs the tool uses power-of-two replicas.

    Against seed 004's Table 1 (1.0 up to 32,768 GPUs, 0.9 at 65,536): the table was extrapolated from 2
    replicas on 768 GPUs by shrinking the local batch, so its DP traffic is that of a 2-way reduction
    ((2-1)/2 of the buffer per GPU) rather than one over dozens to hundreds of replicas ((d-1)/d, about
    twice the bytes); here each added replica keeps the full per-step DP cost while its share of the
    batch (and so its compute per step) shrinks, and the efficiency falls from 1.04 at 1,024 GPUs to
    0.94 at 32,768 (0.92 at 65,536 at the nominal ceiling).
    """
    from mi400plan.api.sweep import SCALING_THRESHOLD
    from mi400plan.comms import placed_collective_time
    from mi400plan.search import SearchOptions, iter_rows, layout_violations, search

    assert 32768 * 4096 == 2**27
    from dataclasses import replace

    wl = _wl(catalog, "moe-2t", 4096, 32768, "fp8")
    nominal = _hw(catalog, "mi300x", "fp8")
    kernel = catalog.get("accelerators", "mi300x").spec.efficiency.matmul_fp8.high
    assert kernel == pytest.approx(1273 / 2614.9, abs=0.001)
    hw = replace(nominal, matmul_eff=kernel)
    assert hw.domain == 8 and wl.model.hidden_size == 8192
    assert hw.scale_out.bw_per_dir == pytest.approx(400e9 / 8)  # 400 Gb/s = 50 GB/s per direction
    assert hw.expert_host_s == pytest.approx(219e-6)
    opts = SearchOptions(overlap_ep=True)
    assert opts.overlap_pp  # Megatron-LM's default
    sizes = (768, 1024, 2048, 4096, 8192, 16384, 32768)
    best = {g: next(iter_rows(search(wl, hw, g, opts, top_k=1).top)) for g in sizes}
    per_gpu = {g: 2**27 / best[g]["step"] / g for g in sizes}
    eff = {g: per_gpu[g] / per_gpu[768] for g in sizes}
    assert min(eff.values()) >= 0.94 > SCALING_THRESHOLD, eff
    assert eff[1024] > 1.0 > eff[32768]
    assert all(best[g]["t_host"] == 0.0 for g in sizes)
    assert all(best[g]["ep"] == 32 or best[g]["micro_batch"] >= 2 for g in sizes)

    # The 768 baseline: no virtual stages possible, every pipeline transfer exposed.
    base = dict(tp=1, etp=1, ep=8, zero=1, micro_batch=1, recompute=0, sp=0)
    assert layout_violations(dict(base, pp=32, vpp=1, cp=4), wl, 768) == ["batch-dp-mb"]  # DP 6
    assert layout_violations(dict(base, pp=24, vpp=2, cp=8), wl, 768) == ["vpp-microbatches"]  # 8,192 % 24
    b = best[768]
    assert b["vpp"] == 1 and b["pp"] % 3 == 0

    def p2p(r) -> float:
        """One pipeline transfer: micro-batch x 4,096 / CP tokens x 8,192 x 2 bytes (TP 1)."""
        size = r["micro_batch"] * 4096 / r["cp"] * 8192 * 2
        return float(placed_collective_time("send_recv", size, r["pp"], r["tp"] * r["cp"] * r["fold"],
                                            hw.scale_up, hw.scale_out))

    assert b["t_pp"] == pytest.approx(b["m"] * 2 * p2p(b), rel=1e-9)
    assert b["t_pp"] / b["step"] > 0.005
    for g in sizes[1:]:
        r = best[g]
        assert r["vpp"] > 1 and r["pp"] <= 16 and r["stage_imbalance"] > 1.1, g
        assert r["t_pp"] == pytest.approx(2 * (r["pp"] - 1) * p2p(r), rel=1e-9)  # fill/drain only

    # The mechanism at 16,384 GPUs on the PP 32 replica, one sequence a micro-batch: a fixed per-step DP
    # cost, hidden behind 65 chunk-times, and the host's pace (docstring).
    pinned = SearchOptions(overlap_ep=True, tp=(1,), pp=(32,), vpp=(3,), ep=(8,), etp=(1,), cp=(4,), micro_batch=(1,))
    r = next(iter_rows(search(wl, hw, 16384, pinned, top_k=1).top))
    assert r["step"] > best[16384]["step"]
    assert (r["zero"], r["micro_batch"]) == (1, 1) and 16384 // 256 == 64
    assert r["m"] == 256  # 32,768 sequences / (128 DP ranks x micro-batch 1)
    assert (r["cp"], r["fold"]) == (4, 2)  # CP 4 x 2 folded DP ranks = the 8 GPUs of a node (EP 8)
    assert wl.recipe.grad_bytes == 4 and wl.recipe.param_bytes == 2
    counts = wl.counts
    experts = sum(lp.routed_experts for lp in counts.layers)
    dense_gpu, expert_gpu = (counts.total - experts) / 32, experts / (8 * 32)
    assert (dense_gpu + expert_gpu) / 1e9 == pytest.approx(8.59, abs=0.01)
    # Experts: reduced over the expert-data-parallel group, one rank per replica: 64 ranks across
    # nodes, recursive halving/doubling (log2 64 = 6 steps of 3 us) on 63/64 of the buffer at
    # 50 GB/s x 0.9. Non-expert weights: over DP x CP = CP 4 x fold 2 = 8 ranks inside the node
    # first (xGMI direct: 7 links x 64 GB/s x 0.8, one 1 us step), then 64 nodes on 1/8 of it.
    ib = 50e9 * 0.9

    def one_way(nbytes: float) -> float:
        """Reduce-scatter (or all-gather) of ``nbytes`` per parameter."""
        exp = 6 * 3e-6 + 63 / 64 * expert_gpu * nbytes / ib
        dense = (1e-6 + 7 / 8 * dense_gpu * nbytes / (7 * 64e9 * 0.8)) + (6 * 3e-6 + 63 / 64 * dense_gpu * nbytes / 8 / ib)
        return exp + dense

    rs, ag = one_way(4), one_way(2)  # fp32 gradients, 16-bit parameters
    assert rs == pytest.approx(0.696, abs=0.001) and ag == pytest.approx(0.348, abs=0.001)
    assert r["dp_raw"] == pytest.approx(rs + ag, rel=1e-3)
    comp_mb = (r["t_compute"] + r["t_attention"]) / r["m"]  # GEMMs + attention core of one micro-batch
    chunk_times = ((3 - 1) * 32 + 1) / 3 * comp_mb  # 65 chunk-times of one micro-batch
    hidden = chunk_times * 2 / 3 + chunk_times / 3  # gradients behind backward, parameters behind forward
    assert hidden == pytest.approx(0.65, abs=0.01)
    assert r["t_dp"] == pytest.approx(rs + ag - hidden, rel=1e-3)
    issue = 3 * 2 * 32 * 3 * 219e-6  # 3 MoE layers x 2 GEMMs x 32 local experts x 3 passes
    assert issue == pytest.approx(0.126144, rel=1e-9)
    assert r["t_bubble"] == pytest.approx(31 / 3 * issue, rel=1e-9) and r["t_host"] > 0
    assert r["step"] > 256 * issue > 3.5 * best[16384]["step"]

    # The whitepaper's 384-GPU replica at 768 GPUs: EP 8 x CP 8 inside a node, PP 48 across nodes, DP 2.
    wp = search(wl, hw, 768, SearchOptions(overlap_ep=True, tp=(1,), cp=(8,), ep=(8,), etp=(1,), pp=(48,)), top_k=1)
    w = next(iter_rows(wp.top))
    assert w["tp"] * w["cp"] * w["fold"] * w["pp"] == 384 and w["dp"] == 2
    assert w["t_host"] == 0.0 and w["micro_batch"] > 1
    assert 1.3 * best[768]["step"] <= w["step"] <= 1.5 * best[768]["step"] and w["stage_imbalance"] > 1.7

    # At the nominal (training-fitted) ceiling GEMMs run slower, so the same per-step DP traffic and
    # kernel overheads weigh less: 65,536 GPUs still keep 90 %.
    at = {g: 2**27 / next(iter_rows(search(wl, nominal, g, opts, top_k=1).top))["step"] / g
          for g in (768, 32768, 65536)}
    assert at[32768] / at[768] >= at[65536] / at[768] >= SCALING_THRESHOLD


@pytest.mark.slow  # evaluates every layout twice: 10-25 s
@pytest.mark.parametrize(
    "model,sku,gpus,seq,batch,kw",
    [
        ("llama3.1-70b", "mi355x", 512, 8192, 256, {}),
        ("mixtral-8x7b", "mi300x", 128, 4096, 512, {"overlap_ep": True}),
    ],
)
def test_factored_evaluation_equals_flat_layouts(catalog, model, sku, gpus, seq, batch, kw) -> None:
    """The search evaluates collectives once per structure and broadcasts them over the (ZeRO,
    micro-batch, recompute, SP) grid. Evaluating every candidate as its own flat layout (one array
    element each, no sharing) must give bit-identical step times, counts and ranked rows."""
    from mi400plan.search import (
        SearchOptions, expand, inner_masks, inner_size, make_coll, memory_total, model_terms, rank_order, search,
        step_time, structural_grid, usable_hbm,
    )

    wl = _wl(catalog, model, seq, batch)
    hw = _hw(catalog, sku)
    opts = SearchOptions(**kw)
    res = search(wl, hw, gpus, opts, top_k=15)

    st = structural_grid(wl.model, seq, gpus, opts, inner_size(opts))
    flat, _ = expand(st, opts)
    alive = np.ones(flat["tp"].size, dtype=bool)
    for bad in inner_masks(flat, wl).values():
        alive &= ~bad
    c = {k: v[alive] for k, v in flat.items()}
    t = step_time(c, wl, hw, model_terms(wl.model, wl.counts, seq, wl.recipe), opts, make_coll(hw))
    mem = np.asarray(memory_total(c, wl).need, dtype=np.float64)  # fits or tight: the search's check
    fits = mem <= usable_hbm(wl, hw)
    assert int(fits.sum()) == res.valid
    step = np.asarray(t["step"], dtype=np.float64)[fits]
    order = rank_order(step, mem[fits], {k: v[fits] for k, v in c.items()})[:15]
    assert np.array_equal(res.top["step"], step[order])
    assert np.array_equal(res.top["mem_total"] - res.top["mem_fragmentation"], mem[fits][order])
    for k in ("tp", "pp", "vpp", "cp", "ep", "etp", "zero", "micro_batch", "recompute", "sp"):
        assert np.array_equal(res.top[k], c[k][fits][order]), k
    for k in ("t_tp", "t_ep", "t_dp", "t_pp", "t_bubble"):
        assert np.array_equal(res.top[k], np.asarray(t[k], dtype=np.float64)[fits][order]), k


def test_fastest_layouts_that_do_not_fit_only_when_asked(catalog) -> None:
    """``rejected_memory=True``: the three fastest candidates that pass every rule but need more than the usable
    HBM, fastest first, equal to evaluating every candidate as its own flat layout; by default the search does
    not rank them (nothing reads them) and the layouts that fit are the same either way."""
    from mi400plan.search import (
        SearchOptions, expand, inner_masks, inner_size, make_coll, memory_total, model_terms, rank_order, search,
        step_time, structural_grid, usable_hbm,
    )

    wl = _wl(catalog, "llama3.1-70b", 4096, 64)
    hw = _hw(catalog, "mi300x")
    opts = SearchOptions(chunk=4096)  # several chunks, merged
    asked = search(wl, hw, 32, opts, top_k=5, rejected_memory=True)
    plain = search(wl, hw, 32, opts, top_k=5)
    assert plain.best_rejected_memory is None and asked.best_rejected_memory is not None
    assert all(np.array_equal(asked.top[k], plain.top[k]) for k in plain.top)

    st = structural_grid(wl.model, 4096, 32, opts, inner_size(opts))
    flat, _ = expand(st, opts)
    alive = np.ones(flat["tp"].size, dtype=bool)
    for bad in inner_masks(flat, wl).values():
        alive &= ~bad
    c = {k: v[alive] for k, v in flat.items()}
    step = np.asarray(step_time(c, wl, hw, model_terms(wl.model, wl.counts, 4096, wl.recipe), opts,
                                make_coll(hw))["step"], dtype=np.float64)
    mem = np.asarray(memory_total(c, wl).need, dtype=np.float64)
    out = mem > usable_hbm(wl, hw)
    assert 3 <= int(out.sum()) < out.size  # some candidates fit and at least three do not
    order = rank_order(step[out], mem[out], {k: v[out] for k, v in c.items()})[:3]
    got = asked.best_rejected_memory
    assert np.array_equal(got["step"], step[out][order])
    for k in ("tp", "pp", "vpp", "cp", "zero", "micro_batch", "recompute", "sp"):
        assert np.array_equal(got[k], c[k][out][order]), k


def test_chunked_dp_exposure_by_hand() -> None:
    """Per-chunk launch of once-per-step DP collectives (Megatron-Core interleaved schedule):
    exposed = max(0, (comm - compute)/v, comm - ((v-1)*pp + 1) * compute / v)."""
    from mi400plan.search import chunked_exposure

    # no virtual stages: hidden behind one micro-batch's backward only
    assert chunked_exposure(10.0, 1.0, 8.0, 1.0) == pytest.approx(9.0)
    assert chunked_exposure(0.5, 1.0, 8.0, 1.0) == 0.0
    # v = 3, pp = 4: chunk 2 can start 2*4 + 1 = 9 chunk-backwards (1/3 s each) before the end
    assert chunked_exposure(10.0, 1.0, 4.0, 3.0) == pytest.approx(10.0 - 9.0 / 3.0)
    # small traffic: only chunk 0's share (2/2 = 1 s) against its last chunk-backward (0.5 s) shows
    assert chunked_exposure(2.0, 1.0, 4.0, 2.0) == pytest.approx((2.0 - 1.0) / 2.0)


def test_zero_stages_move_gradients_as_the_runtimes_do(catalog) -> None:
    """Raw DP traffic per step (no overlap) for Llama-3.1-70B, TP 8 x DP 32 on 256 MI300X, 8
    micro-batches: ZeRO-1 reduce-scatters the accumulated gradients once and all-gathers the
    parameters once; ZeRO-2 keeps only a gradient shard, so it reduce-scatters after every
    micro-batch (DeepSpeed: 'gradient reduction is required after every backward because of
    gradient partitioning'); ZeRO-3 also gathers the parameters before forward and backward of every
    micro-batch. RS and AG are the comm model's times for the 32-rank group at stride 8 (one rank
    per node, scale-out)."""
    from mi400plan.comms import placed_collective_time
    from mi400plan.search import evaluate_one

    wl = _wl(catalog, "llama3.1-70b", 4096, 256)
    hw = _hw(catalog, "mi300x")
    base = dict(tp=8, pp=1, vpp=1, cp=1, ep=1, etp=1, micro_batch=1, recompute=2, sp=1)
    r = {z: evaluate_one(dict(base, zero=z), wl, hw, 256) for z in (0, 1, 2, 3)}
    assert r[1]["m"] == 8  # 256 sequences / (DP 32 x micro-batch 1)
    counts = wl.counts
    replicated = sum(lp.norms + lp.router for lp in counts.layers) + counts.final_norm
    p_local = (counts.total - replicated) / 8 + replicated  # TP-split + replicated, per GPU
    # gradients on the wire in the recipe's fp32 main-grad dtype (Megatron-LM reduces in fp32 for
    # BF16 training), parameters in 16 bits
    assert wl.recipe.grad_bytes == 4 and wl.recipe.param_bytes == 2
    rs = float(placed_collective_time("reduce_scatter", p_local * 4, 32, 8, hw.scale_up, hw.scale_out))
    ag = float(placed_collective_time("all_gather", p_local * 2, 32, 8, hw.scale_up, hw.scale_out))
    assert r[1]["dp_raw"] == pytest.approx(rs + ag, rel=1e-9)
    assert r[2]["dp_raw"] == pytest.approx(8 * rs + ag, rel=1e-9)
    # ZeRO-3 / FSDP moves the same bytes as 80 per-layer collectives (one FSDP unit per layer; the
    # embedding and head spread over them): two gathers and a reduce-scatter per layer and micro-batch
    ag_u = float(placed_collective_time("all_gather", p_local * 2 / 80, 32, 8, hw.scale_up, hw.scale_out))
    rs_u = float(placed_collective_time("reduce_scatter", p_local * 4 / 80, 32, 8, hw.scale_up, hw.scale_out))
    assert r[3]["dp_raw"] == pytest.approx(8 * 80 * (2 * ag_u + rs_u), rel=1e-9)
    # Overlap: once-per-step traffic hides behind one micro-batch's backward (gradients) or forward
    # (parameters); per-micro-batch traffic behind that micro-batch's whole compute, 8 times.
    comp = (r[1]["t_compute"] + r[1]["t_attention"]) / 8  # GEMMs + attention core of one micro-batch
    assert r[0]["t_dp"] == pytest.approx(max(0.0, r[0]["dp_raw"] - comp * 2 / 3), rel=1e-9)
    assert r[1]["t_dp"] == pytest.approx(max(0.0, rs - comp * 2 / 3) + max(0.0, ag - comp / 3), rel=1e-9)
    assert r[2]["t_dp"] == pytest.approx(max(0.0, ag - comp / 3) + 8 * max(0.0, rs - comp), rel=1e-9)
    # ZeRO-3 with prefetch: each layer's gather hides behind the previous layer's forward (comp/3/80),
    # in backward the next gather and the last reduce-scatter behind a layer's backward (2 comp/3/80);
    # the first gather of each pass and the last reduce-scatter stay exposed.
    f, b = comp / 3 / 80, comp * 2 / 3 / 80
    fwd = ag_u + 79 * max(0.0, ag_u - f)
    bwd = ag_u + max(0.0, ag_u - b) + 78 * max(0.0, ag_u + rs_u - b) + max(0.0, rs_u - b) + rs_u
    assert r[3]["t_dp"] == pytest.approx(8 * (fwd + bwd), rel=1e-9)


def test_overlapped_interleaved_p2p_leaves_only_fill_and_drain(catalog) -> None:
    """``overlap_pp`` (Megatron-LM ``overlap_p2p_comm``): with virtual stages each chunk's send hides
    behind the next chunk's compute, except the ``2 (pp - 1)`` transfers of pipeline fill and drain.
    Without overlap a step carries ``m x 2 x vpp`` transfers in ``t_pp`` (plus the same in the
    bubble). Llama-3.1-70B (80 layers) on 512 MI300X, TP 8 x PP 8 x VPP 5, DP 8, 256 sequences of
    4,096: m = 256 / (8 x 1) = 32 micro-batches, so the exposed transfers go from 32 x 2 x 5 = 320
    to 2 x 7 = 14 (a chunk-forward, ~10 ms, dwarfs one ~0.2 ms transfer of 4,096 x 8,192 x 2 / 8 =
    8.4 MB over 400 Gb/s)."""
    from mi400plan.search import SearchOptions, evaluate_one

    wl = _wl(catalog, "llama3.1-70b", 4096, 256)
    hw = _hw(catalog, "mi300x")
    lay = dict(tp=8, pp=8, vpp=5, cp=1, ep=1, etp=1, zero=1, micro_batch=1, recompute=0, sp=1)
    off = evaluate_one(lay, wl, hw, 512, SearchOptions(overlap_pp=False))
    on = evaluate_one(lay, wl, hw, 512, SearchOptions(overlap_pp=True))
    assert off["m"] == 32
    per_xfer = off["t_pp"] / (32 * 2 * 5)
    assert 8.4e6 / 50e9 < per_xfer < 1e-3
    assert on["t_pp"] == pytest.approx(2 * 7 * per_xfer, rel=1e-9)
    # the bubble no longer carries transfers: (pp - 1) / vpp slots of the micro-batch time without them
    assert on["t_bubble"] == pytest.approx(off["t_bubble"] - 7 / 5 * 2 * 5 * per_xfer, rel=1e-9)
    assert on["step"] < off["step"]
    # the plain 1F1B schedule (VPP 1) is not overlapped (Megatron forces overlap_p2p_comm off there)
    one = dict(lay, vpp=1)
    assert evaluate_one(one, wl, hw, 512, SearchOptions(overlap_pp=True))["step"] == evaluate_one(
        one, wl, hw, 512, SearchOptions(overlap_pp=False))["step"]


def test_exposed_cp_exchange_costs_what_overlap_hides(catalog) -> None:
    """``overlap_cp=False`` (Llama 3's all-gather CP, exposed on the critical path) charges the whole
    key/value exchange; the default hides it behind attention-core compute. Llama-3.1-8B at 32,768
    tokens, CP 4 over two MI300X nodes' worth of stride: exposed >= hidden, and the exposed time is
    per layer 2 all-gathers + 1 reduce-scatter of (K + V) = 2 x 8 x 128 = 2,048 elements per token."""
    from mi400plan.search import SearchOptions, evaluate_one

    wl = _wl(catalog, "llama3.1-8b", 32768, 64)
    hw = _hw(catalog, "mi300x")
    lay = dict(tp=2, pp=1, vpp=1, cp=4, ep=1, etp=1, zero=1, micro_batch=1, recompute=0, sp=1)
    hid = evaluate_one(lay, wl, hw, 64, SearchOptions())
    exp = evaluate_one(lay, wl, hw, 64, SearchOptions(overlap_cp=False))
    assert exp["t_cp"] > 0 and exp["t_cp"] >= hid["t_cp"]
    assert exp["step"] - hid["step"] == pytest.approx(exp["t_cp"] - hid["t_cp"], rel=1e-9)
    # the bytes: one rank's K and V for one layer, 32,768 / 4 tokens, split over TP 2, 2 bytes each
    kv_chunk = 32768 / 4 * 2048 / 2 * 2
    assert kv_chunk == 16 * 2**20
    per_mb = exp["t_cp"] / exp["m"]
    from mi400plan import comms

    ag = comms.placed_collective_time("all_gather", kv_chunk * 4, 4, 2, hw.scale_up, hw.scale_out)
    rs = comms.placed_collective_time("reduce_scatter", kv_chunk * 4, 4, 2, hw.scale_up, hw.scale_out)
    assert per_mb == pytest.approx(32 * (2 * float(ag) + float(rs)), rel=1e-9)


def _coll(hw, op: str, size: float, group: int, stride: int) -> float:
    from mi400plan.comms import placed_collective_time

    return float(placed_collective_time(op, size, group, stride, hw.scale_up, hw.scale_out))


def test_dp_gradients_are_reduced_over_dp_times_cp(catalog) -> None:
    """CP ranks hold the same weights and see different tokens, so non-expert gradients are reduced
    (and the distributed optimizer shards) over DP x CP (Megatron-Core ``data_parallel_group_with_cp``),
    not over DP alone. Llama-3.1-8B, TP 2 x CP 4 on 16 MI300X (xGMI domain 8): DP 2, so the group is
    CP 4 at stride 2 inside a node (span 8) and then 2 nodes at stride 8. On 8 GPUs DP is 1 and the
    CP group still reduces (before the fix: no DP traffic at all)."""
    from mi400plan.search import evaluate_one

    wl = _wl(catalog, "llama3.1-8b", 4096, 64)
    hw = _hw(catalog, "mi300x")
    c = wl.counts
    replicated = sum(lp.norms + lp.router for lp in c.layers) + c.final_norm
    p_local = (c.total - replicated) / 2 + replicated  # TP-split + replicated parameters per GPU
    g4, w2 = p_local * 4, p_local * 2  # fp32 gradients, 16-bit parameters (``megatron`` recipe)
    lay = dict(tp=2, pp=1, vpp=1, cp=4, ep=1, etp=1, zero=1, micro_batch=1, recompute=0, sp=1)

    r16 = evaluate_one(lay, wl, hw, 16)
    rs = _coll(hw, "reduce_scatter", g4, 4, 2) + _coll(hw, "reduce_scatter", g4 / 4, 2, 8)
    ag = _coll(hw, "all_gather", w2, 4, 2) + _coll(hw, "all_gather", w2 / 4, 2, 8)
    assert r16["dp_raw"] == pytest.approx(rs + ag, rel=1e-9)
    # optimizer step: the shard is p_local / (DP 2 x CP 4), 30 bytes per parameter at HBM speed
    assert r16["t_optimizer"] == pytest.approx(p_local / 8 * 30 / (hw.hbm_bw * hw.hbm_eff), rel=1e-9)

    r8 = evaluate_one(lay, wl, hw, 8)  # DP 1: only the CP group
    assert r8["dp_raw"] == pytest.approx(_coll(hw, "reduce_scatter", g4, 4, 2) + _coll(hw, "all_gather", w2, 4, 2), rel=1e-9)
    assert r8["dp_raw"] > 0


def test_expert_gradients_reduced_when_dp_is_one(catalog) -> None:
    """Mixtral 8x7B on 2 GPUs with TP 2, EP 1, ETP 1: DP is 1, but each TP rank holds all eight
    experts whole (ETP 1) and routes different (sequence-parallel) tokens, so expert gradients are
    all-reduced over the 2 expert-data-parallel ranks (world / (PP x EP x ETP) = 2). Expert
    parameters: 32 layers x 8 experts x 3 x 4,096 x 14,336; fp32 gradients."""
    from mi400plan.search import evaluate_one

    wl = _wl(catalog, "mixtral-8x7b", 4096, 8)
    hw = _hw(catalog, "mi300x")
    experts = 32 * 8 * 3 * 4096 * 14336
    assert experts == sum(lp.routed_experts for lp in wl.counts.layers)
    lay = dict(tp=2, pp=1, vpp=1, cp=1, ep=1, etp=1, zero=0, micro_batch=1, recompute=0, sp=1)
    r = evaluate_one(lay, wl, hw, 2)
    assert r["dp_raw"] == pytest.approx(_coll(hw, "all_reduce", experts * 4, 2, 1), rel=1e-9)


def test_tp_collectives_count_shared_experts_and_the_etp_gather(catalog) -> None:
    """Per layer and micro-batch with SP, each TP pair is a reduce-scatter + all-gather of the full
    activation (micro-batch x seq x hidden x 2 bytes). Forward + backward: a dense layer has 4 pairs
    (Megatron SP: 2 all-gathers + 2 reduce-scatters each way); an MoE layer has 2 for attention and
    2 more when it has shared experts (Megatron-Core's SharedExpertMLP is a TP-split MLP). With ETP
    > 1 the dispatched tokens (tokens per rank x top_k x hidden x 2 bytes after the EP all-to-all)
    are all-gathered over ETP and reduce-scattered back, forward and backward: the gathered buffer
    is ETP x that.

    moe-2t (96 layers, first 3 dense, 1 shared expert) at TP 2, EP 8 on 8 GPUs: 4 x 3 + 4 x 93 = 384
    pairs (without the shared expert it would be 4 x 3 + 2 x 93 = 198). Mixtral 8x7B (32 MoE layers,
    no shared expert, top-2) at TP 2, ETP 2, EP 4 on 8 GPUs: 2 x 32 TP pairs and 2 x 32 ETP pairs of
    2 x (4,096 / 2 tokens x 2 x 4,096 x 2 bytes)."""
    from mi400plan.search import evaluate_one

    hw = _hw(catalog, "mi300x")
    wl = _wl(catalog, "moe-2t", 4096, 32)
    lay = dict(tp=2, pp=1, vpp=1, cp=1, ep=8, etp=1, zero=1, micro_batch=1, recompute=0, sp=1)
    r = evaluate_one(lay, wl, hw, 8)  # fold = lcm(2, 8) / 2 = 4 = DP, m = 32 / 4 = 8
    assert r["m"] == 8
    s_act = 4096 * 8192 * 2
    pair = _coll(hw, "reduce_scatter", s_act, 2, 1) + _coll(hw, "all_gather", s_act, 2, 1)
    assert r["t_tp"] == pytest.approx(8 * 384 * pair, rel=1e-9)

    wl = _wl(catalog, "mixtral-8x7b", 4096, 32)
    lay = dict(tp=2, pp=1, vpp=1, cp=1, ep=4, etp=2, zero=1, micro_batch=1, recompute=0, sp=1)
    r = evaluate_one(lay, wl, hw, 8)  # fold = lcm(2, 8) / 2 = 4 = DP, m = 32 / 4 = 8
    assert r["m"] == 8
    s_act = 4096 * 4096 * 2
    s_disp = 4096 / 2 * 2 * 4096 * 2
    tp_pair = _coll(hw, "reduce_scatter", s_act, 2, 1) + _coll(hw, "all_gather", s_act, 2, 1)
    etp_pair = _coll(hw, "reduce_scatter", 2 * s_disp, 2, 1) + _coll(hw, "all_gather", 2 * s_disp, 2, 1)
    assert r["t_tp"] == pytest.approx(8 * (2 * 32 * tp_pair + 2 * 32 * etp_pair), rel=1e-9)


def test_mla_cp_exchanges_full_k_and_v(catalog) -> None:
    """DeepSeek-V3 (MLA, 128 heads, K head = nope 128 + rope 64, V head 128, 61 layers) at TP 8 x
    CP 2 (EP 16 on the same 16 GPUs), exposed CP: per layer 2 all-gathers + 1 reduce-scatter of this
    rank's K and V: 4,096 / 2 tokens x 128 x (128 + 64 + 128) / 8 x 2 bytes, gathered over CP 2 at
    stride 8 (two nodes)."""
    from mi400plan.search import SearchOptions, evaluate_one

    wl = _wl(catalog, "deepseek-v3", 4096, 8)
    hw = _hw(catalog, "mi300x")
    lay = dict(tp=8, pp=1, vpp=1, cp=2, ep=16, etp=1, zero=1, micro_batch=1, recompute=0, sp=1)
    r = evaluate_one(lay, wl, hw, 16, SearchOptions(overlap_cp=False))
    kv_chunk = 4096 / 2 * 128 * (128 + 64 + 128) / 8 * 2
    per_mb = 61 * (2 * _coll(hw, "all_gather", 2 * kv_chunk, 2, 8) + _coll(hw, "reduce_scatter", 2 * kv_chunk, 2, 8))
    assert r["m"] == 8
    assert r["t_cp"] == pytest.approx(8 * per_mb, rel=1e-9)


def test_recompute_repeats_the_cp_forward_exchange(catalog) -> None:
    """Selective recompute re-runs core attention (Megatron-Core ``core_attn``), CP exchange included,
    as full recompute re-runs the whole forward: 3 all-gathers + 1 reduce-scatter per layer instead of
    2 + 1. Llama-3.1-8B, 32,768 tokens, TP 2 x CP 4, exposed CP (same bytes as the test above it)."""
    from mi400plan.search import SearchOptions, evaluate_one

    wl = _wl(catalog, "llama3.1-8b", 32768, 64)
    hw = _hw(catalog, "mi300x")
    kv_chunk = 32768 / 4 * 2048 / 2 * 2
    ag = _coll(hw, "all_gather", kv_chunk * 4, 4, 2)
    rs = _coll(hw, "reduce_scatter", kv_chunk * 4, 4, 2)
    for rc, n_ag in ((0, 2), (1, 3), (2, 3)):
        lay = dict(tp=2, pp=1, vpp=1, cp=4, ep=1, etp=1, zero=1, micro_batch=1, recompute=rc, sp=1)
        r = evaluate_one(lay, wl, hw, 64, SearchOptions(overlap_cp=False))
        assert r["t_cp"] / r["m"] == pytest.approx(32 * (n_ag * ag + rs), rel=1e-9), rc


def test_dp_placement_tier() -> None:
    """The reported DP tier is that of the DP x CP group: CP x fold ranks at stride TP, then DP / fold
    replicas at stride TP x CP x fold x PP."""
    from mi400plan.search import dp_tier

    # 64 GPUs of one Helios rack (domain 72): TP 2, EP 8 folds 4 DP ranks into the block; DP 8 =
    # 4 folded x 2 replicas, 16 GPUs in all: one domain (was reported 'hierarchical').
    assert str(dp_tier(2, 1, 4, 1, 8, 72)) == "scale_up"
    # TP 8 on nodes of 8: every DP member is in another node
    assert str(dp_tier(8, 1, 1, 1, 4, 8)) == "scale_out"
    # CP 4 x fold 2 fills a node of 8, then 128 replicas across nodes
    assert str(dp_tier(1, 4, 2, 32, 256, 8)) == "hierarchical"
    # no replication at all
    assert str(dp_tier(8, 1, 1, 4, 1, 8)) == "none"


def test_mla_down_projections_are_reduced_whole_by_every_tp_rank(catalog) -> None:
    """MLA's q_a (7,168 x 1,536) and kv_a (7,168 x (512 + 64)) projections are not split by TP
    (Megatron-Core: parallel_mode="duplicated"), so each TP rank reduces all of them over DP x CP.
    DeepSeek-V3 (61 layers, 58 MoE layers of 256 experts of 3 x 7,168 x 2,048) at TP 8 x CP 2,
    EP 16 on 32 GPUs: DP 2; non-expert group = CP 2 at stride 8, then 2 replicas at stride 16;
    expert group = the 2 replicas. ZeRO-1: fp32 reduce-scatter + 16-bit all-gather."""
    from mi400plan.search import evaluate_one

    wl = _wl(catalog, "deepseek-v3", 4096, 8)
    hw = _hw(catalog, "mi300x")
    c = wl.counts
    down = 61 * (7168 * 1536 + 7168 * (512 + 64))
    experts = 58 * 256 * 3 * 7168 * 2048
    assert experts == sum(lp.routed_experts for lp in c.layers)
    repl = sum(lp.norms + lp.router for lp in c.layers) + c.final_norm + down
    dense = (c.total - experts - repl) / 8 + repl
    exp = experts / 16
    lay = dict(tp=8, pp=1, vpp=1, cp=2, ep=16, etp=1, zero=1, micro_batch=1, recompute=0, sp=1)
    r = evaluate_one(lay, wl, hw, 32)

    def two(op: str, nbytes: float) -> float:
        d = _coll(hw, op, dense * nbytes, 2, 8) + _coll(hw, op, dense * nbytes / 2, 2, 16)
        return d + _coll(hw, op, exp * nbytes, 2, 16)

    assert r["dp_raw"] == pytest.approx(two("reduce_scatter", 4) + two("all_gather", 2), rel=1e-9)


def test_tie_break_order() -> None:
    """``TIE_BREAK``: step time, then memory per GPU, then smaller TP, PP, CP, EP, ETP, VPP, ZeRO,
    micro-batch, recompute, SP off before on. Five rows built so each key decides one pair."""
    from mi400plan.search import SORT_KEYS, TIE_BREAK, rank_order

    base = dict(tp=2, pp=2, cp=1, ep=1, etp=1, vpp=1, zero=1, micro_batch=1, recompute=0, sp=1)
    rows = [
        (1.0, 5.0, dict(base)),              # 0: the reference row
        (1.0, 5.0, dict(base, sp=0)),        # 1: SP off before on -> before row 0
        (1.0, 4.0, dict(base, tp=8)),        # 2: less memory beats smaller TP -> first
        (1.0, 5.0, dict(base, pp=1, tp=4)),  # 3: larger TP loses to rows 0/1 even with smaller PP
        (0.5, 9.0, dict(base, tp=64)),       # 4: fastest step wins outright
    ]
    step = np.array([r[0] for r in rows])
    mem = np.array([r[1] for r in rows])
    cols = {k: np.array([r[2][k] for r in rows]) for k in SORT_KEYS}
    assert list(rank_order(step, mem, cols)) == [4, 2, 1, 0, 3]
    assert TIE_BREAK.startswith("fastest step time first; equal step times are ordered by lower memory")


def test_tier_label_follows_the_comm_placement_rule() -> None:
    """5 members at stride 16 span (5-1) x 16 + 1 = 65 GPUs: one 72-GPU domain, so scale_up (the
    comm model prices it there), although 5 x 16 = 80 > 72; stride 72 puts every member in its own
    domain; 8 at stride 16 span 113 GPUs over two domains (5 + 3 members): hierarchical."""
    from mi400plan.search import tier_of

    assert str(tier_of(5, 16, 72)) == "scale_up"
    assert str(tier_of(4, 72, 72)) == "scale_out"
    assert str(tier_of(8, 16, 72)) == "hierarchical"
    assert str(tier_of(1, 16, 72)) == "none"


def test_distinct_rows_by_hand() -> None:
    """Rows (1, a), (2, b), (1, a), (2, c), (1, a): three distinct, the first of each kept."""
    from mi400plan.search import distinct_rows

    x = np.array([1.0, 2.0, 1.0, 2.0, 1.0])
    y = np.array([5.0, 6.0, 5.0, 7.0, 5.0])
    first, inverse = distinct_rows(x, y)
    assert sorted(zip(x[first], y[first])) == [(1.0, 5.0), (2.0, 6.0), (2.0, 7.0)]
    assert np.array_equal(x[first][inverse], x) and np.array_equal(y[first][inverse], y)
    assert inverse[0] == inverse[2] == inverse[4] and len({inverse[1], inverse[3], inverse[0]}) == 3


@pytest.mark.parametrize("sku", ["a100", "gb200", "mi355x"])
def test_search_collectives_priced_once_per_distinct_input_equal_direct_pricing(catalog, sku) -> None:
    """The search's collective pricing (distinct inputs priced once, groups of one skipped) gives
    exactly what pricing every element does."""
    from mi400plan import comms
    from mi400plan.search import make_coll

    hw = _hw(catalog, sku)
    rng = np.random.default_rng(7)
    size = rng.choice([1e3, 4e6, 3e8], size=(50, 4))
    group = rng.choice([1, 2, 8, 64, 512], size=(50, 1)).astype(float)
    stride = np.array([[1.0, 4.0, 8.0, 72.0]])
    for op in ("all_reduce", "all_gather", "all_to_all", "send_recv"):
        got = make_coll(hw)(op, size, group, stride)
        want = comms.placed_collective_time(op, size, group, stride, hw.scale_up, hw.scale_out)
        assert got.shape == want.shape and np.array_equal(got, want)
    assert np.array_equal(make_coll(hw)("all_reduce", size, 1.0, stride), np.zeros((50, 4)))


@pytest.mark.parametrize("sku", ["a100", "gb200", "mi355x"])
def test_batched_collective_pricing_equals_one_call_per_request(catalog, sku) -> None:
    """``price_many`` (requests of one op priced together) gives exactly what one ``coll`` call per
    request gives, shapes included, with groups of one, mixed ops and broadcast shapes; a plain pricing
    function without ``many`` is called once per request."""
    from mi400plan.search import make_coll, price_many

    hw = _hw(catalog, sku)
    rng = np.random.default_rng(11)
    size = rng.choice([1e3, 4e6, 3e8], size=(40, 1))
    group = rng.choice([1, 2, 8, 64], size=(1, 3)).astype(float)
    reqs = {
        "a": ("all_reduce", size, group, 1.0), "b": ("all_reduce", size * 3.0, 8.0, np.array([[1.0, 8.0, 16.0]])),
        "c": ("reduce_scatter", size, group, 4.0), "d": ("all_gather", 1e6, 1.0, 1.0),
        "e": ("send_recv", size / 8.0, 2.0, 72.0), "f": ("all_to_all", size, 8.0, 1.0),
    }
    coll = make_coll(hw)
    got = price_many(coll, reqs)
    for name, req in reqs.items():
        want = coll(*req)
        assert got[name].shape == np.shape(want) and np.array_equal(got[name], want), name
    calls: list[str] = []

    def plain(op, size, group, stride):  # noqa: ANN001, ANN202
        calls.append(op)
        return coll(op, size, group, stride)

    assert all(np.array_equal(v, got[k]) for k, v in price_many(plain, reqs).items()) and len(calls) == len(reqs)
