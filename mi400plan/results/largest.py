"""Result of ``mi400plan fit --largest``: the JSON contract of ``data`` (schema_version 1).

Per SKU, the largest model of the family that fits and the next larger step (checked not to fit).
``*_bytes`` bytes, ``step_time_s`` seconds, ``max_context`` tokens.
"""

from typing import ClassVar

from pydantic import Field

from mi400plan.factories import new_list
from mi400plan.results.common import OutModel, Result


class StepFit(OutModel):
    name: str  # e.g. dense-d8192-l64
    hidden_size: int
    num_layers: int
    params_total: int
    params_active: int
    fits: bool
    layout: dict[str, int | str | bool] | None = None  # the layout that makes it fit
    layout_text: str | None = None
    step_time_s: float | None = None  # train: the fastest fitting layout's step
    memory_bytes: float | None = None  # train: that layout's memory per GPU
    max_context: int | None = None  # infer: longest context per sequence at the batch (fit's --max-context rule)


class LargestRun(OutModel):
    """Train mode with --tokens: the largest model's run as ``sweep <name> --gpus N --tokens T`` prices it
    (the planned global batch unless --global-batch pins it; ``api.sweep.planned_search``)."""

    model: str
    train_tokens: float
    global_batch_seqs: int
    global_batch_tokens: int
    batch_pinned: bool
    layout_text: str
    step_time_s: float
    tokens_per_s: float
    mfu: float
    days: float


class LargestRow(OutModel):
    sku: str
    largest: StepFit | None  # None: not even the family's smallest step fits
    next_larger: StepFit | None  # None: the ladder's largest step fits
    steps_checked: int
    run: LargestRun | None = None  # train mode with --tokens: step time and days of the largest model


class LargestResult(Result):
    command: ClassVar[str] = "fit"

    mode: str  # train | infer
    family: str
    gpus: int
    seq_len: int | None = None  # train: sequence; infer: context per sequence
    batch: int | None = None  # infer: concurrent sequences; train: global batch in sequences
    precision: str
    rule: str  # what "fits" means here
    train_tokens: float | None = None  # train mode: --tokens (each row's ``run`` prices it)
    packing: str | None = None  # train mode: packed sequences (``packing.packing_text``); None: one sequence a row
    rows: list[LargestRow] = Field(default_factory=new_list)

    def check_failed(self) -> bool:
        return not any(r.largest is not None for r in self.rows)
