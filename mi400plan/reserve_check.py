"""A ``--reserve`` that leaves no room at all: almost always a unit slip (``1.5TB`` for ``1.5GB``).

The reserve is ``fixed + fraction x capacity`` (``specs.layout.RuntimeReserve``); when that reaches a
SKU's usable HBM nothing can fit, so the answer "does not fit" would be true but useless. The check
is plain arithmetic on the same two terms the memory model subtracts.
"""

from __future__ import annotations

from collections.abc import Sequence

from mi400plan.specs.layout import RuntimeReserve


def oversized_reserve(text: str, reserve: RuntimeReserve, capacities: Sequence[tuple[str, float | None]]) -> list[str]:
    """One warning naming every SKU (name, usable HBM bytes; None = not disclosed) whose HBM the
    reserve ``text`` takes whole; empty when it leaves room on all of them."""
    over = [(name, cap) for name, cap in capacities if cap is not None and reserve.bytes_for(cap) >= cap]
    if not over:
        return []
    listed = ", ".join(f"{name} ({cap / 1e9:,.1f} GB = {cap / 2**30:,.1f} GiB)" for name, cap in over[:4])
    more = f" and {len(over) - 4} more" if len(over) > 4 else ""
    size = reserve.fixed_bytes
    return [f"--reserve {text!r} ({size / 1e9:,.1f} GB = {size / 2**30:,.1f} GiB fixed + "
            f"{reserve.fraction:.0%} of HBM) is at least the usable HBM of {listed}{more}: nothing can fit "
            "there; check the unit (GB, GiB, TB)"]
