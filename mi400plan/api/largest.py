"""``fit --largest``: the largest model of a family that fits a cluster (``mi400plan.largest``)."""

from __future__ import annotations

from typing import Any

from mi400plan.errors import UsageError
from mi400plan.results.largest import LargestResult, LargestRow, StepFit
from mi400plan.specs.layout import TrainOptions

MAX_REPLICA_GPUS = 4096  # one inference replica, as serve bounds it
TRAIN_RULE = ("some training layout on exactly --gpus GPUs is valid and fits (the sweep's search); the "
              "layout shown is the fastest that fits")
INFER_RULE = ("one replica of --gpus GPUs (max(TP, EP) x PP) holds --batch sequences of the context: fit's "
              "maximum context at its best layout is at least the context asked")


def largest(cat: Any, skus: list[str], *, mode: str = "train", gpus: int | None = None, family: str = "dense",
            experts: int = 0, top_k: int = 0, seq_len: int | None = None, batch: int | None = None,
            global_batch: int | None = None, precision: str | None = None, kv_dtype: str | None = None,
            options: TrainOptions | None = None, pins: dict[str, list[int]] | None = None) -> LargestResult:
    """Per SKU, the largest family model that fits ``gpus`` GPUs and the next larger step (which does not).
    ``options`` is the training recipe (``TrainOptions``; ``precision`` on top of it) and ``pins`` the
    layout values the training search may use (``sweep``'s ``--tp/--pp/.../--recompute``)."""
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
    template = FamilyTemplate(family, experts, top_k)  # type: ignore[arg-type]
    if mode == "train":
        rows, seq, b, prec = _train(cat, skus, template, gpus, seq_len, global_batch,
                                      (options or TrainOptions()).merged(precision=precision), pins)
        rule = TRAIN_RULE
    else:
        rows, seq, b, prec = _infer(cat, skus, template, gpus, seq_len, batch, precision, kv_dtype)
        rule = INFER_RULE
    return LargestResult(mode=mode, family=template.label(), gpus=gpus, seq_len=seq, batch=b, precision=prec,
                         rule=rule, rows=rows)


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
        from mi400plan.api.sweep import layout_text
        from mi400plan.results.sweep import SweepLayout
        from mi400plan.search import RECOMPUTE_LABELS

        r = v.layout
        lay = SweepLayout(tp=r["tp"], pp=r["pp"], vpp=r["vpp"], dp=r["dp"], ep=r["ep"], etp=r["etp"], cp=r["cp"],
                          zero=r["zero"], micro_batch=r["micro_batch"], recompute=RECOMPUTE_LABELS[r["recompute"]],
                          sequence_parallel=bool(r["sp"]))
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


def _train(cat: Any, skus: list[str], template: Any, gpus: int, seq_len: int | None, global_batch: int | None,
           topts: TrainOptions, pins: dict[str, list[int]] | None) -> tuple[list[LargestRow], int, int, str]:
    from mi400plan.api.sweep import DEFAULT_GLOBAL_BATCH_TOKENS, DEFAULT_SEQ_CAP, PRECISIONS, build_sku, pin_options
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
        hw = build_sku(cat, s, precision, offload=topts.offload_layers > 0).hw
        opts = SearchOptions(**topts.search_flags(), **pin_options(pins))
        rows.append(_row(hw.name, largest_fitting(template, train_judge(hw, gpus, workload, opts)),
                         "train", template))
    return rows, seq, gb, precision


def _infer(cat: Any, skus: list[str], template: Any, gpus: int, context: int | None, batch: int | None,
           precision: str | None, kv_dtype: str | None) -> tuple[list[LargestRow], int, int, str]:
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
        found = largest_fitting(template, infer_judge(cap.nominal, recipe, gpus, b, ctx))
        rows.append(_row(acc.name, found, "infer", template))
    return rows, ctx, b, recipe.weight_format
