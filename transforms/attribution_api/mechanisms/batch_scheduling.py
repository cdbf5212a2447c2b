"""Big Bird's batched scheduling of conversion reports on the W3C Attribution API's backend (Tholoniat et al., arXiv
2506.05290v1, "batched scheduling"; pdslib ``batch_pds.rs``, ``BatchPrivateDataService``), an option on top of
``Backend``: without it ``measureConversion`` answers at once, as ``api.bs`` says.

With it, a conversion is validated at once, registered with a number of scheduling attempts, and answered by a later
call to ``schedule_batch``, one per scheduling interval, whose three phases (initialization, online, batch) and
departures from pdslib are those of ``transforms.core.mechanisms.batch_scheduling``. A conversion's public charges
are the value deduction, in each epoch of its lookback, to its site's budget and quota, the global budget and the
quotas of the impression sites it names; when allocated it is attributed as of its own time, within the budgets the
backend has then. Beam-free.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from transforms.attribution_api.mechanisms.backend import Backend, Conversion
from transforms.core.mechanisms.batch_scheduling import BatchSchedule, Released
from transforms.core.mechanisms.global_filters import FilterId, epoch_charges


@dataclass(frozen=True)
class _Registered:
    """What an allocation needs: the conversion (None: registered while the API was disabled, answered with zeros)
    and its histogram's size."""

    conversion: Conversion | None
    histogram_size: int


@dataclass
class BatchScheduler:
    """pdslib's ``BatchPrivateDataService`` over one browser's ``Backend``; ``releases`` is n, the number of
    scheduling intervals over which each epoch's global budget is released."""

    backend: Backend
    releases: int
    schedule: BatchSchedule[_Registered, list[int]] = field(init=False)

    def __post_init__(self) -> None:
        self.schedule = BatchSchedule(self.backend.filters, self.releases)

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
            charges.update(epoch_charges(epoch, site, request.impression_sites, units, units))
        registered = _Registered(conversion if backend.enabled else None, request.histogram_size)
        return self.schedule.register(registered, window, charges, request.impression_sites, units, attempts)

    def schedule_batch(self) -> list[Released[list[int]]]:
        """One scheduling interval (pdslib ``schedule_batch``): the reports (histograms) whose conversions have no
        attempt left."""
        return self.schedule.schedule_batch(self._allocate)

    def _allocate(self, registered: _Registered) -> list[int]:
        """The conversion's histogram, attributed as of its own time within the backend's budgets now."""
        if registered.conversion is None:
            return [0] * registered.histogram_size
        conversion = registered.conversion
        return self.backend._histogram(self.backend._attribute(conversion), conversion.request)
