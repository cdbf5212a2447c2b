"""Attribution Reporting registrations as the browser holds them once their headers are parsed: sources and
triggers with the Attribution Reporting API specification's fields (W3C/WICG "Attribution Reporting", sections
"Attribution source" and "Attribution trigger"; Chrome's ``attribution_reporting::SourceRegistration`` and
``TriggerRegistration``).

``schemas.registration_headers`` builds them from ``Attribution-Reporting-Register-Source`` /
``-Register-Trigger`` header JSON; the clients' specification modes
(``transforms.event_level.mechanisms.ara_spec``, ``transforms.summary_reports.mechanisms.ara_spec``) read them.
Plain immutable records (NamedTuples: a parse builds several per registration, and a NamedTuple is three times
quicker to build than a frozen dataclass), no parsing and no I/O here. Times: integer microseconds since the Unix
epoch; durations in seconds, as the headers give them.
"""
from __future__ import annotations

from typing import NamedTuple

NAVIGATION = "navigation"
EVENT = "event"
INCLUDE = "include"  # aggregatable_source_registration_time
EXCLUDE = "exclude"


class FilterConfig(NamedTuple):
    """One filter of a ``filters`` / ``not_filters`` list: filter key -> values (sorted by key), and the
    ``_lookback_window`` in microseconds if given (spec: "filter config")."""

    values: tuple[tuple[str, tuple[str, ...]], ...] = ()
    lookback_window_micros: int | None = None


class FilterPair(NamedTuple):
    """``filters`` and ``not_filters``: matches when some config of ``filters`` matches (or there is none) and
    some config of ``not_filters`` matches negated (or there is none) (spec: "match an attribution source
    against filters and negated filters")."""

    filters: tuple[FilterConfig, ...] = ()
    not_filters: tuple[FilterConfig, ...] = ()


NO_FILTERS = FilterPair()


class AttributionScopes(NamedTuple):
    """A source's ``attribution_scopes`` (spec "attribution scopes"): at most ``limit`` distinct scope values live
    per reporting origin and destination, its own ``values`` (sorted, distinct), and ``max_event_states``, the
    trigger states an event source may have and every source of the same scopes must share."""

    limit: int
    values: tuple[str, ...]
    max_event_states: int = 3


class AggregatableDebugConfig(NamedTuple):
    """A registration's ``aggregatable_debug_reporting`` (spec "aggregatable debug reporting config"): the key
    piece of every contribution, the (debug data type, key piece, value) it reports per type listed, the (key
    piece, value) of every other type of its kind when it lists ``unspecified``, and where its reports go to be
    aggregated."""

    key_piece: int
    data: tuple[tuple[str, int, int], ...]  # sorted by type
    aggregation_coordinator_origin: str
    unspecified: tuple[int, int] | None = None

    @property
    def reports_any(self) -> bool:
        """Whether some type has data: else the registration sends no aggregatable debug report."""
        return bool(self.data) or self.unspecified is not None

    def data_of(self, kind: str) -> tuple[int, int] | None:
        """(key piece, value) of debug data type ``kind`` (of the registration's kind), or None."""
        for listed, piece, value in self.data:
            if listed == kind:
                return piece, value
        return self.unspecified


class SourceRegistration(NamedTuple):
    """An attribution source as registered (spec "attribution source"), its durations already clamped and
    rounded as the specification says (``registration_headers.parse_source``)."""

    time_micros: int
    source_site: str  # scheme://registrable domain of the page that registered it
    source_origin: str  # the origin of that page
    reporting_origin: str
    reporting_site: str  # the registrable domain of the reporting origin, as rate limits key it
    source_type: str  # NAVIGATION or EVENT
    source_event_id: int
    destination_sites: tuple[str, ...]
    expiry_seconds: int
    priority: int = 0
    destination_limit_priority: int = 0  # ranks its destinations under the unexpired destination limit
    filter_data: tuple[tuple[str, tuple[str, ...]], ...] = ()  # sorted by key; "source_type" is implied
    aggregation_keys: tuple[tuple[str, int], ...] = ()  # key id -> 128-bit key, in header order
    event_report_window_start_seconds: int = 0
    event_report_window_ends: tuple[int, ...] = ()  # seconds after registration, strictly increasing
    aggregatable_report_window_seconds: int = 0
    max_event_level_reports: int = 0
    trigger_data: tuple[int, ...] = ()  # the trigger data values the source reports
    trigger_data_matching: str = "modulus"  # or "exact"
    event_level_epsilon: float = 14.0
    debug_key: int | None = None  # kept only with debug permission
    debug_permission: bool = False  # the registration could set debug keys (Chrome: third-party cookies allowed)
    debug_reporting: bool = False
    attribution_scopes: AttributionScopes | None = None
    named_budgets: tuple[tuple[str, int], ...] = ()  # name -> its share of the L1 budget, sorted by name
    aggregatable_debug_budget: int = 0  # set aside from the L1 budget for its aggregatable debug reports
    aggregatable_debug: AggregatableDebugConfig | None = None


class EventTriggerData(NamedTuple):
    """One entry of a trigger's ``event_trigger_data``."""

    trigger_data: int = 0
    priority: int = 0
    deduplication_key: int | None = None
    filters: FilterPair = NO_FILTERS


class AggregatableTriggerData(NamedTuple):
    """One entry of ``aggregatable_trigger_data``: a key piece ORed into the named source keys."""

    key_piece: int
    source_keys: tuple[str, ...] = ()
    filters: FilterPair = NO_FILTERS


class AggregatableValues(NamedTuple):
    """One entry of ``aggregatable_values`` (the dictionary form is one entry without filters)."""

    values: tuple[tuple[str, int], ...]
    filters: FilterPair = NO_FILTERS
    filtering_ids: tuple[tuple[str, int], ...] = ()  # (key name, filtering id) for the ids other than 0


class AggregatableDedupKey(NamedTuple):
    """One entry of ``aggregatable_deduplication_keys``; a matching entry without a key deduplicates nothing."""

    deduplication_key: int | None = None
    filters: FilterPair = NO_FILTERS


class NamedBudgetCandidate(NamedTuple):
    """One entry of a trigger's ``named_budgets``: the first whose filters match the source names the budget its
    report is charged to (None, or a name the source lacks: none)."""

    name: str | None
    filters: FilterPair = NO_FILTERS


class TriggerRegistration(NamedTuple):
    """An attribution trigger as registered (spec "attribution trigger")."""

    time_micros: int
    destination_site: str
    reporting_origin: str
    reporting_site: str  # the registrable domain of the reporting origin, as rate limits key it
    event_trigger_data: tuple[EventTriggerData, ...] = ()
    aggregatable_trigger_data: tuple[AggregatableTriggerData, ...] = ()
    aggregatable_values: tuple[AggregatableValues, ...] = ()
    aggregatable_dedup_keys: tuple[AggregatableDedupKey, ...] = ()
    filters: FilterPair = NO_FILTERS
    aggregation_coordinator_origin: str = ""
    source_registration_time: str = EXCLUDE  # INCLUDE: the day-rounded source time goes into shared_info
    trigger_context_id: str | None = None
    filtering_id_max_bytes: int = 1  # aggregatable_filtering_id_max_bytes: a filtering id is below 256 ** this
    debug_key: int | None = None  # kept only with debug permission
    debug_permission: bool = False
    debug_reporting: bool = False
    attribution_scopes: tuple[str, ...] = ()  # sorted, distinct; empty: it matches sources of any scopes
    named_budgets: tuple[NamedBudgetCandidate, ...] = ()
    aggregatable_debug: AggregatableDebugConfig | None = None

    @property
    def has_aggregatable_data(self) -> bool:
        """Whether the trigger asks for an aggregatable report at all (spec: its aggregatable values are not
        empty); only such a trigger can produce null reports."""
        return bool(self.aggregatable_trigger_data) or any(entry.values for entry in self.aggregatable_values)


def debug_keys(source: SourceRegistration, trigger: TriggerRegistration | None) -> tuple[int | None, int | None]:
    """The (source, trigger) debug keys a report carries: both, when both registrations set one (each only with
    debug permission), else none (Chrome; the interop cases ``success_debug_*``). A fake report has none."""
    if trigger is None or source.debug_key is None or trigger.debug_key is None:
        return None, None
    return source.debug_key, trigger.debug_key
