"""``calibrate``: fitted efficiencies from a user's own training runs and nccl-tests logs.

Files ending in ``.toml`` or ``.csv`` hold training runs (``mi400plan.measurements``); any other file
is read as nccl-tests output. The fits are ``mi400plan.calibrate``'s. With ``save``, the fitted
values go into user profiles (``accelerators/<sku>.toml``, ``fabrics/<fabric>.toml`` under ``save``):
a copy of the profile in use with the fitted keys replaced (status ``measured``, a ``[sources]``
entry naming the files and the date), which ``fit``/``sweep``/``serve``/``comm --profiles DIR``
then read instead of the bundled one.
"""

from __future__ import annotations

import datetime
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mi400plan import comms
from mi400plan.calibrate import (
    Forward, PlacedLog, PreparedRun, ProfileFit, fit_accelerator, fit_fabric, fit_fabric_placed, measured_step,
    with_fabric,
)
from mi400plan.errors import PlannerError, ProfileError, UsageError
from mi400plan.measurements import NcclLog, RunEntry, classify, read_nccl_log, read_runs
from mi400plan.results.calibrate import (
    CalibrateResult, ExplainTerm, FitSummary, FittedParam, PointRow, RunExplain,
)

MAX_FILES = 256
MAX_RUNS = 1000  # each run is priced some 30 times by the fit (about 15 ms each)


@dataclass
class _Inputs:
    runs: list[RunEntry]
    logs: list[NcclLog]


def _read(files: list[str], op: str | None) -> _Inputs:
    from mi400plan.profiles import read_text_file

    runs: list[RunEntry] = []
    logs: list[NcclLog] = []
    for f in files:
        path, text = read_text_file(f, "measurement file")
        if classify(path, text) == "runs":
            runs.extend(read_runs(path, text))
        else:
            logs.append(read_nccl_log(path, text, op))
    if len(runs) > MAX_RUNS:
        raise UsageError(f"{len(runs):,} training runs: at most {MAX_RUNS:,} per calibration",
                         hint="calibrate on a representative subset (vary model size, TP, micro-batch, sequence)")
    return _Inputs(runs, logs)


def _single_tier(log: NcclLog) -> bool:
    return log.hosts == 1 or log.ranks_per_host == 1


def _log_fabric(cat: Any, log: NcclLog, sku: str | None, fabric: str | None) -> Any:
    """The fabric profile an nccl-tests log measured: ``fabric``, or the SKU's scale-up fabric (one
    host) or scale-out fabric (several hosts)."""
    if fabric is not None:
        fab = cat.get("fabrics", fabric).spec
    elif sku is not None:
        acc = cat.get("accelerators", sku).spec
        name = acc.interconnect.scale_up_fabric if log.hosts == 1 else acc.interconnect.scale_out_fabric
        if not name:
            raise ProfileError(f"{acc.name} names no {'scale-up' if log.hosts == 1 else 'scale-out'} fabric",
                               path=log.path)
        fab = cat.get("fabrics", name).spec
    else:
        raise UsageError("nccl-tests logs need --sku (its scale-up or scale-out fabric, by the hosts in the log) "
                         "or --fabric")
    dom = int(fab.domain_size.nominal) if fab.domain_size.known else None
    if fab.tier == "scale_up" and dom is not None and log.ranks > dom:
        raise ProfileError(f"{log.ranks} ranks, more than the {dom} GPUs of {fab.name}'s scale-up domain",
                           path=log.path, hint="give --fabric with the fabric this test ran on")
    return fab


def _host_tier(cat: Any, log: NcclLog, sku: str | None, fitted: dict[str, Any]) -> comms.TierParams:
    """The scale-up tier inside each host of a log that crosses hosts with several GPUs each."""
    if sku is None:
        raise UsageError(f"{log.path}: {log.ranks} ranks on {log.hosts} hosts cross the scale-up fabric too; give "
                         "--sku for it")
    acc = cat.get("accelerators", sku).spec
    fab = fitted.get(acc.interconnect.scale_up_fabric) or cat.get("fabrics", acc.interconnect.scale_up_fabric).spec
    tier = comms.TierParams.from_fabric(fab, "nominal")
    if log.ranks_per_host > tier.domain_size or not log.even:
        raise ProfileError(f"{log.ranks} ranks on {log.hosts} hosts do not fill {fab.name}'s domains of "
                           f"{tier.domain_size} evenly", path=log.path)
    return replace(tier, domain_size=log.ranks_per_host)


def _fabric_fits(cat: Any, logs: list[NcclLog], sku: str | None, fabric: str | None,
                 algo: str | None) -> tuple[list[ProfileFit], dict[str, Any]]:
    """Single-tier logs by least squares per fabric; a scale-out fabric with logs that cross hosts with
    several GPUs each is fitted over all its logs through the two-tier model, after the scale-up fits."""
    by_fab: dict[str, list[NcclLog]] = defaultdict(list)
    specs: dict[str, Any] = {}
    for log in logs:
        fab = _log_fabric(cat, log, sku, fabric)
        if fab.tier == "scale_up" and not _single_tier(log):
            raise ProfileError(f"{log.ranks} ranks on {log.hosts} hosts: {fab.name} is a scale-up fabric",
                               path=log.path, hint="give --fabric with the scale-out fabric between the hosts")
        by_fab[fab.name].append(log)
        specs[fab.name] = fab
    two_tier = {n for n, group in by_fab.items() if not all(_single_tier(g) for g in group)}
    fits = [fit_fabric(n, group, comms.TierParams.from_fabric(specs[n], "nominal"), algo)
            for n, group in by_fab.items() if n not in two_tier]
    fitted = {f.name: with_fabric(specs[f.name], f.fitted_values()) for f in fits}
    for n in two_tier:
        placed = [PlacedLog(g, None if _single_tier(g) else _host_tier(cat, g, sku, fitted)) for g in by_fab[n]]
        fits.append(fit_fabric_placed(n, placed, comms.TierParams.from_fabric(specs[n], "nominal"), algo))
    return fits, specs


def _with_mtp(spec: Any, mtp_layers: int) -> tuple[Any, Any]:
    """The model a run trains, and its counts: each multi-token-prediction module one more layer (its
    projection and output-head pass are the recipe's ``mtp_layers``, ``search.mtp_head_seconds``)."""
    from mi400plan.params import count_params

    if mtp_layers:
        spec = spec.model_copy(update={"num_layers": spec.num_layers + mtp_layers})
    return spec, count_params(spec)


def _prepare(cat: Any, entry: RunEntry, memo: dict[tuple[Any, ...], Any],
             stack: str | None = None) -> tuple[str, PreparedRun]:
    """One run checked and made ready for the forward model; ``memo`` shares the SKU builds and model
    terms between runs (a 1,000-run file of a few workloads builds each once). The run is priced on the
    stack profile its ``stack`` names, else ``stack`` (calibrate --stack), else its vendor default."""
    from mi400plan.finetune import check_lora, lora_of
    from mi400plan.hardware import build_sku
    from mi400plan.stacks import known_stack
    from mi400plan.search import SearchOptions, Workload, evaluate_one, layout_violations, model_terms
    from mi400plan.specs.layout import RECOMPUTE_CODES

    r = entry.run
    model = r.model
    near = Path(entry.path).parent / model
    if not Path(model).is_absolute() and ("/" in model or model.endswith((".toml", ".json"))) and near.exists():
        model = str(near)
    spec = cat.get("models", model).spec
    sku = cat.get("accelerators", r.sku).spec.name
    # an undisclosed peak (or host link, when the run offloads activations) stops here, naming the run
    request = r.stack_request(known_stack(cat, r.stack) or stack)
    base_hw = _memo(memo, ("hw", sku, r.precision, r.offload_layers > 0, request.key()),
                    lambda: build_sku(cat, sku, r.precision, offload=r.offload_layers > 0, stack=request).hw)
    doc = r.doc_length
    if doc and ("/" in doc or doc.lower().endswith(".csv")) and not Path(doc).is_absolute():
        doc = str(Path(entry.path).parent / doc)  # a histogram file is read from the runs file's folder
    topts = r.train_options().merged(doc_length=doc)
    try:  # a LoRA rank without finetune = "lora", adapters the model cannot have, or bad packing name the run
        recipe = topts.train_recipe()
        check_lora(spec, lora_of(recipe))
    except UsageError as exc:
        field = "doc_length" if "doc-length" in exc.message or "pack-efficiency" in exc.message else "finetune"
        raise ProfileError(exc.message, path=entry.path, line=entry.line, field=field) from None
    spec, counts = _memo(memo, ("model", id(spec), r.mtp_layers), lambda: _with_mtp(spec, r.mtp_layers))
    if r.mtp_layers:
        recipe = recipe.model_copy(update={"mtp_layers": r.mtp_layers})
    wl = Workload(spec, counts, recipe, r.seq_len, r.global_batch)
    layout = dict(tp=r.tp, pp=r.pp, vpp=r.vpp, cp=r.cp, ep=r.ep, etp=r.etp, zero=r.zero, micro_batch=r.micro_batch,
                  recompute=RECOMPUTE_CODES[r.recompute], sp=int(r.sequence_parallel and r.tp > 1))
    opts = SearchOptions(**topts.search_flags())
    _check_structure(r, spec)
    if r.seq_len > spec.max_seq_len:  # fit warns; a measurement the model cannot have run is refused
        raise ProfileError(f"seq_len {r.seq_len:,} is beyond {spec.name}'s maximum context of {spec.max_seq_len:,} "
                           "tokens: not a run this model can have made", path=entry.path, line=entry.line,
                           field="seq_len")
    from mi400plan.offload import offload_refusal

    why = offload_refusal(r.offload_layers, r.pp, r.recompute, spec.num_layers)
    if why:
        raise ProfileError(why, path=entry.path, line=entry.line, field="offload_layers")
    bad = layout_violations(layout, wl, r.world, opts)
    if bad:
        raise ProfileError(f"the layout breaks the rule {bad[0]!r} for {spec.name} (see 'mi400plan sweep --help')",
                           path=entry.path, line=entry.line, field="layout")
    if r.tflops_basis == "hardware" and r.tflops_per_gpu is not None:
        flops = evaluate_one(layout, wl, base_hw, r.world, opts)["flops_hw_per_token"]
    model_flops = _memo(memo, ("terms", id(spec), r.seq_len, repr(recipe)),
                        lambda: model_terms(spec, wl.counts, r.seq_len, recipe)).flops_model
    if not (r.tflops_basis == "hardware" and r.tflops_per_gpu is not None):
        flops = model_flops
    return sku, PreparedRun(entry, wl, layout, opts, measured_step(r, flops), model_flops, request)


def _check_structure(r: Any, spec: Any) -> None:
    """``fit``'s structural rules (TP divides heads, EP needs experts, ...): LayoutError naming the rule."""
    from mi400plan.specs.layout import Layout, check_layout

    lay = Layout(tp=r.tp, pp=r.pp, vpp=r.vpp, dp=r.dp, ep=r.ep, etp=r.etp, cp=r.cp, zero=r.zero,
                 micro_batch=r.micro_batch, recompute=r.recompute, sequence_parallel=r.sequence_parallel)
    check_layout(lay, spec, seq_len=r.seq_len, split_embedding_loss=r.split_embedding_loss, uneven_pp=r.uneven_pp)
    if r.pp_schedule == "dualpipe":
        from mi400plan.dualpipe import problem
        from mi400plan.errors import LayoutError

        why = problem(r.pp, r.vpp, r.global_batch // (r.micro_batch * r.dp))
        if why is not None:
            raise LayoutError(f"pp_schedule: {why} [rule: dualpipe]", rule="dualpipe")


def _run_fits(cat: Any, runs: list[RunEntry], fabric_specs: dict[str, Any],
              fabric_fits: list[ProfileFit], stack: str | None = None) -> list[tuple[ProfileFit, Forward]]:
    by_sku: dict[str, list[PreparedRun]] = defaultdict(list)
    memo: dict[tuple[Any, ...], Any] = {}
    for entry in runs:
        try:
            sku, prepared = _prepare(cat, entry, memo, stack)
        except PlannerError as exc:  # unknown name, missing model file, undisclosed peak
            own = isinstance(exc, ProfileError) and exc.path is not None and Path(exc.path).is_file()
            if own:  # the runs file itself, or a model file's own error: it names its file and line
                raise
            raise ProfileError(exc.message, path=entry.path, line=entry.line, hint=exc.hint) from None
        by_sku[sku].append(prepared)
    overlay = {("fabrics", f.name): with_fabric(fabric_specs[f.name], f.fitted_values()) for f in fabric_fits}
    fits = []
    for sku, group in by_sku.items():
        fwd = Forward(cat, sku, cat.get("accelerators", sku).spec, overlay)
        fit = fit_accelerator(fwd, group)
        fit.warnings.extend(_above_peak(cat, sku, group))
        fit.warnings.extend(_memory_verdicts(cat, sku, group))
        fits.append((fit, fwd))
    return fits


def _explain(fit: ProfileFit, fwd: Forward) -> list[RunExplain]:
    """Every run of one SKU's fit, split term by term at the fitted values (``mi400plan.explain``)."""
    from mi400plan.api.totals import plan_totals
    from mi400plan.explain import explain_step
    from mi400plan.search import model_terms
    from mi400plan.totals import flops_per_token

    out = []
    runs = [pt.detail["run"] for pt in fit.points]
    steps = fwd.step_terms(runs, fit.fitted_values())  # vectorized by workload: 1,000 runs in a few calls
    hws: dict[tuple[Any, ...], Any] = {}
    memo: dict[tuple[Any, ...], Any] = {}
    for pt, step in zip(fit.points, steps):
        run: PreparedRun = pt.detail["run"]
        r, wl = run.entry.run, run.workload
        hkey = (r.precision, run.stack.key() if run.stack is not None else None)
        hw = hws.get(hkey) or hws.setdefault(hkey, fwd.hardware(fit.fitted_values(), r.precision, run.stack))
        key = (id(wl.model), wl.seq_len, repr(wl.recipe))
        split = _memo(memo, ("split", *key, run.layout["recompute"], r.pp, r.vpp),
                      lambda: flops_per_token(wl.model, wl.seq_len, run.layout["recompute"], wl.recipe, r.pp, r.vpp))
        ex = explain_step(step, run.measured_s, model_flops_per_token=run.model_flops_per_token,
                          recompute_flops_per_token=split.recompute,
                          tokens_per_gpu=r.global_batch * r.seq_len / r.world, peak_flops=hw.peak_flops)
        terms = _memo(memo, ("terms", *key), lambda: model_terms(wl.model, wl.counts, wl.seq_len, wl.recipe))
        totals = plan_totals({**run.layout, "dp": r.dp}, wl, terms, fit.name, r.world, r.label(), None)
        out.append(RunExplain(
            source=run.entry.where, profile=fit.name, label=r.label(), precision=r.precision, gpus=r.world,
            measured_s=ex.measured_s, model_s=ex.model_s, tokens_per_s_per_gpu=ex.tokens_per_s_per_gpu,
            mfu=ex.mfu, hfu=ex.hfu, totals=totals,
            terms=[ExplainTerm(key=t.key, label=t.label, seconds=t.seconds, share=t.share) for t in ex.terms]))
    return out


def _memo(memo: dict[tuple[Any, ...], Any], key: tuple[Any, ...], compute: Any) -> Any:
    if key not in memo:
        memo[key] = compute()
    return memo[key]


def _above_peak(cat: Any, sku: str, runs: list[PreparedRun]) -> list[str]:
    """Runs whose measured model FLOP rate exceeds the SKU's dense peak (a units or FLOP-count slip)."""
    from mi400plan.hardware import build_sku

    out = []
    peaks: dict[str, float] = {}
    for run in runs:
        r = run.entry.run
        if r.precision not in peaks:
            peaks[r.precision] = build_sku(cat, sku, r.precision).hw.peak_flops / 1e12
        peak = peaks[r.precision]
        if run.measured_tflops_per_gpu > peak:
            out.append(f"{run.entry.where}: {run.measured_tflops_per_gpu:,.0f} TFLOP/s per GPU of model FLOPs is "
                       f"above {sku}'s dense {r.precision} peak ({peak:,.0f}); check the step time, the batch and "
                       "tflops_basis")
    return out


def _memory_verdicts(cat: Any, sku: str, runs: list[PreparedRun]) -> list[str]:
    """Runs the memory model counts as tight or over the SKU's capacity, by the check ``fit`` and ``sweep``
    use (``reserve.verdict_codes``). A measured run did run, so "does not fit" says the memory model
    over-counts it; the run is still fitted (its step time is a measurement either way)."""
    from mi400plan.hardware import build_sku
    from mi400plan.reserve import verdict_name
    from mi400plan.search import evaluate_one, usable_hbm

    out = []
    seen: dict[tuple[Any, ...], tuple[float, float, float]] = {}  # copies of one run are priced once
    for run in runs:
        r = run.entry.run
        wl = run.workload
        key = (r.precision, r.offload_layers > 0, r.world, tuple(sorted(run.layout.items())), id(wl.model),
               wl.seq_len, wl.global_batch, repr(wl.recipe), run.options)
        if key not in seen:
            hw = build_sku(cat, sku, r.precision, offload=r.offload_layers > 0).hw
            ev = evaluate_one(run.layout, wl, hw, r.world, run.options)
            seen[key] = (ev["mem_total"], ev["mem_need"], usable_hbm(wl, hw))
        total, need, usable = seen[key]
        v = verdict_name(need, total, usable)
        if v != "fits":
            out.append(f"{run.entry.where}: memory verdict {v.replace('_', ' ')}: the model counts "
                       f"{need / 2**30:,.1f} GiB per GPU before the fragmentation share ({total / 2**30:,.1f} GiB "
                       f"with it) against {usable / 2**30:,.1f} GiB usable")
    return out


# --- result ----------------------------------------------------------------------------------


def _params(fit: ProfileFit) -> list[FittedParam]:
    kind = "accelerator" if fit.kind == "accelerators" else "fabric"
    return [FittedParam(kind=kind, profile=fit.name, key=p.param.key, label=p.param.label, unit=p.param.unit,
                        before=p.before, value=p.value, std_error=p.std_error, points=len(fit.points), note=p.note)
            for p in fit.params]


def _point_row(fit: ProfileFit, pt: Any) -> PointRow:
    common = dict(profile=fit.name, measured_s=pt.measured_s, model_before_s=pt.before_s, model_s=pt.fitted_s,
                  residual_before=pt.residual_before, residual=pt.residual)
    if fit.kind == "fabrics":
        from mi400plan.units import fmt_bytes

        log, row = pt.detail["log"], pt.detail["row"]
        return PointRow(source=f"{log.path}:{row.line}", kind="nccl", op=log.op, size_bytes=row.size_bytes,
                        group=log.ranks, algorithm=pt.detail["algorithm"],
                        measured_busbw_bytes_per_s=row.busbw_bytes_per_s,
                        label=f"{log.op} {fmt_bytes(row.size_bytes)} x{log.ranks}", **common)
    run: PreparedRun = pt.detail["run"]
    r = run.entry.run
    return PointRow(source=run.entry.where, kind="training", label=r.label(), precision=r.precision, gpus=r.world,
                    measured_tflops_per_gpu=run.measured_tflops_per_gpu, **common)


def _summary(fit: ProfileFit) -> FitSummary:
    n = len(fit.points)
    before = [abs(p.residual_before) for p in fit.points]
    after = [abs(p.residual) for p in fit.points]
    return FitSummary(kind="accelerator" if fit.kind == "accelerators" else "fabric", profile=fit.name, points=n,
                      mean_abs_residual_before=sum(before) / n, mean_abs_residual=sum(after) / n,
                      max_abs_residual=max(after))


# --- saving ----------------------------------------------------------------------------------


def _source_key(raw: dict[str, Any]) -> str:
    sources = raw.get("sources", {})
    i = 1
    while f"CAL{i}" in sources:
        i += 1
    return f"CAL{i}"


def overlay_profile(raw: dict[str, Any], fit: ProfileFit, files: list[str], today: str) -> dict[str, Any]:
    """The profile ``raw`` (parsed TOML) with the fitted values of ``fit`` and their source."""
    out = dict(raw)
    key = _source_key(raw)
    out["sources"] = {**raw.get("sources", {}), key: {
        "title": f"calibrate from {', '.join(Path(f).name for f in files)}",
        "date": today,
        "url": ", ".join(str(Path(f).resolve()) for f in files),
    }}
    n = len(fit.points)
    mean = sum(abs(p.residual) for p in fit.points) / n
    table = dict(raw.get("efficiency", {})) if fit.kind == "accelerators" else out
    for p in fit.params:
        if p.value is None:
            continue
        table[p.param.key] = {
            "nominal": float(p.value), "status": "measured", "source": [key],
            "note": f"fitted by mi400plan calibrate to {n} measured point(s); mean |residual| {mean * 100:.1f}%",
        }
    if fit.kind == "accelerators":
        out["efficiency"] = table
    return out


def _targets(fits: list[ProfileFit], save: str) -> list[tuple[ProfileFit, Path]]:
    return [(f, Path(save) / f.kind / f"{f.name}.toml") for f in fits if f.fitted_values()]


def save_profiles(cat: Any, fits: list[ProfileFit], files: list[str], save: str, force: bool,
                  today: str) -> list[str]:
    """Write the overlays atomically; nothing is written when any target exists and ``force`` is off."""
    from mi400plan.profiles import parse_toml, validate_dict, write_toml_atomic

    from mi400plan.calibrate import refusal

    targets = _targets(fits, save)
    if not targets:
        raise UsageError("--save: no parameter was identified, so there is nothing to write")
    for fit, _ in targets:
        why = refusal(fit)
        if why:
            raise ProfileError(f"{fit.name}: the fit is refused and nothing is saved: {why}",
                               path=", ".join(files), hint="check the measurements (units, batch, layout) against the "
                               "profile; a fit is saved only when the model matches them")
    from mi400plan.fileio import NotRegularFileError, check_replaceable

    for _, p in targets:
        try:
            check_replaceable(p)
        except NotRegularFileError as exc:
            raise UsageError(f"--save: {str(p)!r} {exc.strerror}") from None
    existing = [str(p) for _, p in targets if p.exists()]
    if existing and not force:
        raise UsageError(f"profile file {existing[0]!r} already exists",
                         hint="pass --force to replace it, or choose another --save directory")
    docs = []
    for fit, path in targets:
        src, _ = cat.entry_path(fit.kind, fit.name)
        raw = parse_toml(src, Path(src).read_text(encoding="utf-8"))
        doc = overlay_profile(raw, fit, files, today)
        validate_dict(fit.kind, doc, str(path))
        docs.append((path, doc))
    for path, doc in docs:
        try:
            write_toml_atomic(path, doc, replace=force)
        except FileExistsError as exc:
            raise UsageError(f"profile file {str(path)!r} {exc.strerror}", hint="pass --force to replace it") from None
        except OSError as exc:
            raise ProfileError(f"cannot write the profile: {exc.strerror or exc}", path=str(path)) from None
    return [str(p) for p, _ in docs]


# --- entry point -----------------------------------------------------------------------------


def calibrate(
    cat: Any,
    files: list[str],
    *,
    sku: str | None = None,
    fabric: str | None = None,
    algo: str | None = None,
    op: str | None = None,
    save: str | None = None,
    force: bool = False,
    today: str | None = None,
    stack: str | None = None,
) -> CalibrateResult:
    """Fit efficiencies to measured training runs and nccl-tests logs (see the module docstring).

    ``sku`` picks the fabric an nccl-tests log ran on (its scale-up fabric when every rank is on one
    host, its scale-out fabric with one rank per host); ``fabric`` names it outright. ``algo`` pins
    the collective algorithm the rows are priced with (default: the fastest the model finds); ``op``
    names the collective when a log does not. ``today`` (YYYY-MM-DD) dates the saved source.
    ``stack`` prices runs whose ``stack`` names no stack profile (None: each SKU's vendor default); the
    fitted values are the vendor default stack's (``stacks.stack_efficiency``).
    """
    if not files:
        raise UsageError("give at least one file of training runs (.toml, .csv) or nccl-tests output")
    if len(files) > MAX_FILES:
        raise UsageError(f"at most {MAX_FILES} files")
    if algo is not None and algo != "auto":
        algo = comms.normalize_algo(algo) or _bad("--algo", algo, "auto, ring, tree, rhd, direct")
    else:
        algo = None
    if op is not None:
        op = comms.normalize_op(op) or _bad("--op", op, "allreduce, allgather, reducescatter, alltoall, ...")
    if save is not None and Path(save).exists() and not Path(save).is_dir():
        raise UsageError(f"--save {save!r} is a file, not a directory")
    inputs = _read(files, op)
    fab_fits, fab_specs = _fabric_fits(cat, inputs.logs, sku, fabric, algo) if inputs.logs else ([], {})
    acc = _run_fits(cat, inputs.runs, fab_specs, fab_fits, stack) if inputs.runs else []
    fits = fab_fits + [fit for fit, _ in acc]
    saved = save_profiles(cat, fits, files, save, force, today or datetime.date.today().isoformat()) if save else []
    from mi400plan.calibrate import refusal

    refused = [f"{f.name}: this fit would not be saved (--save refuses it): {why}"
               for f in fits if f.fitted_values() and (why := refusal(f))]
    return CalibrateResult(
        inputs=list(files),
        params=[p for f in fits for p in _params(f)],
        summaries=[_summary(f) for f in fits],
        rows=[_point_row(f, pt) for f in fits for pt in f.points],
        saved=saved,
        warnings=[w for f in fits for w in f.warnings] + refused,
        explain=[e for fit, fwd in acc for e in _explain(fit, fwd)],
    )


def _bad(flag: str, value: str, choices: str) -> str:
    raise UsageError(f"unknown {flag} {value!r}; choose from {choices}")
