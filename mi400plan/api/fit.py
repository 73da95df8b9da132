"""``fit``: does a model fit, on which SKU, with which layout, and by how much.

Memory does not depend on the SKU (only the capacity-proportional part of the reserve does), so the
per-GPU terms are computed once and compared with every accelerator's HBM capacity, including the
low/high ends of an estimated capacity.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mi400plan.errors import LayoutError, ProfileError, UsageError
from mi400plan.results.fit import FitModel, FitResult, FitRow, MemoryBytes
from mi400plan.specs.layout import (
    RECOMPUTE_CODES,
    InferRecipe,
    Layout,
    TrainRecipe,
    check_layout,
    dp_from_gpus,
    infer_recipe,
    parse_reserve,
    train_recipe,
)
from mi400plan.units import GB, GiB

DEFAULT_TRAIN_SEQ = 4096
MAX_SEARCH_TP = 64
MAX_SEARCH_GPUS = 4096


def read_plan(path: str | Path) -> tuple[dict[str, Any], Layout]:
    """Read a plan file written by ``sweep --save``: ``[plan]`` (model, sku, gpus, seq_len, global_batch,
    precision, ...) and ``[layout]`` (exactly ``Layout``'s fields). Errors name file, line and field."""
    from pydantic import ValidationError

    from mi400plan.profiles import parse_toml, validation_error

    p = Path(path)
    if not p.is_file():
        raise ProfileError("no such plan file", path=str(p))
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"cannot read plan file: {exc}", path=str(p)) from None
    raw = parse_toml(str(p), text)
    for table in ("plan", "layout"):
        if not isinstance(raw.get(table), dict):
            raise ProfileError(f"a plan file needs a [{table}] table", path=str(p), field=table)
    try:
        layout = Layout.model_validate(raw["layout"])
    except ValidationError as exc:
        err = validation_error(str(p), text, exc)
        if err.field:
            err.field = "layout." + err.field
        raise err from None
    return dict(raw["plan"]), layout


def fit(
    catalog: Any,
    model_name: str | None,
    skus: list[str] | None = None,
    mode: str = "train",
    *,
    tp: int | None = None,
    pp: int | None = None,
    vpp: int | None = None,
    dp: int | None = None,
    ep: int | None = None,
    etp: int | None = None,
    cp: int | None = None,
    zero: int | None = None,
    micro_batch: int | None = None,
    seq: int | None = None,
    recompute: str | None = None,
    sequence_parallel: bool | None = None,
    gpus: int | None = None,
    global_batch: int | None = None,
    recipe: str | None = None,
    precision: str | None = None,
    optimizer: str | None = None,
    grad_dtype: str | None = None,
    kv_dtype: str | None = None,
    flash_attention: bool | None = None,
    batch: int | None = None,
    reserve: str | None = None,
    plan: str | Path | None = None,
) -> FitResult:
    """Fit ``model_name`` on each SKU (``["all"]`` or ``None``: every accelerator in the catalog).

    Explicit arguments override values read from ``plan``. Raises ``LayoutError`` for a layout that
    breaks a structural rule, ``UnknownNameError`` for unknown names, ``UsageError`` for bad values.
    """
    from mi400plan.params import count_params

    warnings: list[str] = []
    plan_layout: Layout | None = None
    if plan is not None:
        meta, plan_layout = read_plan(plan)
        if model_name is None:
            model_name = meta.get("model")
        elif meta.get("model") and str(meta["model"]) != model_name:
            warnings.append(f"plan {plan} was made for model {meta['model']!r}, fitting {model_name!r}")
        if not skus and meta.get("sku"):
            skus = [str(meta["sku"])]
        gpus = gpus if gpus is not None else meta.get("gpus")
        seq = seq if seq is not None else meta.get("seq_len")
        global_batch = global_batch if global_batch is not None else meta.get("global_batch")
        precision = precision if precision is not None else meta.get("precision")
        if meta.get("mode") in ("train", "infer") and mode is None:
            mode = str(meta["mode"])
    if not model_name:
        raise UsageError("name a model (or give --plan with a [plan] model)")
    if mode not in ("train", "infer"):
        raise UsageError(f"unknown mode {mode!r}; use train or infer")
    loaded_model = catalog.get("models", model_name)
    model = loaded_model.spec
    counts = count_params(model)
    res = parse_reserve(reserve) if reserve is not None else None

    # Accelerators.
    names = list(skus or ["all"])
    if any(n.strip().lower() == "all" for n in names):
        sku_names = catalog.names("accelerators")
    else:
        sku_names = []
        for n in names:
            c = catalog.resolve("accelerators", n) if not Path(n).suffix else n
            if c not in sku_names:
                sku_names.append(c)
    accels = [catalog.get("accelerators", n) for n in sku_names]

    fm = FitModel(
        name=model.name,
        display_name=model.display_name,
        profile=loaded_model.path,
        params_total=counts.total,
        params_active=counts.active,
        max_seq_len=int(model.max_seq_len),
    )
    for v, what in ((tp, "--tp"), (pp, "--pp"), (vpp, "--vpp"), (dp, "--dp"), (ep, "--ep"), (etp, "--etp"),
                    (cp, "--cp"), (micro_batch, "--micro-batch"), (seq, "--seq"), (gpus, "--gpus"),
                    (global_batch, "--global-batch"), (batch, "--batch")):
        if v is not None and int(v) < 1:
            raise UsageError(f"{what} must be a positive integer, got {v}")
    if mode == "train":
        return _fit_train(
            catalog, model, counts, accels, fm, warnings, plan_layout,
            dict(tp=tp, pp=pp, vpp=vpp, dp=dp, ep=ep, etp=etp, cp=cp, zero=zero, micro_batch=micro_batch,
                 recompute=recompute, sequence_parallel=sequence_parallel),
            seq=seq, gpus=gpus, global_batch=global_batch,
            recipe=train_recipe(recipe or "megatron", precision=precision, optimizer=optimizer,
                                grad_dtype=grad_dtype, flash_attention=flash_attention, reserve=res),
        )
    if recipe is not None and recipe not in ("bf16",):
        warnings.append(f"recipe {recipe!r} applies to training; inference uses --precision and --kv-dtype")
    return _fit_infer(
        catalog, model, counts, accels, fm, warnings,
        tp=tp if tp is not None else (plan_layout.tp if plan_layout else None),
        pp=pp if pp is not None else (plan_layout.pp if plan_layout else None),
        ep=ep, gpus=gpus, batch=batch, context=seq,
        recipe=infer_recipe(precision, kv_dtype=kv_dtype, reserve=res),
    )


# --- helpers -----------------------------------------------------------------------------------


def _gb(x: float) -> str:
    return f"{x / GB:,.1f} GB ({x / GiB:,.1f} GiB)"


def _capacity(acc: Any) -> tuple[float | None, float | None, float | None, str]:
    est = acc.spec.hbm_bytes
    if not est.known:
        return None, None, None, est.status
    return est.nominal, est.lo, est.hi, est.status


def _divisors(n: int, limit: int) -> list[int]:
    return [d for d in range(1, min(n, limit) + 1) if n % d == 0]


def _valid(layout: Layout, model: Any, seq: int | None) -> bool:
    try:
        check_layout(layout, model, seq_len=seq)
    except LayoutError:
        return False
    return True


# --- training ----------------------------------------------------------------------------------


def _train_terms(model: Any, counts: Any, recipe: TrainRecipe, layout: Layout, seq: int, nmb: int | None,
                 **arrays: Any) -> Any:
    from mi400plan.memory import train_memory

    kw: dict[str, Any] = dict(
        tp=layout.tp, pp=layout.pp, vpp=layout.vpp, dp=layout.dp, ep=layout.ep, etp=layout.etp, cp=layout.cp,
        zero=layout.zero, micro_batch=layout.micro_batch, recompute=RECOMPUTE_CODES[layout.recompute],
        sequence_parallel=layout.sequence_parallel,
    )
    kw.update(arrays)
    return train_memory(model, counts, recipe, seq_len=seq, num_microbatches=nmb, **kw)


def _fit_train(catalog: Any, model: Any, counts: Any, accels: list[Any], fm: FitModel, warnings: list[str],
               plan_layout: Layout | None, given: dict[str, Any], *, seq: int | None, gpus: int | None,
               global_batch: int | None, recipe: TrainRecipe) -> FitResult:
    base = plan_layout.model_dump() if plan_layout else {}
    for k, v in given.items():
        if v is not None:
            base[k] = v
    if gpus is not None and given.get("dp") is None:
        base["dp"] = dp_from_gpus(int(gpus), int(base.get("tp", 1)), int(base.get("pp", 1)), int(base.get("cp", 1)))
    from pydantic import ValidationError

    try:
        layout = Layout(**base)
    except ValidationError as exc:
        e = exc.errors()[0]
        raise UsageError(f"invalid layout: {'.'.join(str(x) for x in e['loc'])}: {e['msg']}") from None
    if gpus is not None and layout.gpus != gpus:
        raise LayoutError(
            f"TP x PP x CP x DP = {layout.tp}x{layout.pp}x{layout.cp}x{layout.dp} = {layout.gpus} GPUs, "
            f"not the {gpus} given [rule: dp-integer]",
            rule="dp-integer",
        )
    seq_len = int(seq or min(DEFAULT_TRAIN_SEQ, model.max_seq_len))
    check_layout(layout, model, seq_len=seq_len)
    nmb: int | None = None
    if global_batch is not None:
        per_step = layout.micro_batch * layout.dp
        if global_batch % per_step:
            raise LayoutError(
                f"global batch {global_batch} is not a whole number of micro-batch x DP = "
                f"{layout.micro_batch} x {layout.dp} = {per_step} sequences [rule: batch-divisible]",
                rule="batch-divisible",
            )
        nmb = global_batch // per_step
    if seq_len > model.max_seq_len:
        warnings.append(f"sequence length {seq_len} exceeds {model.name}'s max_seq_len {model.max_seq_len}")
    mem = _train_terms(model, counts, recipe, layout, seq_len, nmb).item()
    layout_dict: dict[str, int | str | bool] = dict(layout.model_dump())
    layout_dict["schedule"] = layout.schedule
    layout_dict["seq_len"] = seq_len
    if global_batch is not None:
        layout_dict["global_batch"] = int(global_batch)

    # Alternatives for suggestions: single changes, then the smallest model-parallel grid.
    alts = _train_alternatives(model, counts, recipe, layout, seq_len, nmb, gpus)
    grid = _train_grid(model, counts, recipe, layout, seq_len, nmb)

    rows = []
    for acc in accels:
        rows.append(
            _row(acc, "train", layout_dict, layout.gpus, mem, kv=0.0, recipe_reserve=recipe.reserve,
                 alts=alts, grid=grid)
        )
    _suggest_other_skus(rows, catalog, recipe.reserve)
    rdict: dict[str, float | int | str | bool] = {
        k: v for k, v in recipe.model_dump().items() if k != "reserve"
    }
    rdict["bytes_per_param"] = recipe.bytes_per_param(model.hidden_size)
    return FitResult(model=fm, mode="train", recipe=rdict, reserve=recipe.reserve.text(), rows=rows,
                     warnings=warnings)


def _train_alternatives(model: Any, counts: Any, recipe: TrainRecipe, layout: Layout, seq: int,
                        nmb: int | None, gpus: int | None) -> list[tuple[str, Layout, float, int]]:
    """Single-step layout changes, smallest first: (flag text, layout, total bytes excl. capacity reserve,
    GPUs). With a fixed GPU count, raising TP or PP lowers DP."""
    cands: list[tuple[str, Layout]] = []
    d = layout.model_dump()
    if layout.dp * layout.cp > 1:
        for z in range(layout.zero + 1, 4):
            cands.append((f"--zero {z}", Layout(**{**d, "zero": z})))
    order = ["none", "selective", "full"]
    for r in order[order.index(layout.recompute) + 1:]:
        cands.append((f"--recompute {r}", Layout(**{**d, "recompute": r})))
    if layout.micro_batch > 1:
        cands.append(("--micro-batch 1", Layout(**{**d, "micro_batch": 1})))

    def scaled(field: str, factor: int) -> Layout | None:
        new = {**d, field: d[field] * factor}
        if gpus is not None and field in ("tp", "pp"):
            if layout.dp % factor:
                return None
            new["dp"] = layout.dp // factor
        try:
            return Layout(**new)
        except Exception:  # noqa: BLE001 - an invalid combination is simply not a candidate
            return None

    for field in ("tp", "pp", "ep"):
        for f in (2, 4, 8):
            lay = scaled(field, f)
            if lay is not None and _valid(lay, model, seq):
                cands.append((f"--{field} {lay.model_dump()[field]}" + (f" (dp {lay.dp})" if lay.dp != layout.dp else ""),
                              lay))
                break
    out = []
    for text, lay in cands:
        if not _valid(lay, model, seq):
            continue
        t = _train_terms(model, counts, recipe, lay, seq, nmb).item()["total"]
        out.append((text, lay, t, lay.gpus))
    return out


def _train_grid(model: Any, counts: Any, recipe: TrainRecipe, layout: Layout, seq: int,
                nmb: int | None) -> list[tuple[float, int, str]]:
    """Every valid (tp, pp, ep) with the other settings kept: (total bytes, GPUs, text), fewest GPUs
    first, then the most balanced TP x PP."""
    import numpy as np

    heads = model.attention.num_heads
    tps = _divisors(heads, MAX_SEARCH_TP)
    pps = _divisors(model.num_layers, model.num_layers)
    eps = _divisors(model.moe.num_experts, model.moe.num_experts) if model.moe else [1]
    cand = []
    d = layout.model_dump()
    for t in tps:
        for p in pps:
            if t * p * layout.cp * layout.dp > MAX_SEARCH_GPUS:
                continue
            for e in eps:
                lay_d = {**d, "tp": t, "pp": p, "ep": e}
                if lay_d["vpp"] > 1 and p < 2:
                    continue
                lay = Layout(**lay_d)
                if _valid(lay, model, seq):
                    cand.append(lay)
    if not cand:
        return []
    tot = _train_terms(
        model, counts, recipe, layout, seq, nmb,
        tp=np.array([c.tp for c in cand]), pp=np.array([c.pp for c in cand]), ep=np.array([c.ep for c in cand]),
    ).total
    rows = [(float(tot[i]), c.gpus, c.pp, c.tp, c.ep, f"--tp {c.tp} --pp {c.pp}" + (f" --ep {c.ep}" if model.moe else ""))
            for i, c in enumerate(cand)]
    # Fewest GPUs first; among equal counts the most balanced TP x PP (neither very deep pipelines nor TP far
    # beyond a scale-up domain), then the larger TP, then the smaller EP.
    rows.sort(key=lambda r: (r[1], max(r[2], r[3]), -r[3], r[4]))
    return [(r[0], r[1], r[5]) for r in rows]


# --- inference ---------------------------------------------------------------------------------


def _fit_infer(catalog: Any, model: Any, counts: Any, accels: list[Any], fm: FitModel, warnings: list[str], *,
               tp: int | None, pp: int | None, ep: int | None, gpus: int | None, batch: int | None,
               context: int | None, recipe: InferRecipe) -> FitResult:
    from mi400plan.memory import infer_memory, max_batch_x_context, max_context

    pp_ = int(pp or 1)
    ep_ = int(ep or 1)
    if tp is None:
        if gpus is not None:
            if gpus % pp_:
                raise LayoutError(f"{gpus} GPUs is not a whole number of PP={pp_} stages [rule: dp-integer]", rule="dp-integer")
            tp_ = gpus // pp_
        else:
            tp_ = 1
    else:
        tp_ = int(tp)
        if gpus is not None and gpus != max(tp_, ep_) * pp_:
            raise LayoutError(f"TP x PP = {tp_}x{pp_} = {tp_ * pp_} GPUs, not the {gpus} given [rule: dp-integer]", rule="dp-integer")
    b = int(batch or 1)
    ctx = int(context or model.max_seq_len)
    _check_infer_layout(model, tp_, pp_, ep_)
    if ctx > model.max_seq_len:
        warnings.append(f"context {ctx} exceeds {model.name}'s max_seq_len {model.max_seq_len}")
    mem = infer_memory(model, counts, recipe, tp=tp_, pp=pp_, ep=ep_, batch=b, context=ctx).item()
    n_gpus = max(tp_, ep_) * pp_
    layout_dict: dict[str, int | str | bool] = dict(tp=tp_, pp=pp_, ep=ep_, batch=b, context=ctx,
                                                     weight_format=recipe.weight_format, kv_format=recipe.kv_format)
    grid = _infer_grid(model, counts, recipe, ep_, b, ctx)
    rows = []
    for acc in accels:
        row = _row(acc, "infer", layout_dict, n_gpus, mem, kv=mem["kv_cache"], recipe_reserve=recipe.reserve,
                   alts=[], grid=grid)
        cap = acc.spec.hbm_bytes.nominal
        if cap is not None:
            mt = max_batch_x_context(model, counts, recipe, capacity_bytes=cap, tp=tp_, pp=pp_, ep=ep_, batch=b)
            mc = max_context(model, counts, recipe, capacity_bytes=cap, tp=tp_, pp=pp_, ep=ep_, batch=b)
            row = row.model_copy(update={"max_tokens": int(mt), "max_context": int(mc)})
        rows.append(row)
    _suggest_other_skus(rows, catalog, recipe.reserve)
    rdict: dict[str, float | int | str | bool] = {k: v for k, v in recipe.model_dump().items() if k != "reserve"}
    rdict["weight_bytes_per_param"] = recipe.weight_bytes
    rdict["kv_bytes_per_element"] = recipe.kv_bytes
    return FitResult(model=fm, mode="infer", recipe=rdict, reserve=recipe.reserve.text(), rows=rows,
                     warnings=warnings)


def _check_infer_layout(model: Any, tp: int, pp: int, ep: int) -> None:
    check_layout(Layout(tp=tp, pp=pp, dp=max(1, ep // tp) if ep > tp else 1,
                        ep=ep if model.moe else 1), model)
    if model.moe is None and ep > 1:
        raise LayoutError(f"EP > 1 needs an MoE model; {model.name} is dense [rule: ep-experts]", rule="ep-experts")
    if ep > 1 and tp % ep and ep % tp:
        raise LayoutError(f"EP={ep} and TP={tp}: one must divide the other (experts are spread over the TP "
                          "group, or over attention data-parallel replicas when EP > TP) [rule: expert-grid]", rule="expert-grid")


def _infer_grid(model: Any, counts: Any, recipe: InferRecipe, ep: int, batch: int, ctx: int
                ) -> list[tuple[float, int, str]]:
    import numpy as np

    from mi400plan.memory import infer_memory

    cand = []
    for t in _divisors(model.attention.num_heads, MAX_SEARCH_TP):
        for p in _divisors(model.num_layers, model.num_layers):
            if max(t, ep) * p > MAX_SEARCH_GPUS:
                continue
            try:
                _check_infer_layout(model, t, p, ep)
            except LayoutError:
                continue
            cand.append((t, p))
    if not cand:
        return []
    tps = np.array([c[0] for c in cand])
    pps = np.array([c[1] for c in cand])
    tot = infer_memory(model, counts, recipe, tp=tps, pp=pps, ep=ep, batch=batch, context=ctx).total
    rows = [(float(tot[i]), max(t, ep) * p, p, t, f"--tp {t} --pp {p}") for i, (t, p) in enumerate(cand)]
    rows.sort(key=lambda r: (r[1], max(r[2], r[3]), -r[3]))
    return [(r[0], r[1], r[4]) for r in rows]


# --- rows --------------------------------------------------------------------------------------


def _row(acc: Any, mode: str, layout: dict[str, Any], n_gpus: int, mem: dict[str, float], *, kv: float,
         recipe_reserve: Any, alts: list[tuple[str, Layout, float, int]], grid: list[tuple[float, int, str]]
         ) -> FitRow:
    spec = acc.spec
    cap, lo, hi, status = _capacity(acc)
    frac = recipe_reserve.fraction
    reserve = mem["reserve"] + (frac * cap if cap is not None else 0.0)
    parts = dict(
        weights=mem["weights"], gradients=mem.get("gradients", 0.0), optimizer=mem.get("optimizer", 0.0),
        activations=mem["activations"], kv_cache=kv, reserve=reserve,
    )
    ints = {k: int(round(v)) for k, v in parts.items()}
    mb = MemoryBytes(**ints, total=sum(ints.values()))
    need = mb.total
    common = dict(sku=spec.name, display_name=spec.display_name, profile=acc.path, mode=mode, layout=layout,
                  gpus=n_gpus, capacity_status=status, memory_bytes=mb, stage=int(mem["stage"]))
    if cap is None:
        return FitRow(
            **common, fits=False, verdict="unknown", capacity_bytes=None, headroom_bytes=None, headroom_pct=None,
            reason=f"HBM capacity of {spec.name} is not disclosed; needs {_gb(need)} per GPU (excluding the "
            f"{frac:.0%} capacity share of the reserve)",
        )
    fits = need <= cap
    headroom = int(round(cap)) - need
    row: dict[str, Any] = dict(
        common, fits=fits, verdict="fits" if fits else "does_not_fit", capacity_bytes=int(round(cap)),
        capacity_low_bytes=int(round(lo)) if lo is not None else None,
        capacity_high_bytes=int(round(hi)) if hi is not None else None,
        headroom_bytes=headroom, headroom_pct=round(100.0 * headroom / cap, 2),
    )
    if not fits:
        row["reason"] = f"needs {_gb(need)} per GPU but {spec.name} has {_gb(cap)}: short by {_gb(need - cap)}"
    # Does the verdict flip within the capacity range? (total excl. capacity share + frac * capacity)
    base = need - frac * cap
    if lo is not None and hi is not None and lo != hi:
        f_lo, f_hi = base <= lo * (1 - frac), base <= hi * (1 - frac)
        if f_lo != f_hi:
            row["flips"] = True
            row["range_note"] = (
                f"verdict flips within the {status} capacity range: fits at the high end {_gb(hi)}, "
                f"not at the low end {_gb(lo)}"
            )
    usable = cap * (1 - frac)
    if not fits:
        for text, lay, total, g in alts:
            if total <= usable:
                row["suggestion"] = f"fits with {text}: {_gb(total + frac * cap)} on {g} GPUs"
                break
    for total, g, text in grid:
        if total <= usable:
            row["min_gpus"], row["min_layout"] = g, text
            row["min_memory_bytes"] = int(round(total + frac * cap))
            if not fits and row.get("suggestion") is None:
                row["suggestion"] = f"fits on {g} GPUs with {text} ({_gb(total + frac * cap)} per GPU)"
            break
    return FitRow(**row)


def _catalog_capacities(catalog: Any) -> list[tuple[str, float]]:
    """(name, nominal HBM bytes) of every accelerator in the catalog that loads and discloses capacity."""
    out = []
    for n in catalog.names("accelerators"):
        try:
            est = catalog.get("accelerators", n).spec.hbm_bytes
        except ProfileError:
            continue
        if est.known:
            out.append((n, float(est.nominal)))
    return sorted(out, key=lambda x: (x[1], x[0]))


def _suggest_other_skus(rows: list[FitRow], catalog: Any, reserve: Any) -> None:
    """For rows that do not fit, name the smallest SKU in the catalog that fits as laid out.

    Memory per GPU is the same on every SKU except the capacity share of the reserve, so a SKU of
    capacity C fits when ``total - reserve_share(C_row) <= C * (1 - fraction)``.
    """
    if all(r.fits for r in rows):
        return
    caps = _catalog_capacities(catalog)
    for i, r in enumerate(rows):
        if r.fits:
            continue
        frac = reserve.fraction
        base = r.memory_bytes.total - frac * (r.capacity_bytes or 0)
        alt = next(((n, c) for n, c in caps if n != r.sku and base <= c * (1 - frac)), None)
        if alt is not None:
            extra = f"smallest SKU that fits as laid out: {alt[0]} ({_gb(alt[1])})"
            text = f"{r.suggestion}; or {extra}" if r.suggestion else extra
            rows[i] = r.model_copy(update={"suggestion": text})
        elif r.suggestion is None and r.verdict != "unknown":
            rows[i] = r.model_copy(update={
                "suggestion": f"no single change, no TP x PP up to {MAX_SEARCH_GPUS} GPUs and no SKU in the "
                "catalog fits; lower the sequence length or micro-batch, or shard more (--gpus with --zero 3)"
            })
