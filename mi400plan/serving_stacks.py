"""The serving stack a ``serve`` answer is priced on: which one, and what it changes.

Choosing the stack (:func:`resolve_serving_stack`): ``serve --stack NAME`` names a ``profiles/serving``
profile (a name or alias; an unknown one is a usage error with the close names; a training stack's name
is refused with the serving stacks listed); without it, each SKU takes its vendor's default: the
newest-released serving stack marked ``vendor_reference`` for that vendor (the stack the vendor's own
published inference performance tables are measured with: TensorRT-LLM for NVIDIA, its "Performance
Overview"; ROCm vLLM for AMD, its "Performance results" page), so a user profile of a newer release
becomes the default by being added. A vendor with none runs with no stack named: the SKU family's
calibration and vLLM's scheduler defaults, as before serving stacks existed.

What a stack changes:

* the calibration (``serve_calibration.stack_calibration_for``): the fit on the InferenceX points that
  stack measured on the SKU family for the model's class, where there are enough of them, else the
  family's fit over every stack with a wider range (the status says which);
* the scheduler of ``--scenario`` (:func:`scheduler_limits`): the stack's defaults for
  ``max_num_batched_tokens`` / ``max_num_seqs`` and whether prompt chunks share an iteration with the
  decodes (``specs/serving.py``);
* the TTFT of the steady-state model (:func:`scheduler_iterations`, ``serve.Iterations``): whether a prompt
  shares its iteration with the running decodes (``prefill_with_decodes``) and, where prompts are chunked,
  the token budget that splits them;
* the KV admission policy (``[kv_admission]``, ``serve_admission``): how many of a closed loop's clients
  run at once in the InferenceX calibration's evaluation (``serve_calibration.predict``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from mi400plan.errors import ProfileError, UnknownNameError, UsageError
from mi400plan.stacks import newest_vendor_reference

if TYPE_CHECKING:
    from mi400plan.profiles import Catalog
    from mi400plan.specs.accelerator import Accelerator
    from mi400plan.serve_iterations import Iterations
    from mi400plan.specs.serving import SchedulerDefaults, ServingStack

GIB = 2**30
# Family prefixes of ``serve_calibration.FAMILY_KEYS`` -> accelerator vendor.
FAMILY_VENDOR = {"amd": "AMD", "nvidia": "NVIDIA"}


class StackVendorError(UsageError):
    """``--stack`` names a serving stack that does not run on a SKU's vendor (a comparison leaves it out)."""


@dataclass(frozen=True)
class ResolvedServing:
    """The serving stack a SKU is priced on and why it was chosen."""

    name: str
    framework: str
    version: str
    released: str
    scheduler: "SchedulerDefaults"
    basis: str  # "--stack", or the default rule with the vendor

    def label(self) -> str:
        return f"{self.name} ({self.framework} {self.version}, released {self.released})"


def default_serving_stack(catalog: "Catalog", vendor: str) -> "ServingStack | None":
    """The newest-released ``vendor_reference`` serving stack that runs on ``vendor`` (None: there is none)."""
    return newest_vendor_reference(catalog, "serving", vendor)


def serving_spec(catalog: "Catalog", name: str) -> "ServingStack":
    """The serving stack profile ``name`` (name, alias or file): a usage error naming ``--stack`` otherwise."""
    try:
        return catalog.get("serving", name).spec
    except UnknownNameError as exc:
        known = ", ".join(catalog.names("serving"))
        try:
            training = catalog.resolve("stacks", name)
        except UnknownNameError:
            training = None
        if training is not None:
            raise UsageError(f"--stack {name!r} is a training stack ({training}); serve takes a serving stack",
                             hint=f"serving stacks: {known} (mi400plan profiles list --kind serving)") from None
        raise UsageError(f"--stack: {exc.message}", hint=f"serving stacks: {known}") from None
    except ProfileError as exc:  # a path given to --stack that is no serving stack profile
        exc.hint = exc.hint or f"read as the serving stack profile given to --stack ({name})"
        raise


def resolve_serving_stack(catalog: "Catalog", acc: "Accelerator", name: str | None) -> ResolvedServing | None:
    """The serving stack ``acc`` is priced on (module docstring); None when none is named and the vendor
    has no default."""
    if name:
        spec, basis = serving_spec(catalog, name), "--stack"
        if acc.vendor not in spec.vendors:
            raise StackVendorError(f"serving stack {spec.name} runs on {', '.join(spec.vendors)} accelerators, not "
                                   f"on {acc.vendor}'s {acc.name}",
                                   hint="choose a stack for that vendor (mi400plan profiles list --kind serving)")
    else:
        spec = default_serving_stack(catalog, acc.vendor)
        if spec is None:
            return None
        basis = f"default for {acc.vendor}: the newest stack its own published inference benchmarks run"
    return ResolvedServing(spec.name, spec.framework, spec.version, spec.released, spec.scheduler, basis)


def stack_of_inferencex(catalog: "Catalog", family: str, framework: str) -> str | None:
    """The serving stack profile whose ``[inferencex] framework`` label is ``framework`` and that runs on
    the vendor of calibration ``family`` (``amd-cdna3`` -> AMD); None when no profile claims it."""
    vendor = FAMILY_VENDOR.get(family.split("-")[0])
    for name in catalog.names("serving"):
        spec = catalog.get("serving", name).spec
        if spec.inferencex is not None and spec.inferencex.framework == framework and vendor in spec.vendors:
            return spec.name
    return None


def scheduler_limits(sched: "SchedulerDefaults", sku_name: str, hbm_bytes: float, kv_tokens: float,
                     context_len: int) -> tuple[int, int]:
    """(tokens per iteration, sequences in flight): the stack's defaults for a GPU of ``hbm_bytes``
    (``SchedulerDefaults.tier``); ``max_num_seqs = "kv-pool"`` takes SGLang's rule on the KV pool of
    ``kv_tokens`` tokens and a context of ``context_len`` (``serve_sim.sglang_limits``)."""
    from mi400plan.serve_sim import sglang_pool

    gib = hbm_bytes / GIB
    chunk = sched.tier(sched.max_num_batched_tokens, sku_name, gib)
    if sched.max_num_seqs == "kv-pool":
        return chunk, sglang_pool(kv_tokens, context_len)
    return chunk, sched.tier(sched.max_num_seqs, sku_name, gib)


def scheduler_iterations(sched: "SchedulerDefaults | None", sku_name: str, hbm_bytes: float) -> "Iterations":
    """The iteration rule (``serve.Iterations``) of a stack's scheduler on this GPU: ``prefill_with_decodes``,
    and the token budget of its tier (``SchedulerDefaults.tier``) where it chunks prompts. No stack (None):
    vLLM's defaults for the GPU (``serve_sim.scheduler_defaults``: mixed, chunked), as ``--scenario`` runs it."""
    from mi400plan.serve_iterations import iterations_for
    from mi400plan.serve_sim import scheduler_defaults

    if sched is None:
        return iterations_for(True, True, scheduler_defaults(sku_name, hbm_bytes)[0])
    budget = sched.tier(sched.max_num_batched_tokens, sku_name, hbm_bytes / GIB)
    return iterations_for(sched.prefill_with_decodes, sched.chunked_prefill, budget)
