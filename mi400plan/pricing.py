"""How a training run is priced: the small values ``sweep`` carries to the cost model.

Kept apart from ``mi400plan.cost`` (the cost model itself, which re-exports them) so that a command that
only passes the pricing along, as ``sweep`` does unless ``--tokens`` or a site flag asks for the cost
model, does not import that model.
"""

from __future__ import annotations

from dataclasses import field

from mi400plan.records import record


@record(frozen=False)
class CostOverrides:
    """Command-line replacements for profile values (None: keep the profile's)."""

    site: dict[str, float] = field(default_factory=dict)  # SiteCost field -> value
    facility: str | None = None  # owned | colocation
    capex_per_gpu: float | None = None  # replaces server + network capex of the (single) system


@record
class Pricing:
    """How a run is priced: a flat cost per GPU-hour (US dollars; None: the cost model's all-in figure for
    the SKU's system) at ``site`` (None: ``cost.DEFAULT_SITE``) with command-line ``overrides``."""

    gpu_hour_cost: float | None = None
    site: str | None = None
    overrides: CostOverrides | None = None
