"""``fit``: does a model fit, on which SKU, with which layout, and by how much.

Memory does not depend on the SKU (only the capacity-proportional part of the reserve does), so the
per-GPU terms are computed once and compared with every accelerator's HBM capacity, including the
low/high ends of an estimated capacity.

Scale-up domains. The "fewest GPUs that fit" search keeps every tensor-parallel group inside one
scale-up domain of the SKU (``interconnect.scale_up_fabric`` -> the fabric's ``domain_size``: 8 for
an xGMI or HGX node, 72 for a Helios or NVL72 rack, the ICI pod for TPUs), because TP all-reduces
activations twice per layer and only the scale-up fabric carries that at speed (Megatron-LM,
Narayanan et al. 2021, arXiv 2104.04473, sec. 3.3, takeaway 1: TP up to the GPUs of a server,
then pipeline parallelism across servers). When the fewest-GPU layout overall needs a wider TP,
pipeline stages (or, for MoE training, expert-parallel ranks over extra data-parallel replicas)
grow instead and the row says so. Inference replicas follow the same rule as vLLM and SGLang deploy them: TP inside a
domain, pipeline stages across domains when one domain is not enough; a replica is counted in the
whole domains it occupies. A SKU whose domain is unknown keeps the unconstrained search.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from mi400plan.dualpipe import DUALPIPE
from mi400plan.dualpipe import problem as dualpipe_problem
from mi400plan.errors import LayoutError, PlannerError, ProfileError, UsageError
from mi400plan.records import record
from mi400plan.reserve import verdict_name
from mi400plan.results.fit import FitModel, FitResult, FitRow, MemoryBytes, RecipeValue
from mi400plan.specs.layout import (
    LOW_PRECISIONS,
    RECOMPUTE_CODES,
    TRAIN_PRECISIONS,
    InferRecipe,
    Layout,
    TrainOptions,
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
    precision, ...), ``[layout]`` (exactly ``Layout``'s fields) and optionally ``[recipe]`` (the
    ``TrainOptions`` switches that differ from the defaults; returned as ``meta["recipe"]``). Errors
    name file, line and field."""
    from pydantic import ValidationError

    from mi400plan.profiles import parse_toml, read_text_file, validation_error
    from mi400plan.specs.plan import PlanMeta

    p, text = read_text_file(path, "plan file")
    raw = parse_toml(str(p), text)
    for table in ("plan", "layout"):
        if not isinstance(raw.get(table), dict):
            raise ProfileError(f"a plan file needs a [{table}] table", path=str(p), field=table)
    meta: dict[str, Any] = {}
    for table, cls in (("plan", PlanMeta), ("layout", Layout), ("recipe", TrainOptions)):
        if table == "recipe" and not isinstance(raw.get("recipe"), dict):
            continue
        _plan_booleans(str(p), text, table, raw[table], cls)
        try:
            obj = cls.model_validate(raw[table])
        except ValidationError as exc:
            err = validation_error(str(p), text, exc)
            if err.field:  # name the field with its table: [plan.gpus], [layout.tp]
                body = err.message.split("]: ", 1)[-1]
                raise ProfileError(body, path=err.path, line=err.line, field=f"{table}.{err.field}") from None
            raise err from None
        if table == "plan":
            meta = obj.model_dump(exclude_none=True)
        elif table == "layout":
            layout = obj
        else:
            meta["recipe"] = obj
    if layout.gpus > 2**24 or max(layout.ep, layout.etp, layout.vpp, layout.micro_batch) > 2**16:
        raise ProfileError("the layout is larger than any cluster (more than 2**24 GPUs or a dimension past 65,536)",
                           path=str(p), field="layout")
    _plan_agrees(str(p), text, raw, meta, layout)
    if meta.get("gpus") is not None and meta["gpus"] != layout.gpus:
        raise ProfileError(
            f"gpus = {meta['gpus']} disagrees with the layout, which takes {layout.gpus} GPUs (TP x PP x CP x DP)",
            path=str(p), field="plan.gpus",
        )
    return meta, layout


def _key_line(text: str, table: str, key: str) -> int | None:
    """The line of ``key =`` inside ``[table]`` of a plan file's text (1-based), or None."""
    import re

    current = None
    for i, line in enumerate(text.splitlines(), 1):
        m = re.match(r"\s*\[([^\]]+)\]", line)
        if m:
            current = m.group(1).strip()
        elif current == table and re.match(rf"\s*{re.escape(key)}\s*=", line):
            return i
    return None


def _plan_booleans(path: str, text: str, table: str, values: dict[str, Any], cls: Any) -> None:
    """A plan's switches are TOML booleans: "yes" or 1 is an error naming the line, as a flag would be."""
    for key, value in values.items():
        field = cls.model_fields.get(key) if isinstance(key, str) else None
        if field is not None and field.annotation in (bool, bool | None) and not isinstance(value, bool):
            raise ProfileError(f"must be true or false, got {value!r}", path=path, line=_key_line(text, table, key),
                               field=f"{table}.{key}")


def _plan_agrees(path: str, text: str, raw: dict[str, Any], meta: dict[str, Any], layout: Layout) -> None:
    """The checks fit's flags get: a training precision, and recompute_modules / recompute_layers only
    with the recomputation level they describe."""
    precision = meta.get("precision")
    if meta.get("mode", "train") == "train" and precision is not None and precision not in TRAIN_PRECISIONS:
        raise ProfileError(f"unknown training precision {precision!r}; known: {', '.join(TRAIN_PRECISIONS)}", path=path,
                           line=_key_line(text, "plan", "precision"), field="plan.precision")
    recipe = raw.get("recipe") if isinstance(raw.get("recipe"), dict) else {}
    for key, level in (("recompute_modules", "selective"), ("recompute_layers", "full")):
        if recipe.get(key) not in (None, 0) and layout.recompute != level:
            raise ProfileError(f"{key} says what recompute = \"{level}\" recomputes; the layout has recompute = "
                               f"\"{layout.recompute}\"", path=path, line=_key_line(text, "recipe", key),
                               field=f"recipe.{key}")


def _recompute_level(recompute: str | None, modules: object, layers: int | None) -> str | None:
    """The recomputation level, with what ``--recompute-modules`` (selective) and ``--recompute-layers``
    (full) imply when ``--recompute`` is not given; ``UsageError`` when they contradict it or each other."""
    implied = [lvl for given, lvl in ((modules, "selective"), (layers, "full")) if given is not None]
    if len(implied) == 2:
        raise UsageError("--recompute-modules says what selective recomputation covers and --recompute-layers "
                         "what full recomputation covers; give the one for your --recompute")
    if not implied:
        return recompute
    if recompute is None:
        return implied[0]
    if recompute != implied[0]:
        flag = "--recompute-modules" if implied[0] == "selective" else "--recompute-layers"
        raise UsageError(f"{flag} says what --recompute {implied[0]} recomputes; got --recompute {recompute}",
                         hint="drop one of them")
    return recompute


@record
class LayoutPins:
    """A training or inference layout as asked (None: let ``fit`` choose): parallel degrees, ZeRO stage,
    micro-batch, activation recomputation (``none``/``selective``/``full``) and sequence parallelism."""

    tp: int | None = None
    pp: int | None = None
    vpp: int | None = None
    dp: int | None = None
    ep: int | None = None
    etp: int | None = None
    cp: int | None = None
    zero: int | None = None
    micro_batch: int | None = None
    recompute: str | None = None
    sequence_parallel: bool | None = None


# TrainOptions fields an inference fit ignores (warned about), and those the training fit reads itself.
_RECIPE_KEYS = ("recipe", "optimizer", "grad_dtype", "flash_attention", "dropout", "fp8_weight_copies", "fp8_params",
                "bf16_gemm_share",
                "recompute_modules", "recompute_layers", "fused_cross_entropy", "capacity_factor",
                "moe_capacity_factor", "vocab_divisible_by", "offload_layers", "overlap_tp", "overlap_ep", "overlap_pp",
                "overlap_cp", "overlap_dp", "split_embedding_loss", "uneven_pp", "finetune", "lora_rank", "lora_targets",
                "doc_length", "pack_efficiency")


def fit(
    catalog: Any,
    model_name: str | None,
    skus: list[str] | None = None,
    mode: str = "train",
    *,
    layout: LayoutPins | None = None,
    seq: int | None = None,
    gpus: int | None = None,
    global_batch: int | None = None,
    batch: int | None = None,
    plan: str | Path | None = None,
    options: TrainOptions | None = None,
    precision: str | None = None,
    kv_dtype: str | None = None,
    reserve: str | None = None,
) -> FitResult:
    """Fit ``model_name`` on each SKU (``["all"]`` or ``None``: every accelerator in the catalog).

    Explicit arguments override values read from ``plan``; ``layout`` pins the layout. Training recipe
    knobs travel in ``options`` (see ``specs.layout.TrainRecipe``): ``capacity_factor`` is the MoE routed-buffer allowance (default
    1.25: a load-imbalance margin over Megatron-Core's dropless routing), ``fp8_weight_copies`` the
    cached FP8 casts per GEMM weight with ``precision="fp8"`` (default 2, Transformer Engine's row-wise
    and transposed copies), ``vocab_divisible_by`` Megatron-LM's vocabulary padding unit (default 128,
    padded to a multiple of it x TP). ``options`` carries the whole training recipe (``TrainOptions``,
    the object ``sweep`` takes too: pipeline split, overlap switches, ...); a plan's ``[recipe]`` table
    comes under it, and ``precision`` and ``reserve`` on top. Raises ``LayoutError`` for a layout that
    breaks a structural rule, ``UnknownNameError`` for unknown names, ``UsageError`` for bad values.
    """
    from mi400plan.params import count_params

    lay = layout or LayoutPins()
    tp, pp, vpp, dp, ep, etp, cp = lay.tp, lay.pp, lay.vpp, lay.dp, lay.ep, lay.etp, lay.cp
    zero, micro_batch, recompute, sequence_parallel = lay.zero, lay.micro_batch, lay.recompute, lay.sequence_parallel
    warnings: list[str] = []
    plan_layout: Layout | None = None
    plan_options: TrainOptions | None = None
    if plan is not None:
        meta, plan_layout = read_plan(plan)
        plan_options = meta.get("recipe")
        model_name, skus, mode = _plan_names(meta, plan, model_name, skus, mode, warnings)
        gpus = gpus if gpus is not None else meta.get("gpus")
        seq = seq if seq is not None else meta.get("seq_len")
        global_batch = global_batch if global_batch is not None else meta.get("global_batch")
        precision = precision if precision is not None else meta.get("precision")
    if not model_name:
        raise UsageError("name a model (or give --plan with a [plan] model)")
    if mode not in ("train", "infer"):
        raise UsageError(f"unknown mode {mode!r}; use train or infer")
    loaded_model = catalog.get("models", model_name)
    model = loaded_model.spec
    counts = count_params(model)
    accels = _accelerators(catalog, skus, warnings)
    res = _reserve(reserve, options, accels, warnings)
    fm = FitModel(name=model.name, display_name=model.display_name, profile=loaded_model.path,
                  params_total=counts.total, params_active=counts.active, max_seq_len=int(model.max_seq_len))
    for v, what in ((tp, "--tp"), (pp, "--pp"), (vpp, "--vpp"), (dp, "--dp"), (ep, "--ep"), (etp, "--etp"),
                    (cp, "--cp"), (micro_batch, "--micro-batch"), (seq, "--seq"), (gpus, "--gpus"),
                    (global_batch, "--global-batch"), (batch, "--batch")):
        if v is not None and int(v) < 1:
            raise UsageError(f"{what} must be a positive integer, got {v}")
    given = options.explicit() if options is not None else {}
    recipe_kw = {k: given.get(k) for k in _RECIPE_KEYS} | {"precision": precision, "reserve": reserve}
    for key in ("capacity_factor", "moe_capacity_factor"):
        if mode == "train" and recipe_kw[key] is not None and model.moe is None:
            warnings.append(f"--{key.replace('_', '-')} applies to MoE models; {model.name} is dense")
    if mode == "train":
        opts = _train_options(plan_options, options, given, recipe_kw)
        opts = _stack_fp8(catalog, accels, opts, warnings)
        accels = _runnable(accels, opts.precision, warnings)
        recompute = _recompute_level(recompute, recipe_kw["recompute_modules"], recipe_kw["recompute_layers"])
        return _fit_train(
            catalog, model, counts, accels, fm, warnings, plan_layout,
            dict(tp=tp, pp=pp, vpp=vpp, dp=dp, ep=ep, etp=etp, cp=cp, zero=zero, micro_batch=micro_batch,
                 recompute=recompute, sequence_parallel=sequence_parallel),
            seq=seq, gpus=gpus, global_batch=global_batch, recipe=opts.train_recipe(), options=opts,
        )
    warnings += _training_only(recipe_kw)
    return _fit_infer(
        catalog, model, counts, accels, fm, warnings,
        tp=tp if tp is not None else (plan_layout.tp if plan_layout else None),
        pp=pp if pp is not None else (plan_layout.pp if plan_layout else None),
        ep=ep, gpus=gpus, batch=batch, context=seq,
        recipe=infer_recipe(precision, kv_dtype=kv_dtype, reserve=res),
    )


def _stack_fp8(catalog: Any, accels: list[Any], opts: TrainOptions, warnings: list[str]) -> TrainOptions:
    """``opts`` with ``--precision fp8`` priced as the stack's FP8 recipe (``stack_precision.fp8_as``), the
    note that says so added to ``warnings``."""
    if opts.precision != "fp8":  # fp8_as leaves every other precision as it is
        return opts
    from mi400plan.stack_precision import fp8_as

    precision, note = fp8_as(catalog, [a.spec for a in accels], opts.precision, opts.stack_request())
    if note:
        warnings.append(note)
    return opts if precision == opts.precision else opts.model_copy(update={"precision": precision})


def _runnable(accels: list[Any], precision: str, warnings: list[str]) -> list[Any]:
    """The SKUs that run the training ``precision`` (``lowp.refusal``): one SKU that does not is a usage
    error naming --precision; among several, those that do not are left out with a warning."""
    from mi400plan.lowp import refusal

    refused = [(a, refusal(precision, a.spec)) for a in accels]
    if len(accels) == 1 and refused[0][1] is not None:
        raise refused[0][1]
    out = [a for a, r in refused if r is None]
    if not out:
        raise refused[0][1]  # type: ignore[misc]
    left = [a.spec.name for a, r in refused if r is not None]
    if left:
        warnings.append(f"--precision {precision}: left out {', '.join(left)} (no {precision.upper()} training there)")
    return out


def _plan_names(meta: dict[str, Any], plan: str | Path, model_name: str | None, skus: list[str] | None, mode: str,
                warnings: list[str]) -> tuple[str | None, list[str] | None, str]:
    """Model, SKUs and mode from a plan's ``[plan]`` table where the call does not give them."""
    if model_name is None:
        model_name = meta.get("model")
    elif meta.get("model") and str(meta["model"]) != model_name:
        warnings.append(f"plan {plan} was made for model {meta['model']!r}, fitting {model_name!r}")
    if not skus and meta.get("sku"):
        skus = [str(meta["sku"])]
    if meta.get("mode") in ("train", "infer") and mode is None:
        mode = str(meta["mode"])
    return model_name, skus, mode


def _accelerators(catalog: Any, skus: list[str] | None, warnings: list[str]) -> list[Any]:
    """The accelerator profiles named (``all`` or none: every one), with roadmap and approximation warnings."""
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
    roadmap = [a.spec for a in accels if a.spec.roadmap]
    if len(roadmap) == 1:
        warnings.append(f"{roadmap[0].name} is a roadmap entry (announced, not shipping): {roadmap[0].roadmap}")
    elif roadmap:
        warnings.append("roadmap entries (announced, not shipping): " + ", ".join(a.name for a in roadmap))
    from mi400plan.profiles import approximation_warnings

    warnings += approximation_warnings(catalog, [a.spec.name for a in accels])
    return accels


def _reserve(reserve: str | None, options: TrainOptions | None, accels: list[Any], warnings: list[str]) -> Any:
    """The ``--reserve`` given (inference: the flag; training: the recipe object's), parsed, with a warning
    when it takes some SKU's whole usable HBM (``reserve_check.oversized_reserve``); None when not given."""
    text = reserve if reserve is not None else (options.reserve if options is not None else None)
    if text is None:
        return None
    res = parse_reserve(text)
    from mi400plan.reserve_check import oversized_reserve

    warnings += oversized_reserve(text, res, [(a.spec.name, _capacity(a)[0]) for a in accels])
    return res


def _train_options(plan_options: TrainOptions | None, options: TrainOptions | None, given: dict[str, Any],
                   recipe_kw: dict[str, Any]) -> TrainOptions:
    """The training recipe: the plan's ``[recipe]``, then ``options``, then the single keyword arguments."""
    base_opts = plan_options or TrainOptions()
    if options is not None:
        base_opts = base_opts.merged(**given)
    precision = recipe_kw["precision"]
    if precision is not None and precision not in TRAIN_PRECISIONS + ("fp4",):
        train_recipe(precision=precision)  # the usual "unknown training precision" error
    opts = base_opts.merged(**recipe_kw)
    if opts.fp8_weight_copies is not None and opts.precision not in LOW_PRECISIONS:
        raise UsageError("FP8 weight copies apply to low-precision training; add --precision fp8 (or mxfp8, "
                         "nvfp4, mxfp4)")
    return opts


def _training_only(recipe_kw: dict[str, Any]) -> list[str]:
    """Warnings for training-recipe values given to an inference fit, which ignores them."""
    out = []
    recipe = recipe_kw["recipe"]
    if recipe is not None and recipe not in ("bf16",):
        out.append(f"recipe {recipe!r} applies to training; inference uses --precision and --kv-dtype")
    for key, what in (("capacity_factor", "--capacity-factor"), ("moe_capacity_factor", "--moe-capacity-factor"),
                      ("fp8_weight_copies", "--fp8-weight-copies"),
                      ("fp8_params", "--fp8-params"), ("recompute_modules", "--recompute-modules"),
                      ("recompute_layers", "--recompute-layers"), ("fused_cross_entropy", "--fused-cross-entropy"),
                      ("vocab_divisible_by", "--vocab-divisible-by"), ("offload_layers", "--offload-layers")):
        if recipe_kw[key] is not None:
            out.append(f"{what} applies to training; inference ignores it")
    return out


# --- helpers -----------------------------------------------------------------------------------


def _gb(x: float) -> str:
    return f"{x / GB:,.1f} GB ({x / GiB:,.1f} GiB)"


def _capacity(acc: Any) -> tuple[float | None, float | None, float | None, str]:
    est = acc.spec.hbm_bytes
    if not est.known:
        return None, None, None, est.status
    return est.nominal, est.lo, est.hi, est.status


def _divisors(n: int, limit: int) -> list[int]:
    from mi400plan.intmath import divisors

    return divisors(n, limit)


def _valid(layout: Layout, model: Any, seq: int | None, options: TrainOptions | None = None) -> bool:
    o = options or TrainOptions()
    try:
        check_layout(layout, model, seq_len=seq, split_embedding_loss=o.split_embedding_loss, uneven_pp=o.uneven_pp)
    except LayoutError:
        return False
    return o.pp_schedule != DUALPIPE or dualpipe_problem(layout.pp, layout.vpp, None) is None


# --- scale-up domains --------------------------------------------------------------------------

# Short names for a fabric in sentences ("8-GPU xGMI node"), looked up in its display name and
# technology in this order; a fabric that matches none is called "scale-up".
_FABRIC_WORDS = ("Helios", "NVL72", "xGMI", "UALink", "NVLink", "ICI")
# Up to this many GPUs a scale-up domain is one server ("node"); larger switched domains are racks;
# a torus is a pod.
NODE_MAX_GPUS = 16


@record
class Domain:
    """The scale-up domain of a SKU: ``size`` GPUs on ``fabric`` (``size`` None: unknown, see ``why``)."""

    size: int | None
    fabric: str | None = None
    label: str | None = None  # e.g. "8-GPU xGMI node", "72-GPU Helios rack"
    status: str | None = None  # status of the fabric's domain_size estimate
    why: str | None = None  # why the size is unknown

    @property
    def plural(self) -> str:
        return f"{self.label}s"

    def count(self, width: int, groups: int) -> int | None:
        """Domains occupied by ``groups`` groups of ``width`` consecutive GPUs when no group is split
        across domains: ``floor(D / width)`` groups per domain, or ``ceil(width / D)`` domains per
        group when a group is wider than a domain. None when the domain is unknown."""
        if self.size is None:
            return None
        if width <= self.size:
            return math.ceil(groups / (self.size // width))
        return groups * math.ceil(width / self.size)


def scale_up_domain(catalog: Any, acc: Any, cache: dict[str, Domain] | None = None) -> Domain:
    """The SKU's scale-up domain from ``interconnect.scale_up_fabric`` -> fabric ``domain_size``
    (nominal GPUs). A missing fabric name, an unreadable fabric or an undisclosed size give a
    ``Domain`` with ``size=None`` and the reason."""
    spec = acc.spec
    name = spec.interconnect.scale_up_fabric
    if not name:
        return Domain(None, why=f"{spec.name} names no scale-up fabric (interconnect.scale_up_fabric)")
    if cache is not None and name in cache:
        return cache[name]
    try:
        fab = catalog.get("fabrics", name).spec
    except PlannerError as exc:
        dom = Domain(None, fabric=name, why=f"scale-up fabric {name!r} of {spec.name} cannot be read: {exc.message}")
    else:
        est = fab.domain_size
        if not est.known or est.nominal is None or est.nominal < 1:
            dom = Domain(None, fabric=fab.name, why=f"scale-up fabric {fab.name} does not state its domain size")
        else:
            size = int(est.nominal)
            text = f"{fab.display_name} {fab.technology or ''}"
            word = next((w for w in _FABRIC_WORDS if w in text), "scale-up")
            unit = "pod" if fab.topology == "torus" else ("node" if size <= NODE_MAX_GPUS else "rack")
            dom = Domain(size, fabric=fab.name, label=f"{size:,}-GPU {word} {unit}", status=est.status)
    if cache is not None:
        cache[name] = dom
    return dom


@record
class Cand:
    """One candidate layout of the fewest-GPUs search.

    ``total`` is per-GPU bytes without the capacity share of the reserve (compare with
    ``capacity * (1 - fraction)``). ``width`` x ``groups`` is how its GPUs are placed on domains:
    training, ``gpus / tp`` TP groups of ``tp``; inference, ``pp`` stages of ``max(tp, ep)`` GPUs.
    """

    total: float
    gpus: int
    tp: int
    pp: int
    ep: int
    dp: int
    flags: str  # e.g. "--tp 8 --pp 2"; complete: re-running fit with them gives this layout
    text: str  # e.g. "TP8 PP2"
    width: int
    groups: int
    frag: float = 0.0  # the fragmentation share of ``total``: the layout is valid when total - frag fits

    @property
    def need(self) -> float:
        return self.total - self.frag


def _train_key(c: Cand) -> tuple[int, ...]:
    """Fewest GPUs first; among equal counts the most balanced TP x PP, then the larger TP, then the
    smaller EP and DP."""
    return (c.gpus, max(c.pp, c.tp), -c.tp, c.ep, c.dp)


def _infer_key(dom: Domain) -> Any:
    """Serving order of inference replicas (domain known, TP within it):

    * a replica that fits in one domain: fewest GPUs (several small replicas share a domain), then
      the larger TP, then fewer stages;
    * a replica that needs ``n > 1`` domains occupies them whole (its last stage cannot share a
      domain's fabric with another replica's TP group without crossing it): fewest domains, then the
      larger TP (vLLM and SGLang multi-node serving: TP inside a node, PP across nodes), then the
      fewest GPUs, fewer stages, smaller EP.

    Unknown domain: fewest GPUs, then the most balanced TP x PP (the order used before domains).
    """
    if dom.size is None:
        return lambda c: (c.gpus, max(c.pp, c.tp), -c.tp, c.ep)

    def key(c: Cand) -> tuple[int, ...]:
        n = dom.count(c.width, c.groups) or 1
        if n == 1:
            return (1, c.gpus, -c.tp, c.pp, c.ep)
        return (n, 0, -c.tp, c.gpus, c.pp, c.ep)

    return key


def _gpus_key(c: Cand) -> tuple[int, ...]:
    return (c.gpus, max(c.pp, c.tp), -c.tp, c.ep, c.dp)


@record
class Pick:
    best: Cand | None  # the layout to suggest: TP within the domain when any such layout fits
    fewest: Cand | None  # the fewest-GPU layout with TP unbounded
    note: str | None  # why best differs from fewest, or that the domain is unknown


def pick_min_layout(grid: list[Cand], usable: float, dom: Domain, mode: str) -> Pick:
    """The layout to suggest among those that fit ``usable`` bytes per GPU: TP kept within ``dom``;
    training, fewest GPUs (``_train_key``); inference, the serving order of ``_infer_key``."""
    key = _train_key if mode == "train" else _infer_key(dom)
    fitting = [c for c in grid if c.need <= usable]  # fits or tight, as sweep's search counts them
    if not fitting:
        note = f"{dom.why}; TP was not limited to a domain" if dom.size is None else None
        return Pick(None, None, note)
    fewest = min(fitting, key=_gpus_key)
    if dom.size is None:
        best = min(fitting, key=key)
        return Pick(best, fewest, f"{dom.why}; TP was not limited to a domain")
    size = dom.size
    inside = [c for c in fitting if c.tp <= size]
    est = "" if dom.status in ("disclosed", "derived", None) else f" (domain size: {dom.status})"
    if not inside:
        return Pick(fewest, fewest, f"no layout with TP within the {dom.label}{est} fits; "
                                    f"{fewest.text} spreads TP{fewest.tp} over {math.ceil(fewest.tp / size)} domains")
    best = min(inside, key=key)
    few_in = min(inside, key=_gpus_key)
    notes = []
    if fewest.gpus < few_in.gpus:
        grew = []
        if few_in.pp > fewest.pp:
            grew.append(f"PP grows to {few_in.pp}")
        if few_in.ep > fewest.ep:
            grew.append(f"EP grows to {few_in.ep}"
                        + (f" over {few_in.dp} data-parallel replicas" if few_in.dp > fewest.dp else ""))
        how = " and ".join(grew) if grew else "more GPUs"
        notes.append(f"TP kept within the {dom.label}{est}: {how} instead ({few_in.text} on {few_in.gpus:,} GPUs); "
                     f"the fewest GPUs overall, {fewest.gpus:,} with {fewest.text}, needs TP{fewest.tp} across domains")
    if best.gpus > few_in.gpus:
        n = dom.count(best.width, best.groups)
        notes.append(f"the replica needs {n} x {dom.plural} either way, so it uses them whole with TP up to the "
                     f"domain: {best.text} on {best.gpus:,} GPUs (fewest GPUs: {few_in.gpus:,} with {few_in.text})")
    return Pick(best, fewest if fewest.gpus < best.gpus else best, "; ".join(notes) or None)


# --- training ----------------------------------------------------------------------------------


def _train_terms(model: Any, counts: Any, recipe: TrainRecipe, layout: Layout, seq: int, nmb: Any,
                 options: TrainOptions | None = None, **arrays: Any) -> Any:
    """``memory.train_memory`` of ``layout`` (entries of ``arrays`` replace its fields); the pipeline
    split follows ``options`` as ``sweep`` picks it (``pipeline.pipeline_split``)."""
    import numpy as np

    from mi400plan.memory import train_memory
    from mi400plan.pipeline import pipeline_split_array

    o = options or TrainOptions()

    kw: dict[str, Any] = dict(
        tp=layout.tp, pp=layout.pp, vpp=layout.vpp, dp=layout.dp, ep=layout.ep, etp=layout.etp, cp=layout.cp,
        zero=layout.zero, micro_batch=layout.micro_batch, recompute=RECOMPUTE_CODES[layout.recompute],
        sequence_parallel=layout.sequence_parallel,
    )
    kw.update(arrays)
    split = np.maximum(pipeline_split_array(model.num_layers, kw["pp"], kw["vpp"], o.split_embedding_loss, o.uneven_pp), 0)
    return train_memory(model, counts, recipe, seq_len=seq, num_microbatches=nmb, pipeline_split=split, **kw)


def _fit_train(catalog: Any, model: Any, counts: Any, accels: list[Any], fm: FitModel, warnings: list[str],
               plan_layout: Layout | None, given: dict[str, Any], *, seq: int | None, gpus: int | None,
               global_batch: int | None, recipe: TrainRecipe, options: TrainOptions) -> FitResult:
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
    check_layout(layout, model, seq_len=seq_len, split_embedding_loss=options.split_embedding_loss,
                 uneven_pp=options.uneven_pp)
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
    if recipe.pp_schedule == DUALPIPE and (why := dualpipe_problem(layout.pp, layout.vpp, nmb)) is not None:
        raise UsageError(why)
    if seq_len > model.max_seq_len:
        warnings.append(f"sequence length {seq_len} exceeds {model.name}'s max_seq_len {model.max_seq_len}")
    from mi400plan.finetune import check_lora, finetune_text, lora_of
    from mi400plan.memory import padded_vocab_size

    _check_offload(recipe.offload_layers, model, layout, options)
    check_lora(model, lora_of(recipe))
    mem = _train_terms(model, counts, recipe, layout, seq_len, nmb, options).item()
    layout_dict: dict[str, int | str | bool] = dict(layout.model_dump())
    layout_dict["schedule"] = recipe.pp_schedule if recipe.pp_schedule == DUALPIPE else layout.schedule
    layout_dict["seq_len"] = seq_len
    if global_batch is not None:
        layout_dict["global_batch"] = int(global_batch)

    # Alternatives for suggestions: single changes, then the smallest model-parallel grid.
    alts = _train_alternatives(model, counts, recipe, layout, seq_len, nmb, gpus, options)
    grid = _train_grid(model, counts, recipe, layout, seq_len, global_batch, options)

    rows = []
    cache: dict[str, Domain] = {}
    vocab = int(padded_vocab_size(model.vocab_size, recipe.vocab_divisible_by * layout.tp))
    for acc in accels:
        rows.append(
            _row(acc, "train", layout_dict, layout.gpus, mem, kv=0.0, recipe_reserve=recipe.reserve,
                 alts=alts, grid=grid, dom=scale_up_domain(catalog, acc, cache), given_tp=layout.tp,
                 given_width=layout.tp, given_groups=layout.gpus // layout.tp).model_copy(
                update={"padded_vocab_size": vocab,
                        "host_offload_bytes": int(round(mem["offloaded"])) if recipe.offload_layers else None,
                        "stack": _stack_label(catalog, acc.spec, options, warnings)})
        )
    _suggest_other_skus(rows, catalog, recipe.reserve)
    rdict: dict[str, RecipeValue] = {
        k: (list(v) if isinstance(v, tuple) else v) for k, v in recipe.model_dump().items()
        if k not in ("reserve", "packed_docs") and not (k in ("expert_capacity_factor", "mtp_layers") and not v)
    }
    rdict["bytes_per_param"] = recipe.bytes_per_param(model.hidden_size)
    from mi400plan.pipeline import pipeline_split, split_text

    rdict.update(options.search_flags())
    code = pipeline_split(model.num_layers, layout.pp, layout.vpp, options.split_embedding_loss, options.uneven_pp)
    rdict["pipeline_split"] = split_text(model.num_layers, layout.pp, layout.vpp, max(code, 0))
    rdict["fp8_weight_bytes"] = recipe.fp8_weight_bytes
    rdict["gemm_weight_bytes"] = recipe.gemm_weight_bytes
    ft = finetune_text(options)
    if ft:
        rdict["finetune"] = ft
    if recipe.packed_docs is not None:  # a plan's [recipe] table may carry it (fit --plan); memory is unchanged
        from mi400plan.packing import packing_text

        rdict["packing"] = packing_text(recipe.packed_docs, seq_len)
    return FitResult(model=fm, mode="train", recipe=rdict, reserve=recipe.reserve.text(), rows=rows,
                     warnings=warnings)


def _stack_label(catalog: Any, acc: Any, options: TrainOptions, warnings: list[str]) -> str | None:
    """The software stack ``acc`` is priced on (``stacks.resolve_stack``), as text; memory does not
    depend on it yet, so a stack that does not run on this SKU is a warning here, not an error."""
    from mi400plan.stacks import resolve_stack

    try:
        resolved = resolve_stack(catalog, acc, options.stack_request())
    except UsageError as exc:
        warnings.append(f"{acc.name}: {exc.message}")
        return None
    return f"{resolved.label()} ({resolved.basis})" if resolved else None


def _train_alternatives(model: Any, counts: Any, recipe: TrainRecipe, layout: Layout, seq: int,
                        nmb: int | None, gpus: int | None,
                        options: TrainOptions | None = None) -> list[tuple[str, Layout, float, int, float]]:
    """Single-step layout changes, smallest first: (flag text, layout, total bytes excl. capacity reserve,
    GPUs, the same total without the fragmentation share). With a fixed GPU count, raising TP or PP lowers DP. A row skips a TP wider than its SKU's
    scale-up domain (and wider than the TP given)."""
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
            if lay is not None and _valid(lay, model, seq, options):
                cands.append((f"--{field} {lay.model_dump()[field]}" + (f" (dp {lay.dp})" if lay.dp != layout.dp else ""),
                              lay))
                break
    out = []
    for text, lay in cands:
        if not _valid(lay, model, seq, options):
            continue
        m = _train_terms(model, counts, recipe, lay, seq, nmb, options).item()
        out.append((text, lay, m["total"], lay.gpus, m["total"] - m["fragmentation"]))
    return out


def _train_grid(model: Any, counts: Any, recipe: TrainRecipe, layout: Layout, seq: int,
                global_batch: int | None, options: TrainOptions | None = None) -> list[Cand]:
    """Every valid (tp, pp, ep) with the other settings kept, fewest GPUs first (``_train_key``).

    MoE: EP may exceed TP x CP x DP only by laying the expert grid over more data-parallel replicas
    (Megatron-Core: ``etp * ep`` divides ``tp * cp * dp``), so each (tp, pp, ep) gets the smallest
    DP >= the given one, and a multiple of it, that makes the expert grid whole. With a global batch,
    candidates whose DP x micro-batch does not divide it are dropped.
    """
    import numpy as np

    heads = model.attention.num_heads
    tps = _divisors(heads, MAX_SEARCH_TP)
    pps = _divisors(model.num_layers, model.num_layers)
    eps = _divisors(model.moe.num_experts, model.moe.num_experts) if model.moe else [1]
    cand: list[Layout] = []
    nmbs: list[float] = []
    d = layout.model_dump()
    for t in tps:
        for p in pps:
            if d["vpp"] > 1 and p < 2:
                continue
            for e in eps:
                dp = layout.dp
                if model.moe is not None:
                    need, have = e * layout.etp, t * layout.cp * dp
                    dp *= need // math.gcd(need, have)
                if t * p * layout.cp * dp > MAX_SEARCH_GPUS:
                    continue
                nmb = math.inf
                if global_batch is not None:
                    per = layout.micro_batch * dp
                    if global_batch % per:
                        continue
                    nmb = global_batch // per
                lay = Layout(**{**d, "tp": t, "pp": p, "ep": e, "dp": dp})
                if recipe.pp_schedule == DUALPIPE and dualpipe_problem(p, lay.vpp, int(nmb) if nmb != math.inf else None):
                    continue
                if _valid(lay, model, seq, options):
                    cand.append(lay)
                    nmbs.append(nmb)
    if not cand:
        return []
    mem = _train_terms(
        model, counts, recipe, layout, seq, np.array(nmbs), options,
        tp=np.array([c.tp for c in cand]), pp=np.array([c.pp for c in cand]), ep=np.array([c.ep for c in cand]),
        dp=np.array([c.dp for c in cand]),
    )
    tot, frag = mem.total, mem.fragmentation
    out = []
    for i, c in enumerate(cand):
        flags = f"--tp {c.tp} --pp {c.pp}" + (f" --ep {c.ep}" if model.moe else "") + (f" --dp {c.dp}" if c.dp > 1 else "")
        text = f"TP{c.tp} PP{c.pp}" + (f" EP{c.ep}" if c.ep > 1 else "") + (f" DP{c.dp}" if c.dp > 1 else "")
        out.append(Cand(float(tot[i]), c.gpus, c.tp, c.pp, c.ep, c.dp, flags, text,
                        width=c.tp, groups=c.gpus // c.tp, frag=float(frag[i])))
    out.sort(key=_train_key)
    return out


# --- inference ---------------------------------------------------------------------------------


def _fit_infer(catalog: Any, model: Any, counts: Any, accels: list[Any], fm: FitModel, warnings: list[str], *,
               tp: int | None, pp: int | None, ep: int | None, gpus: int | None, batch: int | None,
               context: int | None, recipe: InferRecipe) -> FitResult:
    from mi400plan.memory import infer_memory, max_batch_x_context, max_context, padded_vocab_size

    vocab = int(padded_vocab_size(model.vocab_size, recipe.vocab_padding_size))

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
    grid = _infer_grid(model, counts, recipe, ep_, b, ctx, vary_ep=model.moe is not None and ep is None)
    rows = []
    cache: dict[str, Domain] = {}
    accels = _runs_format(accels, recipe.weight_format, warnings)
    for acc in accels:
        row = _row(acc, "infer", layout_dict, n_gpus, mem, kv=mem["kv_cache"], recipe_reserve=recipe.reserve,
                   alts=[], grid=grid, dom=scale_up_domain(catalog, acc, cache), given_tp=tp_,
                   given_width=max(tp_, ep_), given_groups=pp_)
        cap = acc.spec.hbm_bytes.nominal
        if cap is not None:
            mt = max_batch_x_context(model, counts, recipe, capacity_bytes=cap, tp=tp_, pp=pp_, ep=ep_, batch=b)
            mc = max_context(model, counts, recipe, capacity_bytes=cap, tp=tp_, pp=pp_, ep=ep_, batch=b)
            if mc > model.max_seq_len:  # the KV cache holds more, the model attends over no more than this
                warnings.append(f"{acc.spec.name}: longest context capped at {model.name}'s max_seq_len "
                                f"{model.max_seq_len:,} tokens (the KV room at batch {b} holds {int(mc):,})")
                mc = model.max_seq_len
            row = row.model_copy(update={"max_tokens": int(mt), "max_context": int(mc)})
        rows.append(row.model_copy(update={"padded_vocab_size": vocab}))
    _suggest_other_skus(rows, catalog, recipe.reserve)
    rdict: dict[str, float | int | str | bool] = {k: v for k, v in recipe.model_dump().items() if k != "reserve"}
    rdict["weight_bytes_per_param"] = recipe.weight_bytes
    rdict["kv_bytes_per_element"] = recipe.kv_bytes
    return FitResult(model=fm, mode="infer", recipe=rdict, reserve=recipe.reserve.text(), rows=rows,
                     warnings=warnings)


def _runs_format(accels: list[Any], weight_format: str, warnings: list[str]) -> list[Any]:
    """The SKUs that run ``weight_format`` (``formats.format_refusal``, the rule ``serve`` applies): the
    others are dropped with a warning, and when none is left the first refusal is the error."""
    from mi400plan.formats import format_refusal

    kept, refused = [], []
    for acc in accels:
        why = format_refusal(weight_format, acc.spec.name, acc.spec.vendor)
        if why is None:
            kept.append(acc)
        else:
            refused.append(why)
    if not kept and refused:
        raise refused[0]
    warnings.extend(f"{why.message}: left out" for why in refused)
    return kept


def _check_infer_layout(model: Any, tp: int, pp: int, ep: int) -> None:
    check_layout(Layout(tp=tp, pp=pp, dp=max(1, ep // tp) if ep > tp else 1,
                        ep=ep if model.moe else 1), model)
    if model.moe is None and ep > 1:
        raise LayoutError(f"EP > 1 needs an MoE model; {model.name} is dense [rule: ep-experts]", rule="ep-experts")
    if ep > 1 and tp % ep and ep % tp:
        raise LayoutError(f"EP={ep} and TP={tp}: one must divide the other (experts are spread over the TP "
                          "group, or over attention data-parallel replicas when EP > TP) [rule: expert-grid]", rule="expert-grid")


def _infer_grid(model: Any, counts: Any, recipe: InferRecipe, ep: int, batch: int, ctx: int, *,
                vary_ep: bool = False) -> list[Cand]:
    """Every valid (tp, pp) of one replica with the given EP, batch and context (unsorted: the order
    depends on each SKU's domain, see ``_infer_key``). ``vary_ep`` (MoE, no --ep given): also every
    EP above TP that TP divides and that divides the experts (experts over ``ep`` GPUs, attention
    data-parallel over ``ep / tp`` TP groups, as DeepSeek-V3 and SGLang serve MoE)."""
    import numpy as np

    from mi400plan.memory import infer_memory

    if vary_ep and model.moe is not None:
        eps = _divisors(model.moe.num_experts, model.moe.num_experts)
    else:
        eps = [ep]
    cand = []
    for t in _divisors(model.attention.num_heads, MAX_SEARCH_TP):
        for p in _divisors(model.num_layers, model.num_layers):
            for e in eps:
                if e != ep and (e <= t or e % t):
                    continue  # EP <= TP holds no fewer experts per GPU than EP = 1
                if max(t, e) * p > MAX_SEARCH_GPUS:
                    continue
                try:
                    _check_infer_layout(model, t, p, e)
                except LayoutError:
                    continue
                cand.append((t, p, e))
    if not cand:
        return []
    tps = np.array([c[0] for c in cand])
    pps = np.array([c[1] for c in cand])
    epa = np.array([c[2] for c in cand])
    tot = infer_memory(model, counts, recipe, tp=tps, pp=pps, ep=epa, batch=batch, context=ctx).total
    out = []
    for i, (t, p, e) in enumerate(cand):
        flag = f" --ep {e}" if e > 1 else ""
        out.append(Cand(float(tot[i]), max(t, e) * p, t, p, e, 1, f"--tp {t} --pp {p}{flag}",
                        f"TP{t} PP{p}" + (f" EP{e}" if e > 1 else ""), width=max(t, e), groups=p))
    return out


def _check_offload(n: int, model: Any, layout: Layout, options: TrainOptions) -> None:
    """Refuse more offloaded layers than a model chunk can offload: Transformer Engine's offload
    context never offloads a chunk's last layer (``num_layers <= model_layers - 1``), and the
    shortest chunk of the layout bounds what every chunk can do (``sweep`` clamps per candidate)."""
    if n <= 0:
        return
    from mi400plan.offload import RULE, offload_refusal
    from mi400plan.pipeline import chunk_layers, pipeline_split

    why = offload_refusal(n, layout.pp, layout.recompute, model.num_layers)
    if why:
        raise LayoutError(f"--offload-layers {n}: {why} [rule: {RULE}]", rule=RULE)

    code = pipeline_split(model.num_layers, layout.pp, layout.vpp, options.split_embedding_loss, options.uneven_pp)
    chunks = chunk_layers(model.num_layers, layout.pp, layout.vpp, max(code, 0))
    most = int(min(chunks)) - 1
    if n > most:
        raise UsageError(
            f"--offload-layers {n}: a model chunk of this layout holds {int(min(chunks))} layers and the last "
            f"one is never offloaded, so at most {most} can be",
            hint=f"use --offload-layers {max(most, 0)} or fewer, or fewer pipeline stages")


# --- rows --------------------------------------------------------------------------------------


def _placement(dom: Domain, c: Cand) -> str:
    """Where a layout's GPUs go, e.g. "2 x 8-GPU xGMI nodes, TP8 PP2" (unknown domain: the layout)."""
    n = dom.count(c.width, c.groups)
    if n is None:
        return c.text
    where = f"within one {dom.label}" if n == 1 else f"{n:,} x {dom.plural}"
    return f"{where}, {c.text}"


def _row(acc: Any, mode: str, layout: dict[str, Any], n_gpus: int, mem: dict[str, float], *, kv: float,
         recipe_reserve: Any, alts: list[tuple[str, Layout, float, int, float]], grid: list[Cand], dom: Domain,
         given_tp: int, given_width: int, given_groups: int) -> FitRow:
    spec = acc.spec
    cap, lo, hi, status = _capacity(acc)
    frac = recipe_reserve.fraction
    reserve = mem["reserve"] + (frac * cap if cap is not None else 0.0)
    parts = dict(
        weights=mem["weights"], gradients=mem.get("gradients", 0.0), optimizer=mem.get("optimizer", 0.0),
        activations=mem["activations"], kv_cache=kv, reserve=reserve,
    )
    ints = {k: int(round(v)) for k, v in parts.items()}
    frag = int(round(mem.get("fragmentation", 0.0)))
    mb = MemoryBytes(**ints, total=sum(ints.values()), fragmentation=frag)
    need = mb.total
    hard = need - frag  # the need without the fragmentation share: within capacity, the layout is valid
    common: dict[str, Any] = dict(
        sku=spec.name, display_name=spec.display_name, profile=acc.path, mode=mode, layout=layout,
        gpus=n_gpus, capacity_status=status, memory_bytes=mb, stage=int(mem["stage"]),
        domain_size=dom.size, domain_fabric=dom.fabric, domain_label=dom.label,
        domains=dom.count(given_width, given_groups),
    )
    if dom.size is not None and given_tp > dom.size:
        common["layout_domain_note"] = (
            f"TP{given_tp} as given is wider than the {dom.label}: its all-reduces (two per layer) cross "
            f"the scale-out network")
    if cap is None:
        return FitRow(
            **common, fits=False, verdict="unknown", capacity_bytes=None, headroom_bytes=None, headroom_pct=None,
            reason=f"HBM capacity of {spec.name} is not disclosed; needs {_gb(need)} per GPU (excluding the "
            f"{frac:.0%} capacity share of the reserve)",
        )
    verdict = verdict_name(hard, need, cap)
    fits = verdict != "does_not_fit"  # fits or tight: the layout is valid, as sweep's search counts it
    headroom = int(round(cap)) - need
    row: dict[str, Any] = dict(
        common, fits=fits, verdict=verdict, capacity_bytes=int(round(cap)),
        capacity_low_bytes=int(round(lo)) if lo is not None else None,
        capacity_high_bytes=int(round(hi)) if hi is not None else None,
        headroom_bytes=headroom, headroom_pct=round(100.0 * headroom / cap, 2),
    )
    if not fits:
        with_frag = f" before the allocator-fragmentation share ({_gb(need)} with it)" if frag else ""
        row["reason"] = f"needs {_gb(hard)} per GPU{with_frag} but {spec.name} has {_gb(cap)}: short by {_gb(hard - cap)}"
    elif verdict == "tight":
        row["reason"] = (f"tight: needs {_gb(need)} per GPU with the allocator-fragmentation share of {_gb(frag)}, "
                         f"{_gb(hard)} without it, against {_gb(cap)}: runs if fragmentation stays under "
                         f"{_gb(cap - hard)} (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True helps)")
    # Does the verdict flip within the capacity range? (need excl. capacity share + frac * capacity)
    base = hard - frac * cap
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
        for text, lay, total, g, alt_need in alts:
            if dom.size is not None and lay.tp > max(dom.size, given_tp):
                continue  # a wider TP than the domain is not a suggestion
            if alt_need <= usable:
                row["suggestion"] = f"fits with {text}: {_gb(total + frac * cap)} on {g} GPUs"
                break
    pick = pick_min_layout(grid, usable, dom, mode)
    row["min_layout_domain_note"] = pick.note
    best = pick.best
    if best is not None:
        row["min_gpus"], row["min_layout"] = best.gpus, best.flags
        row["min_memory_bytes"] = int(round(best.total + frac * cap))
        row["min_domains"] = dom.count(best.width, best.groups)
        f = pick.fewest
        if f is not None and f.gpus < best.gpus and dom.size is not None and f.tp > dom.size:
            row["cross_domain_min_gpus"] = pick.fewest.gpus
            row["cross_domain_min_layout"] = pick.fewest.flags
        if not fits and row.get("suggestion") is None:
            where = "" if dom.size is None else f" ({_placement(dom, best)})"
            why = f"; TP kept within the {dom.label}" if row.get("cross_domain_min_gpus") else ""
            if pick.note and "uses them whole" in pick.note:
                why += f"; the replica takes whole {dom.plural}"
            row["suggestion"] = (f"fits on {best.gpus:,} GPUs{where} with {best.flags} "
                                 f"({_gb(best.total + frac * cap)} per GPU){why}")
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
