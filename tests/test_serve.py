"""``mi400plan serve``: the inference model checked against hand arithmetic, the ``fit`` KV model, and
the command's contract (exit codes, JSON, CSV)."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from mi400plan import serve as core


def _setup(catalog, model: str, sku: str, precision: str = "fp8", kv: str = "fp8", i: int = 1024, o: int = 1024):
    from mi400plan.hardware import serve_hardware as _hardware
    from mi400plan.params import count_params
    from mi400plan.specs.layout import infer_recipe

    m = catalog.get("models", model).spec
    from mi400plan.serve_calibration import model_class

    hw, _ = _hardware(catalog, sku, precision, "nominal", matmul=None, hbm=None, model_class=model_class(m))
    wl = core.Workload(m, count_params(m), infer_recipe(precision, kv_dtype=kv), i, o)
    return wl, hw


# --- MoE: expected distinct experts ------------------------------------------------------------------


def test_expected_distinct_experts_deepseek_v3_and_mixtral(catalog) -> None:
    # DeepSeek-V3: E = 256 routed experts, top-8. One token: exactly 8. Two tokens: each expert is missed
    # by one token with probability 248/256 = 0.96875, by both with 0.96875^2 = 0.9384765625, so
    # 256 x (1 - 0.9384765625) = 256 x 0.0615234375 = 15.75 distinct experts (not 16, not 256).
    ds = catalog.get("models", "deepseek-v3").spec.moe
    assert (ds.num_experts, ds.top_k) == (256, 8)
    assert core.expected_distinct_experts(256, 8, 1) == pytest.approx(8.0)
    assert core.expected_distinct_experts(256, 8, 2) == pytest.approx(15.75)
    # 64 tokens: 256 x (1 - 0.96875^64); 0.96875^64 = exp(64 ln 0.96875) = exp(64 x -0.0317486983) = 0.131110
    assert core.expected_distinct_experts(256, 8, 64) == pytest.approx(256 * (1 - 0.131110), rel=1e-4)
    # Mixtral 8x7B: E = 8, top-2. Two tokens: 8 x (1 - 0.75^2) = 8 x 0.4375 = 3.5; four: 8 x (1 - 0.31640625) = 5.46875
    mx = catalog.get("models", "mixtral-8x7b").spec.moe
    assert (mx.num_experts, mx.top_k) == (8, 2)
    assert core.expected_distinct_experts(8, 2, [1, 2, 4]) == pytest.approx([2.0, 3.5, 5.46875])
    # Large batches touch every expert, never more.
    assert core.expected_distinct_experts(256, 8, 4096) == pytest.approx(256.0)


def test_moe_decode_reads_only_the_activated_experts(catalog) -> None:
    """One decode token of DeepSeek-V3 reads 8/256 of each GPU's routed-expert bytes; the weight bytes
    per GPU grow with the batch as E (1 - (1 - k/E)^B) / E until every expert is read."""
    wl, hw = _setup(catalog, "deepseek-v3", "mi355x")
    T = core.terms(wl.model, wl.counts, wl.recipe)
    b = np.array([1.0, 2.0, 4096.0])
    d = core.forward_stage(T, wl, hw, tp=8, pp=1, ep=8, dpa=False, tokens=b, seqs=b, context=1536, causal=False)
    routed = wl.recipe.weight_bytes * T.routed / 8 * T.moe_layers  # one GPU's share of all routed experts, bytes
    rest = d.weight_bytes - routed * np.array([8 / 256, 15.75 / 256, 1.0])
    assert rest == pytest.approx(np.full(3, rest[0]))


# --- dense decode bounds -----------------------------------------------------------------------------


def test_decode_batch1_bounded_by_weight_bytes_over_hbm(catalog) -> None:
    """Llama-3.1-70B FP8 on 8 x MI355X (TP8), batch 1: every step reads each GPU's weight shard.

    Block weights: 80 layers x (attention 8192 x (8192 + 2 x 1024) + 8192 x 8192 = 150,994,944, FFN
    3 x 8192 x 28672 = 704,643,072) = 68,451,041,280 params at 1 B, /8 = 8,556,380,160 B per GPU; LM head
    128,256 x 8192 x 2 B / 8 = 262,668,288 B. Total 8,819,048,448 B / 8.0e12 B/s peak HBM = 1.102 ms: TPOT >= that.
    """
    wl, hw = _setup(catalog, "llama3.1-70b", "mi355x")
    ev = core.evaluate(wl, hw, tp=8, pp=1, ep=1, dpa=False, batch=1.0)
    bound = (68_451_041_280 / 8 + 262_668_288) / 8.0e12
    assert bound == pytest.approx(1.1024e-3, rel=1e-3)
    assert float(ev["tpot"]) >= bound
    assert float(ev["weight_bytes"]) == pytest.approx(68_451_041_280 / 8 + 262_668_288)


@pytest.mark.parametrize("sku", ["mi355x", "b200", "h100"])
def test_throughput_below_compute_roofline_and_monotone_in_batch(catalog, sku: str) -> None:
    """Tokens/s/GPU x 2 x matmul weights per token never exceeds the dense peak; TPOT never falls as the
    batch grows; tokens/s/GPU never falls with the batch while the KV cache fits."""
    from mi400plan.params import matmul_params_per_token

    wl, hw = _setup(catalog, "llama3.1-70b", sku)
    b = np.arange(1, 1025, dtype=np.float64)
    for tp in (1, 2, 4, 8):
        ev = core.evaluate(wl, hw, tp=tp, pp=1, ep=1, dpa=False, batch=b)
        mem = core.memory(wl, hw, tp=tp, pp=1, dpa=False, batch=b)
        flops = ev["total_tps_gpu"] * 2.0 * matmul_params_per_token(wl.model)
        assert (flops <= hw.peak_flops).all()
        assert (np.diff(ev["tpot"]) >= -1e-15).all()
        fit = mem["kv_fit"]
        if fit.any():
            last = int(np.nonzero(fit)[0].max())
            assert (np.diff(ev["out_tps_gpu"][: last + 1]) >= -1e-9).all()


# --- GEMMs priced by the shared shape-aware model (mi400plan/gemm.py) -------------------------------------


def test_prefill_gemm_priced_by_the_shared_gemm_model(catalog) -> None:
    """Llama-3.1-70B FP8 on MI355X, TP8, one 1,024-token prompt. The FFN gate+up GEMM per GPU is
    M = 1,024 tokens, N = 2 x 28,672 / 8 = 7,168, K = 8,192.

    MI355X: 256 CUs, FP8 dense peak 5,033.2 TFLOP/s, FP8 large-GEMM ceiling 0.468 (fitted on AMD's MLPerf
    Training v5.1 run) x the CDNA 4 dense-model serve calibration's FP8 scale 1.05 = 0.4914 (the MXFP4 points
    have their own: ``precision_fits``), HBM 8.0 TB/s at the calibrated FP8 0.90. Tile rule: 256 x 128 tiles:
    4 x 56 = 224 tiles, 1 wave of 256 CUs, fill = 1,024 x 7,168 / (256 x 256 x 128) = 7,340,032 / 8,388,608 =
    0.875; 128 x 128 tiles: 8 x 56 = 448, 2 waves, the same 0.875. Compute: 2 x 1,024 x 7,168 x 8,192 =
    120,259,084,288 FLOP / (5.0332e15 x 0.4914 x 0.875 = 2.1641502e15 FLOP/s) = 55.6 us. Memory: 7,168 x 8,192
    x 1 B weights + 2 B x 1,024 x (8,192 + 7,168) activations = 58,720,256 + 31,457,280 = 90,177,536 B /
    (8.0e12 x 0.90) = 12.5 us: compute-bound.

    The down projection: M = 1,024, N = 8,192, K = 28,672 / 8 = 3,584: 4 x 64 = 256 tiles, one full wave,
    fill 1; 2 x 1,024 x 8,192 x 3,584 = 60,129,542,144 FLOP / (5.0332e15 x 0.4914) = 24.3 us.

    Decode at batch 1, same gate+up weights: M = 1 row at the full-wave rate (0.04 us) against 58,720,256 +
    2 x (8,192 + 7,168) = 58,750,976 B / 7.2e12 B/s = 8.16 us: bandwidth-bound."""
    wl, hw = _setup(catalog, "llama3.1-70b", "mi355x")
    assert (hw.units, hw.peak_flops, hw.matmul_eff, hw.hbm_bw, hw.hbm_eff) == pytest.approx(
        (256, 5.0332e15, 0.4914, 8.0e12, 0.90))
    gate_up = 120_259_084_288 / (5.0332e15 * 0.4914 * 0.875)
    assert gate_up == pytest.approx(55.57e-6, rel=1e-3)
    assert float(core.shaped_gemm_time(1024, 7168, 8192, hw, 1.0)) == pytest.approx(gate_up, rel=1e-12)
    down = 60_129_542_144 / (5.0332e15 * 0.4914)
    assert down == pytest.approx(24.31e-6, rel=1e-3)
    T = core.terms(wl.model, wl.counts, wl.recipe)
    _, dense, _ = core.projection_times(T, wl, hw, tp=8.0, ep=1.0, dpa=False, tokens=1024.0,
                                        attn_w=T.attn / 8, decode=False)
    assert float(dense) == pytest.approx(gate_up + down, rel=1e-12)
    decode = float(core.shaped_gemm_time(1, 7168, 8192, hw, 1.0, decode=True))
    assert decode == pytest.approx(58_750_976 / 7.2e12, rel=1e-12)
    assert decode == pytest.approx(8.16e-6, rel=1e-3)


# --- KV-limited concurrency = fit --------------------------------------------------------------------


@pytest.mark.parametrize("sku", ["h100", "mi355x"])
def test_max_concurrency_at_8k_context_follows_fit(catalog, sku: str) -> None:
    """Llama-3.1-70B FP8 (fp8 KV) on one 8-GPU node, TP8, 8,192-token context (7,168 in + 1,024 out):
    serve's largest concurrency is exactly the largest --batch at which ``fit --mode infer`` fits.

    Hand check of the scale on H100: KV per token per GPU = 2 x 8 KV heads x 128 x 80 layers x 1 B / 8
    = 20,480 B, 167.8 MB per 8k sequence; room = 85.52 GB (nvidia-smi 81,559 MiB) x 0.95 - 2 GiB
    - 8.82 GB weights - ~1.1 GB scratch = ~69.2 GB, so about 412 sequences."""
    from mi400plan.api.fit import LayoutPins, fit
    from mi400plan.api.serve import ServeRequest, serve

    res = serve(catalog, "llama3.1-70b", [sku], ServeRequest(input_len=7168, output_len=1024, tp=[8], pp=[1],
                                                             concurrency="1..4096", ranges=False, top=1000))
    best = max(r.memory_bytes.max_concurrency for r in res.rows)
    assert 300 < best < 4096
    if sku == "h100":
        assert 81_559 * 2**20 * 0.95 - 2 * 2**30 - 8.82e9 - 1.1e9 == pytest.approx(69.2e9, rel=2e-3)
        assert 400 <= best <= 425
    at = fit(catalog, "llama3.1-70b", [sku], layout=LayoutPins(tp=8), mode="infer", precision="fp8", kv_dtype="fp8",
             batch=best, seq=8192)
    above = fit(catalog, "llama3.1-70b", [sku], layout=LayoutPins(tp=8), mode="infer",
                precision="fp8", kv_dtype="fp8", batch=best + 1, seq=8192)
    assert at.rows[0].fits and not above.rows[0].fits
    # fit's own report of the room agrees: batch x context at the limit
    assert at.rows[0].max_tokens >= best * 8192 > at.rows[0].max_tokens - 8192


# --- speculative decoding, queueing, disaggregation -----------------------------------------------------


def test_tokens_per_step_speculative() -> None:
    # (1 - p^(n+1)) / (1 - p): n = 1, p = 0.8 -> (1 - 0.64) / 0.2 = 1.8; n = 3, p = 0.7 -> (1 - 0.2401) / 0.3
    assert core.tokens_per_step(0, 0.9) == 1.0
    assert core.tokens_per_step(1, 0.8) == pytest.approx(1.8)
    assert core.tokens_per_step(3, 0.7) == pytest.approx(0.7599 / 0.3)
    assert core.tokens_per_step(2, 1.0) == 3.0


def test_steady_state_identities(catalog) -> None:
    """The replica's time budget: X (t_prefill + O t_step / B) = 1; TPOT = t_step / (1 - rho); TTFT =
    prefill + rho t_prefill / (2 (1 - rho)) (M/D/1 mean wait) + (1 - rho) t_step / 2 (the rest of the decode
    step the prompt arrives in) + the calibrated per-request overhead, with no stack's iteration rule given (prefill
    iterations apart)."""
    wl, hw = _setup(catalog, "llama3.1-8b", "h100")
    ev = core.evaluate(wl, hw, tp=1, pp=1, ep=1, dpa=False, batch=np.array([1.0, 32.0, 256.0]))
    X, O = ev["requests_per_s"], wl.output_len
    assert X * (ev["t_prefill"] + O * ev["t_step"] / np.array([1.0, 32.0, 256.0])) == pytest.approx(np.ones(3))
    rho = X * ev["t_prefill"]
    assert ev["tpot"] == pytest.approx(ev["t_step"] / (1 - rho))
    assert ev["ttft"] == pytest.approx(ev["t_prefill"] + rho * ev["t_prefill"] / (2 * (1 - rho))
                                       + (1 - rho) * ev["t_step"] / 2 + hw.request_overhead_s)
    # Hopper, dense models: 15 ms (serve_calibration; 35 ms before the fit compared InferenceX's median TTFT with
    # the model's median instead of its mean, 25 ms before the TTFT took each stack's iteration rule: on in-flight
    # batching the prompt's own iteration carries the decode batch, which the overhead had absorbed; 15 ms with the
    # CPU time per scheduled sequence fitted beside it)
    assert hw.request_overhead_s == pytest.approx(0.015)
    assert ev["out_tps_gpu"] == pytest.approx(X * O)


def test_batch_hold_by_hand() -> None:
    """TensorRT-LLM's batch waiting (20 iterations, 0.9 x 16,384 = 14,745.6 tokens), decode step 15 ms, 0.25
    prompts/s of 1,024 tokens, 4 decoding sequences, one prefill 60 ms: the tokens need k = ceil((14,745.6 - 4)
    / 1,024) = ceil(14.397) = 15 prompts, so the window is the timeout, W = min(20 x 0.015, 14 / 0.25) = 0.3 s;
    n = 0.25 x 0.3 = 0.075 prompts join it. Mean 0.3 x (1 + 0.0375) / 1.075 + 0.075 x 0.06 = 0.289535 + 0.0045
    = 0.294035 s; median (n <= 1): 0.3 + 0.0045 = 0.3045 s."""
    bw = core.BatchWait(20, 0.9 * 16384)
    mean, median = core.batch_hold(bw, 0.015, 0.25, 4.0, 1024.0, 1.0, 0.06)
    assert float(mean) == pytest.approx(0.294035, rel=1e-5)
    assert float(median) == pytest.approx(0.3045)
    # The token threshold binds: 1,843.2 tokens with 100 decodes need k = ceil(1,743.2 / 1,024) = 2 prompts;
    # at 20 prompts/s W = min(20 x 0.03, 1 / 20) = 0.05 s, n = 1: mean 0.05 x 1.5 / 2 + 1 x 0.06 = 0.0975 s,
    # median 0.05 + 0.06 = 0.11 s.
    mean, median = core.batch_hold(core.BatchWait(20, 1843.2), 0.03, 20.0, 100.0, 1024.0, 1.0, 0.06)
    assert (float(mean), float(median)) == pytest.approx((0.0975, 0.11))
    # One prompt reaches the threshold (k = ceil(996 / 1,024) = 1), or the waiting is off: no hold.
    assert float(core.batch_hold(core.BatchWait(20, 1000.0), 0.03, 20.0, 4.0, 1024.0, 1.0, 0.06)[1]) == 0.0
    assert float(core.batch_hold(None, 0.03, 20.0, 4.0, 1024.0, 1.0, 0.06)[0]) == 0.0
    # A prompt count instead (attention-DP balancing): 21.74 prompts at 1.2/s, 60 steps of 50 ms: W = min(3.0,
    # 20.74 / 1.2 = 17.3) = 3.0 s, n = 3.6: median 3.0 x 4.6 / 7.2 = 1.916667 s, mean 3.0 x 2.8 / 4.6 = 1.826087 s.
    mean, median = core.batch_hold(core.BatchWait(60, np.inf, 21.74), 0.05, 1.2, 64.0, 8192.0, 1.0, 0.0)
    assert (float(mean), float(median)) == pytest.approx((1.826087, 1.916667), rel=1e-6)


def test_batch_hold_matches_a_simulated_window() -> None:
    """The window by simulation: Poisson prompts at X = 5/s, a window opens at a prompt that finds none held and
    releases every held prompt W = 0.4 s later (the timeout binds: n = X W = 2). Mean hold W (1 + n / 2) / (1 + n)
    = 0.4 x 2 / 3 = 0.2667 s; median W (1 + n) / (2 n) = 0.4 x 3 / 4 = 0.3 s (no prefill: pf_lat = 0)."""
    rng = np.random.default_rng(11)
    arr = np.cumsum(rng.exponential(1.0 / 5.0, 200_000))
    holds, end = [], -1.0
    for t in arr:
        if t >= end:
            end = t + 0.4
        holds.append(end - t)
    mean, median = core.batch_hold(core.BatchWait(1, 1e9), 0.4, 5.0, 0.0, 1024.0, 1.0, 0.0)
    assert np.mean(holds) == pytest.approx(float(mean), rel=0.02) and float(mean) == pytest.approx(0.8 / 3)
    assert np.median(holds) == pytest.approx(float(median), rel=0.02) and float(median) == pytest.approx(0.3)


def test_md1_wait_median_by_hand() -> None:
    """At rho <= 1/2 half the prompts find the server idle: median wait 0. At rho = 0.8 with mean wait 0.2 s:
    0.2 / 0.8 x ln(1.6) = 0.25 x 0.470004 = 0.117501 s."""
    assert float(core.md1_wait_median(0.05, 0.5)) == 0.0
    assert float(core.md1_wait_median(0.2, 0.8)) == pytest.approx(0.117501, rel=1e-5)


def test_evaluate_adds_the_batch_hold_and_reports_the_median(catalog) -> None:
    """With batch waiting the mean TTFT grows by exactly ``batch_hold``; the median TTFT swaps the M/D/1 mean wait
    for its median (0 at rho <= 1/2) and is never above the mean here."""
    wl, hw = _setup(catalog, "llama3.1-70b", "b200")
    b = np.array([4.0, 64.0, 512.0])
    ev = core.evaluate(wl, hw, tp=1, pp=1, ep=1, dpa=False, batch=b)
    held = core.evaluate(wl, hw, tp=1, pp=1, ep=1, dpa=False, batch=b, batch_waiting=core.BatchWait(20, 14745.6))
    assert held["ttft"] - ev["ttft"] == pytest.approx(held["batch_hold"])
    assert (held["batch_hold"] >= 20 * ev["t_step"] * 0.5).all()
    rho, pf = ev["rho"], ev["t_prefill"]
    wq = rho * pf / (2 * (1 - rho))
    assert ev["ttft_median"] == pytest.approx(ev["ttft"] - wq + core.md1_wait_median(wq, rho))
    assert (ev["ttft_median"] <= ev["ttft"]).all()


def test_speculation_raises_interactivity(catalog) -> None:
    from dataclasses import replace

    wl, hw = _setup(catalog, "llama3.1-70b", "b200")
    base = core.evaluate(wl, hw, tp=8, pp=1, ep=1, dpa=False, batch=4.0)
    spec = core.evaluate(replace(wl, spec_tokens=1, spec_acceptance=0.8), hw, tp=8, pp=1, ep=1, dpa=False, batch=4.0)
    assert float(spec["tokens_per_step"]) == pytest.approx(1.8)
    assert float(spec["tps_user"]) > float(base["tps_user"])


def test_disaggregated_ttft_includes_kv_transfer(catalog) -> None:
    """The prompt's KV (Llama-3.1-70B bf16: 2 x 8 x 128 x 80 x 2 B = 327,680 B per token, 1,024 tokens =
    335.5 MB) crosses scale-out on the replica's 8 NICs of 400 Gb/s = 50 GB/s each x efficiency."""
    wl, hw = _setup(catalog, "llama3.1-70b", "h100", precision="fp8", kv="bf16")
    ev = core.evaluate(wl, hw, tp=8, pp=1, ep=1, dpa=False, batch=64.0, disagg=True)
    so = hw.scale_out
    expect = 327_680 * 1024 / (8 * so.bw_per_dir * so.efficiency) + so.latency
    assert float(ev["kv_transfer"]) == pytest.approx(expect)
    assert float(ev["ttft"]) > float(ev["t_prefill"]) + expect * 0.999
    assert float(ev["prefill_replicas"]) > 0


def test_pareto_front() -> None:
    inter = np.array([100.0, 50.0, 50.0, 10.0, 90.0])
    tput = np.array([10.0, 40.0, 30.0, 35.0, 5.0])
    assert core.pareto_front(inter, tput).tolist() == [0, 1]


# --- the command ----------------------------------------------------------------------------------------


def test_default_command_works(cli) -> None:
    r = cli(["serve", "llama3-70b", "--sku", "mi355x", "--sku", "b200", "--top", "3"])
    assert r.exit_code == 0, r.output
    assert "Pareto curve: mi355x, 8 GPUs" in r.stdout and "Pareto curve: b200, 8 GPUs" in r.stdout
    assert "equal interactivity" in r.stdout


def test_json_envelope_has_every_term(cli) -> None:
    r = cli(["serve", "mixtral-8x7b", "--sku", "h200", "--top", "2", "--json"])
    assert r.exit_code == 0, r.output
    env = json.loads(r.stdout)
    assert env["command"] == "serve" and env["status"] == "ok"
    row = env["data"]["rows"][0]
    for k in ("layout", "concurrency", "tokens_per_s_per_gpu", "tokens_per_s_per_user", "ttft_s", "tpot_s",
              "memory_bytes", "decode_s", "prefill_s", "ranges"):
        assert k in row
    assert {"weights", "attention", "kernel_overhead", "tp", "ep", "pp", "lm_head", "draft", "step"} <= set(row["decode_s"])
    assert {"prefill", "queue", "kv_transfer"} <= set(row["prefill_s"])
    assert sum(env["data"]["rejected"].values()) + env["data"]["valid"] == env["data"]["evaluated"]


def test_csv(cli) -> None:
    r = cli(["serve", "llama3.1-8b", "--sku", "h100", "--top", "2", "--format", "csv", "--no-ranges"])
    assert r.exit_code == 0, r.output
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 3
    assert "decode_s.weights" in lines[0] and "tokens_per_s_per_gpu" in lines[0]


def test_sla_ranking_and_costs(cli) -> None:
    r = cli(["serve", "llama3.1-70b", "--sku", "h200", "--interactivity", "30", "--ttft", "2s", "--gpu-hour-cost",
             "2.50", "--json", "--top", "3"])
    env = json.loads(r.stdout)
    rows = env["data"]["rows"]
    assert rows and all(x["tokens_per_s_per_user"] >= 30 and x["ttft_s"] <= 2 for x in rows)
    tps = [x["tokens_per_s_per_gpu"] for x in rows]
    assert tps == sorted(tps, reverse=True)
    layouts = [tuple(x["layout"][k] for k in ("tp", "pp", "ep", "dp_attention")) for x in rows]
    assert len(set(layouts)) == len(layouts)  # one row per layout, at its best concurrency
    x = rows[0]
    # $/Mtok out = $2.50 / 3600 s x (1 - prefill share) / (output tokens/s/GPU) x 1e6
    assert x["cost_per_mtok_output"] == pytest.approx(2.5 / 3600 * (1 - x["prefill_share"]) / x["tokens_per_s_per_gpu"] * 1e6)


# --- bad input --------------------------------------------------------------------------------------


def test_unmeetable_sla_names_the_binding_term(cli) -> None:
    r = cli(["serve", "llama3.1-70b", "--sku", "mi300x", "--tpot", "0.1ms", "--check", "--no-ranges"])
    assert r.exit_code == 4, r.output
    assert "TPOT binds" in r.stdout and "nearest:" in r.stdout
    j = cli(["serve", "llama3.1-70b", "--sku", "mi300x", "--tpot", "0.1ms", "--json", "--no-ranges"])
    env = json.loads(j.stdout)
    assert env["data"]["skus"][0]["sla_binding"] == "TPOT"


def test_lengths_beyond_context(cli) -> None:
    r = cli(["serve", "mixtral-8x7b", "--sku", "h100", "--input-len", "32k", "--output-len", "1k"])
    assert r.exit_code == 2
    assert "exceeds" in r.output and "32,768" in r.output


def test_undisclosed_precision(cli) -> None:
    r = cli(["serve", "llama3.1-70b", "--sku", "mi300x", "--precision", "mxfp4"])
    assert r.exit_code == 3
    assert "fp4" in r.output
    r = cli(["serve", "llama3.1-70b", "--sku", "mi355x", "--precision", "nvfp4"])
    assert r.exit_code == 3 and "NVFP4" in r.output


@pytest.mark.parametrize("args", [["--concurrency", "0"], ["--gpus", "0"], ["--tp", "3"], ["--pp", "7"], ["--ep", "2"], ["--input-len", "abc"], ["--tpot", "-5ms"],
                                  ["--spec-tokens", "2"], ["--spec-acceptance", "1.5", "--spec-tokens", "1"],
                                  ["--gpu-hour-cost", "-1"], ["--precision", "fp3"]])
def test_bad_values_exit_2(cli, args: list[str]) -> None:
    r = cli(["serve", "llama3.1-8b", "--sku", "h100", *args])
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output


@pytest.mark.parametrize("model,sku,prec,tp,ep,dpa", [("deepseek-r1", "mi355x", "mxfp4", 8, 8, True),
                                                        ("deepseek-r1", "h200", "fp8", 8, 1, False),
                                                        ("mixtral-8x7b", "b200", "fp8", 8, 8, False)])
def test_moe_tpot_and_throughput_monotone(catalog, model, sku, prec, tp, ep, dpa) -> None:
    """The same two checks for MoE layouts (expert activation grows with the batch, DP-attention, EP)."""
    wl, hw = _setup(catalog, model, sku, precision=prec)
    b = np.arange(1, 1025, dtype=np.float64)
    ev = core.evaluate(wl, hw, tp=tp, pp=1, ep=ep, dpa=dpa, batch=b)
    fit = core.memory(wl, hw, tp=tp, pp=1, dpa=dpa, batch=b)["kv_fit"]
    assert fit[0]
    last = int(np.nonzero(fit)[0].max())
    assert (np.diff(ev["tpot"]) >= -1e-15).all()
    assert (np.diff(ev["out_tps_gpu"][: last + 1]) >= -1e-9).all()


def test_curves_are_pareto_fronts(cli) -> None:
    env = json.loads(cli(["serve", "llama3.1-8b", "--sku", "h100", "--sku", "mi300x", "--no-ranges", "--json"]).stdout)
    curves = env["data"]["curves"]
    assert [c["sku"] for c in curves] == ["h100", "mi300x"]
    for c in curves:
        x, y = c["tokens_per_s_per_user"], c["tokens_per_s_per_gpu"]
        assert len(x) == len(y) > 2
        assert x == sorted(x) and y == sorted(y, reverse=True)  # more interactivity costs throughput


def test_kv_limited_concurrency_is_a_lower_bound_when_the_largest_searched_fits(cli) -> None:
    """--concurrency 64 on 8 B200 (192 GB) for Llama 3.1 70B: by hand, the fp8 KV cache takes 80 layers x 8 KV
    heads x 128 x 2 (K, V) x 1 byte = 163,840 B per token, 2,048 tokens a sequence = 0.34 GB; TP8 keeps about
    8 x 192 - 70 = 1,466 GB for it, thousands of sequences. The search stops at 64, so the line says 64+
    (at least), not 64."""
    r = cli(["serve", "llama3.1-70b", "--sku", "b200", "--concurrency", "64", "--tp", "8", "--no-ranges"],
            env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    line = next(x for x in r.output.splitlines() if x.startswith("KV-limited concurrency"))
    assert "TP8 64+" in line


# --- prompts batched into one prefill pass ----------------------------------------------------------------


def test_causal_attention_of_k_prompts_is_k_times_one_prompt(catalog) -> None:
    """Llama 2 70B, TP1: 64 heads of 128, 8 KV heads. One 222-token prompt attends to its own prefix, mean
    context 111: 4 x 64 x 128 = 32,768 FLOP per (query, key) pair per layer, x 222 x 111 = 807,469,056 FLOP;
    its KV (2 x 8 x 128 = 2,048 elements per token per layer, FP8) written and read back once: 2,048 x 222 x 2
    = 909,312 B. Eight such prompts in one pass (1,776 tokens, 8 sequences) cost exactly eight times that,
    not one 1,776-token prompt's 32,768 x 1,776 x 888 = 51,678,019,584 FLOP."""
    wl, _ = _setup(catalog, "llama2-70b", "mi300x", i=222, o=300)
    T = core.terms(wl.model, wl.counts, wl.recipe)
    one = core.attention_core(T, wl, tp=np.float64(1), dpa=np.bool_(False), t=np.float64(222), s=np.float64(1),
                              ctx=np.float64(0), causal=True)
    eight = core.attention_core(T, wl, tp=np.float64(1), dpa=np.bool_(False), t=np.float64(1776), s=np.float64(8),
                                ctx=np.float64(0), causal=True)
    assert float(one.core_flops) == pytest.approx(807_469_056)
    assert float(one.kv_bytes) == pytest.approx(909_312)
    assert float(eight.core_flops) == pytest.approx(8 * 807_469_056)
    assert float(eight.kv_bytes) == pytest.approx(8 * 909_312)


def test_prompts_per_prefill_from_a_token_budget() -> None:
    """MLPerf Offline fills each pass to the budget: AMD's vLLM 40,960 tokens / 222-token prompts = 184
    (184 x 222 = 40,848; 185 x 222 = 41,070 is over); TensorRT-LLM's 3,584 -> 16 (3,552), 1,536 -> 6 (1,332);
    a prompt longer than the budget still runs, alone."""
    from mi400plan.serve_calibration import Measured

    assert [core.prompts_per_prefill(222, b) for b in (40960, 65536, 3584, 1536, 100)] == [184, 295, 16, 6, 1]
    m = Measured("M1", "mi300x", "llama2-70b", "fp8", "fp8", 1, "max_throughput", 222, 302, 0, 3475.5)
    assert m.prompts_per_pass() == 1
    assert replace(m, prefill_tokens=40960).prompts_per_pass() == 184
    assert replace(m, prefill_prompts=8).prompts_per_pass() == 8


def test_prefill_budget_is_per_attention_rank() -> None:
    """With attention data parallel the budget is each rank's: NVIDIA's MLPerf v5.1 DeepSeek-R1 Offline
    configurations give TensorRT-LLM max_num_tokens 4,608 (B200, GB200) and 6,656 (GB300); 804-token prompts:
    4,608 // 804 = 5 (4,020; 6 x 804 = 4,824 is over) per rank, x 8 ranks = 40 per pass; 6,656 // 804 = 8
    (6,432) x 8 = 64. Without attention DP the same row's budget is the replica's: 5."""
    from mi400plan.serve_calibration import Measured

    m = Measured("M2", "b200", "deepseek-r1", "nvfp4", "fp8", 8, "max_throughput", 804, 3736, 0, 33379.0,
                 dpa=True, prefill_tokens=4608)
    assert m.prompts_per_pass() == 40
    assert replace(m, prefill_tokens=6656).prompts_per_pass() == 64
    assert replace(m, dpa=False).prompts_per_pass() == 5


def test_concurrency_grid_stops_at_the_submissions_cap() -> None:
    """A cap of 4,096 sequences (NVIDIA's DeepSeek-R1 configurations: 512 per attention rank x 8) keeps the
    grid's points up to it and adds 4,096 itself; without a cap the grid reaches 16,384."""
    from mi400plan.serve_calibration import MAX_THROUGHPUT_GRID, Measured

    m = Measured("M2", "gb300", "deepseek-r1", "nvfp4", "fp8", 8, "slo_throughput", 804, 3676, 0, 23258.6,
                 dpa=True)
    assert float(m.concurrency_grid().max()) == 16384.0
    g = replace(m, max_seqs=4096).concurrency_grid()
    assert float(g.max()) == 4096.0
    assert 4096.0 in g and 4096.0 not in MAX_THROUGHPUT_GRID
    assert len(g) == int(np.sum(MAX_THROUGHPUT_GRID < 4096)) + 1


def test_prefill_pass_of_k_prompts_shares_its_time_and_waits_to_fill(catalog) -> None:
    """k prompts per pass: each prompt's GPU time is the pass's over k, so the request rate is
    X = 1 / (t_pass / k + O t_step / B); the first token comes after the whole pass, and a prompt arriving at
    random first waits (k - 1) / (2 X) for the pass to fill (the i-th of k waits (k - i) / X). One prompt
    per pass is the default and waits for nothing."""
    wl, hw = _setup(catalog, "llama2-70b", "mi300x", i=222, o=300)
    T = core.terms(wl.model, wl.counts, wl.recipe)
    b, k = 400.0, 8
    one = core.evaluate(wl, hw, tp=1, pp=1, ep=1, dpa=False, batch=b)
    assert float(one["batch_wait"]) == 0.0
    ev = core.evaluate(wl, hw, tp=1, pp=1, ep=1, dpa=False, batch=b, prefill_prompts=k)
    t_pass = float(core.forward_stage(T, wl, hw, tp=1, pp=1, ep=1, dpa=False, tokens=222 * k, seqs=k, context=0.0,
                                      causal=True).total)
    assert float(ev["t_prefill"]) == pytest.approx(t_pass)
    x = 1.0 / (t_pass / k + 300 * float(ev["t_step"]) / b)
    assert float(ev["requests_per_s"]) == pytest.approx(x)
    assert float(ev["batch_wait"]) == pytest.approx((k - 1) / (2 * x))
    # Sharing the pass's launches and filling its GEMMs makes each prompt cheaper than one alone.
    assert t_pass / k < float(one["t_prefill"])
