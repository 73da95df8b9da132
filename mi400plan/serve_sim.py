"""Request-level serving simulation behind ``serve --scenario``: MLPerf Inference scenarios, a continuous
batching scheduler with chunked prefill, and the TTFT / TPOT / latency percentiles it produces.

Scenarios (MLPerf Inference rules, ``mlcommons/inference_policies`` ``inference_rules.adoc``, section
"Scenarios", commit ac93e89 of 2026-07-23):

* ``offline``: LoadGen sends all samples at the start in one query; the metric is the measured throughput.
* ``server`` / ``interactive``: queries arrive by a Poisson process; the metric is the largest Poisson
  rate at which the 99th percentiles of TTFT and TPOT meet the benchmark's limits (table "Benchmarks":
  Llama2-70B 2,000 ms / 200 ms, interactive 450 ms / 40 ms; Llama3.1-405B 6,000 / 175 ms, interactive
  4,500 / 80 ms; DeepSeek-R1 2,000 / 80 ms, interactive 1,500 / 15 ms). TPOT is a request's mean interval
  between its tokens after the first (the rules' footnote ``llm_ttft_tpot``); percentiles are over requests.
* ``single-stream``: the next query is sent when the previous one completes; the metric is the 90th
  percentile of the request latency.

Scheduler (:func:`simulate`), vLLM V1's (``vllm/v1/core/sched/scheduler.py``; SGLang's is alike): every
iteration schedules the running decodes first (``1 + n`` tokens each with ``n`` speculative tokens), then
prompt chunks of the admitted requests in arrival order, up to ``max_num_batched_tokens`` tokens in all
(chunked prefill) and ``max_num_seqs`` requests. Defaults: vLLM's ``EngineArgs.get_batch_defaults``
(``vllm/engine/arg_utils.py``, 2025; OpenAI server): 8,192 tokens and 1,024 sequences on GPUs of 70 GiB or
more other than A100, else 2,048 and 256 (:func:`scheduler_defaults`); with a serving stack, that stack's
(``profiles/serving``, ``serving_stacks.scheduler_limits``: SGLang's :func:`sglang_limits`, prefill iterations
apart; TensorRT-LLM's 8,192 tokens and 2,048 requests, prompts unchunked; ATOM's 16,384 and 512, whole prompts
in prefill iterations apart). A request is admitted (first come, first served) when
the KV cache holds its prompt;
when the running decodes would overflow the cache, the most recently admitted one is preempted: its KV is
freed and it is recomputed later (vLLM's RECOMPUTE preemption). The first token comes at the end of the
iteration that completes the prompt (prefill is quantised to iterations); each later token at the end of
a decode iteration; a step with ``n`` speculative tokens yields ``a`` tokens per sequence
(``serve.tokens_per_step``).

Iteration time (:class:`StepModel`, built by :func:`step_model` from ``serve.forward_stage``, the cost
functions of ``serve.evaluate``): the decode step of ``b`` sequences at the workload's mean context (length-biased,
:func:`in_flight`: ``E[I] + E[O^2] / (2 E[O])``; each run reports the mean it produced, ``decode_context``), plus,
for a chunk of prompt tokens ``[s, s + c)``, ``P(s + c) - P(s)`` where ``P(n)`` is the prefill time of an
``n``-token prompt, so a whole prompt costs exactly its prefill time, as in the steady-state model.
Per-request overhead outside the GPU (``ServeHardware.request_overhead_s``) is added to TTFT.

The event loop jumps over runs of identical decode steps (nothing arrives, finishes or overflows), so a
run of thousands of requests costs a few thousand events. Seeded (``SEED``): the same inputs give the
same numbers.
"""

from __future__ import annotations

import heapq
import math
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from mi400plan.errors import UsageError

if TYPE_CHECKING:
    from mi400plan.profiles import Catalog
    from mi400plan.serve import BatchWait, ServeHardware, Workload
    from mi400plan.serve_calibration import Measured
    from mi400plan.specs.serving import SchedulerDefaults

SEED = 20260723  # the simulation's fixed seed (any constant: results are deterministic)
# vLLM EngineArgs.get_batch_defaults (vllm/engine/arg_utils.py, 2025), OpenAI server: GPUs with >= 70 GiB other
# than A100 (H100, MI300X, ...), else the smaller pair.
DEFAULT_MAX_BATCHED_TOKENS = 8192
DEFAULT_MAX_SEQS = 1024
SMALL_GPU_MAX_BATCHED_TOKENS = 2048
SMALL_GPU_MAX_SEQS = 256
LARGE_GPU_BYTES = 70 * 2**30


SGLANG_MAX_RUNNING = 4096  # the upper clamp of SGLang's running-request rule (sglang_limits)
GIB = 2**30


def sglang_limits(hbm_bytes: float, kv_tokens: float, context_len: int) -> tuple[int, int]:
    """SGLang's defaults (v0.5, ``python/sglang/srt/server_args.py`` and ``model_executor/model_runner.py``,
    2025): ``chunked_prefill_size`` 2,048 under 35 GiB of HBM, 8,192 under 160 GiB, else 16,384; at most
    ``min(KV tokens // 2, clamp(KV tokens / context length x 512, 2,048, 4,096))`` running requests."""
    chunk = 2048 if hbm_bytes < 35 * GIB else 8192 if hbm_bytes < 160 * GIB else 16384
    return chunk, sglang_pool(kv_tokens, context_len)


def sglang_pool(kv_tokens: float, context_len: int) -> int:
    """SGLang's running-request cap on a KV pool of ``kv_tokens`` tokens (:func:`sglang_limits`)."""
    pool = min(max(int(kv_tokens / max(context_len, 1) * 512), 2048), SGLANG_MAX_RUNNING)
    return int(max(min(kv_tokens // 2, pool), 1))


def scheduler_defaults(sku_name: str, hbm_bytes: float) -> tuple[int, int]:
    """vLLM's default (max_num_batched_tokens, max_num_seqs) for the OpenAI server on this GPU: 8,192 and 1,024
    with 70 GiB of HBM or more unless it is an A100 (vLLM PR #17885: the larger budget cost A100 throughput),
    else 2,048 and 256 (``EngineArgs.get_batch_defaults``, vllm/engine/arg_utils.py, 2025)."""
    if hbm_bytes >= LARGE_GPU_BYTES and "a100" not in sku_name.lower():
        return DEFAULT_MAX_BATCHED_TOKENS, DEFAULT_MAX_SEQS
    return SMALL_GPU_MAX_BATCHED_TOKENS, SMALL_GPU_MAX_SEQS
PERCENTILES = (50.0, 90.0, 99.0)
# Offline: MLPerf's minimum query size (inference_rules.adoc, "Scenarios": at least 24,576 samples), so the
# fill at the start and the drain at the end (the longest requests in a thinning batch) weigh as they do there.
OFFLINE_REQUESTS = 24576
SCENARIOS = ("offline", "server", "interactive", "single-stream")
# A run stops when the KV cache thrashes: more preemptions than this per request (every one recomputes its
# request: the sequences in flight far exceed what the cache holds; a lower --max-seqs serves them).
THRASH_PREEMPTIONS = 4
# Requests of the Offline run that measures the saturated rate in a Server search, per scheduler slot, and at
# least (capacity_requests).
CAPACITY_SLOTS = 8
CAPACITY_MIN_REQUESTS = 2048
# :func:`server` runs the saturated Offline run only for a rate whose run hit the limits (a request waited for a
# slot or KV room, or was preempted) or that reaches this share of the steady state's saturated rate. Measured
# 2026-11-28 on the 20 layouts of `serve --scenario` DeepSeek-V3 / Llama 2 70B server and Llama 3.1 8B
# interactive (4 and 2 SKUs): the simulated saturated rate is 0.94-1.14 x the steady state's where the saturated
# run does not preempt, 0.56-0.86 x where it does (a full KV cache recomputing): a run that never met a limit
# ran below the regime that lowers it.
CAPACITY_SCREEN = 0.9
MAX_LENGTH = 2**27  # tokens: far past any model's context (the model's maximum is checked separately)


# --- length distributions ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LengthDist:
    """Token lengths of prompts or outputs: ``fixed`` (one value), ``uniform`` (integers ``lo..hi``) or
    ``histogram`` (lengths with counts)."""

    kind: str
    values: tuple[int, ...]
    weights: tuple[float, ...] = ()
    source: str = ""

    @property
    def mean(self) -> float:
        if self.kind == "uniform":
            return (self.values[0] + self.values[1]) / 2.0
        if self.kind == "histogram":
            w = np.asarray(self.weights)
            return float(np.dot(self.values, w) / w.sum())
        return float(self.values[0])

    @property
    def cv2(self) -> float:
        """``Var / mean^2``, the squared coefficient of variation of the lengths (0 for a fixed length);
        uniform on the integers ``lo..hi``: variance ``((hi - lo + 1)^2 - 1) / 12``."""
        if self.kind == "uniform":
            n = self.values[1] - self.values[0] + 1
            return (n * n - 1) / 12.0 / self.mean ** 2
        if self.kind == "histogram":
            w = np.asarray(self.weights, dtype=np.float64)
            v = np.asarray(self.values, dtype=np.float64)
            m = float(np.dot(v, w) / w.sum())
            return float(np.dot((v - m) ** 2, w) / w.sum()) / m ** 2
        return 0.0

    @property
    def max(self) -> int:
        return int(max(self.values))

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` lengths (int64)."""
        if self.kind == "uniform":
            return rng.integers(self.values[0], self.values[1] + 1, size=n)
        if self.kind == "histogram":
            w = np.asarray(self.weights, dtype=np.float64)
            return rng.choice(np.asarray(self.values, dtype=np.int64), size=n, p=w / w.sum())
        return np.full(n, self.values[0], dtype=np.int64)

    def text(self) -> str:
        if self.kind == "uniform":
            t = f"uniform {self.values[0]:,}-{self.values[1]:,} (mean {self.mean:,.0f})"
        elif self.kind == "histogram":
            t = f"histogram of {len(self.values)} lengths (mean {self.mean:,.0f}, max {self.max:,})"
        else:
            t = f"{self.values[0]:,} fixed"
        return f"{t}; {self.source}" if self.source else t


def parse_length(text: str | int, what: str) -> int:
    """A token count read as ``--seq`` reads it (``units.parse_seq_len``): ``1024``, ``1k`` = 1,024 and ``8k`` =
    8,192 (InferenceX's 1k/8k scenario names), ``128Ki``; ``1,024`` is refused (``units.COUNT_RULE``); at most
    ``MAX_LENGTH``."""
    from mi400plan.units import UnitError, parse_seq_len

    try:
        n = parse_seq_len(str(text), what)
    except UnitError as exc:
        raise UsageError(f"{exc}; give a positive token count (1024, 1k = 1,024, 8k = 8,192)") from None
    if n < 1:
        raise UsageError(f"cannot read {what} {text!r}: give a positive token count (1024, 1k = 1,024, 8k = 8,192)")
    if n > MAX_LENGTH:
        raise UsageError(f"{what} {text!r} exceeds {MAX_LENGTH:,} tokens")
    return n


def parse_length_dist(text: str, what: str) -> LengthDist:
    """``1024`` / ``1k`` (fixed), ``uniform:A-B`` (integers A..B, each equally likely) or a CSV file of
    ``length,count`` rows (a histogram)."""
    t = str(text).strip()
    if t.lower().startswith("uniform:"):
        m = re.fullmatch(r"uniform:\s*([^-\s]+)\s*-\s*([^-\s]+)", t, flags=re.IGNORECASE)
        if not m:
            raise UsageError(f"cannot read {what} {text!r}: write uniform:A-B, e.g. uniform:128-2048")
        lo, hi = parse_length(m.group(1), what), parse_length(m.group(2), what)
        if lo > hi:
            raise UsageError(f"{what} {text!r}: the lower bound {lo:,} exceeds the upper bound {hi:,}")
        return LengthDist("uniform", (lo, hi), source=f"{what} {t}")
    if t.lower().endswith(".csv") or "/" in t:
        return read_histogram(t, what)
    return LengthDist("fixed", (parse_length(t, what),), source="")


def read_histogram(path: str, what: str) -> LengthDist:
    """A CSV histogram of token lengths: rows ``length,count`` (an optional header line ``length,count``;
    ``#`` comments). File problems are ``ProfileError`` naming the file and line (exit 3)."""
    from mi400plan.errors import ProfileError
    from mi400plan.profiles import read_text_file

    p, text = read_text_file(path, f"{what} histogram file")
    vals: list[int] = []
    cnts: list[float] = []
    for no, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s.startswith("#") or (not vals and s.replace(" ", "").lower() == "length,count"):
            continue
        parts = [x.strip() for x in s.split(",")]
        try:
            if len(parts) != 2:
                raise ValueError
            n, c = int(parts[0]), float(parts[1])
        except ValueError:
            raise ProfileError(f"expected 'length,count' (an integer and a number), got {s[:60]!r}", path=str(p),
                               line=no) from None
        if n < 1 or n > MAX_LENGTH or not c >= 0 or not math.isfinite(c):
            raise ProfileError(f"length must be 1..{MAX_LENGTH:,} and count >= 0, got {s[:60]!r}", path=str(p), line=no)
        vals.append(n)
        cnts.append(c)
    if not vals or sum(cnts) <= 0:
        raise ProfileError("holds no 'length,count' rows with a positive count", path=str(p))
    return LengthDist("histogram", tuple(vals), tuple(cnts), source=f"histogram {p.name}")


# --- MLPerf Inference benchmarks ---------------------------------------------------------------------


@dataclass(frozen=True)
class Benchmark:
    """One MLPerf Inference LLM benchmark: latency limits per scenario and published length statistics
    (``profiles/workloads/mlperf-inference.toml``)."""

    name: str
    models: tuple[str, ...]
    limits: dict[str, tuple[float, float]]  # scenario -> (p99 TTFT s, p99 TPOT s)
    output: LengthDist | None  # the dataset's histogram, else the published mean; None where none is published
    input_max: int | None
    input_mean: float | None
    source: str
    input: LengthDist | None = None  # the dataset's prompt lengths (histogram); None where none are published


def _benchmarks_raw() -> dict[str, Any]:
    import tomllib

    from mi400plan.profiles import bundled_root

    f = bundled_root() / "workloads" / "mlperf-inference.toml"
    return tomllib.loads(f.read_text(encoding="utf-8"))


def benchmark_for(model_name: str) -> Benchmark | None:
    """The MLPerf Inference benchmark run on the model profile ``model_name`` (or None)."""
    for name, b in _benchmarks_raw().get("benchmark", {}).items():
        if model_name in b["models"]:
            return _benchmark(name, b)
    return None


def benchmark_named(name: str) -> Benchmark:
    """The MLPerf Inference benchmark ``name`` (a table of ``profiles/workloads/mlperf-inference.toml``:
    llama2-70b, llama3_1-405b, deepseek-r1); ``UsageError`` naming the known ones otherwise."""
    raw = _benchmarks_raw().get("benchmark", {})
    if name not in raw:
        raise UsageError(f"unknown MLPerf Inference benchmark {name!r}; known: {', '.join(raw)}")
    return _benchmark(name, raw[name])


def _benchmark(name: str, b: dict[str, Any]) -> Benchmark:
    """One benchmark's table. Its output lengths: the dataset's histogram where one is recorded, else every
    request at the published mean (rounded)."""
    lim = {k: (float(v[0]) / 1e3, float(v[1]) / 1e3) for k, v in b["limits_ms"].items()}
    out = None
    if "output_histogram" in b:
        v, c = zip(*((int(x[0]), float(x[1])) for x in b["output_histogram"]))
        out = LengthDist("histogram", tuple(v), tuple(c), source=f"{name}: {b['output_source']}")
    elif "output_mean" in b:
        out = LengthDist("fixed", (int(round(b["output_mean"])),), source=(
            f"{name}'s published mean output {b['output_mean']:,.2f} tokens for every request (no per-sample "
            f"output lengths published); {b['source']}"))
    inp = None
    if "input_histogram" in b:
        v, c = zip(*((int(x[0]), float(x[1])) for x in b["input_histogram"]))
        inp = LengthDist("histogram", tuple(v), tuple(c), source=f"{name}: {b['input_source']}")
    return Benchmark(name, tuple(b["models"]), lim, out, b.get("input_max"), b.get("input_mean"), b["source"], inp)


# --- the iteration cost ------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepModel:
    """Seconds of one scheduler iteration: ``decode_s[b]`` for ``b`` decoding sequences (``decode_s[0] =
    0``), and the prefill time ``P(n)`` of an ``n``-token prompt on the busiest pipeline stage, tabulated on
    ``prefill_tokens`` (``P(0) = 0``; linear in between). With ``stages`` pipeline stages prompts pipeline
    through them: an iteration is charged one stage's time, and a prompt's first token comes ``(stages - 1)
    P(prompt)`` after the iteration that completes it, and so do its later tokens (``serve.evaluate``:
    throughput from the busy time, TTFT from ``pp x`` it)."""

    decode_s: tuple[float, ...]
    prefill_tokens: tuple[float, ...]
    prefill_s: tuple[float, ...]
    tokens_per_step: float = 1.0  # expected tokens a decoding sequence gains per iteration
    decode_tokens_per_seq: int = 1  # tokens of the iteration's budget one decoding sequence uses (1 + drafts)
    ttft_extra_s: float = 0.0  # per-request time outside the GPU model, added to TTFT
    stages: int = 1  # pipeline stages

    def prefill(self, n: float) -> float:
        return float(np.interp(n, self.prefill_tokens, self.prefill_s)) if n > 0 else 0.0


@dataclass(frozen=True)
class Limits:
    """The scheduler's limits: tokens per iteration, sequences in flight, KV cache (tokens per replica)."""

    max_batched_tokens: int = DEFAULT_MAX_BATCHED_TOKENS
    max_seqs: int = DEFAULT_MAX_SEQS
    kv_tokens: float = math.inf
    mixed: bool = True  # prompt chunks share an iteration with the decodes (vLLM); False: prefill-only iterations
    batch_wait: BatchWait | None = None  # TensorRT-LLM's batch waiting where a launch turns it on (_Sim._holding)


@dataclass(frozen=True)
class SimResult:
    """Per-request seconds (arrays over the measured requests) and totals."""

    ttft: np.ndarray
    tpot: np.ndarray  # requests with more than one output token
    latency: np.ndarray
    output_tokens: float  # of the measured requests
    span_s: float  # first measured arrival to last measured completion
    preemptions: int
    rejected: int  # requests whose prompt alone exceeds the KV cache (never served)
    thrashed: bool = False  # stopped: more than THRASH_PREEMPTIONS preemptions per request
    decode_context: float = math.nan  # mean tokens of KV a decoding sequence held per decode iteration (the run)
    blocked: bool = True  # a request ever waited for a sequence slot or KV room (False: the limits never bound)


def percentiles(x: np.ndarray) -> dict[str, float]:
    """p50 / p90 / p99 as the rank statistic (the smallest sample with at least that share of the samples at
    or below it, as LoadGen reports a percentile); NaN for no samples."""
    if not len(x):
        return {f"p{int(p)}": math.nan for p in PERCENTILES}
    v = np.percentile(x, PERCENTILES, method="inverted_cdf")
    return {f"p{int(p)}": float(a) for p, a in zip(PERCENTILES, v, strict=True)}


# --- the scheduler -----------------------------------------------------------------------------------


class _Sim:
    """State of one run of :func:`simulate` (see the module docstring)."""

    def __init__(self, arrivals: np.ndarray, inp: np.ndarray, out: np.ndarray, sm: StepModel, lim: Limits) -> None:
        self.arr = [float(x) for x in arrivals]
        self.inp = [int(x) for x in inp]
        self.out = [int(x) for x in out]
        self.sm, self.lim = sm, lim
        self.dec = list(sm.decode_s)
        n = len(self.arr)
        self.need = list(self.inp)  # tokens to prefill before the next token (prompt + recomputed output)
        self.p_full = [float(x) for x in np.interp(inp, sm.prefill_tokens, sm.prefill_s)]  # P(prompt) per request
        self.done_pf = [0] * n
        self.gen = [0.0] * n  # tokens generated when the request last joined the decodes
        self.join = [0] * n  # decode-iteration count when it joined
        self.hold = [0.0] * n  # KV tokens reserved at admission
        self.admit = [0] * n
        self.ver = [0] * n  # bumps on preemption (stale heap entries are skipped)
        self.first = [math.nan] * n
        self.last = [math.nan] * n
        self.waiting: deque[int] = deque()
        self.prefilling: list[int] = []
        self.running: dict[int, int] = {}  # id -> admission number
        self.heap: list[tuple[int, int, int]] = []  # (finish iteration, id, version)
        self.now, self.it, self.nxt, self.kv, self.count = 0.0, 0, 0, 0.0, 0
        self.kv_pf = 0.0  # of ``kv``, the tokens reserved by the requests prefilling
        self.ctx_tok, self.ctx_seq = 0.0, 0.0  # sums over decode iterations: KV of the decodes, decodes
        self.finished, self.preempted, self.rejected = 0, 0, 0
        self.blocked = False  # a waiting request found every slot busy or no KV room
        self.measured = [1] * n
        self.measured_done = 0
        self.thrashed = False
        self.hold_from: int | None = None  # decode-iteration count when the batch-waiting hold began
        self.full_at: int | None = None  # decode-iteration count when the hold's prompts were reached (then_iters)
        self.closed = False  # a closed loop (:func:`closed_loop`): a finish sends the next request (``next_id``)
        self.next_id = n

    def _arrive(self) -> None:
        while self.nxt < len(self.arr) and self.arr[self.nxt] <= self.now:
            self.waiting.append(self.nxt)
            self.nxt += 1

    def _admit(self) -> None:
        lim = self.lim
        if not self.running and not self.prefilling:
            self.kv = self.kv_pf = 0.0  # an empty replica holds nothing (no rounding left over from the frees)
        while self.waiting and len(self.running) + len(self.prefilling) < lim.max_seqs:
            i = self.waiting[0]
            if self.need[i] > lim.kv_tokens:  # can never fit: rejected, as a server returns an error
                self.waiting.popleft()
                self.rejected += 1
                self._finish(i, math.inf)
                continue
            if self.kv + self.need[i] > lim.kv_tokens:
                self.blocked = True
                break
            self.waiting.popleft()
            self.prefilling.append(i)
            self.kv += self.need[i]
            self.kv_pf += self.need[i]
            self.hold[i] = float(self.need[i])
            self.done_pf[i] = 0
            self.count += 1
            self.admit[i] = self.count

    def _finish(self, i: int, t: float) -> None:
        self.last[i] = t + (self.sm.stages - 1) * self.p_full[i]  # the pipeline fill delays every token
        self.finished += 1
        self.measured_done += self.measured[i]
        if self.closed and self.next_id < len(self.arr):  # its client sends the next request on the last token
            sent = self.last[i] + self.sm.ttft_extra_s if math.isfinite(t) else self.now
            self.arr[self.next_id] = max(sent, self.arr[self.next_id - 1])
            self.next_id += 1

    def _preempt_newest(self) -> None:
        """Preempt the request that joined the running batch last (vLLM pops the end of its running list)."""
        i = next(reversed(self.running))
        del self.running[i]
        g = self.gen[i] + self.sm.tokens_per_step * (self.it - self.join[i])
        self.kv -= self.hold[i] + self.sm.tokens_per_step * (self.it - self.join[i])
        self.gen[i] = g
        self.need[i] = self.inp[i] + int(g)
        self.ver[i] += 1
        self.preempted += 1
        self.waiting.appendleft(i)

    def _retire(self) -> None:
        """Requests whose last token came at the end of iteration ``self.it``."""
        a, heap, it, running, ver, hold, join = (self.sm.tokens_per_step, self.heap, self.it, self.running, self.ver,
                                                 self.hold, self.join)
        while heap and heap[0][0] <= it:
            _, i, v = heapq.heappop(heap)
            if v != ver[i] or i not in running:
                continue
            del running[i]
            self.kv -= hold[i] + a * (it - join[i])
            self._finish(i, self.now)

    def _join(self, i: int) -> None:
        """Prompt (or recomputation) complete at ``self.now``: the iteration sampled one more token."""
        now, sm, o = self.now, self.sm, self.out[i]
        if math.isnan(self.first[i]):
            self.first[i] = now + (sm.stages - 1) * self.p_full[i]
        g = self.gen[i] + 1.0
        if g >= o:
            self.kv -= self.hold[i]
            self._finish(i, now)
            return
        it = self.it
        self.gen[i], self.join[i] = g, it
        self.running[i] = self.admit[i]
        steps = math.ceil((o - g) / sm.tokens_per_step - 1e-9)
        heapq.heappush(self.heap, (it + steps, i, self.ver[i]))

    def _prefill_iteration(self, b: int) -> None:
        """One iteration with prompt chunks: beside the ``b`` decodes (mixed), or alone, the decodes waiting
        (SGLang's default: its mixed chunked prefill is off)."""
        lim, sm = self.lim, self.sm
        if not lim.mixed:
            b = 0
        budget = lim.max_batched_tokens - b * sm.decode_tokens_per_seq
        cost, done = 0.0, []
        done_pf, need, inp, p_full = self.done_pf, self.need, self.inp, self.p_full
        for i in self.prefilling:
            if budget <= 0:
                break
            s, n = done_pf[i], need[i]
            c = min(n - s, budget)
            if s == 0 and c == inp[i]:
                cost += p_full[i]  # the whole prompt in one chunk (the common case)
            else:
                cost += sm.prefill(s + c) - sm.prefill(s)
            done_pf[i] = s + c
            budget -= c
            if s + c >= n:
                done.append(i)
        self.now += self.dec[b] + cost
        if b:
            self.ctx_tok += self.kv - self.kv_pf
            self.ctx_seq += b
            self.it += 1
            self.kv += b * self.sm.tokens_per_step
            if self.heap and self.heap[0][0] <= self.it:
                self._retire()
        for i in done:
            self.prefilling.remove(i)
            self.kv_pf -= self.hold[i]
            self._join(i)

    def _holding(self, b: int) -> bool:
        """Whether TensorRT-LLM's batch waiting (``Limits.batch_wait``, ``serve.BatchWait``) holds the admitted
        prompts back this iteration: only while ``b`` decodes run, until ``iters`` decode iterations have passed
        since the hold began or the scheduled tokens (the prompts' + ``decode_tokens_per_seq`` per decode) reach
        ``tokens`` (``prompts`` > 0: that many prompts are held; then ``then_iters`` more iterations, the
        attention-DP batching wait, ``py_executor.py`` ``_balance_adp_requests``, TensorRT-LLM 1.1, 2025). A
        released hold starts afresh."""
        bw = self.lim.batch_wait
        if bw is None or bw.iters <= 0 or not b:
            return False
        if self.hold_from is None:
            self.hold_from = self.it
        if self.full_at is not None:  # the batching wait after the hold's prompts were reached
            if self.it - self.full_at >= bw.then_iters:
                self.hold_from = self.full_at = None
                return False
            return True
        if bw.prompts > 0:
            full = len(self.prefilling) >= bw.prompts
        else:
            held = sum(self.need[i] - self.done_pf[i] for i in self.prefilling)
            full = held + b * self.sm.decode_tokens_per_seq >= bw.tokens
        if full and bw.prompts > 0 and bw.then_iters > 0:
            self.full_at = self.it
            return True
        if full or self.it - self.hold_from >= bw.iters:
            self.hold_from = None
            return False
        return True

    def _hold_left(self) -> int:
        """Decode iterations left in the current batch-waiting hold (:meth:`_holding`)."""
        bw = self.lim.batch_wait
        assert bw is not None and self.hold_from is not None
        if self.full_at is not None:
            return max(bw.then_iters - (self.it - self.full_at), 1)
        return max(bw.iters - (self.it - self.hold_from), 1)

    def _decode_jump(self, b: int, most: int | None = None) -> None:
        """Run identical decode iterations up to the next event (a finish, an arrival that can be admitted,
        the KV cache filling up; at most ``most``: the end of a batch-waiting hold)."""
        a, t, heap, nxt = self.sm.tokens_per_step, self.dec[b], self.heap, self.nxt
        k = heap[0][0] - self.it if heap else 1
        if most is not None:
            k = min(k, most)
        if not self.waiting and nxt < len(self.arr) and math.isfinite(self.arr[nxt]):
            k = min(k, max(1, math.ceil((self.arr[nxt] - self.now) / t)))
        cap = self.lim.kv_tokens
        room = math.floor((cap - self.kv) / (b * a)) if math.isfinite(cap) else k
        k = max(1, min(k, room))
        self.ctx_tok += k * (self.kv - self.kv_pf) + b * a * k * (k - 1) / 2.0  # the decodes' KV, k iterations
        self.ctx_seq += k * b
        self.now += k * t
        self.it += k
        self.kv += k * b * a
        if heap and heap[0][0] <= self.it:
            self._retire()

    def run(self) -> None:
        """Until every measured request has finished."""
        stop = sum(self.measured)
        limit = THRASH_PREEMPTIONS * len(self.arr)
        arr, n_arr, running, waiting = self.arr, len(self.arr), self.running, self.waiting
        a, cap, per_seq = self.sm.tokens_per_step, self.lim.kv_tokens, self.sm.decode_tokens_per_seq
        mixed, budget, max_seqs = self.lim.mixed, self.lim.max_batched_tokens, self.lim.max_seqs
        while self.measured_done < stop:  # each helper is called only when it has something to do
            if self.preempted > limit:
                self.thrashed = True
                return
            if self.nxt < n_arr and arr[self.nxt] <= self.now:
                self._arrive()
            while running and self.kv + len(running) * a > cap:
                self._preempt_newest()
            if not running and not self.prefilling:
                self.kv = self.kv_pf = 0.0  # an empty replica holds nothing (as _admit)
            if waiting:
                if len(running) + len(self.prefilling) < max_seqs:
                    self._admit()
                else:
                    self.blocked = True
            b = len(running)
            if self.prefilling and (not mixed or budget > b * per_seq):
                if self._holding(b):
                    self._decode_jump(b, self._hold_left())
                else:
                    self._prefill_iteration(b)
            elif b:
                self._decode_jump(b)
            elif self.nxt < n_arr and math.isfinite(arr[self.nxt]):
                self.now = max(self.now, arr[self.nxt])
            elif self.preempted:  # a preempted request's prompt and output outgrow the whole cache: it never ends
                self.thrashed = True
                return
            else:
                raise RuntimeError("serving simulation stalled with requests left")  # pragma: no cover


def simulate(arrivals: np.ndarray, inp: np.ndarray, out: np.ndarray, sm: StepModel, lim: Limits, *,
             measure: slice | None = None, preload: np.ndarray | None = None) -> SimResult:
    """Serve requests arriving at ``arrivals`` (seconds, ascending) with prompts ``inp`` and outputs ``out``
    (tokens) on one replica; per-request TTFT, TPOT and latency of the ``measure`` requests (default all;
    the run stops once they have all finished, the others keeping the load up around them). Seconds.

    ``preload``: the first ``len(preload)`` requests are already decoding at time 0, having generated
    ``preload`` tokens each (their prompts' and those tokens' KV held; never measured)."""
    sim = _Sim(arrivals, inp, out, sm, lim)
    if preload is not None:
        _preload(sim, preload)
    sel = np.arange(len(arrivals))[measure or slice(None)]
    sim.measured = [0] * len(arrivals)
    for i in sel:
        sim.measured[int(i)] = 1
    sim.run()
    return _result(sim, np.asarray(arrivals, dtype=np.float64), out, sel)


def closed_loop(inp: np.ndarray, out: np.ndarray, sm: StepModel, lim: Limits, clients: int) -> SimResult:
    """A closed loop of ``clients`` clients sending the requests ``inp`` / ``out`` (tokens) in turn, as a
    benchmark client with a concurrency cap does (vLLM's ``benchmark_serving.py --max-concurrency``, request
    rate inf): the first ``clients`` requests at time 0, then each client's next request the moment its last
    token arrives (after the per-request overhead). Every request measured, the start's burst included."""
    n = len(inp)
    arr = np.full(n, math.inf)
    arr[:min(int(clients), n)] = 0.0
    sim = _Sim(arr, inp, out, sm, lim)
    sim.closed, sim.next_id = True, min(int(clients), n)
    sim.run()
    return _result(sim, np.asarray(sim.arr, dtype=np.float64), out, np.arange(n))


def _result(sim: _Sim, arrivals: np.ndarray, out: np.ndarray, sel: np.ndarray) -> SimResult:
    """The ``sel`` requests' TTFT, TPOT and latency from a finished run (seconds)."""
    sm = sim.sm
    arr = arrivals[sel]
    first = np.asarray(sim.first)[sel]
    last = np.asarray(sim.last)[sel]
    o = np.asarray(out, dtype=np.float64)[sel]
    ok = np.isfinite(last)
    x = sm.ttft_extra_s
    multi = ok & (o > 1)
    span = float(last[ok].max() - arr[ok].min()) if ok.any() else 0.0
    return SimResult(ttft=first[ok] + x - arr[ok], tpot=(last[multi] - first[multi]) / (o[multi] - 1.0),
                     latency=last[ok] + x - arr[ok], output_tokens=float(o[ok].sum()), span_s=span,
                     preemptions=sim.preempted, rejected=sim.rejected, thrashed=sim.thrashed,
                     decode_context=sim.ctx_tok / sim.ctx_seq if sim.ctx_seq else math.nan,
                     blocked=sim.blocked or sim.preempted > 0)


# --- from the serving model to the simulation --------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """One replica layout (``serve.layout_grid``'s fields)."""

    tp: int
    pp: int
    ep: int
    dpa: bool


def step_model(wl: Workload, hw: ServeHardware, lay: Layout, *, max_seqs: int, context: float, max_prompt: int,
               exact: tuple[int, ...] | list[int] = ()) -> StepModel:
    """The iteration cost of ``lay`` from ``serve``'s cost functions: ``serve.decode_step`` for 1..``max_seqs``
    sequences at mean context ``context`` tokens, and the busiest stage's prefill time of prompts of
    0..``max_prompt`` tokens (``serve.forward_stage``, causal) on a geometric grid of 128 points plus the
    prompt lengths ``exact`` (so the prompts of a fixed or histogram distribution cost exactly their
    prefill; the wave quantization makes ``P`` a staircase that interpolation only approximates)."""
    from mi400plan import serve as core

    T = core.terms(wl.model, wl.counts, wl.recipe)
    kw = dict(tp=float(lay.tp), pp=float(lay.pp), ep=float(lay.ep), dpa=bool(lay.dpa))
    b = np.arange(1, max(int(max_seqs), 1) + 1, dtype=np.float64)
    _, _, t_step = core.decode_step(T, wl, hw, batch=b, context=float(context), **kw)
    ex = np.asarray(exact, dtype=np.float64).ravel()[:4096]
    grid = np.unique(np.concatenate([np.geomspace(1.0, max(float(max_prompt), 1.0), 128).round(), [max_prompt], ex]))
    p = core.forward_stage(T, wl, hw, tokens=grid, seqs=1.0, context=0.0, causal=True, **kw)
    pf = np.broadcast_to(p.total, grid.shape)
    a = core.tokens_per_step(wl.spec_tokens, wl.spec_acceptance)
    return StepModel(decode_s=(0.0, *(float(x) for x in np.broadcast_to(t_step, b.shape))),
                     prefill_tokens=(0.0, *(float(x) for x in grid)), prefill_s=(0.0, *(float(x) for x in pf)),
                     tokens_per_step=a, decode_tokens_per_seq=1 + int(wl.spec_tokens),
                     ttft_extra_s=float(hw.request_overhead_s), stages=int(lay.pp))


def kv_token_capacity(wl: Workload, hw: ServeHardware, lay: Layout, *, max_seqs: int) -> float:
    """Tokens the replica's KV cache holds: ``memory.max_batch_x_context`` (the ``fit --mode infer``
    model, scratch sized for ``max_seqs`` sequences); with DP-attention each of the ``tp`` ranks holds its
    own sequences' whole KV next to the replicated attention weights (``serve.memory``)."""
    from mi400plan import serve as core
    from mi400plan.memory import max_batch_x_context

    if not lay.dpa:
        return float(max_batch_x_context(wl.model, wl.counts, wl.recipe, capacity_bytes=hw.hbm_bytes, tp=lay.tp,
                                          pp=lay.pp, ep=1, batch=max_seqs))
    m = core.memory(wl, hw, tp=lay.tp, pp=lay.pp, dpa=True, batch=lay.tp)
    room = float(m["usable"]) - float(m["weights"] + m["activations"] + m["reserve"])
    return max(math.floor(room / float(m["kv_dpa_per_token"])), 0) * float(lay.tp)


# --- scenarios ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Probe:
    """One run of a scenario's search: the rate it ran at (requests/s per replica; offline: achieved), the
    scheduler's ``max_seqs``, p50 / p90 / p99 of TTFT and TPOT (seconds), and what failed (None: it met the
    limits)."""

    rate: float
    max_seqs: int
    ttft: dict[str, float]
    tpot: dict[str, float]
    failed: str | None = None


def probe(rate: float, max_seqs: int, r: SimResult, failed: str | None) -> Probe:
    return Probe(rate, max_seqs, percentiles(r.ttft), percentiles(r.tpot), failed)


@dataclass(frozen=True)
class Outcome:
    """A scenario's answer for one layout: the request rate per replica (server: the largest that meets
    the limits; offline: achieved; single-stream: 1 / mean latency), the run at that rate, and whether it
    meets the limits (``binding``: the percentile that fails first, when none does). ``trace``: every run
    the search made, by rate (server / interactive) or ``max_seqs`` (offline)."""

    scenario: str
    rate: float
    run: SimResult
    meets: bool
    binding: str | None = None
    requests: int = 0  # simulated in the deciding run
    trace: tuple[Probe, ...] = ()


def mean_prefill_s(sm: StepModel, inp: LengthDist) -> float:
    """The mean over the prompt distribution of ``P(n)``, the busiest stage's prefill seconds of an ``n``-token
    prompt (exact: ``P`` is linear between its tabulated points, so the mean is over every length drawn)."""
    if inp.kind == "uniform":
        n = np.arange(inp.values[0], inp.values[1] + 1, dtype=np.float64)
        return float(np.interp(n, sm.prefill_tokens, sm.prefill_s).mean())
    p = np.interp(np.asarray(inp.values, dtype=np.float64), sm.prefill_tokens, sm.prefill_s)
    if inp.kind == "histogram":
        w = np.asarray(inp.weights, dtype=np.float64)
        return float(np.dot(p, w) / w.sum())
    return float(p[0])


def in_flight(inp: LengthDist, out: LengthDist, *, whole: bool = False) -> float:
    """Mean tokens per sequence in flight (``inflight.in_flight_tokens``, length-biased; Kleinrock 1975 sec.
    5.2): the context a decode step reads, ``E[I] + E[O^2] / (2 E[O])``, or with ``whole`` the whole length,
    ``E[I] + E[O^2] / E[O]``; ``E[I] + E[O] / 2`` and ``E[I] + E[O]`` for a fixed output length."""
    from mi400plan.inflight import in_flight_tokens

    return float(in_flight_tokens(inp.mean, out.mean, out.cv2, whole=whole))


def sample_lengths(inp: LengthDist, out: LengthDist, n: int, seed: int = SEED) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return inp.sample(rng, n), out.sample(rng, n)


def offline(sm: StepModel, lim: Limits, inp: LengthDist, out: LengthDist, n: int) -> Outcome:
    """MLPerf Offline: all ``n`` requests at time 0; the rate is requests completed per second."""
    i, o = sample_lengths(inp, out, n)
    r = simulate(np.zeros(n), i, o, sm, lim)
    if r.thrashed:
        return Outcome("offline", 0.0, r, False, "KV thrash", requests=n)
    return Outcome("offline", len(r.latency) / r.span_s if r.span_s > 0 else 0.0, r, True, requests=n)


def single_stream(sm: StepModel, inp: LengthDist, out: LengthDist, n: int) -> Outcome:
    """MLPerf SingleStream: one request at a time, so each sees an idle replica: TTFT = ``stages x P(I) +``
    overhead,
    then ``ceil((O - 1) / a)`` decode steps of one sequence. Closed form of :func:`simulate` with one request
    in flight (the tests check the two agree)."""
    i, o = sample_lengths(inp, out, n)
    ttft = sm.stages * np.interp(i, sm.prefill_tokens, sm.prefill_s) + sm.ttft_extra_s
    steps = np.ceil(np.maximum(o - 1, 0) / sm.tokens_per_step - 1e-9)
    dec = steps * sm.decode_s[1]
    lat = ttft + dec
    multi = o > 1
    run = SimResult(ttft=ttft, tpot=dec[multi] / (o[multi] - 1.0), latency=lat, output_tokens=float(o.sum()),
                    span_s=float(lat.sum()), preemptions=0, rejected=0)
    return Outcome("single-stream", n / float(lat.sum()), run, True, requests=n)


def _verdict(r: SimResult, ttft_s: float, tpot_s: float) -> str | None:
    if r.thrashed:
        return "KV thrash"
    if r.rejected:
        return "KV cache"
    t = percentiles(r.ttft)["p99"]
    p = percentiles(r.tpot)["p99"] if len(r.tpot) else 0.0
    if not t <= ttft_s:
        return "TTFT"
    if not p <= tpot_s:
        return "TPOT"
    return None


def saturated_rate(sm: StepModel, lim: Limits, inp: LengthDist, out: LengthDist, n: int = OFFLINE_REQUESTS) -> float:
    """Requests/s the replica completes while every one of its ``max_seqs`` slots is busy: ``n`` requests
    queued at once (:func:`offline`), completions counted between the ``max_seqs``-th and the
    ``(n - max_seqs)``-th (by then every request has been admitted, so after it the batch only drains). The
    saturated service rate, without the start, when every slot begins at once, or the drain, when the
    longest outputs run alone. 0: the run thrashes the KV cache."""
    o = offline(sm, lim, inp, out, n)
    if not o.meets:
        return 0.0
    done = np.sort(o.run.latency)
    k = min(lim.max_seqs, len(done) // 4)
    first, last = k, len(done) - k - 1
    span = float(done[last] - done[first])
    return (last - first) / span if span > 0 else o.rate


def capacity_requests(max_seqs: int) -> int:
    """Requests of the Offline run behind a Server search's stability check (:func:`saturated_rate`):
    ``CAPACITY_SLOTS x max_seqs``, at least ``CAPACITY_MIN_REQUESTS``, at most ``OFFLINE_REQUESTS``; the start's
    and the drain's ``max_seqs`` completions each are cut off, so at least 6 per slot are counted. A bound on the
    search's cost (the saturated run is its costliest: 1.45 s to 2.7 s CPU for the 4-SKU DeepSeek-V3 search
    with it, 4.4 s at the full ``OFFLINE_REQUESTS``, which ``serve_percentiles`` runs at the published rate)."""
    return int(min(OFFLINE_REQUESTS, max(CAPACITY_SLOTS * int(max_seqs), CAPACITY_MIN_REQUESTS)))


def server(sm: StepModel, lim: Limits, inp: LengthDist, out: LengthDist, *, ttft_s: float, tpot_s: float,
           rate_hi: float, measured: int = 500, tolerance: float = 0.03, scenario: str = "server",
           steady_rate: float = 0.0) -> Outcome:
    """MLPerf Server / Interactive: the largest Poisson rate (requests/s per replica) whose p99 TTFT and p99
    TPOT meet the limits, by a bracketing search and bisection as LoadGen searches: ``rate_hi`` (doubled up
    to 4 times while it meets the limits), else halved down to the first rate that meets them (at most 6
    times), then bisection until the bracket is within ``tolerance`` of its upper end.

    Stability: a rate at or above the replica's saturated throughput (:func:`saturated_rate`, the Offline
    run with its start and drain cut off, of :func:`capacity_requests` requests; run only for a rate whose
    run met a limit or that reaches ``CAPACITY_SCREEN`` x ``steady_rate``, the steady state's saturated rate;
    ``steady_rate`` 0: every rate that meets the limits is checked) is never an answer, whatever
    its run measured (its binding is ``"capacity"``): a queue whose arrival rate is at least its service capacity is unstable, its backlog
    growing without bound (Loynes 1962, "The stability of a queue with non-independent inter-arrival and
    service times", Proc. Cambridge Phil. Soc. 58), so its percentiles measure only how long the run lasted;
    ``measured`` requests are too few for the queue to grow past the limits within the run.

    Each run starts from the steady state's requests in flight (:func:`equilibrium`), and measures
    ``measured`` requests after a warm-up of the requests arriving in the first ``W = mean output x TPOT
    limit + TTFT limit`` seconds (the time a request at the limits stays in the system; at most ``measured``
    requests, the run starting near the steady state) and with as many arriving behind them (so they leave a loaded replica). The
    arrival and length draws are common to every rate (seeded): the rates differ only in scale."""
    warm_s = out.mean * tpot_s + ttft_s
    probes: list[Probe] = []
    cap: list[float] = []  # computed when a run first meets the limits

    def run(rate: float) -> tuple[SimResult, int, str | None]:
        r, n = poisson_run(sm, lim, inp, out, rate, warm_s=warm_s, measured=measured)
        why = _verdict(r, ttft_s, tpot_s)
        near = r.blocked or rate >= CAPACITY_SCREEN * steady_rate
        if why is None and near and not cap:
            cap.append(saturated_rate(sm, lim, inp, out, capacity_requests(lim.max_seqs)))
        if why is None and near and rate >= cap[0]:
            why = "capacity"
        probes.append(probe(rate, lim.max_seqs, r, why))
        return r, n, why

    o = _search_rate(run, rate_hi, tolerance, scenario)
    return replace(o, trace=tuple(sorted(probes, key=lambda p: p.rate)))


def poisson_run(sm: StepModel, lim: Limits, inp: LengthDist, out: LengthDist, rate: float, *, warm_s: float,
                measured: int = 500) -> tuple[SimResult, int]:
    """One run of :func:`server` at a Poisson ``rate`` (requests/s per replica): from the steady state's
    requests in flight (:func:`equilibrium`), ``measured`` requests measured after a warm-up of those arriving
    in the first ``warm_s`` seconds (at most ``measured``), as many arriving behind them. The draws are
    seeded and common to every rate. Returns the run and the requests simulated."""
    cap = measured
    n_max = measured + 2 * cap
    rng = np.random.default_rng(SEED + 1)
    gaps = rng.exponential(1.0, n_max)
    li, lo_ = sample_lengths(inp, out, n_max)
    w = min(int(math.ceil(rate * warm_s)), cap)
    n = measured + 2 * w
    pi, po, pg = equilibrium(sm, lim, inp, out, rate, np.random.default_rng(SEED + 2))
    k = len(pi)
    arr = np.concatenate([np.zeros(k), np.cumsum(gaps[:n]) / rate])
    r = simulate(arr, np.concatenate([pi, li[:n]]), np.concatenate([po, lo_[:n]]), sm, lim,
                 measure=slice(k + w, k + w + measured), preload=pg)
    return r, n + k


def _search_rate(run: Callable[[float], tuple[SimResult, int, str | None]], rate_hi: float, tolerance: float,
                 scenario: str) -> Outcome:
    """:func:`server`'s bracketing search and bisection over ``run(rate)``."""
    hi = rate_hi
    r, n, why = run(hi)
    for _ in range(4):  # the upper end meets the limits: widen (doubling) until a rate does not
        if why is not None:
            break
        best = (hi, r, n)
        hi *= 2.0
        r, n, why = run(hi)
    else:
        if why is None:  # the last doubling met the limits too: it is the largest rate run that did
            best = (hi, r, n)
        return Outcome(scenario, best[0], best[1], True, requests=best[2])
    if hi > rate_hi:
        lo, best = hi / 2.0, best
        return _bisect(run, lo, hi, best, tolerance, scenario)
    lo = hi
    for _ in range(6):
        lo /= 2.0
        r, n, why = run(lo)
        if why is None:
            break
        hi = lo
    else:
        return Outcome(scenario, lo, r, False, why, requests=n)
    return _bisect(run, lo, hi, (lo, r, n), tolerance, scenario)


def _bisect(run: Callable[[float], tuple[SimResult, int, str | None]], lo: float, hi: float,
            best: tuple[float, SimResult, int], tolerance: float, scenario: str) -> Outcome:
    """Bisection between a rate ``lo`` that meets the limits and a rate ``hi`` that does not."""
    while (hi - lo) > tolerance * hi:
        mid = 0.5 * (lo + hi)
        r, n, why = run(mid)
        if why is None:
            lo, best = mid, (mid, r, n)
        else:
            hi = mid
    return Outcome(scenario, best[0], best[1], True, requests=best[2])


# --- published MLPerf results (validation; never fitted) --------------------------------------------


@dataclass(frozen=True)
class MlperfSetup:
    """How :func:`predict_mlperf` simulates an MLPerf result: the workload, the replica's layout, its
    iteration cost and scheduler limits, and the prompt and output length distributions."""

    wl: Workload
    lay: Layout
    sm: StepModel
    lim: Limits
    inp: LengthDist
    out: LengthDist


def mlperf_setup(cat: Catalog, m: Measured, hw: ServeHardware, stack: str | None = None) -> MlperfSetup:
    """The simulation of MLPerf result ``m`` (``serve_calibration.Measured``: one ``m.tp``-GPU replica, TP =
    EP = ``m.tp`` with attention data parallel when ``m.dpa``) on serving stack ``stack`` (the profile the
    submission ran, ``serve_calibration.VALIDATION_STACKS``; None: none known): prompts of ``m.isl`` tokens
    (the sources publish no mean input); outputs the benchmark's fitted distribution (:func:`benchmark_for`);
    the scheduler's limits :func:`mlperf_limits`."""
    from mi400plan import serve as core
    from mi400plan.params import count_params
    from mi400plan.specs.layout import infer_recipe

    model = cat.get("models", m.model).spec
    bench = benchmark_for(model.name)
    out = bench.output if bench is not None and bench.output is not None else LengthDist("fixed", (m.osl,))
    inp = LengthDist("fixed", (m.isl,))
    recipe = infer_recipe(m.precision, kv_dtype=m.kv)
    wl = core.Workload(model, count_params(model), recipe, m.isl, int(round(out.mean)), output_cv2=out.cv2)
    lay = Layout(m.tp, 1, m.tp if m.dpa else 1, bool(m.dpa))
    lim = mlperf_limits(cat, m, hw, wl, lay, inp, stack)
    sm = step_model(wl, hw, lay, max_seqs=lim.max_seqs, context=in_flight(inp, out), max_prompt=inp.max + out.max,
                    exact=[m.isl])
    return MlperfSetup(wl, lay, sm, lim, inp, out)


def seq_cap(sku_name: str, hw: ServeHardware, sched: SchedulerDefaults | None) -> int:
    """The most sequences a serving stack's scheduler runs at once on this SKU: its profile's tier, a KV-pool
    rule SGLang's 4,096 (``SGLANG_MAX_RUNNING``); no stack: vLLM's default for the GPU (:func:`scheduler_defaults`)."""
    if sched is None:
        return scheduler_defaults(sku_name, hw.hbm_bytes)[1]
    if sched.max_num_seqs == "kv-pool":
        return SGLANG_MAX_RUNNING
    return sched.tier(sched.max_num_seqs, sku_name, hw.hbm_bytes / GIB)


def stack_limits(wl: Workload, sku_name: str, hw: ServeHardware, lay: Layout, sched: SchedulerDefaults | None, *,
                 max_batched_tokens: int | None = None, max_seqs: int | None = None, max_prompt: int = 0,
                 batch_wait: BatchWait | None = None) -> Limits:
    """The scheduler's limits for ``lay`` on this SKU: those given (``max_batched_tokens``, ``max_seqs``), else
    the serving stack's defaults (``serving_stacks.scheduler_limits``; no stack: vLLM's per GPU,
    :func:`scheduler_defaults`). A stack whose prefill does not share iterations with the decodes runs them
    apart; one that does not chunk prompts gives every prompt a budget of at least its length (``max_prompt``
    tokens: its iteration holds the whole prompt) unless a budget is given."""
    from mi400plan.serving_stacks import scheduler_limits

    if sched is None:
        chunk, seqs = scheduler_defaults(sku_name, hw.hbm_bytes)
        kv = kv_token_capacity(wl, hw, lay, max_seqs=max_seqs or seqs)
        return Limits(max_batched_tokens or chunk, max_seqs or seqs, kv, batch_wait=batch_wait)
    kv = kv_token_capacity(wl, hw, lay, max_seqs=max_seqs or seq_cap(sku_name, hw, sched))
    chunk, seqs = scheduler_limits(sched, sku_name, hw.hbm_bytes, kv, wl.model.max_seq_len)
    budget = max_batched_tokens or chunk
    if not sched.chunked_prefill and max_batched_tokens is None:
        budget = max(budget, max_prompt)
    return Limits(budget, max_seqs or seqs, kv, mixed=sched.prefill_with_decodes, batch_wait=batch_wait)


def mlperf_limits(cat: Catalog, m: Measured, hw: ServeHardware, wl: Workload, lay: Layout, inp: LengthDist,
                  stack: str | None) -> Limits:
    """The scheduler limits MLPerf result ``m`` ran with (:func:`stack_limits`): the submission's own where its
    row states them (``m.max_seqs`` sequences per replica; ``m.max_num_tokens``, else the Offline row's
    ``m.prefill_tokens``, tokens per iteration, per attention rank with attention data parallel, so ``tp`` times
    that for the replica: TensorRT-LLM runs one scheduler per attention-DP rank, NVIDIA's harness
    ``closed/NVIDIA/code/llmlib/config.py``, 2025-09-09: "max-bs applies per attention-rank"); the rest from
    the serving stack's profile; vLLM's defaults for the GPU where neither states them.
    Attention-DP balancing (``m.adp_timeout_iters``, ``m.adp_wait_iters``) holds prompts until every rank
    has one (``serve_calibration.adp_balance_prompts`` arrivals) or the timeout passes, then the batching wait
    (``serve.BatchWait``). The KV cache admits on the blocks a request holds now (TensorRT-LLM's
    ``max_util`` capacity scheduler, which NVIDIA's configurations set; vLLM's rule alike)."""
    from mi400plan.serve import BatchWait
    from mi400plan.serve_calibration import adp_balance_prompts

    tokens = m.max_num_tokens or m.prefill_tokens
    tokens = tokens * m.tp if tokens and m.dpa else tokens
    bw = (BatchWait(int(m.adp_timeout_iters), math.inf, adp_balance_prompts(m.tp), int(m.adp_wait_iters or 0))
          if m.adp_timeout_iters and m.dpa and m.tp > 1 else None)
    sched = cat.get("serving", stack).spec.scheduler if stack and stack in cat.names("serving") else None
    return stack_limits(wl, m.sku, hw, lay, sched, max_batched_tokens=int(tokens) if tokens else None,
                        max_seqs=m.max_seqs or None, max_prompt=inp.max, batch_wait=bw)


def predict_mlperf(cat: Catalog, m: Measured, hw: ServeHardware, stack: str | None = None) -> dict[str, float]:
    """The simulation's prediction of an MLPerf Offline (``m.kind == "max_throughput"``) or Server
    (``"slo_throughput"``) result ``m`` on serving stack ``stack`` (:func:`mlperf_setup`): output tokens/s of
    the replica, and the mean TPOT and TTFT (seconds) of the run at the answer's rate."""
    from mi400plan import serve as core

    st = mlperf_setup(cat, m, hw, stack)
    wl, lay, sm, lim, inp, out = st.wl, st.lay, st.sm, st.lim, st.inp, st.out
    if m.kind == "max_throughput":
        o = offline(sm, lim, inp, out, OFFLINE_REQUESTS)
    else:
        b = np.arange(1.0, lim.max_seqs + 1.0)
        ev = core.evaluate(wl, hw, tp=lay.tp, pp=1, ep=lay.ep, dpa=lay.dpa, batch=b)
        fit = core.memory(wl, hw, tp=lay.tp, pp=1, dpa=lay.dpa, batch=b)["kv_fit"]
        steady = float(np.max(np.where(fit, ev["requests_per_s"], 0.0)))
        o = server(sm, lim, inp, out, ttft_s=m.ttft_slo_s, tpot_s=m.tpot_slo_s, rate_hi=1.25 * steady,
                   steady_rate=steady)
    return {"output_tps": o.rate * out.mean if o.meets else 0.0, "tpot": float(np.mean(o.run.tpot)),
            "ttft": float(np.mean(o.run.ttft))}


def _preload(sim: _Sim, gen0: np.ndarray) -> None:
    """Requests ``0..len(gen0)-1`` decoding at time 0 with ``gen0`` tokens generated."""
    a = sim.sm.tokens_per_step
    for i, g in enumerate(int(x) for x in gen0):
        sim.gen[i], sim.join[i] = float(g), 0
        sim.hold[i] = float(sim.inp[i] + g)
        sim.kv += sim.hold[i]
        sim.first[i] = 0.0
        sim.count += 1
        sim.admit[i] = sim.count
        sim.running[i] = sim.count
        heapq.heappush(sim.heap, (max(1, math.ceil((sim.out[i] - g) / a - 1e-9)), i, 0))
    sim.nxt = len(gen0)


def equilibrium(sm: StepModel, lim: Limits, inp: LengthDist, out: LengthDist, rate: float,
                rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Requests in flight in the steady state at ``rate`` (requests/s), to start a run from: their number
    by Little's law ``L = rate x E[O] x TPOT / a``, with TPOT the decode step at ``L`` sequences stretched
    by the prefill share ``rate x P(E[I])`` (the steady-state model's, ``serve.evaluate``; fixed point,
    capped at ``max_seqs``); their output lengths length-biased (a request in flight is drawn with
    probability proportional to its length: the inspection paradox of renewal theory) and the tokens
    they have generated uniform over it. Returns (prompt lengths, output lengths, generated tokens)."""
    dec = sm.decode_s
    rho = min(rate * sm.prefill(inp.mean), 0.95)
    n = 1.0
    for _ in range(30):
        b = int(min(max(round(n), 1), lim.max_seqs, len(dec) - 1))
        n = rate * out.mean * dec[b] / (sm.tokens_per_step * (1.0 - rho))
    L = int(min(round(n), lim.max_seqs))
    if L < 1:
        return (np.zeros(0, dtype=np.int64),) * 3  # type: ignore[return-value]
    pool = out.sample(rng, 20 * L)
    w = pool.astype(np.float64)
    o = rng.choice(pool, size=L, p=w / w.sum())
    g = np.minimum(np.floor(rng.uniform(0.0, 1.0, L) * o).astype(np.int64) + 1, np.maximum(o - 1, 1))
    i = inp.sample(rng, L)
    return i, o, g
