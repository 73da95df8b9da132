"""Result of ``mi400plan sweep --deadline`` / ``--budget``: the JSON contract of ``data`` (schema_version 1).

Units are in the field names: ``*_s`` seconds, ``days``, ``cost_usd`` US dollars, ``megawatts``
facility power (GPUs x wall watts per GPU x PUE / 1e6), ``tokens_per_s`` tokens/second,
``mfu``/``scaling_efficiency`` fractions.
"""

from typing import Any, ClassVar

from pydantic import Field

from mi400plan.factories import new_list, new_dict
from mi400plan.results.common import OutModel, Result, flatten
from mi400plan.results.sweep import MemoryBytes, SweepLayout, TimeBreakdown
from mi400plan.results.totals import PlanTotals


class PricedSize(OutModel):
    """One cluster size the search priced (its fastest layout), or no layout (``tokens_per_s`` None)."""

    gpus: int
    tokens_per_s: float | None
    days: float | None
    cost_usd: float | None = None


class ClusterPick(OutModel):
    """A cluster size with its fastest layout and what it takes to train ``train_tokens`` on it."""

    gpus: int
    racks: int  # ceil(GPUs / GPUs per rack)
    gpus_per_rack: int
    layout: SweepLayout
    layout_text: str
    step_time_s: float
    time_s: TimeBreakdown
    tokens_per_s: float
    mfu: float
    days: float
    cost_usd: float | None = None
    megawatts: float | None = None  # facility power at the site's GPU load and PUE
    scaling_efficiency: float | None = None  # tokens/s per GPU vs the smallest valid size priced
    scaling_reference_gpus: int | None = None
    totals: PlanTotals | None = None  # FLOPs split and total, collective bytes per GPU per step
    memory: MemoryBytes | None = None  # per GPU, bytes, as sweep reports it (runtime reserve included)


class SkuAnswer(OutModel):
    """One SKU's answer: ``pick`` (None when no size qualifies; with a deadline and a budget that no size meets
    together, the smallest size meeting the deadline, ``meets`` False) and ``best`` (the fastest size of all,
    exact; given with ``--budget`` and when no size meets a deadline, else None)."""

    sku: str
    size_step_gpus: int  # sizes are multiples of this (whole scale-up domains or 8-GPU nodes)
    candidates: int  # GPU counts some layout can fill, up to max_gpus
    compute_bound_gpus: float | None = None  # below this no size can meet the deadline (MFU <= 1)
    usd_per_gpu_hour: float | None = None
    cost_source: str | None = None
    pick: ClusterPick | None = None
    best: ClusterPick | None = None
    meets: bool  # pick exists, meets the deadline and stays within the budget (each when given)
    limit: str | None = None  # why no size qualifies: the term that stops scaling, or the budget
    next_smaller: PricedSize | None = None  # the next smaller candidate size, priced (misses the target)
    priced: list[PricedSize] = Field(default_factory=new_list)


class DeadlineResult(Result):
    command: ClassVar[str] = "sweep"

    mode: str  # deadline | budget
    model: str
    precision: str
    seq_len: int
    global_batch_seqs: int
    global_batch_rule: str = ""  # "pinned by --global-batch", or the planned batch's law and numbers
    train_tokens: float
    deadline_days: float | None = None
    budget_usd: float | None = None
    max_gpus: int
    site: str | None = None
    recipe: dict[str, Any] = Field(default_factory=new_dict)  # training-recipe switches that differ from the defaults
    finetune: str | None = None  # LoRA fine-tuning (``finetune.finetune_text``); None: every weight trains
    packing: str | None = None  # packed sequences (``packing.packing_text``); None: one sequence a row
    method: str
    answers: list[SkuAnswer] = Field(default_factory=new_list)

    def check_failed(self) -> bool:
        return not all(a.meets for a in self.answers)

    def csv_rows(self) -> list[dict[str, Any]]:
        return [flatten({"sku": a.sku, "meets": a.meets, "pick": a.pick.model_dump(mode="json") if a.pick else {},
                         "limit": a.limit}) for a in self.answers]
