"""The software stack a training run is priced on: which one, and what it changes.

Choosing the stack (``resolve_stack``): ``--stack NAME`` names a ``profiles/stacks`` profile;
without it the default of the accelerator's vendor is used, the newest-released stack marked
``vendor_reference`` for that vendor (the vendor's own published performance stack: NVIDIA's NeMo
Megatron-Bridge, AMD's Primus), so a user profile of a newer release becomes the default by being
added. A vendor with no such stack (Google, AWS, Intel, ...) runs with no stack named, as before.
``--moe-dispatcher``, ``--cuda-graphs`` and ``--attention-kernel`` override the stack's setting.

What a stack changes (``stack_efficiency``): the accelerator profile's software-dependent
efficiencies are read as measured on the vendor's default stack (its ``attention`` was fitted on
runs of that generation of kernels), and another stack moves
them by these rules; a stack equal to the default leaves them exactly as they are.

* Attention kernel generation (``attention``): FlashAttention-3 (and cuDNN fused attention, the
  same Hopper generation) runs 1.5-2.0x FlashAttention-2 on H100 (Shah et al., "FlashAttention-3",
  arXiv 2407.08608, 2024-07-11: FA2 35 % of the H100 peak, FA3 up to 75 %). Between those two
  generations on an NVIDIA part the measured efficiency is scaled by 1.75x (range 1.5-2.0x) or its
  inverse. Any other change of kernel (CK vs Triton, FA2 vs Triton, ...) has no kernel benchmark
  in the catalog: the nominal stays and the range widens to -25 %/+25 % (status ``assumed``).
  Where the profile has no measured attention (the ``search.ATTN_OVER_MATMUL`` rule) nothing moves.
  The kernel generation also sets how fast the rate falls on short sequences, on every SKU
  (``gemm.attention_length_factor``: ``keys / (keys + s_half)``, ``s_half`` fitted per generation on
  the same paper's Figure 5), so a profile's ``attention`` is its long-sequence rate. Which generation
  the H100 value (Llama 3 405B pre-training, early 2024) ran is not established: it is read as the
  default stack's, an assumption its note states.
* CUDA/HIP graph scope and MoE dispatcher: carried to ``search.Hardware`` and priced per MoE layer
  by ``mi400plan.moe_dispatch`` (a graph removes the host-bound expert term only where it captures
  the MoE layer: full scope with expert inputs padded to a capacity factor; the dispatcher sets the
  dispatched bytes). The profile's ``expert_host_us`` is not moved by the stack.
"""

from __future__ import annotations

import datetime
from dataclasses import field
from typing import TYPE_CHECKING, Any

from mi400plan.errors import ProfileError, UsageError
from mi400plan.records import record
from mi400plan.specs.common import Estimate

if TYPE_CHECKING:
    from mi400plan.profiles import Catalog
    from mi400plan.specs.accelerator import Accelerator
    from mi400plan.specs.efficiency import Efficiency
    from mi400plan.specs.stack import StackProfile

# FlashAttention-3 over FlashAttention-2 on H100 (arXiv 2407.08608, abstract): 1.5-2.0x.
FA3_OVER_FA2 = (1.5, 1.75, 2.0)
# Kernel generations the FA3 paper compares: FA2-class and Hopper-async-class.
_GENERATION = {"fa2": "fa2", "fa3": "fa3", "cudnn": "fa3"}
# Unmeasured kernel change: nominal kept, range widened by this fraction each way (a rule).
UNMEASURED_KERNEL_RANGE = 0.25
SETTING_FLAGS = {"moe_dispatcher": "--moe-dispatcher", "cuda_graphs": "--cuda-graphs",
                 "attention_kernel": "--attention-kernel"}


@record
class StackRequest:
    """What a command asked for: a stack name (None: the vendor default) and single settings."""

    name: str | None = None
    overrides: dict[str, str | None] = field(default_factory=dict)

    def key(self) -> tuple[object, ...]:
        """A hashable form (runs priced on the same request share one hardware build)."""
        return (self.name, *sorted((k, v) for k, v in self.overrides.items() if v is not None))


def known_stack(catalog: "Catalog", text: str | None) -> str | None:
    """The stack profile ``text`` names (a name or alias), or None when it names none (a label such as
    a runs file's "Megatron-Core", which ``validate`` groups by)."""
    if not text:
        return None
    from mi400plan.errors import UnknownNameError

    try:
        return catalog.resolve("stacks", text)
    except UnknownNameError:
        return None


@record
class ResolvedStack:
    """The stack a SKU is priced on: its profile's identity, the settings in force (after
    overrides), which of them were overridden, and why this stack was chosen."""

    name: str
    framework: str
    version: str
    released: str
    settings: dict[str, str]
    overridden: tuple[str, ...] = ()
    basis: str = ""  # "--stack", or the default rule with the vendor
    reference: dict[str, str] = field(default_factory=dict)  # the vendor default's settings (efficiency basis)

    def label(self) -> str:
        over = "".join(f", {k.replace('_', ' ')} {self.settings[k]}" for k in self.overridden)
        return f"{self.name} ({self.framework} {self.version}, released {self.released}{over})"


def _date_key(text: str) -> datetime.date:
    parts = [int(p) for p in text.split("-")] + [1, 1]
    return datetime.date(parts[0], parts[1], parts[2])


def newest_vendor_reference(catalog: "Catalog", kind: str, vendor: str) -> Any:
    """The newest-released ``vendor_reference`` profile of ``kind`` (``stacks`` or ``serving``) that runs on
    ``vendor``: the stack the vendor's own published results run (None: there is none)."""
    best = None
    for name in catalog.names(kind):
        spec = catalog.get(kind, name).spec
        if spec.vendor_reference and vendor in spec.vendors:
            if best is None or _date_key(spec.released) > _date_key(best.released):
                best = spec
    return best


def default_stack(catalog: "Catalog", vendor: str) -> "StackProfile | None":
    """The newest-released ``vendor_reference`` training stack that runs on ``vendor`` (None: there is none)."""
    return newest_vendor_reference(catalog, "stacks", vendor)


def resolve_stack(catalog: "Catalog", acc: "Accelerator", request: StackRequest | None = None) -> ResolvedStack | None:
    """The stack ``acc`` is priced on (module docstring): ``name`` or the vendor default, with
    ``overrides`` (setting -> value) on top. None when no stack is named and the vendor has none
    (overrides then have nothing to apply to: ``UsageError``)."""
    request = request or StackRequest()
    name = request.name
    given = {k: v for k, v in request.overrides.items() if v is not None}
    ref = default_stack(catalog, acc.vendor)
    if name:
        try:
            spec, basis = catalog.get("stacks", name).spec, "--stack"
        except ProfileError as exc:  # a path given to --stack that is no stack profile: say where it came from
            exc.hint = exc.hint or f"read as the training stack profile given to --stack ({name})"
            raise
        if acc.vendor not in spec.vendors:
            raise UsageError(f"stack {spec.name} runs on {', '.join(spec.vendors)} accelerators, not on "
                             f"{acc.vendor}'s {acc.name} (--stack, or a run's stack field)",
                             hint="choose a stack for that vendor, or a user stack profile that lists it")
    elif ref is not None:
        spec, basis = ref, f"default for {acc.vendor}: its newest vendor reference stack"
    else:
        if given:
            flags = ", ".join(SETTING_FLAGS[k] for k in given)
            raise UsageError(f"{flags} override a software stack, and {acc.vendor} ({acc.name}) has no default stack",
                             hint="name one with --stack (mi400plan profiles list --kind stacks)")
        return None
    settings = spec.settings.values()
    settings.update(given)
    return ResolvedStack(spec.name, spec.framework, spec.version, spec.released, settings,
                         tuple(k for k in given if given[k] != spec.settings.values()[k]), basis,
                         ref.settings.values() if ref is not None else spec.settings.values())


def _attention(est: Estimate, vendor: str, ref: str, new: str) -> Estimate:
    """The attention efficiency on kernel ``new``, given its value measured on ``ref`` (rules above)."""
    if not est.known or ref == new:
        return est
    lo, nom, hi = est.triple("attention efficiency")
    g_ref, g_new = _GENERATION.get(ref), _GENERATION.get(new)
    if vendor == "NVIDIA" and g_ref and g_new and g_ref != g_new:
        r_lo, r_nom, r_hi = FA3_OVER_FA2 if g_new == "fa3" else tuple(1 / r for r in reversed(FA3_OVER_FA2))
        note = f"{ref} -> {new}: x{r_nom:.3g} ({r_lo:.3g}-{r_hi:.3g}), FlashAttention-3 vs -2 on H100 (arXiv 2407.08608)"
        return Estimate(nominal=min(1.0, nom * r_nom), low=min(1.0, lo * r_lo), high=min(1.0, hi * r_hi),
                        status="estimate", source=list(est.source), note=note)
    w = UNMEASURED_KERNEL_RANGE
    note = f"{ref} -> {new}: no kernel benchmark compares them; nominal kept, range +-{w:.0%} (rule)"
    return Estimate(nominal=nom, low=lo * (1 - w), high=min(1.0, hi * (1 + w)), status="assumed",
                    source=list(est.source), note=note)


def stack_efficiency(acc: "Accelerator", stack: ResolvedStack | None) -> "Efficiency":
    """``acc``'s ``[efficiency]`` moved from its vendor default stack to ``stack`` (rules above)."""
    eff = acc.efficiency
    if stack is None:
        return eff
    att = _attention(eff.attention, acc.vendor, stack.reference["attention_kernel"], stack.settings["attention_kernel"])
    if att is eff.attention:
        return eff
    return eff.model_copy(update={"attention": att})
