"""How ``serve`` orders layouts and picks the leader of its SKU comparison (``--rank-by``).

Three orders, each a score where higher is better so one ``max`` / ``lexsort`` serves all of them:

* ``tok-per-gpu``: output tokens/s per GPU (the InferenceX headline metric).
* ``cost``: US dollars per million output tokens, lowest first. Output tokens carry the decode share
  ``1 - rho`` of the GPU time (``rho`` = prefill share, ``mi400plan.serve``), so
  ``$/Mtok = price_per_gpu_hour / 3600 x (1 - rho) / (output tokens/s/GPU) x 1e6``: the same
  formula as the rows' ``cost_per_mtok_output``. Within one SKU the price is a constant, so the order
  can differ from ``tok-per-gpu`` only through ``rho``; across SKUs the price per GPU-hour decides.
* ``ttft``: time to first token, lowest first.

Default (``default_rank_by``): ``cost`` when every SKU has a price per GPU-hour (what a buyer
compares), else ``tok-per-gpu``: a cost order with one SKU unpriced would rank it on nothing.
"""

from __future__ import annotations

import numpy as np

from mi400plan.units import HOUR

RANK_BY = ("tok-per-gpu", "cost", "ttft")
DEFAULT_RULE = "the default when every SKU has a price per GPU-hour, else tok-per-gpu; --rank-by overrides"
WHAT = {"tok-per-gpu": "highest output tokens/s/GPU first", "cost": "lowest $ per million output tokens first",
        "ttft": "lowest time to first token first"}


def rule_text(rank_by: str, given: bool) -> str:
    """Why the order is ``rank_by``: given on the command line, or the default rule."""
    if given:
        return f"{rank_by} (--rank-by)"
    return f"{rank_by}: {DEFAULT_RULE}" if rank_by == "cost" else f"{rank_by}: a SKU has no price per GPU-hour, " \
        "so not cost; --rank-by overrides"


def default_rank_by(prices: list[float | None]) -> str:
    """``cost`` when every price is known, else ``tok-per-gpu`` (module docstring)."""
    return "cost" if prices and all(p is not None for p in prices) else "tok-per-gpu"


def cost_per_mtok(ev: dict[str, np.ndarray], price_per_gpu_hour: float) -> np.ndarray:
    """US dollars per million output tokens of each point (module docstring's formula)."""
    return price_per_gpu_hour / HOUR * (1.0 - ev["rho"]) / ev["out_tps_gpu"] * 1e6


def score(ev: dict[str, np.ndarray], rank_by: str, price_per_gpu_hour: float | None) -> np.ndarray:
    """Higher is better under ``rank_by``; ``cost`` without a price is refused by the caller."""
    if rank_by == "cost":
        if price_per_gpu_hour is None:
            raise ValueError("rank by cost needs a price per GPU-hour")
        return -cost_per_mtok(ev, price_per_gpu_hour)
    if rank_by == "ttft":
        return -ev["ttft"]
    return ev["out_tps_gpu"]


def shown(value: float, rank_by: str) -> float:
    """A score back in its unit: $/Mtok, seconds of TTFT or tokens/s/GPU (all positive)."""
    return -value if rank_by in ("cost", "ttft") else value
