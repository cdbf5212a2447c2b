"""Big Bird's privacy filters of one device (Tholoniat et al., "Beyond Per-Querier Budgets: Rigorous and Resilient
Global Privacy Enforcement for the W3C Attribution API", Sec. 4; pdslib's ``FilterId`` and ``deduct_budget``;
the W3C Attribution API ``api.bs``, "deduct privacy and safety budgets").

Four kinds of pure-DP filter, each per epoch of the device:

* ``site``: the per-site (per-querier) budget of a conversion site, the Attribution API's privacy budget;
* ``global``: the global budget of the epoch, shared by every site (Big Bird's global device-epoch IDP);
* ``impression_quota``: how much of the global budget the conversions attributed to one impression site may use;
* ``conversion_quota``: how much of it one conversion site may use (Big Bird; pdslib's ``TriggerQuota``).

A charge names filters and amounts. ``FilterSet.try_consume`` is pdslib's two-phase commit: every filter is checked
first, and only if none would exceed its capacity are they all deducted; a request that fails any filter changes
none. A kind whose capacity is None has no filter (its charges always pass and are not recorded). One filter may
have a capacity of its own (pdslib's ``set_capacity``, and the unlocked part of its release filter, which Big Bird's
batched scheduling uses), None lifting its limit while its consumption is still recorded. Amounts are integers (the
caller's unit: micro-epsilon for the API, ``budget_units`` for the measurement job), so no rounding happens here.
Beam-free.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

SITE, GLOBAL, IMPRESSION_QUOTA, CONVERSION_QUOTA = "site", "global", "impression_quota", "conversion_quota"
KINDS = (SITE, GLOBAL, IMPRESSION_QUOTA, CONVERSION_QUOTA)


class FilterId(NamedTuple):
    """One filter: its kind, epoch and site ("" for the global filter)."""

    kind: str
    epoch: int
    site: str = ""


@dataclass(frozen=True)
class FilterCapacities:
    """Each kind's capacity in integer units; None: the kind has no filter."""

    site: int | None
    global_: int | None = None
    impression_quota: int | None = None
    conversion_quota: int | None = None

    def __post_init__(self) -> None:
        for kind in KINDS:
            capacity = self.of(kind)
            if capacity is not None and capacity < 0:
                raise ValueError(f"the {kind} capacity cannot be negative, got {capacity}")

    def of(self, kind: str) -> int | None:
        return self.global_ if kind == GLOBAL else getattr(self, kind)


def epoch_charges(epoch: int, conversion_site: str, impression_sites: Iterable[str], site_units: int,
                  global_units: int, querier_site: str | None = None) -> dict[FilterId, int]:
    """What one conversion's report costs in one epoch (``api.bs`` "deduct privacy and safety budgets"; pdslib
    ``filters_to_consume``): ``site_units`` from the per-site budget of ``querier_site`` (pdslib's querier; by
    default the conversion site), ``global_units`` from the global budget, from the conversion site's quota and
    from the quota of each impression site whose impressions the report reads in that epoch (each once)."""
    charges = {FilterId(SITE, epoch, querier_site or conversion_site): site_units, FilterId(GLOBAL, epoch): global_units,
               FilterId(CONVERSION_QUOTA, epoch, conversion_site): global_units}
    for site in impression_sites:
        charges[FilterId(IMPRESSION_QUOTA, epoch, site)] = global_units
    return charges


class FilterSet:
    """The filters of one device, created empty on first use; ``consumed`` maps each used filter to its units,
    ``limits`` the filters whose capacity is their own rather than their kind's (None: no limit)."""

    __slots__ = ("capacities", "consumed", "limits", "_of_kind")

    def __init__(self, capacities: FilterCapacities, consumed: dict[FilterId, int] | None = None,
                 limits: dict[FilterId, int | None] | None = None) -> None:
        self.capacities = capacities
        self.consumed: dict[FilterId, int] = {} if consumed is None else consumed
        self.limits: dict[FilterId, int | None] = {} if limits is None else limits
        self._of_kind = {kind: capacities.of(kind) for kind in KINDS}  # read for every charge: looked up once

    def capacity(self, filter_id: FilterId) -> int | None:
        """``filter_id``'s capacity: its own when ``limits`` sets one (pdslib's ``set_capacity``; the part of a
        release filter unlocked so far), its kind's otherwise; None: no limit."""
        if filter_id in self.limits:
            return self.limits[filter_id]
        return self._of_kind[filter_id.kind]

    def touch(self, filter_id: FilterId) -> None:
        """Record that a report asked about ``filter_id`` (zero consumption if it never pays), for budget
        statistics over the requested device-epochs (Cookie Monster paper Sec. 8.2)."""
        if self._of_kind[filter_id.kind] is not None:
            self.consumed.setdefault(filter_id, 0)

    def remaining(self, filter_id: FilterId) -> int | None:
        """What ``filter_id`` has left (None: no limit); negative once its capacity is set below what it consumed."""
        capacity = self.capacity(filter_id)
        return None if capacity is None else capacity - self.consumed.get(filter_id, 0)

    def out_of_budget(self, charges: Mapping[FilterId, int]) -> list[FilterId]:
        """The filters that ``charges`` would take past their capacity (phase 1, the dry run). ``capacity`` and
        ``remaining`` written out: this runs for every charge of every report."""
        limits, of_kind, consumed = self.limits, self._of_kind, self.consumed
        over = []
        for filter_id, units in charges.items():
            if units < 0:
                raise ValueError(f"a charge cannot be negative, got {units}")
            capacity = limits[filter_id] if filter_id in limits else of_kind[filter_id.kind]
            if capacity is not None and units > capacity - consumed.get(filter_id, 0):
                over.append(filter_id)
        return over

    def try_consume(self, charges: Mapping[FilterId, int]) -> bool:
        """Deduct every charge and return True, or return False and deduct nothing when any filter would exceed
        its capacity (phase 2 runs only after phase 1 passed)."""
        if self.out_of_budget(charges):
            return False
        for filter_id, units in charges.items():
            if self._of_kind[filter_id.kind] is not None:  # a lifted limit still records
                self.consumed[filter_id] = self.consumed.get(filter_id, 0) + units
        return True

    def consume_each(self, charges: Mapping[FilterId, int]) -> None:
        """Deduct each charge whose filter can pay it, each on its own (not atomically: pdslib's public filters
        record an allocated request's consumption filter by filter). Each filter's check involves only its own
        charge, so one dry run over all of them tells which can pay."""
        over = set(self.out_of_budget(charges))
        for filter_id, units in charges.items():
            if filter_id not in over and self._of_kind[filter_id.kind] is not None:
                self.consumed[filter_id] = self.consumed.get(filter_id, 0) + units

    def exhaust(self, filter_id: FilterId) -> None:
        """Leave ``filter_id`` nothing (``api.bs`` "clear browsing history" without forgetting visits sets a site's
        privacy budgets to 0)."""
        capacity = self.capacity(filter_id)
        if capacity is None:
            raise ValueError(f"{filter_id} has no limit to exhaust")
        self.consumed[filter_id] = max(capacity, self.consumed.get(filter_id, 0))

    def forget(self, sites: Iterable[str]) -> None:
        """Drop every filter of ``sites`` (per-site budgets and quotas) but the global ones (``api.bs`` "clear
        browsing history" forgetting those sites' visits: the global budget, once spent, is not forgotten)."""
        forgotten = set(sites)
        for filter_id in [filter_id for filter_id in self.consumed
                          if filter_id.kind != GLOBAL and filter_id.site in forgotten]:
            del self.consumed[filter_id]

    def items(self) -> Iterator[tuple[FilterId, int]]:
        return iter(self.consumed.items())


@dataclass
class UserActionContext:
    """Big Bird's per-user-action cap on quota activations (Tholoniat et al., Sec. 4, Alg. 2; w3c/attribution PR
    #309's "user action context entry"): within one user action, at most ``impression_site_cap`` impression sites
    may save impressions, and per epoch at most ``conversion_site_cap`` conversion sites may draw from their quotas
    (None: no cap). An admitted site is admitted again for free, so a Sybil page that makes many sites act on one
    user action gets at most the cap's worth."""

    impression_site_cap: int | None = None
    conversion_site_cap: int | None = None
    impression_sites: set[str] = field(default_factory=set)
    conversion_sites: dict[int, set[str]] = field(default_factory=dict)

    def admit_impression_site(self, site: str) -> bool:
        """Whether ``site`` may save an impression in this action (and admit it): no cap, it was admitted already,
        or fewer than the cap's sites were (PR #309's "check impression site allowance")."""
        admitted, cap = self.impression_sites, self.impression_site_cap
        if cap is not None and site not in admitted and len(admitted) >= cap:
            return False
        admitted.add(site)
        return True

    def consume_for_conversion_site(self, epoch: int, site: str, consume: Callable[[], bool]) -> bool:
        """PR #309's "check conversion site allowance", then ``consume()`` (the epoch's check-then-deduct): a
        conversion site not yet admitted in this action and epoch, when the cap's sites all are, is refused like an
        out-of-budget epoch without calling ``consume``; a site is admitted only when ``consume()`` succeeds (quotas
        are charged if and only if the privacy budget is)."""
        admitted, cap = self.conversion_sites.setdefault(epoch, set()), self.conversion_site_cap
        if cap is not None and site not in admitted and len(admitted) >= cap:
            return False
        if not consume():
            return False
        admitted.add(site)
        return True
