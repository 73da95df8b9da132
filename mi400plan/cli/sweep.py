"""``mi400plan sweep``: search parallelism layouts for the fastest training step."""

from pathlib import Path
from typing import Annotated, Optional

import typer

from mi400plan.cli.cost import GridOpt, LoadOpt, PriceOpt, PueOpt, SiteOpt
from mi400plan.cli.recipe import (
    CapacityFactorOpt, DropoutOpt, FlashOpt, Fp8CopiesOpt, Fp8ParamsOpt, FusedCeOpt, OffloadOpt, OptimizerOpt,
    OverlapDpOpt, RecipeOpt, RecomputeLayersOpt, RecomputeModulesOpt, ReserveOpt, UnevenOpt, VocabOpt, recipe_flags,
    AttentionKernelOpt, CudaGraphsOpt, MoeDispatcherOpt, StackOpt, stack_flags,
)
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
    PRECISION_ALIASES,
    alias,
    run,
    seq_tokens,
)


def _ints(text: Optional[str], flag: str) -> list[int]:
    if not text:
        return []
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise typer.BadParameter(f"expected comma-separated integers, got {text!r}", param_hint=flag) from None


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
    sku: Annotated[list[str], typer.Option("--sku", help="Accelerator profile; repeat to compare SKUs; 'all' compares every SKU (one lacking a value shows as n/d).")],
    gpus: Annotated[Optional[str], typer.Option("--gpus", help="GPU count, a list (512,1024) or a doubling range (512..65536).")] = None,
    deadline: Annotated[Optional[str], typer.Option("--deadline", help="Instead of --gpus: the smallest cluster per SKU that trains --tokens in this time (30d, 6w, 72h).")] = None,
    budget: Annotated[Optional[str], typer.Option("--budget", help="US dollars (5M): with --deadline, also check the cost; alone, the fastest cluster per SKU whose cost to train stays within it.")] = None,
    max_gpus: Annotated[Optional[int], typer.Option("--max-gpus", help="Largest cluster --deadline / --budget may pick (default 131,072).")] = None,
    racks: Annotated[Optional[int], typer.Option("--racks", help="Number of racks (GPUs per rack from the rack profile, else the scale-up domain).")] = None,
    global_batch: Annotated[Optional[str], typer.Option("--global-batch", help="Sequences (1024) or tokens with a suffix (4M, 128Mi, 8388608tok). Default 4Mi tokens.")] = None,
    seq: Annotated[Optional[str], typer.Option("--seq", metavar="TOKENS", help="Sequence length in tokens (default: the model's, capped at 8192); 32k, 128K (k = 1024).")] = None,
    precision: Annotated[str, typer.Option("--precision", metavar="bf16|fp8", help="Matmul precision (bfloat16, float8 too); MFU uses this precision's dense peak.")] = "bf16",
    tokens: Annotated[Optional[str], typer.Option("--tokens", help="Training tokens (15T) for days to train.")] = None,
    gpu_hour_cost: Annotated[Optional[float], typer.Option("--gpu-hour-cost", help="US dollars per GPU-hour, for the cost to train (default: the cost model's all-in figure).")] = None,
    site: SiteOpt = None,
    electricity_price: PriceOpt = None,
    pue: PueOpt = None,
    gpu_load: LoadOpt = None,
    grid_intensity: GridOpt = None,
    top: Annotated[int, typer.Option("--top", help="Layouts to list per SKU and size.")] = 5,
    save: Annotated[Optional[Path], typer.Option("--save", help="Write the best layout as a plan TOML (read by `fit --plan`).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing --save plan or --plot file.")] = False,
    matmul_efficiency: Annotated[Optional[float], typer.Option("--matmul-efficiency", help="Override the achievable matmul fraction of peak (e.g. 0.45).")] = None,
    hbm_efficiency: Annotated[Optional[float], typer.Option("--hbm-efficiency", help="Override the achievable HBM bandwidth fraction.")] = None,
    gemm_overhead_us: Annotated[Optional[float], typer.Option("--gemm-overhead-us", help="Override the fixed cost per GEMM kernel, microseconds.")] = None,
    overlap_tp: Annotated[bool, typer.Option("--overlap-tp", help="Hide TP/SP collectives behind GEMMs (default: exposed).")] = False,
    overlap_ep: Annotated[bool, typer.Option("--overlap-ep", help="Hide EP all-to-all behind GEMMs (default: exposed).")] = False,
    overlap_pp: Annotated[bool, typer.Option(
        "--overlap-pp/--no-overlap-pp",
        help="Interleaved schedule (VPP > 1): pipeline send/recv runs behind the next chunk's compute, only the "
        "2(PP-1) fill/drain transfers stay exposed (Megatron-LM's default overlap_p2p_comm; its "
        "--no-overlap-p2p-communication turns it off). --no-overlap-pp exposes every transfer, as Megatron-LM "
        "2021 (Narayanan et al.) did. VPP 1 is always exposed.")] = True,
    overlap_cp: Annotated[bool, typer.Option(
        "--overlap-cp/--no-overlap-cp",
        help="Hide context-parallel key/value exchanges behind attention compute (Megatron-Core / Transformer "
        "Engine ring attention). --no-overlap-cp exposes them, as Llama 3's all-gather CP "
        "(arXiv 2407.21783, sec. 3.3.2).")] = True,
    split_embedding_loss: Annotated[bool, typer.Option(
        "--split-embedding-loss",
        help="Count the input embedding and the loss as one layer each in the pipeline split, so PP x VPP may "
        "divide layers + 2 (Megatron-Core --account-for-embedding-in-pipeline-split "
        "--account-for-loss-in-pipeline-split; Llama 3 405B: 126 + 2 = 16 stages x 8).")] = False,
    grad_dtype: Annotated[Optional[str], typer.Option(
        "--grad-dtype",
        help="Gradient accumulation and reduction dtype: fp32 (default; Megatron-LM reduces BF16 gradients in "
        "fp32) or bf16 (Megatron-Core --grad-reduce-in-bf16); also sizes the gradient memory.")] = None,
    recipe: RecipeOpt = None,
    optimizer: OptimizerOpt = None,
    flash: FlashOpt = None,
    dropout: DropoutOpt = None,
    reserve: ReserveOpt = None,
    capacity_factor: CapacityFactorOpt = None,
    fp8_weight_copies: Fp8CopiesOpt = None,
    fp8_params: Fp8ParamsOpt = None,
    fused_cross_entropy: FusedCeOpt = None,
    recompute_modules: RecomputeModulesOpt = None,
    recompute_layers: RecomputeLayersOpt = None,
    vocab_divisible_by: VocabOpt = None,
    offload_layers: OffloadOpt = None,
    uneven_pp: UnevenOpt = None,
    stack: StackOpt = None,
    moe_dispatcher: MoeDispatcherOpt = None,
    cuda_graphs: CudaGraphsOpt = None,
    attention_kernel: AttentionKernelOpt = None,
    overlap_dp: OverlapDpOpt = None,
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
    precision = alias(precision, PRECISION_ALIASES, "--precision", "bf16|fp8")
    pins = {
        "tp": _ints(tp, "--tp"), "pp": _ints(pp, "--pp"), "vpp": _ints(vpp, "--vpp"), "cp": _ints(cp, "--cp"),
        "ep": _ints(ep, "--ep"), "zero": _ints(zero, "--zero"), "micro_batch": _ints(micro_batch, "--micro-batch"),
        "recompute": [{"none": 0, "selective": 1, "full": 2}[r.value] for r in (recompute or [])],
    }

    if deadline is not None or budget is not None:
        if gpus is not None or racks is not None:
            raise typer.BadParameter("--deadline / --budget choose the cluster size: drop --gpus and --racks",
                                     param_hint="--deadline")

        def backwards():  # noqa: ANN202
            from mi400plan.api.deadline import sweep_deadline
            from mi400plan.specs.layout import TrainOptions
            from mi400plan.cli.cost import site_overrides

            return sweep_deadline(
                catalog(profiles), model, list(sku), tokens=tokens, deadline=deadline, budget=budget,
                global_batch=global_batch, seq_len=seq_n, precision=precision, gpu_hour_cost=gpu_hour_cost,
                site=site, max_gpus=max_gpus,
                cost_overrides=site_overrides(electricity_price, pue, None, None, gpu_load, grid_intensity, None),
                matmul_efficiency=matmul_efficiency, hbm_efficiency=hbm_efficiency, gemm_overhead_us=gemm_overhead_us,
                overlap_tp=overlap_tp, overlap_ep=overlap_ep, overlap_pp=overlap_pp, overlap_cp=overlap_cp,
                split_embedding_loss=split_embedding_loss, grad_dtype=grad_dtype,
                stack=TrainOptions(**stack_flags(stack, moe_dispatcher, cuda_graphs, attention_kernel)).stack_request(),
            )

        run("sweep", f, backwards, check=check, ascii=ascii_, wide=wide)
        return

    def compute():  # noqa: ANN202
        from mi400plan.api.sweep import sweep
        from mi400plan.cli.cost import site_overrides

        cat = catalog(profiles)
        with _progress(enabled=f.value != "json", searches=_searches(cat, sku, gpus, not no_ranges)) as cb:
            return sweep(
                cat, model, list(sku), gpus=gpus, racks=racks, global_batch=global_batch, seq_len=seq_n,
                precision=precision, tokens=tokens, gpu_hour_cost=gpu_hour_cost, top=top,
                matmul_efficiency=matmul_efficiency, hbm_efficiency=hbm_efficiency, gemm_overhead_us=gemm_overhead_us,
                overlap_tp=overlap_tp, overlap_ep=overlap_ep, overlap_pp=overlap_pp,
                overlap_cp=overlap_cp, split_embedding_loss=split_embedding_loss, grad_dtype=grad_dtype, pins=pins, save=str(save) if save else None, progress=cb,
                ranges=not no_ranges, overwrite=force, site=site,
                pareto=pareto,
                # The cost model is imported only when a flag changes it (or --tokens asks for it).
                cost_overrides=None if (electricity_price, pue, gpu_load, grid_intensity) == (None,) * 4
                else site_overrides(electricity_price, pue, None, None, gpu_load, grid_intensity, None),
                **recipe_flags(recipe=recipe, optimizer=optimizer, flash_attention=flash, dropout=dropout,
                               reserve=reserve, capacity_factor=capacity_factor, fp8_weight_copies=fp8_weight_copies,
                               fp8_params=fp8_params, recompute_modules=recompute_modules,
                               recompute_layers=recompute_layers, fused_cross_entropy=fused_cross_entropy,
                               vocab_divisible_by=vocab_divisible_by, offload_layers=offload_layers, uneven_pp=uneven_pp,
                               overlap_dp=overlap_dp),
                **stack_flags(stack, moe_dispatcher, cuda_graphs, attention_kernel),
            )

    run("sweep", f, compute, check=check, ascii=ascii_, wide=wide, plot=plot, force=force)


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
