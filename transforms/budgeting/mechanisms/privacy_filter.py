"""Pure-DP privacy filters with exact integer budgets (Cookie Monster paper Appendix B, Eq. 3).

A filter with capacity eps_G adds up the budgets eps_1, ..., eps_k it has
accepted and answers Halt to the next request eps_{k+1} when
eps_1 + ... + eps_k + eps_{k+1} > eps_G (Eq. 3); a halted request consumes
nothing. Budgets are integers of ``1 / UNITS_PER_EPSILON`` epsilon
(``transforms.core.mechanisms.budget_units``): a capacity is rounded down and a charge up when converted, so rounding can only
make a filter stricter, never let it overshoot (DESIGN.md "Budgets are exact").

``FilterTable`` holds many filters of the same capacity in one dict, keyed by
whatever names a filter: (querier site, epoch) on a device for Cookie Monster
and ARA-like, (querier site, epoch) centrally for IPA-like. It also records
every key a report asked about, with zero consumption, since budget
statistics average over the device-epochs that were requested (Cookie Monster paper
Sec. 8.2).
"""
from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator


class FilterTable:
    """Pure-DP filters of capacity ``capacity_units``, one per key, created empty on first use (Alg. 1,
    "if F_x is not defined then initialise F_x with capacity eps_x^G")."""

    __slots__ = ("capacity_units", "consumed")

    def __init__(self, capacity_units: int, consumed: dict | None = None) -> None:
        if capacity_units < 0:
            raise ValueError(f"a capacity cannot be negative, got {capacity_units}")
        self.capacity_units = capacity_units
        self.consumed: dict[Hashable, int] = {} if consumed is None else consumed

    def touch(self, key: Hashable) -> None:
        """Record that a report asked about ``key`` (zero consumption if it never pays)."""
        self.consumed.setdefault(key, 0)

    def can_pay(self, key: Hashable, units: int) -> bool:
        """Whether ``try_consume(key, units)`` would succeed (Eq. 3 not violated)."""
        return self.consumed.get(key, 0) + units <= self.capacity_units

    def try_consume(self, key: Hashable, units: int) -> bool:
        """Deduct ``units`` from the filter of ``key`` and return True, or return False (Halt) and deduct
        nothing when that would exceed the capacity (Eq. 3). Never overshoots."""
        if units < 0:
            raise ValueError(f"a charge cannot be negative, got {units}")
        spent = self.consumed.get(key, 0) + units
        if spent > self.capacity_units:
            self.consumed.setdefault(key, 0)
            return False
        self.consumed[key] = spent
        return True

    def try_consume_all(self, charges: Iterable[tuple[Hashable, int]]) -> bool:
        """All of ``charges`` or none of them (the all-or-nothing rule of ARA-like and IPA-like)."""
        charges = list(charges)
        for key, units in charges:
            if units < 0:
                raise ValueError(f"a charge cannot be negative, got {units}")
            self.touch(key)
        totals: dict[Hashable, int] = {}
        for key, units in charges:
            totals[key] = totals.get(key, 0) + units
        if not all(self.can_pay(key, units) for key, units in totals.items()):
            return False
        for key, units in totals.items():
            self.consumed[key] += units
        return True

    def items(self) -> Iterator[tuple[Hashable, int]]:
        """(key, consumed units) for every key used so far."""
        return iter(self.consumed.items())
