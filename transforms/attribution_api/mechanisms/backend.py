"""One browser's Attribution API state and operations (W3C Attribution API Level 1, ``api.bs``; its reference
implementation is ``impl/src/backend.ts`` in github.com/w3c/attribution).

What it holds: the impressions saved by ``save_impression``; its privacy filters (``transforms.core.mechanisms.
global_filters``, in integer micro-epsilon): the per-site privacy budget of every (epoch, conversion site), the global
budget of every epoch and the quota of every (epoch, impression site) (Big Bird: Tholoniat et al., "Beyond
Per-Querier Budgets", Sec. 4), with Big Bird's conversion-site quota as an option; the epoch start time, chosen at
random on first use; when browsing history was last cleared; with Big Bird's per-user-action cap, which sites
activated a quota within each user action. ``measure_conversion`` validates its options, finds the impressions that
match in each epoch of the lookback window, deducts each epoch's budgets atomically (all of an epoch's checks pass
before any filter changes) and fills the histogram by last-n-touch attribution. Big Bird's other options live beside
it: passive privacy loss here, one deduction for several intermediaries in ``cross_report``, batched scheduling in
``batch_scheduling``.

Time is in seconds since the Unix epoch (exact rationals). Budget deductions are computed exactly: ``ceil(sensitivity
* epsilon / (2 * maxValue) * 10**6)`` with ``epsilon`` as the decimal it was given, where the reference computes in
doubles. Where ``backend.ts`` differs from the specification this module follows the specification
(docs/attribution-api.md lists the differences): a global budget not yet in its store is deducted from its default
(``backend.ts`` reads a missing entry as undefined, after which that epoch's global budget never refuses again).
The epoch start time's hour is rounded down as ``backend.ts`` does (``api.bs``: towards zero; the same for every
moment after 1970).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from transforms.attribution_api.mechanisms.credit import fairly_allocate_credit
from transforms.core.mechanisms.global_filters import (
    SITE,
    FilterCapacities,
    FilterId,
    FilterSet,
    UserActionContext,
    epoch_charges,
)

MICRO = 1_000_000  # budgets are integers of 1e-6 epsilon
SECONDS_PER_DAY = 86_400
SECONDS_PER_HOUR = 3_600
DEFAULT_IMPRESSION_LIFETIME_DAYS = 30
DEFAULT_CONVERSION_EPSILON = Fraction(1)
DEFAULT_CONVERSION_VALUE = 1
DEFAULT_CONVERSION_MAX_VALUE = 1
MAX_CONVERSION_EPSILON = 4294
UNSIGNED_LONG_MAX = 2**32 - 1


class AttributionError(Exception):
    """An error the API's methods throw; ``name`` is the JavaScript error's (``RangeError``, ...)."""

    name = "Error"


class AttributionRangeError(AttributionError):
    name = "RangeError"


class AttributionReferenceError(AttributionError):
    name = "ReferenceError"


class AttributionSyntaxError(AttributionError):
    """A ``DOMException`` named ``SyntaxError``: a site that is not a registrable domain."""

    name = "SyntaxError"


@dataclass(frozen=True)
class ApiLimits:
    """The implementation-defined values (``api.bs``, "Implementation-defined values"; the e2e suite's CONFIG.json)."""

    aggregation_services: Mapping[str, str]
    privacy_budget_epoch_days: int
    per_site_privacy_budget: int  # micro-epsilon per (epoch, conversion site)
    global_privacy_budget_per_epoch: int  # micro-epsilon per epoch
    impression_site_quota_per_epoch: int  # micro-epsilon per (epoch, impression site)
    max_conversion_sites_per_impression: int
    max_conversion_callers_per_impression: int
    max_impression_sites_for_conversion: int
    max_impression_callers_for_conversion: int
    max_credit_size: int
    max_match_values: int
    max_lookback_days: int
    max_histogram_size: int
    # Big Bird's conversion-site quota (pdslib's TriggerQuota): micro-epsilon of the global budget each (epoch,
    # conversion site) may consume; None, the specification's behaviour, has none
    conversion_site_quota_per_epoch: int | None = None
    # Big Bird's per-user-action cap on quota activations (Sec. 4, Alg. 2; w3c/attribution PR #309's "impression
    # site count cap" and "conversion site count cap"): how many distinct impression sites may save impressions, and
    # per epoch how many distinct conversion sites may draw from their quotas, within one user action; None, the
    # specification's behaviour, caps nothing
    impression_site_count_cap: int | None = None
    conversion_site_count_cap: int | None = None

    @property
    def epoch_seconds(self) -> int:
        return self.privacy_budget_epoch_days * SECONDS_PER_DAY

    @property
    def capacities(self) -> FilterCapacities:
        """The capacities of the four kinds of filter (``global_filters``)."""
        return FilterCapacities(self.per_site_privacy_budget, self.global_privacy_budget_per_epoch,
                                self.impression_site_quota_per_epoch, self.conversion_site_quota_per_epoch)


@dataclass(frozen=True)
class Delegate:
    """What the browser supplies: the clock, its random choices, what a registrable domain is, and (for Big Bird's
    per-user-action cap) the current user action."""

    now: Callable[[], Fraction]  # seconds since the Unix epoch
    epoch_start_fraction: Callable[[], Fraction]  # in [0, 1): where in an epoch the epoch start time falls
    credit_fraction: Callable[[], Fraction]  # in [0, 1]: fairly allocate credit's random double
    site_of: Callable[[str], str | None]  # the registrable domain of a host (private suffixes allowed), or None
    # PR #309's "current user action context": an identifier of the user action (a click, a navigation) the call
    # belongs to, which the browser chooses; needed only with a count cap
    user_action: Callable[[], Hashable] | None = None


@dataclass
class Impression:
    match_value: int
    impression_site: str
    intermediary_site: str | None
    conversion_sites: set[str]
    conversion_callers: set[str]
    timestamp: Fraction
    lifetime_seconds: int
    histogram_index: int
    priority: int


@dataclass(frozen=True)
class ConversionRequest:
    """``measureConversion``'s options, validated."""

    aggregation_service: str
    epsilon: Fraction
    histogram_size: int
    lookback_seconds: int
    match_values: frozenset[int]
    impression_sites: frozenset[str]
    impression_callers: frozenset[str]
    credit: tuple[Fraction, ...]
    value: int
    max_value: int


@dataclass(frozen=True)
class Conversion:
    """One ``measureConversion`` call, validated: its site, the conversion callers the impressions must allow (the
    intermediary or the site; for ``cross_report``, every intermediary), its time, options and user action. It is
    attributed as of its own time, at once or (``batch_scheduling``) later."""

    site: str
    callers: frozenset[str]
    now: Fraction
    request: ConversionRequest
    context: UserActionContext | None  # None: no conversion-site count cap


def _unsigned_long(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= UNSIGNED_LONG_MAX:
        raise TypeError(f"{name} must be an unsigned long, got {value!r}")
    return value


def _long(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not -(2**31) <= value < 2**31:
        raise TypeError(f"{name} must be a long, got {value!r}")
    return value


def _double(value: object, name: str) -> Fraction:
    """A finite number as the exact decimal it was written as."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TypeError(f"{name} must be a finite number, got {value!r}")
    return Fraction(str(value)) if isinstance(value, float) else Fraction(value)


@dataclass
class Backend:
    """One browser's Attribution API (``api.bs``): impressions, budgets and the operations on them."""

    limits: ApiLimits
    delegate: Delegate
    enabled: bool = True
    impressions: list[Impression] = field(default_factory=list)
    epoch_start_time: Fraction | None = None
    last_browsing_history_clear: Fraction | None = None
    user_actions: dict[Hashable, UserActionContext] = field(default_factory=dict)  # PR #309's context store
    filters: FilterSet = field(init=False)  # every budget and quota, created on first use

    def __post_init__(self) -> None:
        self.filters = FilterSet(self.limits.capacities)
        capped = (self.limits.impression_site_count_cap, self.limits.conversion_site_count_cap) != (None, None)
        if capped and self.delegate.user_action is None:
            raise ValueError("the per-user-action cap needs the delegate's current user action")

    def _user_action(self) -> UserActionContext:
        """PR #309's "current user action context": the entry of the delegate's current user action."""
        assert self.delegate.user_action is not None  # checked in __post_init__ whenever a cap asks for it
        return self.user_actions.setdefault(self.delegate.user_action(), UserActionContext(
            self.limits.impression_site_count_cap, self.limits.conversion_site_count_cap))

    # --- sites
    def _parse_site(self, host: str) -> str:
        site = self.delegate.site_of(host)
        if site is None or site == "localhost" or site.endswith(".localhost"):
            raise AttributionSyntaxError(f"invalid site {host}")
        return site

    def _check_site(self, host: str | None) -> None:
        if host is not None and self._parse_site(host) != host:
            raise AttributionSyntaxError(f"{host} is not a site")

    def _parse_sites(self, hosts: Iterable[str], label: str, limit: float) -> set[str]:
        hosts = list(hosts)
        if len(hosts) > limit:
            raise AttributionRangeError(f"number of values in {label} exceeds limit of {limit}")
        return {self._parse_site(host) for host in hosts}

    # --- epochs
    def current_epoch(self, t: Fraction) -> int:
        """``get the current epoch``: the epoch start time is a random hour in the epoch before the first use."""
        period = self.limits.epoch_seconds
        if self.epoch_start_time is None:
            fraction = self.delegate.epoch_start_fraction()
            if not 0 <= fraction < 1:
                raise ValueError(f"the epoch start fraction must be in [0, 1), got {fraction}")
            rand = t - fraction * period
            # api.bs rounds the hour towards zero, backend.ts down: the same after 1970, but the e2e cases' clocks
            # start at 0 (their random start lies before 1970) and need rounding down
            self.epoch_start_time = Fraction(math.floor(rand / SECONDS_PER_HOUR) * SECONDS_PER_HOUR)
        return math.floor((t - self.epoch_start_time) / period)

    def _start_epoch(self, now: Fraction) -> int:
        start = self.current_epoch(now - self.limits.max_lookback_days * SECONDS_PER_DAY)
        if self.last_browsing_history_clear is not None:
            start = max(start, self.current_epoch(self.last_browsing_history_clear) + 1)
        return start

    def _window(self, now: Fraction, request: ConversionRequest) -> tuple[range, bool]:
        """The epochs a conversion at ``now`` may read (from the starting epoch, and not before its lookback, where
        no impression can match, to the current one) and whether its lookback lies in one epoch."""
        current = self.current_epoch(now)
        earliest = self.current_epoch(now - request.lookback_seconds)
        return range(max(self._start_epoch(now), earliest), current + 1), current == earliest

    # --- saveImpression
    def save_impression(self, site: str, intermediary_site: str | None, options: Mapping[str, object]) -> None:
        """``saveImpression``: validate, then (when enabled) store the impression."""
        self._check_site(site)
        self._check_site(intermediary_site)
        histogram_index = _unsigned_long(options.get("histogramIndex"), "histogramIndex")
        match_value = _unsigned_long(options.get("matchValue", 0), "matchValue")
        lifetime_days = _unsigned_long(options.get("lifetimeDays", DEFAULT_IMPRESSION_LIFETIME_DAYS), "lifetimeDays")
        priority = _long(options.get("priority", 0), "priority")
        timestamp = self.delegate.now()
        if histogram_index >= self.limits.max_histogram_size:
            raise AttributionRangeError(
                f"histogramIndex must be less than maximum histogram size ({self.limits.max_histogram_size})")
        if lifetime_days == 0:
            raise AttributionRangeError("lifetimeDays must be positive")
        lifetime_days = min(lifetime_days, self.limits.max_lookback_days)
        conversion_sites = self._parse_sites(_strings(options.get("conversionSites", [])), "conversionSites",
                                             self.limits.max_conversion_sites_per_impression)
        conversion_callers = self._parse_sites(_strings(options.get("conversionCallers", [])), "conversionCallers",
                                               self.limits.max_conversion_callers_per_impression)
        if not self.enabled:
            return
        cap = self.limits.impression_site_count_cap
        # Big Bird's cap: an impression site past it in this user action saves nothing
        if cap is not None and not self._user_action().admit_impression_site(site):
            return
        self.impressions.append(Impression(match_value, site, intermediary_site, conversion_sites, conversion_callers,
                                           timestamp, lifetime_days * SECONDS_PER_DAY, histogram_index, priority))

    # --- measureConversion
    def _validate(self, options: Mapping[str, object]) -> ConversionRequest:
        epsilon = _double(options.get("epsilon", 1), "epsilon")
        histogram_size = _unsigned_long(options.get("histogramSize"), "histogramSize")
        lookback_days = _unsigned_long(options.get("lookbackDays", self.limits.max_lookback_days), "lookbackDays")
        credit = tuple(_double(item, "credit") for item in _list(options.get("credit", [1]), "credit"))
        max_value = _unsigned_long(options.get("maxValue", DEFAULT_CONVERSION_MAX_VALUE), "maxValue")
        match_values = [_unsigned_long(item, "matchValues") for item in _list(options.get("matchValues", []),
                                                                               "matchValues")]
        value = _unsigned_long(options.get("value", DEFAULT_CONVERSION_VALUE), "value")
        service = options.get("aggregationService")
        if service not in self.limits.aggregation_services:
            raise AttributionReferenceError("unknown aggregation service")
        if not 0 < epsilon <= MAX_CONVERSION_EPSILON:
            raise AttributionRangeError(f"epsilon must be in the range (0, {MAX_CONVERSION_EPSILON}]")
        if not 1 <= histogram_size <= self.limits.max_histogram_size:
            raise AttributionRangeError(f"histogramSize must be in the range [1, {self.limits.max_histogram_size}]")
        if value == 0:
            raise AttributionRangeError("value must be positive")
        if value > max_value:
            raise AttributionRangeError("value must be <= maxValue")
        if not 1 <= len(credit) <= self.limits.max_credit_size:
            raise AttributionRangeError(f"credit size must be in the range [1, {self.limits.max_credit_size}]")
        if any(item <= 0 for item in credit):
            raise AttributionRangeError("credit must be positive")
        lookback_days = min(lookback_days, self.limits.max_lookback_days)
        if lookback_days == 0:
            raise AttributionRangeError("lookbackDays must be positive")
        if len(match_values) > self.limits.max_match_values:
            raise AttributionRangeError(f"number of values in matchValues exceeds limit of {self.limits.max_match_values}")
        impression_sites = self._parse_sites(_strings(options.get("impressionSites", [])), "impressionSites",
                                             self.limits.max_impression_sites_for_conversion)
        impression_callers = self._parse_sites(_strings(options.get("impressionCallers", [])), "impressionCallers",
                                               self.limits.max_impression_callers_for_conversion)
        return ConversionRequest(str(service), epsilon, histogram_size, lookback_days * SECONDS_PER_DAY,
                                 frozenset(match_values), frozenset(impression_sites), frozenset(impression_callers),
                                 credit, value, max_value)

    def measure_conversion(self, site: str, intermediary_site: str | None, options: Mapping[str, object]) -> list[int]:
        """``measureConversion``: the conversion's histogram (all zeros when disabled or when nothing matched
        within budget)."""
        self._check_site(site)
        self._check_site(intermediary_site)
        conversion = self._conversion(site, frozenset({intermediary_site or site}), options)
        if not self.enabled:
            return [0] * conversion.request.histogram_size
        return self._histogram(self._attribute(conversion), conversion.request)

    def _conversion(self, site: str, callers: frozenset[str], options: Mapping[str, object]) -> Conversion:
        """``measureConversion``'s first steps (its sites already checked): the time, the validated options and,
        with the conversion-site count cap, the current user action."""
        now = self.delegate.now()
        request = self._validate(options)
        context = None if self.limits.conversion_site_count_cap is None else self._user_action()
        return Conversion(site, callers, now, request, context)

    def _matches(self, conversion: Conversion, impression: Impression) -> bool:
        """``common matching logic``: whether the conversion may be attributed to ``impression``; one saved after the
        conversion (which batched scheduling attributes later, as of its own time) never is."""
        now, request, site = conversion.now, conversion.request, conversion.site
        if impression.timestamp > now:
            return False
        if now > impression.timestamp + impression.lifetime_seconds:
            return False
        if now > impression.timestamp + request.lookback_seconds:
            return False
        if impression.conversion_sites and site not in impression.conversion_sites:
            return False
        if impression.conversion_callers and not conversion.callers <= impression.conversion_callers:
            return False
        if request.match_values and impression.match_value not in request.match_values:
            return False
        if request.impression_sites and impression.impression_site not in request.impression_sites:
            return False
        impression_caller = impression.intermediary_site or impression.impression_site
        return not request.impression_callers or impression_caller in request.impression_callers

    def _matches_by_epoch(self, conversion: Conversion, window: range) -> dict[int, list[Impression]]:
        """The matching impressions of each epoch of ``window`` that has any, in the order they were saved; one pass
        over the impressions."""
        found: dict[int, list[Impression]] = {}
        for impression in self.impressions:
            if self._matches(conversion, impression):
                epoch = self.current_epoch(impression.timestamp)
                if epoch in window:
                    found.setdefault(epoch, []).append(impression)
        return {epoch: found[epoch] for epoch in window if epoch in found}

    def _attribute(self, conversion: Conversion) -> list[Impression]:
        """``do attribution and fill a histogram`` up to the histogram: the impressions of the epochs whose budgets
        paid, every filter charged."""
        return [impression for impressions in self._epochs_within_budget(conversion, charge_site=True).values()
                for impression in impressions]  # each impression lies in one epoch: the epochs' sets are disjoint

    def _epochs_within_budget(self, conversion: Conversion, charge_site: bool) -> dict[int, list[Impression]]:
        """The matching impressions of each epoch of the window whose charges passed (``api.bs`` "do attribution
        and fill a histogram" up to the histogram). Without ``charge_site`` the per-site budget is left out, for
        ``cross_report`` to charge each beneficiary's (pdslib ``measure_conversion``)."""
        request = conversion.request
        window, single_epoch = self._window(conversion.now, request)
        matches = self._matches_by_epoch(conversion, window)
        if not matches:
            return {}
        # in one epoch only the current one can match: the L1 norm of its histogram is the per-site deduction's
        l1_norm = sum(self._histogram(matches[window[-1]], request)) if single_epoch else 0
        deduction, value_deduction = self._deductions(request, single_epoch, l1_norm)
        paid = {}
        for epoch, impressions in matches.items():
            charges = epoch_charges(epoch, conversion.site, {impression.impression_site for impression in impressions},
                                    deduction, value_deduction)
            if not charge_site:
                del charges[FilterId(SITE, epoch, conversion.site)]
            if self._deduct_admitted(conversion, epoch, charges):
                paid[epoch] = impressions
        return paid

    def _deduct_admitted(self, conversion: Conversion, epoch: int, charges: Mapping[FilterId, int]) -> bool:
        """Big Bird's per-user-action cap on conversion-site quota activations (Sec. 4, Alg. 2; PR #309's "check
        conversion site allowance"), then ``_deduct``: a conversion site not yet admitted in this user action and
        epoch when the cap's sites are all admitted is refused like an out-of-budget epoch, and a site is admitted
        only when its charges pass (safety limits are charged if and only if the privacy budget is)."""
        if conversion.context is None:
            return self._deduct(charges)
        return conversion.context.consume_for_conversion_site(epoch, conversion.site, lambda: self._deduct(charges))

    def _deductions(self, request: ConversionRequest, single_epoch: bool, l1_norm: int) -> tuple[int, int]:
        """(the per-site deduction, the value deduction) in micro-epsilon, rounded up: sensitivity / noise scale,
        the noise scale being 2 * maxValue / epsilon."""
        scale = Fraction(2 * request.max_value) / request.epsilon
        l1_sensitivity = l1_norm if single_epoch else 2 * request.value
        value_deduction = math.ceil(2 * request.value / scale * MICRO)
        l1_deduction = math.ceil(l1_sensitivity / scale * MICRO)
        return (l1_deduction if single_epoch else value_deduction), value_deduction

    def _deduct(self, charges: Mapping[FilterId, int]) -> bool:
        """``deduct privacy and safety budgets`` for one epoch's ``charges`` (``global_filters.epoch_charges``: the
        per-site budget, the global budget, each impression site's quota once however many of its impressions
        match, and with Big Bird's option the conversion site's quota): every check first, then every deduction;
        nothing changes when a check fails (pdslib's two-phase commit)."""
        return self.filters.try_consume(charges)

    def account_passive_loss(self, epochs: Iterable[int], units: int, querier_site: str, conversion_site: str,
                             impression_sites: Iterable[str] = ()) -> list[FilterId]:
        """pdslib's ``account_for_passive_privacy_loss``: ``units`` micro-epsilon of privacy loss incurred outside
        a report, charged in each of ``epochs`` to ``querier_site``'s per-site budget, the global budget, the
        conversion site's quota and each of ``impression_sites``' quotas, once per epoch listed. All or nothing
        across the epochs (pdslib commits epoch by epoch and stops at the first that refuses). Returns the filters
        that refused (empty: the loss is accounted for)."""
        sites = list(impression_sites)
        charges: dict[FilterId, int] = {}
        for epoch in epochs:
            charges.update(epoch_charges(epoch, conversion_site, sites, units, units, querier_site))
        refused = self.filters.out_of_budget(charges)
        if not refused:
            self.filters.try_consume(charges)
        return refused

    def _shares(self, impressions: list[Impression], request: ConversionRequest) -> list[tuple[Impression, int]]:
        """``fill a histogram with last-n-touch attribution`` before the histogram: the n = min(|credit|,
        |impressions|) impressions of highest priority, most recent first among equals, each with its share of the
        value split by their credit."""
        ranked = sorted(impressions, key=lambda impression: (impression.priority, impression.timestamp), reverse=True)
        n = min(len(request.credit), len(ranked))
        shares = fairly_allocate_credit(request.credit[:n], request.value, self.delegate.credit_fraction)
        return list(zip(ranked[:n], shares, strict=True))

    def _histogram(self, impressions: list[Impression], request: ConversionRequest) -> list[int]:
        """``fill a histogram with last-n-touch attribution`` (all zeros without impressions): each share added
        to its impression's bucket, when the histogram has it."""
        histogram = [0] * request.histogram_size
        if impressions:
            for impression, share in self._shares(impressions, request):
                if impression.histogram_index < request.histogram_size:
                    histogram[impression.histogram_index] += share
        return histogram

    # --- clearing
    def clear_impressions_for_site(self, site: str) -> None:
        """``clear impressions for a site`` (clearing a site's data): its impressions, and the site from every
        impression's conversion sites and callers (an impression left with none is removed)."""
        def removed(impression: Impression) -> bool:
            if impression.intermediary_site is None and impression.impression_site == site:
                return True
            if impression.intermediary_site == site:
                return True
            if site in impression.conversion_sites:
                impression.conversion_sites.discard(site)
                if not impression.conversion_sites:
                    return True
            if site in impression.conversion_callers:
                impression.conversion_callers.discard(site)
                if not impression.conversion_callers:
                    return True
            return False

        self.impressions = [impression for impression in self.impressions if not removed(impression)]

    def clear_state(self, sites: Iterable[str], forget_visits: bool) -> None:
        """``clear browsing history for attribution``: without ``forget_visits``, the sites' budgets of the epochs
        in reach set to zero; with it, the sites' impressions, budgets and quotas (everything when no site is
        named), and the epochs before now out of reach."""
        parsed = self._parse_sites(sites, "sites", math.inf)
        now = self.delegate.now()
        if not forget_visits:
            if not parsed:
                raise AttributionRangeError("clearing without forgetting visits names at least one site")
            for site in parsed:
                for epoch in range(self._start_epoch(now), self.current_epoch(now) + 1):
                    self.filters.exhaust(FilterId(SITE, epoch, site))
            return
        if not parsed:
            self.impressions = []
            self.filters.consumed.clear()
        else:
            self.impressions = [impression for impression in self.impressions
                                if impression.impression_site not in parsed]
            self.filters.forget(parsed)  # budgets and quotas; the global budget is kept
        self.last_browsing_history_clear = now

    def clear_expired_impressions(self) -> None:
        now = self.delegate.now()
        self.impressions = [impression for impression in self.impressions
                            if now < impression.timestamp + impression.lifetime_seconds]


def _list(value: object, name: str) -> list:
    if not isinstance(value, list):
        raise TypeError(f"{name} must be a sequence, got {value!r}")
    return value


def _strings(value: object) -> list[str]:
    items = _list(value, "sites")
    if not all(isinstance(item, str) for item in items):
        raise TypeError(f"sites must be strings, got {items!r}")
    return items
