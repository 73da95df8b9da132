"""``--precision fp8`` under a stack whose FP8 recipe is MXFP8: which recipe the run is priced as.

A stack profile's ``fp8_recipe`` (``specs.stack``) says how that software runs FP8 when asked for it.
Two of its values have a priced counterpart of their own (``lowp``):

* ``mxfp8``: Transformer Engine's ``MXFP8BlockScaling`` (E8M0 scale per 32 elements), the recipe
  Megatron-Bridge's performance tables label "FP8-MX" (Megatron-Bridge performance summary, 25.09
  2025-09 and 25.11 2025-11: "FP8-MX" rows beside "FP8-CS" per-tensor current scaling). A stack
  configured that way runs ``--precision fp8`` as MXFP8, so ``fp8`` is priced as ``mxfp8`` (its fitted
  GEMM ceiling and one-pass casts), and the answer says so.
* ``delayed``, ``current``: per-tensor FP8, the ``fp8`` recipe as it is.
* ``blockwise`` (128 x 128 / 1 x 128 scales) stays priced as per-tensor FP8: no source the calibration may
  use measures it apart (``lowp`` module docstring).

MXFP8 needs block-scaled (MX) tensor math (``lowp.refusal``): on a SKU without it (H100, MI300X) the
stack's recipe cannot run, and ``fp8`` stays per-tensor there. Every SKU of one answer is priced on one
recipe: when the SKUs asked for do not all run the stack's MXFP8 (mixed stacks, or a SKU without MX
math), ``fp8`` stays per-tensor on all of them and the note says why and how to ask for MXFP8.
Core module: no printing; the note travels with the answer's warnings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mi400plan.errors import UsageError
from mi400plan.lowp import refusal
from mi400plan.stacks import StackRequest, resolve_stack

if TYPE_CHECKING:
    from mi400plan.profiles import Catalog
    from mi400plan.specs.accelerator import Accelerator


def fp8_as(catalog: "Catalog", accs: list["Accelerator"], precision: str,
           request: StackRequest | None) -> tuple[str, str | None]:
    """The training precision ``--precision fp8`` is priced as on ``accs`` under the stack ``request``
    (module docstring), and the note that says so (None when nothing changes)."""
    if precision != "fp8" or not accs:
        return precision, None
    mx, other = [], []
    for acc in accs:
        try:
            resolved = resolve_stack(catalog, acc, request)
        except UsageError:
            return precision, None  # the stack does not run here: the pricing path reports it
        if resolved is not None and resolved.settings.get("fp8_recipe") == "mxfp8":
            (other if refusal("mxfp8", acc) is not None else mx).append((acc.name, resolved.name))
        else:
            other.append((acc.name, resolved.name if resolved else "no stack"))
    if not mx:
        return precision, None
    stacks = ", ".join(sorted({s for _, s in mx}))
    if not other:
        return "mxfp8", f"--precision fp8 priced as mxfp8, the stack's recipe ({stacks}: fp8_recipe mxfp8)"
    skus = ", ".join(sorted({a for a, _ in other}))
    return precision, (f"--precision fp8 priced as per-tensor FP8 on every SKU: the FP8 recipe of {stacks} is "
                       f"MXFP8, which is not priced on {skus} (another stack's recipe there, or no MX tensor math); "
                       "give --precision mxfp8 to price MXFP8 where it runs")
