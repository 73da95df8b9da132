"""Result of ``mi400plan sweep``: the JSON contract of ``data`` (schema_version 1).

Units are in the field names: ``*_s`` seconds, ``*_bytes`` bytes, ``tokens_per_s`` tokens/second,
``mfu``/``hfu``/``scaling_efficiency`` fractions in [0, 1], ``cost_usd`` US dollars.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from mi400plan.results.common import OutModel, Result, flatten


class SweepLayout(OutModel):
    """The layout; the same keys as ``specs.layout.Layout`` (a plan file's ``[layout]``)."""

    tp: int
    pp: int
    vpp: int
    dp: int
    ep: int
    etp: int
    cp: int
    zero: int
    micro_batch: int
    recompute: str  # none | selective | full
    sequence_parallel: bool


class TimeBreakdown(OutModel):
    """Seconds per optimizer step. The terms add up to ``step_time_s``.

    ``compute``: model + recompute FLOPs at the calibrated matmul rate; ``gemm_overhead``: fixed
    cost per GEMM kernel; ``memory_bound``: norms, residuals, activation functions at HBM speed;
    ``tp``/``cp``/``ep``/``pp``: exposed collective time of each group; ``bubble``: pipeline
    bubble; ``dp``: exposed data-parallel / ZeRO traffic; ``optimizer``: optimizer step.
    """

    compute: float
    gemm_overhead: float
    memory_bound: float
    tp: float
    cp: float
    ep: float
    pp: float
    bubble: float
    dp: float
    optimizer: float


class MemoryBytes(OutModel):
    weights: float
    gradients: float
    optimizer: float
    activations: float
    reserve: float
    total: float
    capacity: float  # HBM usable by the layout (capacity minus the proportional reserve), bytes


class Placement(OutModel):
    """Network tier each parallel group's collectives land on: scale_up, scale_out, hierarchical or none."""

    tp: str
    cp: str
    ep: str
    pp: str
    dp: str


class SweepRow(OutModel):
    rank: int  # 1 = best for this SKU and GPU count
    sku: str
    gpus: int
    layout: SweepLayout
    replica_gpus: int  # TP x CP x fold x PP: GPUs of one model replica
    microbatches: int  # micro-batches per replica per step
    memory_bytes: MemoryBytes
    step_time_s: float
    compute_only_s: float  # compute term alone (lower bound of the step)
    time_s: TimeBreakdown
    placement: Placement
    tokens_per_s: float
    mfu: float  # model FLOPs (6N + attention) / (step x GPUs x peak at the chosen precision)
    hfu: float  # the same with recompute FLOPs counted
    days: float | None = None  # days to train --tokens
    cost_usd: float | None = None  # GPUs x hours x --gpu-hour-cost


class SkuEfficiency(OutModel):
    """Efficiency figures a SKU was evaluated with, and where they come from."""

    sku: str
    peak_flops: float  # FLOP/s dense at the chosen precision
    matmul: float
    matmul_status: str
    matmul_source: str
    hbm: float
    hbm_status: str
    gemm_overhead_s: float
    scale_up_domain: int
    gpus_per_rack: int
    rack_basis: str  # the rack profile, or "scale-up domain"


class SkuSummary(OutModel):
    """Each SKU's best layout at one GPU count, normalised per GPU and per rack."""

    sku: str
    gpus: int
    step_time_s: float | None
    tokens_per_s: float | None
    tokens_per_s_per_gpu: float | None
    tokens_per_s_per_rack: float | None
    gpus_per_rack: int
    mfu: float | None
    days: float | None = None
    cost_usd: float | None = None
    relative: float | None = None  # tokens/s per GPU relative to the best SKU (1.0 = best)
    layout: str | None = None


class ScalingPoint(OutModel):
    sku: str
    gpus: int
    layout: str | None
    step_time_s: float | None
    tokens_per_s: float | None
    tokens_per_s_per_gpu: float | None
    mfu: float | None
    scaling_efficiency: float | None  # per-GPU throughput / per-GPU throughput at the smallest size
    below_90: bool
    per_replica_batch_tokens: float | None  # global batch tokens / (DP) of the best layout
    days: float | None = None


class SweepResult(Result):
    command: ClassVar[str] = "sweep"

    model: str
    precision: str
    seq_len: int
    global_batch_seqs: int
    global_batch_tokens: int
    train_tokens: float | None = None
    gpu_hour_cost: float | None = None
    tie_break: str
    overlap: dict[str, bool]
    evaluated: int
    valid: int
    rejected: dict[str, int]
    rejected_rules: dict[str, str]
    rows: list[SweepRow] = Field(default_factory=list)
    skus: list[SkuSummary] = Field(default_factory=list)
    scaling: list[ScalingPoint] = Field(default_factory=list)
    scaling_below_90_at: dict[str, int | None] = Field(default_factory=dict)  # sku -> first GPU count < 90%
    efficiencies: list[SkuEfficiency] = Field(default_factory=list)
    rack_crossing: list[SweepRow] = Field(default_factory=list)  # best layout whose TP or PP leaves the scale-up domain
    saved_plan: str | None = None

    def check_failed(self) -> bool:
        return not self.rows

    def csv_rows(self) -> list[dict[str, Any]]:
        return [flatten(r.model_dump(mode="json")) for r in self.rows]
