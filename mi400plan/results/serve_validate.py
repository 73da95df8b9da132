"""Result of ``mi400plan validate --serve``: the serving model against published inference measurements,
each measurement's signed errors, the group statistics and the leave-one-source-out cross-validation.

Errors are fractions signed so that + = the model is optimistic: ``predicted / measured - 1`` for output
tokens/s per GPU (it predicts more throughput), ``1 - predicted / measured`` for TTFT and TPOT (it predicts
a shorter latency). Throughput in output tokens/s per GPU; latencies in seconds.
"""

from typing import ClassVar, Literal

from pydantic import Field

from mi400plan.factories import new_list
from mi400plan.results.common import OutModel, Result


class ServePublishedRate(OutModel):
    """An MLPerf Server row simulated at its published rate: LoadGen's published percentiles beside the
    simulation's (``serve_percentiles``). Seconds; rates in requests (samples) per second."""

    system_samples_per_s: float  # the whole system's completed samples/s (published)
    system_gpus: int  # GPUs of the submitted system
    rate_per_replica: float  # system_samples_per_s x tp / system_gpus: the Poisson rate simulated
    capacity_per_replica: float  # the simulation's saturated rate (every slot busy): above it the queue grows
    measured_ttft_p50_s: float
    measured_ttft_p90_s: float
    measured_ttft_p99_s: float
    measured_tpot_p99_s: float
    predicted_ttft_p50_s: float | None = None  # None: the published rate is beyond the model's capacity
    predicted_ttft_p90_s: float | None = None
    predicted_ttft_p99_s: float | None = None
    predicted_tpot_p99_s: float | None = None
    ttft_p50_error: float | None = None  # 1 - predicted / measured (+ = predicted too short)
    ttft_p90_error: float | None = None
    ttft_p99_error: float | None = None
    tpot_p99_error: float | None = None
    over_capacity: str | None = None  # why no prediction: the rate against the simulated capacity


class ServePublishedRateSummary(OutModel):
    """Signed errors of the p99 TTFT over the MLPerf Server rows at their published rates (fractions)."""

    metric: Literal["ttft_p99"] = "ttft_p99"
    rows: int  # MLPerf Server rows with published percentiles
    points: int  # of them with a prediction (within the simulated capacity)
    over_capacity: int  # of them beyond it
    mean: float | None = None  # signed mean error
    mean_abs: float | None = None
    max_abs: float | None = None


class ServeClosedLoop(OutModel):
    """An InferenceX point's closed loop simulated as its client ran it (``serve_percentiles``: ``conc`` clients,
    10 prompts each, the start's burst included): the published p99 TTFT beside the simulation's. Seconds."""

    measured_ttft_p99_s: float
    predicted_ttft_p99_s: float | None = None  # None: the simulation thrashes the KV cache or rejects prompts
    predicted_ttft_p50_s: float | None = None  # the same run's median (the published median is measured_ttft_s)
    ttft_p99_error: float | None = None  # 1 - predicted / measured (+ = predicted too short)


class ServeValidateRow(OutModel):
    """One published measurement, the model's prediction and the signed errors."""

    id: str  # "<bundled file>:<line>"
    dataset: Literal["inferencex", "validation"]  # calibration data (InferenceX) or never-fitted validation data
    # fitted: calibration point; older: run before the calibration window (never fitted); queued: a measured
    # queue (never fitted, its own statistic); validation: never fitted
    role: Literal["fitted", "older", "queued", "validation"]
    source: str  # InferenceX: the GitHub Actions run number; validation: the source key (sources lists them)
    date: str  # the run's or the publication's date
    stack: str  # serving stack profile (profiles/serving) it was measured on: rocm-vllm, vllm, sglang, trtllm
    family: str  # calibration family: amd-cdna3, amd-cdna4, nvidia-hopper, nvidia-blackwell
    model_class: Literal["dense", "moe"]
    sku: str
    model: str
    precision: str  # weight format
    tp: int  # GPUs of the server
    input_len: int  # tokens
    output_len: int  # tokens
    concurrency: int  # requests in flight (0: every request queued at once, or an arrival rate)
    kind: str  # how it was measured: serving (InferenceX) or the validation file's kind
    measured_tokens_per_s_per_gpu: float  # output tokens/s per GPU
    predicted_tokens_per_s_per_gpu: float  # at the stored calibration of its stack (serve's)
    measured_ttft_s: float | None = None  # InferenceX: median; validation: mean; None: not published
    predicted_ttft_s: float | None = None
    measured_tpot_s: float | None = None  # InferenceX: median; validation: mean
    predicted_tpot_s: float | None = None
    tput_error: float  # predicted / measured - 1 (+ = optimistic)
    ttft_error: float | None = None  # 1 - predicted / measured (+ = predicted too short)
    tpot_error: float | None = None  # 1 - predicted / measured (+ = predicted too short)
    loso_tput_error: float | None = None  # the same at the calibration refitted without this row's run
    loso_ttft_error: float | None = None
    loso_tpot_error: float | None = None
    loso_basis: str | None = None  # what priced the held-out row: the refit group and its points, or the fallback
    # the refit is of the held-out run's software generation: on its own stack's and class's points only, newest
    # run within 100 days of it
    loso_same_generation: bool | None = None
    # MLPerf Server rows: the simulation at the published rate against the published percentiles
    published_rate: ServePublishedRate | None = None
    # InferenceX points with a published p99 TTFT: the simulated closed loop against it
    closed_loop: ServeClosedLoop | None = None


class ServeValidateGroup(OutModel):
    """Signed errors of one metric over one group of rows (fractions)."""

    # in-sample: fitted InferenceX points at the stored calibration; loso: the same points at the refit without
    # their run; loso-same-generation: those whose refit is of their software generation; older: InferenceX runs
    # before the window; validation: the never-fitted published results
    # closed-loop: the fitted InferenceX points' published p99 TTFT against the simulated closed loop (never fitted)
    scope: Literal["in-sample", "loso", "loso-same-generation", "older", "queued", "validation", "closed-loop"]
    by: Literal["all", "stack", "family", "stack/family", "source"]
    name: str
    # output tokens/s per GPU, time to first token, time per output token; ttft_p99: the 99th percentile of TTFT
    metric: Literal["tput", "ttft", "tpot", "ttft_p99"]
    points: int
    mean: float  # signed mean error
    mean_abs: float
    max_abs: float


class ServeValidateSource(OutModel):
    """A validation source (the validation file's ``source`` column)."""

    key: str
    title: str
    date: str


class ServeValidateResult(Result):
    command: ClassVar[str] = "validate"
    mode: Literal["serve"] = "serve"
    inputs: list[str]  # the bundled data files
    rows: list[ServeValidateRow]
    groups: list[ServeValidateGroup]
    sources: list[ServeValidateSource]  # the validation sources
    loso_sources: int  # InferenceX runs held out in turn (0: --no-loso)
    loso_refits: int  # distinct calibrations refitted
    loso_seconds: float  # wall time of the cross-validation
    source_definition: str  # what one held-out source is
    published_rate_summary: ServePublishedRateSummary | None = None  # p99 TTFT at the published MLPerf Server rates
    notes: list[str] = Field(default_factory=new_list)
