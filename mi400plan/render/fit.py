"""Table output of ``fit``: a breakdown for one SKU, a comparison for several.

Sizes state their unit: GB = 10^9 bytes, GiB = 2^30 bytes. HBM/GPU is the usable capacity the
profile gives (driver-reported where published, else the vendor's figure, whose "GB" is binary).
"""

from __future__ import annotations

from typing import Any

from mi400plan.render import table_renderer
from mi400plan.render.table import print_lines, print_table, short_path
from mi400plan.results.fit import FitResult, FitRow
from mi400plan.units import GB, GiB, fmt_count

TERMS = ("weights", "gradients", "optimizer", "activations", "kv_cache", "reserve")
LABELS = {
    "weights": "weights",
    "gradients": "gradients",
    "optimizer": "optimizer states",
    "activations": "activations",
    "kv_cache": "KV cache",
    "reserve": "runtime reserve",
}


def _gb(x: float | None) -> str:
    return "n/d" if x is None else f"{x / GB:,.1f} GB"


def _gb_num(x: float | None) -> str:
    """GB without the unit, for table columns whose header states it."""
    return "n/d" if x is None else f"{x / GB:,.1f}"


def _gib(x: float | None) -> str:
    return "n/d" if x is None else f"{x / GiB:,.1f} GiB"


def _layout_text(row: FitRow) -> str:
    lay = row.layout
    if row.mode == "infer":
        return (f"tp={lay['tp']} pp={lay['pp']} ep={lay['ep']} batch={lay['batch']} context={lay['context']} "
                f"weights={lay['weight_format']} kv={lay['kv_format']}")
    keys = ["tp", "pp", "vpp", "dp", "ep", "etp", "cp", "zero", "micro_batch", "recompute", "sequence_parallel",
            "seq_len"]
    def val(k: str) -> Any:
        v = lay[k]
        return ("on" if v else "off") if isinstance(v, bool) else v

    short = {"sequence_parallel": "sp", "micro_batch": "micro_batch", "seq_len": "seq"}
    return " ".join(f"{short.get(k, k)}={val(k)}" for k in keys if k in lay)


def _verdict(row: FitRow) -> str:
    if row.verdict == "unknown":
        return "unknown (capacity n/d)"
    v = {"fits": "fits", "tight": "tight (over HBM only by the allocator-fragmentation share)"}.get(
        row.verdict, "does not fit")
    return v + (" (flips in range)" if row.flips else "")


@table_renderer("fit")
def render_fit(result: FitResult, console: Any) -> None:
    if type(result).__name__ == "LargestResult":  # fit --largest
        from mi400plan.render.largest import render_largest

        render_largest(result, console)
        return
    m = result.model
    active = "" if m.params_active == m.params_total else f", {fmt_count(m.params_active)} active per token"
    head = f"{m.display_name} ({m.name}): {fmt_count(m.params_total)} parameters{active}; {_mode(result.mode)}"
    print_lines(console, [head])
    if len(result.rows) == 1:
        _breakdown(result, result.rows[0], console)
    else:
        _comparison(result, console)


def _breakdown(result: FitResult, row: FitRow, console: Any) -> None:
    mb = row.memory_bytes
    rows = []
    for k in TERMS:
        v = getattr(mb, k)
        if k in ("gradients", "optimizer") and result.mode == "infer":
            continue
        if k == "kv_cache" and result.mode == "train":
            continue
        share = f"{100.0 * v / mb.total:.1f}%" if mb.total else "-"
        rows.append((LABELS[k], _gib(v), _gb(v), share))
    rows.append(("total", _gib(mb.total), _gb(mb.total), "100.0%"))
    rows.append(("capacity", _gib(row.capacity_bytes), _gb(row.capacity_bytes), ""))
    if row.headroom_bytes is not None:
        rows.append(("headroom", _gib(row.headroom_bytes), _gb(row.headroom_bytes), f"{row.headroom_pct:.1f}% of HBM"))
    print_table(
        console,
        ["term", ("GiB", "right"), ("GB", "right"), ("share", "right")],
        rows,
        title=f"{row.display_name} ({row.sku}): per-GPU memory, {result.mode}",
    )
    offload = []
    if row.host_offload_bytes is not None:
        n = result.recipe.get("offload_layers", 0)
        offload = [f"activation offloading: first {n} layers of each model chunk in host memory, "
                   f"{_gib(row.host_offload_bytes)} ({_gb(row.host_offload_bytes)}) of pinned host memory per GPU"]
    print_lines(console, [
        f"layout: {_gpus(row.gpus)}, {_layout_text(row)}; most loaded pipeline stage: {row.stage}",
        *offload,
        *_fp8_weights_line(result.recipe),
        *_logits_line(result.recipe),
        *_recompute_line(row, result.recipe),
        *_schedule_line(result.recipe),
        *([f"fine-tuning: {result.recipe['finetune']}"] if result.recipe.get("finetune") else []),
        *([str(result.recipe["packing"])] if result.recipe.get("packing") else []),
        f"runtime reserve: {result.reserve}{_reserve_split(row)}; GB = 10^9 B, GiB = 2^30 B",
        *([f"software stack: {row.stack}"] if row.stack else []),
        f"profiles: {short_path(result.model.profile)}, {short_path(row.profile)}",
    ])
    lines = [f"verdict: {_verdict(row)}"]
    if row.reason:
        lines.append(f"reason: {row.reason}")
    if row.range_note:
        lines.append(f"note: {row.range_note}")
    if row.layout_domain_note:
        lines.append(f"note: {row.layout_domain_note}")
    if row.suggestion:
        lines.append(f"what would fit: {row.suggestion}")
    if not row.fits and row.min_layout_domain_note:
        lines.append(f"note: {row.min_layout_domain_note}")
    if row.max_tokens is not None:
        lines.append(
            f"KV room: {row.max_tokens:,} tokens of batch x context; longest context at batch "
            f"{row.layout.get('batch')}: {row.max_context:,} tokens"
        )
    print_lines(console, lines)


def _reserve_split(row: FitRow) -> str:
    """The row's reserve in its parts, e.g. " = 1.5 GiB fixed + 2.1 GiB fragmentation" (training)."""
    mb = row.memory_bytes
    if not mb.fragmentation:
        return ""
    return f" = {_gib(mb.reserve - mb.fragmentation)} fixed + {_gib(mb.fragmentation)} fragmentation"


def _recompute_line(row: FitRow, recipe: dict) -> list[str]:
    """What selective recomputation covers when the recipe names its modules, and full recomputation
    when it covers only the first layers of each chunk."""
    mods = recipe.get("recompute_modules") or []
    n = int(recipe.get("recompute_layers") or 0)
    if row.layout.get("recompute") == "full" and n:
        return [f"full recomputation of the first {n} layers of each model chunk (Megatron-Core block method)"]
    if row.layout.get("recompute") != "selective" or list(mods) == ["core_attn"]:
        return []
    return [f"selective recomputation of: {', '.join(mods)} (Megatron-Core recompute_modules)"]


def _schedule_line(recipe: dict) -> list[str]:
    """The pipeline schedule when it is DualPipe (``mi400plan.dualpipe``)."""
    if recipe.get("pp_schedule") != "dualpipe":
        return []
    return ["pipeline schedule: DualPipe (DeepSeek-V3 report, arXiv 2412.19437, Table 2): each rank holds stages i and "
            "PP-1-i (two stages' parameters, gradients and optimizer states) and PP + 1 micro-batches of one stage's "
            "activations"]


def _logits_line(recipe: dict) -> list[str]:
    """The loss's saved logits when they are not the default fp32 copy (``TrainRecipe.logit_bytes``)."""
    b = recipe.get("logit_bytes")
    if b is None or b == 4.0:
        return []
    return [f"loss: fused cross entropy (--fused-cross-entropy), logits kept at {b:g} B an element, no fp32 copy"]


def _fp8_weights_line(recipe: dict) -> list[str]:
    """What an FP8 training run holds per block GEMM weight (``TrainRecipe.gemm_weight_bytes``)."""
    copies = int(recipe.get("fp8_weight_copies") or 0)
    if not copies and not recipe.get("fp8_params"):
        return []
    b = recipe.get("gemm_weight_bytes")
    fmt = str(recipe.get("gemm_format") or "fp8").upper()
    if recipe.get("fp8_params"):
        form = f"{fmt} tensors (--fp8-params)" + (", with the transposed copy" if copies >= 2 else ", no transposed copy")
    else:
        each = float(recipe.get("fp8_copy_bytes") or 1.0)
        form = f"bf16 working copy + {copies} {fmt} cast{'s' if copies != 1 else ''}" + (
            f" of {each:g} B (scales included)" if each != 1.0 else "")
    share = float(recipe.get("bf16_gemm_share") or 0.0)
    kept = f"; {share:.0%} of the block linear layers kept BF16 (--bf16-gemm-share)" if share else ""
    return [f"{fmt} weights: {form}, {b:g} B a block GEMM weight{kept}"]


def _gpus(n: int) -> str:
    return f"{n:,} GPU" + ("" if n == 1 else "s")


def compact_layout(flags: str) -> str:
    """``"--tp 8 --pp 1 --ep 1 --dp 4"`` -> ``"TP8 DP4"`` (sizes of 1 other than TP left out)."""
    words = flags.split()
    parts = []
    for flag, value in zip(words[::2], words[1::2]):
        name = flag.lstrip("-").upper()
        if name != "TP" and value == "1":
            continue
        parts.append(f"{name}{value}")
    return " ".join(parts)


def _domains_text(n: int, label: str | None) -> str:
    unit = (label or "domain").split()[-1]
    return f"{n:,} {unit}" + ("" if n == 1 else "s")


def _note_for(r: FitRow) -> str | None:
    """What the comparison row cannot show: why there is no verdict, a range flip, or a fix other
    than the fewest-GPUs layout already in the table."""
    parts = []
    if r.capacity_low_bytes is not None and r.capacity_low_bytes != r.capacity_high_bytes:
        parts.append(f"HBM {r.capacity_status}: {r.capacity_low_bytes / GB:,.0f}-"
                     f"{(r.capacity_high_bytes or 0) / GB:,.0f} GB, nominal {(r.capacity_bytes or 0) / GB:,.0f} GB")
        if r.min_memory_bytes is not None and r.min_memory_bytes > r.capacity_low_bytes:
            parts.append(f"the fewest-GPUs layout ({_gb(r.min_memory_bytes)}) does not fit the low end")
    if r.verdict == "unknown" and r.reason:
        parts.append(r.reason)
    if r.range_note:
        parts.append(r.range_note)
    if r.layout_domain_note:
        parts.append(r.layout_domain_note)
    if r.min_layout_domain_note:
        parts.append(r.min_layout_domain_note)
    if not r.fits and r.suggestion:
        # the fewest-GPUs suggestion ("fits on N GPUs ...") is in its own column
        parts.extend(p for p in r.suggestion.split("; or ") if not p.startswith("fits on "))
    return "; ".join(parts) or None


def _comparison(result: FitResult, console: Any) -> None:
    infer = result.mode == "infer"
    first = result.rows[0] if result.rows else None
    if first is not None:
        print_lines(console, [_asked(result, first), f"layout as given: {_gpus(first.gpus)}, {_layout_text(first)}"])
    if result.precisions:
        print_lines(console, [f"{p}: " + _recipe_text(result.model_copy(update={"recipe": result.recipes[p]}))
                              for p in result.precisions])
    else:
        print_lines(console, [_recipe_text(result)])
    by_precision = bool(result.precisions)
    rows = []
    notes = []
    model_max = result.model.max_seq_len
    for r in result.rows:
        mb = r.memory_bytes
        verdict = {"fits": "yes", "tight": "tight", "does_not_fit": "no", "unknown": "n/d"}[r.verdict] + ("*" if r.flips else "")
        cap = _gb_num(r.capacity_bytes)
        if r.capacity_low_bytes is not None and r.capacity_low_bytes != r.capacity_high_bytes:
            cap += " ~"
        hr = _gb_num(r.headroom_bytes)
        pct = "n/d" if r.headroom_pct is None else f"{r.headroom_pct:.0f}%"
        if r.verdict == "unknown":
            fewest, at = "n/d", "n/d"
        elif r.min_gpus is None:
            fewest, at = "none up to 4,096", "-"
        else:
            where = f" ({_domains_text(r.min_domains, r.domain_label)})" if r.min_domains is not None else ""
            fewest, at = f"{r.min_gpus:,}{where} {compact_layout(r.min_layout or '')}", _gb_num(r.min_memory_bytes)
        row = [r.sku] + ([r.precision] if by_precision else []) + [verdict, _gb_num(mb.total), cap, hr, pct, fewest, at]
        if infer:
            if not r.fits or r.max_context is None:
                row.append("-")
            elif r.max_context >= model_max:
                row.append(f"{model_max:,}+")
            else:
                row.append(f"{r.max_context:,}")
        rows.append(row)
        note = _note_for(r)
        if note:
            notes.append(f"  {r.sku}{f' {r.precision}' if by_precision else ''}: {note}")
    # Units in the headers (GB = 10^9 B) keep the rows on one line at 100 columns.
    cols: list[Any] = ["sku"] + (["precision"] if by_precision else []) + ["fits?", ("need/GPU\nGB", "right"), ("HBM/GPU\nGB", "right"), ("headroom\nGB", "right"),
                       ("of\nHBM", "right"), "fewest GPUs that fit\n(scale-up domains)", ("need\nthere GB", "right")]
    if infer:
        cols.append(("max\ncontext", "right"))
    n_skus = len({r.sku for r in result.rows})
    title = f"per-GPU memory on {n_skus} SKUs ({_mode(result.mode)})"
    if by_precision:
        title = (f"per-GPU memory on {n_skus} SKU{'s' if n_skus > 1 else ''} at "
                 f"{', '.join(result.precisions)} ({_mode(result.mode)})")
    print_table(console, cols, rows, title=title)
    if notes:
        console.print("notes:", highlight=False, markup=False)
        for n in notes:
            console.print(n, highlight=False, markup=False)
    legend = [
        "fits? compares need/GPU (the most loaded rank, runtime reserve included) with HBM/GPU for the layout "
        "as given; " + ("tight = over HBM only by the allocator-fragmentation share of the reserve (it runs if the "
                        "allocator fragments less); " if any(r.verdict == "tight" for r in result.rows) else "")
        + "~ = HBM is an estimate with a range (see notes); * = the verdict flips inside that range.",
        "fewest GPUs that fit: the smallest TP x PP (MoE: x EP) on that SKU with every other setting as given "
        "and TP inside the SKU's scale-up domain (node, rack or pod; the number used in brackets); need there = "
        "per-GPU memory at that layout.",
    ]
    if infer:
        legend.append("Inference counts one replica; a replica that needs more than one domain takes them whole, "
                      "TP filling each (PP, or EP for MoE, across them).")
        legend.append(f"max context: longest context per sequence the HBM left after weights buys at batch "
                      f"{first.layout.get('batch') if first else 1}; N+ = at least the model's maximum {model_max:,}.")
    legend.append("HBM/GPU = usable capacity: driver-reported where published, else the vendor's figure (a vendor's "
                  "HBM \"GB\" is 2^30 bytes). GB = 10^9 bytes, GiB = 2^30 bytes.")
    for line in legend:
        console.print(line, highlight=False, markup=False)


def _asked(result: FitResult, first: Any) -> str:
    """The question the comparison answers, so a column of "no" reads as the answer to it."""
    if first.gpus == 1:
        flags = "--tp/--pp/--gpus" if result.mode == "infer" else "--tp/--pp/--dp/--gpus"
        return (f"Asked: {_mode(result.mode)} on one GPU of each SKU ({flags} set a layout). 'fits?' answers "
                "that; 'fewest GPUs that fit' gives the smallest layout that does.")
    return f"Asked: {_mode(result.mode)} on {_gpus(first.gpus)} of each SKU, layout as given below."


def _mode(mode: str) -> str:
    return "training" if mode == "train" else "inference"


def _recipe_text(result: FitResult) -> str:
    rc = result.recipe
    if result.mode == "train":
        bpp = rc.get("bytes_per_param")
        if rc.get("finetune"):
            return (f"recipe {rc.get('name')}: {rc.get('finetune')}: {bpp:g} B/param on the adapters, the working "
                    f"copy alone on the base (optimizer {rc.get('optimizer')}); runtime reserve {result.reserve}")
        return (f"recipe {rc.get('name')}: {bpp:g} B/param of weights, gradients and optimizer states "
                f"(optimizer {rc.get('optimizer')}); runtime reserve {result.reserve}")
    return (f"weights {rc.get('weight_format')} ({rc.get('weight_bytes_per_param'):g} B/param), KV cache "
            f"{rc.get('kv_format')} ({rc.get('kv_bytes_per_element'):g} B/element); runtime reserve {result.reserve}")
