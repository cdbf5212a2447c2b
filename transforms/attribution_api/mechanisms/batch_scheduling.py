"""Big Bird's batched scheduling of conversion reports (Tholoniat et al., arXiv 2506.05290v1, "batched scheduling";
pdslib ``batch_pds.rs``, ``BatchPrivateDataService``), an option on top of ``Backend``: without it
``measureConversion`` answers at once, as ``api.bs`` says.

With it, a conversion is registered with a number of scheduling attempts and answered by a later call to
``schedule_batch``, one per scheduling interval, which runs three phases:

* initialization: each epoch any registered conversion reads gets the next slice of its global budget (the k-th
  release unlocks floor(k * capacity / n), the whole capacity after n intervals: pdslib's release filter), the
  impression-site quotas of the sites the conversions name are switched on, and the conversions left over from the
  previous interval try to be allocated, in their order;
* online: the conversions registered during the interval try, in their order of arrival;
* batch: the impression-site quotas are switched off (their consumption is still recorded, so they refuse again once
  back on) and the waiting conversions are ordered for fairness, the ones whose impression sites have drawn least
  from their quotas first, the smallest request breaking ties; the first that can be allocated is, and the rest are
  ordered again, until none can. A conversion on its last attempt is always allocated: the backend attributes it
  within whatever budget it has, a null report (all zeros) when it has none.

Whether a conversion "can be allocated" is decided on public filters only (pdslib's ``public_filters``): filters of
the same capacities charged, for every allocated conversion, the most its report can cost (the value deduction, in
each epoch of its lookback, to its site's budget and quota, the global budget and the quotas of the impression sites
it names), whatever its impressions; so scheduling depends on the conversions' parameters, never on the device's
data. The backend's own filters are charged what the attribution really costs, and get the same releases and quota
switches. Every report is released at the end of the interval in which its attempts run out, allocated early or
not, so its timing says nothing about the budgets.

Departures from pdslib: an epoch's global budget is released for any conversion that reads it, where pdslib releases
it only for epochs whose conversions name impression sites (a conversion naming none would never be allocated
there); the fairness order reads the public quotas' consumption (pdslib's reads capacity minus remaining of a quota
switched off, infinity minus infinity, which makes every site's zero and the order the smallest request first).
Beam-free.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from transforms.attribution_api.mechanisms.backend import Backend, Conversion
from transforms.core.mechanisms.global_filters import GLOBAL, IMPRESSION_QUOTA, FilterId, FilterSet, epoch_charges


@dataclass
class BatchedRequest:
    """pdslib's ``BatchedRequest``: a conversion, its public charges, and the scheduling attempts it has left."""

    request_id: int
    remaining_attempts: int
    conversion: Conversion | None  # None: registered while the API was disabled, answered with zeros
    histogram_size: int
    charges: dict[FilterId, int]  # what it costs the public filters at most
    impression_sites: frozenset[str]  # the impression sites it names (public)
    units: int  # its value deduction, the size of the request


@dataclass(frozen=True)
class BatchedReport:
    """A report and the conversion it answers, released once that conversion's attempts are over."""

    request_id: int
    histogram: list[int]


@dataclass
class BatchScheduler:
    """pdslib's ``BatchPrivateDataService`` over one browser's ``Backend``; ``releases`` is n, the number of
    scheduling intervals over which each epoch's global budget is released."""

    backend: Backend
    releases: int
    interval: int = 0  # the current scheduling interval
    pending: list[BatchedRequest] = field(default_factory=list)  # registered during the current interval
    waiting: list[BatchedRequest] = field(default_factory=list)  # left over from earlier intervals
    delayed: dict[int, list[BatchedReport]] = field(default_factory=dict)  # interval -> reports released at its end
    released: dict[int, int] = field(default_factory=dict)  # epoch -> how many releases it had
    sites_per_epoch: dict[int, set[str]] = field(default_factory=dict)  # the impression sites conversions name
    public: FilterSet = field(init=False)
    next_id: int = 1

    def __post_init__(self) -> None:
        if self.releases < 1:
            raise ValueError(f"the global budget is released over at least one interval, got {self.releases}")
        self.public = FilterSet(self.backend.limits.capacities)

    def measure_conversion(self, site: str, intermediary_site: str | None, options: Mapping[str, object],
                           attempts: int) -> int:
        """``measureConversion`` validated now and answered later (pdslib ``register_report_request``): the id of
        the report that ``schedule_batch`` releases at the end of the ``attempts``-th interval from now."""
        if attempts < 1:
            raise ValueError(f"a conversion has at least one scheduling attempt, got {attempts}")
        backend = self.backend
        backend._check_site(site)
        backend._check_site(intermediary_site)
        conversion = backend._conversion(site, frozenset({intermediary_site or site}), options)
        request = conversion.request
        _, units = backend._deductions(request, single_epoch=False, l1_norm=0)
        window = backend._window(conversion.now, request)[0] if backend.enabled else range(0)
        charges: dict[FilterId, int] = {}
        for epoch in window:
            self.released.setdefault(epoch, 0)
            self.sites_per_epoch.setdefault(epoch, set()).update(request.impression_sites)
            charges.update(epoch_charges(epoch, site, request.impression_sites, units, units))
        request_id, self.next_id = self.next_id, self.next_id + 1
        self.pending.append(BatchedRequest(request_id, attempts, conversion if backend.enabled else None,
                                           request.histogram_size, charges, request.impression_sites, units))
        return request_id

    def schedule_batch(self) -> list[BatchedReport]:
        """One scheduling interval (pdslib ``schedule_batch``): every conversion spends an attempt, the three
        phases run, and the reports whose conversions have no attempt left are released."""
        previous, self.waiting = self.waiting, []
        new, self.pending = self.pending, []
        for request in previous + new:
            request.remaining_attempts -= 1
        self._release_global_budgets()
        self._switch_impression_quotas(on=True)
        left = [request for request in previous + new if not self._allocate(request, final=False)]
        self._switch_impression_quotas(on=False)
        while left:
            ordered = self._fair_order(left)
            allocated = next((index for index, request in enumerate(ordered) if self._allocate(request, final=True)),
                             None)
            if allocated is None:
                left = ordered
                break
            left = ordered[:allocated] + ordered[allocated + 1:]
        self.waiting = left
        reports = self.delayed.pop(self.interval, [])
        self.interval += 1
        return reports

    def _release_global_budgets(self) -> None:
        """The next slice of each known epoch's global budget, in the public filters and the backend's."""
        capacity = self.backend.limits.global_privacy_budget_per_epoch
        for epoch in self.released:
            self.released[epoch] += 1
            unlocked = min(capacity, capacity * self.released[epoch] // self.releases)
            for filters in (self.public, self.backend.filters):
                filters.limits[FilterId(GLOBAL, epoch)] = unlocked

    def _switch_impression_quotas(self, on: bool) -> None:
        """The quotas of the impression sites conversions name, back to their capacity or without limit."""
        for epoch, sites in self.sites_per_epoch.items():
            for site in sites:
                quota = FilterId(IMPRESSION_QUOTA, epoch, site)
                for filters in (self.public, self.backend.filters):
                    if on:
                        filters.limits.pop(quota, None)
                    else:
                        filters.limits[quota] = None

    def _allocate(self, request: BatchedRequest, final: bool) -> bool:
        """pdslib ``try_allocate`` for one conversion: when the public filters can pay its charges (or, with
        ``final``, it is on its last attempt), attribute it, charge the public filters each on its own, and keep
        its report until its attempts are over."""
        last_attempt = final and request.remaining_attempts == 0
        if not last_attempt and self.public.out_of_budget(request.charges):
            return False
        if request.conversion is None:
            histogram = [0] * request.histogram_size
        else:
            histogram = self.backend._histogram(self.backend._attribute(request.conversion),
                                                request.conversion.request)
        for filter_id, units in request.charges.items():  # pdslib's allocation statistics: filter by filter
            self.public.try_consume({filter_id: units})
        self.delayed.setdefault(self.interval + request.remaining_attempts, []).append(
            BatchedReport(request.request_id, histogram))
        return True

    def _fair_order(self, requests: list[BatchedRequest]) -> list[BatchedRequest]:
        """pdslib ``sort_batch``: by the least any of a conversion's impression sites has drawn from its public
        quota (the most over the epochs of all waiting conversions), then by the conversion's size; a conversion
        naming no impression site last."""
        epochs = {filter_id.epoch for request in requests for filter_id in request.charges}
        sites = {site for request in requests for site in request.impression_sites}
        drawn = {site: max((self.public.consumed.get(FilterId(IMPRESSION_QUOTA, epoch, site), 0) for epoch in epochs),
                           default=0) for site in sites}
        return sorted(requests, key=lambda request: (
            min((drawn[site] for site in request.impression_sites), default=math.inf), request.units))
