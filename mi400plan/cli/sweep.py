"""``mi400plan sweep``: search parallelism layouts for the fastest training step."""

from pathlib import Path
from typing import Annotated, Optional

import typer

from mi400plan.cli.cost import GridOpt, LoadOpt, PriceOpt, PueOpt, SiteOpt
from mi400plan.cli.recipe import (
    CapacityFactorOpt, DropoutOpt, FlashOpt, Fp8CopiesOpt, Fp8ParamsOpt,
    Bf16ShareOpt, FusedCeOpt, GradDtypeOpt, OffloadOpt, MoeCapacityOpt,
    OptimizerOpt, OverlapCpOpt, OverlapDpOpt, OverlapEpOpt, OverlapPpOpt, OverlapTpOpt, RecipeOpt,
    RecomputeLayersOpt, RecomputeModulesOpt, ReserveOpt, SplitOpt, UnevenOpt, VocabOpt, PpScheduleOpt, train_options,
    AttentionKernelOpt, CudaGraphsOpt, MoeDispatcherOpt, StackOpt, FinetuneOpt, LoraRankOpt, LoraTargetsOpt, DocLengthOpt, PackEfficiencyOpt,
)
from mi400plan.cli.counts import count, sku_list
from mi400plan.cli.common import WidthOpt
from mi400plan.cli.common import (
    AsciiOpt, WideOpt,
    PlotOpt,
    CheckOpt,
    FormatOpt,
    JsonOpt,
    ProfilesOpt,
    RecomputeChoice,
    app,
    catalog,
    pick_format,
    TRAIN_PRECISION_ALIASES, TRAIN_PRECISION_CHOICES,
    alias,
    run,
    seq_tokens,
)


def _ints(text: Optional[str], flag: str) -> list[int]:
    """A count list flag (``--tp 4,8``, ``--micro-batch 1..8``) by the one count reading (``cli.counts``)."""
    from mi400plan.cli.counts import count_list

    return count_list(text, flag) if text else []


def _searches(cat, skus: list[str], gpus: str | None, ranges: bool) -> int:  # noqa: ANN001
    """How many layout searches a sweep runs (SKUs x sizes, x 3 with the range corners), for progress."""
    from mi400plan.api.sweep import expand_all, parse_gpus
    from mi400plan.errors import PlannerError

    try:
        sizes = len(parse_gpus(gpus)) if gpus else 1
    except PlannerError:
        sizes = 1
    return len(expand_all(cat, list(skus))) * sizes * (3 if ranges else 1)


@app.command("sweep")
def cmd(
    model: Annotated[str, typer.Argument(help="Model profile name or alias (llama3-70b), or a TOML / config.json path.")],
    sku: Annotated[list[str], typer.Option("--sku", callback=sku_list, help="Accelerator profile; repeat or comma-separate (mi355x,b200) to compare SKUs; 'all' compares every SKU (one lacking a value shows as n/d).")],
    gpus: Annotated[Optional[str], typer.Option("--gpus", metavar="N[,N...]|LO..HI", help="GPU count (1024, 1k, 16Ki), a list (512,1024) or a doubling range (512..64Ki); '1,024' is refused (see Counts below).")] = None,
    deadline: Annotated[Optional[str], typer.Option("--deadline", help="Instead of --gpus: the smallest cluster per SKU that trains --tokens in this time (30d, 6w, 72h).")] = None,
    budget: Annotated[Optional[str], typer.Option("--budget", help="US dollars (5M): with --deadline, the smallest cluster per SKU that meets both; alone, the fastest cluster per SKU whose cost to train stays within it.")] = None,
    max_gpus: Annotated[Optional[int], typer.Option("--max-gpus", parser=count, metavar="N", help="Largest cluster --deadline / --budget may pick (default 131,072).")] = None,
    racks: Annotated[Optional[int], typer.Option("--racks", parser=count, metavar="N", help="Number of racks (GPUs per rack from the rack profile, else the scale-up domain).")] = None,
    global_batch: Annotated[Optional[str], typer.Option("--global-batch", help="Sequences (1024) or tokens with a suffix (4M, 128Mi, 8388608tok). Default: planned per cluster within the DeepSeek LLM batch-size law's bound (table Global batch).")] = None,
    seq: Annotated[Optional[str], typer.Option("--seq", metavar="TOKENS", help="Sequence length in tokens (default: the model's, capped at 8192); 32k, 128K (k = 1024).")] = None,
    precision: Annotated[str, typer.Option("--precision", metavar="bf16|fp8|mxfp8|nvfp4|mxfp4", help="Training precision: bf16, fp8 (per-tensor FP8), mxfp8 (E8M0 scale per 32; Blackwell, CDNA 4), nvfp4 (NVIDIA Blackwell/Rubin), mxfp4 (OCP MX FP4; fp4 too); bfloat16, float8 too. The block GEMMs run at that format's dense peak (the LM head and attention in BF16); MFU uses it.")] = "bf16",
    tokens: Annotated[Optional[str], typer.Option("--tokens", help="Training tokens (15T) for days to train.")] = None,
    gpu_hour_cost: Annotated[Optional[float], typer.Option("--gpu-hour-cost", help="US dollars per GPU-hour, for the cost to train (default: the cost model's all-in figure).")] = None,
    site: SiteOpt = None,
    electricity_price: PriceOpt = None,
    pue: PueOpt = None,
    gpu_load: LoadOpt = None,
    grid_intensity: GridOpt = None,
    top: Annotated[int, typer.Option("--top", parser=count, metavar="N", help="Layouts to list per SKU and size.")] = 5,
    save: Annotated[Optional[Path], typer.Option("--save", help="Write the best layout as a plan TOML (read by `fit --plan`).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing --save plan or --plot file.")] = False,
    matmul_efficiency: Annotated[Optional[float], typer.Option("--matmul-efficiency", help="Override the achievable matmul fraction of peak (e.g. 0.45).")] = None,
    hbm_efficiency: Annotated[Optional[float], typer.Option("--hbm-efficiency", help="Override the achievable HBM bandwidth fraction.")] = None,
    gemm_overhead_us: Annotated[Optional[float], typer.Option("--gemm-overhead-us", help="Override the fixed cost per GEMM kernel, microseconds.")] = None,
    overlap_tp: OverlapTpOpt = None,
    overlap_ep: OverlapEpOpt = None,
    overlap_pp: OverlapPpOpt = None,
    overlap_cp: OverlapCpOpt = None,
    split_embedding_loss: SplitOpt = None,
    grad_dtype: GradDtypeOpt = None,
    recipe: RecipeOpt = None,
    optimizer: OptimizerOpt = None,
    flash: FlashOpt = None,
    dropout: DropoutOpt = None,
    reserve: ReserveOpt = None,
    capacity_factor: CapacityFactorOpt = None,
    moe_capacity_factor: MoeCapacityOpt = None,
    fp8_weight_copies: Fp8CopiesOpt = None,
    fp8_params: Fp8ParamsOpt = None,
    bf16_gemm_share: Bf16ShareOpt = None,
    fused_cross_entropy: FusedCeOpt = None,
    recompute_modules: RecomputeModulesOpt = None,
    recompute_layers: RecomputeLayersOpt = None,
    vocab_divisible_by: VocabOpt = None,
    offload_layers: OffloadOpt = None,
    uneven_pp: UnevenOpt = None,
    pp_schedule: PpScheduleOpt = None,
    overlap_dp: OverlapDpOpt = None,
    stack: StackOpt = None,
    moe_dispatcher: MoeDispatcherOpt = None,
    cuda_graphs: CudaGraphsOpt = None,
    attention_kernel: AttentionKernelOpt = None,
    finetune: FinetuneOpt = None, lora_rank: LoraRankOpt = None, lora_targets: LoraTargetsOpt = None,
    doc_length: DocLengthOpt = None, pack_efficiency: PackEfficiencyOpt = None,
    tp: Annotated[Optional[str], typer.Option("--tp", help="Only these TP sizes (comma-separated).")] = None,
    pp: Annotated[Optional[str], typer.Option("--pp", help="Only these PP sizes.")] = None,
    vpp: Annotated[Optional[str], typer.Option("--vpp", help="Only these virtual-stage counts.")] = None,
    cp: Annotated[Optional[str], typer.Option("--cp", help="Only these CP sizes.")] = None,
    ep: Annotated[Optional[str], typer.Option("--ep", help="Only these EP sizes.")] = None,
    zero: Annotated[Optional[str], typer.Option("--zero", help="Only these ZeRO stages (0-3; 3 = FSDP).")] = None,
    micro_batch: Annotated[Optional[str], typer.Option("--micro-batch", help="Micro-batch sizes to try (default 1,2,4,8).")] = None,
    recompute: Annotated[Optional[list[RecomputeChoice]], typer.Option("--recompute", help="Only these recompute modes (repeatable).")] = None,
    pareto: Annotated[bool, typer.Option(
        "--pareto",
        help="Also list every layout no other beats on both step time and memory per GPU (the trade-off "
        "front; at a fixed GPU count cost to train follows step time).")] = False,
    no_ranges: Annotated[bool, typer.Option("--no-ranges", help="Skip the estimate-range check (the pessimistic and optimistic corner searches and flip warnings).")] = False,
    json_: JsonOpt = False,
    fmt: FormatOpt = None,
    profiles: ProfilesOpt = None,
    check: CheckOpt = False,
    ascii_: AsciiOpt = False,
    wide: WideOpt = False,
    width: WidthOpt = None,
    plot: PlotOpt = None,
) -> None:
    """Search TP/PP/VPP/CP/EP/DP/ZeRO/micro-batch/recompute layouts for the fastest training step.

    Reports step time and its breakdown, tokens/s, MFU/HFU, memory per GPU, days, cost, energy (MWh)
    and emissions (t CO2e) to train (with --tokens; cost from the cost model unless --gpu-hour-cost),
    a SKU comparison (several --sku) and a scaling view (several --gpus). Each SKU is also searched at
    the pessimistic and optimistic ends of its estimate ranges (peak, efficiencies, HBM, fabrics);
    conclusions that change inside those ranges are reported as warnings (--no-ranges skips this).
    """
    f = pick_format(json_, fmt)
    seq_n = seq_tokens(seq)
    precision = alias(precision, TRAIN_PRECISION_ALIASES, "--precision", TRAIN_PRECISION_CHOICES)
    pins = {k: _ints(v, "--" + k.replace("_", "-")) for k, v in (("tp", tp), ("pp", pp), ("vpp", vpp), ("cp", cp),
                                                                ("ep", ep), ("zero", zero), ("micro_batch", micro_batch))}
    pins["recompute"] = [{"none": 0, "selective": 1, "full": 2}[r.value] for r in (recompute or [])]
    given = dict(precision=precision, recipe=recipe, optimizer=optimizer, grad_dtype=grad_dtype, flash_attention=flash,
                 dropout=dropout, reserve=reserve, capacity_factor=capacity_factor, fp8_params=fp8_params,
                 moe_capacity_factor=moe_capacity_factor, fp8_weight_copies=fp8_weight_copies,
                 bf16_gemm_share=bf16_gemm_share, recompute_modules=recompute_modules, recompute_layers=recompute_layers,
                 fused_cross_entropy=fused_cross_entropy, vocab_divisible_by=vocab_divisible_by,
                 offload_layers=offload_layers, uneven_pp=uneven_pp, pp_schedule=pp_schedule, overlap_tp=overlap_tp, overlap_ep=overlap_ep,
                 overlap_pp=overlap_pp, overlap_cp=overlap_cp, overlap_dp=overlap_dp,
                 split_embedding_loss=split_embedding_loss, stack=stack, moe_dispatcher=moe_dispatcher,
                 cuda_graphs=cuda_graphs, attention_kernel=attention_kernel, finetune=finetune, lora_rank=lora_rank,
                 lora_targets=lora_targets, doc_length=doc_length, pack_efficiency=pack_efficiency)
    shared = dict(tokens=tokens, global_batch=global_batch, seq_len=seq_n, pins=pins, gpu_hour_cost=gpu_hour_cost,
                  site=site)
    costs, effs = (electricity_price, pue, gpu_load, grid_intensity), (matmul_efficiency, hbm_efficiency, gemm_overhead_us)
    if deadline is not None or budget is not None:
        if gpus is not None or racks is not None:
            raise typer.BadParameter("--deadline / --budget choose the cluster size: drop --gpus and --racks",
                                     param_hint="--deadline")
        _refuse_backwards({"--plot": plot, "--save": save, "--pareto": pareto or None, "--top": _given("top")})
        shared.update(deadline=deadline, budget=budget, max_gpus=max_gpus)
        run("sweep", f, lambda: _backwards(profiles, model, sku, given, shared, costs, effs), check=check,
            ascii=ascii_, wide=wide)
        return
    if max_gpus is not None:
        raise typer.BadParameter("--max-gpus bounds the size --deadline / --budget pick; with --gpus or --racks "
                                 "drop it", param_hint="--max-gpus")

    out = dict(top=top, ranges=not no_ranges, pareto=pareto, save=str(save) if save else None, overwrite=force)
    run("sweep", f, lambda: _forward(profiles, model, sku, gpus, racks, given, shared, costs, effs, out, plot,
                                     progress=f.value != "json"),
        check=check, ascii=ascii_, wide=wide, plot=plot, force=force)


def _forward(profiles: Optional[list[Path]], model: str, sku: list[str], gpus: Optional[str], racks: Optional[int],
             given: dict, shared: dict, costs: tuple, effs: tuple, out: dict, plot: Optional[Path], *,
             progress: bool) -> object:
    """``sweep`` over --gpus / --racks with the recipe object built from ``given`` (``out``: the
    ``SweepReport`` fields)."""
    from mi400plan.api.sweep import SkuOverrides, SweepReport, sweep
    from mi400plan.cli.cost import site_overrides
    from mi400plan.pricing import Pricing

    report = SweepReport(**out)
    _distinct_outputs(Path(report.save) if report.save else None, plot)
    cat = catalog(profiles)
    # The cost model's site profile is read only when a flag changes it (or --tokens asks for it).
    pricing = Pricing(shared["gpu_hour_cost"], shared["site"], None if costs == (None,) * 4
                      else site_overrides(*costs[:2], None, None, *costs[2:], None))
    with _progress(enabled=progress, searches=_searches(cat, sku, gpus, report.ranges)) as cb:
        return sweep(
            cat, model, list(sku), gpus=gpus, racks=racks, global_batch=shared["global_batch"],
            seq_len=shared["seq_len"], tokens=shared["tokens"], options=train_options(**given), pins=shared["pins"],
            sku_overrides=SkuOverrides(*effs), pricing=pricing, report=report, progress=cb,
        )


def _backwards(profiles: Optional[list[Path]], model: str, sku: list[str], given: dict, shared: dict,
               costs: tuple, effs: tuple) -> object:
    """``sweep --deadline`` / ``--budget`` with the recipe object built from ``given``."""
    from mi400plan.api.deadline import SkuOverrides, sweep_deadline
    from mi400plan.cli.cost import site_overrides

    return sweep_deadline(catalog(profiles), model, list(sku), options=train_options(**given),
                          cost_overrides=site_overrides(*costs[:2], None, None, *costs[2:], None),
                          sku_overrides=SkuOverrides(*effs), **shared)


def _given(name: str) -> object:
    """True when the running command's parameter ``name`` came from the command line, else None."""
    from typer._click.core import ParameterSource
    from typer._click.globals import get_current_context

    ctx = get_current_context(silent=True)
    return True if ctx is not None and ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE else None


def _refuse_backwards(given: dict[str, object]) -> None:
    """Flags that need a fixed cluster (--gpus / --racks) and so mean nothing to --deadline / --budget:
    a usage error naming the flag, never silently dropped."""
    for flag, value in given.items():
        if value is not None:
            raise typer.BadParameter("applies to a sweep over --gpus or --racks, not to --deadline / --budget "
                                     "(their answer is one size per SKU; rerun with --gpus at that size)",
                                     param_hint=flag)


class _progress:
    """One self-rewriting line on stderr (a TTY only, after a moment): the overall count of searches,
    the current one, percent done and an ETA from the elapsed time. Cleared when the sweep ends."""

    DELAY_S = 0.5

    def __init__(self, enabled: bool, searches: int = 1) -> None:
        self.enabled = enabled
        self.searches = max(searches, 1)
        self._labels: list[str] = []
        self._t0 = 0.0
        self._shown = False

    def __enter__(self):  # noqa: ANN204
        import sys
        import time

        self._t0 = time.monotonic()
        return self.update if self.enabled and sys.stderr.isatty() else None

    def update(self, label: str, done: int, total: int) -> None:
        import shutil
        import sys
        import time

        if not self._labels or self._labels[-1] != label:
            self._labels.append(label)
        elapsed = time.monotonic() - self._t0
        if elapsed < self.DELAY_S:
            return
        k = len(self._labels)
        frac = min(1.0, ((k - 1) + done / max(total, 1)) / max(self.searches, k))
        eta = f", ETA {elapsed / frac - elapsed:.0f} s" if frac > 0.02 else ""
        line = (f"sweep: search {k}/{max(self.searches, k)} ({label}) {frac * 100:.0f}% done, "
                f"{elapsed:.0f} s{eta}")
        width = shutil.get_terminal_size((80, 24)).columns - 1
        sys.stderr.write("\r" + line[:width].ljust(min(width, len(line))) + "\033[K")
        sys.stderr.flush()
        self._shown = True

    def __exit__(self, *exc: object) -> None:
        import sys

        if self._shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def _distinct_outputs(save: Optional[Path], plot: Optional[Path]) -> None:
    """--save and --plot naming one file would write the plan and then the picture over it: refused
    before any work."""
    import os

    from mi400plan.errors import UsageError

    if save is not None and plot is not None and os.path.abspath(save) == os.path.abspath(plot):
        raise UsageError(f"--save and --plot name the same file {str(save)!r}", hint="give each its own path")
