"""Integer helpers with bounded work: the divisors of n in O(sqrt n) steps, never a scan up to n.

Leaf module: imports nothing from mi400plan.
"""

from __future__ import annotations

import math


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
