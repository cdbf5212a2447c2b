"""The event-level client in the Attribution Reporting specification's mode: registrations as Chrome receives
them (``schemas.registrations``), reports as Chrome sends them (W3C/WICG "Attribution Reporting", "Triggering
event-level attribution"; Chrome's ``AttributionStorageSql::MaybeCreateEventLevelReport``).

Ghazi et al.'s Alg. 4 (``client.py``) is the same mechanism in its general form (summary buckets over trigger
values). With the specification's defaults (one report per attributed trigger, up to the source's
``max_event_level_reports``) it decides the same reports, except for what the specification adds and this
module implements:

* **Trigger data selection**: the first ``event_trigger_data`` entry whose filters match the source.
* **Deduplication**: an entry whose ``deduplication_key`` the source has already reported is dropped.
* **Report windows**: the trigger must fall in [start, last end) after the source; its report is due at the end
  of the window it falls in (``event_report_window_ends``).
* **Trigger data mapping**: ``modulus`` (trigger data mod the number of values) or ``exact``.
* **Randomized response**: a source whose randomized response is not "truthful" sends its fake reports
  (chosen at registration, Alg. 8) and no real one.
* **Attribution scopes**: a source with scopes is refused when it is an event source of more trigger states than
  its ``max_event_states``, or when log2(|O| + max_event_states * (limit - 1)) bits exceed the scopes' channel
  capacity (``scopes_capacity_bits``): what a reporting origin learns across the ``limit`` scopes it may keep
  live.
* **Priority and replacement**: once the source has ``max_event_level_reports`` reports, a trigger whose
  priority is higher than the lowest of the source's pending reports due at the same time replaces it (the
  most recent of equally low ones); otherwise it is dropped.
* **Storage limit**: at most ``max_reports_per_destination`` unsent reports per destination site (a
  replacement adds none).
* **Attribution rate limit**: at most ``max_attributions`` event-level attributions per (source site,
  destination site, reporting site) in ``rate_limit_window_micros`` before the trigger (a replaced report gives
  its attribution back). An attribution is dated by its source's registration time, as Chrome's rate-limit
  records are (the interop case ``rate_limit_max_attributions`` depends on it).

Every trigger's outcome (``outcomes``) is counted under the specification's result names. No Beam import here.
"""
from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from schemas.registrations import EVENT, NAVIGATION, SourceRegistration, TriggerRegistration, debug_keys
from schemas.time_units import MICROS_PER_SECOND
from transforms.core.mechanisms.ara_attribution import (
    MAX_ATTRIBUTIONS,
    RATE_LIMIT_WINDOW_MICROS,
    AttributionRateLimit,
    PartResult,
    SourceRemoval,
    filters_match,
    split_due,
)
from transforms.core.mechanisms.noise import RandomSource
from transforms.event_level.mechanisms.config import (
    MAX_EPSILON,
    MAX_STATES,
    ConfigurationError,
    EventLevelConfig,
    uniform_config,
)
from transforms.event_level.mechanisms.information_gain import ConfigurationCheck, check_configuration
from transforms.event_level.mechanisms.randomized_response import randomized_response

CHANNEL_CAPACITY_BITS = {NAVIGATION: 11.46173, EVENT: 6.5}  # Chrome's default limits (interop default_config)
SCOPES_CHANNEL_CAPACITY_BITS = {NAVIGATION: 11.55, EVENT: 6.5}  # the same, for sources with attribution scopes
MAX_REPORTS_PER_DESTINATION = 1024


@dataclass(frozen=True)
class SpecEventReport:
    """An event-level report as the browser sends it (spec "event-level report")."""

    reporting_origin: str
    attribution_destination: tuple[str, ...]  # the source's destination sites
    source_event_id: int
    trigger_data: int
    source_type: str
    randomized_trigger_rate: float
    report_time_micros: int  # the end of the report window: also ``scheduled_report_time``
    trigger_time_micros: int
    destination_site: str  # the trigger's (empty for a fake report), as the storage limit counts it
    trigger_priority: int = 0
    source_debug_key: int | None = None
    trigger_debug_key: int | None = None


@dataclass
class SpecEventSource:
    """The event-level state of one stored source."""

    config: EventLevelConfig
    rate: float
    fake: list[SpecEventReport] | None  # None: truthful (Alg. 8's ⊥)
    pending: list[SpecEventReport] = field(default_factory=list)  # its real reports not yet sent
    reports: int = 0  # reports created for it, fake ones included
    dedup_keys: set[int] = field(default_factory=set)


def source_config(source: SourceRegistration) -> EventLevelConfig:
    """The source's output space O (Sec. 2.2): its trigger data, windows and max_event_level_reports. A source
    with no trigger data (``"trigger_data": []``, which Chrome stores) can make no report: one output, none."""
    if not source.trigger_data:
        return _config(source.source_type, source.expiry_seconds, 0, (0,), source.event_report_window_ends, "modulus")
    return _config(source.source_type, source.expiry_seconds, source.max_event_level_reports, source.trigger_data,
                   source.event_report_window_ends, source.trigger_data_matching)


# Sources share a few configurations (the defaults above all): building and checking one is most of a source's
# registration, so both are memoised (the configuration and its check are immutable).
@functools.lru_cache(maxsize=4096)
def _config(source_type: str, expiry_seconds: int, max_reports: int, trigger_data: tuple[int, ...],
            window_ends: tuple[int, ...], matching: str) -> EventLevelConfig:
    return uniform_config(source_type, expiry_seconds=expiry_seconds, max_event_level_reports=max_reports,
                          trigger_data=trigger_data, window_ends=window_ends, matching=matching)


@functools.lru_cache(maxsize=4096)
def _checked(config: EventLevelConfig, epsilon: float, capacity_bits: float) -> ConfigurationCheck:
    return check_configuration(config, epsilon, capacity_bits)


def _window_start(source: SourceRegistration, window: int) -> int:
    """When report window ``window`` of ``source`` opens: a fake report's trigger time (Chrome dates it so)."""
    seconds = source.event_report_window_start_seconds if window == 0 else source.event_report_window_ends[window - 1]
    return source.time_micros + seconds * MICROS_PER_SECOND


def window_index(source: SourceRegistration, trigger_time_micros: int) -> int | str:
    """The index of the report window ``trigger_time_micros`` falls in, or why none."""
    elapsed = trigger_time_micros - source.time_micros
    if elapsed < source.event_report_window_start_seconds * MICROS_PER_SECOND:
        return "report_window_not_started"
    for index, end in enumerate(source.event_report_window_ends):
        if elapsed < end * MICROS_PER_SECOND:
            return index
    return "report_window_passed"


@dataclass
class SpecEventLevel:
    """The event-level ``AttributionPart`` of ``transforms.core.mechanisms.ara_attribution``.

    ``random_source`` draws each source's randomized response (Alg. 8) when the caller does not fix it;
    ``capacity_bits``: the channel capacity limits per source type (a source above its limit is refused,
    ``ConfigurationError``); the rate limit as described in the module docstring."""

    random_source: RandomSource | None = None
    capacity_bits: dict[str, float] = field(default_factory=lambda: dict(CHANNEL_CAPACITY_BITS))
    scopes_capacity_bits: dict[str, float] = field(default_factory=lambda: dict(SCOPES_CHANNEL_CAPACITY_BITS))
    max_epsilon: float = MAX_EPSILON  # the browser's largest settable epsilon: a source's is capped to it
    max_trigger_states: int = MAX_STATES  # the largest output set |O| a source may have
    max_attributions: int = MAX_ATTRIBUTIONS
    rate_limit_window_micros: int = RATE_LIMIT_WINDOW_MICROS
    max_reports_per_destination: int = MAX_REPORTS_PER_DESTINATION
    outcomes: Counter = field(default_factory=Counter)
    results: list[PartResult] = field(default_factory=list)  # each trigger's, in the order they came
    _due: list[SpecEventReport] = field(default_factory=list)  # every report not yet released
    _rate_limit: AttributionRateLimit = field(init=False)

    def __post_init__(self) -> None:
        self._rate_limit = AttributionRateLimit(self.max_attributions, self.rate_limit_window_micros)

    def register_source(self, source: SourceRegistration, choice: Sequence[tuple[int, int]] | None) -> SpecEventSource:
        """``prepare_source`` then ``store_source``: the state of a source stored at once."""
        state = self.prepare_source(source, choice)
        self.store_source(source, state)
        return state

    def prepare_source(self, source: SourceRegistration, choice: Sequence[tuple[int, int]] | None) -> SpecEventSource:
        """The source's state, its randomized response drawn: ``ConfigurationError`` when the browser refuses its
        configuration (``check``). ``choice``: its randomized response fixed by the caller, as (trigger data, window
        index) fake reports (an empty list: no report; None: draw it from ``random_source``, or truthful when
        there is none)."""
        config, epsilon, checked = self.check(source)
        fake: list[tuple[int, int]] | None
        if choice is not None:
            fake = list(choice)
        elif self.random_source is not None:
            output = randomized_response(config, epsilon, self.random_source)
            fake = None if output is None else [
                (config.trigger_specs[t].value, w) for (t, w), n in zip(config.cells, output, strict=True) for _ in range(n)
            ]
        else:
            fake = None
        state = SpecEventSource(config, checked.randomized_trigger_rate, None)
        if fake is not None:
            state.fake = [self._report(source, state, data, window, None) for data, window in fake]
            state.reports = len(state.fake)
        return state

    def store_source(self, source: SourceRegistration, state: SpecEventSource) -> None:
        """A stored source's fake reports are due, and count against the attribution rate limit."""
        if state.fake is not None:
            self._due.extend(state.fake)
            self._rate_limit.record_noised(source)

    def remove_source(self, source: SourceRegistration, state: SpecEventSource, removal: SourceRemoval) -> None:
        """The source's pending reports triggered at or after its removal are dropped, with the attribution
        records of the real ones (spec "delete sources for unexpired destination limit", "remove associated
        event-level reports": fake reports are dated at their window's start; their records stay)."""
        dropped = [r for r in (state.fake or []) + state.pending if r.trigger_time_micros >= removal.time_micros]
        if not dropped:
            return
        self._due = [r for r in self._due if not any(r is report for report in dropped)]
        state.pending = [r for r in state.pending if not any(r is report for report in dropped)]
        for report in dropped:
            self._rate_limit.forget(report)

    def check(self, source: SourceRegistration) -> tuple[EventLevelConfig, float, ConfigurationCheck]:
        """The source's configuration, epsilon (capped at ``max_epsilon``) and check; ``ConfigurationError``
        (reason ``information_gain_too_high``, ...) when the browser refuses the source."""
        config = source_config(source)
        epsilon = min(source.event_level_epsilon, self.max_epsilon)
        checked = _checked(config, epsilon, self.capacity_bits[source.source_type])
        if checked.states > self.max_trigger_states:
            raise ConfigurationError("too_many_states", f"|O| = {checked.states} exceeds {self.max_trigger_states}")
        if source.attribution_scopes is not None:
            self._check_scopes(source, checked.states)
        return config, epsilon, checked

    def _check_scopes(self, source: SourceRegistration, states: int) -> None:
        """Attribution scopes' privacy checks (spec "process an attribution source"): an event source has at most
        ``max_event_states`` trigger states, and the channel capacity of the outputs a reporting origin can tell
        apart across ``limit`` scopes, log2(|O| + max_event_states * (limit - 1)), is within the scopes' limit."""
        scopes = source.attribution_scopes
        assert scopes is not None
        if source.source_type == EVENT and states > scopes.max_event_states:
            raise ConfigurationError("max_event_states_exceeded",
                                     f"|O| = {states} exceeds max_event_states {scopes.max_event_states}")
        bits = math.log2(states + scopes.max_event_states * (scopes.limit - 1))
        if bits > self.scopes_capacity_bits[source.source_type]:
            raise ConfigurationError("scopes_channel_capacity_exceeded",
                                     f"{bits:.4f} bits exceed {self.scopes_capacity_bits[source.source_type]}")

    def _report(self, source: SourceRegistration, state: SpecEventSource, trigger_data: int, window: int,
                trigger: TriggerRegistration | None, priority: int = 0) -> SpecEventReport:
        return SpecEventReport(
            source.reporting_origin, source.destination_sites, source.source_event_id, trigger_data, source.source_type,
            state.rate, source.time_micros + source.event_report_window_ends[window] * MICROS_PER_SECOND,
            _window_start(source, window) if trigger is None else trigger.time_micros,
            "" if trigger is None else trigger.destination_site, priority, *debug_keys(source, trigger),
        )

    def attribute(self, source: SourceRegistration | None, state: SpecEventSource | None,
                  trigger: TriggerRegistration, choice: object = None, refused: str | None = None) -> bool:
        """The specification's event-level attribution of ``trigger`` (``refused``: a rate limit of the storage
        refuses it); whether a report was made."""
        outcome, would_be = self._attribute(source, state, trigger, refused)
        self.outcomes[outcome] += 1
        self.results.append(PartResult(outcome, would_be))
        return outcome.startswith("success")

    def _attribute(self, source: SourceRegistration | None, state: SpecEventSource | None,
                   trigger: TriggerRegistration, refused: str | None) -> tuple[str, SpecEventReport | None]:
        """The outcome, with the report the trigger made (a success) or would have made when the source's reports
        left it none (``excessive_reports``, ``priority_too_low``: what their debug reports carry)."""
        if not trigger.event_trigger_data:
            return "not_registered", None
        if source is None or state is None:
            return "no_matching_sources", None
        entry = next((e for e in trigger.event_trigger_data if filters_match(source, trigger.time_micros, e.filters)), None)
        if entry is None:
            return "no_matching_configurations", None
        if entry.deduplication_key is not None and entry.deduplication_key in state.dedup_keys:
            return "deduplicated", None
        window = window_index(source, trigger.time_micros)
        if isinstance(window, str):
            return window, None
        spec = state.config.spec_for(entry.trigger_data) if source.trigger_data else None
        if spec is None:
            return "no_matching_trigger_data", None
        if state.fake is not None:  # its rate limit first: its registration counted against it
            if not self._rate_limit.allows(source, trigger):
                return "excessive_attributions", None
            return "falsely_attributed_source" if state.fake else "never_attributed_source", None
        report = self._report(source, state, spec.value, window, trigger, entry.priority)
        state.pending = [r for r in state.pending if r.report_time_micros > trigger.time_micros]  # sent: final
        replaced = None
        if state.reports >= source.max_event_level_reports:
            same_time = [r for r in state.pending if r.report_time_micros == report.report_time_micros]
            if not same_time:
                return "excessive_reports", report
            replaced = min(same_time, key=lambda r: (r.trigger_priority, -r.trigger_time_micros))
            if replaced.trigger_priority >= entry.priority:
                return "priority_too_low", report
        if refused is not None:
            return refused, None
        if not self._rate_limit.allows(source, trigger, ignoring=replaced):
            return "excessive_attributions", None
        if replaced is None and sum(1 for r in self._due if r.destination_site == trigger.destination_site) \
                >= self.max_reports_per_destination:
            return "no_capacity_for_conversion_destination", None
        if replaced is not None:
            state.pending = [r for r in state.pending if r is not replaced]
            self._due = [r for r in self._due if r is not replaced]
            self._rate_limit.forget(replaced)
        else:
            state.reports += 1
        state.pending.append(report)
        self._due.append(report)
        self._rate_limit.record(source, trigger, report)
        if entry.deduplication_key is not None:
            state.dedup_keys.add(entry.deduplication_key)
        return ("success_dropped_lower_priority" if replaced is not None else "success"), report

    def release(self, until_micros: int) -> list[SpecEventReport]:
        """The reports due by ``until_micros``, in report-time order; they can no longer be replaced."""
        due, self._due = split_due(self._due, until_micros)
        return due

