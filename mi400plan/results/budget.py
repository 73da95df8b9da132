"""Result of ``mi400plan budget``: the JSON contract of ``data`` (schema_version 1).

``*_flops`` FLOP; ``params``/``tokens`` counts; ``*_s`` seconds; ``days``; ``mfu`` a fraction.
"""

from typing import Any, ClassVar

from pydantic import Field

from mi400plan.factories import new_list
from mi400plan.results.common import OutModel, Result, flatten
from mi400plan.results.sweep import SweepLayout
from mi400plan.results.totals import PlanTotals


class LawInfo(OutModel):
    name: str
    formula: str  # the law with its constants
    source: str


class FamilyModel(OutModel):
    name: str
    family: str  # the template's label
    hidden_size: int
    num_layers: int
    ffn_dim: int
    params_total: int
    params_active: int
    tokens: float  # C / (6 x matched params): the same budget spent on this model


class Feasibility(OutModel):
    """The family model priced on the cluster by the layout search."""

    gpus_used: int  # the largest size up to --gpus that a layout fills (the rest idle)
    layout: SweepLayout
    layout_text: str
    step_time_s: float
    tokens_per_s: float
    mfu: float
    days: float  # days to train ``model.tokens``
    feasible: bool  # days <= the budget's days (always true with --flops)
    totals: PlanTotals | None = None


class BudgetResult(Result):
    command: ClassVar[str] = "budget"

    sku: str
    gpus: int
    days: float | None = None  # the time budget (None with --flops)
    precision: str
    compute_flops: float
    compute_basis: str  # how the budget was formed (GPUs x time x peak x MFU, or given)
    mfu_used: float | None = None
    law: LawInfo
    params_opt: float
    tokens_opt: float
    loss_opt: float | None = None  # predicted loss at the optimum (parametric laws)
    tokens_per_param: float
    model: FamilyModel
    next_smaller: str | None = None  # neighbouring ladder steps (name and parameters)
    next_larger: str | None = None
    plan: Feasibility | None = None
    iterations: list[str] = Field(default_factory=new_list)  # MFU fixed-point steps
    why_not: str | None = None  # when the model has no layout on the cluster

    def check_failed(self) -> bool:
        return self.plan is None or not self.plan.feasible

    def csv_rows(self) -> list[dict[str, Any]]:
        return [flatten(self.model_dump(mode="json", exclude={"iterations", "warnings"}))]
