"""One browser's Attribution API state and operations (W3C Attribution API Level 1, ``api.bs``; its reference
implementation is ``impl/src/backend.ts`` in github.com/w3c/attribution).

What it holds: the impressions saved by ``save_impression``; the per-site privacy budget of every (epoch, conversion
site), the global budget of every epoch and the quota of every (epoch, impression site) (Big Bird: Tholoniat et al.,
"Beyond Per-Querier Budgets"), all in integer micro-epsilon; the epoch start time, chosen at random on first use;
when browsing history was last cleared. ``measure_conversion`` validates its options, finds the impressions that
match in each epoch of the lookback window, deducts each epoch's budgets atomically (all of an epoch's checks pass
before any store changes) and fills the histogram by last-n-touch attribution.

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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from transforms.attribution_api.mechanisms.credit import fairly_allocate_credit

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

    @property
    def epoch_seconds(self) -> int:
        return self.privacy_budget_epoch_days * SECONDS_PER_DAY


@dataclass(frozen=True)
class Delegate:
    """What the browser supplies: the clock, its random choices, and what a registrable domain is."""

    now: Callable[[], Fraction]  # seconds since the Unix epoch
    epoch_start_fraction: Callable[[], Fraction]  # in [0, 1): where in an epoch the epoch start time falls
    credit_fraction: Callable[[], Fraction]  # in [0, 1]: fairly allocate credit's random double
    site_of: Callable[[str], str | None]  # the registrable domain of a host (private suffixes allowed), or None


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
    privacy_budgets: dict[tuple[int, str], int] = field(default_factory=dict)  # (epoch, site) -> remaining
    global_budgets: dict[int, int] = field(default_factory=dict)  # epoch -> remaining
    impression_site_quotas: dict[tuple[int, str], int] = field(default_factory=dict)  # (epoch, site) -> remaining
    conversion_site_quotas: dict[tuple[int, str], int] = field(default_factory=dict)  # (epoch, site) -> remaining
    last_browsing_history_clear: Fraction | None = None

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
        now = self.delegate.now()
        request = self._validate(options)
        if not self.enabled:
            return [0] * request.histogram_size
        return self._attribute(site, intermediary_site, now, request)

    def _matching(self, site: str, intermediary_site: str | None, epoch: int, now: Fraction,
                  request: ConversionRequest, epochs: list[int]) -> list[Impression]:
        """``common matching logic``: the impressions of ``epoch`` (``epochs``: each impression's) this conversion
        may be attributed to."""
        conversion_caller = intermediary_site or site
        matched = []
        for impression, impression_epoch in zip(self.impressions, epochs, strict=True):
            if impression_epoch != epoch:
                continue
            if now > impression.timestamp + impression.lifetime_seconds:
                continue
            if now > impression.timestamp + request.lookback_seconds:
                continue
            if impression.conversion_sites and site not in impression.conversion_sites:
                continue
            if impression.conversion_callers and conversion_caller not in impression.conversion_callers:
                continue
            if request.match_values and impression.match_value not in request.match_values:
                continue
            if request.impression_sites and impression.impression_site not in request.impression_sites:
                continue
            impression_caller = impression.intermediary_site or impression.impression_site
            if request.impression_callers and impression_caller not in request.impression_callers:
                continue
            matched.append(impression)
        return matched

    def _attribute(self, site: str, intermediary_site: str | None, now: Fraction,
                   request: ConversionRequest) -> list[int]:
        """``do attribution and fill a histogram``."""
        current = self.current_epoch(now)
        start = self._start_epoch(now)
        single_epoch = current == self.current_epoch(now - request.lookback_seconds)
        epochs = [self.current_epoch(impression.timestamp) for impression in self.impressions]  # once per conversion
        l1_norm = 0
        if single_epoch:
            impressions = self._matching(site, intermediary_site, current, now, request, epochs)
            if not impressions:
                return [0] * request.histogram_size
            l1_norm = sum(self._histogram(impressions, request))
        matched: list[Impression] = []
        deducted_quotas: set[tuple[int, str]] = set()
        deducted_global: set[int] = set()
        for epoch in range(start, current + 1):
            impressions = self._matching(site, intermediary_site, epoch, now, request, epochs)
            if impressions and self._deduct(epoch, site, impressions, request, single_epoch, l1_norm,
                                            deducted_quotas, deducted_global):
                matched.extend(impressions)  # each impression lies in one epoch: the epochs' sets are disjoint
        if not matched:
            return [0] * request.histogram_size
        return self._histogram(matched, request)

    def _deductions(self, request: ConversionRequest, single_epoch: bool, l1_norm: int) -> tuple[int, int]:
        """(the per-site deduction, the value deduction) in micro-epsilon, rounded up: sensitivity / noise scale,
        the noise scale being 2 * maxValue / epsilon."""
        scale = Fraction(2 * request.max_value) / request.epsilon
        l1_sensitivity = l1_norm if single_epoch else 2 * request.value
        value_deduction = math.ceil(2 * request.value / scale * MICRO)
        l1_deduction = math.ceil(l1_sensitivity / scale * MICRO)
        return (l1_deduction if single_epoch else value_deduction), value_deduction

    def _deduct(self, epoch: int, site: str, impressions: list[Impression], request: ConversionRequest,
                single_epoch: bool, l1_norm: int, deducted_quotas: set[tuple[int, str]], deducted_global: set[int]
                ) -> bool:
        """``deduct privacy and safety budgets``: every check first (per-site budget, global budget, each impression
        site's quota, and with Big Bird's option the conversion site's quota), then every deduction; nothing changes
        when a check fails."""
        deduction, value_deduction = self._deductions(request, single_epoch, l1_norm)
        key = (epoch, site)
        if deduction > self.privacy_budgets.get(key, self.limits.per_site_privacy_budget):
            return False
        if value_deduction > self.global_budgets.get(epoch, self.limits.global_privacy_budget_per_epoch):
            return False
        quota_keys = {(epoch, impression.impression_site) for impression in impressions}
        if any(value_deduction > self.impression_site_quotas.get(quota, self.limits.impression_site_quota_per_epoch)
               for quota in quota_keys):
            return False
        conversion_quota = self.limits.conversion_site_quota_per_epoch
        if conversion_quota is not None and value_deduction > self.conversion_site_quotas.get(key, conversion_quota):
            return False
        self.privacy_budgets[key] = self.privacy_budgets.get(key, self.limits.per_site_privacy_budget) - deduction
        if epoch not in deducted_global:
            deducted_global.add(epoch)
            self.global_budgets[epoch] = (self.global_budgets.get(epoch, self.limits.global_privacy_budget_per_epoch)
                                          - value_deduction)
            if conversion_quota is not None:
                self.conversion_site_quotas[key] = self.conversion_site_quotas.get(key, conversion_quota) - value_deduction
        for quota in sorted(quota_keys - deducted_quotas):
            deducted_quotas.add(quota)
            self.impression_site_quotas[quota] = (
                self.impression_site_quotas.get(quota, self.limits.impression_site_quota_per_epoch) - value_deduction)
        return True

    def _histogram(self, impressions: list[Impression], request: ConversionRequest) -> list[int]:
        """``fill a histogram with last-n-touch attribution``: the n = min(|credit|, |impressions|) impressions of
        highest priority, most recent first among equals, get the value split by their credit."""
        ranked = sorted(impressions, key=lambda impression: (impression.priority, impression.timestamp), reverse=True)
        n = min(len(request.credit), len(ranked))
        shares = fairly_allocate_credit(request.credit[:n], request.value, self.delegate.credit_fraction)
        histogram = [0] * request.histogram_size
        for impression, share in zip(ranked[:n], shares, strict=True):
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
        in reach set to zero; with it, the sites' impressions and budgets (everything when no site is named), and
        the epochs before now out of reach."""
        parsed = self._parse_sites(sites, "sites", math.inf)
        now = self.delegate.now()
        if not forget_visits:
            if not parsed:
                raise AttributionRangeError("clearing without forgetting visits names at least one site")
            for site in parsed:
                for epoch in range(self._start_epoch(now), self.current_epoch(now) + 1):
                    self.privacy_budgets[(epoch, site)] = 0
            return
        if not parsed:
            self.impressions, self.privacy_budgets, self.impression_site_quotas = [], {}, {}
            self.conversion_site_quotas = {}
            self.global_budgets.clear()
        else:
            self.impressions = [impression for impression in self.impressions
                                if impression.impression_site not in parsed]
            self.privacy_budgets = {key: left for key, left in self.privacy_budgets.items() if key[1] not in parsed}
            self.impression_site_quotas = {key: left for key, left in self.impression_site_quotas.items()
                                           if key[1] not in parsed}
            self.conversion_site_quotas = {key: left for key, left in self.conversion_site_quotas.items()
                                           if key[1] not in parsed}
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
