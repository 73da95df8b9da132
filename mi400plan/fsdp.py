"""ZeRO-3 / FSDP step-time terms: per-layer parameter gathers and gradient reduce-scatters.

PyTorch FSDP (Zhao et al. 2023, "PyTorch FSDP: Experiences on Scaling Fully Sharded Data Parallel",
arXiv 2304.11277, sec. 3.3-3.4) wraps each transformer layer as one unit. With parameters resharded
after the forward pass (ZeRO-3), every micro-batch all-gathers each unit's parameters before its
forward and again before its backward, and reduce-scatters the unit's gradients after its backward.
Prefetching issues the next unit's all-gather while the current unit computes (forward prefetch and
``BackwardPrefetch.BACKWARD_PRE``), and the reduce-scatter of a unit runs while the next unit's
backward computes, so in backward the link carries one gather and one reduce-scatter per unit
computed. What cannot hide: the first gather of each pass and the last reduce-scatter.

Per micro-batch on one GPU, with ``U`` units (its layers), per-unit gather ``ag`` and reduce-scatter
``rs`` times, per-unit forward ``f`` and backward ``b`` compute times (seconds), with prefetch:

* forward:  ``ag + (U - 1) max(0, ag - f)``
* backward: ``ag + max(0, ag - b) + (U - 2) max(0, ag + rs - b) + max(0, rs - b) + rs``

(backward of the last unit overlaps the next gather only; the first unit's backward overlaps the
previous reduce-scatter only; the first unit's own reduce-scatter is exposed). Without prefetch
(overlap off) everything is serial: ``U (2 ag + rs)``. Raw traffic is ``U (2 ag + rs)`` either way.
Vectorized over numpy arrays; ``U`` may be fractional (uneven pipeline splits use the average) and is
taken as at least 1.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np


class FsdpTimes(NamedTuple):
    exposed: Any  # seconds per micro-batch left on the critical path
    raw: Any  # seconds per micro-batch of DP traffic (2 gathers + 1 reduce-scatter per unit)


def fsdp_microbatch(ag: Any, rs: Any, f: Any, b: Any, units: Any, prefetch: bool = True) -> FsdpTimes:
    """Exposed and raw ZeRO-3 traffic of one micro-batch (module docstring), seconds."""
    u = np.maximum(np.asarray(units, dtype=np.float64), 1.0)
    raw = u * (2.0 * ag + rs)
    if not prefetch:
        return FsdpTimes(raw, raw)
    fwd = ag + (u - 1.0) * np.maximum(0.0, ag - f)
    two = u >= 2.0
    bwd = np.where(
        two,
        ag + np.maximum(0.0, ag - b) + np.maximum(u - 2.0, 0.0) * np.maximum(0.0, ag + rs - b)
        + np.maximum(0.0, rs - b) + rs,
        ag + rs,
    )
    return FsdpTimes(fwd + bwd, raw)


def fsdp_unit_bytes(dense_params: Any, expert_params: Any, bytes_per_param: float, units: Any) -> tuple[Any, Any]:
    """(dense, expert) bytes of one FSDP unit's gather or reduce-scatter on a GPU holding
    ``dense_params`` and ``expert_params`` in ``units`` units (layers; at least 1): the embedding, head
    and norms are spread over the units (the average unit)."""
    u = np.maximum(np.asarray(units, dtype=np.float64), 1.0)
    return dense_params * bytes_per_param / u, expert_params * bytes_per_param / u


def fsdp_step_terms(ag: Any, rs: Any, units: Any, compute_mb: Any, prefetch: bool = True) -> FsdpTimes:
    """ZeRO-3 times per micro-batch of a GPU whose ``units`` FSDP units (layers) each all-gather their
    parameters in ``ag`` and reduce-scatter their gradients in ``rs`` seconds (the collectives of
    :func:`fsdp_unit_bytes`, priced by ``search.step_time``), and whose micro-batch compute takes
    ``compute_mb`` seconds (one third forward, two thirds backward)."""
    u = np.maximum(np.asarray(units, dtype=np.float64), 1.0)
    return fsdp_microbatch(ag, rs, compute_mb / 3.0 / u, compute_mb * 2.0 / 3.0 / u, u, prefetch)
