"""``mi400plan validate --serve``: the serving model against the bundled published inference measurements.

Reads the InferenceX calibration points and the never-fitted validation results (``serve_validate``),
prices each at the stored calibration, and (``loso``) at the calibration refitted without its InferenceX
run; summarizes the signed errors by scope, stack and family.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import TYPE_CHECKING

from mi400plan.results.serve_validate import (ServeClosedLoop, ServePublishedRate, ServePublishedRateSummary,
                                              ServeValidateGroup, ServeValidateResult, ServeValidateRow,
                                              ServeValidateSource)
from mi400plan.serve_calibration import Measured, Point
from mi400plan.serve_percentiles import (ClosedLoopCase, PercentileCase, closed_loop_case, percentile_case,
                                         published_from_row, published_p99_ttft, summarize_errors)
from mi400plan.serve_validate import (INFERENCEX, VALIDATION, VALIDATION_SOURCES, Case, CaseResult, Pricer,
                                      case_results, closed_loop_stats, data_text, inferencex_cases, loso_predictions,
                                      own_key, read_rows, summarize, validation_case)

if TYPE_CHECKING:
    from mi400plan.profiles import Catalog

SOURCE_DEFINITION = ("one InferenceX GitHub Actions run (run_url without /attempts/N: one nightly's sweep of one "
                     "input/output length pair, every SKU in it), held out of every family/class/stack it has "
                     "points in; "
                     "validation rows are never fitted (source: the file's source column)")


def _published_rate(p: PercentileCase | None) -> ServePublishedRate | None:
    if p is None:
        return None
    pub, run, e = p.published, p.run, p.error
    t = run.ttft or {}
    return ServePublishedRate(
        system_samples_per_s=pub.samples_per_s, system_gpus=pub.system_gpus, rate_per_replica=p.rate,
        capacity_per_replica=run.capacity_rate, measured_ttft_p50_s=pub.ttft_p50_s, measured_ttft_p90_s=pub.ttft_p90_s,
        measured_ttft_p99_s=pub.ttft_p99_s, measured_tpot_p99_s=pub.tpot_p99_s, predicted_ttft_p50_s=t.get("p50"),
        predicted_ttft_p90_s=t.get("p90"), predicted_ttft_p99_s=t.get("p99"), predicted_tpot_p99_s=run.tpot_p99,
        ttft_p50_error=e["ttft_p50"], ttft_p90_error=e["ttft_p90"], ttft_p99_error=e["ttft_p99"],
        tpot_p99_error=e["tpot_p99"], over_capacity=run.over_capacity)


def published_rate_cases(cat: Catalog, lines: list[tuple[int, dict[str, str]]],
                         pricer: Pricer) -> dict[str, PercentileCase]:
    """The MLPerf Server rows with published percentiles, each simulated at its published rate on the
    hardware the rest of the validation prices it on (``Pricer.stored_calibration``), by case id."""
    out = {}
    for line, r in lines:
        pub = published_from_row(r, f"{VALIDATION}:{line}")
        if pub is None or r["kind"] != "slo_throughput":
            continue
        c = validation_case(cat, line, r)
        if isinstance(c.spec, Measured):
            out[c.id] = percentile_case(cat, c.spec, pricer.calibrated(c, pricer.stored_calibration(c)), pub,
                                        c.stack or None)
    return out


def closed_loop_cases(cat: Catalog, lines: list[tuple[int, dict[str, str]]], cases: list[Case],
                      pricer: Pricer) -> dict[str, ClosedLoopCase]:
    """The fitted InferenceX points with a published p99 TTFT, each point's closed loop simulated on the hardware
    the rest of the validation prices it on (``Pricer.stored_calibration``), by case id."""
    by_id = {c.id: c for c in cases}
    out = {}
    for line, r in lines:
        c = by_id.get(f"{INFERENCEX}:{line}")
        p99 = published_p99_ttft(r, f"{INFERENCEX}:{line}")
        if c is None or p99 is None or c.role != "fitted" or not isinstance(c.spec, Point):
            continue
        out[c.id] = closed_loop_case(cat, c.spec, pricer.calibrated(c, pricer.stored_calibration(c)), p99)
    return out


def _closed_loop(c: ClosedLoopCase | None) -> ServeClosedLoop | None:
    if c is None:
        return None
    return ServeClosedLoop(measured_ttft_p99_s=c.measured_p99, ttft_p99_error=c.error,
                           predicted_ttft_p99_s=None if c.run is None else c.run.ttft_p99,
                           predicted_ttft_p50_s=None if c.run is None else c.run.ttft_p50)


def _rate_summary(cases: dict[str, PercentileCase]) -> ServePublishedRateSummary | None:
    if not cases:
        return None
    s = summarize_errors([p.error["ttft_p99"] for p in cases.values()])
    return ServePublishedRateSummary(rows=len(cases), points=s.points, over_capacity=s.over_capacity, mean=s.mean,
                                     mean_abs=s.mean_abs, max_abs=s.max_abs)


def _row(r: CaseResult, basis: str | None, rate: PercentileCase | None = None,
         loop: ClosedLoopCase | None = None) -> ServeValidateRow:
    c, w, le = r.case, r.case.spec, r.loso_error or {}
    return ServeValidateRow(
        id=c.id, dataset=c.dataset, role=c.role, source=c.source, date=c.date, stack=c.stack, family=c.family,
        model_class=c.model_class, sku=w.sku, model=w.model, precision=w.precision, tp=w.tp, input_len=w.isl,
        output_len=w.osl, concurrency=w.conc, kind=c.kind, measured_tokens_per_s_per_gpu=c.measured["tput"],
        predicted_tokens_per_s_per_gpu=r.predicted["tput"], measured_ttft_s=c.measured["ttft"],
        predicted_ttft_s=r.predicted["ttft"], measured_tpot_s=c.measured["tpot"], predicted_tpot_s=r.predicted["tpot"],
        tput_error=r.error["tput"], ttft_error=r.error["ttft"], tpot_error=r.error["tpot"],
        loso_tput_error=le.get("tput"), loso_ttft_error=le.get("ttft"), loso_tpot_error=le.get("tpot"),
        loso_basis=basis, loso_same_generation=r.loso_same_generation, published_rate=_published_rate(rate),
        closed_loop=_closed_loop(loop))


def _notes(results: list[CaseResult], basis: dict[str, str]) -> list[str]:
    queued = sum(r.case.role == "queued" for r in results)
    fallback = sorted({basis[c.id] for c in (r.case for r in results)
                       if c.id in basis and not basis[c.id].startswith(f"{own_key(c)} refit")})
    out = [f"{queued} InferenceX points measured a queue (median TTFT above 2.5 s): never fitted, their own statistic"]
    out += [f"held out: {f}" for f in fallback]
    return out


def validate_serve(cat: Catalog, *, loso: bool = True) -> ServeValidateResult:
    """Price every bundled serving measurement, summarize the signed errors and (``loso``) cross-validate
    the calibration by InferenceX run."""
    ix = read_rows(data_text(INFERENCEX))
    val = read_rows(data_text(VALIDATION))
    cases = inferencex_cases(cat, ix) + [validation_case(cat, line, r) for line, r in val]
    pricer = Pricer(cat)
    stored = [pricer.stored(c) for c in cases]
    rates = published_rate_cases(cat, val, pricer)
    loops = closed_loop_cases(cat, ix, cases, pricer)
    t0 = time.perf_counter()
    cv = loso_predictions(cat, [r for _, r in ix], cases, pricer) if loso else None
    seconds = time.perf_counter() - t0
    results = case_results(cases, stored, cv)
    by_case = {c.id: c for c in cases}
    basis = {} if cv is None else cv.basis
    return ServeValidateResult(
        inputs=[f"<bundled>/{INFERENCEX}", f"<bundled>/{VALIDATION}"],
        rows=[_row(r, basis.get(r.case.id), rates.get(r.case.id), loops.get(r.case.id)) for r in results],
        groups=[ServeValidateGroup(**asdict(s)) for s in summarize(results) + closed_loop_stats(
            [(by_case[i], c.error) for i, c in loops.items()])],
        sources=[ServeValidateSource(key=k, title=t, date=d) for k, (t, d) in VALIDATION_SOURCES.items()],
        loso_sources=0 if cv is None else len(cv.sources), loso_refits=0 if cv is None else cv.refits,
        loso_seconds=round(seconds, 2), source_definition=SOURCE_DEFINITION, notes=_notes(results, basis),
        published_rate_summary=_rate_summary(rates))
