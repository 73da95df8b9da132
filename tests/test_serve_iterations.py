"""The serving stack's iteration rule in the steady-state model (``serve_iterations``, ``serve.evaluate``'s TTFT):
hand arithmetic, the request-level simulation (``serve_sim``) running the same scheduler, and TensorRT-LLM's batch
waiting in both."""

from __future__ import annotations

import numpy as np
import pytest

from mi400plan import serve as core
from mi400plan import serve_sim as S
from mi400plan.serve_iterations import (Iterations, gamma_median, held_release, iterations_for, mixed_iteration_wait,
                                        poisson_tails, prompt_iterations)


def _flat(step: float, prefill_per_100: float, seqs: int = 40_000) -> S.StepModel:
    """A step model by hand: every decode iteration ``step`` seconds whatever the batch, P(n) linear with
    ``prefill_per_100`` seconds per 100 prompt tokens."""
    return S.StepModel(decode_s=(0.0, *([step] * seqs)), prefill_tokens=(0.0, 1000.0),
                       prefill_s=(0.0, prefill_per_100 * 10))


def _poisson_prompts(step: float, prefill: float, rho: float, output: int, **limits) -> S.SimResult:
    """20,000 Poisson prompts of 100 tokens and ``output`` tokens at load ``rho`` of the prefill (rate
    ``rho / prefill``) on the :func:`_flat` replica, a budget no prompt reaches; the middle 16,000 measured."""
    n = 20_000
    gaps = np.random.default_rng(7).exponential(1.0, n)
    return S.simulate(np.cumsum(gaps) / (rho / prefill), np.full(n, 100), np.full(n, output), _flat(step, prefill),
                      S.Limits(max_batched_tokens=10**7, max_seqs=40_000, **limits), measure=slice(2000, n - 2000))


# --- hand arithmetic ------------------------------------------------------------------------------


def test_mixed_wait_at_low_load_is_half_an_iteration_then_one() -> None:
    """A prompt arriving at a near-idle replica on in-flight batching waits for the running decode iteration
    to end (t_step / 2 on average), then runs in the next one beside the decodes (t_step + its prefill): the
    wait before its prefill is 1.5 t_step = 0.15 s at t_step = 0.1 s; a prompt chunked over 2 iterations pays
    t_step in each: 0.05 + 0.2 = 0.25 s. The residual is uniform on (0, t_step): mean 0.05, variance 0.1^2 / 12,
    so the gamma of those moments has shape 3 and Wilson-Hilferty median 0.05 x (1 - 1/27)^3 = 0.05 x 0.892951 =
    0.0446476 s (the uniform's own median is 0.05: the approximation is 3.5 % short of the wait here)."""
    mean, median = mixed_iteration_wait(0.1, 0.05, 1e-9)
    assert (float(mean), float(median)) == pytest.approx((0.15, 0.1446476), rel=1e-6)
    assert float(mixed_iteration_wait(0.1, 0.05, 1e-9, 2.0)[0]) == pytest.approx(0.25, rel=1e-6)


def test_mixed_wait_by_hand_at_half_load() -> None:
    """t_step 0.1 s, prefill P 0.1 s, 5 prompts/s: rho = 0.5. Iteration lengths L = 0.1 + 0.1 N, N Poisson of
    mean 5 L_prev: mean mu = 0.1 / 0.5 = 0.2 s; variance P rho mu / (1 - rho^2) = 0.1 x 0.5 x 0.2 / 0.75 =
    0.0133333; an arrival's (length-biased) iteration has mean 0.2 + 0.0133333 / 0.2 = 0.2666667 s. It waits
    half of it for its end and P for each of the 5 x 0.2666667 = 1.3333 others: 0.2666667 x (0.5 + 0.5) =
    0.2666667 s; then the decodes of its own iteration, 0.1 s: 0.3666667 s.

    Median: third central moment (P^2 rho mu + 3 P rho^2 sigma^2) / (1 - rho^3) = (0.001 + 0.001) / 0.875 =
    0.00228571; E[L^3] = 0.00228571 + 3 x 0.2 x 0.0133333 + 0.008 = 0.0182857; E[L~^2] = 0.0182857 / 0.2 =
    0.0914286, Var(L~) = 0.0914286 - 0.2666667^2 = 0.0203175; the wait's variance 0.0914286 / 12 + 0.1 x 0.5 x
    0.2666667 + 1 x 0.0203175 = 0.0412698, gamma shape 0.0711111 / 0.0412698 = 1.723077, Wilson-Hilferty median
    0.2666667 x (1 - 1 / 15.507692)^3 = 0.2666667 x 0.818754 = 0.2183344; + 0.1 = 0.3183344 s."""
    mean, median = mixed_iteration_wait(0.1, 0.1, 5.0)
    assert float(mean) == pytest.approx(0.3666667, rel=1e-6)
    assert float(median) == pytest.approx(0.3183344, rel=1e-6)


def test_gamma_median_and_poisson_tails_by_hand() -> None:
    """Gamma of mean 1 and variance 1 (an exponential): Wilson-Hilferty (1 - 1/9)^3 = 0.702332 (exact ln 2 =
    0.693147). Poisson of mean 2: P(N >= 1) = 1 - e^-2 = 0.864665, P(N >= 2) = 1 - 3 e^-2 = 0.593994, so for
    k = 2 the sum is 1.458659 and the tail P(N >= 2); k = 1.5 halfway between k = 1 and k = 2."""
    assert float(gamma_median(1.0, 1.0)) == pytest.approx(0.702332, rel=1e-5)
    s, t = poisson_tails(2.0, 2.0)
    assert (float(s), float(t)) == pytest.approx((1.458659, 0.593994), rel=1e-5)
    s, t = poisson_tails(2.0, 1.5)
    assert (float(s), float(t)) == pytest.approx(((0.864665 + 1.458659) / 2, (0.864665 + 0.593994) / 2), rel=1e-5)
    assert tuple(float(x) for x in poisson_tails(2.0, 0.0)) == (0.0, 1.0)


def test_prompt_iterations_and_the_stacks_rules(catalog) -> None:
    """A whole prompt (TensorRT-LLM: no chunked context) takes one iteration; chunked (vLLM V1, 8,192 tokens) an
    8,192-token prompt beside 100 decodes takes ceil(8,192 / 8,092) = 2, a 1,024-token one 1. The profiles: TensorRT-LLM
    and vLLM mix prompts with decodes, SGLang runs them apart."""
    assert float(prompt_iterations(Iterations(True), 8192.0, 100.0, 1.0)) == 1.0
    chunked = iterations_for(True, True, 8192)
    assert prompt_iterations(chunked, 8192.0, np.array([100.0, 0.0]), 1.0).tolist() == [2.0, 1.0]
    assert float(prompt_iterations(chunked, 1024.0, 100.0, 1.0)) == 1.0
    from mi400plan.serving_stacks import scheduler_iterations

    rules = {n: scheduler_iterations(catalog.get("serving", n).spec.scheduler, "h200", 141e9)
             for n in ("trtllm", "vllm", "sglang")}
    assert rules["trtllm"] == Iterations(True, float("inf"))
    assert rules["vllm"] == Iterations(True, 8192.0)
    assert not rules["sglang"].mixed


def test_evaluate_first_token_never_sooner_than_one_decode_step(catalog) -> None:
    """On in-flight batching the first token comes at the end of an iteration that carries the decode batch: TTFT
    >= t_step + the prefill at every concurrency. The prefill-first rule (SGLang) may give less (a prompt
    preempts the decodes). TPOT is the same under both rules (the prefills stretch the decode iterations
    either way); only the wait before the prefill differs."""
    from tests.test_serve import _setup

    wl, hw = _setup(catalog, "llama2-70b", "h100", i=222, o=300)
    b = np.array([1.0, 16.0, 64.0, 256.0])
    mixed = core.evaluate(wl, hw, tp=1, pp=1, ep=1, dpa=False, batch=b, iterations=Iterations(True))
    apart = core.evaluate(wl, hw, tp=1, pp=1, ep=1, dpa=False, batch=b, iterations=Iterations(False))
    gpu = mixed["t_step"] + mixed["t_prefill"] + mixed["request_overhead"]  # + the time outside the GPU model
    assert (mixed["ttft"] >= gpu).all() and (mixed["ttft_median"] >= gpu).all()
    assert (apart["ttft"] < gpu).any()
    assert mixed["tpot"] == pytest.approx(apart["tpot"])
    assert mixed["ttft"] - apart["ttft"] == pytest.approx(mixed["queue"] - apart["queue"])


# --- against the simulation ----------------------------------------------------------------------------


@pytest.mark.parametrize("step,prefill", [(0.15, 0.02), (0.05, 0.1), (0.03, 0.03)])
def test_mixed_wait_matches_the_simulation(step: float, prefill: float) -> None:
    """Poisson prompts of 100 tokens on a replica whose every iteration carries the whole decode batch
    (``Limits(mixed=True)``, a budget no prompt reaches), decode iterations of ``step`` seconds whatever the
    batch: the simulated mean TTFT within 5 % and median within 8 % of ``P + mixed_iteration_wait`` at rho =
    0.3-0.8 (the decode step 1.5x the prefill down to half of it)."""
    for rho in (0.3, 0.5, 0.7, 0.8):
        x = rho / prefill
        r = _poisson_prompts(step, prefill, rho, 50)
        mean, median = mixed_iteration_wait(step, prefill, x)
        assert r.ttft.mean() == pytest.approx(prefill + float(mean), rel=0.05), rho
        assert np.median(r.ttft) == pytest.approx(prefill + float(median), rel=0.08), rho


def test_evaluate_ttft_matches_the_simulation_of_the_same_replica(catalog) -> None:
    """``serve.evaluate`` on in-flight batching against the request simulation of the same replica (Llama 3.1 8B
    FP8 on one H100, prompts of 2,048 tokens, 64 output tokens; the simulation's iteration cost from the same cost
    functions, ``serve_sim.step_model``) at the Poisson rate ``evaluate`` gives for 4-64 sequences, rho 0.28-0.73
    (0.29-0.81 before the CPU time per scheduled sequence): mean TTFT within 12 %, median within 15 %. A prefill-heavy replica (the prompt's prefill about 6 decode steps,
    so the simulated batch and its step vary with the arrivals) is the harder case for the steady state."""
    from mi400plan.hardware import serve_hardware
    from mi400plan.params import count_params
    from mi400plan.specs.layout import infer_recipe

    m = catalog.get("models", "llama3.1-8b").spec
    hw, _ = serve_hardware(catalog, "h100", "fp8", "nominal", matmul=None, hbm=None, model_class="dense")
    wl = core.Workload(m, count_params(m), infer_recipe("fp8", kv_dtype="fp8"), 2048, 64)
    b = np.array([4.0, 8.0, 16.0, 32.0, 64.0])
    ev = core.evaluate(wl, hw, tp=1, pp=1, ep=1, dpa=False, batch=b, iterations=Iterations(True))
    assert ev["rho"][0] == pytest.approx(0.28, abs=0.01) and ev["rho"][-1] == pytest.approx(0.73, abs=0.01)
    sm = S.step_model(wl, hw, S.Layout(1, 1, 1, False), max_seqs=512, context=2048 + 32, max_prompt=2048,
                      exact=[2048])
    n = 12_000
    gaps = np.random.default_rng(5).exponential(1.0, n)
    for j in range(len(b)):
        r = S.simulate(np.cumsum(gaps) / float(ev["requests_per_s"][j]), np.full(n, 2048), np.full(n, 64), sm,
                       S.Limits(max_batched_tokens=10**7, max_seqs=512), measure=slice(1000, n - 1000))
        assert r.ttft.mean() == pytest.approx(float(ev["ttft"][j]), rel=0.12), b[j]
        assert np.median(r.ttft) == pytest.approx(float(ev["ttft_median"][j]), rel=0.15), b[j]


def test_simulated_batch_wait_holds_for_the_timeout_by_hand() -> None:
    """TensorRT-LLM's batch waiting, 3 iterations and a token threshold no prompt reaches, decode 10 ms, P(100
    tokens) = 0.1 s. Request A decodes from t = 0; B (100 tokens, 2 output tokens) arrives at 0.005 and is
    scheduled at the boundary 0.010; held 3 decode iterations (0.040), then prefilled beside A: 0.040 + 0.010 +
    0.100 = 0.150, TTFT 0.145 s; its last token one iteration later, TPOT 0.010 s. Without the waiting B runs at
    0.010: first token 0.120, TTFT 0.115 s."""
    sm = _flat(0.01, 0.1, seqs=4)
    arr, inp, out = np.array([0.0, 0.005]), np.array([100, 100]), np.array([1000, 2])
    held = S.simulate(arr, inp, out, sm, S.Limits(batch_wait=core.BatchWait(3, 1e9)), measure=slice(1, 2),
                      preload=np.array([1]))
    assert held.ttft == pytest.approx([0.145]) and held.tpot == pytest.approx([0.010])
    free = S.simulate(arr, inp, out, sm, S.Limits(), measure=slice(1, 2), preload=np.array([1]))
    assert free.ttft == pytest.approx([0.115])


def test_simulated_batch_wait_releases_at_the_token_threshold_by_hand() -> None:
    """The same with a threshold of 150 tokens and 100 iterations: B alone schedules 100 + 1 (A's decode) = 101
    tokens, held; C (100 tokens) arrives at 0.025, scheduled at the boundary 0.030 (three iterations after 0.000):
    201 tokens >= 150, both released: 0.030 + 0.010 + 0.200 = 0.240. TTFT: B 0.235 s, C 0.215 s."""
    sm = _flat(0.01, 0.1, seqs=4)
    r = S.simulate(np.array([0.0, 0.005, 0.025]), np.array([100, 100, 100]), np.array([1000, 2, 2]), sm,
                   S.Limits(batch_wait=core.BatchWait(100, 150.0)), measure=slice(1, 3), preload=np.array([1]))
    assert r.ttft == pytest.approx([0.235, 0.215])


@pytest.mark.parametrize("step,prefill,bw", [
    (0.03, 0.02, core.BatchWait(20, 1e12)),  # the timeout binds
    (0.05, 0.01, core.BatchWait(10, 1e12)),
    (0.02, 0.01, core.BatchWait(20, 1400.0)),  # 14 prompts' tokens less the decodes' (InferenceX's Llama 1k/1k rule)
    (0.02, 0.05, core.BatchWait(40, np.inf, 8.0)),  # a prompt count (attention-DP balancing)
])
def test_held_release_matches_the_simulation(step: float, prefill: float, bw: core.BatchWait) -> None:
    """The batch-waiting cycle of ``held_release`` (with the iteration wait it replaces when larger, as
    ``serve.evaluate`` composes them) against the simulation of the same rule, Poisson prompts of 100 tokens,
    outputs of 400 (the decode batch ``X x 400 x mu``, never empty), rho 0.1-0.7: mean TTFT within 12 %, median
    within 15 %. (A hold ended by a count of 4 prompts or fewer has its median up to 30 % long at rho <= 0.3: the
    count's time is random, the model's median takes the mean.)"""
    for rho in (0.1, 0.3, 0.5, 0.7):
        x = rho / prefill
        r = _poisson_prompts(step, prefill, rho, 400, batch_wait=bw)
        b = x * 400 * step / (1 - rho)
        held, held_med = held_release(bw, step, prefill, x, b, 100.0, 1.0)
        free, free_med = mixed_iteration_wait(step, prefill, x)
        assert r.ttft.mean() == pytest.approx(prefill + max(float(held), float(free)), rel=0.12), rho
        assert np.median(r.ttft) == pytest.approx(prefill + max(float(held_med), float(free_med)), rel=0.15), rho


def test_held_release_timeout_cycle_by_hand() -> None:
    """The timeout binds and the prompts arriving during a release iteration start the next hold (X R >> 1):
    each cycle is the hold H = 20 x 0.03 = 0.6 s and the release iteration R = t_step + n P, with n = X (R + H):
    n (1 - rho) = X (t_step + H), at rho = 0.5 (X = 25/s, P = 0.02 s) n = 25 x 0.63 / 0.5 = 31.5, R = 0.03 + 0.63
    = 0.66 s. A prompt waits on average half of R + H for the release, then R: 0.63 + 0.66 = 1.29 s to its first
    token, 1.27 s besides its own prefill."""
    mean, median = held_release(core.BatchWait(20, 1e12), 0.03, 0.02, 25.0, 100.0, 100.0, 1.0)
    assert float(mean) == pytest.approx(1.27, rel=1e-3)
    assert float(median) == pytest.approx(1.27, rel=1e-3)


# --- the command ---------------------------------------------------------------------------------------


def test_serve_json_carries_the_median_ttft_and_the_rule(cli) -> None:
    """``serve --json`` rows carry ``ttft_median_s`` beside the mean ``ttft_s``; on TensorRT-LLM (B200's default
    stack, in-flight batching) both are at least the decode step + the prefill (+ the per-request overhead the
    calibration fits, 25 ms in the Blackwell dense TensorRT-LLM fit: at least that much more); the SKU block names
    the rule, and SGLang's is prefill apart. The schema describes the field."""
    import json

    r = cli(["serve", "llama3-70b", "--sku", "b200", "--top", "2", "--no-ranges", "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)["data"]
    for row in data["rows"]:
        floor = row["decode_s"]["step"] + row["prefill_s"]["prefill"] + 0.025
        assert row["ttft_s"] >= floor and row["ttft_median_s"] >= floor
    assert "prefill_with_decodes = true" in data["skus"][0]["ttft_rule"]
    sg = json.loads(cli(["serve", "llama3-70b", "--sku", "b200", "--top", "1", "--no-ranges", "--stack", "sglang",
                         "--json"]).stdout)["data"]
    assert "prefill_with_decodes = false" in sg["skus"][0]["ttft_rule"]
    row = json.loads(cli(["schema", "serve"]).stdout)["$defs"]["ServeRow"]["properties"]
    assert "median time to first token" in row["ttft_median_s"]["description"]
