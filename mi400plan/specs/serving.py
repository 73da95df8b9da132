"""Serving stack spec (``profiles/serving/*.toml``): the inference server a ``serve`` answer is priced on.

The same GPU and model serve at rates further apart on vLLM, SGLang and TensorRT-LLM (and their
versions) than the planner's error targets, so a serving stack is an input like the accelerator. A
profile names the framework, its version and release date (each backed by a dated ``[sources]``
entry), the accelerator vendors it runs on, the scheduler defaults the server starts with when no
flag sets them (``[scheduler]``), and the InferenceX runs that measured it (``[inferencex]``: the
label of the ``framework`` column of ``tests/data/serve_inferencex.csv`` and the container images the
calibration rows used). Its fitted efficiencies are not in the file: they are the output of
``benchmarks/calibrate_serve.py`` (``serve_calibration.STACK_CALIBRATION``), derived, not typed in.

``[scheduler]``: ``chunked_prefill`` says whether a prompt may be split over iterations (vLLM V1,
SGLang: yes; TensorRT-LLM without chunked context, ATOM: no, a prompt runs whole) and
``prefill_with_decodes`` whether prompt tokens share an iteration with the running decodes (vLLM V1,
TensorRT-LLM's in-flight batching: yes; SGLang, ATOM: prefill iterations apart); ``max_num_batched_tokens`` and ``max_num_seqs`` are lists of tiers by the GPU's HBM (``below_hbm_gib``:
the tier applies to GPUs with less HBM than this; the last tier has no bound), read by
:func:`SchedulerDefaults.tier`; ``max_num_seqs = "kv-pool"`` sizes the running requests from the KV
pool (SGLang's rule, ``serve_sim.sglang_limits``). ``small_tier_skus`` lists SKU name fragments that
take the first tier whatever their HBM (vLLM: A100).

``[kv_admission]``: how the server admits a request against its KV cache, which bounds the sequences it
runs at once (``serve_admission``): ``policy = "reserve-full"`` admits a request only when its whole
prompt + output KV can be reserved and never evicts a started one (TensorRT-LLM's default capacity
scheduler policy ``GUARANTEED_NO_EVICT``); ``policy = "current"`` admits on the blocks the request needs
now and preempts (recomputes) running requests when the cache runs out (vLLM, SGLang), so the running
batch is what the cache holds at the sequences' mean context.

``[host]``: how the framework's per-sequence CPU work of an iteration (input preparation, sampling
bookkeeping, responses) combines with the GPU step (``serve.host_bound_step``): ``overlap = false`` adds it
to the step, ``overlap = true`` hides it behind the step (the larger of the two); ``flag`` names the
stack's own overlap setting. The bundled stacks' overlap schedulers are on in the configurations priced and
still leave a per-sequence time on the critical path, which the InferenceX calibration fits (``false``);
the CPU time per sequence is fitted (``serve_calibration``), not typed in. A profile without ``[host]`` is
priced as the calibration is (it adds).

``vendor_reference = true`` marks the stack a vendor's own published inference performance tables are
measured with (NVIDIA: TensorRT-LLM, "Performance Overview"; AMD: ROCm vLLM, "Performance results"):
the default serving stack of a vendor is the newest-released of those
(``mi400plan.serving_stacks.default_serving_stack``), printed with every answer.
"""

import re
from typing import Literal

from pydantic import Field, model_validator

from mi400plan.factories import new_list, new_dict
from mi400plan.specs.common import ProfileBase, Source, Status, StrictModel, _norm_status, require_source

_DATE = re.compile(r"^\d{4}(-\d{2}(-\d{2})?)?$")


class SchedulerTier(StrictModel):
    """One tier of a scheduler default: ``value`` on GPUs with less HBM than ``below_hbm_gib`` (None: any)."""

    below_hbm_gib: float | None = Field(default=None, gt=0)
    value: int = Field(ge=1, le=1_048_576)


def _check_tiers(name: str, tiers: list[SchedulerTier]) -> None:
    bounds = [t.below_hbm_gib for t in tiers]
    if bounds[-1] is not None or any(b is None for b in bounds[:-1]):
        raise ValueError(f"scheduler.{name}: the last tier, and only it, leaves out below_hbm_gib")
    if bounds[:-1] != sorted(bounds[:-1]):  # type: ignore[type-var]
        raise ValueError(f"scheduler.{name}: tiers must be in increasing below_hbm_gib")


class _SourcedBlock(StrictModel):
    """A profile block stated by sources: its status (aliases normalised) and the [sources] keys."""

    status: Status = "disclosed"
    source: list[str] = Field(default_factory=new_list)
    note: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _status(cls, data: object) -> object:
        if isinstance(data, dict) and "status" in data:
            data = dict(data)
            data["status"] = _norm_status(data["status"])
        return data


class SchedulerDefaults(_SourcedBlock):
    """The scheduler settings the server starts with (its documented defaults), and where they are stated."""

    chunked_prefill: bool  # a prompt may be split over iterations
    prefill_with_decodes: bool  # prompt tokens share an iteration with the running decodes
    max_num_batched_tokens: list[SchedulerTier] = Field(min_length=1)
    max_num_seqs: list[SchedulerTier] | Literal["kv-pool"]
    small_tier_skus: list[str] = Field(default_factory=new_list)
    flags: dict[str, str] = Field(default_factory=new_dict)  # the stack's own names of the settings

    @model_validator(mode="after")
    def _check(self) -> "SchedulerDefaults":
        _check_tiers("max_num_batched_tokens", self.max_num_batched_tokens)
        if isinstance(self.max_num_seqs, list):
            _check_tiers("max_num_seqs", self.max_num_seqs)
        require_source(self.status, self.source, f"scheduler: a {self.status} default")
        return self

    def tier(self, tiers: list[SchedulerTier], sku_name: str, hbm_gib: float) -> int:
        """The value of ``tiers`` for a GPU of ``hbm_gib`` GiB named ``sku_name`` (module docstring)."""
        if any(s in sku_name.lower() for s in self.small_tier_skus):
            return tiers[0].value
        return next(t.value for t in tiers if t.below_hbm_gib is None or hbm_gib < t.below_hbm_gib)


class InferenceXUse(StrictModel):
    """How InferenceX ran the stack: its ``framework`` label and the images of the calibration rows."""

    framework: str = Field(min_length=1)
    images: list[str] = Field(min_length=1)
    source: list[str] = Field(min_length=1)
    note: str | None = None


class KvAdmission(_SourcedBlock):
    """How the server admits requests against its KV cache (module docstring), and where that is stated."""

    policy: Literal["reserve-full", "current"]

    @model_validator(mode="after")
    def _check(self) -> "KvAdmission":
        require_source(self.status, self.source, f"kv_admission: a {self.status} policy")
        return self


class HostWork(_SourcedBlock):
    """Whether the server overlaps its per-iteration CPU work with the GPU (module docstring)."""

    overlap: bool
    flag: str | None = None  # the stack's own name of the setting

    @model_validator(mode="after")
    def _check(self) -> "HostWork":
        require_source(self.status, self.source, f"host: a {self.status} overlap rule")
        return self


class ServingStack(ProfileBase):
    framework: str = Field(min_length=1)  # "vLLM", "SGLang", "TensorRT-LLM"
    version: str = Field(min_length=1)  # the release as its project names it
    released: str  # YYYY-MM-DD or YYYY-MM
    release_source: list[str] = Field(min_length=1)
    vendors: list[str] = Field(min_length=1)
    vendor_reference: bool = False  # the vendor's own published inference benchmarks run it (default candidate)
    vendor_reference_source: list[str] = Field(default_factory=new_list)
    scheduler: SchedulerDefaults
    kv_admission: KvAdmission
    inferencex: InferenceXUse | None = None
    host: HostWork | None = None  # None: the CPU time adds to the GPU step, as the calibration has it

    @model_validator(mode="after")
    def _check(self) -> "ServingStack":
        if not _DATE.match(self.released):
            raise ValueError(f"released {self.released!r} must be YYYY-MM-DD or YYYY-MM")
        try:
            Source(title="released", date=self.released)  # a calendar date
        except ValueError as exc:
            raise ValueError(f"released {self.released!r}: {exc}") from None
        if self.vendor_reference and not self.vendor_reference_source:
            raise ValueError("vendor_reference = true needs vendor_reference_source: the vendor's published "
                             "benchmark that runs this stack")
        used = [("release_source", k) for k in self.release_source]
        used += [("vendor_reference_source", k) for k in self.vendor_reference_source]
        used += [("scheduler", k) for k in self.scheduler.source]
        used += [("kv_admission", k) for k in self.kv_admission.source]
        used += [("inferencex", k) for k in (self.inferencex.source if self.inferencex else [])]
        used += [("host", k) for k in (self.host.source if self.host else [])]
        self.require_source_keys(used)
        return self

    def consistency_errors(self) -> list[str]:
        """The text rules of every profile, and: every source dating the release carries a date."""
        return super().consistency_errors() + self.undated_release_errors(self.release_source)
