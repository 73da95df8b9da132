"""Software stack spec (``profiles/stacks/*.toml``): the training framework a run uses, and the
settings of it that change speed and memory.

The same GPU and model run 20-38 % apart on different software (token dispatcher, CUDA graphs,
attention kernel generation, FP8 recipe), so a stack is an input like the accelerator. A profile
names the framework, its version and its release date (each backed by a dated ``[sources]``
entry), and five settings, each a table with a ``value``, a ``status`` and the ``source`` keys
that show it (``status = "unverified"`` where no document was found that states it):

=====================  =========================================================================
setting                values
=====================  =========================================================================
``attention_kernel``   ``fa2`` (FlashAttention-2 generation: PyTorch SDPA flash, Dao-AILab FA2),
                       ``fa3`` (FlashAttention-3, Hopper warp-specialised), ``cudnn`` (cuDNN fused
                       attention through Transformer Engine, the same Hopper/Blackwell
                       generation as FA3), ``ck`` (AMD Composable Kernel / AITER flash attention),
                       ``triton`` (Triton flash attention)
``moe_dispatcher``     ``alltoall`` (NCCL/RCCL all-to-all), ``allgather``, ``deepep`` (DeepEP
                       GPU-initiated kernels), ``hybridep`` (NVIDIA HybridEP), ``none`` (no MoE)
``cuda_graphs``        ``none`` (eager), ``partial`` (scoped graphs: attention, router,
                       preprocessing), ``full`` (the whole iteration captured)
``fp8_recipe``         ``delayed`` (per-tensor, amax history), ``current`` (per-tensor, current
                       scaling), ``blockwise`` (128 x 128 / 1 x 128 blocks), ``mxfp8`` (E8M0 scale
                       per 32 elements), ``none`` (no FP8 training)
``zero3_gathering``    ``fsdp_unit`` (PyTorch FSDP / Megatron FSDP: one wrapped unit gathered at a
                       time, one prefetched), ``deepspeed_limits`` (DeepSpeed ZeRO-3:
                       ``stage3_max_live_parameters`` and ``stage3_prefetch_bucket_size``, given
                       as ``max_live_parameters`` / ``prefetch_bucket_size``), ``none``
=====================  =========================================================================

``vendors`` lists the accelerator vendors (the accelerator profile's ``vendor``) the stack runs on.
``vendor_reference = true`` marks the vendor's own published performance stack (NVIDIA's NeMo
Megatron-Bridge, AMD's Primus): the default stack of a vendor is the newest-released of those
(``mi400plan.stacks.default_stack``), printed with every answer.
"""

import re
from typing import Literal

from pydantic import Field, model_validator

from mi400plan.factories import new_list, new_dict
from mi400plan.specs.common import ProfileBase, Source, Status, StrictModel, _norm_status, require_source

ATTENTION_KERNELS = ("fa2", "fa3", "cudnn", "ck", "triton")
MOE_DISPATCHERS = ("alltoall", "allgather", "deepep", "hybridep", "none")
CUDA_GRAPH_SCOPES = ("none", "partial", "full")
FP8_RECIPES = ("delayed", "current", "blockwise", "mxfp8", "none")
ZERO3_GATHERING = ("fsdp_unit", "deepspeed_limits", "none")

AttentionKernel = Literal["fa2", "fa3", "cudnn", "ck", "triton"]
MoeDispatcher = Literal["alltoall", "allgather", "deepep", "hybridep", "none"]
CudaGraphScope = Literal["none", "partial", "full"]
Fp8Recipe = Literal["delayed", "current", "blockwise", "mxfp8", "none"]
Zero3Gathering = Literal["fsdp_unit", "deepspeed_limits", "none"]


class _Setting(StrictModel):
    """One setting: its value, where it is stated, and how sure that is."""

    status: Status = "disclosed"
    source: list[str] = Field(default_factory=new_list)
    note: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _coerce(cls, data: object) -> object:
        if isinstance(data, str):  # a bare value: `cuda_graphs = "none"` (unverified: no source given)
            return {"value": data, "status": "unverified"}
        if isinstance(data, dict):
            data = dict(data)
            if "status" in data:
                data["status"] = _norm_status(data["status"])
            if isinstance(data.get("source"), str):
                data["source"] = [data["source"]]
        return data

    @model_validator(mode="after")
    def _cited(self) -> "_Setting":
        require_source(self.status, self.source, f"a {self.status} setting")
        return self


class AttentionSetting(_Setting):
    value: AttentionKernel


class DispatcherSetting(_Setting):
    value: MoeDispatcher


class GraphSetting(_Setting):
    value: CudaGraphScope


class Fp8Setting(_Setting):
    value: Fp8Recipe


class Zero3Setting(_Setting):
    value: Zero3Gathering
    max_live_parameters: int | None = Field(default=None, ge=0)  # DeepSpeed stage3_max_live_parameters
    prefetch_bucket_size: int | None = Field(default=None, ge=0)  # DeepSpeed stage3_prefetch_bucket_size


class StackSettings(StrictModel):
    attention_kernel: AttentionSetting
    moe_dispatcher: DispatcherSetting
    cuda_graphs: GraphSetting
    fp8_recipe: Fp8Setting
    zero3_gathering: Zero3Setting

    def values(self) -> dict[str, str]:
        """Setting name -> value."""
        return {k: getattr(self, k).value for k in type(self).model_fields}


_DATE = re.compile(r"^\d{4}(-\d{2}(-\d{2})?)?$")


class StackProfile(ProfileBase):
    framework: str = Field(min_length=1)  # "NeMo Megatron-Bridge", "torchtitan", "DeepSpeed", ...
    version: str = Field(min_length=1)  # the release as its project names it ("25.11", "v0.2.0")
    released: str  # release date, YYYY-MM-DD (or YYYY-MM)
    release_source: list[str] = Field(min_length=1)  # [sources] keys that date the release
    vendors: list[str] = Field(min_length=1)  # accelerator vendors it runs on ("NVIDIA", "AMD")
    vendor_reference: bool = False  # the vendor's own published performance stack (default candidate)
    components: dict[str, str] = Field(default_factory=new_dict)  # e.g. megatron_core = "0.15.0"
    settings: StackSettings

    @model_validator(mode="after")
    def _check(self) -> "StackProfile":
        if not _DATE.match(self.released):
            raise ValueError(f"released {self.released!r} must be YYYY-MM-DD or YYYY-MM")
        Source(title="released", date=self.released)  # a calendar date (raises otherwise)
        used = [("release_source", k) for k in self.release_source]
        used += [(f"settings.{name}", k) for name in StackSettings.model_fields
                 for k in getattr(self.settings, name).source]
        self.require_source_keys(used)
        return self

    def consistency_errors(self) -> list[str]:
        """The text rules of every profile, and: every source a stack cites carries a date."""
        return super().consistency_errors() + self.undated_release_errors(self.release_source)
