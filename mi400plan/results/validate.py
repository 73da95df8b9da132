"""Result of ``mi400plan validate``: each measured run's signed error, group statistics and the
leave-one-source-out cross-validation.

Errors are fractions: ``error = measured step / predicted step - 1``, + = the model is optimistic
(it predicts a faster step, more tokens/s, than was measured). Times in seconds per optimizer step.
"""

from typing import ClassVar, Literal

from pydantic import Field

from mi400plan.factories import new_list
from mi400plan.results.common import OutModel, Result


class ValidateRow(OutModel):
    id: str  # the run's id (bundled) or name / file:line (a user's file)
    sku: str
    family: str  # SKU family, e.g. "NVIDIA Hopper", "AMD CDNA 4"
    stack: str | None = None  # software stack when the runs file names it (bundled: a "stack" column)
    kind: Literal["dense", "MoE"]
    source: str  # the publication (bundled) or the file
    measured_s: float
    predicted_s: float  # at the profiles' values
    error: float  # measured / predicted - 1 (+ = the model is optimistic)
    loso_error: float | None = None  # the same with the parameters refitted without this run's source


class GroupRow(OutModel):
    group: Literal["all", "family", "moe", "stack"]
    name: str  # the family, "dense"/"MoE", the stack, or "all"
    runs: int
    mean: float  # signed mean error
    mean_abs: float
    max_abs: float


class ValidateResult(Result):
    command: ClassVar[str] = "validate"
    inputs: list[str]
    rows: list[ValidateRow]
    skipped: list[str] = Field(default_factory=new_list)  # bundled runs with no valid layout at their SKU
    groups: list[GroupRow]  # errors at the profiles' values
    loso_groups: list[GroupRow]  # leave-one-source-out errors (empty with one source or --no-loso)
    loso_sources: int  # sources held out in turn (0: not run)
    loso_seconds: float  # wall time of the cross-validation's refits
    bands_written: str | None = None  # the band table written by --write-bands
