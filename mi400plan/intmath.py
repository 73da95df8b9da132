"""Integer helpers with bounded work: the divisors of n in O(sqrt n) steps, never a scan up to n;
the distinct values of an array of small integer keys in O(N), never a sort.

Leaf module: imports nothing from mi400plan.
"""

from __future__ import annotations

import math
from typing import Any


def divisors(n: int, limit: int | None = None) -> list[int]:
    """Positive divisors of ``n`` up to ``limit`` (ascending), by trial division up to sqrt(n)
    (each divisor d <= sqrt(n) pairs with n // d): 2**24 takes 4,096 steps, not 16.7 million."""
    if n < 1:
        return []
    small, large = [], []
    for d in range(1, math.isqrt(n) + 1):
        if n % d == 0:
            small.append(d)
            if d != n // d:
                large.append(n // d)
    found = small + large[::-1]
    return found if limit is None else [d for d in found if d <= limit]


def key_groups(key: Any) -> tuple[Any, Any]:
    """(the distinct values of the non-negative integer keys ``key``, ascending; for every key, the
    index of its value among them), so that ``present[inverse] == key``: a presence count and a lookup
    table, O(N + largest key), no sort. numpy is imported here, not at module import."""
    import numpy as np

    k = np.asarray(key, dtype=np.int64).ravel()
    if k.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    present = np.flatnonzero(np.bincount(k))
    lut = np.zeros(int(present[-1]) + 1, dtype=np.int64)
    lut[present] = np.arange(present.size)
    return present, lut[k]
