"""KV-capacity admission of a closed-loop benchmark (``serve_admission``): capacity by hand arithmetic, the
min(clients, capacity) rule, the admission wait against a simulated closed loop, and the stacks' policies."""

from __future__ import annotations

import heapq
from dataclasses import replace

import numpy as np
import pytest

from mi400plan import serve as core
from mi400plan.serve_admission import admission_context, closed_loop, kv_capacity

# Llama 3 70B, FP8 KV: 2 (K and V) x 80 layers x 8 KV heads x 128 head dim x 1 byte per token.
LLAMA70_KV_BYTES_PER_TOKEN = 2 * 80 * 8 * 128 * 1  # 163,840 B = 160 KiB


def _setup(catalog, sku: str, i: int, o: int):
    from mi400plan.hardware import serve_hardware
    from mi400plan.params import count_params
    from mi400plan.specs.layout import infer_recipe

    m = catalog.get("models", "llama3-70b").spec
    hw, _ = serve_hardware(catalog, sku, "fp8", "nominal", matmul=None, hbm=None, model_class="dense")
    return core.Workload(m, count_params(m), infer_recipe("fp8", kv_dtype="fp8"), i, o), hw


def test_admission_context_by_policy() -> None:
    """reserve-full holds the whole prompt + output; current the steady state's mean, prompt + half the output."""
    assert admission_context("reserve-full", 1024, 8192) == 9216.0
    assert admission_context("current", 1024, 8192) == 1024 + 4096
    with pytest.raises(ValueError, match="reserve-full"):
        admission_context("evict-all", 1024, 8192)


def test_capacity_grows_by_the_added_hbm_over_kv_bytes(catalog) -> None:
    """Every byte of HBM added beyond the weights goes to the KV cache: adding the usable bytes of exactly 100
    sequences of 9,216 tokens (100 x 9,216 x 163,840 B = 151.0 GB, over the 0.95 usable fraction) adds 100
    sequences (TP1); at TP8 each GPU holds 1/8 of the 8 KV heads, so the same bytes per GPU add 800."""
    wl, hw = _setup(catalog, "h200", 1024, 8192)
    frac = wl.recipe.reserve.fraction
    added = 100 * 9216 * LLAMA70_KV_BYTES_PER_TOKEN / (1.0 - frac)
    for tp, more in ((1, 100), (8, 800)):
        base = float(kv_capacity(wl, hw, tp=tp, pp=1, dpa=False, batch=64.0, context=9216.0))
        big = float(kv_capacity(wl, replace(hw, hbm_bytes=hw.hbm_bytes + added), tp=tp, pp=1, dpa=False, batch=64.0,
                                context=9216.0))
        assert big - base == pytest.approx(more, abs=1.0)


def test_h200_tp1_llama70b_capacity_by_hand(catalog) -> None:
    """H200 (143,771 MiB = 150.75 GB) TP1, Llama 3 70B FP8: usable 150.75 x 0.95 = 143.22 GB, less about
    72.7 GB of weights (68.5 GB of FP8 linear layers, 4.2 GB of 16-bit embedding and head: 2 x 128,256 x
    8,192 x 2 B), 2.0 GB of scratch (a 16,384-token step) and the 2 GiB fixed reserve, leaves 66.4 GB for KV at
    163,840 B per token. 128 sequences of 1,024 + 4,096 mean context need 128 x 5,120 x 163,840 = 107 GB:
    only 66.4e9 / (5,120 x 163,840) = 79.1 -> 79 run; at the full 9,216 tokens (TensorRT-LLM's reservation)
    66.4e9 / 1.510e9 = 43.96 -> 43."""
    wl, hw = _setup(catalog, "h200", 1024, 8192)
    assert 128 * 5120 * LLAMA70_KV_BYTES_PER_TOKEN == pytest.approx(107.4e9, rel=1e-3)
    room = 143_771 * 2**20 * 0.95 - 72.66e9 - 2.05e9 - 2**31
    assert room / (5120 * LLAMA70_KV_BYTES_PER_TOKEN) == pytest.approx(79.1, abs=0.1)
    assert room / (9216 * LLAMA70_KV_BYTES_PER_TOKEN) == pytest.approx(43.95, abs=0.1)
    assert float(kv_capacity(wl, hw, tp=1, pp=1, dpa=False, batch=128.0, context=5120.0)) == 79.0
    assert float(kv_capacity(wl, hw, tp=1, pp=1, dpa=False, batch=128.0, context=9216.0)) == 43.0


def test_min_of_clients_and_capacity(catalog) -> None:
    """At or below the capacity the closed loop is the steady state at the clients (no wait); above it the
    server runs ``capacity`` sequences: tokens/s and TPOT are those at the capacity, only TTFT waits."""
    wl, hw = _setup(catalog, "h200", 1024, 8192)
    kw = dict(tp=1, pp=1, ep=1, dpa=False)
    at = core.evaluate(wl, hw, batch=64.0, **kw)
    fits = closed_loop(wl, hw, clients=64.0, capacity=100.0, **kw)
    assert float(fits["total_tps_gpu"]) == float(at["total_tps_gpu"]) and float(fits["ttft"]) == float(at["ttft"])
    assert float(fits["admission_wait"]) == 0.0 and float(fits["running"]) == 64.0
    over = closed_loop(wl, hw, clients=128.0, capacity=44.0, **kw)
    k44 = core.evaluate(wl, hw, batch=44.0, **kw)
    assert float(over["running"]) == 44.0
    assert float(over["total_tps_gpu"]) == float(k44["total_tps_gpu"]) and float(over["tpot"]) == float(k44["tpot"])
    # wait = (128 - 44) / 44 x service, service = 44 / X: 84 / X seconds
    assert float(over["admission_wait"]) == pytest.approx(84.0 / float(k44["requests_per_s"]), rel=1e-12)
    assert float(over["ttft"]) == pytest.approx(float(k44["ttft"]) + 84.0 / float(k44["requests_per_s"]), rel=1e-12)


def _simulated_waits(clients: int, slots: int, service: float, requests: int) -> np.ndarray:
    """A closed loop simulated event by event: ``clients`` each resubmit when their request ends; ``slots``
    run one request each for ``service`` seconds; waiting requests are admitted first come first served."""
    free = [0.0] * slots  # the times the slots become free
    queue = [0.0] * clients  # submission times, all at t = 0
    heapq.heapify(free)
    waits = []
    while len(waits) < requests:
        submitted = heapq.heappop(queue)
        start = max(submitted, heapq.heappop(free))
        waits.append(start - submitted)
        heapq.heappush(free, start + service)
        heapq.heappush(queue, start + service)  # its client sends the next one when it ends
    return np.array(waits)


@pytest.mark.parametrize("clients, slots", [(128, 44), (64, 44), (10, 4)])
def test_admission_wait_matches_a_simulated_closed_loop(clients: int, slots: int) -> None:
    """Past the first round, the simulated mean wait is (C - K) / K x S, and each request waits within one
    service time of it (so the median of a long run does too)."""
    service = 2.0
    w = _simulated_waits(clients, slots, service, 40 * clients)[4 * clients:]
    expect = (clients - slots) / slots * service
    assert w.mean() == pytest.approx(expect, rel=0.03)
    assert np.all(np.abs(w - expect) <= service)


def test_stack_policy_sets_the_running_batch(catalog) -> None:
    """The same H200 TP1 point of 64 clients at 1,024/8,192 nominal, which InferenceX's client sends as 922 / 7,372
    tokens on average (uniform on 819..1,024 and 6,553..8,192; ``inferencex_lengths``): TensorRT-LLM reserves
    922 + 7,372 x (1 + cv^2 0.0041) = 8,324 tokens per request, so fewer than 64 run and the rest wait; vLLM
    admits on current blocks (922 + 3,701 on average): all 64 run."""
    from mi400plan.serve_calibration import Point, admission_policy, predict

    assert admission_policy(catalog, "trtllm") == "reserve-full"
    assert {admission_policy(catalog, s) for s in ("vllm", "rocm-vllm", "sglang")} == {"current"}
    assert admission_policy(catalog, "") is None
    from mi400plan.serve_calibration import inferencex_lengths

    wl, hw = _setup(catalog, "h200", 922, 7372)
    wl = replace(wl, output_cv2=inferencex_lengths(8192).cv2)
    pt = Point("h200", "llama3-70b", "fp8", 1, 1, False, 1024, 8192, 64, 1.0, 0.03, 50.0)
    trt, vllm, none = (predict(catalog, replace(pt, stack=s), hw) for s in ("trtllm", "vllm", ""))
    at64 = core.evaluate(wl, hw, tp=1, pp=1, ep=1, dpa=False, batch=64.0)
    assert float(vllm["tput"]) == float(none["tput"]) == float(at64["total_tps_gpu"])
    assert float(trt["tput"]) < float(vllm["tput"]) and float(trt["ttft"]) > 10.0 * float(vllm["ttft"])


def test_profiles_cite_their_admission_policy(catalog) -> None:
    """Each bundled stack names its policy; a disclosed one cites a dated source."""
    for name in catalog.names("serving"):
        spec = catalog.get("serving", name).spec
        adm = spec.kv_admission
        assert adm.policy in ("reserve-full", "current")
        if adm.status == "disclosed":
            assert adm.source and all(spec.sources[k].date for k in adm.source)


def test_dp_attention_capacity_is_per_rank(catalog) -> None:
    """Attention data parallel: each of the 8 ranks keeps the whole MLA latent of its own sequences,
    61 layers x (512 + 64) x 1 B = 35,136 B per token (FP8): usable bytes for 100 more sequences of 2,048
    tokens on every GPU add 8 x 100 to the replica."""
    from mi400plan.hardware import serve_hardware
    from mi400plan.params import count_params
    from mi400plan.specs.layout import infer_recipe

    m = catalog.get("models", "deepseek-r1").spec
    hw, _ = serve_hardware(catalog, "h200", "fp8", "nominal", matmul=None, hbm=None, model_class="moe")
    wl = core.Workload(m, count_params(m), infer_recipe("fp8", kv_dtype="fp8"), 1024, 1024)
    added = 100 * 2048 * 61 * (512 + 64) * 1 / (1.0 - wl.recipe.reserve.fraction)
    base = float(kv_capacity(wl, hw, tp=8, pp=1, dpa=True, batch=256.0, context=2048.0))
    big = float(kv_capacity(wl, replace(hw, hbm_bytes=hw.hbm_bytes + added), tp=8, pp=1, dpa=True, batch=256.0,
                            context=2048.0))
    assert base > 0 and base % 8 == 0
    assert big - base == pytest.approx(800, abs=8)
