"""``mi400plan validate [RUNS]``: the step-time model against measured training runs.

Without ``RUNS`` the bundled runs (``mi400plan/data/train_validation.csv``) are reproduced as
``mi400plan.validate`` describes; a ``RUNS`` file in ``calibrate``'s runs format (TOML ``[[run]]``
tables or CSV) is read and prepared exactly as ``calibrate`` does. Every run is priced by
``calibrate``'s forward model at the profiles' values; leave-one-source-out refits the same
parameters ``calibrate`` fits (``calibrate.fit_accelerator``) without each source's runs.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mi400plan.calibrate import Forward, PreparedRun, fit_accelerator
from mi400plan.errors import UsageError
from mi400plan.measurements import MeasuredRun, RunEntry
from mi400plan.results.validate import GroupRow, ValidateResult, ValidateRow
from mi400plan.bands import BANDS_FILE
from mi400plan.validate import (
    BUNDLED_RUNS, GroupStat, RunMeta, bands_from, bands_json, bundled_text, loso_errors,
    measured_step_s, read_rows, row_meta, row_options, row_workload, signed_error, summarize, with_defaults,
)

MAX_RUNS = 500  # runs per validation (each is priced once per refit)
RUNS_PER_PARAM = 3  # a refitted parameter needs at least 3 runs (fewer: a rule, not a fit)


def _bundled_run(cat: Any, r: dict[str, str], line: int) -> tuple[RunMeta, PreparedRun] | None:
    """A bundled row as a ``calibrate`` run: its layout pinned and searched at the SKU's real capacity
    (the capacity check ``fit`` and ``sweep`` use), sequence parallelism and the embedding/loss split
    as the search picks them. None: no layout of the row is valid."""
    from mi400plan.hardware import build_sku
    from mi400plan.search import iter_rows, model_terms, search

    d = with_defaults(r)
    wl = row_workload(cat, r)
    hw = build_sku(cat, r["sku"], r["precision"], offload=int(d["offload_layers"]) > 0).hw
    for split in (False, True):
        opts = row_options(r, split)
        res = search(wl, hw, int(r["gpus"]), opts, top_k=1)
        if res.top["tp"].size:
            best = next(iter_rows(res.top))
            break
    else:
        return None
    layout = {k: int(best[k]) for k in ("tp", "pp", "vpp", "cp", "ep", "etp", "zero", "micro_batch", "recompute", "sp")}
    mr = MeasuredRun(name=r["id"], model=r["model"], sku=r["sku"], precision=r["precision"], seq_len=int(r["seq"]),
                     global_batch=int(r["gbs"]), tp=layout["tp"], pp=layout["pp"], cp=layout["cp"], ep=layout["ep"],
                     dp=int(best["dp"]), vpp=layout["vpp"], micro_batch=layout["micro_batch"], zero=layout["zero"],
                     step_time_s=measured_step_s(r))
    entry = RunEntry(mr, BUNDLED_RUNS, line)
    flops = model_terms(wl.model, wl.counts, wl.seq_len, wl.recipe).flops_model
    return row_meta(r, wl.model.moe is not None), PreparedRun(entry, wl, layout, opts, mr.step_time_s or 0.0, flops)


def _family(cat: Any, sku: str) -> str:
    spec = cat.get("accelerators", sku).spec
    return f"{spec.vendor} {(spec.architecture or spec.name).split(' (')[0]}"


def _user_runs(cat: Any, path: str) -> list[tuple[RunMeta, PreparedRun]]:
    """A user's runs file, prepared as ``calibrate`` prepares it; a run's ``source`` (default: the file) and
    ``stack`` group it."""
    from mi400plan.api.calibrate import _prepare
    from mi400plan.measurements import read_runs
    from mi400plan.profiles import read_text_file

    p, text = read_text_file(path, "runs file")
    out = []
    memo: dict[tuple[object, ...], object] = {}
    for entry in read_runs(p, text):
        sku, run = _prepare(cat, entry, memo)
        src = entry.run.source or str(p)
        meta = RunMeta(id=entry.run.name or entry.where, sku=sku, family=_family(cat, sku), stack=entry.run.stack,
                       moe=run.workload.model.moe is not None, source=src, source_title=src)
        out.append((meta, run))
    return out


class _Pricer:
    """Predicted step times through ``calibrate``'s forward model, at the profiles' values or refitted."""

    def __init__(self, cat: Any, runs: Sequence[PreparedRun]) -> None:
        self.cat, self.runs = cat, runs
        self.fwd: dict[str, Forward] = {}

    def forward(self, sku: str) -> Forward:
        if sku not in self.fwd:
            self.fwd[sku] = Forward(self.cat, sku, self.cat.get("accelerators", sku).spec, {})
        return self.fwd[sku]

    def predict(self, idx: Sequence[int], values: dict[str, dict[str, float]] | None = None) -> list[float]:
        out = []
        for i in idx:
            run = self.runs[i]
            sku = run.entry.run.sku
            out.append(float(self.forward(sku).steps([run], (values or {}).get(sku, {}))[0]))
        return out

    def refit(self, train: Sequence[int], test: Sequence[int]) -> list[float]:
        """Refit each test SKU's parameters on the training runs of that SKU; predict the test runs."""
        values: dict[str, dict[str, float]] = {}
        for sku in sorted({self.runs[i].entry.run.sku for i in test}):
            group = [self.runs[i] for i in train if self.runs[i].entry.run.sku == sku]
            if len(group) >= RUNS_PER_PARAM:  # fewer runs fit no parameter: the profile's values stay
                fit = fit_accelerator(self.forward(sku), group, max_params=len(group) // RUNS_PER_PARAM)
                values[sku] = {p.param.key: p.value for p in fit.params if p.value is not None}
        return self.predict(test, values)


def _groups(stats: list[GroupStat]) -> list[GroupRow]:
    return [GroupRow(group=s.group, name=s.name, runs=s.runs, mean=s.mean, mean_abs=s.mean_abs, max_abs=s.max_abs)
            for s in stats]


def validate(cat: Any, runs_file: str | None = None, *, loso: bool = True,
             write_bands: str | None = None) -> ValidateResult:
    """Price every run, summarize the signed errors and (``loso``) cross-validate by source."""
    if runs_file is None:
        rows = read_rows(bundled_text())
        made = [_bundled_run(cat, r, i + 2) for i, r in enumerate(rows)]
        skipped = [r["id"] for r, m in zip(rows, made) if m is None]
        pairs = [m for m in made if m is not None]
    else:
        pairs, skipped = _user_runs(cat, runs_file), []
    if len(pairs) > MAX_RUNS:
        raise UsageError(f"{len(pairs):,} runs: at most {MAX_RUNS:,} per validation")
    if not pairs:
        raise UsageError("no run to validate", hint="give a runs file in the calibrate format (mi400plan calibrate --help)")
    metas = [m for m, _ in pairs]
    pricer = _Pricer(cat, [p for _, p in pairs])
    predicted = pricer.predict(range(len(pairs)))
    errors = [signed_error(p.measured_s, s) for (_, p), s in zip(pairs, predicted)]
    t0 = time.perf_counter()
    loso_pred, sources = loso_errors(metas, pricer.refit) if loso else ([None] * len(pairs), [])
    seconds = time.perf_counter() - t0
    loso_err = [None if s is None else signed_error(p.measured_s, s) for (_, p), s in zip(pairs, loso_pred)]
    out_rows = [ValidateRow(id=m.id, sku=m.sku, family=m.family, stack=m.stack, kind="MoE" if m.moe else "dense",
                            source=m.source_title, measured_s=p.measured_s, predicted_s=s, error=e, loso_error=le)
                for (m, p), s, e, le in zip(pairs, predicted, errors, loso_err)]
    cv = [(m, e) for m, e in zip(metas, loso_err) if e is not None]
    written = None
    if write_bands is not None:
        if not cv:
            raise UsageError("--write-bands needs the leave-one-source-out errors of at least two sources")
        target = Path(write_bands) / BANDS_FILE if Path(write_bands).is_dir() else Path(write_bands)
        try:
            target.write_text(bands_json(bands_from(cv)), encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"--write-bands: cannot write {target}: {exc.strerror or exc}") from None
        written = str(target)
    return ValidateResult(
        inputs=[runs_file or f"<bundled>/{BUNDLED_RUNS}"], rows=out_rows, skipped=skipped,
        groups=_groups(summarize(list(zip(metas, errors)))), loso_groups=_groups(summarize(cv)),
        loso_sources=len(sources), loso_seconds=round(seconds, 2), bands_written=written,
    )
