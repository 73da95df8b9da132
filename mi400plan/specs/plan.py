"""The ``[plan]`` table of a plan file (``sweep --save``, read by ``fit --plan``): each field typed
and bounded, so a hand-edited plan with ``gpus = "eight"``, ``seq_len = nan`` or ``seq_len = 4096.5``
is an error naming the field, never a crash or a silently rounded number."""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

_NAME = Field(default=None, min_length=1, max_length=200)


class PlanMeta(BaseModel):
    """``[plan]``: what the layout was found for. Unknown keys are ignored (a newer planner may add
    some); known ones are strict (no booleans, no fractions where a count is meant)."""

    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)

    model: str | None = _NAME
    sku: str | None = _NAME
    gpus: int | None = Field(default=None, ge=1, le=2**24)
    seq_len: int | None = Field(default=None, ge=1, le=2**27)
    global_batch: int | None = Field(default=None, ge=1, le=2**30)
    precision: str | None = Field(default=None, min_length=1, max_length=20)
    mode: Literal["train", "infer"] | None = None
