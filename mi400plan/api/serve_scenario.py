"""``serve --scenario``: MLPerf Inference scenarios on the layouts the steady-state search ranks best,
simulated request by request (``mi400plan.serve_sim``).

The steady-state search (``api.serve``) screens every layout x concurrency; the ``candidates`` layouts it
ranks best under the scenario (offline: output tokens/s per GPU; server / interactive: the same among the
points whose TTFT, its queue term (less the prompt's own iterations, ``own_iterations``) scaled to a 99th
percentile (``P99_OVER_MEAN_WAIT``), and mean TPOT meet
the limits, or all fitting points when none does; single-stream: the lowest latency of one request) are
simulated, at the nominal values, and ranked by the scenario's metric.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from mi400plan.errors import UsageError
from mi400plan.results.serve import Percentiles, ScenarioInfo, ScenarioProbe, ScenarioRow, ServeLayout

if TYPE_CHECKING:
    from mi400plan.serve import ServeHardware, Workload
    from mi400plan.serve_sim import Layout, LengthDist, Limits, Outcome, StepModel
    from mi400plan.serving_stacks import ResolvedServing
    from mi400plan.specs.model import ModelSpec

DEFAULT_CANDIDATES = 2
ROUNDS = 3  # rounds of candidates simulated while none meets the limits
# Bounds that keep a simulation to seconds: layouts per SKU, sequences in flight, iterations per prompt.
MAX_CANDIDATES = 8
MAX_SEQS = 16384
MAX_CHUNKS_PER_PROMPT = 64
# Screening only (which layouts to simulate): M/M/1's waiting time has the tail P(W > t) = rho exp(-t / E[W]
# x rho) (Kleinrock 1975, Queueing Systems vol. 1, sec. 3.2), whose 99th percentile is at most ln(100) = 4.6
# times the mean wait; the steady-state TTFT's queue term is scaled by it before comparing with a p99 limit.
P99_OVER_MEAN_WAIT = 4.605
SINGLE_STREAM_REQUESTS = 1000
# Without a benchmark model, server and interactive take the limits of MLPerf's reference LLM benchmark
# (Llama2-70B; inference_rules.adoc, table "Benchmarks", 2026-07-23).
REFERENCE_LIMITS = {"server": (2.0, 0.2), "interactive": (0.45, 0.04)}
RULES_SOURCE = "MLPerf Inference rules, inference_rules.adoc, mlcommons/inference_policies, 2026-07-23"


@dataclass(frozen=True)
class ScenarioConfig:
    name: str
    ttft_s: float | None
    tpot_s: float | None
    limits_source: str
    inp: LengthDist
    out: LengthDist
    max_batched_tokens: int | None  # None: each SKU's serving stack default (serving_stacks.scheduler_limits)
    max_seqs: int | None
    candidates: int
    notes: tuple[str, ...]
    stack: str | None = None  # the --stack given (None: each SKU's default serving stack)


@dataclass(frozen=True)
class ScenarioRequest:
    """``serve --scenario`` and its flags, as given (``None``: not given)."""

    name: str | None
    ttft_p99: str | None = None
    tpot_p99: str | None = None
    max_batched_tokens: int | None = None
    max_seqs: int | None = None
    candidates: int | None = None
    stack: str | None = None


def prepare(model: ModelSpec, input_len: str | int | None, output_len: str | int | None, req: ScenarioRequest | None,
            disagg: bool) -> tuple[ScenarioConfig | None, int, int, float]:
    """The scenario's configuration (None without one), the mean prompt and output lengths (tokens) the
    steady-state search uses and the output lengths' squared coefficient of variation (``LengthDist.cv2``:
    the sequences in flight are length-biased, ``serve.decode_context``); checks the longest prompt and
    output against the model's context."""
    from mi400plan.api.serve import parse_seconds

    name = req.name if req else None
    in_d, out_d, notes = _lengths(model.name, input_len, output_len, name)
    if in_d.max + out_d.max > model.max_seq_len:
        raise UsageError(f"--input-len {in_d.max:,} + --output-len {out_d.max:,} = {in_d.max + out_d.max:,} "
                         f"tokens (the longest of each) exceeds {model.name}'s maximum context of "
                         f"{model.max_seq_len:,} tokens")
    r = req or ScenarioRequest(None)
    cfg = config(model.name, name, ttft_p99=parse_seconds(r.ttft_p99, "--ttft-p99"),
                 tpot_p99=parse_seconds(r.tpot_p99, "--tpot-p99"), inp=in_d, out=out_d,
                 max_batched_tokens=r.max_batched_tokens, max_seqs=r.max_seqs, candidates=r.candidates, notes=notes,
                 stack=r.stack)
    if cfg is not None and disagg:
        raise UsageError("--scenario simulates aggregated replicas; drop --disagg")
    if cfg is not None and out_d.max < 2:
        raise UsageError(f"--scenario {cfg.name} with --output-len {out_d.max}: TPOT (the interval between a "
                         "request's tokens after the first) needs requests of at least 2 output tokens")
    return cfg, int(round(in_d.mean)), int(round(out_d.mean)), out_d.cv2


def run(wl: Workload, skus: list[tuple[str, ServeHardware]], per_sku: dict[str, dict[str, Any]],
        cfg: ScenarioConfig | None, gpus: int) -> tuple[list[ScenarioRow], ScenarioInfo | None]:
    """Every SKU's scenario rows (``skus``: name and nominal ``serve.ServeHardware``) and the scenario's
    description; nothing without a scenario."""
    if cfg is None:
        return [], None
    rows: list[ScenarioRow] = []
    for name, hw in skus:
        rows += scenario_rows(wl, name, hw, per_sku[name], cfg, gpus)
    return rows, info(cfg)


def _lengths(model_name: str, input_len: str | int | None, output_len: str | int | None,
             scenario: str | None) -> tuple[LengthDist, LengthDist, list[str]]:
    """Prompt and output length distributions (``serve_sim.parse_length_dist``). Not given: 1,024 tokens
    (InferenceX's 1k1k), except for a model an MLPerf Inference benchmark runs when a scenario is named: the
    benchmark's published statistics (``profiles/workloads``: the dataset's output and prompt histograms where
    recorded, else every output at the published mean). Notes say which, and the length-biased context of
    outputs that vary (``serve_sim.in_flight``)."""
    from mi400plan import serve_sim as sim
    from mi400plan.api.serve import DEFAULT_LEN

    bench = sim.benchmark_for(model_name) if scenario else None
    notes: list[str] = []
    if output_len is None and bench is not None and bench.output is not None:
        out_d = bench.output
        notes.append(f"output lengths: the {bench.name} benchmark's (--output-len overrides)")
    else:
        out_d = sim.parse_length_dist(str(output_len if output_len is not None else DEFAULT_LEN), "--output-len")
    if input_len is None and bench is not None and bench.input is not None:
        notes.append(f"input lengths: the {bench.name} dataset's prompts (--input-len overrides)")
        in_d = bench.input
    else:
        in_d = sim.parse_length_dist(str(input_len if input_len is not None else DEFAULT_LEN), "--input-len")
        if input_len is None and bench is not None:
            cap = f" (published maximum {bench.input_max:,})" if bench.input_max else ""
            notes.append(f"input lengths: {DEFAULT_LEN:,} tokens, the default: no source read publishes the "
                         f"{bench.name} dataset's mean input length{cap}; give --input-len")
    if out_d.cv2 > 0:
        notes.append(f"decode context: {sim.in_flight(in_d, out_d):,.0f} tokens per sequence in flight, E[I] + "
                     f"E[O^2] / (2 E[O]) (long outputs stay in flight longer: length-biased), not E[I] + E[O] / 2 = "
                     f"{in_d.mean + out_d.mean / 2.0:,.0f}")
    return in_d, out_d, notes


def config(model_name: str, scenario: str | None, *, ttft_p99: float | None, tpot_p99: float | None,
           inp: LengthDist, out: LengthDist, max_batched_tokens: int | None, max_seqs: int | None,
           candidates: int | None,
           notes: list[str], stack: str | None = None) -> ScenarioConfig | None:
    """Validate the scenario flags and fill in the cited defaults (``None`` without ``--scenario``)."""
    from mi400plan import serve_sim as sim

    if scenario is None:
        if ttft_p99 is not None or tpot_p99 is not None:
            raise UsageError("--ttft-p99 / --tpot-p99 are limits of --scenario server or interactive; add --scenario")
        if max_batched_tokens is not None or max_seqs is not None or candidates is not None:
            raise UsageError("--max-batched-tokens / --max-seqs / --candidates set the --scenario "
                             "simulation; add --scenario")
        return None
    name = scenario.strip().lower()
    if name not in sim.SCENARIOS:
        raise UsageError(f"unknown --scenario {scenario!r}; known: {', '.join(sim.SCENARIOS)}")
    if name in ("offline", "single-stream") and (ttft_p99 is not None or tpot_p99 is not None):
        metric = "throughput" if name == "offline" else "p90 latency"
        raise UsageError(f"--scenario {name} has no latency limits (MLPerf: {metric}); "
                         "--ttft-p99 / --tpot-p99 apply to server and interactive")
    mbt, ms = max_batched_tokens, max_seqs
    if ms is not None and not 1 <= ms <= MAX_SEQS:
        raise UsageError(f"--max-seqs must be between 1 and {MAX_SEQS:,}, got {ms}")
    if mbt is not None and mbt < max(1, math.ceil(inp.mean / MAX_CHUNKS_PER_PROMPT)):
        raise UsageError(f"--max-batched-tokens {mbt:,} splits a mean prompt of {inp.mean:,.0f} tokens into more than "
                         f"{MAX_CHUNKS_PER_PROMPT} iterations (a simulation of minutes); give at least "
                         f"{math.ceil(inp.mean / MAX_CHUNKS_PER_PROMPT):,}")
    k = int(candidates if candidates is not None else DEFAULT_CANDIDATES)
    if k < 1 or k > MAX_CANDIDATES:
        raise UsageError(f"--candidates must be between 1 and {MAX_CANDIDATES}, got {k}")
    ttft, tpot, src = None, None, ""
    if name in ("server", "interactive"):
        bench = sim.benchmark_for(model_name)
        if bench is not None and name in bench.limits:
            ttft, tpot = bench.limits[name]
            src = f"MLPerf {bench.name} {name} limits: {RULES_SOURCE}"
        else:
            ttft, tpot = REFERENCE_LIMITS[name]
            src = f"MLPerf llama2-70b {name} limits, the reference LLM benchmark's: {RULES_SOURCE}"
        if ttft_p99 is not None or tpot_p99 is not None:
            src = "--ttft-p99/--tpot-p99" + (f"; otherwise {src}" if ttft_p99 is None or tpot_p99 is None else "")
        ttft = ttft_p99 if ttft_p99 is not None else ttft
        tpot = tpot_p99 if tpot_p99 is not None else tpot
    return ScenarioConfig(name, ttft, tpot, src, inp, out, mbt, ms, k, tuple(notes), stack)


def _candidates(res: dict[str, Any], cfg: ScenarioConfig) -> list[int]:
    """Indices (into the search arrays) of the best point of each of the ``cfg.candidates`` best layouts."""
    ev, fit = res["ev"], res["fit"] & (res["b"] <= cfg.max_seqs)
    if cfg.name == "single-stream":
        score = -(ev["ttft"] + ev["tpot"] * max(cfg.out.mean - 1.0, 0.0))
        mask = fit & (res["b"] == res["b"][fit].min()) if fit.any() else fit
    else:
        score = ev["out_tps_gpu"].copy()
        mask = fit
        if cfg.ttft_s is not None:
            ttft_p99 = ev["ttft"] + (P99_OVER_MEAN_WAIT - 1.0) * (ev["queue"] - ev["own_iterations"])
            ok = fit & (ttft_p99 <= cfg.ttft_s) & (ev["tpot"] <= cfg.tpot_s)
            mask = ok if ok.any() else fit
    idx = np.nonzero(mask)[0]
    if not len(idx):
        return []
    idx = idx[np.argsort(-score[idx], kind="stable")]
    seen: set[tuple[int, ...]] = set()
    out = []
    for i in idx:
        key = (int(res["tp"][i]), int(res["pp"][i]), int(res["ep"][i]), int(res["dpa"][i]))
        if key not in seen:
            seen.add(key)
            out.append(int(i))
    return out


def _pct(x: np.ndarray) -> Percentiles:
    from mi400plan.serve_sim import percentiles

    p = percentiles(x)
    return Percentiles(p50=p["p50"], p90=p["p90"], p99=p["p99"])


def _measured_pct(p: dict[str, float]) -> Percentiles | None:
    """A probe's percentiles, None where the run measured nothing (it stopped on KV thrash)."""
    return Percentiles(**p) if all(np.isfinite(v) for v in p.values()) else None


def _prompt_lengths(d: LengthDist) -> tuple[int, ...]:
    """Every prompt length a distribution can draw, when there are at most 4,096 of them."""
    if d.kind == "uniform":
        lo, hi = d.values
        return tuple(range(lo, hi + 1)) if hi - lo < 4096 else ()
    return tuple(d.values)


def _limits(wl: Workload, sku_name: str, hw: ServeHardware, lay: Layout, cfg: ScenarioConfig,
            stack: ResolvedServing | None) -> Limits:
    """The scheduler's limits for ``lay`` on this SKU: those given, else the serving stack's defaults
    (``serve_sim.stack_limits``)."""
    from mi400plan import serve_sim as sim

    return sim.stack_limits(wl, sku_name, hw, lay, None if stack is None else stack.scheduler,
                            max_batched_tokens=cfg.max_batched_tokens, max_seqs=cfg.max_seqs, max_prompt=cfg.inp.max)


def _seq_cap(sku_name: str, hw: ServeHardware, stack: ResolvedServing | None) -> int:
    """The most sequences the stack's scheduler runs at once on this SKU (``serve_sim.seq_cap``)."""
    from mi400plan import serve_sim as sim

    return sim.seq_cap(sku_name, hw, None if stack is None else stack.scheduler)


def _offline(wl: Workload, hw: ServeHardware, lay: Layout, lim: Limits,
             cfg: ScenarioConfig) -> tuple[Limits, Outcome, StepModel]:
    """MLPerf Offline at the stack's sequence limit, and, unless ``--max-seqs`` pins it, at the limits that keep
    the requests' KV in the cache (a request's mean occupancy, input + half its output, its whole mean length, both
    length-biased as the requests in flight are (``serve_sim.in_flight``), and the longest input + output):
    offline is the highest throughput the deployment reaches, and a limit above what the cache holds preempts and recomputes prompts, the
    behaviour vLLM's tuning guide tells users to remove by lowering ``max_num_seqs`` (docs.vllm.ai,
    "Optimization and Tuning: Preemption", v0.10, 2025). The best rate is kept, with the limit that gave it."""
    from dataclasses import replace

    from mi400plan import serve_sim as sim

    seqs = {lim.max_seqs}
    if cfg.max_seqs is None and math.isfinite(lim.kv_tokens):
        for per in (sim.in_flight(cfg.inp, cfg.out), sim.in_flight(cfg.inp, cfg.out, whole=True),
                    cfg.inp.max + cfg.out.max):
            n = int(lim.kv_tokens // per)
            if 1 <= n < lim.max_seqs:
                seqs.add(n)
    best: tuple[Limits, Outcome, StepModel] | None = None
    probes = []
    for n in sorted(seqs, reverse=True):
        trial = replace(lim, max_seqs=n)
        sm = sim.step_model(wl, hw, lay, max_seqs=n, context=sim.in_flight(cfg.inp, cfg.out),
                            max_prompt=cfg.inp.max + cfg.out.max, exact=_prompt_lengths(cfg.inp))
        o = sim.offline(sm, trial, cfg.inp, cfg.out, sim.OFFLINE_REQUESTS)
        probes.append(sim.probe(o.rate, n, o.run, o.binding))
        if best is None or (o.meets, o.rate) > (best[1].meets, best[1].rate):
            best = (trial, o, sm)
    assert best is not None
    return best[0], replace(best[1], trace=tuple(sorted(probes, key=lambda p: p.max_seqs))), best[2]


def _simulate_one(wl: Workload, sku_name: str, hw: ServeHardware, res: dict[str, Any], i: int,
                  cfg: ScenarioConfig) -> tuple[Layout, Limits, Outcome, float]:
    """The scenario on layout ``i``: its limits, outcome and the mean prefill seconds of a prompt (for the
    prefill share of the GPU time)."""
    from mi400plan import serve_sim as sim

    lay = sim.Layout(int(res["tp"][i]), int(res["pp"][i]), int(res["ep"][i]), bool(res["dpa"][i]))
    lim = _limits(wl, sku_name, hw, lay, cfg, res.get("stack"))
    if cfg.name == "offline":
        lim, o, sm = _offline(wl, hw, lay, lim, cfg)
        return lay, lim, o, sim.mean_prefill_s(sm, cfg.inp)
    sm = sim.step_model(wl, hw, lay, max_seqs=lim.max_seqs, context=sim.in_flight(cfg.inp, cfg.out),
                        max_prompt=cfg.inp.max + cfg.out.max, exact=_prompt_lengths(cfg.inp))
    pf = sim.mean_prefill_s(sm, cfg.inp)
    if cfg.name == "single-stream":
        return lay, lim, sim.single_stream(sm, cfg.inp, cfg.out, SINGLE_STREAM_REQUESTS), pf
    # The steady-state model's rate at the layout's largest fitting concurrency (within max_seqs), with a
    # margin: the simulation's answer lies below it unless the steady state is pessimistic.
    same = ((res["tp"] == lay.tp) & (res["pp"] == lay.pp) & (res["ep"] == lay.ep) & (res["dpa"] == lay.dpa)
            & res["fit"] & (res["b"] <= lim.max_seqs))
    if not same.any():
        same = (res["tp"] == lay.tp) & (res["pp"] == lay.pp) & (res["ep"] == lay.ep) & (res["dpa"] == lay.dpa)
    steady = float(res["ev"]["requests_per_s"][same].max())
    return lay, lim, sim.server(sm, lim, cfg.inp, cfg.out, ttft_s=cfg.ttft_s, tpot_s=cfg.tpot_s,
                                rate_hi=1.25 * steady, scenario=cfg.name, steady_rate=steady), pf


def scenario_rows(wl: Workload, sku_name: str, hw: ServeHardware, res: dict[str, Any], cfg: ScenarioConfig,
                  gpus: int) -> list[ScenarioRow]:
    """The scenario's answer for the best ``cfg.candidates`` simulated layouts of one SKU, best first
    (single-stream: lowest p90 latency; otherwise: output tokens/s per GPU, layouts that meet the limits
    before those that do not). Layouts are simulated in the steady-state search's order, ``candidates`` at
    a time, until a round holds one that meets the limits (at most ``ROUNDS`` rounds)."""
    from dataclasses import replace

    # The screen keeps concurrencies the stack can run (SGLang's cap is at most 4,096).
    cap = cfg.max_seqs or _seq_cap(sku_name, hw, res.get("stack"))
    rows = []
    ranked = _candidates(res, replace(cfg, max_seqs=cap))
    # The next candidates are simulated while none so far meets the limits, up to ROUNDS x candidates.
    todo = ranked[:cfg.candidates * ROUNDS]
    for n, i in enumerate(todo):
        if n >= cfg.candidates and n % cfg.candidates == 0 and any(r.meets for r in rows):
            break
        lay, lim, o, pf = _simulate_one(wl, sku_name, hw, res, i, cfg)
        price = res["info"].gpu_hour_cost if res.get("info") is not None else None
        rows.append(_row(sku_name, (lay, lim, o), cfg, gpus, float(res["ev"]["out_tps_gpu"][i]),
                         _cost_out(price, o.rate * pf, o.rate * cfg.out.mean / (lay.tp * lay.pp) if o.meets else 0.0)))
    if cfg.name == "single-stream":
        rows.sort(key=lambda x: x.latency_s.p90)
    else:
        rows.sort(key=lambda x: (not x.meets, -x.tokens_per_s_per_gpu))
    return [r.model_copy(update={"rank": k + 1}) for k, r in enumerate(rows[:cfg.candidates])]


def _cost_out(price: float | None, prefill_share: float, tps_gpu: float) -> float | None:
    """US$ per 1e6 output tokens as the steady state prices them (``api.serve._economics``): the decode share
    ``1 - rho`` of a GPU-hour at ``price`` over the output tokens/s per GPU; ``rho`` = rate x mean prefill
    seconds per replica, the prefill share of its time (``serve.evaluate``'s ``rho = X t_prefill``)."""
    if price is None or tps_gpu <= 0:
        return None
    return price / 3600.0 * (1.0 - min(prefill_share, 1.0)) / tps_gpu * 1e6


def _row(sku_name: str, sim_out: tuple[Layout, Limits, Outcome], cfg: ScenarioConfig, gpus: int, steady: float,
         cost: float | None) -> ScenarioRow:
    """One simulated layout's row: the answer's rate (requests/s per replica) and output tokens/s per GPU
    (rate x mean output / GPUs per replica), the sequences in flight at it (Little's law, L = rate x mean
    latency; offline: the scheduler's ``max_seqs``, all of them queued), $/Mtok out and every run of the
    search."""
    lay, lim, o = sim_out
    g = lay.tp * lay.pp
    r = o.run
    tps = o.rate * cfg.out.mean / g if o.meets else 0.0
    in_flight = float(lim.max_seqs) if cfg.name == "offline" else (o.rate * float(np.mean(r.latency))
                                                                   if len(r.latency) else 0.0)
    search = [ScenarioProbe(requests_per_s=p.rate, tokens_per_s_per_gpu=p.rate * cfg.out.mean / g,
                            max_num_seqs=p.max_seqs, ttft_s=_measured_pct(p.ttft), tpot_s=_measured_pct(p.tpot),
                            meets=p.failed is None, failed=p.failed) for p in o.trace]
    return ScenarioRow(
        sku=sku_name, rank=0, scenario=cfg.name,
        layout=ServeLayout(tp=lay.tp, pp=lay.pp, ep=lay.ep, dp_attention=lay.dpa, gpus_per_replica=g,
                           replicas=gpus // g, disaggregated=False),
        requests_per_s=o.rate, tokens_per_s_per_gpu=tps, steady_state_tokens_per_s_per_gpu=steady,
        ttft_s=_pct(r.ttft), tpot_s=_pct(r.tpot), latency_s=_pct(r.latency), meets=o.meets, binding=o.binding,
        simulated_requests=o.requests, preemptions=r.preemptions, kv_cache_tokens=int(lim.kv_tokens),
        max_num_batched_tokens=int(lim.max_batched_tokens), max_num_seqs=int(lim.max_seqs), in_flight=in_flight,
        cost_per_mtok_output=cost, search=search)


def info(cfg: ScenarioConfig) -> ScenarioInfo:
    return ScenarioInfo(name=cfg.name, ttft_p99_s=cfg.ttft_s, tpot_p99_s=cfg.tpot_s, limits_source=cfg.limits_source,
                        input_lengths=cfg.inp.text(), output_lengths=cfg.out.text(),
                        max_num_batched_tokens=cfg.max_batched_tokens, max_num_seqs=cfg.max_seqs,
                        candidates_per_sku=cfg.candidates, notes=list(cfg.notes), stack=cfg.stack)

