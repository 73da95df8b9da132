"""``mi400plan fit``: per-GPU memory for training or inference on one or more SKUs."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from mi400plan.cli.recipe import (
    CapacityFactorOpt, DropoutOpt, FlashOpt, Fp8CopiesOpt, Fp8ParamsOpt,
    Bf16ShareOpt, FusedCeOpt, GradDtypeOpt, OffloadOpt, MoeCapacityOpt,
    OptimizerOpt, OverlapCpOpt, OverlapDpOpt, OverlapEpOpt, OverlapPpOpt, OverlapTpOpt, RecipeOpt,
    RecomputeLayersOpt, RecomputeModulesOpt, SplitOpt, UnevenOpt, VocabOpt, PpScheduleOpt, flag_values, refuse_step_time, train_options,
    AttentionKernelOpt, CudaGraphsOpt, MoeDispatcherOpt, StackOpt, FinetuneOpt, LoraRankOpt, LoraTargetsOpt, DocLengthOpt, PackEfficiencyOpt,
)
from mi400plan.cli.counts import count, sku_list
from mi400plan.cli.common import WidthOpt
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


class KvDtype(str, Enum):
    bf16 = "bf16"
    fp8 = "fp8"


IntOpt = Optional[int]


def _refuse_other_mode(mode: str, train_only: dict[str, object], infer_only: dict[str, object],
                       stray_tokens: bool) -> None:
    """Usage errors for the flags of the mode not asked for, and for --tokens without --largest."""
    if mode == "infer":
        refuse_inapplicable(mode, train_only, "training")
    else:
        refuse_inapplicable(mode, infer_only, "inference")
    if stray_tokens:
        raise typer.BadParameter("--tokens prices the answer of --largest; for a named model use "
                                 "'sweep MODEL --tokens'", param_hint="--tokens")


@app.command("fit")
def fit_cmd(
    model: Annotated[Optional[str], typer.Argument(help="Model profile name or path (TOML / HF config.json).")] = None,
    sku: Annotated[
        Optional[list[str]],
        typer.Option("--sku", callback=sku_list, help="Accelerator profile; repeatable or comma-separated "
                     "(mi355x,b200); 'all' (the default) compares every SKU."),
    ] = None,
    mode: Annotated[str, typer.Option("--mode", metavar="train|infer", help="train (training) or infer (inference).")] = "train",
    tp: Annotated[IntOpt, typer.Option("--tp", parser=count, metavar="N", help="Tensor parallel size.")] = None,
    pp: Annotated[IntOpt, typer.Option("--pp", parser=count, metavar="N", help="Pipeline stages.")] = None,
    vpp: Annotated[IntOpt, typer.Option("--vpp", parser=count, metavar="N", help="Virtual stages per rank (interleaved schedule when > 1).")] = None,
    dp: Annotated[IntOpt, typer.Option("--dp", parser=count, metavar="N", help="Data-parallel replicas (default: from --gpus, else 1).")] = None,
    ep: Annotated[IntOpt, typer.Option("--ep", parser=count, metavar="N", help="Expert parallel size (MoE).")] = None,
    etp: Annotated[IntOpt, typer.Option("--etp", parser=count, metavar="N", help="Expert tensor parallel size (MoE).")] = None,
    cp: Annotated[IntOpt, typer.Option("--cp", parser=count, metavar="N", help="Context parallel size.")] = None,
    zero: Annotated[IntOpt, typer.Option("--zero", parser=count, metavar="N", help="ZeRO stage 0-3 (3 = FSDP); default 1.")] = None,
    micro_batch: Annotated[IntOpt, typer.Option("--micro-batch", parser=count, metavar="N", help="Sequences per micro-batch.")] = None,
    seq: Annotated[Optional[str], typer.Option("--seq", metavar="TOKENS", help="Sequence length (train, default 4096) or context (infer, default the model's maximum); 32k, 128K (k = 1024).")] = None,
    recompute: Annotated[Optional[RecomputeChoice], typer.Option("--recompute", help="Activation recomputation.")] = None,
    sp: Annotated[Optional[bool], typer.Option("--sp/--no-sp", help="Sequence parallelism with TP (default on).")] = None,
    gpus: Annotated[IntOpt, typer.Option("--gpus", parser=count, metavar="N", help="Total GPUs (train: sets DP; infer: sets TP).")] = None,
    global_batch: Annotated[IntOpt, typer.Option("--global-batch", help="Sequences per step (caps micro-batches in flight).")] = None,
    recipe: RecipeOpt = None,
    precision: Annotated[Optional[list[str]], typer.Option("--precision", metavar="PRECISION", help="train: bf16|fp8|mxfp8|nvfp4|mxfp4|fp32; infer weights: bf16|fp8|mxfp8|fp6|fp4|nvfp4|int4 (bfloat16, float32, float8 too). Repeat or comma-separate (bf16,fp8) to compare them in one table.")] = None,
    optimizer: OptimizerOpt = None,
    grad_dtype: GradDtypeOpt = None,
    kv_dtype: Annotated[Optional[KvDtype], typer.Option("--kv-dtype", help="KV-cache dtype (infer).")] = None,
    flash: FlashOpt = None,
    batch: Annotated[IntOpt, typer.Option("--batch", parser=count, metavar="N", help="Concurrent sequences (infer).")] = None,
    reserve: Annotated[Optional[str], typer.Option("--reserve", help="Runtime reserve, e.g. '2GiB+5%' (default), '4GiB', '0'; vLLM's gpu-memory-utilization 0.9 is '10%'.")] = None,
    plan: Annotated[Optional[Path], typer.Option("--plan", help="Plan file saved by 'sweep --save'.")] = None,
    capacity_factor: CapacityFactorOpt = None,
    moe_capacity_factor: MoeCapacityOpt = None,
    fp8_weight_copies: Fp8CopiesOpt = None,
    fp8_params: Fp8ParamsOpt = None,
    bf16_gemm_share: Bf16ShareOpt = None,
    fused_cross_entropy: FusedCeOpt = None,
    recompute_modules: RecomputeModulesOpt = None,
    recompute_layers: RecomputeLayersOpt = None,
    vocab_divisible_by: VocabOpt = None,
    dropout: DropoutOpt = None,
    offload_layers: OffloadOpt = None,
    split_embedding_loss: SplitOpt = None,
    uneven_pp: UnevenOpt = None,
    pp_schedule: PpScheduleOpt = None,
    overlap_tp: OverlapTpOpt = None,
    overlap_ep: OverlapEpOpt = None,
    overlap_pp: OverlapPpOpt = None,
    overlap_cp: OverlapCpOpt = None,
    overlap_dp: OverlapDpOpt = None,
    stack: StackOpt = None, moe_dispatcher: MoeDispatcherOpt = None,
    cuda_graphs: CudaGraphsOpt = None, attention_kernel: AttentionKernelOpt = None,
    finetune: FinetuneOpt = None, lora_rank: LoraRankOpt = None, lora_targets: LoraTargetsOpt = None,
    doc_length: DocLengthOpt = None, pack_efficiency: PackEfficiencyOpt = None,
    largest: Annotated[bool, typer.Option(
        "--largest",
        help="Instead of a model: the largest model of a family (--family) that fits --gpus GPUs of each --sku "
             "(train: some layout of the sweep's search fits; infer: one replica holds --batch x --seq), with "
             "its layout and the next larger step, which does not fit.")] = False,
    family: Annotated[str, typer.Option("--family", help="With --largest: dense (Llama-3 shape) or moe.")] = "dense",
    experts: Annotated[int, typer.Option("--experts", parser=count, metavar="N", help="With --largest --family moe: routed experts per layer.")] = 0,
    top_k: Annotated[int, typer.Option("--top-k", parser=count, metavar="N", help="With --largest --family moe: experts each token runs.")] = 0,
    tokens: Annotated[Optional[str], typer.Option("--tokens", help="With --largest --mode train: training tokens (15T); adds the largest model's step time and days to train.")] = None,
    json_: JsonOpt = False,
    fmt: FormatOpt = None,
    profiles: ProfilesOpt = None,
    check: CheckOpt = False,
    ascii_: AsciiOpt = False,
    wide: WideOpt = False,
    width: WidthOpt = None,
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
    precisions = _precisions(precision)
    given = dict(recipe=recipe, optimizer=optimizer, grad_dtype=grad_dtype, flash_attention=flash, dropout=dropout,
                 capacity_factor=capacity_factor, moe_capacity_factor=moe_capacity_factor, fp8_params=fp8_params,
                 fp8_weight_copies=fp8_weight_copies, bf16_gemm_share=bf16_gemm_share,
                 recompute_modules=recompute_modules, recompute_layers=recompute_layers,
                 fused_cross_entropy=fused_cross_entropy, vocab_divisible_by=vocab_divisible_by,
                 offload_layers=offload_layers, uneven_pp=uneven_pp, pp_schedule=pp_schedule, split_embedding_loss=split_embedding_loss,
                 overlap_tp=overlap_tp, overlap_ep=overlap_ep, overlap_pp=overlap_pp, overlap_cp=overlap_cp,
                 overlap_dp=overlap_dp, stack=stack, moe_dispatcher=moe_dispatcher, cuda_graphs=cuda_graphs,
                 attention_kernel=attention_kernel, finetune=finetune, lora_rank=lora_rank, lora_targets=lora_targets,
                 doc_length=doc_length, pack_efficiency=pack_efficiency)
    _refuse_other_mode(mode, {"--vpp": vpp, "--dp": dp, "--etp": etp, "--cp": cp, "--zero": zero,
                              "--micro-batch": micro_batch, "--recompute": recompute, "--sp/--no-sp": sp,
                              "--global-batch": global_batch, **flag_values(given)},
                       {"--batch": batch, "--kv-dtype": kv_dtype}, tokens is not None and not largest)

    def options():  # noqa: ANN202 - the recipe object (precision travels on its own: fit compares several)
        return train_options(reserve=reserve, **given)

    if largest:
        layout = {"--tp": tp, "--pp": pp, "--vpp": vpp, "--cp": cp, "--ep": ep, "--etp": etp, "--zero": zero,
                  "--micro-batch": micro_batch, "--dp": dp, "--plot": plot, "--recompute": recompute, "--sp/--no-sp": sp}
        search = dict(mode=mode, gpus=gpus, family=family.strip().lower(), experts=experts, top_k=top_k, seq_len=seq_n,
                      batch=batch, global_batch=global_batch, kv_dtype=kv_dtype.value if kv_dtype else None, tokens=tokens)
        return _run_largest(f, profiles, sku, (model, plan), precisions, options() if mode == "train" else None,
                            layout, search, dict(check=check, ascii=ascii_, wide=wide))

    if mode == "train":
        refuse_step_time(flag_values({k: v for k, v in given.items() if k.startswith("overlap_") or k in STACK_SWITCHES or k in PACKING}))

    kw = dict(tp=tp, pp=pp, vpp=vpp, dp=dp, ep=ep, etp=etp, cp=cp, zero=zero, micro_batch=micro_batch, seq=seq_n,
              recompute=recompute.value if recompute else None, sequence_parallel=sp, gpus=gpus,
              global_batch=global_batch, kv_dtype=kv_dtype.value if kv_dtype else None, batch=batch,
              reserve=reserve if mode == "infer" else None, plan=str(plan) if plan else None)
    run("fit", f, lambda: _fit(profiles, model, sku, mode, precisions, options() if mode == "train" else None, kw),
        check=check, ascii=ascii_, wide=wide, plot=plot, force=force)



def _precisions(precision: list[str] | None) -> list[str]:
    """The ``--precision`` values (repeated or comma-separated); an empty value is a usage error, not the default."""
    out = [alias(p, PRECISION_ALIASES, "--precision") for t in (precision or []) for p in t.split(",") if p.strip()]
    if precision and not out:
        raise typer.BadParameter("an empty value names no precision", param_hint="--precision")
    return [p for p in out if p]

def _run_largest(f: str, profiles: Optional[list[Path]], sku: Optional[list[str]], named: tuple[object, object],
                 precisions: list[str], options: object, layout: dict[str, object], search: dict,
                 out: dict) -> None:
    """``fit --largest``: the model is the answer (no name or plan), the layout flags pin its search."""
    if any(v is not None for v in named):
        raise typer.BadParameter("--largest picks the model: drop the model name and --plan", param_hint="--largest")
    rc = layout["--recompute"]
    layout["--recompute"] = {"none": 0, "selective": 1, "full": 2}[rc.value] if rc else None  # type: ignore[attr-defined]
    sp = layout["--sp/--no-sp"]
    layout["--sp/--no-sp"] = None if sp is None else int(sp)  # type: ignore[call-overload]
    search = dict(search, precision=precisions[0] if len(precisions) == 1 else (precisions or None),
                  pins=_largest_pins(search["mode"], layout))
    run("fit", f, lambda: _largest(profiles, sku, options, search), **out)


def _fit(profiles: Optional[list[Path]], model: Optional[str], sku: Optional[list[str]], mode: str,
         precisions: list[str], options: object, kw: dict) -> object:
    """``fit`` (or, for several precisions, ``fit_precisions``) with the recipe object and the layout."""
    import dataclasses

    from mi400plan.api.fit import LayoutPins, fit

    pins = {f.name for f in dataclasses.fields(LayoutPins)}
    kw = {k: v for k, v in kw.items() if k not in pins} | {"layout": LayoutPins(**{k: kw[k] for k in pins})}
    if len(precisions) > 1:
        from mi400plan.api.fit_precisions import fit_precisions

        return fit_precisions(catalog(profiles), model, sku, mode, precisions=precisions, options=options, **kw)
    return fit(catalog(profiles), model, sku, mode, precision=precisions[0] if precisions else None,
               options=options, **kw)


def _largest(profiles: Optional[list[Path]], sku: Optional[list[str]], options: object, search: dict) -> object:
    """``fit --largest`` with the recipe object and the search settings."""
    from mi400plan.api.largest import largest

    return largest(catalog(profiles), list(sku or []), options=options, **search)


# fit's layout flags as the values the --largest search may use (``search.SearchOptions`` pins).
# The stack's single switches change step time only: fit refuses them as it does the overlap switches
# (fit --largest, which prices step time, takes them); --stack itself is named in fit's answer.
STACK_SWITCHES = ("moe_dispatcher", "cuda_graphs", "attention_kernel")
# packed sequences change the attention core's work, not memory (``mi400plan.packing``): step-time switches
PACKING = ("doc_length", "pack_efficiency")
_PIN_KEYS = {"--tp": "tp", "--pp": "pp", "--vpp": "vpp", "--cp": "cp", "--ep": "ep", "--etp": "etp", "--zero": "zero",
             "--micro-batch": "micro_batch", "--recompute": "recompute", "--sp/--no-sp": "sequence_parallel"}


def _largest_pins(mode: str, given: dict[str, object]) -> dict[str, list[int]]:
    """``fit --largest`` searches the layout: the layout flags given pin it (train) as in ``sweep``; --dp
    (set by --gpus), --plot (no picture of a ladder) and, for inference, the layout are refused."""
    for flag in ("--dp", "--plot"):
        if given.get(flag) is not None:
            why = "--largest sets DP from --gpus" if flag == "--dp" else "--largest draws no plot"
            raise typer.BadParameter(f"{why}; drop it", param_hint=flag)
    pins = {_PIN_KEYS[f]: [int(v)] for f, v in given.items() if f in _PIN_KEYS and v is not None}
    if mode == "infer" and pins:
        flag = next(f for f in _PIN_KEYS if given.get(f) is not None)
        raise typer.BadParameter("--largest --mode infer tries every TP, PP and EP replica; drop it", param_hint=flag)
    return pins
