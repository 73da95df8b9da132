"""DualPipe, DeepSeek-V3's bidirectional pipeline schedule (``--pp-schedule dualpipe``).

Sources: DeepSeek-AI, "DeepSeek-V3 Technical Report", arXiv 2412.19437 (2024-12), sec. 3.2.1 and
Table 2; deepseek-ai/DualPipe README and ``dualpipe/dualpipe.py`` (2025-02).

* Placement: micro-batches are fed from both ends of the pipeline, half in each direction, so rank
  ``i`` holds two pipeline stages: stage ``i`` of the forward direction and stage ``PP - 1 - i`` of the
  reverse one (``examples/example_dualpipe.py`` builds each rank's modules as
  ``(full_modules[rank], full_modules[PP - 1 - rank])``). That is Table 2's "Parameter 2x": every rank
  keeps two stages' weights, and their gradients and optimizer states (the planner shards the
  optimizer states of each copy over DP x CP as it does under 1F1B, not over the mirrored pair).
  Rank 0 therefore holds both the embedding and the output head.
* Activations: Table 2's "Activation PP + 1": ``PP + 1`` micro-batches of one stage's activations
  on every rank, in place of 1F1B's ``PP`` on the first stage. One stage's activations per micro-batch
  are here the mean of the rank's two stages.
* Bubble: ``(PP/2 - 1)(F&B + B - 3W)`` (Table 2), ``F`` a forward chunk, ``B`` a full backward chunk,
  ``W`` its weight-gradient part, ``F&B`` a forward and a backward chunk run overlapped. The planner
  splits one micro-batch's time ``t = F + B`` by FLOPs: the backward does twice the forward's
  GEMM FLOPs (data and weight gradients, Narayanan et al. 2021, arXiv 2104.04473, sec. 3.5), so
  ``F = t/3``, ``B = 2t/3``, ``W = B/2 = t/3``; the overlap hides communication, not compute, so
  ``F&B = F + B = t``. Hence ``F&B + B - 3W = 2t/3`` and the bubble is ``(PP/2 - 1) x 2/3`` micro-batch
  times (1F1B's is ``PP - 1``).
* Requirements (``dualpipe.py`` ``DualPipe.step``): an even number of ranks, and a number of
  micro-batches that is even and at least ``2 x PP``; the schedule has no virtual stages.

No numpy at import (the specs and the command line import this module).
"""

from __future__ import annotations

from typing import Any

SCHEDULES = ("1f1b", "dualpipe")
DUALPIPE = "dualpipe"
FLAG = "--pp-schedule"
# F&B + B - 3W over one micro-batch time F + B, with F : B : W = 1 : 2 : 1 and F&B = F + B (docstring).
DUALPIPE_BUBBLE_SHARE = (3.0 + 2.0 - 3.0) / 3.0
RULE = "dualpipe"
RULE_TEXT = "DualPipe needs an even PP, no virtual stages, and an even number of micro-batches >= 2 x PP"


def bubble_microbatches(pp: Any) -> Any:
    """DualPipe's bubble in micro-batch times: ``(PP/2 - 1) x 2/3`` (Table 2 with F : B : W = 1 : 2 : 1).
    Arrays broadcast."""
    return (pp / 2.0 - 1.0) * DUALPIPE_BUBBLE_SHARE


def inflight_stage_microbatches(pp: Any, num_microbatches: Any) -> Any:
    """Micro-batches of one stage's activations held on every rank: ``PP + 1`` (Table 2), capped by
    the step's micro-batches. Arrays broadcast (numpy)."""
    import numpy as np

    return np.minimum(np.asarray(pp, dtype=np.float64) + 1.0, num_microbatches)


def breaks_rule(pp: Any, vpp: Any, num_microbatches: Any) -> Any:
    """True where DualPipe cannot run the layout (``DualPipe.step``'s assertions; no VPP). Arrays broadcast."""
    return (pp < 2) | (pp % 2 != 0) | (vpp > 1) | (num_microbatches % 2 != 0) | (num_microbatches < 2 * pp)


def problem(pp: int, vpp: int, num_microbatches: int | None) -> str | None:
    """Why DualPipe cannot run this layout, naming the flag, or None (``num_microbatches`` None: no
    global batch given, so only PP and VPP are checked)."""
    why = []
    if pp < 2 or pp % 2:
        why.append(f"an even PP of at least 2 (got PP {pp})")
    if vpp > 1:
        why.append(f"no virtual stages (got VPP {vpp}; it has its own two stages per rank)")
    if num_microbatches is not None and (num_microbatches % 2 or num_microbatches < 2 * pp):
        why.append(f"an even number of micro-batches per replica, at least 2 x PP = {2 * pp} "
                   f"(got {num_microbatches})")
    if not why:
        return None
    return f"{FLAG} dualpipe needs " + "; ".join(why) + " (deepseek-ai/DualPipe, DualPipe.step)"
