"""On-device budgeting policies: how a report pays for the device-epochs it reads (seed 003 Sec. 3.3, 6, 8.1).

Every policy turns one conversion's request and the relevant impressions of
each epoch of its window into a fixed-shape histogram, paying budget from a
``FilterTable`` keyed by (querier site, epoch):

* ``CookieMonster``, Code Listing 1 / Appendix A Alg. 1 GenerateReport: for
  each epoch of the window, the individual privacy loss of Thm. 4
  (``individual_loss_units``) is ``try_consume``d from that epoch's filter;
  an epoch that cannot pay contributes no events, the others still do.
* ``AraLike``, Sec. 8.1 baseline: device-epoch filters with only the inherent
  on-device optimisation (devices without the conversion pay nothing): every
  epoch of the window pays the full requested epsilon, relevant events or
  not; if any epoch cannot pay, none pays and the report carries zero value.
* ``IpaLike``, Sec. 8.1 baseline: no device filters; the report uses all
  relevant events and the budget is paid centrally per (querier, epoch) when
  the query runs (``query.CentralBudget``). The device only records which
  epochs the report read, for budget statistics.

The shape of a report (m entries) never depends on budget state: a report
that cannot pay is all zeros, not absent (no budget side channel). Beam-free.
"""
from __future__ import annotations

import math
from abc import ABC, abstractmethod
from fractions import Fraction
from functools import lru_cache
from typing import Mapping, Sequence

from schemas.rows import AttributionRequest, Impression
from transforms.mechanisms.attribution import attribution_histogram
from transforms.mechanisms.noise import as_fraction
from transforms.mechanisms.privacy_filter import UNITS_PER_EPSILON, FilterTable


@lru_cache(maxsize=4096)
def _loss_per_unit_sensitivity(epsilon: float, query_sensitivity: float) -> Fraction:
    """epsilon / query global sensitivity, in budget units (the factor of Eq. 4 and the last line of Listing 1)."""
    return as_fraction(epsilon) * UNITS_PER_EPSILON / as_fraction(query_sensitivity)


@lru_cache(maxsize=4096)
def scaled_loss_units(epsilon: float, sensitivity: float, query_sensitivity: float) -> int:
    """ceil(epsilon * sensitivity / query global sensitivity) in units: Thm. 4 case 3 with the report global
    sensitivity; with ``sensitivity == query_sensitivity`` it is the full requested epsilon."""
    return math.ceil(_loss_per_unit_sensitivity(epsilon, query_sensitivity) * as_fraction(sensitivity))


def _histogram_loss_units(histogram: Sequence[float], request: AttributionRequest) -> int:
    """ceil(epsilon * ||histogram||_p / query global sensitivity) in units, computed exactly (for L2, with an
    integer square root of the exact rational square)."""
    factor = _loss_per_unit_sensitivity(request.requested_epsilon, request.query_global_sensitivity)
    if request.norm == "L1":
        return math.ceil(factor * sum(abs(Fraction(value)) for value in histogram))
    square = factor * factor * sum(Fraction(value) ** 2 for value in histogram)
    root = math.isqrt(square.numerator // square.denominator)
    while root * root * square.denominator < square.numerator:
        root += 1
    return root


def individual_loss_units(
    epoch_events: Sequence[Impression], request: AttributionRequest, value: float, single_epoch: bool
) -> int:
    """The individual privacy loss of one device-epoch for one report (seed 003 Thm. 4, Listing 1
    ``compute_individual_privacy_loss``), in budget units, rounded up.

    Case 1: no relevant events in the epoch: 0. Case 2: the window is this one
    epoch: the norm of the epoch's own attribution A(F_e) (its individual
    sensitivity ||A(F) - A(empty)||). Case 3: the report global sensitivity.
    Each times requested epsilon / query global sensitivity (Eq. 4 with
    Laplace scale sigma / sqrt 2 = query global sensitivity / epsilon).
    """
    if not epoch_events:
        return 0
    case_3 = scaled_loss_units(request.requested_epsilon, request.report_global_sensitivity, request.query_global_sensitivity)
    if single_epoch:
        # Thm. 4 bounds the individual sensitivity by the report's global one too: the clipped histogram's norm is
        # at most the cap as a double, which can exceed its decimal reading (used by case 3) in the last place.
        return min(case_3, _histogram_loss_units(attribution_histogram(epoch_events, request, value), request))
    return case_3


class BudgetPolicy(ABC):
    """Generates one report's histogram from the relevant events of each epoch of its window, paying budget."""

    name: str

    @abstractmethod
    def generate_report(
        self,
        filters: FilterTable,
        querier_site: str,
        epochs: range,
        relevant_by_epoch: Mapping[int, Sequence[Impression]],
        request: AttributionRequest,
        value: float,
    ) -> tuple:
        """The report's m-entry histogram; ``request.requested_epsilon`` is already resolved."""


class CookieMonster(BudgetPolicy):
    """Seed 003 Code Listing 1 (Appendix A Alg. 1, GenerateReport) with the IDP losses of Thm. 4."""

    name = "cookie_monster"

    def generate_report(self, filters, querier_site, epochs, relevant_by_epoch, request, value):
        single_epoch = len(epochs) == 1
        kept: list[Impression] = []
        for epoch in epochs:
            events = relevant_by_epoch.get(epoch, ())  # Step 1
            loss = individual_loss_units(events, request, value, single_epoch)  # Step 2
            if filters.try_consume((querier_site, epoch), loss):  # Step 3: out of budget drops the epoch's events
                kept.extend(events)
        return attribution_histogram(kept, request, value)  # Step 4


class AraLike(BudgetPolicy):
    """Seed 003 Sec. 8.1: every epoch of the window pays the requested epsilon; all or nothing."""

    name = "ara_like"

    def generate_report(self, filters, querier_site, epochs, relevant_by_epoch, request, value):
        full = scaled_loss_units(request.requested_epsilon, request.query_global_sensitivity, request.query_global_sensitivity)
        if not filters.try_consume_all(((querier_site, epoch), full) for epoch in epochs):
            return (0.0,) * request.dimension
        events = [event for epoch in epochs for event in relevant_by_epoch.get(epoch, ())]
        return attribution_histogram(events, request, value)


class IpaLike(BudgetPolicy):
    """Seed 003 Sec. 8.1: no on-device budget; the query pays centrally (``query.CentralBudget``)."""

    name = "ipa_like"

    def generate_report(self, filters, querier_site, epochs, relevant_by_epoch, request, value):
        for epoch in epochs:
            filters.touch((querier_site, epoch))
        events = [event for epoch in epochs for event in relevant_by_epoch.get(epoch, ())]
        return attribution_histogram(events, request, value)


POLICIES: dict[str, BudgetPolicy] = {policy.name: policy for policy in (CookieMonster(), AraLike(), IpaLike())}


def make_policy(name: str) -> BudgetPolicy:
    """The policy called ``name`` (``cookie_monster``, ``ara_like`` or ``ipa_like``)."""
    try:
        return POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown budgeting policy {name!r}; expected one of {', '.join(POLICIES)}") from None
