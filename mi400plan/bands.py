"""The empirical error bands of the step-time model that ``fit`` and ``sweep`` print: the band table
``mi400plan/data/error_bands.json`` (computed by ``mi400plan.validate`` from the bundled measured runs,
``validate --write-bands``) read back, and the band of one prediction.

Kept apart from ``mi400plan.validate`` (the measured runs and the cross-validation, which re-exports
these names) so that reading a band does not import the validation machinery.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence

from mi400plan.records import record

BANDS_FILE = "error_bands.json"


@record
class Band:
    """An empirical error band: the mean |error| of the runs of a group (``kind``: dense or MoE; ``stack``:
    None for every stack), and how many runs it rests on."""

    kind: str
    stack: str | None
    runs: int
    mean_abs: float
    max_abs: float

    def text(self) -> str:
        where = f"{self.kind}, {self.stack}" if self.stack else f"{self.kind}, all stacks"
        return f"+-{self.mean_abs * 100:.0f} % ({where}, {self.runs} runs)"


def read_bands(text: str | None = None) -> list[Band]:
    """The bundled band table (``BANDS_FILE``), or ``text`` in its format."""
    return list(_parse_bands(text if text is not None else _bundled_bands()))


@functools.lru_cache(maxsize=1)
def _bundled_bands() -> str:
    from mi400plan.cache import package_dir  # a plain path where importlib.resources would add a lookup

    return package_dir("data").joinpath(BANDS_FILE).read_text(encoding="utf-8")


@functools.lru_cache(maxsize=4)
def _parse_bands(text: str) -> tuple[Band, ...]:
    data = json.loads(text)
    return tuple(Band(r["kind"], r["stack"], int(r["runs"]), float(r["mean_abs"]), float(r["max_abs"]))
                 for r in data["bands"])


def band_for(bands: Sequence[Band], moe: bool, stack: str | None) -> Band | None:
    """The band of a prediction: its (dense/MoE, stack) group when the table has it, else dense/MoE over
    every stack."""
    kind = "MoE" if moe else "dense"
    exact = [b for b in bands if b.kind == kind and stack is not None and b.stack == stack]
    wide = [b for b in bands if b.kind == kind and b.stack is None]
    return (exact or wide or [None])[0]
