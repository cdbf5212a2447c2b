"""Credit allocation for last-n-touch attribution (W3C Attribution API, "fairly allocate credit").

The conversion's integer ``value`` is split across the last n impressions in proportion to ``credit``; each share is
rounded to an integer so that the shares sum to exactly ``value`` and each share's expectation is its exact
proportional part (dependent rounding, two shares at a time). The specification computes in doubles and rounds at
the end to absorb floating-point error; here every step is an exact rational, so the final rounding is exact.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction


def fairly_allocate_credit(credit: Sequence[Fraction], value: int, random_fraction: Callable[[], Fraction]
                           ) -> list[int]:
    """The integer shares of ``value`` for ``credit`` (positive, not empty); ``random_fraction()`` draws r in [0, 1]."""
    if not credit:
        raise ValueError("credit must not be empty")
    total = sum(credit, Fraction(0))
    shares = [value * item / total for item in credit]
    first = 0
    for second in range(1, len(shares)):
        frac1 = shares[first] - math.floor(shares[first])
        frac2 = shares[second] - math.floor(shares[second])
        if frac1 == 0 and frac2 == 0:
            continue
        incr1, incr2 = (1 - frac1, 1 - frac2) if frac1 + frac2 > 1 else (-frac1, -frac2)
        p1 = incr2 / (incr1 + incr2)  # the probability that the first share is the one made integral
        if random_fraction() < p1:
            incr = incr1
            first, second = second, first
        else:
            incr = incr2
        shares[second] += incr
        shares[first] -= incr
    # every pair step makes one share integral and keeps the sum, which is the integer value: all are integral
    if any(share.denominator != 1 for share in shares):
        raise AssertionError(f"dependent rounding left a fractional share: {shares}")
    return [int(share) for share in shares]
