"""MLPerf Server latency percentiles at the published rate (validation; never fitted).

MLPerf Inference Server runs publish, besides the mean TTFT and TPOT ``serve_validation.csv`` already holds,
LoadGen's percentiles (``mlperf_log_summary.txt``: "50.00 / 90.00 / 99.00 percentile first token latency
(ns)", "99.00 percentile time to output token (ns)") and the rate the system completed requests at
("Completed samples per second"). Here each such row's replica is simulated (``serve_sim.mlperf_setup`` and
``serve_sim.poisson_run``, the runs ``serve --scenario server`` makes) at the PUBLISHED rate, Poisson
arrivals as LoadGen's Server scenario sends them (MLCommons inference policies, "Server" scenario, v5.1),
and its p50 / p90 / p99 TTFT and p99 TPOT are set beside the published ones.

Per-replica rate: the system's completed samples/s spread evenly over its replicas, ``rate x tp /
system_gpus`` (``system_gpus``: the GPUs of the submitted system, from its name; ``tp``: GPUs of one replica,
the row's).

Capacity: a Poisson queue is stable only below its service rate (Loynes 1962: the queue grows without bound
when the arrival rate exceeds the saturated service rate). The simulation's saturated service rate is its
Offline answer on the same replica (every request queued: ``serve_sim.offline``); a published rate at or
above it is reported as beyond the model's capacity, with no percentiles (they would measure only how long
the run lasted). A run that preempts without end (``SimResult.thrashed``) or rejects prompts larger than the
KV cache is reported the same way.

Errors: ``serve_validate.signed_error``'s convention for latencies, ``1 - predicted / measured`` (+ = the
model predicts too short a latency).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from mi400plan.errors import PlannerError

from mi400plan.serve_sim import OFFLINE_REQUESTS, percentiles, poisson_run, saturated_rate
from mi400plan.serve_validate import signed_error

if TYPE_CHECKING:
    from mi400plan.profiles import Catalog
    from mi400plan.serve import ServeHardware
    from mi400plan.serve_calibration import Measured, Point
    from mi400plan.serve_sim import MlperfSetup

MEASURED_REQUESTS = 500  # requests measured at the published rate: as ``serve_sim.server`` measures each rate


@dataclass(frozen=True)
class PublishedPercentiles:
    """What an MLPerf Server log publishes beyond the means: the system's completed samples/s, its GPUs, and
    the p50 / p90 / p99 TTFT and p99 TPOT (seconds)."""

    samples_per_s: float  # the whole system's completed samples (requests) per second
    system_gpus: int
    ttft_p50_s: float
    ttft_p90_s: float
    ttft_p99_s: float
    tpot_p99_s: float

    def rate_per_replica(self, tp: int) -> float:
        """Requests/s of one ``tp``-GPU replica: the system's rate over its ``system_gpus / tp`` replicas."""
        return self.samples_per_s * tp / self.system_gpus


COLUMNS = ("samples_per_s", "system_gpus", "ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tpot_p99_s")


def published_from_row(r: dict[str, str], where: str) -> PublishedPercentiles | None:
    """The percentile columns of a ``serve_validation.csv`` row (None where they are all empty or absent;
    ``where``: the file and line, named in the error for a partial or malformed set)."""
    cells = {k: r.get(k) or "" for k in COLUMNS}
    if not any(cells.values()):
        return None
    try:
        v = {k: float(x) for k, x in cells.items()}
    except ValueError:
        raise PlannerError(f"{where}: the percentile columns {', '.join(COLUMNS)} must all be numbers "
                           f"(got {cells})") from None
    if v["system_gpus"] < 1 or v["system_gpus"] != int(v["system_gpus"]) or min(v.values()) <= 0:
        raise PlannerError(f"{where}: system_gpus must be a whole number >= 1 and every percentile column > 0")
    return PublishedPercentiles(v["samples_per_s"], int(v["system_gpus"]), v["ttft_p50_s"], v["ttft_p90_s"],
                                v["ttft_p99_s"], v["tpot_p99_s"])


@dataclass(frozen=True)
class RateRun:
    """The simulation at one rate (requests/s per replica): p50 / p90 / p99 TTFT and p99 TPOT (seconds), or,
    beyond the model's capacity, None with ``capacity_rate`` (the saturated rate) and why."""

    rate: float
    capacity_rate: float
    ttft: dict[str, float] | None
    tpot_p99: float | None
    over_capacity: str | None = None  # None: within capacity; else why the percentiles are not reported


def capacity_rate(st: MlperfSetup, n: int = OFFLINE_REQUESTS) -> float:
    """The replica's saturated service rate, requests/s (``serve_sim.saturated_rate``: the Offline run of
    ``n`` requests with its start and drain cut off; 0: the run thrashes the KV cache)."""
    return saturated_rate(st.sm, st.lim, st.inp, st.out, n)


def at_rate(st: MlperfSetup, rate: float, *, warm_s: float, measured: int = MEASURED_REQUESTS) -> RateRun:
    """``st`` at Poisson ``rate`` (requests/s per replica), warm-up ``warm_s`` seconds of arrivals
    (``serve_sim.poisson_run``): its percentiles, or over capacity (module docstring)."""
    cap = capacity_rate(st)
    if rate >= cap:
        return RateRun(rate, cap, None, None, f"the rate is {rate / cap:.2f}x the simulated capacity "
                                              f"({cap:.3g} requests/s per replica): the queue grows without bound"
                       if cap > 0 else "the replica's KV cache thrashes even with every request queued")
    r, _ = poisson_run(st.sm, st.lim, st.inp, st.out, rate, warm_s=warm_s, measured=measured)
    if r.thrashed or r.rejected or not len(r.ttft):
        return RateRun(rate, cap, None, None, "the run thrashes the KV cache (preempts without end)")
    return RateRun(rate, cap, percentiles(r.ttft), percentiles(r.tpot)["p99"] if len(r.tpot) else None)


@dataclass(frozen=True)
class PercentileCase:
    """One MLPerf Server row at its published rate: published and predicted percentiles, signed errors."""

    published: PublishedPercentiles
    rate: float  # requests/s per replica
    run: RateRun
    error: dict[str, float | None]  # ttft_p50, ttft_p90, ttft_p99, tpot_p99


def percentile_case(cat: Catalog, m: Measured, hw: ServeHardware, pub: PublishedPercentiles,
                    stack: str | None = None) -> PercentileCase:
    """Row ``m`` simulated at its published per-replica rate on serving stack ``stack`` with the row's own
    scheduler limits (``serve_sim.mlperf_setup``), warm-up as ``serve_sim.server`` sets it (the mean output at
    the TPOT limit plus the TTFT limit), with its signed errors."""
    from mi400plan.serve_sim import mlperf_setup

    st = mlperf_setup(cat, m, hw, stack)
    rate = pub.rate_per_replica(m.tp)
    warm = st.out.mean * (m.tpot_slo_s or 0.0) + (m.ttft_slo_s or 0.0)
    run = at_rate(st, rate, warm_s=warm)
    got = {} if run.ttft is None else {"ttft_p50": run.ttft["p50"], "ttft_p90": run.ttft["p90"],
                                       "ttft_p99": run.ttft["p99"], "tpot_p99": run.tpot_p99}
    want = {"ttft_p50": pub.ttft_p50_s, "ttft_p90": pub.ttft_p90_s, "ttft_p99": pub.ttft_p99_s,
            "tpot_p99": pub.tpot_p99_s}
    return PercentileCase(pub, rate, run, {k: signed_error("ttft", v, got.get(k)) for k, v in want.items()})


@dataclass(frozen=True)
class ErrorSummary:
    """Signed mean, mean |error| and max |error| of one metric over the rows with a prediction."""

    points: int
    over_capacity: int  # rows beyond the model's capacity (no prediction)
    mean: float | None
    mean_abs: float | None
    max_abs: float | None


def summarize_errors(errors: list[float | None]) -> ErrorSummary:
    v = np.array([e for e in errors if e is not None], dtype=np.float64)
    missing = sum(e is None for e in errors)
    if not v.size:
        return ErrorSummary(0, missing, None, None, None)
    return ErrorSummary(int(v.size), missing, float(v.mean()), float(np.abs(v).mean()), float(np.abs(v).max()))


# --- InferenceX closed loops: the published p99 TTFT (never fitted) ---------------------------------------

# InferenceX sends ``10 x`` the concurrency in prompts per point (``--num-prompts $(( CONC * 10 ))
# --max-concurrency $CONC --request-rate inf``, every benchmark script at commit b13bcafec, 2025-10-15) and
# publishes the client's p99 TTFT over all of them, ``np.percentile`` (linear interpolation) of the per-request
# TTFTs (``bench_serving/benchmark_serving.py`` ``calculate_metrics``).
INFERENCEX_PROMPTS_PER_CLIENT = 10


@dataclass(frozen=True)
class ClosedLoopP99:
    """One InferenceX point's closed loop simulated: p50 and p99 TTFT (seconds) over every request."""

    ttft_p50: float
    ttft_p99: float


def inferencex_closed_loop(cat: Catalog, p: Point, hw: ServeHardware) -> ClosedLoopP99 | None:
    """InferenceX point ``p`` as its client ran it (``serve_sim.closed_loop``): ``p.conc`` clients, 10 prompts
    each, the lengths it draws (``serve_calibration.inferencex_workload``), on its stack's scheduler limits
    (``serve_sim.stack_limits``) with the prompt hold its launch script sets, on ``hw`` (the stored calibration;
    CPU time per sequence added to the step as the fit has it). None: the run thrashes or rejects prompts."""
    from mi400plan.serve_calibration import INFERENCEX_HOST_OVERLAP, inferencex_workload, launch_batch_wait
    from mi400plan.serve_sim import Layout, closed_loop, in_flight, sample_lengths, stack_limits, step_model

    wl, inp, out = inferencex_workload(cat, p)
    hw = replace(hw, host_overlap=INFERENCEX_HOST_OVERLAP)
    lay = Layout(p.tp, 1, p.ep, p.dpa)
    sched = cat.get("serving", p.stack).spec.scheduler if p.stack in cat.names("serving") else None
    lim = stack_limits(wl, p.sku, hw, lay, sched, max_prompt=inp.max, batch_wait=launch_batch_wait(p))
    lim = replace(lim, max_seqs=min(lim.max_seqs, p.conc))
    sm = step_model(wl, hw, lay, max_seqs=lim.max_seqs, context=in_flight(inp, out), max_prompt=inp.max + out.max)
    n = INFERENCEX_PROMPTS_PER_CLIENT * p.conc
    i, o = sample_lengths(inp, out, n)
    r = closed_loop(i, o, sm, lim, p.conc)
    if r.thrashed or r.rejected or len(r.ttft) < n:
        return None
    return ClosedLoopP99(float(np.percentile(r.ttft, 50)), float(np.percentile(r.ttft, 99)))


def published_p99_ttft(r: dict[str, str], where: str) -> float | None:
    """An InferenceX row's ``p99_ttft_s`` (None where empty or absent; ``where``: the file and line, named in the
    error for a malformed value)."""
    text = (r.get("p99_ttft_s") or "").strip()
    if not text:
        return None
    try:
        v = float(text)
    except ValueError:
        raise PlannerError(f"{where}: p99_ttft_s = {text!r} is not a number") from None
    if not 0 < v < 1e6:
        raise PlannerError(f"{where}: p99_ttft_s = {text!r} must be a time in seconds, > 0 and < 1e6")
    return v


@dataclass(frozen=True)
class ClosedLoopCase:
    """An InferenceX point's published p99 TTFT beside its simulated closed loop, with the signed error."""

    measured_p99: float
    run: ClosedLoopP99 | None  # None: the simulation thrashes or rejects prompts
    error: float | None  # 1 - predicted / measured (+ = predicted too short)


def closed_loop_case(cat: Catalog, p: Point, hw: ServeHardware, measured_p99: float) -> ClosedLoopCase:
    run = inferencex_closed_loop(cat, p, hw)
    return ClosedLoopCase(measured_p99, run, signed_error("ttft", measured_p99, None if run is None else run.ttft_p99))
