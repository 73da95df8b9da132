"""Result of ``mi400plan sweep``: the JSON contract of ``data`` (schema_version 1).

Units are in the field names: ``*_s`` seconds, ``*_bytes`` bytes, ``tokens_per_s`` tokens/second,
``mfu``/``hfu``/``scaling_efficiency`` fractions in [0, 1], ``cost_usd`` US dollars.
"""

from typing import Any, ClassVar, Literal

from pydantic import Field

from mi400plan.factories import new_list, new_dict
from mi400plan.results.common import OutModel, Result, flatten
from mi400plan.results.energy import RunEnergy
from mi400plan.results.totals import PlanTotals


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

    @classmethod
    def of_row(cls, r: Any) -> "SweepLayout":
        """The layout of one search row (``search.iter_rows``: recompute as its code, SP as 0/1)."""
        from mi400plan.search import RECOMPUTE_LABELS

        return cls(tp=r["tp"], pp=r["pp"], vpp=r["vpp"], dp=r["dp"], ep=r["ep"], etp=r["etp"], cp=r["cp"],
                   zero=r["zero"], micro_batch=r["micro_batch"], recompute=RECOMPUTE_LABELS[r["recompute"]],
                   sequence_parallel=bool(r["sp"]))


class TimeBreakdown(OutModel):
    """Seconds per optimizer step. The terms add up to ``step_time_s``.

    ``compute``: GEMMs (model + recompute) at the shape-aware GEMM model (``mi400plan.gemm``);
    ``attention``: the attention core (flash attention at its own efficiency); ``gemm_overhead``: fixed
    cost per GEMM kernel; ``memory_bound``: norms, residuals, activation functions at HBM speed;
    ``tp``/``cp``/``ep``/``pp``: exposed collective time of each group; ``bubble``: pipeline
    bubble; ``dp``: exposed data-parallel / ZeRO traffic; ``optimizer``: optimizer step; ``offload``:
    activation copies to and from host memory (--offload-layers) longer than the compute they hide behind;
    ``host``: MoE micro-batches whose local-expert GEMMs take the host longer to issue than the GPU takes
    to run them (the accelerator's ``expert_host_us``), the difference.
    """

    compute: float
    attention: float
    gemm_overhead: float
    memory_bound: float
    tp: float
    cp: float
    ep: float
    pp: float
    bubble: float
    dp: float
    optimizer: float
    offload: float = 0.0
    host: float = 0.0


class MemoryBytes(OutModel):
    weights: float
    gradients: float
    optimizer: float
    activations: float
    # activation bytes kept in pinned host memory per GPU (--offload-layers): the host memory the offloading
    # needs, not part of total (already taken out of activations)
    offloaded: float = 0.0
    reserve: float  # the whole runtime reserve: fixed part + capacity share + fragmentation, as `fit` counts it
    total: float  # includes the reserve; the layout fits when total <= capacity
    capacity: float  # the SKU's HBM capacity (driver-reported usable where published), bytes
    fragmentation: float = 0.0  # the allocator-fragmentation share of the reserve (part of reserve and total)
    # "tight": total exceeds capacity by no more than the fragmentation share (the layout is valid and
    # runs if the allocator fragments less); "fits" otherwise (sweep's rows never "does_not_fit")
    verdict: Literal["fits", "tight"] = "fits"


class Placement(OutModel):
    """Network tier each parallel group's collectives land on: scale_up, scale_out, hierarchical or none.

    ``dp`` is the group that reduces the non-expert gradients: DP x CP ranks (CP ranks hold the
    same weights); ``hierarchical`` when part of it is inside a scale-up domain and part across.
    """

    tp: str
    cp: str
    ep: str
    pp: str
    dp: str


class Span(OutModel):
    """A value at nominal and its low/high over the pessimistic and optimistic corners of the estimate ranges.

    ``low``/``high`` are the smaller/larger of the two corner values (``None`` on the side of a
    corner where no layout fits). Units are those of the field holding the span.
    """

    nominal: float | None
    low: float | None
    high: float | None


class RowRange(OutModel):
    """One layout (as listed) evaluated at both corners of its SKU's estimate ranges."""

    step_time_s: Span
    tokens_per_s: Span
    mfu: Span  # peak moves with the corner too, so MFU need not move with tokens/s
    days: Span | None = None
    cost_usd: Span | None = None
    fits_low_capacity: bool  # fits the pessimistic corner (low end of the HBM capacity range)
    fits_high_capacity: bool


class SweepRow(OutModel):
    rank: int  # 1 = best for this SKU and GPU count
    sku: str
    gpus: int
    layout: SweepLayout
    pipeline_split: str  # how the layers sit on the pipeline stages, e.g. "uneven: 2 + 14 x 4 + 3 layers"
    # the slowest pipeline stage's compute time over the mean stage's, which every micro-batch runs at
    # (1 = balanced; the LM head and loss run on the last stage; ``search.compute_seconds``)
    stage_imbalance: float
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
    range: RowRange | None = None  # this layout at the estimate-range corners (absent with --no-ranges)
    global_batch_seqs: int | None = None  # sequences per optimizer step this row was priced at
    # empirical error band of the step time: the mean |error| of the bundled measured runs of the same kind
    # (dense or MoE) under leave-one-source-out cross-validation (``mi400plan validate``), as a fraction,
    # and as text, e.g. "+-9 % (dense, all stacks, 41 runs)"; None when the table has no such group
    error_band: float | None = None
    error_band_text: str | None = None


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
    # The software stack the SKU is priced on (``mi400plan.stacks``): None where its vendor has none.
    stack: str | None = None
    stack_label: str | None = None  # name, framework, version, release date and overridden settings
    stack_basis: str | None = None  # "--stack" or the default rule
    stack_settings: dict[str, str] = Field(default_factory=new_dict)


class SkuSummary(OutModel):
    """Each SKU's best layout at one GPU count, normalised per GPU and per rack."""

    sku: str
    gpus: int
    step_time_s: float | None
    tokens_per_s: float | None
    tokens_per_s_per_gpu: float | None
    tokens_per_s_per_rack: float | None
    gpus_per_rack: int | None  # None: the SKU could not be searched (see missing)
    mfu: float | None
    days: float | None = None
    cost_usd: float | None = None
    relative: float | None = None  # tokens/s per GPU relative to the best SKU (1.0 = best)
    layout: str | None = None
    missing: str | None = None  # n/d: the value this SKU's profile lacks (the sweep went on without it)


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
    per_replica_batch_tokens: float | None  # global batch tokens / replicas (GPUs / replica_gpus) of the best layout
    days: float | None = None


class CornerInputs(OutModel):
    """The uncertain inputs of one SKU at one corner, in base units."""

    peak_flops: float  # FLOP/s, dense, at the chosen precision
    matmul: float
    hbm_bytes: float
    hbm_bw_bytes_per_s: float
    hbm_efficiency: float
    gemm_overhead_s: float
    scale_up_bw_per_dir_bytes_per_s: float
    scale_up_latency_s: float
    scale_up_efficiency: float
    scale_out_bw_per_dir_bytes_per_s: float
    scale_out_latency_s: float
    scale_out_efficiency: float


class CornerBest(OutModel):
    """The search rerun at one corner: its best layout, and how the nominal best fares there."""

    corner: str  # pessimistic | optimistic
    inputs: CornerInputs
    layout: SweepLayout | None  # None: no layout is valid and fits at this corner
    layout_text: str | None
    step_time_s: float | None
    tokens_per_s: float | None
    tokens_per_s_per_gpu: float | None
    tokens_per_s_per_rack: float | None
    mfu: float | None
    days: float | None = None
    cost_usd: float | None = None
    layout_changes: bool  # the best layout here differs from the nominal best
    nominal_layout_step_time_s: float | None  # the nominal best layout evaluated at this corner
    nominal_layout_fits: bool | None


class SkuRange(OutModel):
    """One SKU at one GPU count: best-layout figures at nominal and at both estimate-range corners.

    Pessimistic corner: low peak FLOP/s, low matmul and HBM efficiency, low HBM bandwidth and
    capacity, high GEMM overhead, slow fabrics (low bandwidth and efficiency, high latency);
    optimistic corner: the opposite ends. Each corner re-runs the search, so the spans are the best
    achievable there, not the nominal layout's.
    """

    sku: str
    gpus: int
    varied: list[str]  # the inputs whose range was applied ("matmul bf16 0.45..0.70 (assumed)")
    step_time_s: Span
    tokens_per_s: Span
    tokens_per_s_per_gpu: Span
    tokens_per_s_per_rack: Span
    mfu: Span
    days: Span | None = None
    cost_usd: Span | None = None
    scaling_efficiency: Span | None = None  # scaling view: per-GPU throughput vs the smallest size, per corner
    pessimistic: CornerBest
    optimistic: CornerBest


class SweepFlip(OutModel):
    """A conclusion that changes inside the estimate ranges.

    ``kind``: ``best_layout`` (the best layout differs at a corner and the nominal best does not fit
    there or is at least 1% slower there than the corner's best; smaller gaps are near-ties, visible
    only as ``ranges[].<corner>.layout_changes``), ``fit`` (the nominal best does
    not fit at the low end of the HBM capacity range), ``ranking`` (with several SKUs, the order of
    ``sku`` ahead of ``other_sku`` reverses; ``metric`` says which: ``time_to_train`` (= total
    tokens/s), ``tokens_per_s_per_gpu``, ``tokens_per_s_per_rack``), ``scaling`` (the GPU count where
    scaling efficiency drops below 90% moves). ``corner``: ``pessimistic``, ``optimistic``, or
    ``mixed`` (``sku`` at its pessimistic corner, ``other_sku`` at its optimistic one).
    """

    kind: str
    sku: str
    other_sku: str | None = None
    gpus: int | None = None
    corner: str
    metric: str | None = None
    detail: str


class NoLayout(OutModel):
    """A SKU and GPU count on which no layout is valid and fits."""

    sku: str
    gpus: int
    why: str  # the rules that rejected most candidates, with counts
    nearest_gpus: list[int] = Field(default_factory=new_list)  # closest counts that work, below and/or above


class BatchChoice(OutModel):
    """The global batch one SKU and GPU count ran at, and its best layout's pipeline fill."""

    sku: str
    gpus: int
    global_batch_seqs: int
    global_batch_tokens: int
    tried_seqs: list[int]  # batches searched, in order (the planner stops at the first that fills the pipeline)
    microbatches: int | None = None  # per pipeline per step, best layout (None: no layout fits)
    pp: int | None = None
    vpp: int | None = None
    bubble_fraction: float | None = None  # pipeline idle time over compute time, (pp - 1) / (vpp x microbatches)
    starved: bool = False  # fewer micro-batches than stages, or bubble above ``bubble_limit``


class BatchPlan(OutModel):
    """How the global batch was chosen (``mi400plan.batch``): pinned by --global-batch, or planned from
    the convergence bound of a batch-size scaling law. Tokens per optimizer step; compute in FLOPs."""

    pinned: bool
    rule: str  # the rule in words
    law: str  # the scaling law and its source ("" when the rule is not a law: fine-tuning)
    flops_per_token: float  # M: non-embedding training FLOPs per token (forward + backward)
    train_tokens: float  # D: --tokens, or the compute-optimal assumption (tokens_assumed)
    tokens_assumed: bool
    compute_flops: float  # C = M x D
    b_opt_tokens: float
    bound_tokens: float  # the most the planner uses: bound_factor x b_opt_tokens
    bound_factor: float
    bubble_limit: float  # bubble fraction above which a pipeline counts as starved (GPipe)
    chosen: list[BatchChoice] = Field(default_factory=new_list)


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
    # Step-time model switches: tp, ep, pp, cp, dp -> True where that traffic overlaps compute
    # (pp: interleaved schedule only; its 2 (pp - 1) fill/drain transfers stay exposed).
    overlap: dict[str, bool]
    split_embedding_loss: bool = False  # PP x VPP may divide layers + 2 (embedding and loss count as layers)
    finetune: str | None = None  # LoRA fine-tuning (``finetune.finetune_text``); None: every weight trains
    packing: str | None = None  # packed sequences (``packing.packing_text``); None: one sequence a row
    evaluated: int
    valid: int
    rejected: dict[str, int]
    rejected_rules: dict[str, str]
    rows: list[SweepRow] = Field(default_factory=new_list)
    skus: list[SkuSummary] = Field(default_factory=new_list)
    scaling: list[ScalingPoint] = Field(default_factory=new_list)
    scaling_below_90_at: dict[str, int | None] = Field(default_factory=new_dict)  # sku -> first GPU count < 90%
    efficiencies: list[SkuEfficiency] = Field(default_factory=new_list)
    rack_crossing: list[SweepRow] = Field(default_factory=new_list)  # best layout whose TP or PP leaves the scale-up domain
    domain_inside: list[SweepRow] = Field(default_factory=new_list)  # best layout whose TP and replica stay inside it
    saved_plan: str | None = None
    ranges_checked: bool = False  # False with --no-ranges
    ranges: list[SkuRange] = Field(default_factory=new_list)  # one per SKU and GPU count
    flips: list[SweepFlip] = Field(default_factory=new_list)
    site: str | None = None  # cost site profile (with --tokens)
    energy: list[RunEnergy] = Field(default_factory=new_list)  # with --tokens: energy, emissions, cost per SKU and size
    scaling_below_90_at_corners: dict[str, dict[str, int | None]] = Field(default_factory=new_dict)  # sku -> corner -> GPUs
    # With --pareto: every fitting layout that no other beats on both step time and memory per GPU,
    # per SKU and GPU count, fastest first (``rank`` 1 = the fastest, the same layout as rows' #1).
    # At a fixed SKU and GPU count cost and energy to train are proportional to step time, so this
    # is also the front on cost vs memory.
    pareto: list[SweepRow] = Field(default_factory=new_list)
    pareto_checked: bool = False  # True with --pareto (an empty list then means no layout fits)
    no_layout: list[NoLayout] = Field(default_factory=new_list)  # SKU x GPU counts with nothing valid that fits
    # The best layout's totals per SKU (single-size sweeps): FLOPs per token split, total training FLOPs
    # (with --tokens) and bytes per GPU per step of each collective (``results.totals``).
    totals: list[PlanTotals] = Field(default_factory=new_list)
    batch: BatchPlan | None = None  # how the global batch was chosen, per SKU and GPU count

    def check_failed(self) -> bool:
        return not self.rows

    def csv_rows(self) -> list[dict[str, Any]]:
        return [flatten(r.model_dump(mode="json")) for r in self.rows]


def layout_text(lay: SweepLayout) -> str:
    """A layout in one line: ``TP8 PP4 VPP2 DP16 Z1 mb1`` (degrees above 1, ZeRO stage, micro-batch)."""
    parts = [f"TP{lay.tp}", f"PP{lay.pp}"]
    if lay.vpp > 1:
        parts.append(f"VPP{lay.vpp}")
    if lay.cp > 1:
        parts.append(f"CP{lay.cp}")
    if lay.ep > 1:
        parts.append(f"EP{lay.ep}")
    if lay.etp > 1:
        parts.append(f"ETP{lay.etp}")
    parts.append(f"DP{lay.dp}")
    parts.append(f"Z{lay.zero}")
    parts.append(f"mb{lay.micro_batch}")
    if lay.recompute != "none":
        parts.append(f"rc:{lay.recompute}")
    if lay.tp > 1 and not lay.sequence_parallel:
        parts.append("no-SP")
    return " ".join(parts)
