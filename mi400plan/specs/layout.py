"""Parallel layout and precision recipes: the run set-up that ``fit`` and ``sweep`` size memory for.

``Layout`` is the parallelism of one training run (Megatron-Core vocabulary):

* ``tp``   tensor parallel (Shoeybi et al. 2019), ``sequence_parallel`` (Korthikanti et al. 2022)
* ``pp``   pipeline stages; ``vpp`` virtual stages (model chunks) per rank, the interleaved
  schedule of Narayanan et al. 2021 (``schedule`` is ``"interleaved"`` when ``vpp > 1``, else ``"1f1b"``)
* ``dp``   data-parallel replicas; ``zero`` = ZeRO stage 0-3 (Rajbhandari et al. 2020; FSDP == 3)
* ``ep``   expert parallel, ``etp`` expert tensor parallel; Megatron-Core folds the expert grid over
  the same ranks as the dense grid: ``tp*cp*dp == etp*ep*edp`` (edp = expert data parallel)
* ``cp``   context parallel (sequence split across ranks for attention)
* ``micro_batch`` sequences per micro-batch, ``recompute`` activation recomputation

GPUs in a training run = ``tp * pp * cp * dp``. Structural rules that need the model (TP divides heads,
PP divides layers, EP divides experts, ...) are checked by :func:`check_layout`, which raises
``LayoutError`` naming the broken rule.

``TrainRecipe`` and ``InferRecipe`` state bytes per parameter, optimizer state and number formats
explicitly; named presets reproduce the two published accountings (see ``TRAIN_PRESETS``).
No numpy here (specs are cheap to import).
"""

import re
from typing import TYPE_CHECKING, Literal

from pydantic import Field, field_validator, model_validator

from mi400plan.errors import LayoutError, UsageError
from mi400plan.packing import PackedDocs
from mi400plan.pipeline import MAX_OFFLOAD_LAYERS
from mi400plan.specs.common import StrictModel
from mi400plan.specs.model import ModelSpec
from mi400plan.units import GiB

if TYPE_CHECKING:
    from mi400plan.stacks import StackRequest

Recompute = Literal["none", "selective", "full"]
Schedule = Literal["1f1b", "interleaved"]

# Integer codes for the vectorized memory functions (numpy arrays cannot hold strings cheaply).
RECOMPUTE_CODES: dict[str, int] = {"none": 0, "selective": 1, "full": 2}
RECOMPUTE_NAMES: dict[int, str] = {v: k for k, v in RECOMPUTE_CODES.items()}
# What "selective" recomputes: Megatron-Core's ``recompute_modules`` (``TransformerConfig``, used when
# ``recompute_granularity`` is "selective"; default ["core_attn"]). "core_attn", "mlp", "moe" and
# "shared_experts" are checkpointed whole (only the module's input is kept); "mla_up_proj",
# "moe_act" and "layernorm" discard their outputs and recompute them before the backward pass.
RECOMPUTE_MODULES: tuple[str, ...] = ("core_attn", "mla_up_proj", "moe_act", "layernorm", "mlp", "moe",
                                      "shared_experts")
DEFAULT_RECOMPUTE_MODULES: tuple[str, ...] = ("core_attn",)


class Layout(StrictModel):
    """Parallelism of a training run. The ``[layout]`` table of a plan file has exactly these keys."""

    tp: int = Field(default=1, ge=1)
    pp: int = Field(default=1, ge=1)
    vpp: int = Field(default=1, ge=1)
    dp: int = Field(default=1, ge=1)
    ep: int = Field(default=1, ge=1)
    etp: int = Field(default=1, ge=1)
    cp: int = Field(default=1, ge=1)
    # ZeRO stage; default 1 = Megatron-Core distributed optimizer (optimizer states sharded over DP x CP)
    zero: int = Field(default=1, ge=0, le=3)
    micro_batch: int = Field(default=1, ge=1)
    recompute: Recompute = "none"
    sequence_parallel: bool = True

    @model_validator(mode="after")
    def _check(self) -> "Layout":
        if self.vpp > 1 and self.pp < 2:
            raise ValueError("vpp > 1 (interleaved schedule) needs pp >= 2")
        return self

    @property
    def schedule(self) -> Schedule:
        """Pipeline schedule: interleaved 1F1B when there are virtual stages, else plain 1F1B."""
        return "interleaved" if self.vpp > 1 else "1f1b"

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.cp * self.dp

    @property
    def edp(self) -> int:
        """Expert data-parallel size ``tp*cp*dp / (etp*ep)`` (Megatron-Core's expert grid)."""
        return (self.tp * self.cp * self.dp) // (self.etp * self.ep)

    def short(self) -> str:
        parts = [f"tp={self.tp}", f"pp={self.pp}"]
        if self.vpp > 1:
            parts.append(f"vpp={self.vpp}")
        parts.append(f"dp={self.dp}")
        if self.ep > 1 or self.etp > 1:
            parts += [f"ep={self.ep}", f"etp={self.etp}"]
        if self.cp > 1:
            parts.append(f"cp={self.cp}")
        parts += [f"zero={self.zero}", f"mb={self.micro_batch}", f"recompute={self.recompute}"]
        if self.tp > 1:
            parts.append("sp" if self.sequence_parallel else "no-sp")
        return " ".join(parts)


def check_layout(layout: Layout, model: ModelSpec, *, seq_len: int | None = None,
                 split_embedding_loss: bool = False, uneven_pp: bool = False) -> None:
    """Raise ``LayoutError`` (its message ends with ``[rule: NAME]``); see :func:`_check_layout`.

    ``split_embedding_loss`` / ``uneven_pp`` admit the pipeline splits of ``mi400plan.pipeline``
    (embedding and loss counted as layers; fewer layers on the first and last stage)."""
    try:
        _check_layout(layout, model, seq_len=seq_len, split_embedding_loss=split_embedding_loss, uneven_pp=uneven_pp)
    except LayoutError as exc:
        raise LayoutError(f"{exc.message} [rule: {exc.rule}]", rule=exc.rule, hint=exc.hint) from None


def _check_layout(layout: Layout, model: ModelSpec, *, seq_len: int | None = None,
                  split_embedding_loss: bool = False, uneven_pp: bool = False) -> None:
    """Raise ``LayoutError`` naming the first structural rule ``layout`` breaks for ``model``.

    Rules (Megatron-Core's argument checks, stated as the planner uses them):

    * ``tp-heads``: TP divides the number of attention heads (heads are split across TP ranks).
    * ``tp-kv-heads``: TP divides the KV heads, or the KV heads divide TP; in the second case each KV
      head is replicated on ``tp / kv_heads`` ranks (as vLLM does; Megatron requires the first).
    * ``pp-layers``: ``pp * vpp`` divides the number of layers (equal layers per model chunk).
    * ``ep-experts``: EP divides the routed experts; EP/ETP > 1 needs an MoE model.
    * ``expert-grid``: ``etp * ep`` divides ``tp * cp * dp`` (the expert grid is folded over the
      dense TP x CP x DP ranks, so the expert data-parallel size is an integer).
    * ``cp-seq``: CP divides the sequence length.
    """
    a = model.attention
    if a.num_heads % layout.tp:
        raise LayoutError(
            f"TP={layout.tp} does not divide the {a.num_heads} attention heads of {model.name}",
            rule="tp-heads",
            hint=f"use a TP that divides {a.num_heads}: {_divisors_text(a.num_heads)}",
        )
    if a.kind == "gqa":
        g = a.kv_heads
        if g % layout.tp and layout.tp % g:
            raise LayoutError(
                f"TP={layout.tp} and the {g} KV heads of {model.name}: TP must divide the KV heads or be a "
                "multiple of them (then KV heads are replicated)",
                rule="tp-kv-heads",
            )
    layers = model.num_layers
    from mi400plan.pipeline import SPLIT_NONE, pipeline_split

    if pipeline_split(layers, layout.pp, layout.vpp, split_embedding_loss, uneven_pp) == SPLIT_NONE:
        what = f"PP={layout.pp}" + (f" x VPP={layout.vpp}" if layout.vpp > 1 else "")
        allowed = " or uneven first/last stages" if uneven_pp else ""
        allowed += " or layers + 2 (embedding and loss as layers)" if split_embedding_loss else ""
        raise LayoutError(
            f"{what} does not divide the {layers} layers of {model.name} (each stage needs the same number "
            "of layers)" + (f"; no split{allowed} holds them either" if allowed else ""),
            rule="pp-layers",
            hint=f"PP x VPP must divide {layers}: {_divisors_text(layers)}",
        )
    if model.moe is None:
        if layout.ep > 1 or layout.etp > 1:
            raise LayoutError(f"EP/ETP > 1 needs an MoE model; {model.name} is dense", rule="ep-experts")
    else:
        e = model.moe.num_experts
        if e % layout.ep:
            raise LayoutError(
                f"EP={layout.ep} does not divide the {e} routed experts of {model.name}",
                rule="ep-experts",
                hint=f"use an EP that divides {e}: {_divisors_text(e)}",
            )
    dense_ranks = layout.tp * layout.cp * layout.dp
    if dense_ranks % (layout.ep * layout.etp):
        raise LayoutError(
            f"EP x ETP = {layout.ep * layout.etp} does not divide TP x CP x DP = {dense_ranks}: the expert grid "
            "is laid over the same ranks as the dense grid (Megatron-Core), so the expert data-parallel "
            "size would not be an integer",
            rule="expert-grid",
            hint="raise DP (more GPUs) or lower EP/ETP",
        )
    if seq_len is not None and seq_len % layout.cp:
        raise LayoutError(f"CP={layout.cp} does not divide the sequence length {seq_len}", rule="cp-seq")


def dp_from_gpus(gpus: int, tp: int, pp: int, cp: int) -> int:
    """Data-parallel size ``gpus / (tp*pp*cp)``; ``LayoutError`` (rule ``dp-integer``) if not whole."""
    mp = tp * pp * cp
    if gpus < mp or gpus % mp:
        raise LayoutError(
            f"{gpus} GPUs is not a whole number of TP x PP x CP = {tp}x{pp}x{cp} = {mp} replicas "
            "(data-parallel size must be an integer >= 1) [rule: dp-integer]",
            rule="dp-integer",
        )
    return gpus // mp


def _divisors_text(n: int) -> str:
    from mi400plan.intmath import divisors

    ds = divisors(n)
    if len(ds) > 12:
        ds = ds[:11] + [n]
        return ", ".join(str(d) for d in ds[:-1]) + f", ..., {n}"
    return ", ".join(str(d) for d in ds)


# --- runtime reserve ---------------------------------------------------------------------------


class RuntimeReserve(StrictModel):
    """Memory a real process cannot use for its tensors: ``fixed + fraction x capacity + fragmentation x
    allocated`` (``mi400plan.reserve`` has the sources).

    ``fixed_bytes`` None (training's default) counts the fixed part per layout: the CUDA/HIP context
    plus the NCCL/RCCL buffers of each communicator the layout runs (``reserve.fixed_bytes``); a number
    replaces it. ``fraction`` is a share of the SKU's usable HBM (``hbm_usable``), 0 by default in
    training. ``fragmentation`` is the caching allocator's share of the allocated bytes (3 % by
    default in training): only it being short makes a layout "tight" rather than "does not fit".
    Inference keeps 2 GiB + 5 % of HBM (``INFER_RESERVE``: vLLM leaves 10 % of HBM unused by default,
    ``gpu_memory_utilization = 0.9``, which 2 GiB + 5 % approaches on an 80 GB part).
    Users change it with ``--reserve`` (e.g. ``"4GiB+8%"``, ``"1GiB+3%alloc"``, ``"0"``).
    """

    fixed_bytes: float | None = Field(default=None, ge=0)
    fraction: float = Field(default=0.0, ge=0, lt=1)
    fragmentation: float = Field(default=0.03, ge=0, lt=1)

    def bytes_for(self, capacity_bytes: float, fixed: float = 0.0, allocated: float = 0.0) -> float:
        """The whole reserve of one rank: its fixed part (``fixed`` when counted per layout), the
        capacity share and the fragmentation share of ``allocated`` bytes."""
        f = self.fixed_bytes if self.fixed_bytes is not None else fixed
        return f + self.fraction * capacity_bytes + self.fragmentation * allocated

    def text(self) -> str:
        from mi400plan.units import fmt_bytes

        parts = ["context + NCCL/RCCL buffers per communicator" if self.fixed_bytes is None
                 else fmt_bytes(self.fixed_bytes)]
        if self.fraction:
            parts.append(f"{self.fraction * 100:g}% of HBM")
        if self.fragmentation:
            parts.append(f"{self.fragmentation * 100:g}% of allocated (fragmentation)")
        return " + ".join(parts)


INFER_RESERVE = RuntimeReserve(fixed_bytes=2 * GiB, fraction=0.05, fragmentation=0.0)


def _rest_pct(util: str) -> str:
    """The reserve that leaves ``util`` of HBM to the engine, as a percentage ('0.9' -> '10%')."""
    rest = 100.0 - 100.0 * float(util)
    return f"{rest:.4g}%" if 0 <= rest < 100 else "N%"


def parse_reserve(text: str) -> RuntimeReserve:
    """Parse ``"2GiB+5%"``, ``"4GiB"``, ``"10%"`` or ``"0"`` into a ``RuntimeReserve``.

    A bare decimal fraction such as ``"0.9"`` is refused as ambiguous: it could be 0.9 GiB, or vLLM's
    ``--gpu-memory-utilization`` (the share of HBM the engine may use, so a 10 % reserve).
    """
    from mi400plan.units import UnitError, parse_size

    bare = text.strip()
    if re.fullmatch(r"0?\.[0-9]+|1\.0*", bare):
        raise UsageError(
            f"reserve {text!r} is ambiguous: a bare fraction has no unit",
            hint=f"write '{bare}GiB' for {bare} GiB reserved, or, for vLLM's gpu-memory-utilization {bare}"
            f" (the engine uses {bare} of HBM), write the reserve as a percentage: '{_rest_pct(bare)}'",
        )
    fixed, frac, frag = 0.0, 0.0, 0.0
    for part in [p.strip() for p in text.replace(" ", "").split("+") if p.strip()]:
        if part.lower().endswith("%alloc"):
            try:
                frag += float(part[:-6]) / 100.0
            except ValueError:
                raise UsageError(f"cannot read reserve {text!r}: {part!r} is not a percentage of allocated") from None
        elif part.endswith("%"):
            try:
                frac += float(part[:-1]) / 100.0
            except ValueError:
                raise UsageError(f"cannot read reserve {text!r}: {part!r} is not a percentage") from None
        else:
            try:
                fixed += parse_size(part)
            except UnitError as exc:
                raise UsageError(f"cannot read reserve {text!r}: {exc}") from None
    if not (0 <= frac < 1 and 0 <= frag < 1):
        raise UsageError(f"reserve fraction in {text!r} must be between 0% and 100%")
    return RuntimeReserve(fixed_bytes=fixed, fraction=frac, fragmentation=frag)


# --- training recipe ---------------------------------------------------------------------------

Optimizer = Literal["adamw", "adam", "sgd", "adafactor"]


# Cached FP8 copies of each GEMM weight that NVIDIA Transformer Engine keeps in training: the weight
# quantizer of ``te.Linear`` is asked for row-wise usage (forward GEMM, ``y = x W^T``) and, whenever the
# layer input needs a gradient, column-wise usage (data-gradient GEMM, ``dx = dy W``); the result is
# cached as the layer's "weight" workspace across the micro-batches of a step (``is_first_microbatch``,
# which Megatron-Core passes). On Hopper (and Ada) FP8 GEMMs take only the TN layout, so the
# column-wise usage is a second, physically transposed FP8 tensor (``Float8Tensor._data`` and
# ``._transpose``; TE 1.x named them ``weight_fp8`` and ``weight_t_fp8``). Blackwell's MXFP8 recipe
# also keeps two tensors (``rowwise_data`` and ``columnwise_data``, each with its own E8M0 scale per
# 32 elements, so ~1.03 B each); only per-tensor FP8 on Blackwell reads one tensor both ways.
# Source: Transformer Engine docs, "Low precision training / Performance considerations: Handling
# transposes" and ``transformer_engine/pytorch/module/linear.py``.
TE_FP8_WEIGHT_COPIES = 2
# Activations saved as GEMM inputs under FP8 training: Transformer Engine 2.x quantizes a GEMM's input
# for the forward GEMM and keeps only the column-wise FP8 copy for the weight-gradient GEMM
# (``transformer_engine/pytorch/module/linear.py``: "Discard row-wise data since it is not needed in
# backward pass"), 1 byte an element (MXFP8 adds a 1-byte scale per 32 elements, ~3 %, not counted).
FP8_SAVED_INPUT_BYTES = 1.0
# Activation offloading (Transformer Engine ``transformer_engine/pytorch/cpu_offload.py``, which
# Megatron-Core's ``--cpu-offloading`` wraps around each transformer layer of a model chunk): every
# tensor a layer saves for backward (not its parameters: Megatron-Core's ``cpu_offloading_weights``
# defaults to False) is copied device-to-host on a side stream once the layer's forward ends,
# overlapped with the next layer's forward, and host-to-device ahead of the layer's backward,
# overlapped with the backward of the layer after it (one group prefetched). TE requires
# ``num_layers <= model_layers - 1`` (the chunk's last layer is never offloaded). With Megatron-Core's
# default ``cpu_offloading_double_buffering = False`` one offloaded layer's activations are in HBM at
# a time besides the layers that are not offloaded: the one being copied out in forward, or the one
# prefetched for its backward (with double buffering TE's ``AsyncDoubleBufferGroupOffloadHandler``
# keeps two reload buffers: 2).
OFFLOAD_IN_FLIGHT = 1


# ZeRO-3 parameter gathering (``TrainRecipe.zero3_gathering``). "fsdp_unit": per transformer layer, the current
# and the prefetched one, as PyTorch FSDP and Megatron FSDP wrap units. "deepspeed_limits": DeepSpeed gathers per
# leaf module (each linear layer; ``deepspeed/runtime/zero/partitioned_param_coordinator.py``,
# ``fetch_sub_module``, DeepSpeed commit 38327e0, 2025-02-21): the current module's parameters, then a
# prefetch of the next ones from its trace while the prefetched count is below ``min(max_live_parameters -
# available, prefetch_bucket_size)`` (the last one may overshoot by one tensor; none once the available
# count reaches ``max_live_parameters``); a module's parameters are released after it runs. Its gradients
# (``deepspeed/runtime/zero/stage3.py``, same commit): each parameter's whole gradient is copied into a
# flat bucket of ``reduce_bucket_size`` elements, reduce-scattered when the next gradient would overflow
# it. DeepSpeed's defaults (``deepspeed/runtime/zero/config.py``, same commit), in elements:
ZERO3_GATHERING_RULES = ("fsdp_unit", "deepspeed_limits")
DEEPSPEED_MAX_LIVE_PARAMETERS = 1e9  # stage3_max_live_parameters
DEEPSPEED_PREFETCH_BUCKET_SIZE = 5e7  # stage3_prefetch_bucket_size
DEEPSPEED_REDUCE_BUCKET_SIZE = 5e8  # reduce_bucket_size

class TrainRecipe(StrictModel):
    """Bytes per parameter and activation settings of a training run.

    Per parameter (bytes): ``param_bytes`` (the working copy the matmuls read), ``grad_bytes``
    (gradient accumulation buffer: 4 = fp32 "main grads", 2 = bf16), optimizer states =
    ``master_bytes`` (fp32 master weights, 4; 0 when params are already fp32) + ``moment_bytes`` x
    number of moments (Adam/AdamW 2, SGD with momentum 1, Adafactor: factored second moment, see
    ``optimizer_state_bytes``). The master copy counts as optimizer state (it is sharded with the
    optimizer by ZeRO-1, as in the ZeRO paper's K = 12 and Megatron's distributed optimizer).

    FP8 training (``fp8_weight_copies`` > 0): the bf16 weights stay (the optimizer updates them) and
    every transformer-block GEMM weight (attention, dense FFN, shared and routed experts) also keeps
    ``fp8_weight_copies`` cached FP8 casts of ``fp8_copy_bytes`` each: 2 x 1 B with Transformer Engine
    on Hopper-style FP8 (a row-wise copy for the forward GEMM and a transposed one for the backward
    data-gradient GEMM, ``TE_FP8_WEIGHT_COPIES``); MXFP8 keeps two copies of 1 + 1/32 B. The embedding,
    the output layer (a plain ``ColumnParallelLinear`` in Megatron-LM, not a TE layer), norms and
    router are not FP8 GEMMs and get no copy.

    FP8 parameters (``fp8_params``, Megatron-Core ``--fp8-param-gather``, which Megatron-Bridge's
    FP8 current-scaling preset ``bf16_with_fp8_current_scaling_mixed`` turns on): the block GEMM
    weights are held as FP8 tensors, so no bf16 working copy of them exists; the FP8 tensor is the
    row-wise copy, and a second copy is the cached transpose (Megatron FSDP drops it when
    ``keep_fp8_transpose_cache`` is False, as Megatron-Bridge's FSDP performance recipes set:
    ``fp8_weight_copies`` 1). The fp32 master weights stay in the optimizer state; the embedding,
    output layer and norms stay bf16 (``gemm_weight_bytes``).

    Vocabulary padding: Megatron-LM pads the vocabulary to a multiple of ``vocab_divisible_by`` x TP
    (``--make-vocab-size-divisible-by``, default 128; ``_vocab_size_with_padding``), so Llama-3's 128,256
    tokens become 129,024 rows at TP 8. The padded rows are real parameters (with gradients and
    optimizer states) and real logits; parameter counts stay unpadded.

    MoE: ``moe_capacity_factor`` sizes the routed-token buffers as ``top_k x capacity_factor`` copies of
    each local token. Megatron-Core's default MoE is dropless (``moe_expert_capacity_factor`` None), so
    no token is dropped and the busiest expert rank receives more than the average ``top_k`` copies
    per token; the factor stands for that load-imbalance allowance (1.25 = 25% above a perfectly
    balanced router, the Switch Transformer training capacity factor). With token dropping it is the
    actual capacity factor.
    """

    name: str = "custom"
    param_bytes: float = Field(default=2.0, gt=0)
    fp8_weight_copies: int = Field(default=0, ge=0)
    fp8_copy_bytes: float = Field(default=1.0, gt=0)  # bytes per parameter of one cached FP8 copy
    fp8_params: bool = False  # block GEMM weights held as FP8 tensors (see above)
    # The block GEMMs' format (``mi400plan.lowp``: fp8, mxfp8, nvfp4, mxfp4; bf16 otherwise) and the share of
    # block linear layers kept in BF16 under it (the NVFP4 recipe keeps about 15 %).
    gemm_format: str = "bf16"
    bf16_gemm_share: float = Field(default=0.0, ge=0.0, le=1.0)
    grad_bytes: float = Field(default=4.0, gt=0)
    master_bytes: float = Field(default=4.0, ge=0)
    optimizer: Optimizer = "adamw"
    moment_bytes: float = Field(default=4.0, ge=0)
    activation_bytes: float = Field(default=2.0, gt=0)  # 16-bit activations
    # Bytes an element of the activations saved as GEMM inputs: 16-bit like the others, 4 in fp32, and
    # the FP8 copy under FP8 training (``FP8_SAVED_INPUT_BYTES``; ``memory.layer_activation_bytes_per_token``).
    gemm_input_bytes: float = Field(default=2.0, gt=0)
    flash_attention: bool = True
    dropout: bool = False  # Korthikanti's accounting keeps dropout masks; modern LLM pre-training has none
    # Bytes an element of the logits the loss keeps for its backward: Megatron-Core's vocabulary-parallel
    # cross entropy casts them to fp32 and saves that copy (4); Transformer Engine's fused cross entropy
    # (``--cross-entropy-loss-fusion --cross-entropy-fusion-impl te``) writes the gradient into the 16-bit
    # logits in the forward and keeps only them (``activation_bytes``).
    logit_bytes: float = Field(default=4.0, gt=0)
    moe_capacity_factor: float = Field(default=1.25, gt=0)  # load-imbalance allowance (see above)
    # Token-dropping expert capacity (Megatron-Core ``--moe-expert-capacity-factor`` with
    # ``--moe-pad-expert-input-to-capacity``): None = dropless (the default). Set, each expert takes at most
    # this factor x its balanced share of routed tokens, drops the rest and is padded up to it
    # (``mi400plan.moe_dispatch``); the routed-token buffers are then exactly that size.
    expert_capacity_factor: float | None = Field(default=None, gt=0)
    # Multi-token-prediction modules trained with the model (Megatron-Core ``--mtp-num-layers``; DeepSeek-V3: 1):
    # their projection and output-head pass (``search.mtp_head_seconds``); each module's transformer layer is
    # counted as one more layer of the model by whoever builds the workload (``validate.row_workload``).
    mtp_layers: int = Field(default=0, ge=0, le=8)
    # Bytes an element of the routed experts' SwiGLU input (the gate and up outputs) kept for backward;
    # 0: ``activation_bytes``. DeepSeek-V3 (arXiv 2412.19437, 2024-12, sec. 3.3.3) caches it in FP8
    # with its 1 x 128-tile scaling (1 B + a 4-byte scale per 128 elements) and recomputes the output.
    moe_swiglu_input_bytes: float = Field(default=0.0, ge=0)
    vocab_divisible_by: int = Field(default=128, ge=1)  # Megatron-LM --make-vocab-size-divisible-by
    # Activation offloading to host memory (Megatron-Core ``--cpu-offloading --cpu-offloading-num-layers``):
    # the saved activations of the first ``offload_layers`` layers of each model chunk are copied to
    # pinned host memory after their forward and back before their backward (``OFFLOAD_IN_FLIGHT``).
    offload_layers: int = Field(default=0, ge=0, le=MAX_OFFLOAD_LAYERS)
    # The modules ``recompute="selective"`` recomputes (``RECOMPUTE_MODULES``).
    recompute_modules: tuple[str, ...] = DEFAULT_RECOMPUTE_MODULES
    # ``recompute="full"`` on the first ``recompute_layers`` layers of each model chunk only (Megatron-Core
    # ``--recompute-method block --recompute-num-layers N``); 0: every layer (``memory.recompute_share``).
    recompute_layers: int = Field(default=0, ge=0, le=MAX_OFFLOAD_LAYERS)
    # PyTorch FSDP mixed precision keeps the sharded parameters in fp32 (they are the optimizer's
    # master copy) and casts to the 16-bit ``param_bytes`` only the units it gathers; Megatron's
    # distributed optimizer and Megatron FSDP keep a 16-bit shard besides the fp32 main params.
    sharded_working_copy: bool = True
    # ZeRO-3 gathering rule (``ZERO3_GATHERING_RULES``) and DeepSpeed's limits, in elements (its defaults).
    zero3_gathering: Literal["fsdp_unit", "deepspeed_limits"] = "fsdp_unit"
    zero3_max_live_parameters: float = Field(default=DEEPSPEED_MAX_LIVE_PARAMETERS, ge=0)
    zero3_prefetch_bucket_size: float = Field(default=DEEPSPEED_PREFETCH_BUCKET_SIZE, ge=0)
    zero3_reduce_bucket_size: float = Field(default=DEEPSPEED_REDUCE_BUCKET_SIZE, ge=0)
    reserve: RuntimeReserve = Field(default_factory=RuntimeReserve)
    # Pipeline schedule (``mi400plan.dualpipe``): "1f1b" is Megatron's 1F1B, interleaved when VPP > 1;
    # "dualpipe" is DeepSeek-V3's bidirectional schedule (two stages per rank, PP + 1 micro-batches).
    pp_schedule: Literal["1f1b", "dualpipe"] = "1f1b"
    # LoRA fine-tuning (``mi400plan.finetune``): adapter rank (0: every weight trains) and target layers.
    # With a rank the base weights are frozen: no gradients or optimizer states for them.
    lora_rank: int = Field(default=0, ge=0)
    lora_targets: tuple[str, ...] = ()
    # Packed sequences (``mi400plan.packing``): the documents packed into each row (None: one sequence a row);
    # the attention core then runs per document.
    packed_docs: PackedDocs | None = None

    @property
    def fp8_weight_bytes(self) -> float:
        """Bytes of cached narrow weight copies per transformer-block GEMM parameter, averaged over the
        block: the layers kept in BF16 (``bf16_gemm_share``) have none."""
        return self.fp8_weight_copies * self.fp8_copy_bytes * (1.0 - self.bf16_gemm_share)

    @property
    def gemm_weight_bytes(self) -> float:
        """Bytes per transformer-block GEMM parameter of weights: the working copy plus the cached
        narrow casts, or with ``fp8_params`` the narrow copies alone (at least one: the parameter
        itself) and the BF16-kept layers' working copy."""
        if self.fp8_params:
            return (max(self.fp8_weight_copies, 1) * self.fp8_copy_bytes * (1.0 - self.bf16_gemm_share)
                    + self.param_bytes * self.bf16_gemm_share)
        return self.param_bytes + self.fp8_weight_bytes

    @property
    def moments(self) -> int:
        return {"adamw": 2, "adam": 2, "sgd": 1, "adafactor": 0}[self.optimizer]

    def optimizer_state_bytes(self, hidden_size: int) -> float:
        """Optimizer bytes per parameter: master copy + moments.

        Adam/AdamW (Kingma & Ba 2015; Loshchilov & Hutter 2019): first and second moment.
        SGD: one momentum buffer. Adafactor (Shazeer & Stern 2018) without first moment keeps a row
        and a column vector per ``r x c`` matrix: ``moment_bytes * (r + c)`` bytes for ``r*c``
        parameters, i.e. about ``moment_bytes * 2 / hidden_size`` per parameter for ``hidden``-wide
        matrices.
        """
        if self.optimizer == "adafactor":
            return self.master_bytes + self.moment_bytes * 2.0 / hidden_size
        return self.master_bytes + self.moment_bytes * self.moments

    def bytes_per_param(self, hidden_size: int) -> float:
        """Weights + gradients + optimizer bytes per parameter, unsharded (a transformer-block GEMM
        weight: the FP8 copies are included; the embedding and output layer have none)."""
        return self.gemm_weight_bytes + self.grad_bytes + self.optimizer_state_bytes(hidden_size)


TRAIN_PRESETS: dict[str, dict[str, object]] = {
    # Megatron-LM theoretical_memory_usage: bf16 params (2) + fp32 main grads (4) + fp32 master (4)
    # + Adam m, v (8) = 18 B/param.
    "megatron": dict(param_bytes=2.0, grad_bytes=4.0, master_bytes=4.0, optimizer="adam", moment_bytes=4.0),
    # ZeRO (Rajbhandari et al. 2020, section 3.1): fp16 params (2) + fp16 grads (2) + K = 12 optimizer
    # bytes (fp32 master 4 + momentum 4 + variance 4) = 16 B/param.
    "zero": dict(param_bytes=2.0, grad_bytes=2.0, master_bytes=4.0, optimizer="adam", moment_bytes=4.0),
    # PyTorch FSDP with MixedPrecision(param_dtype=bf16, reduce_dtype=fp32), as MosaicML's Composer
    # "DEFAULT" runs it: "outside forward and backward, the sharded parameters are kept in full
    # precision" (torch.distributed.fsdp.MixedPrecision docs), so the fp32 shard is the master copy
    # (4) with fp32 gradients (4) and Adam (8): 16 B/param sharded, and bf16 copies only of the units
    # being gathered (``sharded_working_copy`` False).
    "fsdp": dict(param_bytes=2.0, grad_bytes=4.0, master_bytes=4.0, optimizer="adam", moment_bytes=4.0,
                 sharded_working_copy=False),
    # Pure fp32 training: 4 + 4 + Adam 8 = 16 B/param, no separate master copy.
    "fp32": dict(param_bytes=4.0, grad_bytes=4.0, master_bytes=0.0, optimizer="adam", moment_bytes=4.0,
                 activation_bytes=4.0, gemm_input_bytes=4.0),
}

TRAIN_PRECISIONS = ("bf16", "fp8", "mxfp8", "nvfp4", "mxfp4", "fp32")
# Low-precision recipes (``mi400plan.lowp``): GEMM weights keep narrow cached copies and GEMM inputs are
# saved narrow; ``fp4`` names MXFP4 in training.
LOW_PRECISIONS = ("fp8", "mxfp8", "nvfp4", "mxfp4")


def _low_precision_fields(fields: dict[str, object], precision: str) -> None:
    """A low-precision recipe's memory and GEMM fields (``mi400plan.lowp``): two cached narrow copies of
    each block GEMM weight (row-wise and column-wise: MX and NVFP4 scales run along one axis, and
    per-tensor FP8 keeps its transpose, ``TE_FP8_WEIGHT_COPIES``) of the format's bytes with scales, the
    GEMM inputs saved narrow for the weight gradient, and the share of block GEMMs kept BF16."""
    from mi400plan.lowp import RECIPES

    lp = RECIPES[precision]
    fields["fp8_weight_copies"] = TE_FP8_WEIGHT_COPIES
    fields["fp8_copy_bytes"] = lp.element_bytes
    fields["gemm_input_bytes"] = FP8_SAVED_INPUT_BYTES if precision == "fp8" else lp.element_bytes
    fields["gemm_format"] = precision
    fields["bf16_gemm_share"] = lp.bf16_share


def train_recipe(
    preset: str = "megatron",
    *,
    precision: str | None = None,
    optimizer: str | None = None,
    grad_dtype: str | None = None,
    flash_attention: bool | None = None,
    reserve: RuntimeReserve | None = None,
    fp8_weight_copies: int | None = None,
    capacity_factor: float | None = None,
    vocab_divisible_by: int | None = None,
    dropout: bool | None = None,
    offload_layers: int | None = None,
    fp8_params: bool | None = None,
    recompute_modules: tuple[str, ...] | list[str] | str | None = None,
    recompute_layers: int | None = None,
    fused_cross_entropy: bool | None = None,
) -> TrainRecipe:
    """A named preset with overrides. ``precision="fp8"`` keeps ``fp8_weight_copies`` cached FP8 casts
    of every transformer-block GEMM weight (default ``TE_FP8_WEIGHT_COPIES`` = 2, as Transformer
    Engine does: row-wise + transposed). ``capacity_factor`` sets the MoE routed-buffer allowance and
    ``vocab_divisible_by`` Megatron-LM's vocabulary padding unit (padded to a multiple of it x TP).
    ``fused_cross_entropy`` keeps the loss's logits at the activation width instead of an fp32 copy."""
    if preset not in TRAIN_PRESETS:
        raise UsageError(f"unknown training recipe {preset!r}; known: {', '.join(TRAIN_PRESETS)}")
    fields: dict[str, object] = dict(TRAIN_PRESETS[preset])
    fields["name"] = preset
    precision = {"fp4": "mxfp4"}.get(precision, precision) if precision is not None else None
    low = precision in LOW_PRECISIONS
    if precision is not None:
        if precision not in TRAIN_PRECISIONS:
            raise UsageError(f"unknown training precision {precision!r} (--precision); known: {', '.join(TRAIN_PRECISIONS)}")
        if precision == "fp32":
            fields.update(TRAIN_PRESETS["fp32"])
        elif low:
            _low_precision_fields(fields, precision)
    if fp8_weight_copies is not None:
        if not low:
            raise UsageError("FP8 weight copies apply to low-precision training; add --precision fp8 (or mxfp8, "
                             "nvfp4, mxfp4)")
        if not 0 <= int(fp8_weight_copies) <= 2:
            raise UsageError(f"FP8 weight copies must be 0, 1 or 2 (row-wise, and a transposed copy for the "
                             f"backward pass), got {fp8_weight_copies}")
        fields["fp8_weight_copies"] = int(fp8_weight_copies)
    if fp8_params:
        if not low:
            raise UsageError("FP8 parameters apply to low-precision training; add --precision fp8 (or mxfp8, "
                             "nvfp4, mxfp4)")
        fields["fp8_params"] = True
    if recompute_modules is not None:
        fields["recompute_modules"] = parse_recompute_modules(recompute_modules)
    if recompute_layers is not None:
        if not 0 <= int(recompute_layers) <= MAX_OFFLOAD_LAYERS:
            raise UsageError(f"recomputed layers must be an integer in 0..{MAX_OFFLOAD_LAYERS}, got {recompute_layers}")
        fields["recompute_layers"] = int(recompute_layers)
    if optimizer is not None:
        if optimizer not in ("adamw", "adam", "sgd", "adafactor"):
            raise UsageError(f"unknown optimizer {optimizer!r}; known: adamw, adam, sgd, adafactor")
        fields["optimizer"] = optimizer
    if grad_dtype is not None:
        sizes = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0}
        if grad_dtype not in sizes:
            raise UsageError(f"unknown gradient dtype {grad_dtype!r}; known: fp32, bf16, fp16")
        fields["grad_bytes"] = sizes[grad_dtype]
    if flash_attention is not None:
        fields["flash_attention"] = flash_attention
    if fused_cross_entropy:
        fields["logit_bytes"] = fields.get("activation_bytes", 2.0)
    if dropout is not None:
        fields["dropout"] = dropout
    if reserve is not None:
        fields["reserve"] = reserve
    if offload_layers is not None:
        if not 0 <= int(offload_layers) <= MAX_OFFLOAD_LAYERS:
            raise UsageError(f"offloaded layers must be an integer in 0..{MAX_OFFLOAD_LAYERS}, got {offload_layers}")
        fields["offload_layers"] = int(offload_layers)
    if capacity_factor is not None:
        if not capacity_factor > 0:
            raise UsageError(f"the MoE capacity factor must be positive, got {capacity_factor}")
        fields["moe_capacity_factor"] = float(capacity_factor)
    if vocab_divisible_by is not None:
        if int(vocab_divisible_by) < 1:
            raise UsageError(f"the vocabulary padding unit must be a positive integer, got {vocab_divisible_by}")
        fields["vocab_divisible_by"] = int(vocab_divisible_by)
    recipe = TrainRecipe(**fields)  # type: ignore[arg-type]
    return with_bf16_gemm_share(recipe, recipe.bf16_gemm_share) if low else recipe


def with_bf16_gemm_share(recipe: TrainRecipe, share: float | None) -> TrainRecipe:
    """``recipe`` with ``share`` of its block linear layers kept in BF16 (``--bf16-gemm-share``; None: as it
    is): those layers have no narrow weight copies (``TrainRecipe.fp8_weight_bytes``) and save 16-bit GEMM
    inputs, so the saved-input width is the share-weighted mean of the format's and ``activation_bytes``."""
    if share is None:
        return recipe
    if recipe.gemm_format not in LOW_PRECISIONS:
        raise UsageError("--bf16-gemm-share applies to low-precision training; add --precision fp8, mxfp8, "
                         "nvfp4 or mxfp4")
    if not 0.0 <= float(share) <= 1.0:
        raise UsageError(f"--bf16-gemm-share must be a fraction in [0, 1], got {share}")
    from mi400plan.lowp import RECIPES

    narrow = FP8_SAVED_INPUT_BYTES if recipe.gemm_format == "fp8" else RECIPES[recipe.gemm_format].element_bytes
    kept = float(share)
    return recipe.model_copy(update={"bf16_gemm_share": kept, "gemm_input_bytes": (1.0 - kept) * narrow
                                     + kept * recipe.activation_bytes})


def with_lora(recipe: TrainRecipe, finetune: str | None, rank: int | None,
              targets: tuple[str, ...] | list[str] | str | None) -> TrainRecipe:
    """``recipe`` with the LoRA adapters of ``--finetune lora --lora-rank R --lora-targets T`` (``lora_fields``)."""
    return recipe.model_copy(update=lora_fields(finetune, rank, targets))


def with_packing(recipe: TrainRecipe, doc_length: str | None, pack_efficiency: float | None) -> TrainRecipe:
    """``recipe`` with the packed documents of ``--doc-length`` / ``--pack-efficiency``
    (``packing.parse_doc_length``): an efficiency without document lengths, and packing without flash
    attention (the variable-length kernels that keep attention inside each document are flash kernels),
    are usage errors."""
    from mi400plan.packing import parse_doc_length

    if doc_length is None:
        if pack_efficiency is not None:
            raise UsageError("--pack-efficiency is the share of packed rows that documents fill; add --doc-length")
        return recipe
    if not recipe.flash_attention:
        raise UsageError("--doc-length packs documents into rows with attention kept inside each document, which "
                         "the variable-length flash kernels do (Transformer Engine, flash-attn varlen); drop --no-flash")
    return recipe.model_copy(update={"packed_docs": parse_doc_length(doc_length, pack_efficiency)})


def lora_fields(finetune: str | None, rank: int | None, targets: tuple[str, ...] | list[str] | str | None
                ) -> dict[str, object]:
    """``TrainRecipe`` fields of ``--finetune lora --lora-rank R --lora-targets T`` (``mi400plan.finetune``:
    rank and targets default to the MLPerf Training Llama 2 70B LoRA reference's); a rank or targets without
    ``--finetune lora`` and a rank below 1 are usage errors."""
    from mi400plan.finetune import DEFAULT_LORA_RANK, DEFAULT_LORA_TARGETS, FINETUNE_MODES, parse_targets

    mode = finetune or "none"
    if mode not in FINETUNE_MODES:
        raise UsageError(f"unknown fine-tuning mode {finetune!r}; known: {', '.join(FINETUNE_MODES)}")
    if mode != "lora":
        if rank is not None or targets is not None:
            flag = "--lora-rank" if rank is not None else "--lora-targets"
            raise UsageError(f"{flag} sizes LoRA adapters; add --finetune lora")
        return {}
    if rank is not None and int(rank) < 1:
        raise UsageError(f"--lora-rank must be a positive integer (the adapters' inner width), got {rank}")
    return {"lora_rank": int(rank) if rank is not None else DEFAULT_LORA_RANK,
            "lora_targets": parse_targets(targets) if targets is not None else DEFAULT_LORA_TARGETS}


def parse_recompute_modules(given: str | tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Megatron-Core ``recompute_modules`` names (a list, or one string separated by commas or ``+``,
    which a CSV cell holds unquoted), checked against ``RECOMPUTE_MODULES``, deduplicated, in the
    order given."""
    items = given.replace("+", ",").split(",") if isinstance(given, str) else list(given)
    names = [str(x).strip().lower() for x in items if str(x).strip()]
    unknown = [n for n in names if n not in RECOMPUTE_MODULES]
    if unknown or not names:
        raise UsageError(f"unknown recompute module(s) {', '.join(unknown) or '(none given)'}; "
                         f"known: {', '.join(RECOMPUTE_MODULES)}")
    return tuple(dict.fromkeys(names))


def lora_targets_value(v: object) -> tuple[str, ...] | None:
    """A ``lora_targets`` field's value checked and normalised (``finetune.parse_targets``); a bad one raises
    ``ValueError`` (pydantic reports it, naming the field). ``None`` or an empty string: not given."""
    from mi400plan.finetune import parse_targets

    if v is None or v == "":
        return None
    if not isinstance(v, (str, list, tuple)) or not all(isinstance(x, str) for x in ([v] if isinstance(v, str) else v)):
        raise ValueError("a list of target names, or one string of them separated by commas")
    try:
        return parse_targets(v)  # type: ignore[arg-type]
    except UsageError as exc:
        raise ValueError(exc.message) from None


def recompute_modules_value(v: object) -> tuple[str, ...] | None:
    """A ``recompute_modules`` field's value checked and normalised (``parse_recompute_modules``); a bad
    one raises ``ValueError``, so pydantic reports it and a file's reader names the file, line and field.
    ``None`` or an empty string: not given."""
    if v is None or v == "":
        return None
    items = [v] if isinstance(v, str) else v
    if not isinstance(items, (list, tuple)) or not all(isinstance(x, str) for x in items):
        raise ValueError("a list of module names, or one string of them separated by commas")
    try:
        return parse_recompute_modules(v)  # type: ignore[arg-type]
    except UsageError as exc:
        raise ValueError(exc.message) from None


def with_expert_capacity(recipe: TrainRecipe, factor: float | None, buffers_given: bool = False) -> TrainRecipe:
    """``recipe`` with token-dropping expert capacity ``factor`` (None: dropless, unchanged). The routed-token
    buffers then hold exactly ``factor`` x the balanced share (Megatron-Core sizes the padded expert input
    by the capacity), unless a buffer allowance was given on its own (``buffers_given``)."""
    if factor is None:
        return recipe
    if not factor > 0:
        raise UsageError(f"--moe-capacity-factor must be positive, got {factor}")
    update: dict[str, object] = {"expert_capacity_factor": float(factor)}
    if not buffers_given:
        update["moe_capacity_factor"] = float(factor)
    return recipe.model_copy(update=update)


class TrainOptions(StrictModel):
    """The training recipe and model switches ``fit`` and ``sweep`` share (one object for both).

    Memory (``train_recipe``): ``recipe`` preset, ``precision``, ``optimizer``, ``grad_dtype``,
    ``flash_attention``, ``dropout``, ``reserve`` (text, e.g. ``"2GiB+5%"``), ``fp8_weight_copies``,
    ``fp8_params``, ``fused_cross_entropy``, ``recompute_modules``, ``recompute_layers``,
    ``capacity_factor``, ``moe_capacity_factor`` (token-dropping expert capacity: memory and step time),
    ``vocab_divisible_by``, ``offload_layers`` (activation offloading to host memory,
    memory and step time). Pipeline split (both): ``split_embedding_loss``,
    ``uneven_pp`` (``mi400plan.pipeline``), ``pp_schedule`` (1F1B or DualPipe, ``mi400plan.dualpipe``). Step time (``search.SearchOptions``): ``overlap_tp``,
    ``overlap_ep``, ``overlap_pp``, ``overlap_cp``, ``overlap_dp``. A plan saved by ``sweep --save``
    keeps the switches that differ from these defaults in its ``[recipe]`` table and ``fit --plan``
    reads them back, so the same layout gives the same memory in both commands.
    """

    recipe: Literal["megatron", "zero", "fsdp", "fp32"] = "megatron"
    precision: Literal["bf16", "fp8", "mxfp8", "nvfp4", "mxfp4", "fp32"] = "bf16"
    bf16_gemm_share: float | None = Field(default=None, ge=0.0, le=1.0)
    optimizer: Optimizer | None = None
    grad_dtype: Literal["fp32", "bf16", "fp16"] | None = None
    flash_attention: bool = True
    dropout: bool = False
    reserve: str | None = None
    fp8_weight_copies: int | None = Field(default=None, ge=0, le=2)
    fp8_params: bool = False
    fused_cross_entropy: bool = False
    recompute_modules: tuple[str, ...] | None = None  # a comma-separated string is accepted too
    recompute_layers: int = Field(default=0, ge=0, le=MAX_OFFLOAD_LAYERS)
    capacity_factor: float | None = Field(default=None, gt=0)
    # Token-dropping expert capacity (``TrainRecipe.expert_capacity_factor``); None: dropless.
    moe_capacity_factor: float | None = Field(default=None, gt=0, le=64)
    vocab_divisible_by: int | None = Field(default=None, ge=1)
    offload_layers: int = Field(default=0, ge=0, le=MAX_OFFLOAD_LAYERS)
    overlap_tp: bool = False
    overlap_ep: bool = False
    overlap_pp: bool = True
    overlap_cp: bool = True
    overlap_dp: bool = True
    split_embedding_loss: bool = False
    uneven_pp: bool = True
    # Pipeline schedule (``TrainRecipe.pp_schedule``, ``mi400plan.dualpipe``): memory and step time.
    pp_schedule: Literal["1f1b", "dualpipe"] = "1f1b"
    # Software stack (``mi400plan.stacks``): a ``profiles/stacks`` name (None: the vendor default) and
    # single settings that override the stack's.
    stack: str | None = None
    moe_dispatcher: Literal["alltoall", "allgather", "deepep", "hybridep", "none"] | None = None
    cuda_graphs: Literal["none", "partial", "full"] | None = None
    attention_kernel: Literal["fa2", "fa3", "cudnn", "ck", "triton"] | None = None
    # Fine-tuning (``mi400plan.finetune``): "lora" freezes the base weights and trains adapters of
    # ``lora_rank`` (None: the default rank) on ``lora_targets`` (None: the default targets).
    finetune: Literal["none", "lora"] = "none"
    lora_rank: int | None = Field(default=None, ge=1)
    lora_targets: tuple[str, ...] | None = None  # a comma-separated string is accepted too
    # Packed sequences (``mi400plan.packing``): the document lengths packed into each row (``512``,
    # ``uniform:A-B`` or a ``length,count`` CSV) and the share of each row they fill (None: the packer's).
    doc_length: str | None = None
    pack_efficiency: float | None = Field(default=None, gt=0.0, le=1.0)

    @field_validator("recompute_modules", mode="before")
    @classmethod
    def _modules(cls, v: object) -> object:
        return recompute_modules_value(v)

    @field_validator("precision", mode="before")
    @classmethod
    def _precision(cls, v: object) -> object:
        return {"fp4": "mxfp4"}.get(v, v) if isinstance(v, str) else v

    @field_validator("lora_targets", mode="before")
    @classmethod
    def _targets(cls, v: object) -> object:
        return lora_targets_value(v)

    def train_recipe(self) -> TrainRecipe:
        """The memory recipe these switches describe (``train_recipe``, ``with_expert_capacity``,
        ``with_bf16_gemm_share``, ``with_lora``)."""
        recipe = train_recipe(
            self.recipe, precision=self.precision, optimizer=self.optimizer, grad_dtype=self.grad_dtype,
            flash_attention=self.flash_attention, dropout=self.dropout,
            reserve=parse_reserve(self.reserve) if self.reserve is not None else None,
            fp8_weight_copies=self.fp8_weight_copies, capacity_factor=self.capacity_factor,
            vocab_divisible_by=self.vocab_divisible_by, offload_layers=self.offload_layers,
            fp8_params=self.fp8_params, recompute_modules=self.recompute_modules,
            recompute_layers=self.recompute_layers, fused_cross_entropy=self.fused_cross_entropy,
        )
        recipe = with_expert_capacity(recipe, self.moe_capacity_factor, buffers_given=self.capacity_factor is not None)
        recipe = with_bf16_gemm_share(recipe, self.bf16_gemm_share)
        if self.pp_schedule != "1f1b":
            recipe = recipe.model_copy(update={"pp_schedule": self.pp_schedule})
        recipe = with_packing(recipe, self.doc_length, self.pack_efficiency)
        return with_lora(recipe, self.finetune, self.lora_rank, self.lora_targets)

    def search_flags(self) -> dict[str, bool]:
        """The ``search.SearchOptions`` switches."""
        return {k: getattr(self, k) for k in ("overlap_tp", "overlap_ep", "overlap_pp", "overlap_cp", "overlap_dp",
                                              "split_embedding_loss", "uneven_pp")}

    def stack_request(self) -> "StackRequest":
        """The stack these options ask for (``stacks.resolve_stack`` picks it per SKU)."""
        from mi400plan.stacks import StackRequest

        return StackRequest(self.stack, {"moe_dispatcher": self.moe_dispatcher, "cuda_graphs": self.cuda_graphs,
                                         "attention_kernel": self.attention_kernel})

    def changed(self) -> dict[str, object]:
        """The switches that differ from the defaults (what a plan file's ``[recipe]`` table keeps)."""
        return {k: v for k, v in self.model_dump().items() if v != type(self).model_fields[k].default}

    @classmethod
    def given(cls, **given: object) -> "TrainOptions":
        """Options from the non-None values of ``given`` (checked as ``merged`` checks them), the rest at
        their defaults; ``model_fields_set`` names exactly the given ones (``explicit``)."""
        full = cls().merged(**given)
        return cls(**{k: getattr(full, k) for k, v in given.items() if v is not None})

    def explicit(self) -> dict[str, object]:
        """The switches set explicitly (``given``), to lay over other options such as a plan's."""
        return {k: getattr(self, k) for k in self.model_fields_set}

    def merged(self, **given: object) -> "TrainOptions":
        """These options with the non-None values of ``given`` on top (``UsageError`` for a bad value)."""
        from pydantic import ValidationError

        new = {**self.model_dump(), **{k: v for k, v in given.items() if v is not None}}
        try:
            return TrainOptions(**new)
        except ValidationError as exc:
            # train_recipe words the usual mistakes (unknown dtype, non-positive factor, ...) for users
            r = train_recipe(new["recipe"] if new["recipe"] in TRAIN_PRESETS else "megatron",
                             precision=new["precision"], optimizer=new["optimizer"], grad_dtype=new["grad_dtype"],
                             capacity_factor=new["capacity_factor"], vocab_divisible_by=new["vocab_divisible_by"],
                             offload_layers=new["offload_layers"] if isinstance(new["offload_layers"], int) else None)
            if isinstance(new["bf16_gemm_share"], (int, float)):
                with_bf16_gemm_share(r, new["bf16_gemm_share"])
            lora_fields(new["finetune"] if new["finetune"] in ("none", "lora") else None,
                        new["lora_rank"] if isinstance(new["lora_rank"], int) else None, None)
            e = exc.errors()[0]
            msg = str(e['msg']).removeprefix('Value error, ')
            field = '.'.join(str(x) for x in e['loc'])
            # the flag that sets the field (--lora-targets sets lora_targets), and the field for plan files
            raise UsageError(f"invalid --{field.replace('_', '-')} (training option {field}): {msg}") from None


# --- inference recipe --------------------------------------------------------------------------

# Bits per weight including block-scale overhead.
#   MX formats (OCP Microscaling Formats (MX) v1.0, 2023): one shared 8-bit E8M0 scale per block of
#   32 elements -> +8/32 = 0.25 bit: MXFP8 8.25, MXFP6 6.25, MXFP4 4.25.
#   NVFP4 (NVIDIA Blackwell): one FP8 E4M3 scale per 16 elements -> 4 + 8/16 = 4.5 bits.
#   int4 (GPTQ/AWQ style): groups of 128 with an fp16 scale and a 4-bit zero point (GPTQ and AWQ
#   checkpoints pack eight zero points per int32 in ``qzeros``) -> 4 + (16 + 4)/128 = 4.15625.
#   fp8 with per-tensor (or 128x128-block fp32) scales: overhead < 0.002 bit, counted as 8.
WEIGHT_FORMAT_BITS: dict[str, float] = {
    "bf16": 16.0,
    "fp16": 16.0,
    "fp8": 8.0,
    "mxfp8": 8.0 + 8.0 / 32,
    "fp6": 6.0 + 8.0 / 32,
    "mxfp6": 6.0 + 8.0 / 32,
    "fp4": 4.0 + 8.0 / 32,
    "mxfp4": 4.0 + 8.0 / 32,
    "nvfp4": 4.0 + 8.0 / 16,
    "int4": 4.0 + (16.0 + 4.0) / 128,
}
KV_FORMAT_BYTES: dict[str, float] = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0}


class InferRecipe(StrictModel):
    """Inference number formats and serving settings.

    ``weight_format`` applies to the transformer-block linear weights (attention, dense FFN, shared
    and routed experts). Embedding, output head, norms and router stay 16-bit, as in the published
    FP8 checkpoints of Llama-3.1-405B and DeepSeek-V3. ``max_batched_tokens`` is the largest number
    of tokens in one forward step (chunked prefill; vLLM's default budget is 8192) and sizes the
    activation scratch.

    Vocabulary padding: vLLM's ``VocabParallelEmbedding`` and ``ParallelLMHead`` pad the vocabulary to
    a multiple of ``vocab_padding_size`` (``DEFAULT_VOCAB_PADDING_SIZE`` = 64), independent of TP, and
    split the padded rows evenly over the TP ranks. Llama-3 (128,256), DeepSeek-V3 (129,280), Qwen3
    (151,936) and Mixtral (32,000) are multiples of 64 already; GPT-3's 50,257 becomes 50,304.
    """

    name: str = "bf16"
    weight_format: str = "bf16"
    kv_format: str = "bf16"
    max_batched_tokens: int = Field(default=8192, ge=1)
    vocab_padding_size: int = Field(default=64, ge=1)  # vLLM DEFAULT_VOCAB_PADDING_SIZE
    reserve: RuntimeReserve = Field(default_factory=lambda: INFER_RESERVE)

    @model_validator(mode="after")
    def _check(self) -> "InferRecipe":
        if self.weight_format not in WEIGHT_FORMAT_BITS:
            raise ValueError(f"unknown weight format {self.weight_format!r}; known: {', '.join(WEIGHT_FORMAT_BITS)}")
        if self.kv_format not in KV_FORMAT_BYTES:
            raise ValueError(f"unknown KV-cache format {self.kv_format!r}; known: {', '.join(KV_FORMAT_BYTES)}")
        return self

    @property
    def weight_bytes(self) -> float:
        """Bytes per block weight including block-scale overhead."""
        return WEIGHT_FORMAT_BITS[self.weight_format] / 8.0

    @property
    def kv_bytes(self) -> float:
        return KV_FORMAT_BYTES[self.kv_format]


def infer_recipe(
    precision: str | None = None,
    *,
    kv_dtype: str | None = None,
    reserve: RuntimeReserve | None = None,
    max_batched_tokens: int | None = None,
) -> InferRecipe:
    fmt = (precision or "bf16").lower()
    if fmt not in WEIGHT_FORMAT_BITS:
        raise UsageError(f"unknown weight format {precision!r}; known: {', '.join(WEIGHT_FORMAT_BITS)}")
    kv = (kv_dtype or "bf16").lower()
    if kv not in KV_FORMAT_BYTES:
        raise UsageError(f"unknown KV-cache format {kv_dtype!r}; known: {', '.join(KV_FORMAT_BYTES)}")
    fields: dict[str, object] = dict(name=fmt, weight_format=fmt, kv_format=kv)
    if reserve is not None:
        fields["reserve"] = reserve
    if max_batched_tokens is not None:
        fields["max_batched_tokens"] = max_batched_tokens
    return InferRecipe(**fields)  # type: ignore[arg-type]

