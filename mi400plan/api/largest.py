"""``fit --largest``: the largest model of a family that fits a cluster (``mi400plan.largest``)."""

from __future__ import annotations

from typing import Any

from mi400plan.errors import UsageError
from mi400plan.results.largest import LargestResult, LargestRow, LargestRun, StepFit
from mi400plan.specs.layout import TrainOptions

MAX_REPLICA_GPUS = 4096  # one inference replica, as serve bounds it
TRAIN_RULE = ("some training layout on exactly --gpus GPUs is valid and fits (the sweep's search); the "
              "layout shown is the fastest that fits")
INFER_RULE = ("one replica of --gpus GPUs (max(TP, EP) x PP) holds --batch sequences of the context: fit's "
              "maximum context at its best layout is at least the context asked")


def largest(cat: Any, skus: list[str], *, mode: str = "train", gpus: int | None = None, family: str = "dense",
            experts: int = 0, top_k: int = 0, seq_len: int | None = None, batch: int | None = None,
            global_batch: int | None = None, precision: str | None = None, kv_dtype: str | None = None,
            options: TrainOptions | None = None, pins: dict[str, list[int]] | None = None,
            tokens: str | None = None) -> LargestResult:
    """Per SKU, the largest family model that fits ``gpus`` GPUs and the next larger step (which does not).

    ``options`` is the training recipe (``TrainOptions``; ``precision`` on top of it) and ``pins`` the
    layout values the training search may use (``sweep``'s ``--tp/--pp/.../--recompute``; tp, pp and ep
    in infer mode). ``tokens`` (train mode): each row's ``run`` prices the largest model's run as
    ``sweep`` does, with step time and days."""
    from mi400plan.family import FamilyTemplate

    from mi400plan.deadline import MAX_CLUSTER_GPUS

    if gpus is None or gpus < 1:
        raise UsageError("--largest needs --gpus (the cluster, or one inference replica)")
    limit = MAX_CLUSTER_GPUS if mode == "train" else MAX_REPLICA_GPUS
    if gpus > limit:
        raise UsageError(f"--gpus with --largest --mode {mode} is at most {limit:,}, got {gpus:,}")
    if not skus or any(s.strip().lower() == "all" for s in skus):
        raise UsageError("--largest needs --sku (one or more named SKUs)")
    if mode not in ("train", "infer"):
        raise UsageError(f"unknown mode {mode!r}; use train or infer")
    if family not in ("dense", "moe"):
        raise UsageError(f"unknown --family {family!r}; choose dense or moe")
    if precision is not None and not isinstance(precision, str):
        raise UsageError(f"--largest prices one precision, got {', '.join(map(str, precision))}",
                         hint="give one --precision (bf16, fp8, ...)")
    ipins = _check_pins(mode, {k: (v[0] if v else None) for k, v in (pins or {}).items()}) if mode == "infer" else {}
    template = FamilyTemplate(family, experts, top_k)  # type: ignore[arg-type]
    train_tokens = _tokens(mode, tokens)
    if mode == "train":
        topts = (options or TrainOptions()).merged(precision=precision)
        topts, note = _stack_fp8(cat, skus, topts)
        notes = [note] if note else []
        rows, seq, b, prec = _train(cat, skus, template, gpus, seq_len, global_batch, topts, pins)
        if train_tokens:
            rows = [_with_run(cat, r, template, gpus, seq, global_batch, topts, pins, train_tokens) for r in rows]
        rule = TRAIN_RULE
        from mi400plan.packing import options_packing_text

        packing = options_packing_text(topts, seq)
    else:
        rows, seq, b, prec = _infer(cat, skus, template, gpus, seq_len, batch, precision, kv_dtype, ipins)
        rule, notes, packing = INFER_RULE, [], None
    return LargestResult(mode=mode, family=template.label(), gpus=gpus, seq_len=seq, batch=b, precision=prec,
                         rule=rule, rows=rows, train_tokens=train_tokens, packing=packing, warnings=notes)


def _stack_fp8(cat: Any, skus: list[str], topts: TrainOptions) -> tuple[TrainOptions, str | None]:
    """``topts`` with ``--precision fp8`` priced as the stacks' FP8 recipe on ``skus`` (``stack_precision``)."""
    from mi400plan.stack_precision import fp8_as

    if topts.precision != "fp8":
        return topts, None
    precision, note = fp8_as(cat, [cat.get("accelerators", s).spec for s in skus], "fp8", topts.stack_request())
    return (topts if precision == "fp8" else topts.model_copy(update={"precision": precision})), note


TRAIN_PINS = ("tp", "pp", "vpp", "cp", "ep", "etp", "zero", "micro_batch")
INFER_PINS = ("tp", "pp", "ep")


def _check_pins(mode: str, pins: dict[str, int | None]) -> dict[str, int]:
    """The layout flags given, checked against what ``--largest`` can honour in ``mode``."""
    allowed = TRAIN_PINS if mode == "train" else INFER_PINS
    out: dict[str, int] = {}
    for k, v in pins.items():
        if v is None:
            continue
        flag = "--" + k.replace("_", "-")
        if k not in allowed:
            raise UsageError(f"{flag} does not apply to --largest --mode {mode}",
                             hint=f"--largest honours {', '.join('--' + a.replace('_', '-') for a in allowed)}"
                             + (" (--gpus sets the data-parallel size)" if k == "dp" else ""))
        if int(v) < (0 if k == "zero" else 1):
            raise UsageError(f"{flag} must be {'0..3' if k == 'zero' else 'at least 1'}, got {v}")
        out[k] = int(v)
    return out


def _tokens(mode: str, tokens: str | None) -> float | None:
    from mi400plan.units import UnitError, parse_count

    if tokens is None:
        return None
    if mode != "train":
        raise UsageError("--tokens prices a training run: use it with --largest --mode train")
    try:
        v = float(parse_count(tokens))
    except UnitError as exc:
        raise UsageError(f"cannot read --tokens {tokens!r}: {exc}") from None
    if not (v >= 1 and v < 1e18):
        raise UsageError(f"--tokens must be a token count from 1 to 1e18, got {tokens!r}")
    return v


def _step(spec: Any, v: Any, mode: str) -> StepFit:
    from mi400plan.params import count_params

    c = count_params(spec)
    out = StepFit(name=spec.name, hidden_size=spec.hidden_size, num_layers=spec.num_layers,
                  params_total=int(c.total), params_active=int(c.active), fits=v.fits)
    if not v.fits or v.layout is None:
        if mode == "infer" and v.detail:
            out = out.model_copy(update={"max_context": int(v.detail["max_context"])})
        return out
    if mode == "train":
        from mi400plan.results.sweep import SweepLayout, layout_text

        lay = SweepLayout.of_row(v.layout)
        return out.model_copy(update={"layout": lay.model_dump(), "layout_text": layout_text(lay),
                                      "step_time_s": v.detail["step_s"], "memory_bytes": v.detail["memory_bytes"]})
    lay = v.layout
    text = f"TP{lay['tp']} PP{lay['pp']}" + (f" EP{lay['ep']}" if lay["ep"] > 1 else "")
    return out.model_copy(update={"layout": dict(lay), "layout_text": text,
                                  "max_context": int(v.detail["max_context"])})


def _row(sku: str, found: Any, mode: str, template: Any) -> LargestRow:
    def spec(v: Any) -> Any:
        return template.model(v.width)

    return LargestRow(
        sku=sku, largest=None if found.largest is None else _step(spec(found.largest), found.largest, mode),
        next_larger=None if found.next_larger is None else _step(spec(found.next_larger), found.next_larger, mode),
        steps_checked=len(found.checked),
    )


def _with_run(cat: Any, row: LargestRow, template: Any, gpus: int, seq: int, global_batch: int | None,
              topts: TrainOptions, pins: dict[str, list[int]] | None, train_tokens: float) -> LargestRow:
    """``row`` with the largest model's run priced as ``sweep <name> --gpus N --tokens T`` prices it:
    the same workload, the batch it plans (``api.sweep.planned_search``) or ``global_batch``."""
    from mi400plan.api.sweep import pin_options, planned_search
    from mi400plan.hardware import build_sku
    from mi400plan.results.sweep import SweepLayout, layout_text
    from mi400plan.batch import law_for
    from mi400plan.params import count_params
    from mi400plan.search import SearchOptions, Workload, iter_rows, metrics, model_terms
    from mi400plan.units import DAY

    if row.largest is None:
        return row
    spec = template.model(row.largest.hidden_size)
    counts = count_params(spec)
    recipe = topts.train_recipe()
    terms = model_terms(spec, counts, seq, recipe)
    law = law_for(terms.flops_layers, seq, train_tokens, counts.active, recipe)
    hw = build_sku(cat, row.sku, topts.precision, offload=topts.offload_layers > 0, stack=topts.stack_request()).hw
    wl0 = Workload(spec, counts, recipe, seq, int(global_batch or law.start_seqs))
    res, wl, _ = planned_search(wl0, law, global_batch is not None, hw, gpus,
                                 SearchOptions(**topts.search_flags(), **pin_options(pins)), 1, None, False)
    r = next(iter_rows(res.top), None)
    if r is None:
        return row
    met = metrics(r["step"], wl, hw, gpus, terms, r["flops_hw_per_token"])
    tps = float(met["tokens_per_s"])
    lay = SweepLayout.of_row(r)
    run = LargestRun(model=spec.name, train_tokens=train_tokens, global_batch_seqs=wl.global_batch,
                     global_batch_tokens=wl.global_batch * seq, batch_pinned=global_batch is not None,
                     layout_text=layout_text(lay), step_time_s=float(r["step"]), tokens_per_s=tps,
                     mfu=float(met["mfu"]), days=train_tokens / tps / DAY)
    return row.model_copy(update={"run": run})



def _train(cat: Any, skus: list[str], template: Any, gpus: int, seq_len: int | None, global_batch: int | None,
           topts: TrainOptions, pins: dict[str, list[int]] | None) -> tuple[list[LargestRow], int, int, str]:
    from mi400plan.api.sweep import DEFAULT_GLOBAL_BATCH_TOKENS, DEFAULT_SEQ_CAP, PRECISIONS, pin_options
    from mi400plan.hardware import build_sku
    from mi400plan.largest import largest_fitting, train_judge
    from mi400plan.params import count_params
    from mi400plan.search import SearchOptions, Workload

    precision = topts.precision
    if precision not in PRECISIONS:
        raise UsageError(f"--largest trains in {' or '.join(PRECISIONS)}, not {precision!r}")
    seq = int(seq_len or min(template.max_seq_len, DEFAULT_SEQ_CAP))
    gb = int(global_batch or max(1, DEFAULT_GLOBAL_BATCH_TOKENS // seq))
    recipe = topts.train_recipe()

    def workload(spec: Any) -> Any:
        return Workload(spec, count_params(spec), recipe, seq, gb)

    rows = []
    for s in skus:
        hw = build_sku(cat, s, precision, offload=topts.offload_layers > 0, stack=topts.stack_request()).hw
        opts = SearchOptions(**topts.search_flags(), **pin_options(pins))
        rows.append(_row(hw.name, largest_fitting(template, train_judge(hw, gpus, workload, opts)),
                         "train", template))
    return rows, seq, gb, precision


def _infer(cat: Any, skus: list[str], template: Any, gpus: int, context: int | None, batch: int | None,
           precision: str | None, kv_dtype: str | None, pins: dict[str, int]) -> tuple[list[LargestRow], int, int, str]:
    from mi400plan.largest import infer_judge, largest_fitting
    from mi400plan.specs.layout import infer_recipe

    recipe = infer_recipe(precision, kv_dtype=kv_dtype)
    ctx = int(context or template.max_seq_len)
    b = int(batch or 1)
    rows = []
    for s in skus:
        acc = cat.get("accelerators", s).spec
        cap = acc.hbm_bytes
        cap.require(f"{acc.name} HBM capacity")
        found = largest_fitting(template, infer_judge(cap.nominal, recipe, gpus, b, ctx, pins))
        rows.append(_row(acc.name, found, "infer", template))
    return rows, ctx, b, recipe.weight_format
