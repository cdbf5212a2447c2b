"""Parse ``Attribution-Reporting-Register-Source`` and ``-Register-Trigger`` header JSON as the Attribution
Reporting API specification defines it (W3C/WICG "Attribution Reporting", "Parsing source-registration JSON"
and "Parsing trigger-registration JSON"; the field rules and limits follow Chrome's
``components/attribution_reporting`` parsers, whose error names the reasons below mirror in snake case).

``parse_source`` and ``parse_trigger`` take the decoded JSON value and the request's context and return a
``schemas.registrations`` record, or raise ``HeaderError`` whose ``reason`` is a stable snake-case name (the
pipelines' dead-letter reason). Durations are clamped and rounded here, as the specification says:

* ``expiry``: seconds, clamped to [1 day, 30 days] (default 30 days); an event source's is rounded to the
  nearest whole day;
* ``event_report_windows``: start and ends, the ends clamped to [1 hour, expiry]; without it, a navigation
  source reports at 2 days, 7 days and its last end (those before it), an event source at its last end, the last
  end being ``event_report_window`` (clamped to [1 hour, expiry]) or else the expiry;
* ``aggregatable_report_window``: clamped to [1 hour, expiry] (default expiry).

Fields the specification does not define are ignored, as Chrome ignores them: ``trigger_specs`` among them, the
full flexible event-level configurations, removed from the specification in May 2025 (WICG/attribution-reporting-api
pull requests 1520 and 1521) and never shipped by Chrome, whose parser reads it only in tests.
"""
from __future__ import annotations

import functools
import ipaddress
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import orjson
from publicsuffixlist import PublicSuffixList

from schemas.limits import (
    DEFAULT_FILTERING_ID_MAX_BYTES,
    DEFAULT_MAX_EVENT_STATES,
    DEFAULT_MAX_REPORTS,
    DEFAULT_TRIGGER_DATA_CARDINALITY,
    MAX_AGGREGATABLE_VALUE,
    MAX_AGGREGATION_ENTRIES,
    MAX_EVENT_LEVEL_EPSILON,
    MAX_EVENT_LEVEL_REPORTS,
    MAX_EXPIRY_SECONDS,
    MAX_FILTERING_ID_MAX_BYTES,
    MAX_NAMED_BUDGET_CHARS,
    MAX_NAMED_BUDGETS,
    MAX_REPORT_WINDOWS,
    MAX_SCOPE_CHARS,
    MAX_SCOPES_PER_SOURCE,
    MAX_TRIGGER_DATA,
    MIN_EXPIRY_SECONDS,
)
from schemas.registrations import (
    EVENT,
    EXCLUDE,
    INCLUDE,
    NAVIGATION,
    NO_FILTERS,
    AggregatableDebugConfig,
    AggregatableDedupKey,
    AggregatableTriggerData,
    AggregatableValues,
    AttributionScopes,
    EventTriggerData,
    FilterConfig,
    FilterPair,
    NamedBudgetCandidate,
    SourceRegistration,
    TriggerRegistration,
)
from schemas.time_units import MICROS_PER_SECOND, SECONDS_PER_DAY

SOURCE_HEADER = "Attribution-Reporting-Register-Source"
TRIGGER_HEADER = "Attribution-Reporting-Register-Trigger"

MAX_DESTINATIONS = 3
MAX_FILTER_KEYS = 50  # source filter_data: keys, values per key
MAX_FILTER_VALUES = 50
MAX_FILTER_STRING = 25  # characters of a filter key or value
MAX_AGGREGATION_KEY_ID = 25
MAX_TRIGGER_CONTEXT_ID = 64
MIN_REPORT_WINDOW_SECONDS = 3_600
DEFAULT_NAVIGATION_WINDOWS = (2 * SECONDS_PER_DAY, 7 * SECONDS_PER_DAY)
DEFAULT_TRIGGER_DATA = {kind: tuple(range(n)) for kind, n in DEFAULT_TRIGGER_DATA_CARDINALITY.items()}
LOOKBACK_WINDOW = "_lookback_window"
SOURCE_TYPE_FILTER = "source_type"
UINT64 = 2**64
INT64 = 2**63
UINT32 = 2**32

# the debug data types of aggregatable debug reports (spec "debug data type"), of sources and of triggers
SOURCE_DEBUG_TYPES = frozenset({
    "source-channel-capacity-limit", "source-destination-global-rate-limit", "source-destination-limit",
    "source-destination-limit-replaced", "source-destination-per-day-rate-limit", "source-destination-rate-limit",
    "source-max-event-states-limit", "source-noised", "source-reporting-origin-limit",
    "source-reporting-origin-per-site-limit", "source-scopes-channel-capacity-limit", "source-storage-limit",
    "source-success", "source-trigger-state-cardinality-limit", "source-unknown-error",
})
TRIGGER_DEBUG_TYPES = frozenset({
    "trigger-aggregate-attributions-per-source-destination-limit", "trigger-aggregate-deduplicated",
    "trigger-aggregate-excessive-reports", "trigger-aggregate-insufficient-budget",
    "trigger-aggregate-insufficient-named-budget", "trigger-aggregate-no-contributions",
    "trigger-aggregate-report-window-passed", "trigger-aggregate-storage-limit",
    "trigger-event-attributions-per-source-destination-limit", "trigger-event-deduplicated",
    "trigger-event-excessive-reports", "trigger-event-low-priority", "trigger-event-no-matching-configurations",
    "trigger-event-no-matching-trigger-data", "trigger-event-noise", "trigger-event-report-window-not-started",
    "trigger-event-report-window-passed", "trigger-event-storage-limit", "trigger-no-matching-filter-data",
    "trigger-no-matching-source", "trigger-reporting-origin-limit", "trigger-unknown-error",
})
UNSPECIFIED_DEBUG_TYPE = "unspecified"

_DIGITS = re.compile(r"[0-9]+")
_SIGNED_DIGITS = re.compile(r"-?[0-9]+")
_HEX_KEY = re.compile(r"0[xX][0-9a-fA-F]{1,32}")
_SUFFIXES = PublicSuffixList()


class HeaderError(ValueError):
    """An invalid registration header: ``reason`` is the dead-letter reason, the message says where."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


# --------------------------------------------------------------------------------------------
# Origins and sites
# --------------------------------------------------------------------------------------------


# Origins and sites repeat in every log (a few ad-techs, publishers and advertisers): memoised, they cost a
# dictionary look-up instead of a URL split and a Public Suffix List walk (the parse rate doubles).
@functools.lru_cache(maxsize=1 << 16)
def origin_of(url: str) -> str | None:
    """``scheme://host[:port]`` of an http(s) URL, or None if it is not one."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname  # an IPv6 address keeps its brackets
    default_port = {"http": 80, "https": 443}[parts.scheme]
    return f"{parts.scheme}://{host}" + (f":{port}" if port not in (None, default_port) else "")


@functools.lru_cache(maxsize=1 << 16)
def is_trustworthy(origin: str) -> bool:
    """A potentially trustworthy origin (Secure Contexts): https, or http on a loopback host (``localhost``,
    ``*.localhost``, 127.0.0.0/8, ``[::1]``)."""
    parts = urlsplit(origin)
    if parts.scheme == "https":
        return True
    host = parts.hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@functools.lru_cache(maxsize=1 << 16)
def site_of(origin: str) -> str:
    """The site (scheme and registrable domain, Public Suffix List) of an origin: ``https://a.b.example`` ->
    ``https://b.example``. A host that is an IP address or has no registrable domain is its own site."""
    parts = urlsplit(origin)
    host = parts.hostname or ""
    if ":" in host:  # IPv6
        return f"{parts.scheme}://[{host}]"
    registrable = None if re.fullmatch(r"[0-9.]+", host) else _SUFFIXES.privatesuffix(host)
    return f"{parts.scheme}://{registrable or host}"


# --------------------------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------------------------


def _integral_number(value: Any) -> int | None:
    """An integral JSON number (``3`` or ``3.0``), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return None


_MAX_SIGNIFICANT_DIGITS = 20  # 2^64 has 20 digits: a longer number is out of every range read here


def parse_decimal(value: Any, signed: bool = False) -> int | None:
    """The integer a base-10 string of ASCII digits (``signed``: with an optional leading '-') denotes, leading zeros
    allowed as Chromium's ``StringToInt64`` allows them; None for any other value. A number of more significant
    digits than any 64-bit integer has is None too: it is out of every range, and Python's ``int`` refuses strings
    past 4,300 digits with an error of its own."""
    if not isinstance(value, str):
        return None
    if 0 < len(value) <= _MAX_SIGNIFICANT_DIGITS and value.isascii() and value.isdigit():
        return int(value)  # the common case: a short unsigned number (isascii: no other script's digits)
    if not (_SIGNED_DIGITS if signed else _DIGITS).fullmatch(value):
        return None
    negative = value.startswith("-")
    digits = value[negative:].lstrip("0") or "0"
    if len(digits) > _MAX_SIGNIFICANT_DIGITS:
        return None
    return -int(digits) if negative else int(digits)


def _uint64_string(value: Any, reason: str) -> int:
    number = parse_decimal(value)
    if number is None or number >= UINT64:
        raise HeaderError(reason, f"expected a base-10 uint64 string, got {shown(value)}")
    return number


def _int64_string(value: Any, reason: str) -> int:
    number = parse_decimal(value, signed=True)
    if number is None or not -INT64 <= number < INT64:
        raise HeaderError(reason, f"expected a base-10 int64 string, got {shown(value)}")
    return number


def _duration(value: Any, reason: str) -> int:
    """A non-negative duration in seconds: an integral number or a base-10 uint64 string."""
    number = _integral_number(value)
    if number is None:
        number = parse_decimal(value)
    if number is None or number < 0 or number >= UINT64:
        raise HeaderError(reason, f"expected a non-negative number of seconds, got {shown(value)}")
    return number


def _debug_key(value: Any) -> int | None:
    """A debug key: an invalid one is dropped, not an error (spec)."""
    number = parse_decimal(value)
    return number if number is not None and number < UINT64 else None


def shown(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters, for an error's detail (a dead letter keeps the raw input)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def _bool(value: Any, reason: str) -> bool:
    if not isinstance(value, bool):
        raise HeaderError(reason, f"expected true or false, got {value!r}")
    return value


def _dict(value: Any, reason: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise HeaderError(reason, f"expected a dictionary, got {type(value).__name__}")
    return value


def _list(value: Any, reason: str) -> Sequence[Any]:
    if not isinstance(value, list):
        raise HeaderError(reason, f"expected a list, got {type(value).__name__}")
    return value


def _hex_key(value: Any, reason: str) -> int:
    number = _hex_value(value) if isinstance(value, str) else None
    if number is None:
        raise HeaderError(reason, f"expected a hexadecimal 128-bit key such as '0x159', got {shown(value)}")
    return number


@functools.lru_cache(maxsize=1 << 16)  # key pieces repeat across registrations: a look-up, not a regex and a parse
def _hex_value(value: str) -> int | None:
    return int(value, 16) if _HEX_KEY.fullmatch(value) else None


# --------------------------------------------------------------------------------------------
# Filters
# --------------------------------------------------------------------------------------------


def _filter_values(key: str, values: Any, reason: str, limit: bool) -> tuple[str, ...]:
    values = _list(values, f"{reason}_list_invalid")
    out = []
    for item in values:
        if not isinstance(item, str):
            raise HeaderError(f"{reason}_value_invalid", f"{key!r} values must be strings, got {shown(item)}")
        if limit and len(item) > MAX_FILTER_STRING:
            raise HeaderError(f"{reason}_value_too_long", f"{item[:40]!r} (at most {MAX_FILTER_STRING} characters)")
        out.append(item)
    if limit and len(set(out)) > MAX_FILTER_VALUES:  # distinct values, as Chrome's filter values set counts them
        raise HeaderError(f"{reason}_list_too_long", f"{key!r} has {len(set(out))} values (at most {MAX_FILTER_VALUES})")
    return tuple(out)


def parse_filter_data(value: Any) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """A source's ``filter_data``: at most 50 keys of at most 50 values, strings of at most 25 characters;
    ``source_type`` and keys starting with ``_`` are reserved."""
    data = _dict(value, "filter_data_wrong_type")
    if len(data) > MAX_FILTER_KEYS:
        raise HeaderError("filter_data_too_many_keys", f"{len(data)} keys (at most {MAX_FILTER_KEYS})")
    out = []
    for key, values in data.items():
        if key == SOURCE_TYPE_FILTER:
            raise HeaderError("filter_data_has_source_type_key", "filter_data must not set 'source_type'")
        if key.startswith("_"):
            raise HeaderError("filter_data_key_reserved", f"filter_data key {key!r} starts with '_'")
        if len(key) > MAX_FILTER_STRING:
            raise HeaderError("filter_data_key_too_long", f"{key[:40]!r} (at most {MAX_FILTER_STRING} characters)")
        out.append((key, _filter_values(key, values, "filter_data", limit=True)))
    return tuple(sorted(out))


def _filter_config(value: Any) -> FilterConfig:
    data = _dict(value, "filters_wrong_type")
    lookback, out = None, []
    for key, values in data.items():
        if key == LOOKBACK_WINDOW:
            seconds = _integral_number(values)
            if seconds is None or seconds <= 0:
                raise HeaderError("filters_lookback_window_value_invalid", f"expected a positive number, got {values!r}")
            lookback = seconds * MICROS_PER_SECOND
            continue
        if key.startswith("_"):
            raise HeaderError("filters_key_reserved", f"filter key {key!r} starts with '_'")
        out.append((key, _filter_values(key, values, "filters", limit=False)))
    return FilterConfig(tuple(sorted(out)), lookback)


def _filter_list(value: Any) -> tuple[FilterConfig, ...]:
    """``filters`` / ``not_filters``: one dictionary, or a list of them (any one matching is a match)."""
    if isinstance(value, list):
        return tuple(_filter_config(item) for item in value)
    return (_filter_config(value),)


def parse_filter_pair(entry: Mapping[str, Any]) -> FilterPair:
    """The ``filters`` and ``not_filters`` of a trigger or of one of its entries."""
    if "filters" not in entry and "not_filters" not in entry:
        return NO_FILTERS
    filters = _filter_list(entry["filters"]) if "filters" in entry else ()
    not_filters = _filter_list(entry["not_filters"]) if "not_filters" in entry else ()
    return FilterPair(filters, not_filters)


# --------------------------------------------------------------------------------------------
# Sources
# --------------------------------------------------------------------------------------------


def _destinations(value: Any) -> tuple[str, ...]:
    if value is None:
        raise HeaderError("destination_missing", "a source needs a 'destination'")
    items = value if isinstance(value, list) else [value]
    if not items:
        raise HeaderError("destination_missing", "a source needs at least one destination")
    sites: list[str] = []
    for item in items:
        origin = origin_of(item) if isinstance(item, str) else None
        if origin is None:
            raise HeaderError("destination_wrong_type", f"expected an http(s) URL, got {item!r}")
        if not is_trustworthy(origin):
            raise HeaderError("destination_untrustworthy", f"{origin} is not potentially trustworthy")
        site = site_of(origin)
        if site not in sites:
            sites.append(site)
    if len(sites) > MAX_DESTINATIONS:  # distinct sites, as Chrome's DestinationSet counts them
        raise HeaderError("destination_list_too_long", f"{len(sites)} destination sites (at most {MAX_DESTINATIONS})")
    return tuple(sorted(sites))


def _expiry(header: Mapping[str, Any], source_type: str) -> int:
    expiry = MAX_EXPIRY_SECONDS
    if "expiry" in header:
        expiry = min(max(_duration(header["expiry"], "expiry_value_invalid"), MIN_EXPIRY_SECONDS), MAX_EXPIRY_SECONDS)
    if source_type == EVENT:  # rounded to the nearest day
        expiry = (expiry + SECONDS_PER_DAY // 2) // SECONDS_PER_DAY * SECONDS_PER_DAY
    return expiry


def _clamp_window(seconds: int, expiry: int) -> int:
    return min(max(seconds, MIN_REPORT_WINDOW_SECONDS), expiry)


def _event_report_windows(header: Mapping[str, Any], source_type: str, expiry: int) -> tuple[int, tuple[int, ...]]:
    """(start, ends) of the event-level report windows, in seconds after registration."""
    if "event_report_window" in header and "event_report_windows" in header:
        raise HeaderError("both_event_report_window_fields_found", "give event_report_window or event_report_windows")
    if "event_report_windows" not in header:  # the default windows, ending at the expiry or event_report_window
        last = expiry
        if "event_report_window" in header:
            last = _clamp_window(_duration(header["event_report_window"], "event_report_window_value_invalid"), expiry)
        defaults = DEFAULT_NAVIGATION_WINDOWS if source_type == NAVIGATION else ()
        return 0, tuple(end for end in defaults if end < last) + (last,)
    windows = _dict(header["event_report_windows"], "event_report_windows_wrong_type")
    start = _duration(windows.get("start_time", 0), "event_report_windows_start_time_invalid")
    if start > expiry:
        raise HeaderError("event_report_windows_start_time_invalid", f"start_time {start} is after the expiry {expiry}")
    ends = _list(windows.get("end_times"), "event_report_windows_end_times_missing")
    if not ends or len(ends) > MAX_REPORT_WINDOWS:
        raise HeaderError("event_report_windows_end_times_list_invalid", f"{len(ends)} end times (1 to {MAX_REPORT_WINDOWS})")
    clamped, previous = [], start
    for end in ends:
        seconds = _duration(end, "event_report_windows_end_time_value_invalid")
        if seconds <= 0:
            raise HeaderError("event_report_windows_end_time_value_invalid", f"end times must be positive, got {end!r}")
        seconds = _clamp_window(seconds, expiry)
        if seconds <= previous:
            raise HeaderError("event_report_windows_end_time_not_increasing", f"end time {seconds} after {previous}")
        clamped.append(seconds)
        previous = seconds
    return start, tuple(clamped)


def _named_dict(value: Any, *, wrong_type: str, too_many: str, max_keys: int, too_long: str,
                max_chars: int) -> Mapping[str, Any]:
    """A dictionary of at most ``max_keys`` names of at most ``max_chars`` characters (a source's aggregation keys,
    its named budgets); each bound has its error name."""
    named = _dict(value, wrong_type)
    if len(named) > max_keys:
        raise HeaderError(too_many, f"{len(named)} names (at most {max_keys})")
    for name in named:
        if len(name) > max_chars:
            raise HeaderError(too_long, f"{name[:40]!r} (at most {max_chars} characters)")
    return named


def _aggregation_keys(value: Any) -> tuple[tuple[str, int], ...]:
    keys = _named_dict(value, wrong_type="aggregation_keys_wrong_type", too_many="aggregation_keys_too_many_keys",
                       max_keys=MAX_AGGREGATION_ENTRIES, too_long="aggregation_keys_key_too_long",
                       max_chars=MAX_AGGREGATION_KEY_ID)
    return tuple((name, _hex_key(key, "aggregation_keys_value_invalid")) for name, key in keys.items())


def _trigger_data(header: Mapping[str, Any], source_type: str) -> tuple[tuple[int, ...], str]:
    matching = header.get("trigger_data_matching", "modulus")
    if matching not in ("modulus", "exact"):
        raise HeaderError("trigger_data_matching_value_invalid", f"expected 'modulus' or 'exact', got {matching!r}")
    if "trigger_data" not in header:
        return DEFAULT_TRIGGER_DATA[source_type], matching
    values = _list(header["trigger_data"], "trigger_data_list_invalid")
    if len(values) > MAX_TRIGGER_DATA:
        raise HeaderError("trigger_data_list_too_long", f"{len(values)} values (at most {MAX_TRIGGER_DATA})")
    out = []
    for item in values:
        number = _integral_number(item)
        if number is None or not 0 <= number < UINT32:
            raise HeaderError("trigger_data_value_invalid", f"expected a uint32, got {item!r}")
        out.append(number)
    if len(set(out)) != len(out):
        raise HeaderError("duplicate_trigger_data", f"{out}")
    out.sort()
    if matching == "modulus" and out != list(range(len(out))):
        raise HeaderError("trigger_data_matching_modulus_invalid", f"modulus matching needs 0..n-1, got {out}")
    return tuple(out), matching


def _positive_uint32(value: Any, reason: str) -> int:
    """A positive integer below 2^32, given as a JSON number (``3.0`` allowed, as Chrome's ``ParsePositiveUint32``)."""
    number = _integral_number(value)
    if number is None or not 0 < number < UINT32:
        raise HeaderError(reason, f"expected a positive integer below 2^32, got {shown(value)}")
    return number


def _scope_values(value: Any, limit: int) -> tuple[str, ...]:
    """A source's scope ``values``: 1 to min(limit, 20) distinct strings of at most 50 characters, sorted."""
    items = _list(value, "attribution_scopes_list_invalid")
    for item in items:
        if not isinstance(item, str) or len(item) > MAX_SCOPE_CHARS:
            raise HeaderError("attribution_scopes_list_value_invalid",
                              f"expected strings of at most {MAX_SCOPE_CHARS} characters, got {shown(item)}")
    values = tuple(sorted(set(items)))
    if not values or len(values) > min(limit, MAX_SCOPES_PER_SOURCE):
        raise HeaderError("attribution_scopes_list_invalid",
                          f"{len(values)} distinct values (1 to the limit {limit}, at most {MAX_SCOPES_PER_SOURCE})")
    return values


def _attribution_scopes(value: Any) -> AttributionScopes:
    """A source's ``attribution_scopes`` (spec "parse attribution scopes"): ``limit`` (required, a positive uint32),
    ``values`` (required, 1 to min(limit, 20) distinct strings of at most 50 characters) and ``max_event_states``
    (a positive uint32, default 3)."""
    scopes = _dict(value, "attribution_scopes_invalid")
    if "limit" not in scopes:
        raise HeaderError("attribution_scope_limit_required", "attribution_scopes needs a 'limit'")
    limit = _positive_uint32(scopes["limit"], "attribution_scope_limit_invalid")
    max_event_states = DEFAULT_MAX_EVENT_STATES
    if "max_event_states" in scopes:
        max_event_states = _positive_uint32(scopes["max_event_states"], "max_event_states_invalid")
    return AttributionScopes(limit, _scope_values(scopes.get("values"), limit), max_event_states)


def _trigger_scopes(value: Any) -> tuple[str, ...]:
    """A trigger's ``attribution_scopes``: a list of strings, of any length and number (spec "parse attribution
    scopes for trigger")."""
    items = _list(value, "attribution_scopes_invalid")
    if any(not isinstance(item, str) for item in items):
        raise HeaderError("attribution_scopes_value_invalid", f"expected strings, got {shown(items)}")
    return tuple(sorted(set(items)))


def _named_budgets(value: Any) -> tuple[tuple[str, int], ...]:
    """A source's ``named_budgets`` (spec "parse named budgets for source"): at most 25 names of at most 25
    characters, each with a budget in [0, 65536]."""
    budgets = _named_dict(value, wrong_type="aggregatable_named_budgets_dict_invalid",
                          too_many="aggregatable_named_budgets_dict_invalid", max_keys=MAX_NAMED_BUDGETS,
                          too_long="aggregatable_named_budgets_key_too_long", max_chars=MAX_NAMED_BUDGET_CHARS)
    out = []
    for name, budget in budgets.items():
        number = _integral_number(budget)
        if number is None or not 0 <= number <= MAX_AGGREGATABLE_VALUE:
            raise HeaderError("aggregatable_named_budgets_value_invalid",
                              f"{name!r}: expected an integer in [0, {MAX_AGGREGATABLE_VALUE}], got {shown(budget)}")
        out.append((name, number))
    return tuple(sorted(out))


def _named_budget_candidates(value: Any) -> tuple[NamedBudgetCandidate, ...]:
    """A trigger's ``named_budgets`` (spec "parse named budgets for trigger"): a list of ``{"name", "filters",
    "not_filters"}``, the name optional."""
    out = []
    for item in _list(value, "aggregatable_named_budget_wrong_type"):
        entry = _dict(item, "aggregatable_named_budget_wrong_type")
        name = entry.get("name")
        if name is not None and not isinstance(name, str):
            raise HeaderError("aggregatable_named_budget_name_invalid", f"expected a string, got {shown(name)}")
        out.append(NamedBudgetCandidate(name, parse_filter_pair(entry)))
    return tuple(out)


def _debug_config(value: Any, max_value: int, supported: frozenset[str],
                  coordinator_origins: Sequence[str]) -> AggregatableDebugConfig:
    """An ``aggregatable_debug_reporting`` dictionary (spec "parse an aggregatable debug reporting config"): a
    ``key_piece``, an optional allowed ``aggregation_coordinator_origin`` and ``debug_data``, a list of
    ``{"types", "key_piece", "value"}`` whose values are in [1, ``max_value``]; a type may appear once,
    ``unspecified`` stands for every type not listed, and a type of the other kind of registration is ignored
    (but not twice). ``HeaderError`` for anything else."""
    config = _dict(value, "aggregatable_debug_reporting_invalid")
    key_piece = _hex_key(config.get("key_piece"), "aggregatable_debug_reporting_key_piece_invalid")
    coordinator = coordinator_origins[0] if coordinator_origins else ""
    if "aggregation_coordinator_origin" in config:
        given = config["aggregation_coordinator_origin"]
        origin = origin_of(given) if isinstance(given, str) else None
        if origin is None or origin not in coordinator_origins:
            raise HeaderError("aggregatable_debug_reporting_coordinator_invalid", f"{shown(given)} is not allowed")
        coordinator = origin
    data: dict[str, tuple[int, int]] = {}
    unknown: set[str] = set()
    unspecified: tuple[int, int] | None = None
    for item in _list(config.get("debug_data", []), "aggregatable_debug_reporting_debug_data_invalid"):
        entry = _dict(item, "aggregatable_debug_reporting_debug_data_invalid")
        piece = _hex_key(entry.get("key_piece"), "aggregatable_debug_reporting_debug_data_key_piece_invalid")
        number = _integral_number(entry.get("value"))
        if number is None or not 1 <= number <= max_value:
            raise HeaderError("aggregatable_debug_reporting_debug_data_value_invalid",
                              f"expected an integer in [1, {max_value}], got {shown(entry.get('value'))}")
        types = entry.get("types")
        if not isinstance(types, list) or not types or any(not isinstance(kind, str) for kind in types):
            raise HeaderError("aggregatable_debug_reporting_debug_data_types_invalid", f"{shown(types)}")
        for kind in types:
            if kind in data or kind in unknown or (kind == UNSPECIFIED_DEBUG_TYPE and unspecified is not None):
                raise HeaderError("aggregatable_debug_reporting_debug_data_types_invalid", f"{kind!r} given twice")
            if kind == UNSPECIFIED_DEBUG_TYPE:
                unspecified = (piece, number)
            elif kind in supported:
                data[kind] = (piece, number)
            else:
                unknown.add(kind)
    return AggregatableDebugConfig(key_piece, tuple(sorted((kind, *pair) for kind, pair in data.items())), coordinator,
                                   unspecified)


def _debug_config_of(value: Any, max_value: int, supported: frozenset[str],
                     coordinator_origins: Sequence[str]) -> AggregatableDebugConfig:
    """``_debug_config``, parsed once per distinct configuration: an ad-tech sends the same one with every
    registration. The configuration's compact JSON is the key; one that JSON cannot tell apart from another (a
    NaN is written as null) or cannot write (an integer past 64 bits) is parsed each time."""
    try:
        key = orjson.dumps(value)
    except (orjson.JSONEncodeError, TypeError):
        return _debug_config(value, max_value, supported, coordinator_origins)
    if b"null" in key:
        return _debug_config(value, max_value, supported, coordinator_origins)
    return _debug_config_cached(key, max_value, supported, tuple(coordinator_origins))


@functools.lru_cache(maxsize=4096)
def _debug_config_cached(key: bytes, max_value: int, supported: frozenset[str],
                         coordinator_origins: tuple[str, ...]) -> AggregatableDebugConfig:
    return _debug_config(orjson.loads(key), max_value, supported, coordinator_origins)


def _source_debug_reporting(header: Mapping[str, Any], coordinator_origins: Sequence[str]
                            ) -> tuple[int, AggregatableDebugConfig | None]:
    """A source's ``aggregatable_debug_reporting``: its ``budget`` (in [1, 65536], set aside from the L1 budget)
    and configuration. An invalid one is ignored whole, budget included, and the source registered without it
    (Chrome; the interop case ``aggregatable_debug_reports``)."""
    if "aggregatable_debug_reporting" not in header:
        return 0, None
    try:
        config = _dict(header["aggregatable_debug_reporting"], "aggregatable_debug_reporting_invalid")
        budget = _integral_number(config.get("budget"))
        if budget is None or not 1 <= budget <= MAX_AGGREGATABLE_VALUE:
            raise HeaderError("aggregatable_debug_reporting_budget_invalid", f"{shown(config.get('budget'))}")
        return budget, _debug_config_of(config, budget, SOURCE_DEBUG_TYPES, coordinator_origins)
    except HeaderError:
        return 0, None


def _trigger_debug_reporting(header: Mapping[str, Any], coordinator_origins: Sequence[str]
                             ) -> AggregatableDebugConfig | None:
    """A trigger's ``aggregatable_debug_reporting`` (values at most 65,536); an invalid one is ignored."""
    if "aggregatable_debug_reporting" not in header:
        return None
    try:
        return _debug_config_of(header["aggregatable_debug_reporting"], MAX_AGGREGATABLE_VALUE, TRIGGER_DEBUG_TYPES,
                                coordinator_origins)
    except HeaderError:
        return None


def parse_source(
    header: Any, *, time_micros: int, context_origin: str, reporting_origin: str, source_type: str,
    debug_permission: bool = False, coordinator_origins: Sequence[str] = (),
) -> SourceRegistration:
    """The source an ``Attribution-Reporting-Register-Source`` header registers (spec "parse source-registration
    JSON"). ``source_type``: NAVIGATION or EVENT (from the request's Attribution-Reporting-Eligible);
    ``coordinator_origins``: the allowed aggregation coordinators of its aggregatable debug reports, the first the
    default."""
    header = _dict(header, "root_wrong_type")
    debug_budget, debug_config = _source_debug_reporting(header, coordinator_origins)
    destinations = _destinations(header.get("destination"))
    source_event_id = _uint64_string(header["source_event_id"], "source_event_id_value_invalid") \
        if "source_event_id" in header else 0
    priority = _int64_string(header["priority"], "priority_value_invalid") if "priority" in header else 0
    destination_limit_priority = _int64_string(header["destination_limit_priority"],
                                               "destination_limit_priority_invalid") \
        if "destination_limit_priority" in header else 0
    expiry = _expiry(header, source_type)
    start, ends = _event_report_windows(header, source_type, expiry)
    aggregatable_window = expiry
    if "aggregatable_report_window" in header:
        aggregatable_window = _clamp_window(
            _duration(header["aggregatable_report_window"], "aggregatable_report_window_value_invalid"), expiry)
    max_reports = DEFAULT_MAX_REPORTS[source_type]
    if "max_event_level_reports" in header:
        number = _integral_number(header["max_event_level_reports"])
        if number is None or not 0 <= number <= MAX_EVENT_LEVEL_REPORTS:
            raise HeaderError("max_event_level_reports_value_invalid",
                              f"expected an integer in [0, {MAX_EVENT_LEVEL_REPORTS}], got {header['max_event_level_reports']!r}")
        max_reports = number
    epsilon = MAX_EVENT_LEVEL_EPSILON
    if "event_level_epsilon" in header:
        value = header["event_level_epsilon"]
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= MAX_EVENT_LEVEL_EPSILON:
            raise HeaderError("event_level_epsilon_value_invalid", f"expected a number in [0, 14], got {value!r}")
        epsilon = float(value)
    trigger_data, matching = _trigger_data(header, source_type)
    return SourceRegistration(
        time_micros=time_micros,
        source_site=site_of(context_origin),
        source_origin=context_origin,
        reporting_origin=reporting_origin,
        reporting_site=site_of(reporting_origin),
        source_type=source_type,
        source_event_id=source_event_id,
        destination_sites=destinations,
        expiry_seconds=expiry,
        priority=priority,
        destination_limit_priority=destination_limit_priority,
        filter_data=parse_filter_data(header["filter_data"]) if "filter_data" in header else (),
        aggregation_keys=_aggregation_keys(header["aggregation_keys"]) if "aggregation_keys" in header else (),
        event_report_window_start_seconds=start,
        event_report_window_ends=ends,
        aggregatable_report_window_seconds=aggregatable_window,
        max_event_level_reports=max_reports,
        trigger_data=trigger_data,
        trigger_data_matching=matching,
        event_level_epsilon=epsilon,
        debug_key=_debug_key(header.get("debug_key")) if debug_permission else None,
        debug_permission=debug_permission,
        debug_reporting=_bool(header.get("debug_reporting", False), "debug_reporting_value_invalid"),
        attribution_scopes=_attribution_scopes(header["attribution_scopes"]) if "attribution_scopes" in header else None,
        named_budgets=_named_budgets(header["named_budgets"]) if "named_budgets" in header else (),
        aggregatable_debug_budget=debug_budget,
        aggregatable_debug=debug_config,
    )


# --------------------------------------------------------------------------------------------
# Triggers
# --------------------------------------------------------------------------------------------


def _event_trigger_data(value: Any) -> tuple[EventTriggerData, ...]:
    out = []
    for item in _list(value, "event_trigger_data_wrong_type"):
        entry = _dict(item, "event_trigger_data_wrong_type")
        out.append(EventTriggerData(
            trigger_data=_uint64_string(entry["trigger_data"], "trigger_data_value_invalid")
            if "trigger_data" in entry else 0,
            priority=_int64_string(entry["priority"], "event_priority_value_invalid") if "priority" in entry else 0,
            deduplication_key=_uint64_string(entry["deduplication_key"], "event_dedup_key_value_invalid")
            if "deduplication_key" in entry else None,
            filters=parse_filter_pair(entry),
        ))
    return tuple(out)


def _aggregatable_trigger_data(value: Any) -> tuple[AggregatableTriggerData, ...]:
    out = []
    for item in _list(value, "aggregatable_trigger_data_wrong_type"):
        entry = _dict(item, "aggregatable_trigger_data_wrong_type")
        if "key_piece" not in entry:
            raise HeaderError("aggregatable_trigger_data_key_piece_missing", "each entry needs a 'key_piece'")
        names = _list(entry.get("source_keys", []), "aggregatable_trigger_data_source_keys_invalid")
        if any(not isinstance(name, str) for name in names):  # of any length: the limit is on sources' keys
            raise HeaderError("aggregatable_trigger_data_source_keys_invalid", f"{names!r}")
        out.append(AggregatableTriggerData(
            _hex_key(entry["key_piece"], "aggregatable_trigger_data_key_piece_invalid"), tuple(names),
            parse_filter_pair(entry),
        ))
    return tuple(out)


def _aggregatable_value(name: str, value: Any, max_bytes: int) -> tuple[int, int]:
    """(value, filtering id) of one key: a number, or ``{"value": number, "filtering_id": "uint64 string"}`` whose
    filtering id fits in ``max_bytes`` bytes (default 0)."""
    number, filtering_id = value, 0
    if isinstance(value, dict):
        number = value.get("value")
        if "filtering_id" in value:
            filtering_id = _uint64_string(value["filtering_id"], "aggregatable_values_value_invalid")
            if filtering_id >= 256 ** max_bytes:
                raise HeaderError("aggregatable_values_value_invalid",
                                  f"{name!r}: filtering id {filtering_id} does not fit in {max_bytes} bytes")
    integer = _integral_number(number)
    if integer is None or not 1 <= integer <= MAX_AGGREGATABLE_VALUE:
        raise HeaderError("aggregatable_values_value_invalid",
                          f"{name!r}: expected an integer in [1, {MAX_AGGREGATABLE_VALUE}], got {shown(number)}")
    return integer, filtering_id


def _value_dictionary(value: Any, max_bytes: int, filters: FilterPair = NO_FILTERS) -> AggregatableValues:
    values = _dict(value, "aggregatable_values_wrong_type")
    out, filtering_ids = [], []
    for name, item in values.items():  # names of any length: the limit is on sources' keys
        number, filtering_id = _aggregatable_value(name, item, max_bytes)
        out.append((name, number))
        if filtering_id:
            filtering_ids.append((name, filtering_id))
    return AggregatableValues(tuple(out), filters, tuple(filtering_ids))


def _aggregatable_values(value: Any, max_bytes: int) -> tuple[AggregatableValues, ...]:
    if isinstance(value, dict):
        return (_value_dictionary(value, max_bytes),) if value else ()
    out = []
    for item in _list(value, "aggregatable_values_wrong_type"):
        entry = _dict(item, "aggregatable_values_wrong_type")
        out.append(_value_dictionary(entry.get("values"), max_bytes, parse_filter_pair(entry)))
    return tuple(out)


def _filtering_id_max_bytes(header: Mapping[str, Any], registration_time: str) -> int:
    """``aggregatable_filtering_id_max_bytes``: an integer in [1, 8], default 1; another value only with the source
    registration time excluded (spec "parse trigger-registration JSON"; Chrome's
    ``AggregatableFilteringIdsMaxBytes``)."""
    if "aggregatable_filtering_id_max_bytes" not in header:
        return DEFAULT_FILTERING_ID_MAX_BYTES
    value = header["aggregatable_filtering_id_max_bytes"]
    number = _integral_number(value)
    if number is None or not 1 <= number <= MAX_FILTERING_ID_MAX_BYTES:
        raise HeaderError("aggregatable_filtering_id_max_bytes_invalid_value",
                          f"expected an integer in [1, {MAX_FILTERING_ID_MAX_BYTES}], got {shown(value)}")
    if number != DEFAULT_FILTERING_ID_MAX_BYTES and registration_time == INCLUDE:
        raise HeaderError("aggregatable_filtering_ids_max_bytes_invalid_source_registration_time_config",
                          "a filtering id max bytes other than 1 needs the source registration time excluded")
    return number


def _aggregatable_dedup_keys(value: Any) -> tuple[AggregatableDedupKey, ...]:
    out = []
    for item in _list(value, "aggregatable_dedup_key_wrong_type"):
        entry = _dict(item, "aggregatable_dedup_key_wrong_type")
        key = entry.get("deduplication_key")
        out.append(AggregatableDedupKey(
            None if key is None else _uint64_string(key, "aggregatable_dedup_key_value_invalid"),
            parse_filter_pair(entry),
        ))
    return tuple(out)


def parse_trigger(
    header: Any, *, time_micros: int, context_origin: str, reporting_origin: str,
    coordinator_origins: Sequence[str], debug_permission: bool = False,
) -> TriggerRegistration:
    """The trigger an ``Attribution-Reporting-Register-Trigger`` header registers (spec "parse trigger-registration
    JSON"). ``coordinator_origins``: the allowed aggregation coordinators, the first the default."""
    header = _dict(header, "root_wrong_type")
    coordinator = coordinator_origins[0]
    if "aggregation_coordinator_origin" in header:
        value = header["aggregation_coordinator_origin"]
        origin = origin_of(value) if isinstance(value, str) else None
        if origin is None or origin not in coordinator_origins:
            raise HeaderError("aggregation_coordinator_value_invalid", f"{value!r} is not an allowed coordinator")
        coordinator = origin
    registration_time = header.get("aggregatable_source_registration_time", EXCLUDE)
    if registration_time not in (INCLUDE, EXCLUDE):
        raise HeaderError("aggregatable_source_registration_time_value_invalid",
                          f"expected 'include' or 'exclude', got {registration_time!r}")
    context_id = header.get("trigger_context_id")
    if context_id is not None and (
        not isinstance(context_id, str) or len(context_id) > MAX_TRIGGER_CONTEXT_ID or registration_time == INCLUDE
    ):
        raise HeaderError("trigger_context_id_invalid_value",
                          f"a string of at most {MAX_TRIGGER_CONTEXT_ID} characters, only with source registration time excluded")
    max_bytes = _filtering_id_max_bytes(header, registration_time)
    return TriggerRegistration(
        time_micros=time_micros,
        destination_site=site_of(context_origin),
        reporting_origin=reporting_origin,
        reporting_site=site_of(reporting_origin),
        event_trigger_data=_event_trigger_data(header.get("event_trigger_data", [])),
        aggregatable_trigger_data=_aggregatable_trigger_data(header.get("aggregatable_trigger_data", [])),
        aggregatable_values=_aggregatable_values(header.get("aggregatable_values", {}), max_bytes),
        aggregatable_dedup_keys=_aggregatable_dedup_keys(header.get("aggregatable_deduplication_keys", [])),
        filters=parse_filter_pair(header),
        aggregation_coordinator_origin=coordinator,
        source_registration_time=registration_time,
        trigger_context_id=context_id,
        filtering_id_max_bytes=max_bytes,
        debug_key=_debug_key(header.get("debug_key")) if debug_permission else None,
        debug_permission=debug_permission,
        debug_reporting=_bool(header.get("debug_reporting", False), "debug_reporting_value_invalid"),
        attribution_scopes=_trigger_scopes(header["attribution_scopes"]) if "attribution_scopes" in header else (),
        named_budgets=_named_budget_candidates(header["named_budgets"]) if "named_budgets" in header else (),
        aggregatable_debug=_trigger_debug_reporting(header, coordinator_origins),
    )
