"""The serving model against published inference measurements: signed errors on output tokens/s per GPU,
TTFT and TPOT, by serving stack and SKU family, with leave-one-source-out cross-validation of the
InferenceX calibration (``serve_calibration``). Every case is priced the way ``serve --stack`` prices it:
on the serving stack profile (``profiles/serving``) it was measured with, at
``serve_calibration.stack_calibration_for`` (the stack's own fit for the family and class, else the
family's fit standing in for it).

Sign convention (every metric): ``error`` is the prediction's relative error, signed so that + means the
model is optimistic: ``predicted / measured - 1`` for tokens/s (+ = predicts more throughput than was
measured) and ``1 - predicted / measured`` for TTFT and TPOT (+ = predicts a shorter latency). So
``|error| = |predicted - measured| / measured`` for every metric, the measure the calibration's stored errors
(``FamilyCalibration.tput_mean_err``, ``tpot_mean_err``, ...) use.

Data (bundled in the wheel as ``mi400plan/data/``; in a source checkout ``tests/data/``):

* ``serve_inferencex.csv``: SemiAnalysis InferenceX points, the calibration data. Each row's stack is the
  profile whose ``[inferencex] framework`` is its ``framework`` label on the family's vendor
  (``serve_calibration.row_stack``: ``trt`` -> ``trtllm``, ``vllm`` on AMD -> ``rocm-vllm``). Each is a
  role: ``fitted`` (inside its family/class's window and steady state: what ``fit_family`` fits),
  ``older`` (runs before the window: older software, never fitted) or ``queued`` (a measured queue,
  ``serve_calibration.queued``: more clients than the KV cache admits; never fitted, predicted with the
  admission wait of ``serve_admission.closed_loop`` and summarised in a scope of their own). InferenceX publishes total (input + output) tokens/s per GPU; the rows' output tokens/s per
  GPU is that times ``osl / (isl + osl)``, the output share at the run's lengths, which is also the model's
  (``serve.evaluate``), so its relative error is the calibration's.
* ``serve_validation.csv``: MLPerf Inference, vendors' tables and other published results, never fitted:
  predicted at the stored calibration of the stack each source measured with
  (``serve_calibration.VALIDATION_STACKS``) by ``predict_measured``, TTFT and TPOT where the source
  publishes them (means; InferenceX's are medians). Its MLPerf Server rows also carry the published percentiles
  and request rate, which ``serve_percentiles`` sets beside the request simulation at that rate.

Leave-one-source-out (LOSO). A source of the InferenceX file is one GitHub Actions run of the InferenceX
benchmark (its ``run_url`` without the ``/attempts/N`` suffix: one nightly's sweep of one input/output
length pair, every SKU of every family in it). Holding a run out, the rows are grouped again without it
(``calibration_groups`` by family/class and by family/class/stack: each window is recomputed, so holding
out a group's newest run brings older runs into it), and each of the run's in-window points is predicted
at the calibration ``serve`` would then choose (``serve_calibration.choose_calibration``, the rule of
``stack_calibration_for``) over the refits without the run: its stack's own (``fit_family(...,
stack=)``) where ``stack_fit_allowed`` still holds; else the family's fit for the class standing in for
the stack; else the family's other class; with none, the profile's values. A validation-file row is never
fitted, so its error at the stored calibration is already held out; its source is its ``source`` column.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from mi400plan.errors import PlannerError
from mi400plan.serve_calibration import (RECENT_DAYS, VALIDATION_STACKS, FamilyCalibration, Measured, Point,
                                         PointGroup, apply, calibration_groups, calibration_keys, choose_calibration,
                                         family_of, fit_family, model_class, point_from_row, predict, predict_measured,
                                         queued, row_stack, stack_calibration_for, stack_fit_allowed)

if TYPE_CHECKING:
    from mi400plan.profiles import Catalog
    from mi400plan.serve import ServeHardware

INFERENCEX = "serve_inferencex.csv"
VALIDATION = "serve_validation.csv"
METRICS = ("tput", "ttft", "tpot")  # output tokens/s per GPU, time to first token, time per output token

# The validation sources (``serve_validation.csv``'s ``source`` column): title and date, from the file's header.
VALIDATION_SOURCES = {
    "O1": ("Oracle Cloud Infrastructure blog, Serving Llama 3.1 405B with AMD MI300X GPUs", "2024"),
    "D1": ("dstack, DeepSeek R1 inference performance: MI300X vs. H200", "2025-03-18"),
    "T1": ("NVIDIA TensorRT-LLM documentation, Performance Overview (TensorRT-LLM 1.x)", "2025; read 2026-11-25"),
    "A1": ("AMD ROCm performance results, vLLM container rocm7.0.0_vllm_0.10.2", "2025-10-06"),
    "M1": ("MLCommons MLPerf Inference v5.1 Datacenter, Llama 2 70B", "2025-09-09"),
    "M2": ("MLCommons MLPerf Inference v5.1 Datacenter, DeepSeek-R1", "2025-09-09"),
}


@dataclass(frozen=True)
class Case:
    """One published measurement and how it is grouped. ``measured``: output tokens/s per GPU (``tput``),
    TTFT and TPOT in seconds (None where the source does not publish it)."""

    id: str  # "<file>:<line>" (the line of the bundled file)
    dataset: str  # "inferencex" or "validation"
    role: str  # fitted, older, queued (InferenceX) or validation
    source: str  # InferenceX: the run's number; validation: the source key
    date: str
    stack: str  # the serving stack profile (profiles/serving) it was measured on; "": none known
    family: str  # calibration family (serve_calibration.FAMILY_KEYS)
    model_class: str
    kind: str  # "serving" (InferenceX) or the validation file's kind
    measured: dict[str, float | None]
    spec: Point | Measured  # the workload as served (SKU, model, weight format, TP, lengths, concurrency)


@dataclass(frozen=True)
class CaseResult:
    case: Case
    predicted: dict[str, float | None]  # at the stored calibration
    error: dict[str, float | None]
    loso_predicted: dict[str, float | None] | None = None  # at the refit without the case's source
    loso_error: dict[str, float | None] | None = None
    loso_same_generation: bool | None = None  # the refit is of the case's software generation (``Refitter.fit``)


def signed_error(metric: str, measured: float | None, predicted: float | None) -> float | None:
    """The module docstring's sign convention: + = optimistic (more tokens/s, shorter latency)."""
    if measured is None or predicted is None:
        return None
    return predicted / measured - 1.0 if metric == "tput" else 1.0 - predicted / measured


def errors_of(measured: dict[str, float | None], predicted: dict[str, float | None]) -> dict[str, float | None]:
    return {k: signed_error(k, measured.get(k), predicted.get(k)) for k in METRICS}


# --- the bundled files ---------------------------------------------------------------------------------


def data_text(name: str) -> str:
    """A bundled serving data file: ``mi400plan/data/NAME`` in an installed package (the wheel maps
    ``tests/data`` files there), or ``tests/data/NAME`` when the source tree runs in place."""
    here = Path(__file__).parent
    checkout = (here.parent / "pyproject.toml").is_file()  # the source tree, where the wheel's map is not applied
    for p in (here / "data" / name, *([here.parent / "tests" / "data" / name] if checkout else [])):
        if p.is_file():
            return p.read_text(encoding="utf-8")
    from importlib import resources

    try:
        return resources.files("mi400plan").joinpath("data", name).read_text(encoding="utf-8")
    except OSError as exc:
        raise PlannerError(f"the bundled serving data file {name} cannot be read: {exc}",
                           hint="reinstall mi400plan (the wheel ships it as mi400plan/data/" + name + ")") from None


def read_rows(text: str) -> list[tuple[int, dict[str, str]]]:
    """``(line, row)`` of a bundled CSV whose ``#`` lines are comments (line: 1-based, in the file)."""
    lines = text.splitlines()
    data = [(i + 1, s) for i, s in enumerate(lines) if s.strip() and not s.startswith("#")]
    if not data:
        return []
    reader = csv.DictReader(io.StringIO("\n".join(s for _, s in data)))
    return [(line, row) for (line, _), row in zip(data[1:], reader)]


def run_id(url: str) -> str:
    """An InferenceX run's number from its GitHub Actions URL (``.../actions/runs/N[/attempts/K]``): one
    source; attempts of one run are the same source."""
    m = re.search(r"/runs/(\d+)", url)
    return m.group(1) if m else url


# --- cases ---------------------------------------------------------------------------------------------


def inferencex_cases(cat: Catalog, rows: Sequence[tuple[int, dict[str, str]]]) -> list[Case]:
    """The InferenceX rows as cases, each with its role in the calibration (``calibration_groups``) and the
    serving stack profile its ``framework`` label names (``serve_calibration.row_stack``)."""
    groups = calibration_groups(cat, [r for _, r in rows])
    out = []
    for line, r in rows:
        p = point_from_row(r, row_stack(cat, r))
        cls = model_class(cat.get("models", p.model).spec)
        role = ("older" if date.fromisoformat(r["date"]) < groups[f"{r['family']}/{cls}"].cut
                else "queued" if queued(p) else "fitted")
        share = p.osl / (p.isl + p.osl)
        out.append(Case(f"{INFERENCEX}:{line}", "inferencex", role, run_id(r["run_url"]), r["date"],
                        row_stack(cat, r), r["family"], cls, "serving",
                        {"tput": p.tput_per_gpu * share, "ttft": p.ttft_s, "tpot": p.tpot_s}, p))
    return out


def measured_from_row(r: dict[str, str]) -> Measured:
    """One row of ``serve_validation.csv`` (strings, as ``csv.DictReader`` gives them). ``outputs``, where
    given, names the MLPerf Inference benchmark whose dataset's output lengths the run generated: the row's
    mean ``osl`` with that histogram's spread (``LengthDist.cv2``, so the sequences in flight are length-biased,
    ``serve.decode_context``); empty: every request ``osl`` tokens."""
    from mi400plan.serve_sim import benchmark_named

    def opt(k: str) -> float | None:
        return float(r[k]) if r.get(k) else None

    out = benchmark_named(r["outputs"]).output if r.get("outputs") else None

    return Measured(r["source"], r["sku"], r["model"], r["precision"], r["kv"], int(r["tp"]), r["kind"], int(r["isl"]),
                    int(r["osl"]), int(r["conc"]), float(r["output_tps"]), opt("tpot_s"), opt("ttft_s"),
                    r["dpa"] == "1", opt("tpot_slo_s"), opt("ttft_slo_s"),
                    int(r["prefill_tokens"]) if r.get("prefill_tokens") else None,
                    int(r["prefill_prompts"]) if r.get("prefill_prompts") else None,
                    int(r["max_seqs"]) if r.get("max_seqs") else None, out.cv2 if out is not None else 0.0,
                    *(int(r[k]) if r.get(k) else None for k in ("max_num_tokens", "adp_wait_iters",
                                                                "adp_timeout_iters")))


def validation_case(cat: Catalog, line: int, r: dict[str, str]) -> Case:
    """A row of ``serve_validation.csv`` as a case, on the serving stack its source measured with
    (``serve_calibration.VALIDATION_STACKS``; a ``stack`` column, where present, names the profile)."""
    m = measured_from_row(r)
    acc = cat.get("accelerators", m.sku).spec
    stack = r.get("stack") or VALIDATION_STACKS.get((m.source, acc.vendor), "")
    when = VALIDATION_SOURCES.get(m.source, ("", ""))[1]
    return Case(f"{VALIDATION}:{line}", "validation", "validation", m.source, when, stack,
                family_of(acc.architecture) or "uncalibrated", model_class(cat.get("models", m.model).spec), m.kind,
                {"tput": m.output_tps / m.tp, "ttft": m.ttft_s, "tpot": m.tpot_s}, m)


# --- pricing -------------------------------------------------------------------------------------------


class Pricer:
    """The model's output tokens/s per GPU, TTFT and TPOT of a case at a calibration (None: the profile's
    values), on the SKU's nominal serving hardware (``hardware.serve_hardware``, uncalibrated, then
    ``serve_calibration.apply`` at the case's compute precision, as ``serve`` applies it)."""

    def __init__(self, cat: Catalog) -> None:
        self.cat = cat
        self.base: dict[tuple[str, str], ServeHardware] = {}

    def hardware(self, sku: str, precision: str) -> ServeHardware:
        if (sku, precision) not in self.base:
            from mi400plan.hardware import serve_hardware

            self.base[(sku, precision)] = serve_hardware(self.cat, sku, precision, "nominal", matmul=None, hbm=None,
                                                         model_class="dense", calibrated=False)[0]
        return self.base[(sku, precision)]

    def bases(self, points: Sequence[Point]) -> dict[tuple[str, str], ServeHardware]:
        """``fit_family``'s ``base``: (SKU, weight format) -> nominal uncalibrated hardware."""
        return {(p.sku, p.precision): self.hardware(p.sku, p.precision) for p in points}

    def calibrated(self, case: Case, cal: FamilyCalibration | None) -> ServeHardware:
        """The case's SKU at calibration ``cal`` (None: the profile's values), at its compute precision."""
        from mi400plan.serve import COMPUTE_PRECISION

        s = case.spec
        hw = self.hardware(s.sku, s.precision)
        return hw if cal is None else apply(hw, cal, "nominal", COMPUTE_PRECISION[s.precision])

    def stored_calibration(self, case: Case) -> FamilyCalibration | None:
        """The stored calibration ``serve --stack`` uses for the case (``serve_calibration.stack_calibration_for``)."""
        arch = self.cat.get("accelerators", case.spec.sku).spec.architecture
        return stack_calibration_for(arch, case.model_class, case.stack or None)

    def price(self, case: Case, cal: FamilyCalibration | None) -> dict[str, float | None]:
        s = case.spec
        hw = self.calibrated(case, cal)
        if isinstance(s, Point):
            pr = predict(self.cat, s, hw)
            return {"tput": float(pr["tput"]) * s.osl / (s.isl + s.osl), "ttft": float(pr["ttft"]),
                    "tpot": float(pr["tpot"])}
        m = predict_measured(self.cat, s, hw, case.stack or None)
        return {"tput": m["output_tps"] / s.tp, "ttft": m["ttft"] if s.ttft_s is not None else None,
                "tpot": m["tpot"] if s.tpot_s is not None else None}

    def stored(self, case: Case) -> dict[str, float | None]:
        """At the stored calibration ``serve --stack`` uses for the case's SKU, model class and serving stack
        (``serve_calibration.stack_calibration_for``)."""
        return self.price(case, self.stored_calibration(case))


# --- leave-one-source-out -------------------------------------------------------------------------------


def own_key(case: Case) -> str:
    """The calibration ``serve`` prefers for the case: its stack's own fit for its family and class
    (``serve_calibration.calibration_keys``; the family's fit for a case with no stack)."""
    return calibration_keys(case.family, case.model_class, case.stack or None)[0]


class Refitter:
    """The calibration ``serve`` would use for a case, refitted without a held-out run: a ``fit_family`` per
    distinct set of fitted points, each fitted once."""

    def __init__(self, cat: Catalog, pricer: Pricer) -> None:
        self.cat, self.pricer = cat, pricer
        self.memo: dict[tuple[str, tuple[Point, ...]], FamilyCalibration] = {}

    def _refit(self, key: str, g: PointGroup | None) -> FamilyCalibration | None:
        """``key``'s refit on group ``g``: a stack's (``family/class/stack``) where ``stack_fit_allowed``, a
        family's (``family/class``) where it has a fitted point; None otherwise (as the stored tables lack it)."""
        stack = key.split("/")[2] if key.count("/") == 2 else ""
        if g is None or not (stack_fit_allowed(g.fitted) if stack else g.fitted):
            return None
        memo = (key, tuple(g.fitted))
        if memo not in self.memo:
            self.memo[memo] = fit_family(self.cat, g.family, g.model_class, g.fitted, self.pricer.bases(g.fitted),
                                         stack=stack)
        return self.memo[memo]

    def fit(self, groups: dict[str, PointGroup], stack_groups: dict[str, PointGroup],
            case: Case) -> tuple[FamilyCalibration | None, str, bool]:
        """The calibration ``serve`` would price ``case`` with had the rows been ``groups`` (by family/class)
        and ``stack_groups`` (by family/class/stack): ``serve_calibration.choose_calibration`` over the refits
        (its stack's own where ``stack_fit_allowed``, else the family's fit standing in, else the family's
        other class; None: the profile's values). With it, what priced the case, in words, and whether that
        is the case's software generation: a refit on points of the case's own stack and class only (its
        stack's own, or a family fit whose points are all that stack's) whose newest run lies within
        ``RECENT_DAYS`` of the case's (the window the calibration itself treats as one generation)."""
        used: list[tuple[str, PointGroup]] = []

        def lookup(key: str) -> FamilyCalibration | None:
            g = (stack_groups if key.count("/") == 2 else groups).get(key)
            cal = self._refit(key, g)
            if cal is not None and g is not None:
                used.append((key, g))
            return cal

        cal = choose_calibration(case.family, case.model_class, case.stack or None, lookup)
        if cal is None:
            return None, f"no {case.family} point left: the profile's values", False
        key, g = used[-1]
        own = own_key(case)
        basis = f"{key} refit on {len(g.fitted)} points, {g.dates[0]}..{g.dates[1]}"
        if key != own:
            basis += f", standing in for {own} (too few of its points left to refit it)"
        mine = stack_groups.get(own) if own.count("/") == 2 else groups.get(own)
        own_points = key == own or (mine is not None and set(g.fitted) == set(mine.fitted))
        same = own_points and abs((date.fromisoformat(case.date) - date.fromisoformat(g.dates[1])).days) <= RECENT_DAYS
        return cal, basis, same

    @property
    def fits(self) -> int:
        return len(self.memo)


def loso_sources(cases: Sequence[Case]) -> list[str]:
    """The InferenceX runs held out in turn: those with a point inside its group's window (an older run
    is never fitted: its error at the stored calibration is already held out)."""
    return sorted({c.source for c in cases if c.dataset == "inferencex" and c.role != "older"})


@dataclass(frozen=True)
class Loso:
    """Leave-one-source-out predictions: by case id, the prediction and what priced it (``Refitter.fit``)."""

    predicted: dict[str, dict[str, float | None]]
    basis: dict[str, str]
    same_generation: dict[str, bool]  # the refit is of the held-out run's software generation (``Refitter.fit``)
    sources: list[str]  # the runs held out in turn
    refits: int  # distinct calibrations fitted


def loso_predictions(cat: Catalog, rows: Sequence[dict[str, str]], cases: Sequence[Case], pricer: Pricer,
                     sources: Sequence[str] | None = None) -> Loso:
    """Each in-window InferenceX case predicted at the calibration refitted without its run (the module
    docstring's LOSO); ``sources``: the runs to hold out (default :func:`loso_sources`)."""
    refit = Refitter(cat, pricer)
    out = Loso({}, {}, {}, list(loso_sources(cases) if sources is None else sources), 0)
    for s in out.sources:
        kept = [r for r in rows if run_id(r["run_url"]) != s]
        groups, stack_groups = calibration_groups(cat, kept), calibration_groups(cat, kept, by_stack=True)
        for c in cases:
            if c.dataset == "inferencex" and c.source == s and c.role != "older":
                cal, out.basis[c.id], out.same_generation[c.id] = refit.fit(groups, stack_groups, c)
                out.predicted[c.id] = pricer.price(c, cal)
    return Loso(out.predicted, out.basis, out.same_generation, out.sources, refit.fits)


def case_results(cases: Sequence[Case], stored: Sequence[dict[str, float | None]],
                 loso: Loso | None) -> list[CaseResult]:
    """Each case with its predictions and signed errors (stored calibration; LOSO where it was held out)."""
    out = []
    for c, p in zip(cases, stored):
        lp = None if loso is None else loso.predicted.get(c.id)
        same = None if loso is None else loso.same_generation.get(c.id)
        out.append(CaseResult(c, p, errors_of(c.measured, p), lp, None if lp is None else errors_of(c.measured, lp),
                              same))
    return out


# --- statistics -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stat:
    """Signed errors of one metric over one group of cases (fractions)."""

    scope: str  # SCOPES, or closed-loop (:func:`closed_loop_stats`)
    by: str  # all, stack, family, stack/family or source
    name: str
    metric: str  # tput, ttft or tpot (closed-loop: ttft_p99)
    points: int
    mean: float
    mean_abs: float
    max_abs: float


SCOPES = ("in-sample", "loso", "loso-same-generation", "older", "queued", "validation")


def _scope_errors(scope: str, r: CaseResult) -> dict[str, float | None] | None:
    """The errors a case contributes to ``scope`` (None: none); queued points (never fitted) only to their own."""
    role = r.case.role
    if scope == "in-sample":
        return r.error if role == "fitted" else None
    if scope == "loso":
        return r.loso_error if role == "fitted" else None
    if scope == "loso-same-generation":
        return r.loso_error if role == "fitted" and r.loso_same_generation else None
    return r.error if role == (scope if scope in ("older", "queued") else "validation") else None


GROUPINGS: tuple[tuple[str, Callable[[Case], str]], ...] = (
    ("all", lambda c: "all"), ("stack", lambda c: c.stack), ("family", lambda c: c.family),
    ("stack/family", lambda c: f"{c.stack} {c.family}"), ("source", lambda c: c.source))


def _group_stats(scope: str, items: Sequence[tuple[Case, dict[str, float | None]]], metrics: Sequence[str],
                 groupings: Sequence[tuple[str, Callable[[Case], str]]]) -> list[Stat]:
    """Signed mean, mean |error| and max |error| of each of ``metrics`` over ``items`` (a case and its errors;
    None: none for that metric), per grouping and group name."""
    out: list[Stat] = []
    for by, key in groupings:
        for name in sorted({key(c) for c, _ in items}):
            for metric in metrics:
                v = np.array([e[metric] for c, e in items if key(c) == name and e[metric] is not None])
                if v.size:
                    out.append(Stat(scope, by, name, metric, int(v.size), float(v.mean()), float(np.abs(v).mean()),
                                    float(np.abs(v).max())))
    return out


def closed_loop_stats(errors: Sequence[tuple[Case, float | None]]) -> list[Stat]:
    """The InferenceX points' p99 TTFT against their simulated closed loops (``serve_percentiles.closed_loop_case``;
    scope ``closed-loop``, metric ``ttft_p99``), per grouping but by source (one run is one workload); a point
    the simulation cannot run is left out."""
    return _group_stats("closed-loop", [(c, {"ttft_p99": e}) for c, e in errors], ("ttft_p99",), GROUPINGS[:-1])


def summarize(results: Sequence[CaseResult]) -> list[Stat]:
    """Signed mean, mean |error| and max |error| of each metric, per scope (``SCOPES``) and grouping
    (``GROUPINGS``; by source for the validation file only: an InferenceX run is one workload)."""
    out: list[Stat] = []
    for scope in SCOPES:
        items = [(r.case, e) for r in results if (e := _scope_errors(scope, r)) is not None]
        out += _group_stats(scope, items, METRICS, GROUPINGS if scope == "validation" else GROUPINGS[:-1])
    return out
