"""``mi400plan fit``: per-GPU memory for training or inference on one or more SKUs."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from mi400plan.cli.recipe import (
    CapacityFactorOpt, DropoutOpt, Fp8CopiesOpt, Fp8ParamsOpt, FusedCeOpt, OffloadOpt, OverlapCpOpt, OverlapDpOpt,
    OverlapEpOpt, OverlapPpOpt, OverlapTpOpt, RecipeOpt, RecomputeLayersOpt, RecomputeModulesOpt, SplitOpt,
    UnevenOpt, VocabOpt,
    AttentionKernelOpt, CudaGraphsOpt, MoeDispatcherOpt, StackOpt, stack_flags,
)
from mi400plan.cli.common import (
    AsciiOpt, WideOpt,
    ForceOpt,
    PlotOpt,
    CheckOpt,
    FormatOpt,
    JsonOpt,
    ProfilesOpt,
    RecomputeChoice,
    app,
    catalog,
    pick_format,
    MODE_ALIASES,
    PRECISION_ALIASES,
    alias,
    refuse_inapplicable,
    run,
    seq_tokens,
)


class OptimizerChoice(str, Enum):
    adamw = "adamw"
    adam = "adam"
    sgd = "sgd"
    adafactor = "adafactor"


class GradDtype(str, Enum):
    fp32 = "fp32"
    bf16 = "bf16"


class KvDtype(str, Enum):
    bf16 = "bf16"
    fp8 = "fp8"


IntOpt = Optional[int]


@app.command("fit")
def fit_cmd(
    model: Annotated[Optional[str], typer.Argument(help="Model profile name or path (TOML / HF config.json).")] = None,
    sku: Annotated[
        Optional[list[str]],
        typer.Option("--sku", help="Accelerator profile; repeatable; 'all' (the default) compares every SKU."),
    ] = None,
    mode: Annotated[str, typer.Option("--mode", metavar="train|infer", help="train (training) or infer (inference).")] = "train",
    tp: Annotated[IntOpt, typer.Option("--tp", help="Tensor parallel size.")] = None,
    pp: Annotated[IntOpt, typer.Option("--pp", help="Pipeline stages.")] = None,
    vpp: Annotated[IntOpt, typer.Option("--vpp", help="Virtual stages per rank (interleaved schedule when > 1).")] = None,
    dp: Annotated[IntOpt, typer.Option("--dp", help="Data-parallel replicas (default: from --gpus, else 1).")] = None,
    ep: Annotated[IntOpt, typer.Option("--ep", help="Expert parallel size (MoE).")] = None,
    etp: Annotated[IntOpt, typer.Option("--etp", help="Expert tensor parallel size (MoE).")] = None,
    cp: Annotated[IntOpt, typer.Option("--cp", help="Context parallel size.")] = None,
    zero: Annotated[IntOpt, typer.Option("--zero", min=0, max=3, help="ZeRO stage 0-3 (3 = FSDP); default 1.")] = None,
    micro_batch: Annotated[IntOpt, typer.Option("--micro-batch", help="Sequences per micro-batch.")] = None,
    seq: Annotated[Optional[str], typer.Option("--seq", metavar="TOKENS", help="Sequence length (train, default 4096) or context (infer, default the model's maximum); 32k, 128K (k = 1024).")] = None,
    recompute: Annotated[Optional[RecomputeChoice], typer.Option("--recompute", help="Activation recomputation.")] = None,
    sp: Annotated[Optional[bool], typer.Option("--sp/--no-sp", help="Sequence parallelism with TP (default on).")] = None,
    gpus: Annotated[IntOpt, typer.Option("--gpus", help="Total GPUs (train: sets DP; infer: sets TP).")] = None,
    global_batch: Annotated[IntOpt, typer.Option("--global-batch", help="Sequences per step (caps micro-batches in flight).")] = None,
    recipe: RecipeOpt = None,
    precision: Annotated[Optional[list[str]], typer.Option("--precision", metavar="PRECISION", help="train: bf16|fp8|fp32; infer weights: bf16|fp8|mxfp8|fp6|fp4|nvfp4|int4 (bfloat16, float32, float8 too). Repeat or comma-separate (bf16,fp8) to compare them in one table.")] = None,
    optimizer: Annotated[Optional[OptimizerChoice], typer.Option("--optimizer", help="Optimizer (train).")] = None,
    grad_dtype: Annotated[Optional[GradDtype], typer.Option("--grad-dtype", help="Gradient accumulation dtype (train).")] = None,
    kv_dtype: Annotated[Optional[KvDtype], typer.Option("--kv-dtype", help="KV-cache dtype (infer).")] = None,
    flash: Annotated[Optional[bool], typer.Option("--flash/--no-flash", help="Flash attention (default on).")] = None,
    batch: Annotated[IntOpt, typer.Option("--batch", help="Concurrent sequences (infer).")] = None,
    reserve: Annotated[Optional[str], typer.Option("--reserve", help="Runtime reserve, e.g. '2GiB+5%' (default), '4GiB', '0'; vLLM's gpu-memory-utilization 0.9 is '10%'.")] = None,
    plan: Annotated[Optional[Path], typer.Option("--plan", help="Plan file saved by 'sweep --save'.")] = None,
    capacity_factor: CapacityFactorOpt = None,
    fp8_weight_copies: Fp8CopiesOpt = None,
    fp8_params: Fp8ParamsOpt = None,
    fused_cross_entropy: FusedCeOpt = None,
    recompute_modules: RecomputeModulesOpt = None,
    recompute_layers: RecomputeLayersOpt = None,
    vocab_divisible_by: VocabOpt = None,
    dropout: DropoutOpt = None,
    offload_layers: OffloadOpt = None,
    split_embedding_loss: SplitOpt = None,
    uneven_pp: UnevenOpt = None,
    overlap_tp: OverlapTpOpt = None,
    overlap_ep: OverlapEpOpt = None,
    overlap_pp: OverlapPpOpt = None,
    overlap_cp: OverlapCpOpt = None,
    overlap_dp: OverlapDpOpt = None,
    stack: StackOpt = None,
    moe_dispatcher: MoeDispatcherOpt = None,
    cuda_graphs: CudaGraphsOpt = None,
    attention_kernel: AttentionKernelOpt = None,
    largest: Annotated[bool, typer.Option(
        "--largest",
        help="Instead of a model: the largest model of a family (--family) that fits --gpus GPUs of each --sku "
             "(train: some layout of the sweep's search fits; infer: one replica holds --batch x --seq), with "
             "its layout and the next larger step, which does not fit.")] = False,
    family: Annotated[str, typer.Option("--family", help="With --largest: dense (Llama-3 shape) or moe.")] = "dense",
    experts: Annotated[int, typer.Option("--experts", help="With --largest --family moe: routed experts per layer.")] = 0,
    top_k: Annotated[int, typer.Option("--top-k", help="With --largest --family moe: experts each token runs.")] = 0,
    json_: JsonOpt = False,
    fmt: FormatOpt = None,
    profiles: ProfilesOpt = None,
    check: CheckOpt = False,
    ascii_: AsciiOpt = False,
    wide: WideOpt = False,
    plot: PlotOpt = None,
    force: ForceOpt = False,
) -> None:
    """Per-GPU memory (weights, gradients, optimizer, activations, KV cache, reserve) and whether it fits.

    One SKU prints a breakdown with headroom and a verdict; several SKUs a comparison table with the
    fewest GPUs that fit and what change would make it fit. Suggested layouts keep TP inside the SKU's
    scale-up domain (8-GPU node, 72-GPU rack) and name the nodes or racks they take. With --check,
    exit 4 when nothing fits.
    """
    f = pick_format(json_, fmt)
    seq_n = seq_tokens(seq)
    mode = alias(mode, MODE_ALIASES, "--mode", "train|infer")
    precisions = [alias(p, PRECISION_ALIASES, "--precision") for t in (precision or []) for p in t.split(",") if p.strip()]
    if mode == "infer":
        refuse_inapplicable(mode, {
            "--vpp": vpp, "--dp": dp, "--etp": etp, "--cp": cp, "--zero": zero, "--micro-batch": micro_batch,
            "--recompute": recompute, "--sp/--no-sp": sp, "--global-batch": global_batch, "--recipe": recipe,
            "--optimizer": optimizer, "--grad-dtype": grad_dtype, "--flash/--no-flash": flash,
            "--capacity-factor": capacity_factor, "--fp8-weight-copies": fp8_weight_copies, "--fp8-params": fp8_params,
            "--recompute-modules": recompute_modules, "--recompute-layers": recompute_layers,
            "--fused-cross-entropy": fused_cross_entropy, "--vocab-divisible-by": vocab_divisible_by,
            "--offload-layers": offload_layers, "--stack": stack, "--moe-dispatcher": moe_dispatcher,
            "--cuda-graphs": cuda_graphs, "--attention-kernel": attention_kernel}, "training")
    else:
        refuse_inapplicable(mode, {"--batch": batch, "--kv-dtype": kv_dtype}, "inference")

    if largest:
        if model is not None or plan is not None:
            raise typer.BadParameter("--largest picks the model: drop the model name and --plan", param_hint="--largest")

        def find_largest():  # noqa: ANN202
            from mi400plan.api.largest import largest as find

            return find(catalog(profiles), list(sku or []), mode=mode, gpus=gpus, family=family.strip().lower(),
                        experts=experts, top_k=top_k, seq_len=seq_n, batch=batch, global_batch=global_batch,
                        precision=precision, kv_dtype=kv_dtype.value if kv_dtype else None)

        run("fit", f, find_largest, check=check, ascii=ascii_, wide=wide)
        return

    def compute():  # noqa: ANN202
        from mi400plan.api.fit import fit

        one = fit
        if len(precisions) > 1:
            from functools import partial

            from mi400plan.api.fit_precisions import fit_precisions

            one = partial(fit_precisions, precisions=precisions)
        return one(
            catalog(profiles), model, sku, mode,
            tp=tp, pp=pp, vpp=vpp, dp=dp, ep=ep, etp=etp, cp=cp, zero=zero, micro_batch=micro_batch, seq=seq_n,
            recompute=recompute.value if recompute else None, sequence_parallel=sp, gpus=gpus,
            global_batch=global_batch, recipe=recipe.value if recipe else None,
            **({} if len(precisions) > 1 else {"precision": precisions[0] if precisions else None}),
            optimizer=optimizer.value if optimizer else None, grad_dtype=grad_dtype.value if grad_dtype else None,
            kv_dtype=kv_dtype.value if kv_dtype else None, flash_attention=flash, batch=batch, reserve=reserve,
            plan=str(plan) if plan else None, capacity_factor=capacity_factor, fp8_weight_copies=fp8_weight_copies,
            fp8_params=fp8_params, recompute_modules=recompute_modules, fused_cross_entropy=fused_cross_entropy,
            recompute_layers=recompute_layers, vocab_divisible_by=vocab_divisible_by, dropout=dropout,
            offload_layers=offload_layers,
            split_embedding_loss=split_embedding_loss,
            uneven_pp=uneven_pp, overlap_tp=overlap_tp, overlap_ep=overlap_ep, overlap_pp=overlap_pp,
            overlap_cp=overlap_cp, overlap_dp=overlap_dp,
            **_stack_options(stack, moe_dispatcher, cuda_graphs, attention_kernel),
        )

    run("fit", f, compute, check=check, ascii=ascii_, wide=wide, plot=plot, force=force)


def _stack_options(*flags: object) -> dict[str, object]:
    """``options=TrainOptions(...)`` carrying the stack flags, or nothing when none is given."""
    given = stack_flags(*flags)  # type: ignore[arg-type]
    if all(v is None for v in given.values()):
        return {}
    from mi400plan.specs.layout import TrainOptions

    return {"options": TrainOptions(**given)}
