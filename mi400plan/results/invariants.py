"""The invariants every result keeps before it is rendered: each number finite, and each quantity
(a time, a size, a power, a price, a rate) not negative. A signed difference (headroom, margin,
delta, slack) may be negative. A broken invariant is a bug in the planner, reported as an internal
error naming the field, never printed as a number."""

import math
from typing import Any

# Field-name endings of quantities that cannot be negative.
_QUANTITY_SUFFIXES = ("_s", "_bytes", "_w", "_kw", "_gb", "_gib", "_days", "_usd", "_flops", "_tflops", "mfu",
                      "_per_s", "_mw", "_kwh")
# Field-name parts of signed differences.
_SIGNED = ("headroom", "margin", "delta", "slack", "spare", "excess", "diff", "change", "saving", "gain",
           "over", "short", "deficit", "error", "residual", "vs", "gap")


class InvariantError(Exception):
    """A result holds NaN, infinity or a negative quantity: the planner's arithmetic is wrong."""


def check_finite(result: Any) -> None:
    """Raise InvariantError naming the first non-finite number (or negative quantity) in ``result``."""
    _walk(result.model_dump(), "data")


def check_data(data: Any) -> None:
    """The same check on plain data (a JSON envelope's ``data``)."""
    _walk(data, "data")


def _walk(value: Any, path: str) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            _walk(item, f"{path}.{key}")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _walk(item, f"{path}[{i}]")
    elif isinstance(value, float) and not math.isfinite(value):
        raise InvariantError(f"result field {path} is {value!r}; the inputs reached a case the model cannot size")
    elif isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0 and _quantity(path):
        raise InvariantError(f"result field {path} is negative ({value!r}), which a quantity cannot be")


def _quantity(path: str) -> bool:
    name = path.rsplit(".", 1)[-1].split("[", 1)[0].lower()
    return name.endswith(_QUANTITY_SUFFIXES) and not any(part in name for part in _SIGNED)
