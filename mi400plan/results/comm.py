"""Result of ``mi400plan comm``: one row per (system, size), nccl-tests style.

Units: bytes, seconds, bytes/s (per direction). ``tier`` says which network carried the collective:
``scale_up`` (one domain), ``scale_out`` (every member in a different domain) or ``hierarchical``
(reduce-scatter in the domain, cross-domain step over scale-out, all-gather back).
"""

from typing import ClassVar, Literal

from pydantic import Field

from mi400plan.factories import new_list
from mi400plan.results.common import OutModel, Result


class TierOut(OutModel):
    """The effective parameters one tier contributed (nominal case)."""

    fabric: str  # profile name, or "custom" for --bw
    kind: Literal["scale_up", "scale_out"]
    topology: str
    domain_size: int | None  # GPUs in one domain of this tier; None = unbounded (a switched scale-out)
    bw_per_dir_bytes_per_s: float  # peak per GPU, one direction
    efficiency: float
    latency_s: float
    assumed: list[str] = Field(default_factory=new_list)  # fields resting on assumed/estimated values


class SystemOut(OutModel):
    label: str  # SKU name, fabric name, or "custom"
    scale_up: TierOut
    scale_out: TierOut | None = None
    # torus scale-up tier: chips along each dimension for the group's in-domain part, wraparound,
    # and the listed slice it sits in (e.g. "4x4x4 (wraparound: all)"); None otherwise
    torus_slice: str | None = None


class CommRow(OutModel):
    system: str  # SKU name, fabric name, or "custom" (--bw)
    sku: str | None = None  # the accelerator, as in fit and rack rows; None for --fabric / --bw
    op: str
    algorithm: str  # e.g. "ring", "direct", "hierarchical(direct+ring)"
    size_bytes: int
    group: int
    stride: int
    tier: Literal["scale_up", "scale_out", "hierarchical"]
    time_s: float
    time_fast_s: float  # optimistic end of the profile ranges (high bw and efficiency, low latency)
    time_slow_s: float  # pessimistic end
    algbw_bytes_per_s: float
    busbw_bytes_per_s: float
    latency_term_s: float
    bandwidth_term_s: float
    bound: Literal["latency", "bandwidth"]
    scale_up_time_s: float
    scale_out_time_s: float
    group_in_domain: int  # members in the fullest scale-up domain the group spans
    group_in_domain_min: int  # members in the least-filled one (equal unless a domain is partly filled)
    domains: int
    relative_to_fastest: float  # time / fastest system's time at this size (1.0 = fastest)


class CommResult(Result):
    command: ClassVar[str] = "comm"
    op: str
    group: int
    stride: int
    algo: str  # requested: "auto" or a forced algorithm
    systems: list[SystemOut]
    rows: list[CommRow]
