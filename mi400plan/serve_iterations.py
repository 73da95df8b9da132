"""How a serving stack's scheduler builds its iterations, and the time to first token it gives in the
steady-state model (``serve.evaluate``; the request-level simulation ``serve_sim`` runs the same rules).

Two iteration rules (``profiles/serving`` ``[scheduler] prefill_with_decodes``):

* prompts share iterations with the running decodes (TensorRT-LLM's in-flight batching,
  ``tensorrt_llm/_torch/pyexecutor/py_executor.py`` ``_schedule``, and the performance tuning guide the
  TensorRT-LLM profile cites; vLLM V1's scheduler, ``vllm/v1/core/sched/scheduler.py``: decodes first, then
  prompt tokens within ``max_num_batched_tokens``): a prompt runs in the next iteration, which also carries
  the whole decode batch, so its first token comes at the end of an iteration of about ``t_step`` + its
  prefill (:func:`mixed_iteration_wait`);
* prefill iterations apart (SGLang's default, vLLM V0's prefill-first rule): ``serve.prompt_wait``'s M/D/1
  queue.

TensorRT-LLM's batch waiting (``serve.BatchWait``) on in-flight batching: :func:`held_release`.
Units: seconds, prompts per second, tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


# Prompt counts summed exactly by :func:`poisson_tails` (a larger count: the deterministic limit).
MAX_EXACT_ARRIVALS = 512
# Fixed-point iterations (damped by half) of :func:`held_release`'s cycle.
CYCLE_ITERATIONS = 16


@dataclass(frozen=True)
class BatchWait:
    """TensorRT-LLM's batch waiting (``batch_wait_timeout_iters``, ``batch_wait_max_tokens_ratio`` x
    ``max_num_tokens``; both 0, off, by default): context requests are held while generation requests run,
    until ``iters`` iterations have passed or the scheduled tokens (prompts + one per decode) reach
    ``tokens`` (``tensorrt_llm/_torch/pyexecutor/py_executor.py`` ``_schedule`` / ``_waiting_requests``,
    TensorRT-LLM 1.1, 2025). ``prompts`` > 0: the hold ends when that many prompts are held instead of at a
    token count (attention-DP balancing, ``attention_dp_config.enable_balance``: context requests wait until
    every attention rank has one or ``timeout_iters`` pass; ``_balance_adp_requests``, same file)."""

    iters: int
    tokens: float
    prompts: float = 0.0
    # Attention-DP balancing's batching wait (``attention_dp_config.batching_wait_iters``): once the hold is
    # released by ``prompts`` (every rank holds a context request), this many more iterations run before the
    # prompts start. The request simulation applies it (``serve_sim._Sim._holding``); the steady state's hold
    # (``held_release`` / ``serve.batch_hold``) has no such phase.
    then_iters: int = 0


def release_count(bw: BatchWait, shape: tuple[int, ...], batch: Any, input_len: float,
                  decode_tokens: float) -> np.ndarray:
    """Prompts whose arrival releases a :class:`BatchWait` hold on a replica decoding ``batch`` sequences:
    ``bw.prompts`` (attention-DP balancing), else ``ceil((tokens - batch x decode_tokens) / input_len)``, the
    prompts whose tokens with the decodes' reach the threshold."""
    if bw.prompts > 0:
        return np.full(shape, float(bw.prompts))
    b = np.asarray(batch, dtype=np.float64)
    return np.ceil(np.maximum(bw.tokens - b * decode_tokens, 0.0) / input_len) + np.zeros(shape)


@dataclass(frozen=True)
class Iterations:
    """How the serving stack's scheduler builds an iteration (``profiles/serving`` ``[scheduler]``).

    ``mixed`` (``prefill_with_decodes``): a prompt joins the next iteration beside the whole running decode
    batch (TensorRT-LLM's in-flight batching, ``tensorrt_llm/_torch/pyexecutor/py_executor.py`` ``_schedule``;
    vLLM V1's unified scheduler, ``vllm/v1/core/sched/scheduler.py``: decodes first, then prompt tokens within
    ``max_num_batched_tokens``); False: prefill iterations apart, the decodes waiting (SGLang's default, vLLM
    V0). ``chunk_tokens``: the iteration's token budget when a prompt may be split over iterations (vLLM V1
    chunked prefill); ``inf`` when a prompt runs whole (TensorRT-LLM without chunked context)."""

    mixed: bool
    chunk_tokens: float = float("inf")

    def text(self) -> str:
        """How TTFT is priced under this rule, in words (``serve`` prints it with the stack)."""
        if not self.mixed:
            return ("TTFT: prefill iterations apart from the decodes (M/D/1 wait; [scheduler] prefill_with_decodes "
                    "= false)")
        chunk = (f", prompts chunked at {self.chunk_tokens:,.0f} tokens per iteration" if np.isfinite(self.chunk_tokens)
                 else ", whole prompts")
        return ("TTFT: a prompt runs in the next iteration beside the whole decode batch (in-flight batching; "
                f"[scheduler] prefill_with_decodes = true{chunk})")


def iterations_for(prefill_with_decodes: bool, chunked_prefill: bool, max_batched_tokens: float) -> Iterations:
    """The :class:`Iterations` of a stack's ``[scheduler]`` block: its token budget bounds a prompt's chunk only
    where the stack chunks prompts."""
    return Iterations(bool(prefill_with_decodes), float(max_batched_tokens) if chunked_prefill else float("inf"))


def gamma_median(mean: Any, var: Any) -> np.ndarray:
    """Median of a gamma distribution of this mean and variance (shape ``k = mean^2 / var``), by Wilson and
    Hilferty's cube-root approximation ``mean (1 - 1 / (9 k))^3`` (Wilson & Hilferty 1931, PNAS 17: 684),
    floored at 0 (very skewed: ``k < 1/9``). Same units as ``mean``."""
    m, v = np.asarray(mean, dtype=np.float64), np.asarray(var, dtype=np.float64)
    k = np.where(v > 0, m * m / np.maximum(v, 1e-300), np.inf)
    return m * np.maximum(1.0 - 1.0 / (9.0 * k), 0.0) ** 3


def mixed_iteration_wait(t_step: Any, pf_busy: Any, X: Any, n_iter: Any = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Mean and median seconds from a prompt's arrival to the start of its own prefill's share of the GPU when
    prompts share iterations with the running decodes (:class:`Iterations` ``mixed``), so that TTFT is this +
    the prompt's prefill (``pp x`` the busiest stage's) + overhead.

    Mechanism (the schedulers cited at :class:`Iterations`): a prompt arriving at a Poisson rate ``X`` waits for
    the running iteration to end, then runs in the next one, which also carries the whole decode batch (``t_step``)
    and every other prompt that arrived during the same iteration (``P = pf_busy`` each, the busiest stage); a
    prompt split over ``n_iter`` iterations (chunked prefill) pays ``t_step`` in each. Iteration lengths ``L =
    t_step + P N``, ``N`` the prompts that arrived during the previous iteration (Poisson of mean ``X L_prev``):
    with ``rho = X P``, the stationary moments are ``mu = t_step / (1 - rho)`` (TPOT's stretch),
    ``sigma^2 = P rho mu / (1 - rho^2)`` and third central moment ``(P^2 rho mu + 3 P rho^2 sigma^2) / (1 -
    rho^3)`` (the law of total cumulance on the Poisson count). An arrival falls in a length-biased iteration
    ``L~`` (``E[L~] = E[L^2] / mu``, ``E[L~^2] = E[L^3] / mu``); it waits ``U L~`` (``U`` uniform) for its
    end and ``P`` for each of the ``Poisson(X L~)`` others, so the wait ``W`` has mean ``E[L~] (1/2 + rho)`` and
    variance ``E[L~^2] / 12 + P rho E[L~] + (1/2 + rho)^2 Var(L~)``; then ``n_iter x t_step`` of decodes. Mean
    ``E[W] + n_iter t_step``; median: :func:`gamma_median` of ``W``'s two moments + ``n_iter t_step``.
    ``tests/test_serve_sim.py`` checks both against the simulation (rho 0.3-0.8). At ``X -> 0``: ``t_step / 2 +
    n_iter t_step`` (half an iteration's residual, then its own)."""
    ts, P, x = (np.asarray(v, dtype=np.float64) for v in (t_step, pf_busy, X))
    rho = np.minimum(x * P, 0.999)
    mu = ts / (1.0 - rho)
    s2 = P * rho * mu / (1.0 - rho ** 2)
    k3 = (P * P * rho * mu + 3.0 * P * rho ** 2 * s2) / (1.0 - rho ** 3)
    lt = mu + s2 / mu  # E[L~]
    lt2 = (k3 + 3.0 * mu * s2 + mu ** 3) / mu  # E[L~^2]
    w_mean = lt * (0.5 + rho)
    w_var = lt2 / 12.0 + P * rho * lt + (0.5 + rho) ** 2 * np.maximum(lt2 - lt * lt, 0.0)
    own = np.asarray(n_iter, dtype=np.float64) * ts
    return w_mean + own, gamma_median(w_mean, w_var) + own


def prompt_iterations(it: Iterations, input_len: float, batch: Any, decode_tokens: float) -> np.ndarray:
    """Iterations a prompt of ``input_len`` tokens spans: 1 when it runs whole, else ``ceil(input_len / (budget -
    batch x decode_tokens))``, the budget the running decodes leave (vLLM V1 schedules the decodes first)."""
    b = np.asarray(batch, dtype=np.float64)
    if not np.isfinite(it.chunk_tokens):
        return np.ones_like(b)
    room = np.maximum(it.chunk_tokens - b * decode_tokens, 1.0)
    return np.ceil(input_len / room)


def held_release(bw: BatchWait, t_step: Any, pf_busy: Any, X: Any, batch: Any, input_len: float,
                 decode_tokens: float) -> tuple[np.ndarray, np.ndarray]:
    """Mean and median seconds from a prompt's arrival to its first token, less its own prefill (the ``serve``
    TTFT's ``pf_lat`` is added by the caller), under TensorRT-LLM's batch waiting on in-flight batching.

    Rule (``py_executor.py`` ``_schedule`` / ``_waiting_requests``, TensorRT-LLM 1.1, 2025): while generation
    requests run, scheduled context requests are held; a counter of held iterations releases them all when it
    reaches ``iters`` or when the scheduled tokens (prompts + one per decode) reach ``tokens``, and restarts.
    ``k`` prompts release the hold: ``ceil((tokens - batch x decode_tokens) / input_len)`` or ``bw.prompts``.

    A cycle, mean-field: a release iteration ``R = t_step + n P`` runs the ``n`` held prompts (``P = pf_busy``);
    the ``m = X R`` that arrive meanwhile start the next hold (or, with probability ``e^-m`` none, the next
    arrival opens it after an idle gap); the hold lasts until ``iters x t_step`` or until the count reaches ``k``
    (the mean over the Poisson counts: :func:`_hold`; the release waits for the iteration boundary);
    ``n = m + X H + e^-m``, so ``n (1 - rho) = X (t_step + H) +
    e^-m`` (a fixed point: ``m`` and ``H`` depend on ``n``). A carried prompt waits the rest of ``R`` (``R / 2``)
    and ``H``; the opener ``H``; one arriving during the hold ``H / 2``; all then wait ``R`` for the first
    token. Median: the same three groups' mixture (uniform waits and an atom at ``H``). ``tests/test_serve_sim.py``
    checks it against the simulation with the rule (``serve_sim.Limits.batch_wait``)."""
    ts, P, x = (np.asarray(v, dtype=np.float64) for v in (t_step, pf_busy, X))
    rho = np.minimum(x * P, 0.999)
    k = release_count(bw, np.broadcast(ts, x, np.asarray(batch)).shape, batch, input_len, decode_tokens)
    th = bw.iters * ts
    t_open = poisson_tails(x * th, k - 1.0)[1]
    n = x * ts / (1.0 - rho) + 1.0
    for _ in range(CYCLE_ITERATIONS):
        m = x * (ts + n * P)
        e = np.exp(-m)
        h = _hold(th, x, k, m, ts, t_open)
        n = 0.5 * n + 0.5 * (x * (ts + h) + e) / (1.0 - rho)
    r = ts + n * P
    m = x * r
    e = np.exp(-m)
    h = _hold(th, x, k, m, ts, t_open)
    total = np.maximum(e + x * h + m, 1e-12)
    fo, fh, fc = e / total, x * h / total, m / total
    mean = fo * h + fh * h / 2.0 + fc * (h + r / 2.0) + r - P
    med = np.where(fh >= 0.5, 0.5 * h / np.maximum(fh, 1e-12),
                   np.where(fo + fh >= 0.5, h, h + r * (0.5 - fo - fh) / np.maximum(fc, 1e-12)))
    return mean, med + r - P


def poisson_tails(mu: Any, k: Any) -> tuple[np.ndarray, np.ndarray]:
    """``sum_{i=0}^{k-1} P(Pois(mu) >= i + 1)`` (``= E[min(Pois(mu), k)]``) and ``P(Pois(mu) >= k)``, for a
    fractional ``k`` linear between its integers (``k <= 0``: 0 and 1); counts above ``MAX_EXACT_ARRIVALS`` take
    the deterministic limit ``min(mu, k)`` and ``[mu >= k]``."""
    mu, k = np.broadcast_arrays(np.asarray(mu, dtype=np.float64), np.asarray(k, dtype=np.float64))
    k = np.maximum(k, 0.0)
    lo = np.minimum(np.floor(k), MAX_EXACT_ARRIVALS)
    frac = k - lo
    pmf = np.exp(-mu)
    tail = 1.0 - pmf  # P(N >= 1)
    acc = np.zeros(mu.shape)
    s_lo, s_hi, t_lo, t_hi = np.zeros(mu.shape), np.zeros(mu.shape), np.ones(mu.shape), tail.copy()
    uniform = lo.size > 0 and bool(np.all(lo == lo.flat[0]))
    for i in range(int(np.max(lo, initial=0.0)) + 1):  # after step i: acc = sum_{i' <= i} P(N >= i' + 1)
        acc = acc + tail
        pmf = pmf * mu / (i + 1)
        tail = np.maximum(tail - pmf, 0.0)  # P(N >= i + 2)
        if uniform:  # one count for every element (the usual case): no masks
            if i + 1 == lo.flat[0]:
                s_lo, t_lo = acc, tail + pmf
            elif i == lo.flat[0]:
                s_hi, t_hi = acc, tail + pmf
            continue
        s_lo, t_lo = np.where(lo == i + 1, acc, s_lo), np.where(lo == i + 1, tail + pmf, t_lo)
        s_hi, t_hi = np.where(lo == i, acc, s_hi), np.where(lo == i, tail + pmf, t_hi)
    big = k > MAX_EXACT_ARRIVALS
    s = s_lo * (1.0 - frac) + s_hi * frac
    t = t_lo * (1.0 - frac) + t_hi * frac
    return np.where(big, np.minimum(mu, k), s), np.where(big, (mu >= k) * 1.0, t)


def _hold(th: np.ndarray, x: np.ndarray, k: np.ndarray, carried: np.ndarray, ts: np.ndarray,
          t_open: np.ndarray) -> np.ndarray:
    """The hold's mean length (:func:`held_release`): it starts with the ``M`` prompts that arrived during the
    release iteration (Poisson of mean ``carried``; none: the next arrival opens it, counting 1) and ends at the
    timeout ``th`` or at the iteration boundary after the count reaches ``k``: ``H = integral_0^th P(M + N(t) <
    k) dt`` with ``M + N(t)`` Poisson of mean ``carried + x t``, so ``x H = sum_{i<k} [P(Pois(carried + x th) >=
    i+1) - P(Pois(carried) >= i+1)] - e^-carried P(Pois(x th) >= k)`` (the opener's one count; d/dmu of ``P(Pois(mu)
    >= i+1)`` is the Poisson probability of ``i``), plus ``t_step / 2`` times the probability the count reaches
    ``k`` during the hold. ``t_open``: ``P(Pois(x th) >= k - 1)``, which does not depend on ``carried``."""
    safe = np.maximum(x, 1e-300)
    s_end, t_end = poisson_tails(carried + x * th, k)
    s_0, t_0 = poisson_tails(carried, k)
    e = np.exp(-carried)
    h = np.maximum(s_end - s_0 - e * t_open, 0.0) / safe
    reached = np.clip(t_end - t_0 + e * (t_open - t_end), 0.0, 1.0)
    return np.minimum(h + reached * ts / 2.0, th)
