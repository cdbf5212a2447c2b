"""Exact privacy parameters and budgets (DESIGN.md, "Budgets are exact"): parameters as ``Fraction``s, budgets as
integers of 10^-12 epsilon.

Every budget the project stores or compares (the device-epoch filters of Cookie Monster, Cookie Monster paper Appendix B; the
Aggregation Service ledger's per shared-ID budgets, Ghazi et al. footnotes 3-4) is an integer number of units. A
capacity is converted rounding down and a charge rounding up, so rounding can only make a budget stricter.
"""
from __future__ import annotations

import math
import numbers
from fractions import Fraction

UNITS_PER_EPSILON = 10**12


def as_fraction(value: numbers.Rational | float | str) -> Fraction:
    """An exact Fraction; a float goes through its shortest repr, so 1e-5 becomes exactly 1/100000."""
    if isinstance(value, bool):
        raise TypeError("a privacy parameter cannot be a bool")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"a privacy parameter must be finite, got {value}")
        return Fraction(str(value))
    return Fraction(value)


def epsilon_units(epsilon: Fraction | float | int | str, rounding: str) -> int:
    """``epsilon`` in integer budget units, rounded ``"up"`` (charges) or ``"down"`` (capacities)."""
    scaled = as_fraction(epsilon) * UNITS_PER_EPSILON
    if scaled < 0:
        raise ValueError(f"a budget cannot be negative, got {epsilon}")
    if rounding == "up":
        return math.ceil(scaled)
    if rounding == "down":
        return math.floor(scaled)
    raise ValueError(f"rounding must be 'up' or 'down', got {rounding!r}")


def units_epsilon(units: int) -> Fraction:
    """Budget units back to an exact epsilon."""
    return Fraction(units, UNITS_PER_EPSILON)


def units_float(units: int) -> float:
    """Budget units as the nearest double to the exact epsilon (int / int division is correctly rounded)."""
    return units / UNITS_PER_EPSILON
