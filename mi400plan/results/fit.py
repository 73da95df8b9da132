"""Output model of ``mi400plan fit`` (the JSON contract under the envelope's ``data``).

All sizes are integers in bytes (``*_bytes``); percentages are plain floats (``headroom_pct`` is
headroom / capacity x 100).
"""

from typing import ClassVar, Literal

from pydantic import Field

from mi400plan.factories import new_list, new_dict
from mi400plan.results.common import OutModel, Result


class MemoryBytes(OutModel):
    """Per-GPU bytes on the most loaded rank. ``total`` is the sum of the first six; ``fragmentation``
    is the allocator-fragmentation share already inside ``reserve`` (training; 0 for inference)."""

    weights: int
    gradients: int
    optimizer: int
    activations: int
    kv_cache: int
    reserve: int
    total: int
    fragmentation: int = 0


class FitModel(OutModel):
    name: str
    display_name: str
    profile: str  # file the model was read from
    params_total: int
    params_active: int
    max_seq_len: int  # the model's longest context (tokens)


class FitRow(OutModel):
    sku: str
    precision: str | None = None  # set when several --precision values are compared (FitResult.precisions)
    display_name: str
    profile: str  # file the accelerator was read from
    mode: Literal["train", "infer"]
    layout: dict[str, int | str | bool]
    gpus: int  # GPUs of one layout (train: tp*pp*cp*dp; infer: max(tp, ep)*pp per replica)
    fits: bool  # true for the verdicts "fits" and "tight": the layout is valid
    # "tight": over capacity by no more than the allocator-fragmentation share of the reserve
    verdict: Literal["fits", "tight", "does_not_fit", "unknown"]
    capacity_bytes: int | None
    capacity_low_bytes: int | None = None
    capacity_high_bytes: int | None = None
    capacity_status: str
    headroom_bytes: int | None
    headroom_pct: float | None
    memory_bytes: MemoryBytes
    stage: int  # index of the most loaded pipeline stage
    # Embedding / output-layer rows as allocated: train, Megatron-LM's padding to a multiple of
    # vocab_divisible_by (128) x TP; infer, vLLM's padding to a multiple of 64. Parameter counts
    # (model.params_total) stay unpadded.
    padded_vocab_size: int | None = None
    # Activation offloading (--offload-layers N): activation bytes this GPU keeps in pinned host memory,
    # the host memory per GPU it needs; already taken out of memory_bytes.activations. None without it.
    host_offload_bytes: int | None = None
    # Train: the software stack this SKU is priced on (``mi400plan.stacks``): name, framework, version,
    # release date, overridden settings and why it was chosen. None where its vendor has no stack.
    stack: str | None = None
    reason: str | None = None  # why it does not fit (or why no verdict), both sizes stated
    suggestion: str | None = None  # what would make it fit
    min_gpus: int | None = None  # smallest GPU count (layout below) that fits on this SKU, TP within the domain
    min_layout: str | None = None  # flags that replace --tp/--pp/--ep/--dp/--gpus, e.g. "--tp 8 --pp 2"
    min_memory_bytes: int | None = None  # per-GPU total at min_layout on this SKU
    flips: bool = False  # the verdict changes within the capacity's low..high range
    range_note: str | None = None
    max_tokens: int | None = None  # infer: largest batch x context of KV cache that fits
    max_context: int | None = None  # infer: longest context per sequence at the given batch
    # Scale-up domain of the SKU (interconnect.scale_up_fabric -> fabric domain_size); None = unknown.
    domain_size: int | None = None  # GPUs in one scale-up domain (8: xGMI/HGX node, 72: Helios/NVL72 rack)
    domain_fabric: str | None = None  # fabric profile the size comes from
    domain_label: str | None = None  # e.g. "8-GPU xGMI node"
    domains: int | None = None  # domains the layout as given occupies (infer: one replica)
    layout_domain_note: str | None = None  # set when the TP given is wider than the domain
    min_domains: int | None = None  # domains min_layout occupies (train: the whole run; infer: one replica)
    min_layout_domain_note: str | None = None  # why min_layout is not the fewest GPUs overall (TP kept
    # within the domain), that no layout with TP inside the domain fits, or that the domain is unknown
    cross_domain_min_gpus: int | None = None  # fewest GPUs with TP unbounded, when fewer than min_gpus
    cross_domain_min_layout: str | None = None  # its flags (TP wider than the domain)


# A recipe field's value in a result: a number, a name, a switch, or a list of names (recompute modules).
RecipeValue = float | int | str | bool | list[str]


class FitResult(Result):
    command: ClassVar[str] = "fit"

    model: FitModel
    mode: Literal["train", "infer"]
    recipe: dict[str, RecipeValue]
    reserve: str  # the runtime reserve rule, e.g. "2.0 GiB + 5% of HBM"
    rows: list[FitRow] = Field(default_factory=new_list)
    # Several --precision values compared: their order, and each one's recipe (``recipe`` is the first's).
    precisions: list[str] = Field(default_factory=new_list)
    recipes: dict[str, dict[str, RecipeValue]] = Field(default_factory=new_dict)

    def check_failed(self) -> bool:
        return not any(r.fits for r in self.rows)
