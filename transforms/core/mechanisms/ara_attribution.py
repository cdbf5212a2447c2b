"""The Attribution Reporting specification's attribution storage: which stored source a trigger is attributed
to, shared by the event-level and the aggregatable clients' specification modes (W3C/WICG "Attribution
Reporting", "Triggering attribution"; Chrome's ``AttributionStorageSql``).

For a trigger registered at time t on destination site D by reporting origin R:

0. **Source storage limit**: a source is not stored when ``max_sources_per_origin`` unexpired sources of the
   same source origin are (``SourceStorageLimit``).
1. **Matching sources**: the active stored sources of R that list D among their destination sites, registered
   at or before t and not expired (t < registration + expiry).
2. **The source to attribute**: of those, the one of highest priority, ties to the most recently registered.
3. **Top-level filters**: the trigger's ``filters`` / ``not_filters`` must match that source's filter data
   (``filters_match``); if not, the trigger is attributed to nothing.
4. **Deactivation**: otherwise every other matching source is deactivated ("losing sources"): no later
   trigger can be attributed to it.
5. Each part (``AttributionPart``: event-level, aggregatable) then decides, on its own state of that source,
   what reports the trigger makes. A part sees unattributed triggers too (for null reports).

Filter matching (spec "match an attribution source's filter data against a filter config"): for each key of a
filter config that the source's filter data has (``source_type`` always: the source's type), the filter values
must intersect the source's (an empty list matches only an empty list); negated (``not_filters``), they must be
disjoint (an empty list matches only a non-empty one). ``_lookback_window``: the trigger at most that long after
the source (negated: longer). A list of configs matches when any one does.

No Beam, no codecs, no I/O here.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from schemas.registrations import FilterConfig, FilterPair, SourceRegistration, TriggerRegistration
from schemas.time_units import MICROS_PER_SECOND

SOURCE_TYPE_KEY = "source_type"


def _config_matches(source: SourceRegistration, trigger_time_micros: int, config: FilterConfig, negated: bool) -> bool:
    if config.lookback_window_micros is not None:
        within = trigger_time_micros - source.time_micros <= config.lookback_window_micros
        if within == negated:
            return False
    data = dict(source.filter_data)
    data[SOURCE_TYPE_KEY] = (source.source_type,)
    for key, values in config.values:
        source_values = data.get(key)
        if source_values is None:
            continue  # a key the source does not have does not filter
        if not values:
            matched = bool(source_values) if negated else not source_values
        else:
            disjoint = set(values).isdisjoint(source_values)
            matched = disjoint if negated else not disjoint
        if not matched:
            return False
    return True


def _any_matches(source: SourceRegistration, trigger_time_micros: int, configs: Sequence[FilterConfig], negated: bool) -> bool:
    return not configs or any(_config_matches(source, trigger_time_micros, config, negated) for config in configs)


def filters_match(source: SourceRegistration, trigger_time_micros: int, pair: FilterPair) -> bool:
    """Whether ``pair`` (filters and not_filters) matches ``source`` for a trigger at ``trigger_time_micros``."""
    return (_any_matches(source, trigger_time_micros, pair.filters, negated=False)
            and _any_matches(source, trigger_time_micros, pair.not_filters, negated=True))


@dataclass(eq=False)
class StoredSource:
    """A source in the storage: its registration, whether it is still active, and each part's state of it."""

    registration: SourceRegistration
    index: int  # registration order
    expires_micros: int
    states: list[Any] = field(default_factory=list)  # one per part, in the storage's part order
    active: bool = True


class AttributionPart(Protocol):
    """One kind of report (event-level, aggregatable) of the specification's attribution."""

    def register_source(self, source: SourceRegistration, choice: Any) -> Any:
        """The part's state of a newly stored source; ``choice`` fixes the part's randomness for it (or None
        to draw it)."""

    def attribute(self, source: SourceRegistration | None, state: Any, trigger: TriggerRegistration, choice: Any) -> None:
        """Handle ``trigger``, attributed to ``source`` (whose part state is ``state``), or to nothing (both
        None); ``choice`` fixes the part's randomness for it (or None to draw it)."""

    def release(self, until_micros: int) -> list[Any]:
        """The reports whose report time is at or before ``until_micros``, no longer replaceable."""


class SourceStorageLimit(ValueError):
    """A source the storage refuses: its origin already has ``max_sources_per_origin`` unexpired sources."""

    reason = "source_storage_limit"


@dataclass
class AttributionStorage:
    """A browser's attribution storage for one device: the stored sources and the parts' states of them."""

    parts: Sequence[AttributionPart]
    max_sources_per_origin: int = 1024
    sources: list[StoredSource] = field(default_factory=list)
    registered: int = 0  # sources ever stored: the next one's registration order

    def register_source(self, source: SourceRegistration, choices: Sequence[Any] | None = None) -> StoredSource:
        """Store ``source``; ``choices``: one per part (see ``AttributionPart.register_source``)."""
        choices = choices or [None] * len(self.parts)
        stored_of_origin = sum(1 for stored in self.sources if stored.registration.source_origin == source.source_origin
                               and stored.expires_micros > source.time_micros)
        if stored_of_origin >= self.max_sources_per_origin:
            raise SourceStorageLimit(f"{source.source_origin} has {stored_of_origin} sources stored")
        stored = StoredSource(source, self.registered, source.time_micros + source.expiry_seconds * MICROS_PER_SECOND)
        self.registered += 1
        stored.states = [part.register_source(source, choice) for part, choice in zip(self.parts, choices, strict=True)]
        self.sources.append(stored)
        return stored

    def matching_sources(self, trigger: TriggerRegistration) -> list[StoredSource]:
        """Step 1: the active sources of the trigger's reporting origin and destination, live at its time."""
        return [
            stored for stored in self.sources
            if stored.active
            and stored.registration.reporting_origin == trigger.reporting_origin
            and trigger.destination_site in stored.registration.destination_sites
            and stored.registration.time_micros <= trigger.time_micros < stored.expires_micros
        ]

    def register_trigger(self, trigger: TriggerRegistration, choices: Sequence[Any] | None = None) -> StoredSource | None:
        """Steps 1 to 5; the source the trigger was attributed to, or None."""
        choices = choices or [None] * len(self.parts)
        matching = self.matching_sources(trigger)
        chosen = max(matching, key=lambda stored: (stored.registration.priority, stored.index), default=None)
        if chosen is not None and not filters_match(chosen.registration, trigger.time_micros, trigger.filters):
            chosen = None
        if chosen is not None:
            for stored in matching:
                if stored is not chosen:
                    stored.active = False
        for position, (part, choice) in enumerate(zip(self.parts, choices, strict=True)):
            if chosen is None:
                part.attribute(None, None, trigger, choice)
            else:
                part.attribute(chosen.registration, chosen.states[position], trigger, choice)
        return chosen

    def release(self, until_micros: int) -> list[Any]:
        """Every part's reports due by ``until_micros``."""
        return [report for part in self.parts for report in part.release(until_micros)]

    def forget_expired(self, now_micros: int) -> None:
        """Drop the sources expired by ``now_micros`` (their reports stay with the parts)."""
        self.sources = [stored for stored in self.sources if stored.expires_micros > now_micros]


def split_due(reports: list[Any], until_micros: int) -> tuple[list[Any], list[Any]]:
    """(the reports due by ``until_micros`` in report-time order, the others): what a part releases."""
    due = sorted((r for r in reports if r.report_time_micros <= until_micros), key=lambda r: r.report_time_micros)
    return due, [r for r in reports if r.report_time_micros > until_micros] if due else reports


def replay(storage: AttributionStorage, events: Iterable[tuple[Any, Sequence[Any] | None]]
           ) -> tuple[list[Any], list[tuple[SourceRegistration, ValueError]]]:
    """Feed (registration, choices) pairs in time order to ``storage`` and release every report: the reports in
    the order they are released, and the sources a part refused (``ValueError``: e.g. an event-level
    configuration above its channel capacity), which are not stored, as the specification drops them."""
    reports: list[Any] = []
    refused: list[tuple[SourceRegistration, ValueError]] = []
    for registration, choices in events:
        reports.extend(storage.release(registration.time_micros - 1))
        if isinstance(registration, SourceRegistration):
            try:
                storage.register_source(registration, choices)
            except ValueError as error:
                refused.append((registration, error))
        else:
            storage.register_trigger(registration, choices)
    reports.extend(storage.release(2**63 - 1))
    return reports, refused
