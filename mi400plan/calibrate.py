"""Fit a SKU's efficiencies and a fabric's efficiency and latency to a user's own measurements.

Two fits, each through the planner's own forward model, so the fitted values mean exactly what the
other commands will do with them:

* **Fabric** (nccl-tests logs): every row is priced by ``comms.collective_time`` (Hockney's
  alpha-beta model as ``mi400plan comm`` uses it): ``t = alpha x steps + volume / (B x eff)`` where
  ``steps`` and ``volume / B`` come from the algorithm the model picks (or ``algo``) for that op,
  size and group on the fabric's topology. That is linear in ``alpha`` and ``1 / eff``; they are
  found by least squares on the relative residuals ``t_model / t_measured - 1`` (so an 8 B row and an
  8 GB row count alike), the algorithm choice re-made at the fitted values until it no longer
  changes. ``alpha < 0`` is refitted at 0; ``eff > 1`` (faster than the profile's wire peak) is held
  at 1 and reported. Logs that cross hosts with several GPUs each are priced by
  ``comms.placed_collective`` (two tiers, the scale-up one held) and fitted non-linearly
  (``fit_fabric_placed``).
* **Accelerator** (training runs): every run's step time is ``search.evaluate_one`` on the
  ``Hardware`` that ``hardware.build_sku`` builds from the accelerator profile with the candidate
  values (and the fitted fabrics) in place. The parameters are those in ``ACCELERATOR_PARAMS``, the
  one list of what ``calibrate`` fits; they are found by Levenberg-Marquardt (Marquardt 1963) on the
  relative step-time residuals, within each parameter's bounds. With fewer runs than parameters
  only the first ones in the list are fitted; a parameter the runs cannot tell apart from another
  (singular-value ratio of the scaled Jacobian below ``MIN_SV_RATIO``) is held at its profile
  value and reported as not identified. Standard errors are ``sqrt(diag(s^2 (J^T J)^-1))`` with
  ``s^2 = sum r^2 / (n - p)`` (the usual non-linear least-squares approximation).

No printing, no typer/rich: ``api.calibrate`` reads the files and builds the result.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from mi400plan import comms
from mi400plan.errors import ProfileError, UsageError
from mi400plan.measurements import MeasuredRun, NcclLog, RunEntry
from mi400plan.profiles import Loaded
from mi400plan.specs.common import Estimate

MIN_SV_RATIO = 1e-3  # smallest / largest singular value of the scaled Jacobian for a parameter to count
MIN_TERM_SHARE = 0.05  # a fabric term below this share of every row's time is not measured by the rows
MIN_SENSITIVITY = 1e-3  # a run set whose step times move less than this per 100 % change of a value


@dataclass(frozen=True)
class FitParam:
    """One fittable profile value. ``key`` is its key in the profile's ``[efficiency]`` table (for an
    accelerator; ``{precision}`` is filled in per run precision) or the fabric's top-level key."""

    key: str
    label: str
    unit: str
    lo: float
    hi: float
    scale: float  # typical size, for the solver's steps and the identification test

    def for_precision(self, precision: str) -> "FitParam":
        return replace(self, key=self.key.format(precision=precision))


# What ``calibrate`` can fit for an accelerator, most important first (fitted first when runs are
# few). Keys are ``[efficiency]`` keys of the accelerator profile (``specs.efficiency.Efficiency``);
# the step-time model reads them through ``hardware.build_sku``, so a key fits whatever that model
# does with it. ``ACCELERATOR_PARAMS`` keeps those the installed ``Efficiency`` has; ``NOT_FITTED``
# names every other ``Efficiency`` field and why (a test checks that the two cover the class).
_CANDIDATES: tuple[FitParam, ...] = (
    FitParam("matmul_{precision}", "matmul efficiency", "of peak", 0.01, 1.0, 0.5),
    FitParam("gemm_overhead_us", "GEMM overhead", "us", 0.0, 1000.0, 5.0),
    FitParam("attention", "attention efficiency", "of BF16 peak", 0.01, 1.0, 0.4),
    FitParam("expert_host_us", "expert host time", "us per expert GEMM", 0.0, 5000.0, 200.0),
)
NOT_FITTED: dict[str, str] = {
    "hbm_bandwidth": "streaming kernels are a few % of a training step; step times do not separate it from "
    "the matmul efficiency",
}


def _efficiency_fields() -> frozenset[str]:
    from mi400plan.specs.efficiency import Efficiency

    return frozenset(Efficiency.model_fields)


ACCELERATOR_PARAMS: tuple[FitParam, ...] = tuple(
    p for p in _CANDIDATES if p.key.format(precision="bf16") in _efficiency_fields()
)
FABRIC_PARAMS: tuple[FitParam, ...] = (
    FitParam("efficiency", "fabric efficiency", "of link bw", 1e-3, 1.0, 0.8),
    FitParam("hop_latency_us", "latency (alpha)", "us per step", 0.0, 1e4, 1.0),
)


# --- catalog overlay ---------------------------------------------------------------------------


class OverlayCatalog:
    """A catalog whose profiles ``(kind, name)`` are replaced by given specs; everything else reads
    through to ``base``. Lets the forward model run on candidate values without touching files."""

    def __init__(self, base: Any, specs: dict[tuple[str, str], Any]) -> None:
        self._base = base
        self._specs = specs

    def get(self, kind: str, name: str) -> Loaded[Any]:
        loaded = self._base.get(kind, name)
        spec = self._specs.get((kind, loaded.spec.name))
        return loaded if spec is None else Loaded(spec, loaded.path, loaded.origin)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._base, attr)


def measured_estimate(value: float) -> Estimate:
    return Estimate.exact(float(value), status="measured")


def with_efficiency(acc: Any, values: dict[str, float]) -> Any:
    """Accelerator spec ``acc`` with ``[efficiency]`` keys set to ``values``."""
    eff = acc.efficiency.model_copy(update={k: measured_estimate(v) for k, v in values.items()})
    return acc.model_copy(update={"efficiency": eff})


def with_fabric(fab: Any, values: dict[str, float]) -> Any:
    """Fabric spec ``fab`` with ``efficiency`` / ``hop_latency_us`` set to ``values``."""
    return fab.model_copy(update={k: measured_estimate(v) for k, v in values.items()})


# --- bounded Levenberg-Marquardt ---------------------------------------------------------------


@dataclass
class Solution:
    x: np.ndarray
    residuals: np.ndarray
    jacobian: np.ndarray  # d residual / d x at x
    capped: bool = False  # stopped by ``max_iter``, not by convergence


def _jacobian(f: Callable[[np.ndarray], np.ndarray], x: np.ndarray, r: np.ndarray, scale: np.ndarray,
              lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    J = np.empty((r.size, x.size))
    for j in range(x.size):
        h = 1e-6 * max(abs(x[j]), scale[j])
        step = h if x[j] + h <= hi[j] else -h
        xp = x.copy()
        xp[j] += step
        J[:, j] = (f(xp) - r) / step
    return J


LM_MAX_ITER = 40  # a consistent set converges in about 15 (tests/data/calibrate/runs.toml: 13)
# The accelerator fit's cost is bounded: each pricing of the runs costs one step-time evaluation per
# distinct workload (``_run_groups``), a few ms each. At most MAX_WORKLOADS distinct workloads per SKU,
# and the solver's iterations are cut so that the fit prices at most EVAL_BUDGET workloads in all
# (about 10 s on one core at the limit; a few distinct workloads keep all LM_MAX_ITER iterations).
MAX_WORKLOADS = 64
EVAL_BUDGET = 3000


def least_squares(f: Callable[[np.ndarray], np.ndarray], x0: Sequence[float], lo: Sequence[float],
                  hi: Sequence[float], scale: Sequence[float], max_iter: int = LM_MAX_ITER) -> Solution:
    """Minimise ``sum f(x)^2`` within ``lo <= x <= hi`` (Levenberg-Marquardt, steps clipped to the box).

    Every iteration prices every run once per free parameter (the Jacobian), so the iterations are
    capped at ``max_iter``: measurements the model cannot match crawl along a ridge of near-equal cost
    (a run's DP halved: 100 iterations, 10 s for five runs) without changing the fit materially."""
    lo_a, hi_a, sc = (np.asarray(v, dtype=float) for v in (lo, hi, scale))
    x = np.clip(np.asarray(x0, dtype=float), lo_a, hi_a)
    r = f(x)
    cost, lam = float(r @ r), 1e-3
    J = _jacobian(f, x, r, sc, lo_a, hi_a)
    capped = True
    for _ in range(max_iter):
        A, g = J.T @ J, J.T @ r
        damp = lam * np.diag(np.maximum(np.diag(A), 1e-12 / sc**2))
        try:
            dx = -np.linalg.solve(A + damp, g)
        except np.linalg.LinAlgError:
            capped = False
            break
        xn = np.clip(x + dx, lo_a, hi_a)
        rn = f(xn)
        cn = float(rn @ rn)
        if cn < cost:
            done = np.all(np.abs(xn - x) <= 1e-10 * sc) or cost - cn <= 1e-15 * max(cost, 1e-30)
            x, r, cost, lam = xn, rn, cn, max(lam / 3.0, 1e-12)
            J = _jacobian(f, x, r, sc, lo_a, hi_a)
            if done:
                capped = False
                break
        else:
            lam *= 4.0
            if lam > 1e12:
                capped = False
                break
    return Solution(x, r, J, capped)


def std_errors(sol: Solution, scale: np.ndarray) -> np.ndarray | None:
    """Standard errors of ``sol.x``; None without more points than parameters."""
    n, p = sol.jacobian.shape
    if n <= p:
        return None
    s2 = float(sol.residuals @ sol.residuals) / (n - p)
    try:
        cov = np.linalg.inv(sol.jacobian.T @ sol.jacobian) * s2
    except np.linalg.LinAlgError:
        return None
    return np.sqrt(np.maximum(np.diag(cov), 0.0))


def identified(J: np.ndarray, scale: np.ndarray) -> bool:
    """Whether the columns of ``J`` (scaled by each parameter's typical size) are independent."""
    Js = J * scale
    if Js.size == 0 or not np.all(np.isfinite(Js)):
        return False
    norms = np.linalg.norm(Js, axis=0)
    if np.any(norms < 1e-9):
        return False
    sv = np.linalg.svd(Js / norms, compute_uv=False)
    return bool(sv[-1] >= MIN_SV_RATIO * sv[0])


# --- fitted values -----------------------------------------------------------------------------


@dataclass
class ParamFit:
    param: FitParam
    before: float | None
    value: float | None  # None: not identified (profile value kept)
    std_error: float | None = None
    note: str | None = None


@dataclass
class PointFit:
    """One measured point (a run or an nccl-tests row) with the model's time before and after."""

    measured_s: float
    before_s: float
    fitted_s: float
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def residual(self) -> float:
        return self.fitted_s / self.measured_s - 1.0

    @property
    def residual_before(self) -> float:
        return self.before_s / self.measured_s - 1.0


@dataclass
class ProfileFit:
    kind: str  # "accelerators" | "fabrics"
    name: str
    params: list[ParamFit]
    points: list[PointFit]
    warnings: list[str] = field(default_factory=list)

    def fitted_values(self) -> dict[str, float]:
        return {p.param.key: p.value for p in self.params if p.value is not None}


# --- fabric fit (nccl-tests) --------------------------------------------------------------------


@dataclass(frozen=True)
class _Terms:
    """Per row and algorithm: latency steps and seconds of volume at efficiency 1 (inf: not valid)."""

    steps: np.ndarray  # rows x algos
    volume_s: np.ndarray  # rows x algos
    measured: np.ndarray  # rows


def _fabric_terms(logs: Sequence[NcclLog], tier: comms.TierParams, algo: str | None) -> _Terms:
    unit = replace(tier, latency=1.0, efficiency=1.0)
    algos = comms.ALGOS if algo is None else (algo,)
    steps, vol, meas = [], [], []
    for log in logs:
        S = np.array([r.size_bytes for r in log.rows], dtype=float)
        per_algo = [comms.collective_time(log.op, S, log.ranks, unit, a) for a in algos]
        steps.append(np.stack([np.where(np.isfinite(t.time), t.latency, np.inf) for t in per_algo], axis=1))
        vol.append(np.stack([np.where(np.isfinite(t.time), t.bandwidth, np.inf) for t in per_algo], axis=1))
        meas.append(np.array([r.time_s for r in log.rows]))
    return _Terms(np.concatenate(steps), np.concatenate(vol), np.concatenate(meas))


def _pick(terms: _Terms, alpha: float, inv_eff: float) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        t = alpha * terms.steps + inv_eff * terms.volume_s
    t = np.where(np.isnan(t), np.inf, t)
    return np.argmin(t, axis=1)


def _solve_linear(s: np.ndarray, c: np.ndarray, fit_alpha: bool, alpha0: float) -> tuple[float, float, list[str]]:
    """Least squares of ``alpha s + u c = 1`` (rows already divided by the measured time); u = 1/eff."""
    notes: list[str] = []
    if fit_alpha:
        A = np.stack([s, c], axis=1)
        (alpha, u), *_ = np.linalg.lstsq(A, np.ones_like(s), rcond=None)
        if alpha >= 0 and u >= 1.0:
            return float(alpha), float(u), notes
        if alpha < 0:
            notes.append("the least-squares latency came out negative; fitted at 0")
            alpha = 0.0
    else:
        alpha = alpha0
    u = float((c @ (1.0 - alpha * s)) / (c @ c))
    if u < 1.0:
        notes.append(f"the measured bandwidth is {1 / u:.2f}x the profile's per-GPU figure (efficiency above 1): "
                     "efficiency held at 1.00; check the profile's bandwidth")
        u = 1.0
        if fit_alpha:
            alpha = max(0.0, float((s @ (1.0 - u * c)) / (s @ s)))
    return float(alpha), u, notes


@dataclass
class _Linear:
    """A fabric fit at one algorithm choice: alpha (s), u = 1/efficiency, and why a value was held."""

    alpha: float
    u: float
    why_alpha: str | None = None  # None: fitted
    why_eff: str | None = None
    notes: list[str] = field(default_factory=list)


def _solve_fabric(s: np.ndarray, c: np.ndarray, alpha0: float, u0: float) -> _Linear:
    """Fit alpha and 1/eff to rows ``alpha s + u c = 1``; a value whose term is under ``MIN_TERM_SHARE``
    of every row's time (or that the rows cannot separate) is held at the profile's."""
    why_a = None
    if s.size < 2:
        why_a = "one row cannot separate latency from bandwidth"
    elif not identified(np.stack([s, c], axis=1), np.array([1e-6, 1.0])):
        why_a = "the sizes do not separate latency from bandwidth (give small and large messages)"
    alpha, u, notes = _solve_linear(s, c, why_a is None, alpha0)
    if why_a is None and float(np.max(alpha * s)) < MIN_TERM_SHARE:
        why_a = f"latency is under {MIN_TERM_SHARE:.0%} of every row's time (give small messages)"
        alpha, u, notes = _solve_linear(s, c, False, alpha0)
    if float(np.max(u * c)) < MIN_TERM_SHARE:  # every row latency-bound: fit alpha at the profile's efficiency
        u = u0
        alpha = max(0.0, float((s @ (1.0 - u * c)) / (s @ s)))
        return _Linear(alpha, u, None, f"bandwidth is under {MIN_TERM_SHARE:.0%} of every row's time "
                       "(give large messages)")
    return _Linear(alpha, u, why_a, None, notes)


def fit_fabric(name: str, logs: Sequence[NcclLog], tier: comms.TierParams, algo: str | None = None) -> ProfileFit:
    """Fit ``efficiency`` and ``hop_latency_us`` of one fabric to nccl-tests rows on it."""
    terms = _fabric_terms(logs, tier, algo)
    rows = np.arange(terms.measured.size)
    before_pick = _pick(terms, tier.latency, 1.0 / tier.efficiency)
    choice = before_pick
    for _ in range(20):
        s = terms.steps[rows, choice] / terms.measured
        c = terms.volume_s[rows, choice] / terms.measured
        if not (np.all(np.isfinite(s)) and np.all(np.isfinite(c))):
            raise UsageError(f"{name}: {'the algorithm ' + algo if algo else 'no algorithm'} is valid on its "
                             f"{tier.topology} topology for every row", hint="try --algo auto")
        lin = _solve_fabric(s, c, tier.latency, 1.0 / tier.efficiency)
        new = _pick(terms, lin.alpha, lin.u)
        if np.array_equal(new, choice):
            break
        choice = new
    fitted_t = lin.alpha * terms.steps[rows, choice] + lin.u * terms.volume_s[rows, choice]
    before_t = tier.latency * terms.steps[rows, before_pick] + terms.volume_s[rows, before_pick] / tier.efficiency
    se = _linear_std_errors(s, c, fitted_t / terms.measured - 1.0, lin)
    algos = comms.ALGOS if algo is None else (algo,)
    points = []
    k = 0
    for log in logs:
        for r in log.rows:
            points.append(PointFit(r.time_s, float(before_t[k]), float(fitted_t[k]), {
                "log": log, "row": r, "algorithm": algos[int(choice[k])],
            }))
            k += 1
    return ProfileFit("fabrics", name, _fabric_params(tier, lin, se), points, [f"{name}: {m}" for m in lin.notes])


def _linear_std_errors(s: np.ndarray, c: np.ndarray, r: np.ndarray, lin: _Linear) -> dict[str, float]:
    """Standard errors of the fitted alpha and u (relative-residual least squares), by name."""
    cols = {k: v for k, v, why in (("alpha", s, lin.why_alpha), ("u", c, lin.why_eff)) if why is None}
    A = np.stack(list(cols.values()), axis=1)
    n, p = A.shape
    if n <= p:
        return {}
    try:
        cov = np.linalg.inv(A.T @ A) * float(r @ r) / (n - p)
    except np.linalg.LinAlgError:
        return {}
    return {k: float(np.sqrt(max(cov[i, i], 0.0))) for i, k in enumerate(cols)}


def _fabric_params(tier: comms.TierParams, lin: _Linear, se: dict[str, float]) -> list[ParamFit]:
    eff_p, lat_p = FABRIC_PARAMS
    kept = "; profile value kept"
    if lin.why_eff is None:  # d(1/u) = du / u^2
        eff = ParamFit(eff_p, tier.efficiency, 1.0 / lin.u, se["u"] / lin.u**2 if "u" in se else None)
    else:
        eff = ParamFit(eff_p, tier.efficiency, None, note=f"not identified: {lin.why_eff}{kept}")
    if lin.why_alpha is None:
        lat = ParamFit(lat_p, tier.latency * 1e6, lin.alpha * 1e6, se["alpha"] * 1e6 if "alpha" in se else None)
    else:
        lat = ParamFit(lat_p, tier.latency * 1e6, None, note=f"not identified: {lin.why_alpha}{kept}")
    return [eff, lat]


@dataclass(frozen=True)
class PlacedLog:
    """An nccl-tests log priced over two tiers: ``up`` is the scale-up tier of its hosts (domain = the
    ranks per host), None for a log with one rank per host (scale-out only)."""

    log: NcclLog
    up: comms.TierParams | None


def _placed_times(logs: Sequence[PlacedLog], out: comms.TierParams, algo: str | None) -> tuple[np.ndarray, list[str]]:
    times, labels = [], []
    for pl in logs:
        S = np.array([r.size_bytes for r in pl.log.rows], dtype=float)
        if pl.up is None:
            t = comms.collective_time(pl.log.op, S, pl.log.ranks, out, algo)
            times.append(t.time)
            labels += [comms.algo_label(int(a)) for a in np.atleast_1d(t.algo)]
            continue
        p = comms.placed_collective(pl.log.op, S, pl.log.ranks, 1, pl.up, out, algo)
        times.append(np.broadcast_to(p.time, S.shape))
        ups, outs = np.broadcast_to(p.algo_up, S.shape), np.broadcast_to(p.algo_out, S.shape)
        labels += [f"{comms.algo_label(int(u))}+{comms.algo_label(int(o))}" for u, o in zip(ups, outs)]
    return np.concatenate(times), labels


def fit_fabric_placed(name: str, logs: Sequence[PlacedLog], tier: comms.TierParams,
                      algo: str | None = None) -> ProfileFit:
    """Fit a scale-out fabric's ``efficiency`` and ``hop_latency_us`` to logs that cross hosts with
    several GPUs each: every row is ``comms.placed_collective`` (reduce-scatter in the host,
    cross-host step, all-gather back, or the flat scale-out collective, whichever the model finds
    faster), so the fit is non-linear (Levenberg-Marquardt on the relative residuals, the scale-up
    tier held). A value whose term moves no row's time by ``MIN_TERM_SHARE`` per 100 % is held."""
    meas = np.concatenate([[r.time_s for r in pl.log.rows] for pl in logs])
    eff_p, lat_p = FABRIC_PARAMS
    keys = {"efficiency": tier.efficiency, "hop_latency_us": tier.latency * 1e6}
    free, held = [eff_p, lat_p], {}

    def times(vals: dict[str, float]) -> tuple[np.ndarray, list[str]]:
        t = replace(tier, efficiency=vals["efficiency"], latency=vals["hop_latency_us"] * 1e-6)
        return _placed_times(logs, t, algo)

    fitted, se = {}, None
    while free:
        def resid(x: np.ndarray, free: list[FitParam] = free) -> np.ndarray:
            return times({**keys, **{p.key: float(v) for p, v in zip(free, x)}})[0] / meas - 1.0

        scale = np.array([p.scale for p in free])
        sol = least_squares(resid, [keys[p.key] for p in free], [p.lo for p in free], [p.hi for p in free], scale)
        weak = [p for j, p in enumerate(free)
                if float(np.max(np.abs(sol.jacobian[:, j]))) * max(abs(sol.x[j]), p.scale) < MIN_TERM_SHARE]
        if not weak and identified(sol.jacobian, scale):
            fitted, se = {p.key: float(v) for p, v in zip(free, sol.x)}, std_errors(sol, scale)
            break
        last = weak[-1] if weak else free[-1]
        free.remove(last)
        held[last.key] = (f"not identified: its term is under {MIN_TERM_SHARE:.0%} of every row's time; "
                          "profile value kept")
    before, _ = times(keys)
    after, labels = times({**keys, **fitted})
    params = [ParamFit(p, keys[p.key], fitted.get(p.key),
                       None if se is None or p.key not in fitted else float(se[free.index(p)]), held.get(p.key))
              for p in (eff_p, lat_p)]
    points, k = [], 0
    for pl in logs:
        for r in pl.log.rows:
            points.append(PointFit(r.time_s, float(before[k]), float(after[k]),
                                   {"log": pl.log, "row": r, "algorithm": labels[k]}))
            k += 1
    return ProfileFit("fabrics", name, params, points)


# --- accelerator fit (training runs) ------------------------------------------------------------


@dataclass(frozen=True)
class PreparedRun:
    """A measured run with what the forward model needs (built once)."""

    entry: RunEntry
    workload: Any  # search.Workload
    layout: dict[str, int]
    options: Any  # search.SearchOptions
    measured_s: float  # step time, from step_time_s or tflops_per_gpu
    model_flops_per_token: float  # model FLOPs (MFU convention), FLOP
    stack: Any = None  # stacks.StackRequest the run is priced on (None: the vendor default)

    @property
    def measured_tflops_per_gpu(self) -> float:
        r = self.entry.run
        return self.model_flops_per_token * r.global_batch * r.seq_len / (r.world * self.measured_s) / 1e12


@dataclass(frozen=True)
class Forward:
    """Prices runs of one SKU at candidate ``[efficiency]`` values (``build_sku`` + ``evaluate_one``)."""

    catalog: Any
    sku: str
    base_spec: Any
    fabrics: dict[tuple[str, str], Any]  # fitted fabric specs to use

    def hardware(self, values: dict[str, float], precision: str, stack: Any = None) -> Any:
        """The SKU at candidate ``values`` priced on ``stack`` (a ``stacks.StackRequest``; None: the vendor
        default): the values are read as the vendor default stack's (``stacks.stack_efficiency``)."""
        from mi400plan.hardware import build_sku

        specs = dict(self.fabrics)
        specs[("accelerators", self.sku)] = with_efficiency(self.base_spec, values)
        return build_sku(OverlayCatalog(self.catalog, specs), self.sku, precision, stack=stack).hw

    def step(self, run: PreparedRun, hw: Any) -> dict[str, float]:
        from mi400plan.search import evaluate_one

        r = run.entry.run
        return evaluate_one(run.layout, run.workload, hw, r.world, run.options)

    def steps(self, runs: Sequence[PreparedRun], values: dict[str, float]) -> np.ndarray:
        """Step times (s) of ``runs`` at ``values``: one vectorized ``search.step_time`` per group of runs
        sharing a workload and options (their layouts and GPU counts as rows), so pricing 1,000 runs of a
        few workloads costs a few calls, not 1,000 (the same model as ``step``, row by row)."""
        out = np.empty(len(runs))
        for g, t in self._priced(runs, values):
            out[g.rows] = np.asarray(t["step"], dtype=float).ravel()
        return out

    def step_terms(self, runs: Sequence[PreparedRun], values: dict[str, float]) -> list[dict[str, float]]:
        """Every step-time term (``search.step_time``'s keys) of each run at ``values``, as ``step`` gives
        them, priced group by group like ``steps``."""
        out: list[dict[str, float]] = [{} for _ in runs]
        for g, t in self._priced(runs, values):
            cols = {k: np.broadcast_to(np.asarray(v, dtype=float).ravel(), (len(g.rows),)) if np.size(v) == 1
                    else np.asarray(v, dtype=float).ravel() for k, v in t.items()}
            for j, i in enumerate(g.rows):
                out[int(i)] = {k: float(v[j]) for k, v in cols.items()}
        return out

    def _priced(self, runs: Sequence[PreparedRun], values: dict[str, float]) -> Any:
        from mi400plan.search import make_coll, step_time

        hws: dict[tuple[Any, ...], tuple[Any, Any]] = {}
        for g in _run_groups(runs):
            key = (g.precision, g.stack.key() if g.stack is not None else None)
            if key not in hws:
                hw = self.hardware(values, g.precision, g.stack)
                hws[key] = (hw, make_coll(hw))
            hw, coll = hws[key]
            yield g, step_time(g.cols, g.workload, hw, g.terms, g.options, coll)


@dataclass(frozen=True)
class _RunGroup:
    """Runs priced by one ``step_time`` call: same workload, options and precision."""

    rows: np.ndarray  # indices into the run list
    precision: str
    workload: Any
    options: Any
    terms: Any  # search.ModelTerms
    cols: dict[str, np.ndarray]  # the layouts as columns (dp, fold and split derived as evaluate_one does)
    stack: Any = None  # stacks.StackRequest the group is priced on


_GROUPS: dict[tuple[int, ...], tuple[Sequence[PreparedRun], list[_RunGroup]]] = {}


def _run_groups(runs: Sequence[PreparedRun]) -> list[_RunGroup]:
    """``runs`` grouped by (model, sequence, batch, recipe, options, precision, stack); built once per run list."""
    from mi400plan.search import fold_factor, model_terms, split_codes

    key = tuple(id(r) for r in runs)
    hit = _GROUPS.get(key)
    if hit is not None and hit[0] is runs:
        return hit[1]
    by: dict[tuple[Any, ...], list[int]] = {}
    for i, r in enumerate(runs):
        wl = r.workload
        by.setdefault((id(wl.model), wl.seq_len, wl.global_batch, repr(wl.recipe), r.options,
                       r.entry.run.precision, r.stack.key() if r.stack is not None else None), []).append(i)
    groups = []
    for idx in by.values():
        first = runs[idx[0]]
        wl = first.workload
        c: dict[str, Any] = {k: np.asarray([int(runs[i].layout[k]) for i in idx]) for k in first.layout}
        c["fold"] = fold_factor(c["tp"], c["cp"], c["ep"], c["etp"])
        c["dp"] = np.asarray([runs[i].entry.run.world for i in idx]) // (c["tp"] * c["cp"] * c["pp"])
        c["split"] = np.maximum(split_codes(wl.model, c, first.options), 0)
        groups.append(_RunGroup(np.asarray(idx), first.entry.run.precision, wl, first.options,
                                model_terms(wl.model, wl.counts, wl.seq_len, wl.recipe), c, first.stack))
    _GROUPS.clear()  # one run list at a time: the fit's
    _GROUPS[key] = (runs, groups)
    return groups


def sku_params(runs: Sequence[PreparedRun]) -> list[FitParam]:
    """``ACCELERATOR_PARAMS`` expanded for the precisions the runs use, in list order."""
    from mi400plan.lowp import recipe

    # Low-precision recipes (MXFP8, NVFP4, MXFP4) derive their ceiling from the per-tensor FP8 one
    # (``lowp.matmul_estimate``), so their runs refit ``matmul_fp8``.
    precisions = sorted({"fp8" if recipe(r.entry.run.precision) else r.entry.run.precision for r in runs})
    out: list[FitParam] = []
    for p in ACCELERATOR_PARAMS:
        if "{precision}" in p.key:
            out.extend(p.for_precision(x) for x in precisions)
        else:
            out.append(p)
    return out


def _profile_value(spec: Any, key: str) -> float | None:
    est = getattr(spec.efficiency, key, None)
    return est.nominal if est is not None and est.known else None


def _not_identified(weak: bool, free: list[FitParam]) -> str:
    why = (f"the step times move by less than {MIN_SENSITIVITY:.1%} with it" if weak else
           f"the runs do not separate it from {', '.join(p.key for p in free) or 'the other terms'} (vary the GEMM "
           "sizes: hidden size, TP, micro-batch, sequence)")
    return f"not identified: {why}; profile value kept"


def _max_iter(groups: int, free: int) -> int:
    """LM iterations within ``EVAL_BUDGET`` for ``groups`` distinct workloads and ``free`` parameters
    (each iteration prices the runs once, plus once per parameter for the Jacobian; 8 pricings come
    before the solver). At least 3."""
    return max(3, min(LM_MAX_ITER, (EVAL_BUDGET // max(groups, 1) - 8 - free) // (1 + free)))


def _fit_free(fwd: Forward, runs: Sequence[PreparedRun], free: list[FitParam], fixed: dict[str, float],
              start: dict[str, float], held: dict[str, str], notes: list[str]) -> tuple[dict[str, float], np.ndarray | None]:
    """Fit the ``free`` values (the others at ``fixed``), dropping the last one the runs cannot pin down
    until the rest are identified. Returns the fitted values and their standard errors."""
    meas = np.array([r.measured_s for r in runs])
    groups = len(_run_groups(runs))
    while free:
        def resid(x: np.ndarray, free: list[FitParam] = free) -> np.ndarray:
            return fwd.steps(runs, {**fixed, **{p.key: float(v) for p, v in zip(free, x)}}) / meas - 1.0

        scale = np.array([p.scale for p in free])
        cap = _max_iter(groups, len(free))
        sol = least_squares(resid, [start[p.key] for p in free], [p.lo for p in free], [p.hi for p in free], scale,
                            max_iter=cap)
        if sol.capped and cap < LM_MAX_ITER:
            notes.append(f"{fwd.sku}: the fit stopped after {cap} iterations, the cost bound for {groups} distinct "
                         "workloads; the values may not be converged (fewer distinct workloads fit longer)")
        weak = [p for j, p in enumerate(free)
                if float(np.max(np.abs(sol.jacobian[:, j]))) * max(abs(sol.x[j]), p.scale) < MIN_SENSITIVITY]
        if not weak and identified(sol.jacobian, scale):
            return {p.key: float(v) for p, v in zip(free, sol.x)}, std_errors(sol, scale)
        last = weak[-1] if weak else free[-1]
        free.remove(last)
        held[last.key] = _not_identified(bool(weak), free)
    return {}, None


def _moves_steps(fwd: Forward, runs: Sequence[PreparedRun], p: FitParam, values: dict[str, float],
                 steps: np.ndarray, meas: np.ndarray) -> bool:
    """Whether the runs' residuals (model ``steps`` at ``values`` over measured ``meas``) move with ``p``
    (the solver's sensitivity test, ``MIN_SENSITIVITY``, by a forward difference of 1 % of the value):
    a run that is not host-bound does not measure the host time, one that is host-bound does not
    measure the GEMM efficiency."""
    x0 = values[p.key]
    h = 0.01 * max(abs(x0), p.scale)
    x1 = x0 + h if x0 + h <= p.hi else x0 - h
    moved = (fwd.steps(runs, {**values, p.key: x1}) - steps) / meas
    return float(np.max(np.abs(moved))) / abs(x1 - x0) * max(abs(x0), p.scale) >= MIN_SENSITIVITY


def fit_accelerator(fwd: Forward, runs: Sequence[PreparedRun], max_params: int | None = None) -> ProfileFit:
    """Fit ``ACCELERATOR_PARAMS`` of one SKU to its runs (see the module docstring), at most
    ``max_params`` of them (``validate``'s cross-validation: 3 runs a parameter).

    A value the profile does not disclose is left to the step-time model's own rule until it is
    fitted (the fit starts it at the parameter's typical size)."""
    groups = len(_run_groups(runs))
    if groups > MAX_WORKLOADS:
        raise UsageError(f"{fwd.sku}: {groups} distinct workloads (model, sequence, batch, recipe, precision) among "
                         f"the runs: at most {MAX_WORKLOADS} per SKU, each is priced on its own at every step of the fit",
                         hint="calibrate on a representative subset; runs that differ only in layout or GPU count "
                         "share a workload and cost little")
    params = sku_params(runs)
    known = {p.key: v for p in params if (v := _profile_value(fwd.base_spec, p.key)) is not None}
    start = {p.key: known.get(p.key, p.scale) for p in params}
    before = fwd.steps(runs, known)
    for run, b in zip(runs, before):
        if not (np.isfinite(b) and b > 0):
            raise ProfileError("the step-time model gives no finite step time for this run", path=run.entry.path,
                               line=run.entry.line)
    meas = np.array([r.measured_s for r in runs])
    at_start = fwd.steps(runs, start)
    moving = [p for p in params if _moves_steps(fwd, runs, p, start, at_start, meas)]
    n_free = len(runs) if max_params is None else min(len(runs), max_params)
    free = moving[:n_free]
    held = {p.key: _not_identified(True, []) for p in params if p not in moving}
    held |= {p.key: f"not identified: {len(runs)} run(s) fit at most {n_free} parameter(s); profile value kept"
             for p in moving[n_free:]}
    notes: list[str] = []
    fitted, se = _fit_free(fwd, runs, free, known, start, held, notes)
    out_params = [
        ParamFit(p, known.get(p.key), fitted.get(p.key),
                 None if se is None or p.key not in fitted else float(se[free.index(p)]), held.get(p.key))
        for p in params
    ]
    after = fwd.steps(runs, {**known, **fitted})
    points = [PointFit(r.measured_s, float(b), float(a), {"run": r}) for r, b, a in zip(runs, before, after)]
    warnings = [f"{fwd.sku}: {p.key} is at its bound ({v:g}); the model cannot reach the measured times otherwise"
                for p in free if (v := fitted[p.key]) in (p.lo, p.hi)]
    return ProfileFit("accelerators", fwd.sku, out_params, points, warnings + notes)


# A fit is refused (never saved as measured) when it only matches the measurements with a value held at
# a bound of its parameter, or when its worst point is still off by more than MAX_ABS_RESIDUAL: the
# model cannot represent those measurements, and saving its values would pass a guess off as a
# measurement. 50 %: the planner's own validation sets stay within about 25 % (README, validation).
MAX_ABS_RESIDUAL = 0.5


def refusal(fit: ProfileFit) -> str | None:
    """Why ``fit`` must not be saved (a fitted value at its bound, a residual past MAX_ABS_RESIDUAL), or None."""
    bound = [f"{p.param.key} = {p.value:g} is at its bound" for p in fit.params
             if p.value is not None and p.value in (p.param.lo, p.param.hi)]
    worst = max((abs(pt.residual) for pt in fit.points), default=0.0)
    if bound:
        return f"{'; '.join(bound)}: the model reaches the measured times only there"
    if not np.isfinite(worst) or worst > MAX_ABS_RESIDUAL:
        return (f"its worst point is off by {worst:.0%} after fitting, beyond the {MAX_ABS_RESIDUAL:.0%} a fit "
                "may leave")
    return None


def measured_step(run: MeasuredRun, flops_per_token: float) -> float:
    """Step time (s) of a run: as measured, or from TFLOP/s per GPU: ``F tokens / (gpus x rate)``,
    ``F`` the model (or hardware) FLOP per token the planner counts for that run."""
    if run.step_time_s is not None:
        return run.step_time_s
    assert run.tflops_per_gpu is not None
    tokens = float(run.global_batch) * run.seq_len
    return flops_per_token * tokens / (run.world * run.tflops_per_gpu * 1e12)


__all__ = [
    "ACCELERATOR_PARAMS",
    "FABRIC_PARAMS",
    "NOT_FITTED",
    "FitParam",
    "Forward",
    "OverlayCatalog",
    "ParamFit",
    "PointFit",
    "PreparedRun",
    "ProfileFit",
    "fit_accelerator",
    "fit_fabric",
    "least_squares",
    "measured_step",
]
