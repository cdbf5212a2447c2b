"""On-device budgeting policies: how a report pays for the device-epochs it reads (Cookie Monster paper Sec. 3.3, 6, 8.1).

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
* ``AttributionApi``, the W3C Attribution API's budgets (``api.bs``, "deduct
  privacy and safety budgets") over Cookie Monster's losses: besides the
  querier's per-site filter, each epoch's global filter and the quotas of the
  impression sites read (and, ``BigBird``, of the conversion site) pay, all
  of an epoch's filters or none (``core.mechanisms.global_filters``; Big
  Bird: Tholoniat et al., "Beyond Per-Querier Budgets").

The shape of a report (m entries, m + 1 with Appendix D bias detection) never
depends on budget state: a report that cannot pay is all zeros, not absent (no
budget side channel). Beam-free.
"""
from __future__ import annotations

import functools
import math
from abc import ABC, abstractmethod
from collections.abc import Container, Mapping, Sequence
from fractions import Fraction
from functools import lru_cache
from typing import TYPE_CHECKING, NamedTuple

from schemas.rows import AttributionRequest, Impression
from transforms.budgeting.mechanisms.attribution import attribution_histogram
from transforms.budgeting.mechanisms.privacy_filter import FilterTable
from transforms.core.mechanisms.budget_units import UNITS_PER_EPSILON, as_fraction
from transforms.core.mechanisms.global_filters import SITE, FilterId, FilterSet, UserActionContext, epoch_charges

if TYPE_CHECKING:  # pragma: no cover
    from transforms.budgeting.mechanisms.bias import BiasDetection


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
    """The individual privacy loss of one device-epoch for one report (Cookie Monster paper Thm. 4, Listing 1
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


class ReportOutcome(NamedTuple):
    """What generating one report did: its histogram (what the querier gets), and, SENSITIVE (evaluation
    only), the budget units it charged on the device and how many epochs of its window could not pay."""

    histogram: tuple
    charged_units: int
    dropped_epochs: int


class BudgetPolicy(ABC):
    """Generates one report's histogram from the relevant events of each epoch of its window, paying budget.

    With ``bias`` (Appendix D, ``bias.py``), the histogram gets coordinate 0, kappa times the count of epochs
    whose data was empty for the report (out of budget, or not in ``occupied``, the epochs in which the device
    holds data), and every occupied epoch pays the extra loss of Thm. 17."""

    name: str
    guarantee: str  # what a querier site's results are, in words (Cookie Monster paper Thm. 1 and Sec. 8.1)
    supports_bias_detection = True
    global_filters = False  # True: the device's filters are a ``FilterSet`` (per-site, global, quotas)

    @abstractmethod
    def generate_report(
        self,
        filters: FilterTable | FilterSet,
        querier_site: str,
        epochs: range,
        relevant_by_epoch: Mapping[int, Sequence[Impression]],
        request: AttributionRequest,
        value: float,
        occupied: Container[int] = (),
        bias: BiasDetection | None = None,
        action: UserActionContext | None = None,
    ) -> ReportOutcome:
        """The report; ``request.requested_epsilon`` is already resolved. ``action``: the user action of the
        conversion, under Big Bird's per-user-action cap (the Attribution API's policies)."""


def _with_count(histogram: tuple, bias: BiasDetection | None, empty_epochs: int) -> tuple:
    """``histogram`` with the Appendix D counting coordinate prepended when bias detection is on."""
    return histogram if bias is None else (bias.coordinate(empty_epochs), *histogram)


class CookieMonster(BudgetPolicy):
    """Seed 003 Code Listing 1 (Appendix A Alg. 1, GenerateReport) with the IDP losses of Thm. 4."""

    name = "cookie_monster"
    guarantee = ("individual device-epoch eps_G-DP per querier site (Cookie Monster paper Thm. 1, case 1: attribution functions "
                 "that use public events only through the report identifier; 2 eps_G otherwise, case 2)")

    def generate_report(self, filters, querier_site, epochs, relevant_by_epoch, request, value, occupied=(), bias=None,
                        action=None):
        single_epoch = len(epochs) == 1
        extra = 0 if bias is None else bias.extra_loss_units(request)
        kept: list[Impression] = []
        charged = dropped = empty = 0
        for epoch in epochs:
            events = relevant_by_epoch.get(epoch, ())  # Step 1
            loss = individual_loss_units(events, request, value, single_epoch)  # Step 2
            holds_data = bias is not None and epoch in occupied
            if holds_data:
                loss += extra  # Thm. 17: the counting coordinate's sensitivity
            if filters.try_consume((querier_site, epoch), loss):  # Step 3: out of budget drops the epoch's events
                kept.extend(events)
                charged += loss
                empty += not holds_data
            else:
                dropped += 1
                empty += 1
        histogram = attribution_histogram(kept, request, value)  # Step 4
        return ReportOutcome(_with_count(histogram, bias, empty), charged, dropped)


class AraLike(BudgetPolicy):
    """Seed 003 Sec. 8.1: every epoch of the window pays the requested epsilon; all or nothing."""

    name = "ara_like"
    guarantee = "device-epoch eps_G-DP per querier site (every epoch of a window pays the full requested epsilon)"

    def generate_report(self, filters, querier_site, epochs, relevant_by_epoch, request, value, occupied=(), bias=None,
                        action=None):
        full = scaled_loss_units(request.requested_epsilon, request.query_global_sensitivity, request.query_global_sensitivity)
        if bias is not None:
            full += bias.extra_loss_units(request)  # Thm. 17, charged like the rest: on every epoch
        if not filters.try_consume_all(((querier_site, epoch), full) for epoch in epochs):
            return ReportOutcome(_with_count((0.0,) * request.dimension, bias, len(epochs)), 0, len(epochs))
        events = [event for epoch in epochs for event in relevant_by_epoch.get(epoch, ())]
        empty = 0 if bias is None else sum(1 for epoch in epochs if epoch not in occupied)
        histogram = attribution_histogram(events, request, value)
        return ReportOutcome(_with_count(histogram, bias, empty), full * len(epochs), 0)


class IpaLike(BudgetPolicy):
    """Seed 003 Sec. 8.1: no on-device budget; the query pays centrally (``query.CentralBudget``). Nothing is
    ever dropped, so there is no bias to detect."""

    name = "ipa_like"
    guarantee = "device-epoch eps_G-DP per querier site, enforced centrally per epoch (off-device budgeting)"
    supports_bias_detection = False

    def generate_report(self, filters, querier_site, epochs, relevant_by_epoch, request, value, occupied=(), bias=None,
                        action=None):
        if bias is not None:
            raise ValueError("ipa_like drops no data: bias detection applies to on-device policies only")
        for epoch in epochs:
            filters.touch((querier_site, epoch))
        events = [event for epoch in epochs for event in relevant_by_epoch.get(epoch, ())]
        return ReportOutcome(attribution_histogram(events, request, value), 0, 0)


class AttributionApi(BudgetPolicy):
    """The W3C Attribution API's budgeting (``api.bs``, "do attribution and fill a histogram" and "deduct privacy
    and safety budgets") with Cookie Monster's individual losses (Thm. 4).

    For each epoch of the window with relevant impressions: the querier's per-site filter pays the epoch's
    individual loss; the epoch's global filter, and the quota of each impression site (publisher) whose impressions
    the epoch gives, pay the report's global bound (Thm. 4 case 3: ``api.bs``'s value deduction); with a
    conversion-site quota, so does the querier's quota. All of an epoch's filters pay or none does
    (``FilterSet.try_consume``); an epoch that cannot pay contributes no events. The filters' capacities are the
    configuration's (``MeasurementConfig.filter_capacities``). Under Big Bird's per-user-action cap, ``action``
    admits at most so many conversion sites per epoch of one user action (``UserActionContext``); another site's
    epoch is refused like one out of budget."""

    name = "attribution_api"
    guarantee = ("individual device-epoch eps_G-DP per conversion site, and globally (over every site together) "
                 "the global budget per device-epoch (Big Bird: Tholoniat et al., Sec. 4); impression-site quotas "
                 "bound what one site's impressions let conversions take from it")
    supports_bias_detection = False
    global_filters = True

    def generate_report(self, filters, querier_site, epochs, relevant_by_epoch, request, value, occupied=(), bias=None,
                        action=None):
        if bias is not None:
            raise ValueError(f"{self.name}: bias detection (Appendix D) is for the Cookie Monster family of policies")
        assert isinstance(filters, FilterSet)
        single_epoch = len(epochs) == 1
        bound = scaled_loss_units(request.requested_epsilon, request.report_global_sensitivity,
                                  request.query_global_sensitivity)
        kept: list[Impression] = []
        charged = dropped = 0
        for epoch in epochs:
            filters.touch(FilterId(SITE, epoch, querier_site))
            events = relevant_by_epoch.get(epoch)
            if not events:
                continue
            loss = individual_loss_units(events, request, value, single_epoch)
            charges = epoch_charges(epoch, querier_site, {event.publisher_site for event in events}, loss, bound)
            consume = functools.partial(filters.try_consume, charges)
            if consume() if action is None else action.consume_for_conversion_site(epoch, querier_site, consume):
                kept.extend(events)
                charged += loss
            else:
                dropped += 1
        return ReportOutcome(attribution_histogram(kept, request, value), charged, dropped)

    def public_charges(self, querier_site: str, epochs: range,
                       request: AttributionRequest) -> tuple[dict[FilterId, int], int]:
        """The most a report can cost each filter, from the request alone (Big Bird's batched scheduling decides on
        these, never on the device's data), and its size: per epoch of the window, the report's global bound (at
        least any epoch's individual loss, Thm. 4 case 3) to the querier's per-site filter, the global filter, its
        quota and the quotas of the impression sites the request names."""
        bound = scaled_loss_units(request.requested_epsilon, request.report_global_sensitivity,
                                  request.query_global_sensitivity)
        charges: dict[FilterId, int] = {}
        for epoch in epochs:
            charges.update(epoch_charges(epoch, querier_site, request.impression_sites, bound, bound))
        return charges, bound


class BigBird(AttributionApi):
    """``AttributionApi`` with Big Bird's conversion-site quota on by default (Tholoniat et al., "Beyond Per-Querier
    Budgets", Sec. 4: quotas on impression and conversion sites, so that Sybil sites cannot drain the global
    budget)."""

    name = "big_bird"
    guarantee = AttributionApi.guarantee + "; conversion-site quotas bound what one querier takes from it"


POLICIES: dict[str, BudgetPolicy] = {
    policy.name: policy for policy in (CookieMonster(), AraLike(), IpaLike(), AttributionApi(), BigBird())
}


def make_policy(name: str) -> BudgetPolicy:
    """The policy called ``name`` (``cookie_monster``, ``ara_like``, ``ipa_like``, ``attribution_api`` or
    ``big_bird``)."""
    try:
        return POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown budgeting policy {name!r}; expected one of {', '.join(POLICIES)}") from None
