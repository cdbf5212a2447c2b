"""PAA-SR-Client: Private Aggregation with Shared Storage on the device (Ghazi et al. Sec. 2.1.3, Alg. 3).

There are no sources: every ad event an ad-tech's script registers on a device runs a shared-storage function

    pi : (storage, event) -> (new storage, key k, value v in {0, ..., Lambda_1})

on that ad-tech's part of the device's shared storage Xi_u (Shared Storage is partitioned by origin), stores
the new state, and sends exactly one report (Alg. 3, "Event Registration"):

* (r, k, v) if v > 0 and the budgets of the privacy unit (device, reporting origin, time window) allow it:
  L_0 + 1 <= Lambda_0 and L_1 + v <= Lambda_1, both then charged;
* a null report (r, ⊥, ⊥) otherwise.

Time windows are ``floor(t / 10 minutes)`` (footnote 5: PAA's current window); L_0 and L_1 start at 0 in each.
The storage is updated whether or not a report is sent, as in Alg. 3 (pi runs before the budget check).

The shipped pi is ``ReachCounting`` (the paper's example, Fig. 2): the state is the set of campaigns the
device has seen; the first event of a campaign contributes ``value`` (default Lambda_1 / 2, the paper's
value, so a device reports at most two first sightings per window) to the campaign's bucket, any later one
contributes 0 (a null report). Summed over devices, a bucket counts the devices reached, times ``value``.
Buckets are ``campaign_bucket``: the first 16 bytes of SHA-256 of the campaign id, big-endian, so a querier can
list the output domain of its own campaigns. No Beam import here.
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from schemas.rows import PaaEvent
from schemas.time_units import MICROS_PER_MINUTE
from transforms.core.mechanisms.noise import RandomSource
from transforms.summary_reports.mechanisms.aggregation import DEFAULT_L1
from transforms.summary_reports.mechanisms.contributions import ClientReport, ContributionBudget, ContributionLimits, make_report

WINDOW_MICROS = 10 * MICROS_PER_MINUTE  # the time windows T of Alg. 3 (Ghazi et al. footnote 5)
DEFAULT_REACH_VALUE = DEFAULT_L1 // 2  # Lambda_1 / 2, the paper's example


def window_of(time_micros: int) -> int:
    """The 10-minute window an event time falls in."""
    return time_micros // WINDOW_MICROS


def campaign_bucket(campaign_id: str) -> int:
    """The 128-bit bucket of a campaign: the first 16 bytes of SHA-256 of its UTF-8 id, big-endian."""
    return int.from_bytes(hashlib.sha256(campaign_id.encode("utf-8")).digest()[:16], "big")


class SharedStorageFunction(Protocol):
    """pi of Alg. 3, on one reporting origin's shared storage of one device."""

    def initial(self) -> Any:
        """The state of an empty storage."""

    def __call__(self, storage: Any, event: PaaEvent) -> tuple[Any, int, int]:
        """(new storage, key, value) for ``event``; the storage passed in is not modified."""


@dataclass(frozen=True)
class ReachCounting:
    """Reach per campaign (Ghazi et al. Sec. 2.1.3 and Fig. 2): ``value`` the first time the device sees a campaign,
    0 afterwards, to the campaign's bucket. The storage is the frozenset of campaigns seen."""

    value: int = DEFAULT_REACH_VALUE

    def __post_init__(self) -> None:
        if isinstance(self.value, bool) or not isinstance(self.value, int) or self.value < 1:
            raise ValueError(f"the reach value must be a positive integer, got {self.value!r}")

    def initial(self) -> frozenset:
        return frozenset()

    def __call__(self, storage: frozenset, event: PaaEvent) -> tuple[frozenset, int, int]:
        bucket = campaign_bucket(event.campaign_id)
        if event.campaign_id in storage:
            return storage, bucket, 0
        return storage | {event.campaign_id}, bucket, self.value


@dataclass
class PaaDevice:
    """One device's state: the shared storage of each reporting origin and the budgets of the live windows,
    keyed (reporting origin, window)."""

    storage: dict = field(default_factory=dict)
    budgets: dict = field(default_factory=dict)


def event_order(event: PaaEvent) -> tuple:
    """Replay order: event time, then the id."""
    return (event.event_time_micros, event.event_id)


class PaaSummaryClient:
    """PAA-SR-Client (Alg. 3) with budgets ``limits`` and shared-storage function ``pi``, as a ``SummaryClient``."""

    def __init__(self, pi: SharedStorageFunction = ReachCounting(), limits: ContributionLimits = ContributionLimits()) -> None:
        self.pi = pi
        self.limits = limits
        self.refused = 0

    def new_state(self) -> PaaDevice:
        return PaaDevice()

    def order(self, event: PaaEvent) -> tuple:
        return event_order(event)

    def event(self, device_id: str, device: PaaDevice, event: PaaEvent, source: RandomSource) -> ClientReport:
        """Alg. 3, "Event Registration": run pi, store its state, report (k, v) if v > 0 and within budget."""
        origin = event.reporting_origin
        storage = device.storage.get(origin)
        device.storage[origin], key, value = self.pi(self.pi.initial() if storage is None else storage, event)
        found = []
        if value > 0:
            unit = (origin, window_of(event.event_time_micros))
            budget = device.budgets.get(unit)
            if budget is None:
                budget = device.budgets[unit] = ContributionBudget()
            if budget.charge([value], self.limits):
                found = [(key, value)]
            else:
                self.refused += 1
        return make_report(
            source, ("paa", device_id, event.event_id), api=event.api, reporting_origin=origin, destination=None,
            event_time_micros=event.event_time_micros, contributions=found,
        )

    def replay(
        self, device_id: str, events: Iterable[PaaEvent], state: PaaDevice, source: RandomSource
    ) -> Iterator[ClientReport]:
        for event in events:
            yield self.event(device_id, state, event, source)

    def forget_before(self, state: PaaDevice, time_micros: int) -> None:
        """Drop the budgets of windows that ended by ``time_micros`` (the storage is kept: it never expires)."""
        current = window_of(time_micros)
        state.budgets = {unit: budget for unit, budget in state.budgets.items() if unit[1] >= current}
