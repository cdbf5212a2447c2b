"""Big Bird's batched scheduling of report requests over one device's filters (Tholoniat et al., arXiv
2506.05290v1, "batched scheduling"; pdslib ``batch_pds.rs``, ``BatchPrivateDataService``), whatever computes the
reports: the W3C Attribution API's backend (``transforms.attribution_api.mechanisms.batch_scheduling``) gives each
request its charges and attributes it when it is allocated.

A request is registered with its public charges (the most its report can cost, per filter of each epoch of its
window, whatever the device's data), the impression sites it names, its size and a number of scheduling attempts;
``schedule_batch`` runs one scheduling interval in three phases:

* initialization: each epoch any registered request reads gets the next slice of its global budget (the k-th
  release unlocks floor(k * capacity / n), the whole capacity after n intervals: pdslib's release filter), the
  impression-site quotas of the sites the requests name are switched on, and the requests left over from the
  previous interval try to be allocated, in their order;
* online: the requests registered during the interval try, in their order of arrival;
* batch: the impression-site quotas are switched off (their consumption is still recorded, so they refuse again once
  back on) and the waiting requests are ordered for fairness, the ones whose impression sites have drawn least from
  their quotas first, the smallest request breaking ties; the first that can be allocated is, and the rest are
  ordered again, until none can. A request on its last attempt is always allocated: the caller computes it within
  whatever budget the device has (a null report when it has none).

Whether a request "can be allocated" is decided on public filters only (pdslib's ``public_filters``), charged for
every allocated request its public charges; so scheduling depends on the requests' parameters, never on the
device's data. The device's own filters are charged by the caller's allocation, and get the same releases and quota
switches. Every result is released at the end of the interval in which its attempts run out, allocated early or
not, so its timing says nothing about the budgets.

Departures from pdslib: an epoch's global budget is released for any request that reads it, where pdslib releases
it only for epochs whose requests name impression sites (a request naming none would never be allocated there); the
fairness order reads the public quotas' consumption (pdslib's reads capacity minus remaining of a quota switched off,
infinity minus infinity, which makes every site's zero and the order the smallest request first). Beam-free.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from transforms.core.mechanisms.global_filters import GLOBAL, IMPRESSION_QUOTA, FilterId, FilterSet

Payload = TypeVar("Payload")
Result = TypeVar("Result")


@dataclass
class ScheduledRequest(Generic[Payload]):
    """pdslib's ``BatchedRequest``: what the caller will compute (``payload``), its public charges, and the
    scheduling attempts it has left."""

    request_id: int
    remaining_attempts: int
    payload: Payload
    charges: dict[FilterId, int]  # what it costs the public filters at most
    impression_sites: frozenset[str]  # the impression sites it names (public)
    units: int  # its size (the largest of its charges per epoch)


@dataclass(frozen=True)
class Released(Generic[Result]):
    """A request's result, released once its attempts are over."""

    request_id: int
    result: Result


@dataclass
class BatchSchedule(Generic[Payload, Result]):
    """pdslib's ``BatchPrivateDataService`` over one device's ``filters``; ``releases`` is n, the number of
    scheduling intervals over which each epoch's global budget is released."""

    filters: FilterSet
    releases: int
    interval: int = 0  # the current scheduling interval
    pending: list[ScheduledRequest[Payload]] = field(default_factory=list)  # registered during the interval
    waiting: list[ScheduledRequest[Payload]] = field(default_factory=list)  # left over from earlier intervals
    delayed: dict[int, list[Released[Result]]] = field(default_factory=dict)  # interval -> released at its end
    released: dict[int, int] = field(default_factory=dict)  # epoch -> how many releases it had
    sites_per_epoch: dict[int, set[str]] = field(default_factory=dict)  # the impression sites requests name
    public: FilterSet = field(init=False)
    next_id: int = 1

    def __post_init__(self) -> None:
        if self.releases < 1:
            raise ValueError(f"the global budget is released over at least one interval, got {self.releases}")
        self.public = FilterSet(self.filters.capacities)

    def register(self, payload: Payload, epochs: Iterable[int], charges: dict[FilterId, int],
                 impression_sites: frozenset[str], units: int, attempts: int) -> int:
        """A request reading ``epochs`` (pdslib ``register_report_request``): the id of the result that
        ``schedule_batch`` releases at the end of the ``attempts``-th interval from now."""
        if attempts < 1:
            raise ValueError(f"a request has at least one scheduling attempt, got {attempts}")
        for epoch in epochs:
            self.released.setdefault(epoch, 0)
            self.sites_per_epoch.setdefault(epoch, set()).update(impression_sites)
        request_id, self.next_id = self.next_id, self.next_id + 1
        self.pending.append(ScheduledRequest(request_id, attempts, payload, charges, impression_sites, units))
        return request_id

    def schedule_batch(self, allocate: Callable[[Payload], Result]) -> list[Released[Result]]:
        """One scheduling interval (pdslib ``schedule_batch``): every request spends an attempt, the three phases
        run (``allocate`` computes an allocated request's result, charging the device's filters), and the results
        whose requests have no attempt left are released."""
        previous, self.waiting = self.waiting, []
        new, self.pending = self.pending, []
        for request in previous + new:
            request.remaining_attempts -= 1
        self._release_global_budgets()
        self._switch_impression_quotas(on=True)
        left = [request for request in previous + new if not self._allocate(request, allocate, final=False)]
        self._switch_impression_quotas(on=False)
        while left:
            ordered = self._fair_order(left)
            allocated = next((index for index, request in enumerate(ordered)
                              if self._allocate(request, allocate, final=True)), None)
            if allocated is None:
                left = ordered
                break
            left = ordered[:allocated] + ordered[allocated + 1:]
        self.waiting = left
        results = self.delayed.pop(self.interval, [])
        self.interval += 1
        return results

    @property
    def outstanding(self) -> bool:
        """Whether any request is registered, waiting or holding a result: its intervals must each run."""
        return bool(self.pending or self.waiting or self.delayed)

    @property
    def idle(self) -> bool:
        """Whether the schedule keeps nothing but its interval: no request outstanding, no epoch released, nothing
        charged to the public filters."""
        return not (self.outstanding or self.released or self.public.consumed)

    def run_until(self, interval: int | None, allocate: Callable[[Payload], Result]) -> list[Released[Result]]:
        """Every scheduling interval before ``interval`` (None: until no request is outstanding), in order. An
        interval with no request outstanding only releases global budget, which ``_release_global_budgets`` does
        for a whole idle stretch at once: the same state as that many empty ``schedule_batch`` calls."""
        results: list[Released[Result]] = []
        while self.outstanding if interval is None else self.interval < interval:
            if self.outstanding:
                results += self.schedule_batch(allocate)
            else:
                assert interval is not None
                self._release_global_budgets(interval - self.interval)
                self.interval = interval
        return results

    def oldest_epoch(self) -> int | None:
        """The oldest epoch an outstanding request reads (its filters and data must be kept), or None."""
        return min((filter_id.epoch for request in self.pending + self.waiting for filter_id in request.charges),
                   default=None)

    def forget_before(self, epoch: int) -> None:
        """Drop what the schedule keeps of epochs before ``epoch`` (their releases, named sites, public filters and
        both filter sets' own capacities), once no request can read them any more."""
        oldest = self.oldest_epoch()
        if oldest is not None and oldest < epoch:
            raise ValueError(f"epoch {oldest} is still read by a scheduled request: cannot forget before {epoch}")
        for old in [known for known in self.released if known < epoch]:
            del self.released[old]
        for old in [known for known in self.sites_per_epoch if known < epoch]:
            del self.sites_per_epoch[old]
        for table in (self.public.consumed, self.public.limits, self.filters.limits):
            for filter_id in [filter_id for filter_id in table if filter_id.epoch < epoch]:
                del table[filter_id]

    def _release_global_budgets(self, count: int = 1) -> None:
        """The next ``count`` slices of each known epoch's global budget, in the public filters and the device's
        (a count past n unlocks nothing more, so it is kept at n). An epoch released in full has no capacity of
        its own (its kind's is the whole budget), so it costs nothing more here, and a state read back without
        the filters' own capacities is the same as the one written."""
        capacity, releases = self.filters.capacities.global_, self.releases
        if capacity is None:
            return
        for epoch, released in self.released.items():
            if released == releases:
                continue
            released = self.released[epoch] = min(releases, released + count)
            global_id = FilterId(GLOBAL, epoch)
            for filters in (self.public, self.filters):
                if released == releases:
                    filters.limits.pop(global_id, None)
                else:
                    filters.limits[global_id] = capacity * released // releases

    def _switch_impression_quotas(self, on: bool) -> None:
        """The quotas of the impression sites requests name, back to their capacity or without limit."""
        for epoch, sites in self.sites_per_epoch.items():
            for site in sites:
                quota = FilterId(IMPRESSION_QUOTA, epoch, site)
                for filters in (self.public, self.filters):
                    if on:
                        filters.limits.pop(quota, None)
                    else:
                        filters.limits[quota] = None

    def _allocate(self, request: ScheduledRequest[Payload], allocate: Callable[[Payload], Result],
                  final: bool) -> bool:
        """pdslib ``try_allocate`` for one request: when the public filters can pay its charges (or, with
        ``final``, it is on its last attempt), compute it, charge the public filters each on its own, and keep its
        result until its attempts are over."""
        last_attempt = final and request.remaining_attempts == 0
        if not last_attempt and self.public.out_of_budget(request.charges):
            return False
        result = allocate(request.payload)
        self.public.consume_each(request.charges)  # pdslib's allocation statistics: filter by filter
        self.delayed.setdefault(self.interval + request.remaining_attempts, []).append(
            Released(request.request_id, result))
        return True

    def _fair_order(self, requests: list[ScheduledRequest[Payload]]) -> list[ScheduledRequest[Payload]]:
        """pdslib ``sort_batch``: by the least any of a request's impression sites has drawn from its public quota
        (the most over the epochs of all waiting requests), then by the request's size; a request naming no
        impression site last."""
        epochs = {filter_id.epoch for request in requests for filter_id in request.charges}
        sites = {site for request in requests for site in request.impression_sites}
        drawn = {site: max((self.public.consumed.get(FilterId(IMPRESSION_QUOTA, epoch, site), 0) for epoch in epochs),
                           default=0) for site in sites}
        return sorted(requests, key=lambda request: (
            min((drawn[site] for site in request.impression_sites), default=math.inf), request.units))
