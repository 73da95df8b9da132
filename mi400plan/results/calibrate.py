"""Result of ``mi400plan calibrate``: fitted profile values and the residual of every measured point.

Units: seconds, bytes, bytes/s (per direction). ``residual`` = model time / measured time - 1 at the
fitted values (``residual_before`` at the profile's values). A parameter with ``value`` null was not
identified by the measurements and keeps its profile value (``note`` says why).
"""

from typing import ClassVar, Literal

from pydantic import Field, PrivateAttr

from mi400plan.factories import new_list
from mi400plan.results.common import OutModel, Result
from mi400plan.results.totals import PlanTotals


class FittedParam(OutModel):
    kind: Literal["accelerator", "fabric"]
    profile: str  # accelerator or fabric name
    key: str  # profile key: [efficiency] key of an accelerator, top-level key of a fabric
    label: str
    unit: str
    before: float | None  # the profile's nominal value (null: not disclosed)
    value: float | None  # fitted (null: not identified, the profile value is kept)
    std_error: float | None = None  # standard error of the fit (null with no more points than parameters)
    points: int  # measured points the fit used
    note: str | None = None


class PointRow(OutModel):
    source: str  # file:line
    kind: Literal["training", "nccl"]
    profile: str  # the SKU (training) or the fabric (nccl) the point calibrates
    label: str  # the run's name or layout; "all_reduce 32 MiB x8" for an nccl-tests row
    measured_s: float
    model_before_s: float  # the model at the profile's values
    model_s: float  # the model at the fitted values
    residual_before: float
    residual: float
    # nccl-tests rows
    op: str | None = None
    size_bytes: int | None = None
    group: int | None = None
    algorithm: str | None = None  # the algorithm the model prices the row with
    measured_busbw_bytes_per_s: float | None = None
    # training runs
    precision: str | None = None
    gpus: int | None = None
    measured_tflops_per_gpu: float | None = None  # model FLOPs per GPU per second at the measured step time


class FitSummary(OutModel):
    kind: Literal["accelerator", "fabric"]
    profile: str
    points: int
    mean_abs_residual_before: float
    mean_abs_residual: float
    max_abs_residual: float


class ExplainTerm(OutModel):
    key: str  # ideal, recompute, below_peak, t_memory_bound, ..., not_modelled (mi400plan.explain)
    label: str
    seconds: float  # per optimizer step on the critical GPU; below_peak and not_modelled may be negative
    share: float  # seconds / measured step: points of MFU (the shares add up to 1)


class RunExplain(OutModel):
    """Where one measured run's step goes, at the fitted values (``mi400plan.explain``)."""

    source: str  # file:line
    profile: str  # the SKU
    label: str
    precision: str
    gpus: int
    measured_s: float
    model_s: float  # the model at the fitted values
    tokens_per_s_per_gpu: float  # measured
    mfu: float  # measured: model FLOPs / (step x GPUs x dense peak)
    hfu: float  # measured, with the recompute FLOPs the layout's mode adds
    terms: list[ExplainTerm]
    totals: PlanTotals  # FLOPs per token split and bytes per GPU per step, as sweep reports them


class CalibrateResult(Result):
    command: ClassVar[str] = "calibrate"
    inputs: list[str]
    params: list[FittedParam]
    summaries: list[FitSummary]
    rows: list[PointRow]
    saved: list[str] = Field(default_factory=new_list)  # profile files written by --save
    explain: list[RunExplain] = Field(default_factory=new_list)  # every training run's step, term by term
    _show_explain: bool = PrivateAttr(default=False)  # the table prints ``explain`` (calibrate --explain)

    def with_explain_table(self, show: bool) -> "CalibrateResult":
        self._show_explain = show
        return self

    @property
    def show_explain(self) -> bool:
        return self._show_explain
