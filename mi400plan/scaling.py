"""Compute-optimal model size and token count for a training-compute budget.

Training compute is taken as C = 6 N D (N parameters, D tokens; Kaplan et al. 2020, arXiv
2001.08361, sec. 2.1; Hoffmann et al. 2022, arXiv 2203.15556, sec. 3), the same convention the
laws below were fitted with.

Parametric laws (Hoffmann et al. 2022, Approach 3, eq. 2): L(N, D) = E + A / N^alpha + B / D^beta.
Minimising L subject to 6 N D = C gives (their eq. 4)

    N_opt = G (C / 6)^a,  D_opt = G^-1 (C / 6)^b,
    G = (alpha A / (beta B))^(1 / (alpha + beta)),  a = beta / (alpha + beta),  b = alpha / (alpha + beta).

E does not move the optimum. The token-ratio law (Hoffmann et al. Approaches 1 and 2, which give
a ~ b ~ 0.5 and about 20 tokens per parameter: Chinchilla itself is 70B parameters on 1.4T tokens at
Gopher's 5.76e23 FLOPs) fixes D = r N, so N_opt = sqrt(C / (6 r)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from mi400plan.errors import UsageError


@dataclass(frozen=True)
class ScalingLaw:
    """One compute-optimal rule with its constants and source."""

    name: str
    kind: Literal["parametric", "ratio"]
    source: str
    E: float = 0.0
    A: float = 0.0
    B: float = 0.0
    alpha: float = 0.0
    beta: float = 0.0
    tokens_per_param: float = 0.0

    def describe(self) -> str:
        if self.kind == "ratio":
            return f"D = {self.tokens_per_param:g} N, C = 6 N D ({self.source})"
        return (
            f"L = {self.E:g} + {self.A:g} / N^{self.alpha:g} + {self.B:g} / D^{self.beta:g}, "
            f"C = 6 N D ({self.source})"
        )


LAWS: dict[str, ScalingLaw] = {
    "chinchilla": ScalingLaw(
        "chinchilla",
        "parametric",
        "Hoffmann et al. 2022, 'Training Compute-Optimal Large Language Models', arXiv 2203.15556 "
        "(2022-03-29), Approach 3 fit, eq. 10: E 1.69, A 406.4, B 410.7, alpha 0.34, beta 0.28",
        E=1.69,
        A=406.4,
        B=410.7,
        alpha=0.34,
        beta=0.28,
    ),
    "chinchilla-refit": ScalingLaw(
        "chinchilla-refit",
        "parametric",
        "Besiroglu et al. 2024, 'Chinchilla Scaling: A replication attempt', arXiv 2404.10102 "
        "(2024-04-15), refit of Approach 3: E 1.8172, A 482.01, B 2085.43, alpha 0.3478, beta 0.3658",
        E=1.8172,
        A=482.01,
        B=2085.43,
        alpha=0.3478,
        beta=0.3658,
    ),
    "chinchilla-20": ScalingLaw(
        "chinchilla-20",
        "ratio",
        "Hoffmann et al. 2022, arXiv 2203.15556 (2022-03-29), Approaches 1 and 2: about 20 tokens per "
        "parameter (Chinchilla: 70B parameters, 1.4T tokens)",
        tokens_per_param=20.0,
    ),
}
DEFAULT_LAW = "chinchilla"


def get_law(name: str) -> ScalingLaw:
    key = name.strip().lower()
    if key not in LAWS:
        raise UsageError(f"unknown scaling law {name!r}", hint=f"choose one of: {', '.join(LAWS)}")
    return LAWS[key]


@dataclass(frozen=True)
class ComputeOptimal:
    compute_flops: float
    params: float
    tokens: float
    exponent_params: float  # a in N_opt ~ C^a
    loss: float | None  # predicted loss at the optimum (parametric laws only)


def compute_optimal(compute_flops: float, law: ScalingLaw) -> ComputeOptimal:
    """N_opt and D_opt for a budget of ``compute_flops`` FLOPs under ``law`` (see the module doc)."""
    if not (math.isfinite(compute_flops) and compute_flops > 0):
        raise UsageError(f"the compute budget must be a positive finite number of FLOPs, got {compute_flops!r}")
    if law.kind == "ratio":
        n = math.sqrt(compute_flops / (6.0 * law.tokens_per_param))
        return ComputeOptimal(compute_flops, n, law.tokens_per_param * n, 0.5, None)
    s = law.alpha + law.beta
    g = (law.alpha * law.A / (law.beta * law.B)) ** (1.0 / s)
    a, b = law.beta / s, law.alpha / s
    n = g * (compute_flops / 6.0) ** a
    d = (compute_flops / 6.0) ** b / g
    return ComputeOptimal(compute_flops, n, d, a, loss(n, d, law))


def loss(params: float, tokens: float, law: ScalingLaw) -> float | None:
    """Predicted loss E + A / N^alpha + B / D^beta (parametric laws only)."""
    if law.kind != "parametric":
        return None
    return law.E + law.A / params**law.alpha + law.B / tokens**law.beta
