"""Result of ``mi400plan calibrate``: fitted profile values and the residual of every measured point.

Units: seconds, bytes, bytes/s (per direction). ``residual`` = model time / measured time - 1 at the
fitted values (``residual_before`` at the profile's values). A parameter with ``value`` null was not
identified by the measurements and keeps its profile value (``note`` says why).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from mi400plan.results.common import OutModel, Result


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


class CalibrateResult(Result):
    command: ClassVar[str] = "calibrate"
    inputs: list[str]
    params: list[FittedParam]
    summaries: list[FitSummary]
    rows: list[PointRow]
    saved: list[str] = Field(default_factory=list)  # profile files written by --save
