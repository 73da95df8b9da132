"""Compute-optimal planning for a budget: FLOPs from GPUs x time, the law's optimum, the family model
nearest it.

Budget: ``C = GPUs x seconds x dense peak x MFU`` (model FLOPs the cluster delivers; MFU counts
``6 N + attention`` per token, as ``search.metrics`` does) or a FLOP figure given directly. The
optimum ``(N_opt, D_opt)`` is ``scaling.compute_optimal`` under the chosen law (``C = 6 N D``). The
family model nearest ``N_opt`` is the ladder step (``family.FamilyTemplate``) whose parameter count is
closest on a log scale: total parameters for a dense family, the parameters a token touches (active)
for an MoE family, since ``C = 6 N D`` counts the FLOPs a token costs. That model trains on
``C / (6 N_model)`` tokens, so it spends the same budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mi400plan.errors import UsageError
from mi400plan.family import FamilyTemplate
from mi400plan.params import count_params
from mi400plan.specs.model import ModelSpec


def budget_flops(gpus: int, seconds: float, peak_flops: float, mfu: float) -> float:
    """Model FLOPs ``gpus`` GPUs deliver in ``seconds`` at ``mfu`` of their dense ``peak_flops``."""
    if not (gpus >= 1 and seconds > 0 and peak_flops > 0 and 0 < mfu <= 1):
        raise UsageError("a compute budget needs GPUs >= 1, a positive time and an MFU in (0, 1]")
    return gpus * seconds * peak_flops * mfu


@dataclass(frozen=True)
class FamilyStep:
    """One model of a family ladder with the parameter count the law is matched on."""

    width: int
    model: ModelSpec
    params_total: int
    params_active: int

    def matched(self, family: str) -> int:
        return self.params_active if family == "moe" else self.params_total


def ladder(template: FamilyTemplate) -> list[FamilyStep]:
    """Every model of the family, small to large."""
    out = []
    for w in template.widths():
        spec = template.model(w)
        c = count_params(spec)
        out.append(FamilyStep(w, spec, int(c.total), int(c.active)))
    return out


def nearest(template: FamilyTemplate, params: float, steps: list[FamilyStep] | None = None) -> FamilyStep:
    """The ladder step whose matched parameter count is nearest ``params`` (log distance)."""
    if not (math.isfinite(params) and params > 0):
        raise UsageError(f"a parameter count must be positive, got {params!r}")
    steps = steps or ladder(template)
    return min(steps, key=lambda s: abs(math.log(s.matched(template.family) / params)))
