"""Training-recipe flags shared by ``fit`` and ``sweep`` (``specs.layout.TrainOptions``).

Every recipe switch exists in both commands with the same name, meaning and default; unset flags
stay ``None`` so a plan file's ``[recipe]`` table (``fit --plan``) is not overridden by defaults.
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from mi400plan.cli.counts import count

if TYPE_CHECKING:
    from mi400plan.specs.layout import TrainOptions


class RecipeChoice(str, Enum):
    megatron = "megatron"
    zero = "zero"
    fsdp = "fsdp"
    fp32 = "fp32"


class GradDtypeChoice(str, Enum):
    fp32 = "fp32"
    bf16 = "bf16"


class OptimizerChoice(str, Enum):
    adamw = "adamw"
    adam = "adam"
    sgd = "sgd"
    adafactor = "adafactor"


RecipeOpt = Annotated[Optional[RecipeChoice], typer.Option(
    "--recipe", help="Training bytes-per-parameter preset: megatron (Megatron-LM's distributed optimizer: bf16 "
    "weights + fp32 grads + fp32 master + Adam, 18 B/param), zero (ZeRO paper, 16 B/param) or fsdp (PyTorch "
    "FSDP mixed precision: fp32 sharded params as the master copy + fp32 grads + Adam, 16 B/param, bf16 only "
    "for the units being gathered).")]
GradDtypeOpt = Annotated[Optional[GradDtypeChoice], typer.Option(
    "--grad-dtype",
    help="Gradient accumulation and reduction dtype (train): fp32 (default; Megatron-LM reduces BF16 gradients in "
    "fp32) or bf16 (Megatron-Core --grad-reduce-in-bf16); sizes the gradient memory and the DP reduction.")]
OptimizerOpt = Annotated[Optional[OptimizerChoice], typer.Option("--optimizer", help="Optimizer (train).")]
FlashOpt = Annotated[Optional[bool], typer.Option("--flash/--no-flash", help="Flash attention (default on).")]
DropoutOpt = Annotated[Optional[bool], typer.Option(
    "--dropout/--no-dropout", help="Dropout masks kept for backward (Korthikanti et al. 2022; default off, as in "
    "modern LLM pre-training).")]
ReserveOpt = Annotated[Optional[str], typer.Option(
    "--reserve", help="Runtime reserve, e.g. '2GiB+5%' (default: context and communicators + allocator "
    "fragmentation), '4GiB', '0'.")]
CapacityFactorOpt = Annotated[Optional[float], typer.Option(
    "--capacity-factor",
    help="MoE (train): routed-token buffers hold top_k x this many copies of each local token. Default 1.25: "
         "Megatron-Core's default MoE is dropless, so this is a load-imbalance allowance for the busiest "
         "expert rank's dispatch buffers, not a token-dropping capacity.")]
MoeCapacityOpt = Annotated[Optional[float], typer.Option(
    "--moe-capacity-factor", metavar="F",
    help="MoE (train): token-dropping expert capacity (Megatron-Core --moe-expert-capacity-factor with "
         "--moe-pad-expert-input-to-capacity): each expert takes at most F x its balanced share of routed "
         "tokens, drops the rest and is padded up to it, so expert GEMMs, permutation and dispatch run on F x "
         "the routed tokens, and full CUDA graphs can capture the MoE layer. Default: dropless.")]
Fp8CopiesOpt = Annotated[Optional[int], typer.Option(
    "--fp8-weight-copies", parser=count, metavar="N",
    help="With a low --precision (fp8, mxfp8, nvfp4, mxfp4; train): cached narrow casts per GEMM weight. Default "
         "2, as Transformer Engine keeps them: a row-wise copy for the forward GEMM and a transposed (column-wise) "
         "one for the backward pass.")]
RecomputeModulesOpt = Annotated[Optional[str], typer.Option(
    "--recompute-modules", metavar="LIST",
    help="What --recompute selective recomputes (Megatron-Core --recompute-modules; comma-separated; default "
         "core_attn): core_attn, mla_up_proj, moe_act, layernorm, mlp, moe, shared_experts. Sets --recompute "
         "selective in fit when --recompute is not given.")]
RecomputeLayersOpt = Annotated[Optional[int], typer.Option(
    "--recompute-layers", parser=count, metavar="N",
    help="What --recompute full recomputes: the first N layers of each model chunk (Megatron-Core "
         "--recompute-method block --recompute-num-layers N); 0, the default: every layer. Sets --recompute full "
         "in fit when --recompute is not given.")]
Fp8ParamsOpt = Annotated[Optional[bool], typer.Option(
    "--fp8-params/--no-fp8-params",
    help="With --precision fp8 (train): hold the block GEMM weights as FP8 tensors, with no bf16 working copy "
         "(Megatron-Core --fp8-param-gather; Megatron-Bridge's FP8 current-scaling preset sets it). The "
         "fp32 master weights stay; embedding, output layer and norms stay bf16. Default off.")]
Bf16ShareOpt = Annotated[Optional[float], typer.Option(
    "--bf16-gemm-share", metavar="F",
    help="With a low --precision (train): the share of transformer-block linear layers kept in BF16. Default "
         "0.15 for nvfp4 and mxfp4 (NVIDIA's NVFP4 pretraining recipe, arXiv 2509.25149: about 15 % of the linear "
         "layers, most of them the last blocks), 0 for fp8 and mxfp8.")]
FusedCeOpt = Annotated[Optional[bool], typer.Option(
    "--fused-cross-entropy/--no-fused-cross-entropy",
    help="Train: the loss is Transformer Engine's fused cross entropy (Megatron-Core --cross-entropy-loss-fusion "
         "--cross-entropy-fusion-impl te; Megatron-Bridge's performance recipes set it), which keeps the 16-bit "
         "logits for the backward instead of an fp32 copy. Default off (fp32 logits).")]
VocabOpt = Annotated[Optional[int], typer.Option(
    "--vocab-divisible-by", parser=count, metavar="N",
    help="Train: Megatron-LM pads the vocabulary to a multiple of this x TP (default 128; Llama-3's 128,256 "
         "-> 129,024 at TP 8). The padded rows cost memory; parameter counts stay unpadded.")]
OffloadOpt = Annotated[Optional[int], typer.Option(
    "--offload-layers", parser=count, metavar="N",
    help="Train: offload the saved activations of the first N layers of each model chunk to host memory "
         "(Megatron-Core --cpu-offloading --cpu-offloading-num-layers N; default 0). One offloaded layer stays in "
         "HBM while it is copied; the copies run over the host link (PCIe or NVLink-C2C) behind "
         "the next layer's compute and only the excess adds to the step. fit refuses N >= a chunk's layers; "
         "sweep clamps N to each layout's layers per chunk - 1.")]
UnevenOpt = Annotated[Optional[bool], typer.Option(
    "--uneven-pp/--no-uneven-pp",
    help="When PP x VPP does not divide the layers, let the first and the last pipeline stage hold fewer "
         "layers (Megatron-Core --decoder-first/last-pipeline-num-layers; default on): DeepSeek-V3's 61 "
         "layers at PP 16 = 2 + 14 x 4 + 3; with VPP, where that cannot hold, a balanced custom layout "
         "(--pipeline-model-parallel-layout): PP 4 x VPP 4 = 15 + 15 + 16 + 15.")]
class PpScheduleChoice(str, Enum):
    f1b = "1f1b"
    dualpipe = "dualpipe"


PpScheduleOpt = Annotated[Optional[PpScheduleChoice], typer.Option(
    "--pp-schedule",
    help="Train: pipeline schedule. '1f1b' (default): Megatron's 1F1B, interleaved when --vpp > 1. 'dualpipe': "
         "DeepSeek-V3's bidirectional schedule (arXiv 2412.19437, Table 2): each rank holds two stages' parameters "
         "and PP + 1 micro-batches of activations, bubble (PP/2 - 1)(F&B + B - 3W); needs an even PP, no VPP, and an "
         "even number of micro-batches >= 2 x PP.")]
OverlapDpOpt = Annotated[Optional[bool], typer.Option(
    "--overlap-dp/--no-overlap-dp",
    help="Gradient reduction and parameter gathers overlap the backward/forward passes (default on); "
         "--no-overlap-dp runs them after the backward, as Megatron-LM 2021 did.")]
OverlapTpOpt = Annotated[Optional[bool], typer.Option(
    "--overlap-tp/--no-overlap-tp", help="Hide TP/SP collectives behind GEMMs (default: exposed).")]
OverlapEpOpt = Annotated[Optional[bool], typer.Option(
    "--overlap-ep/--no-overlap-ep", help="Hide EP all-to-all behind GEMMs (default: exposed).")]
OverlapPpOpt = Annotated[Optional[bool], typer.Option(
    "--overlap-pp/--no-overlap-pp",
    help="Interleaved schedule (VPP > 1): pipeline send/recv runs behind the next chunk's compute (default on, "
         "Megatron-LM's overlap_p2p_comm).")]
OverlapCpOpt = Annotated[Optional[bool], typer.Option(
    "--overlap-cp/--no-overlap-cp",
    help="Hide context-parallel key/value exchanges behind attention compute (default on: ring attention).")]
SplitOpt = Annotated[Optional[bool], typer.Option(
    "--split-embedding-loss/--no-split-embedding-loss",
    help="Count the input embedding and the loss as one layer each in the pipeline split, so PP x VPP may "
         "divide layers + 2 (Megatron-Core --account-for-embedding-in-pipeline-split "
         "--account-for-loss-in-pipeline-split; Llama 3 405B: 126 + 2 = 16 stages x 8).")]


class FinetuneChoice(str, Enum):
    none = "none"
    lora = "lora"


FinetuneOpt = Annotated[Optional[FinetuneChoice], typer.Option(
    "--finetune",
    help="Train: 'lora' freezes the base weights (no weight gradients, gradients or optimizer states for them) "
         "and trains low-rank adapters (Hu et al. 2021); default none (every weight trains).")]
LoraRankOpt = Annotated[Optional[int], typer.Option(
    "--lora-rank", parser=count, metavar="R",
    help="With --finetune lora: the adapters' rank. Default 16, the MLPerf Training Llama 2 70B LoRA "
         "reference's (mlcommons/training, 2024-04-18).")]
LoraTargetsOpt = Annotated[Optional[str], typer.Option(
    "--lora-targets", metavar="LIST",
    help="With --finetune lora: the layers that get adapters, comma-separated: qkv, proj, fc1, fc2 "
         "(Megatron-Core linear_qkv, linear_proj, linear_fc1, linear_fc2). Default qkv,proj, the MLPerf "
         "Training Llama 2 70B LoRA reference's.")]


DocLengthOpt = Annotated[Optional[str], typer.Option(
    "--doc-length", metavar="DIST",
    help="Train: packed sequences. The token lengths of the documents (fine-tuning samples) packed into each "
         "--seq row, attention kept inside each document (Transformer Engine / flash-attn variable-length "
         "kernels): 512, uniform:A-B or a CSV of length,count rows, as serve's --input-len. The attention core "
         "then does the per-document causal work, efficiency x E[d^2] / E[d] keys a query instead of the row. "
         "Default: none (one sequence a row).")]
PackEfficiencyOpt = Annotated[Optional[float], typer.Option(
    "--pack-efficiency", metavar="F",
    help="With --doc-length: the share of each packed row that documents fill (the rest is padding). Default: "
         "what first-fit packing of the shuffled documents reaches (Megatron-Bridge's default packer), simulated.")]


def recipe_flags(**flags: Any) -> dict[str, Any]:
    """The flags as ``TrainOptions`` keyword arguments (enum choices as their values, ``None`` kept)."""
    return {k: (v.value if isinstance(v, Enum) else v) for k, v in flags.items()}


def train_options(**flags: Any) -> "TrainOptions":
    """The one place a command's recipe flags become the recipe object every command takes
    (``specs.layout.TrainOptions``): only the flags given are set (``TrainOptions.explicit``), so a
    plan file's ``[recipe]`` table stays under them; a bad value is a usage error (exit 2)."""
    from mi400plan.specs.layout import TrainOptions

    unknown = set(flags) - set(TrainOptions.model_fields)
    if unknown:
        raise TypeError(f"not TrainOptions fields: {sorted(unknown)}")
    return TrainOptions.given(**recipe_flags(**flags))


def refuse_step_time(given: dict[str, object]) -> None:
    """``fit`` prices memory, not step time: a step-time switch given to it (an overlap flag) is a usage
    error naming the flag, not silently kept. ``sweep`` and ``fit --largest`` (which prices the largest
    model's fastest layout) take them."""
    for flag, value in given.items():
        if value is not None:
            raise typer.BadParameter("a step-time switch: fit prices memory per GPU, which it does not change; "
                                     "sweep (or fit --largest) prices step time with it", param_hint=flag)


# Each TrainOptions field's flag, as fit and sweep spell it (the on/off pairs in full, as errors name them).
RECIPE_FLAGS = {
    "recipe": "--recipe", "precision": "--precision", "optimizer": "--optimizer", "grad_dtype": "--grad-dtype",
    "flash_attention": "--flash/--no-flash", "dropout": "--dropout/--no-dropout", "reserve": "--reserve",
    "capacity_factor": "--capacity-factor", "moe_capacity_factor": "--moe-capacity-factor",
    "fp8_weight_copies": "--fp8-weight-copies",
    "fp8_params": "--fp8-params/--no-fp8-params", "recompute_modules": "--recompute-modules",
    "bf16_gemm_share": "--bf16-gemm-share",
    "recompute_layers": "--recompute-layers", "fused_cross_entropy": "--fused-cross-entropy/--no-fused-cross-entropy",
    "vocab_divisible_by": "--vocab-divisible-by", "offload_layers": "--offload-layers",
    "uneven_pp": "--uneven-pp/--no-uneven-pp", "pp_schedule": "--pp-schedule", "split_embedding_loss": "--split-embedding-loss/--no-split-embedding-loss",
    "overlap_tp": "--overlap-tp/--no-overlap-tp", "overlap_ep": "--overlap-ep/--no-overlap-ep",
    "overlap_pp": "--overlap-pp/--no-overlap-pp", "overlap_cp": "--overlap-cp/--no-overlap-cp",
    "overlap_dp": "--overlap-dp/--no-overlap-dp",
    "stack": "--stack", "moe_dispatcher": "--moe-dispatcher", "cuda_graphs": "--cuda-graphs",
    "attention_kernel": "--attention-kernel",
    "finetune": "--finetune", "lora_rank": "--lora-rank", "lora_targets": "--lora-targets",
    "doc_length": "--doc-length", "pack_efficiency": "--pack-efficiency",
}


def flag_values(given: dict[str, Any]) -> dict[str, Any]:
    """``TrainOptions`` keyword arguments keyed by their flags instead (for errors that name the flag)."""
    return {RECIPE_FLAGS[k]: v for k, v in given.items()}


# --- software stack (``mi400plan.stacks``): one block, shared by fit, sweep and calibrate ----------
class DispatcherChoice(str, Enum):
    alltoall = "alltoall"
    allgather = "allgather"
    deepep = "deepep"
    hybridep = "hybridep"
    none = "none"


class GraphChoice(str, Enum):
    none = "none"
    partial = "partial"
    full = "full"


class AttentionKernelChoice(str, Enum):
    fa2 = "fa2"
    fa3 = "fa3"
    cudnn = "cudnn"
    ck = "ck"
    triton = "triton"


StackOpt = Annotated[Optional[str], typer.Option(
    "--stack", metavar="NAME",
    help="Train: software stack profile (profiles/stacks; 'mi400plan profiles list --kind stacks'). Default: the "
         "newest vendor reference stack of each SKU's vendor (NeMo Megatron-Bridge for NVIDIA, Primus for AMD), "
         "named in the output.")]
MoeDispatcherOpt = Annotated[Optional[DispatcherChoice], typer.Option(
    "--moe-dispatcher", help="Train: MoE token dispatcher, overriding the stack's: sets the dispatched bytes "
    "(DeepEP and HybridEP dispatch FP8 tokens in FP8 training; allgather gathers every EP rank's tokens).")]
CudaGraphsOpt = Annotated[Optional[GraphChoice], typer.Option(
    "--cuda-graphs",
    help="Train: CUDA/HIP graph scope, overriding the stack's; 'full' removes the host-bound expert term "
         "where it captures the MoE layer: with --moe-capacity-factor (dropless layers stay eager).")]
AttentionKernelOpt = Annotated[Optional[AttentionKernelChoice], typer.Option(
    "--attention-kernel",
    help="Train: attention kernel generation, overriding the stack's; FA2 <-> FA3/cuDNN on NVIDIA scales the measured "
         "attention efficiency by 1.5-2.0x (FlashAttention-3 paper), other changes widen its range.")]

