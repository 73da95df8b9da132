"""KV-capacity admission of a closed-loop benchmark: a serving engine runs only the sequences its KV cache
holds; the other clients' requests wait for a slot.

Admission policy (the serving stack profile's ``[kv_admission] policy``, ``specs/serving.py``):

* ``reserve-full`` (TensorRT-LLM's default capacity scheduler policy ``GUARANTEED_NO_EVICT``): a request
  starts only when the KV of its whole prompt + output can be reserved, so the running sequences are
  those whose ``I + O`` tokens fit;
* ``current`` (vLLM, SGLang: admit on the blocks needed now, preempt and recompute when the cache runs
  out): in the steady state the running sequences hold on average ``I + O / 2`` tokens each (a decode
  is uniformly spread over its output), so the running batch is what the cache holds at that context.

Capacity ``K`` (sequences per replica, :func:`kv_capacity`): the cached tokens ``serve.memory``'s model
holds per replica (``memory.max_batch_x_context``, the ``fit --mode infer`` model: usable HBM less
weights, scratch and reserve, over the KV bytes per token; with attention data parallel, each rank's
room over the whole KV per token, times the ranks) divided by the context per sequence, floored.

Closed loop of ``C`` clients (each sends its next request when the previous one ends) on ``K < C`` slots
(:func:`closed_loop`): all ``K`` slots stay busy, the server runs the continuous-batching steady state at
``K`` sequences (``serve.evaluate(batch=K)``: its tokens/s and TPOT), completing ``X`` requests per
second; each request holds its slot for ``S = K / X`` seconds (Little's law over the slots). Over the
whole loop the ``C`` requests are either waiting or in a slot, so ``C = X (W + S)`` (Little's law over
the loop) and the mean wait before admission is ``W = C / X - S = (C - K) / K x S``. With first-come
first-served admission the queue holds ``C - K`` requests at every completion, so every request after
the first ``K`` of a run waits about ``W``: the median TTFT of a run much longer than one service
time is the steady-state TTFT at ``K`` plus ``W``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mi400plan.serve import BatchWait, ServeHardware, Workload, evaluate
from mi400plan.serve_iterations import Iterations

POLICIES = ("reserve-full", "current")


def admission_context(policy: str, input_len: float, output_len: float, output_cv2: float = 0.0) -> float:
    """Cached tokens per running sequence under ``policy`` (module docstring): ``I + O`` for reserve-full,
    the steady state's mean ``I + O / 2`` for current; with output lengths of squared coefficient of variation
    ``output_cv2`` the sequences in flight are length-biased, ``I + E[O^2] / E[O]`` and ``I + E[O^2] / (2 E[O])``
    (``inflight.in_flight_tokens``; Kleinrock 1975 sec. 5.2)."""
    from mi400plan.inflight import in_flight_tokens

    if policy == "reserve-full":
        return float(in_flight_tokens(input_len, output_len, output_cv2, whole=True))
    if policy == "current":
        return float(in_flight_tokens(float(input_len), float(output_len), output_cv2))
    raise ValueError(f"unknown KV admission policy {policy!r}; expected one of {', '.join(POLICIES)}")


def kv_capacity(wl: Workload, hw: ServeHardware, *, tp: Any, pp: Any, dpa: Any, batch: Any,
                context: float) -> np.ndarray:
    """Sequences of ``context`` cached tokens each whose KV fits on one replica (floored; 0 when the
    weights leave no room). ``batch``: the sequences the scratch is sized for (``memory.max_batch_x_context``).
    Without DP-attention: ``floor(max_batch_x_context / context)``; with it, each of the ``tp`` ranks holds
    the whole KV of its own sequences: ``tp x floor((usable - weights, scratch, reserve) / (KV bytes per
    token x context))``, the room of ``serve.memory``."""
    from mi400plan.memory import max_batch_x_context
    from mi400plan.serve import memory

    tp_a = np.asarray(tp, dtype=np.float64)
    mt = max_batch_x_context(wl.model, wl.counts, wl.recipe, capacity_bytes=hw.hbm_bytes, tp=tp_a, pp=pp, ep=1,
                             batch=batch)
    plain = np.floor(mt / context)
    m = memory(wl, hw, tp=tp_a, pp=pp, dpa=True, batch=batch)
    room = m["usable"] - (m["weights"] + m["activations"] + m["reserve"])
    per_rank = np.maximum(np.floor(room / (m["kv_dpa_per_token"] * context)), 0.0)
    return np.where(np.asarray(dpa, dtype=bool), tp_a * per_rank, np.maximum(plain, 0.0))


def closed_loop(wl: Workload, hw: ServeHardware, *, tp: Any, pp: Any, ep: Any, dpa: Any, clients: Any,
                capacity: Any, batch_waiting: BatchWait | None = None,
                iterations: Iterations | None = None) -> dict[str, np.ndarray]:
    """``serve.evaluate`` of ``clients`` closed-loop clients on a replica running at most ``capacity``
    sequences (module docstring): the steady state at ``K = min(clients, capacity)`` (at least 1), its
    TTFT (mean and median; ``batch_waiting`` and the stack's ``iterations`` as ``serve.evaluate`` takes
    them) plus the wait ``admission_wait =
    (clients - K) / K x K / X`` of the requests that find every slot taken; ``running`` is ``K``."""
    c = np.asarray(clients, dtype=np.float64)
    k = np.maximum(np.minimum(c, np.asarray(capacity, dtype=np.float64)), 1.0)
    ev = evaluate(wl, hw, tp=tp, pp=pp, ep=ep, dpa=dpa, batch=k, batch_waiting=batch_waiting, iterations=iterations)
    service = k / ev["requests_per_s"]  # seconds a request holds its slot (Little's law over the slots)
    wait = np.maximum(c - k, 0.0) / k * service
    out = dict(ev)
    out.update(ttft=ev["ttft"] + wait, ttft_median=ev["ttft_median"] + wait, admission_wait=wait, running=k)
    return out
