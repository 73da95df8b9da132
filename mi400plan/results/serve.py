"""Result of ``mi400plan serve``: Pareto points (or SLA-ranked points) per SKU with every term."""

from typing import Any, ClassVar

from pydantic import Field

from mi400plan.factories import new_list, new_dict
from mi400plan.results.common import Count, OutModel, Result, flatten_model
from mi400plan.results.fleet import FleetRow


def layout_text(tp: float, pp: float, ep: float, dpa: bool) -> str:
    """A serving replica's parallel layout as every serve output writes it: ``TP8``, ``TP1 PP2``, ``TP8 EP8 DPA``
    (PP and EP only when above 1; DPA: attention data parallel)."""
    t = f"TP{int(tp)}"
    if pp > 1:
        t += f" PP{int(pp)}"
    if ep > 1:
        t += f" EP{int(ep)}"
    return t + (" DPA" if dpa else "")


class ServeLayout(OutModel):
    tp: int
    pp: int
    ep: int
    dp_attention: bool
    gpus_per_replica: int  # TP x PP (decode replica when disaggregated)
    replicas: int  # replicas in the GPUs given (aggregated); decode replicas when disaggregated
    disaggregated: bool
    prefill_gpus_per_decode_replica: Count = 0  # disaggregated: prefill GPUs sized to one decode replica (may be fractional)

    def text(self) -> str:
        """The parallel layout (:func:`layout_text`)."""
        return layout_text(self.tp, self.pp, self.ep, self.dp_attention)


class ServeMemory(OutModel):
    """Bytes per GPU (the ``fit --mode infer`` model)."""

    weights: float
    kv_cache: float
    activations: float
    reserve: float  # fixed part; the capacity share is in ``capacity`` (usable)
    total: float
    usable: float  # HBM x (1 - reserve fraction)
    max_concurrency: int  # largest concurrency whose KV fits (within the concurrency grid)


class DecodeBreakdown(OutModel):
    """Seconds of one decode step of the replica (all pipeline stages), by term."""

    weights: float  # projection and FFN GEMMs: max(FLOP, weight bytes) per GEMM
    attention: float  # attention core: KV bytes of every sequence's context (or FLOP)
    elementwise: float
    kernel_overhead: float
    tp: float  # TP all-reduces or DP-attention all-gather / reduce-scatter
    ep: float  # all-to-all dispatch + combine
    pp: float
    lm_head: float
    draft: float  # speculative draft tokens (MTP layers)
    step: float
    compute_bound: float  # FLOP / (peak x matmul efficiency)
    memory_bound: float  # bytes / (HBM x efficiency)
    weight_bytes_per_gpu: float
    kv_bytes_per_gpu: float


class PrefillBreakdown(OutModel):
    """Seconds of one prompt's prefill (all stages), by term, and what TTFT adds to it."""

    weights: float
    attention: float
    elementwise: float
    kernel_overhead: float
    tp: float
    ep: float
    pp: float
    lm_head: float
    prefill: float
    queue: float  # M/D/1 mean wait at the offered load
    kv_transfer: float  # disaggregated: prompt KV over scale-out


class Span(OutModel):
    low: float
    nominal: float
    high: float


class ServeRow(OutModel):
    sku: str
    rank: int
    layout: ServeLayout
    concurrency: int  # sequences in flight per replica
    gpus: Count  # GPUs per replica (both pools when disaggregated; may be fractional then)
    tokens_per_s_per_gpu: float  # output tokens
    total_tokens_per_s_per_gpu: float  # input + output tokens (InferenceX's throughput per GPU)
    tokens_per_s_per_user: float
    ttft_s: float  # mean time to first token (the SLA's and the ranking's statistic)
    ttft_median_s: float  # median time to first token (the statistic InferenceX publishes)
    tpot_s: float
    requests_per_s: float  # per replica
    prefill_share: float  # share of GPU time (aggregated) or of GPUs (disaggregated) on prefill
    tokens_per_step: float  # speculative decoding: expected tokens per sequence per step
    bound: str  # what dominates the decode step: memory, compute, communication, overhead
    memory_bytes: ServeMemory
    decode_s: DecodeBreakdown
    prefill_s: PrefillBreakdown
    ranges: dict[str, Span] = Field(default_factory=new_dict)  # tokens_per_s_per_gpu, tpot_s, ttft_s
    meets_sla: bool | None = None
    sla_flips: bool = False  # the SLA verdict differs at a corner of the estimate ranges
    cost_per_mtok_output: float | None = None  # USD per 1e6 output tokens (decode share of GPU time)
    cost_per_mtok_input: float | None = None  # USD per 1e6 input tokens (prefill share)
    output_tokens_per_s_per_mw: float | None = None  # per MW of rack wall power
    notes: list[str] = Field(default_factory=new_list)


class Comparison(OutModel):
    """Each SKU's best at one interactivity (tokens/s/user at least ``interactivity``, in place of the
    SLA's own floor; the SLA's TPOT and TTFT bounds still apply)."""

    interactivity: float
    best: dict[str, float | None]  # sku -> highest output tokens/s/GPU at this level
    cost_per_mtok_output: dict[str, float | None] = Field(default_factory=new_dict)  # sku -> lowest US$ per Mtok out
    low: dict[str, float | None]  # output tokens/s/GPU at the pessimistic / optimistic ends
    high: dict[str, float | None]
    leader: str | None  # best under the result's ``rank_by``
    flips: bool  # the leader changes inside the estimate ranges
    below_sla: bool = False  # a level looser than --interactivity: searched without the SLA's floor


class Curve(OutModel):
    """The whole Pareto front of one SKU (the chart of throughput per GPU against interactivity)."""

    sku: str
    tokens_per_s_per_user: list[float]  # ascending
    tokens_per_s_per_gpu: list[float]  # output tokens, descending along the front


class SkuInfo(OutModel):
    sku: str
    precision: str
    compute_precision: str
    peak_flops: float
    matmul: float  # large-GEMM ceiling (fraction of the peak) the shape-aware GEMM model saturates at
    hbm: float
    kernel_overhead_s: float
    hbm_bandwidth: float
    hbm_capacity: float
    domain: int
    gpus: int
    calibration: str
    serving_stack: str | None = None  # the serving stack priced (profiles/serving), None: none for the vendor
    serving_stack_basis: str | None = None  # "--stack" or the default rule
    ttft_rule: str | None = None  # how TTFT is priced: the serving stack's iteration rule (serve_iterations)
    calibration_status: str | None = None  # "stack fit", "family fit", or the family fit standing in for a stack
    gpu_hour_cost: float | None = None  # USD per GPU-hour
    cost_source: str | None = None  # "--gpu-hour-cost", "model: SYSTEM at SITE (USD YEAR)" or "none"
    gpus_per_mw: float | None = None  # per MW of rack wall power (rack power model)
    host_per_seq_s: float = 0.0  # framework CPU time per scheduled sequence per decode step (serve.host_bound_step)
    host_overlap: bool = False  # True: hidden behind the GPU step (the larger of the two), else added to it
    sla_binding: str | None = None  # which term keeps the SLA out of reach
    nearest: str | None = None  # the nearest feasible point when no layout meets the SLA


class Percentiles(OutModel):
    """Seconds at the 50th, 90th and 99th percentiles over the measured requests."""

    p50: float
    p90: float
    p99: float


class ScenarioProbe(OutModel):
    """One simulated run of the scenario's search: server / interactive, one Poisson rate of the bracketing
    search and bisection; offline, one ``max_num_seqs`` tried (its achieved rate)."""

    requests_per_s: float  # per replica
    tokens_per_s_per_gpu: float  # output tokens at that rate
    max_num_seqs: int
    ttft_s: Percentiles | None  # None: no measured request finished (the run stopped on KV thrash)
    tpot_s: Percentiles | None
    meets: bool  # server / interactive: p99 TTFT and p99 TPOT within the limits; offline: no KV thrash
    failed: str | None = None  # TTFT, TPOT, KV cache, KV thrash, or capacity (at or above the saturated rate)


class ScenarioRow(OutModel):
    """One layout under an MLPerf Inference scenario, from the request-level simulation (``serve_sim``)."""

    sku: str
    rank: int
    layout: ServeLayout
    scenario: str
    requests_per_s: float  # per replica: server/interactive the largest rate meeting the limits
    tokens_per_s_per_gpu: float  # output tokens
    steady_state_tokens_per_s_per_gpu: float  # the steady-state model's best point of this layout (for contrast)
    ttft_s: Percentiles
    tpot_s: Percentiles
    latency_s: Percentiles
    meets: bool  # the limits are met at some rate (server/interactive); always True otherwise
    binding: str | None = None  # TTFT, TPOT or KV cache: what fails at the lowest rate tried
    simulated_requests: int
    preemptions: int
    kv_cache_tokens: int  # tokens the replica's KV cache holds
    max_num_batched_tokens: int  # the scheduler's limits this SKU ran with
    max_num_seqs: int
    in_flight: float = 0.0  # mean sequences in the replica at the answer's rate (Little's law; offline: max_num_seqs)
    cost_per_mtok_output: float | None = None  # USD per 1e6 output tokens: all the replica's GPU time at the answer
    search: list[ScenarioProbe] = Field(default_factory=new_list)  # every run of the search (JSON; the --plot chart)


class ScenarioInfo(OutModel):
    """What the scenario search assumed, and from where."""

    name: str
    ttft_p99_s: float | None = None
    tpot_p99_s: float | None = None
    limits_source: str = ""
    input_lengths: str
    output_lengths: str
    max_num_batched_tokens: int | None  # None: each SKU's serving stack default (in scenario_rows)
    max_num_seqs: int | None
    candidates_per_sku: int
    stack: str | None = None  # --stack as given; None: each SKU's default serving stack (SkuInfo.serving_stack)
    notes: list[str] = Field(default_factory=new_list)


class ServeResult(Result):
    command: ClassVar[str] = "serve"
    model: str
    input_len: int
    output_len: int
    precision: str
    kv_dtype: str
    disaggregated: bool
    sla: dict[str, float] = Field(default_factory=new_dict)  # tpot_s, ttft_s, interactivity
    # Tokens per sequence in flight, length-biased when output lengths vary (``serve.decode_context`` /
    # ``serve.held_context``): the context a decode step reads, ``I + E[O^2] / (2 E[O])``, and the whole length
    # reserved, ``I + E[O^2] / E[O]`` (``I + O / 2`` and ``I + O`` for fixed lengths); 0: not reported.
    decode_context_tokens: float = 0.0
    kv_tokens_per_sequence: float = 0.0
    order: str
    rank_by: str = "tok-per-gpu"  # tok-per-gpu | cost | ttft: the rows' order under an SLA and the comparison's leader
    rank_rule: str = ""  # why that order (--rank-by, or the default rule)
    evaluated: int
    valid: int
    rejected: dict[str, int]
    skus: list[SkuInfo]
    rows: list[ServeRow]
    comparison: list[Comparison] = Field(default_factory=new_list)
    ranges: bool = True  # the corners of the estimate ranges were evaluated
    curves: list[Curve] = Field(default_factory=new_list)  # every SKU's Pareto front over all fitting points (nominal)
    flips: list[str] = Field(default_factory=new_list)
    fleet: list[FleetRow] = Field(default_factory=new_list)  # --racks / --gpus: fleet tokens/s and users per SKU
    scenario: ScenarioInfo | None = None  # --scenario: MLPerf Inference scenario, simulated per request
    scenario_rows: list[ScenarioRow] = Field(default_factory=new_list)

    def check_failed(self) -> bool:
        """``--check``: some SKU has no layout that meets the SLA (or nothing fits at all)."""
        if self.scenario is not None and not any(r.meets for r in self.scenario_rows):
            return True
        return any(s.sla_binding is not None for s in self.skus) or not self.rows

    def csv_rows(self) -> list[dict[str, Any]]:
        """``--format csv``: with ``--scenario`` the scenario rows (the answer asked for; rate, p50/p90/p99 TTFT,
        TPOT and latency, each led by the scenario and its p99 limits), else the steady-state rows; each row
        names the serving stack that priced it after its SKU."""
        if self.scenario is None:
            return [self._with_stack(r) for r in super().csv_rows()]
        lead = {"scenario": self.scenario.name, "ttft_p99_limit_s": self.scenario.ttft_p99_s,
                "tpot_p99_limit_s": self.scenario.tpot_p99_s}
        rows = [{**lead, **flatten_model(ScenarioRow, r.model_dump(mode="json"))} for r in self.scenario_rows]
        for row in rows:
            row.pop("search", None)  # the search's runs are nested rows: JSON and --plot carry them
        return [self._with_stack(row) for row in rows]

    def _with_stack(self, row: dict[str, Any]) -> dict[str, Any]:
        """The row with ``serving_stack`` (its SKU's ``skus[].serving_stack``, empty: none) after ``sku``, so
        each CSV row says which stack priced it."""
        stacks = {s.sku: s.serving_stack for s in self.skus}
        out: dict[str, Any] = {}
        for k, v in row.items():
            out[k] = v
            if k == "sku":
                out["serving_stack"] = stacks.get(v)
        return out
