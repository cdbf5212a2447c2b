"""The Attribution Reporting specification's attribution storage: which stored source a trigger is attributed
to, shared by the event-level and the aggregatable clients' specification modes (W3C/WICG "Attribution
Reporting", "Triggering attribution"; Chrome's ``AttributionStorageSql``).

For a trigger registered at time t on destination site D by reporting origin R:

0. **Source limits**, in the specification's order ("process an attribution source"): each part's privacy checks
   (an event-level configuration above its channel capacity); the storage limit (``OriginLimits``:
   ``sources_per_origin`` active unexpired sources of its source origin); its reporting origin one too many for
   its (source site, reporting site) in a day; the destination limits (``DestinationLimits``: distinct
   destinations per source site and reporting site in the time window, then in a day; then the unexpired
   destination limit, under which the source replaces older sources (``SourceRemoval``) or is refused); last, the
   limits shared across reporting sites (after the source's attribution scopes have cleared or removed older
   sources' scopes, which stands too): the destinations of its source site in the time window, and its reporting
   origin one too many for its (source site, destination site) in 30 days. A refused source is not stored
   (``SourceOutcome.refusal``, a ``SourceRefused``); the replacements stand even when a last limit refuses it.
1. **Matching sources**: the active stored sources of R that list D among their destination sites, registered
   at or before t and not expired (t < registration + expiry).
2. **The source to attribute**: of those whose attribution scopes match the trigger's (any, when the trigger has
   none), the one of highest priority, ties to the most recently registered.
3. **Top-level filters**: the trigger's ``filters`` / ``not_filters`` must match that source's filter data
   (``filters_match``); if not, the trigger is attributed to nothing.
4. **Deactivation**: otherwise every other matching source is deactivated ("losing sources"): no later
   trigger can be attributed to it. An attribution whose reporting origin would be one too many for its (source
   site, destination site) in 30 days is refused (``excessive_reporting_origins``).
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
from typing import Any, NamedTuple, Protocol

from schemas.registrations import AttributionScopes, FilterConfig, FilterPair, SourceRegistration, TriggerRegistration
from schemas.time_units import MICROS_PER_DAY, MICROS_PER_SECOND

SOURCE_TYPE_KEY = "source_type"


def _config_matches(source: SourceRegistration, data: dict[str, tuple[str, ...]], trigger_time_micros: int,
                    config: FilterConfig, negated: bool) -> bool:
    if config.lookback_window_micros is not None:
        within = trigger_time_micros - source.time_micros <= config.lookback_window_micros
        if within == negated:
            return False
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


def filters_match(source: SourceRegistration, trigger_time_micros: int, pair: FilterPair) -> bool:
    """Whether ``pair`` (filters and not_filters) matches ``source`` for a trigger at ``trigger_time_micros``."""
    if not pair.filters and not pair.not_filters:
        return True
    data = {**dict(source.filter_data), SOURCE_TYPE_KEY: (source.source_type,)}  # once per pair, not per config
    return all(
        not configs or any(_config_matches(source, data, trigger_time_micros, config, negated) for config in configs)
        for configs, negated in ((pair.filters, False), (pair.not_filters, True))
    )


@dataclass(eq=False)
class StoredSource:
    """A source in the storage: its registration, whether it is still active, and each part's state of it."""

    registration: SourceRegistration
    index: int  # registration order
    expires_micros: int
    states: list[Any] = field(default_factory=list)  # one per part, in the storage's part order
    active: bool = True
    replaced: bool = False  # removed under the unexpired destination limit: no longer counted by that limit
    scopes: AttributionScopes | None = None  # its attribution scopes, until a newer source without any clears them

    def __post_init__(self) -> None:
        self.scopes = self.registration.attribution_scopes

    def matches_scopes(self, trigger: TriggerRegistration) -> bool:
        """A trigger with scopes matches only a source whose scopes share one (spec "check if an attribution
        source and attribution trigger have matching attribution scopes"); one without matches any source."""
        if not trigger.attribution_scopes:
            return True
        return self.scopes is not None and not set(self.scopes.values).isdisjoint(trigger.attribution_scopes)


class SourceRemoval(NamedTuple):
    """Why and when the storage removed a stored source before its expiry, for the parts to drop what the
    specification drops with it: ``reason`` DESTINATION_LIMIT (a newer source took its place under the unexpired
    destination limit) or ATTRIBUTION_SCOPES (its scopes are incompatible with a newer source's)."""

    reason: str
    time_micros: int


DESTINATION_LIMIT = "destination_limit"
ATTRIBUTION_SCOPES = "attribution_scopes"


class AttributionPart(Protocol):
    """One kind of report (event-level, aggregatable) of the specification's attribution."""

    def prepare_source(self, source: SourceRegistration, choice: Any) -> Any:
        """The part's state of a source about to be stored, without storing it (``store_source`` does);
        ``choice`` fixes the part's randomness for it (or None to draw it). A ``ValueError`` when the part refuses
        the source (the specification's privacy checks, which come before every storage limit)."""

    def store_source(self, source: SourceRegistration, state: Any) -> None:
        """Store ``source`` with the state ``prepare_source`` gave."""

    def remove_source(self, source: SourceRegistration, state: Any, removal: SourceRemoval) -> None:
        """``source`` was removed from the storage (``removal``): drop the pending reports the specification
        drops with it, and their attribution records."""

    def attribute(self, source: SourceRegistration | None, state: Any, trigger: TriggerRegistration, choice: Any,
                  refused: str | None = None) -> bool:
        """Handle ``trigger``, attributed to ``source`` (whose part state is ``state``), or to nothing (both
        None); ``choice`` fixes the part's randomness for it (or None to draw it); ``refused``: why the storage
        refuses the attribution (a rate limit), if it does. Whether a report was made for it."""

    def release(self, until_micros: int) -> list[Any]:
        """The reports whose report time is at or before ``until_micros``, no longer replaceable."""


class PartResult(NamedTuple):
    """What one part made of one trigger: its outcome (the specification's result name, in snake case) and the
    report it made, or, when the outcome is about a report not made for want of room, that report (what its debug
    report shows)."""

    outcome: str
    report: Any = None
    named_budget: tuple[str, int] | None = None  # insufficient_named_budget: the source's budget (name, amount)


RATE_LIMIT_WINDOW_MICROS = 30 * MICROS_PER_DAY
MAX_ATTRIBUTIONS = 100


@dataclass
class AttributionRateLimit:
    """The attribution rate limit of one kind of report: at most ``max_attributions`` attributions per (source
    site, destination site, reporting site) in the ``window_micros`` before the trigger. An attribution is dated by
    its source's registration time, as Chrome's rate-limit records are (the interop cases
    ``rate_limit_max_attributions`` and ``rate_limit_max_attribution_reporting_endpoints`` depend on it). Each
    record names what it counts, so that a report replaced later gives its attribution back (``forget``)."""

    max_attributions: int = MAX_ATTRIBUTIONS
    window_micros: int = RATE_LIMIT_WINDOW_MICROS
    records: list[tuple[tuple[str, str, str], int, Any]] = field(default_factory=list)

    @staticmethod
    def _key(source: SourceRegistration, trigger: TriggerRegistration) -> tuple[str, str, str]:
        return (source.source_site, trigger.destination_site, trigger.reporting_site)

    def allows(self, source: SourceRegistration, trigger: TriggerRegistration, ignoring: Any = None) -> bool:
        """Whether one more attribution fits (not counting the record of ``ignoring``, about to be replaced)."""
        key, start = self._key(source, trigger), trigger.time_micros - self.window_micros
        count = sum(1 for k, time, item in self.records
                    if k == key and time > start and (ignoring is None or item is not ignoring))
        return count < self.max_attributions

    def record(self, source: SourceRegistration, trigger: TriggerRegistration, item: Any = None) -> None:
        self.records.append((self._key(source, trigger), source.time_micros, item))

    def record_noised(self, source: SourceRegistration) -> None:
        """A source whose randomized response is not truthful: one attribution per destination site at its
        registration, whatever its fake reports (Chrome; the interop case ``aggregatable_reports_fake_source``:
        a noised source's later triggers meet the limit on its destinations)."""
        for destination in source.destination_sites:
            self.records.append(((source.source_site, destination, source.reporting_site), source.time_micros, None))

    def forget(self, item: Any) -> None:
        self.records = [record for record in self.records if record[2] is not item]


class SourceRefused(ValueError):
    """A source the storage does not store, and why (``reason``: Chrome's name for it)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


@dataclass(frozen=True)
class DestinationLimits:
    """The specification's limits on the destination sites of sources (Chrome's defaults, the interop
    ``default_config.json``), per source site and reporting site unless said otherwise:

    * ``unexpired``: distinct destinations of the unexpired sources; a source that would pass it replaces the
      sources whose destinations rank lowest by (``destination_limit_priority``, time), or is refused when its
      own rank lowest (the "unexpired destination limit", first in, first out);
    * ``per_window_reporting_site`` and ``per_window`` (per source site, every reporting site): distinct
      destinations of the sources registered in the last ``window_micros`` (the "time-based destination limits");
    * ``per_day``: distinct destinations of the sources registered in the last day."""

    unexpired: int = 100
    per_window: int = 200
    per_window_reporting_site: int = 50
    window_micros: int = 60 * MICROS_PER_SECOND
    per_day: int = 100


@dataclass(frozen=True)
class OriginLimits:
    """The specification's limits on reporting origins (Chrome's defaults, the interop ``default_config.json``):
    distinct reporting origins per (source site, destination site) over ``window_micros`` among stored sources
    (``sources``) and among attributions (``attributions``), and per (source site, reporting site) over
    ``site_window_micros`` among stored sources (``per_site``); and stored sources per source origin."""

    sources: int = 100
    attributions: int = 10
    window_micros: int = RATE_LIMIT_WINDOW_MICROS
    per_site: int = 1
    site_window_micros: int = MICROS_PER_DAY
    sources_per_origin: int = 1024


@dataclass(eq=False)
class SourceRecord:
    """What the storage's source limits count, one per stored source and destination site (Chrome's rate-limit
    row of scope "source"): kept after the source expires or is removed, as the rate-limit table keeps it."""

    source_site: str
    destination_site: str
    reporting_origin: str
    reporting_site: str
    time_micros: int
    expires_micros: int
    destination_limit_priority: int
    stored: StoredSource  # whether it was replaced under the unexpired destination limit: ``stored.replaced``


class SourceOutcome(NamedTuple):
    """What became of a source: stored, or refused (``refusal``: a ``SourceRefused`` of the storage's limits, or
    a part's ``ValueError``, e.g. an event-level configuration above its channel capacity). ``states``: the parts'
    states of it (empty when a part refused it); ``destination_limit``: the unexpired destination limit when the
    source replaced older sources under it (its debug report says so), else None."""

    source: SourceRegistration
    stored: StoredSource | None
    refusal: ValueError | None
    states: tuple[Any, ...] = ()
    destination_limit: int | None = None


class TriggerOutcome(NamedTuple):
    """What became of a trigger at the storage: the source steps 1 and 2 chose (None: none matched) and whether it
    was attributed to it (False: its filter data did not match, step 3)."""

    trigger: TriggerRegistration
    candidate: StoredSource | None
    attributed: bool


@dataclass
class AttributionStorage:
    """A browser's attribution storage for one device: the stored sources and the parts' states of them, and
    the records its limits count (kept after their sources expire, as Chrome's rate-limit table)."""

    parts: Sequence[AttributionPart]
    limits: OriginLimits = OriginLimits()
    destination_limits: DestinationLimits = DestinationLimits()
    sources: list[StoredSource] = field(default_factory=list)
    registered: int = 0  # sources ever stored: the next one's registration order
    records: list[SourceRecord] = field(default_factory=list)  # per stored source and destination
    # ((source site, destination site), reporting origin, time) per attribution that made a report
    attribution_origins: list[tuple[tuple[str, str], str, int]] = field(default_factory=list)

    def register_source(self, source: SourceRegistration, choices: Sequence[Any] | None = None) -> SourceOutcome:
        """Step 0 (W3C/WICG "Attribution Reporting", "process an attribution source", in its order): the parts'
        privacy checks, the storage limit, the reporting origins per site, the time-based and per-day destination
        limits, the unexpired destination limit (whose replacements stand whatever follows), the global
        time-based destination limit and the reporting origins per destination; then store ``source``.
        ``choices``: one per part (see ``AttributionPart.prepare_source``)."""
        choices = choices or [None] * len(self.parts)
        try:
            states = tuple(part.prepare_source(source, choice) for part, choice in zip(self.parts, choices, strict=True))
        except ValueError as error:
            return SourceOutcome(source, None, error)
        refusal = self._storage_refusal(source) or self._rate_refusal(source)
        if refusal is not None:
            return SourceOutcome(source, None, refusal, states)
        replaced = self._replaced_for_destinations(source)
        if replaced is None:
            return SourceOutcome(source, None, SourceRefused(
                "source_destination_limit", f"{source.destination_sites} rank below the unexpired destination limit"),
                states)
        for stored in replaced:
            self._remove(stored, SourceRemoval(DESTINATION_LIMIT, source.time_micros))
        destination_limit = self.destination_limits.unexpired if replaced else None
        self._apply_scopes(source)
        refusal = self._last_refusal(source)
        if refusal is not None:
            return SourceOutcome(source, None, refusal, states, destination_limit)
        stored = StoredSource(source, self.registered, source.time_micros + source.expiry_seconds * MICROS_PER_SECOND,
                              list(states))
        for part, state in zip(self.parts, states, strict=True):
            part.store_source(source, state)
        self.registered += 1
        self.sources.append(stored)
        self.records.extend(
            SourceRecord(source.source_site, destination, source.reporting_origin, source.reporting_site,
                         source.time_micros, stored.expires_micros, source.destination_limit_priority, stored)
            for destination in source.destination_sites)
        return SourceOutcome(source, stored, None, states, destination_limit)

    def _storage_refusal(self, source: SourceRegistration) -> SourceRefused | None:
        """The storage limit (active sources per source origin) and the reporting origins per source site and
        reporting site in a day."""
        limits, now = self.limits, source.time_micros
        stored_of_origin = sum(1 for stored in self.sources if stored.active and stored.expires_micros > now
                               and stored.registration.source_origin == source.source_origin)
        if stored_of_origin >= limits.sources_per_origin:
            return SourceRefused("source_storage_limit", f"{source.source_origin} has {stored_of_origin} sources stored")
        since = now - limits.site_window_micros
        origins = {record.reporting_origin for record in self.records if record.time_micros > since
                   and record.source_site == source.source_site and record.reporting_site == source.reporting_site}
        if source.reporting_origin not in origins and len(origins) >= limits.per_site:
            return SourceRefused("source_reporting_origin_per_site_limit",
                                 f"{len(origins)} reporting origins of {source.reporting_site} for {source.source_site}")
        return None

    def _live_destinations(self, source: SourceRegistration, since_micros: int, same_reporting_site: bool) -> set[str]:
        """The destinations of ``source`` and of the unexpired sources of its source site (and reporting site)
        registered after ``since_micros``, replaced ones included."""
        now = source.time_micros
        return set(source.destination_sites) | {
            record.destination_site for record in self.records
            if record.source_site == source.source_site and record.expires_micros > now
            and record.time_micros > since_micros
            and (not same_reporting_site or record.reporting_site == source.reporting_site)}

    def _rate_refusal(self, source: SourceRegistration) -> SourceRefused | None:
        """The time-based destination limit per reporting site, then the per-day one (the global time-based
        limit comes last: ``_last_refusal``)."""
        limits, now = self.destination_limits, source.time_micros
        destinations = self._live_destinations(source, now - limits.window_micros, same_reporting_site=True)
        if len(destinations) > limits.per_window_reporting_site:
            return SourceRefused("source_destination_rate_limit",
                                 f"{len(destinations)} destinations of {source.reporting_site} in the window")
        destinations = self._live_destinations(source, now - MICROS_PER_DAY, same_reporting_site=True)
        if len(destinations) > limits.per_day:
            return SourceRefused("source_destination_per_day_rate_limit",
                                 f"{len(destinations)} destinations of {source.reporting_site} in a day")
        return None

    def _replaced_for_destinations(self, source: SourceRegistration) -> list[StoredSource] | None:
        """The unexpired destination limit: the stored sources to replace so that the destinations of the unexpired
        sources of ``source``'s (source site, reporting site) stay within the limit, or None when ``source`` is
        itself among them (it is refused and nothing is replaced). Each destination ranks by the highest
        (destination limit priority, time) of the sources that name it, ties to the greater site; the lowest go,
        with every source that names one of them (spec "get sources to delete for the unexpired destination
        limit")."""
        now = source.time_micros
        rank: dict[str, tuple[int, int]] = {}
        holders: dict[str, list[StoredSource | None]] = {}
        newest = (source.destination_limit_priority, now)
        for destination in source.destination_sites:
            rank[destination], holders[destination] = newest, [None]
        for record in self.records:
            if record.stored.replaced or record.expires_micros <= now or record.source_site != source.source_site \
                    or record.reporting_site != source.reporting_site:
                continue
            attribute = (record.destination_limit_priority, record.time_micros)
            rank[record.destination_site] = max(rank.get(record.destination_site, attribute), attribute)
            holders.setdefault(record.destination_site, []).append(record.stored)
        excess = len(rank) - self.destination_limits.unexpired
        if excess <= 0:
            return []
        dropped = sorted(rank, key=lambda destination: (rank[destination], destination))[:excess]
        replaced = list(dict.fromkeys(stored for destination in dropped for stored in holders[destination]))
        if None in replaced:
            return None
        return [stored for stored in replaced if stored is not None]

    def _remove(self, stored: StoredSource, removal: SourceRemoval) -> None:
        """Take ``stored`` out of attribution before its expiry; each part drops the reports the specification
        drops with it."""
        stored.active = False
        stored.replaced = stored.replaced or removal.reason == DESTINATION_LIMIT
        for part, state in zip(self.parts, stored.states, strict=True):
            part.remove_source(stored.registration, state, removal)

    def _live_sources_of(self, source: SourceRegistration, destinations: Iterable[str]) -> list[StoredSource]:
        """The active unexpired sources of ``source``'s reporting origin that name one of ``destinations``."""
        now, wanted = source.time_micros, set(destinations)
        return [stored for stored in self.sources
                if stored.active and stored.expires_micros > now
                and stored.registration.reporting_origin == source.reporting_origin
                and not wanted.isdisjoint(stored.registration.destination_sites)]

    def _apply_scopes(self, source: SourceRegistration) -> None:
        """What a new source's attribution scopes do to the sources of its reporting origin and destinations (spec
        "remove or update sources for attribution scopes" and "remove sources with unselected attribution scopes"),
        whether or not it is stored after: one without scopes clears theirs; one with scopes removes those without,
        those of another ``max_event_states`` or a smaller ``limit``, and then, per destination, those holding a
        value beyond the ``limit`` most recent values (its own first, then by the latest source time holding each,
        ties to the greater value)."""
        pending, now = source.attribution_scopes, source.time_micros
        if pending is None:
            for stored in self._live_sources_of(source, source.destination_sites):
                stored.scopes = None
            return
        removal = SourceRemoval(ATTRIBUTION_SCOPES, now)
        for stored in self._live_sources_of(source, source.destination_sites):
            if stored.scopes is None or stored.scopes.max_event_states != pending.max_event_states \
                    or stored.scopes.limit < pending.limit:
                self._remove(stored, removal)
        room, own = pending.limit - len(pending.values), set(pending.values)
        for destination in sorted(source.destination_sites):
            holders = [stored for stored in self._live_sources_of(source, (destination,)) if stored.scopes is not None]
            latest: dict[str, int] = {}
            for stored in holders:
                for value in set(stored.scopes.values) - own:  # type: ignore[union-attr]
                    latest[value] = max(latest.get(value, stored.registration.time_micros), stored.registration.time_micros)
            kept = own | set(sorted(latest, key=lambda value: (latest[value], value), reverse=True)[:room])
            for stored in holders:
                if not kept.issuperset(stored.scopes.values):  # type: ignore[union-attr]
                    self._remove(stored, removal)

    def _last_refusal(self, source: SourceRegistration) -> SourceRefused | None:
        """The limits shared across reporting sites, checked last so that their refusal (told to the reporting
        origin as a success) reveals nothing of other sites' sources: the global time-based destination limit and
        the reporting origins per (source site, destination site)."""
        now = source.time_micros
        destinations = self._live_destinations(source, now - self.destination_limits.window_micros,
                                               same_reporting_site=False)
        if len(destinations) > self.destination_limits.per_window:
            return SourceRefused("source_destination_global_rate_limit",
                                 f"{len(destinations)} destinations of {source.source_site} in the window")
        since = now - self.limits.window_micros
        for destination in source.destination_sites:
            origins = {record.reporting_origin for record in self.records if record.time_micros > since
                       and record.source_site == source.source_site and record.destination_site == destination}
            if source.reporting_origin not in origins and len(origins) >= self.limits.sources:
                return SourceRefused("source_success_excessive_reporting_origins",
                                     f"{len(origins)} reporting origins for {source.source_site} and {destination}")
        return None

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
        outcome = self.attribute_trigger(trigger, choices)
        return outcome.candidate if outcome.attributed else None

    def attribute_trigger(self, trigger: TriggerRegistration, choices: Sequence[Any] | None = None) -> TriggerOutcome:
        """Steps 1 to 5, and what became of the trigger: the source steps 1 and 2 chose and whether its filters
        let the trigger be attributed to it."""
        choices = choices or [None] * len(self.parts)
        matching = self.matching_sources(trigger)
        candidate = _highest_priority([stored for stored in matching if stored.matches_scopes(trigger)])
        chosen = candidate
        if chosen is not None and not filters_match(chosen.registration, trigger.time_micros, trigger.filters):
            chosen = None
        if chosen is not None:
            for stored in matching:
                if stored is not chosen:
                    stored.active = False
        if chosen is None:
            for part, choice in zip(self.parts, choices, strict=True):
                part.attribute(None, None, trigger, choice)
            return TriggerOutcome(trigger, candidate, False)
        key = (chosen.registration.source_site, trigger.destination_site)
        since = trigger.time_micros - self.limits.window_micros
        origins = {origin for k, origin, time in self.attribution_origins if k == key and time > since}
        refused = "excessive_reporting_origins" if trigger.reporting_origin not in origins \
            and len(origins) >= self.limits.attributions else None
        made = [part.attribute(chosen.registration, chosen.states[position], trigger, choice, refused)
                for position, (part, choice) in enumerate(zip(self.parts, choices, strict=True))]
        if any(made):  # dated by the source, as the clients' attribution rate limits (Chrome's records are)
            self.attribution_origins.append((key, trigger.reporting_origin, chosen.registration.time_micros))
        return TriggerOutcome(trigger, chosen, True)

    def release(self, until_micros: int) -> list[Any]:
        """Every part's reports due by ``until_micros``."""
        return [report for part in self.parts for report in part.release(until_micros)]


def _highest_priority(matching: list[StoredSource]) -> StoredSource | None:
    """Step 2: the source of highest priority, ties to the most recently registered."""
    return max(matching, key=lambda stored: (stored.registration.priority, stored.index), default=None)


def split_due(reports: list[Any], until_micros: int) -> tuple[list[Any], list[Any]]:
    """(the reports due by ``until_micros`` in report-time order, the others): what a part releases."""
    due = sorted((r for r in reports if r.report_time_micros <= until_micros), key=lambda r: r.report_time_micros)
    return due, [r for r in reports if r.report_time_micros > until_micros] if due else reports


class Replayed(NamedTuple):
    """A replay's reports in the order they are released, the sources refused, and every registration's
    outcome in registration order (what verbose debug reports tell the reporting origins)."""

    reports: list[Any]
    refused: list[tuple[SourceRegistration, ValueError]]
    outcomes: list[SourceOutcome | TriggerOutcome]


def replay(storage: AttributionStorage, events: Iterable[tuple[Any, Sequence[Any] | None]]) -> Replayed:
    """Feed (registration, choices) pairs in time order to ``storage`` and release every report; a source the
    storage or a part refuses is not stored, as the specification drops it."""
    reports: list[Any] = []
    refused: list[tuple[SourceRegistration, ValueError]] = []
    outcomes: list[SourceOutcome | TriggerOutcome] = []
    for registration, choices in events:
        reports.extend(storage.release(registration.time_micros - 1))
        if isinstance(registration, SourceRegistration):
            outcome = storage.register_source(registration, choices)
            if outcome.refusal is not None:
                refused.append((registration, outcome.refusal))
            outcomes.append(outcome)
        else:
            outcomes.append(storage.attribute_trigger(registration, choices))
    reports.extend(storage.release(2**63 - 1))
    return Replayed(reports, refused, outcomes)
