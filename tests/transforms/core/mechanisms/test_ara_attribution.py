"""The Attribution Reporting specification's attribution storage (``transforms.core.mechanisms.ara_attribution``):
filter matching, the choice of source, deactivation and the source and reporting-origin limits, each on
hand-built registrations whose answer the specification fixes (Chrome's interop suite checks the same rules end
to end)."""
from __future__ import annotations

import pytest

from schemas.registrations import (
    EVENT,
    NAVIGATION,
    NO_FILTERS,
    AttributionScopes,
    FilterConfig,
    FilterPair,
    SourceRegistration,
    TriggerRegistration,
)
from schemas.time_units import MICROS_PER_DAY, MICROS_PER_SECOND
from transforms.core.mechanisms.ara_attribution import (
    ATTRIBUTION_SCOPES,
    DESTINATION_LIMIT,
    AttributionStorage,
    DestinationLimits,
    OriginLimits,
    SourceOutcome,
    SourceRemoval,
    filters_match,
    replay,
)

SHOP = "https://shop.example"


def source(time_s: float = 0, *, event_id: int = 1, priority: int = 0, origin: str = "https://adtech.example",
           site: str = "https://news.example", destinations: tuple[str, ...] = (SHOP,), source_type: str = NAVIGATION,
           filter_data: tuple = (), expiry_days: int = 30) -> SourceRegistration:
    return SourceRegistration(
        time_micros=int(time_s * MICROS_PER_SECOND), source_site=site, source_origin=site, reporting_origin=origin,
        reporting_site=origin, source_type=source_type, source_event_id=event_id, destination_sites=destinations,
        expiry_seconds=expiry_days * 86_400, priority=priority, filter_data=filter_data)


def trigger(time_s: float, *, origin: str = "https://adtech.example", destination: str = SHOP,
            filters: FilterPair = NO_FILTERS) -> TriggerRegistration:
    return TriggerRegistration(time_micros=int(time_s * MICROS_PER_SECOND), destination_site=destination,
                               reporting_origin=origin, reporting_site=origin, filters=filters)


class Recorder:
    """A part that records what the storage hands it and makes a report for every attributed trigger."""

    def __init__(self) -> None:
        self.seen: list[tuple[int | None, str | None]] = []
        self.stored: list[int] = []
        self.removed: list[tuple[int, SourceRemoval]] = []

    def prepare_source(self, registration, choice):
        return registration.source_event_id

    def store_source(self, registration, state):
        self.stored.append(state)

    def remove_source(self, registration, state, removal):
        self.removed.append((state, removal))

    def attribute(self, registration, state, trigger, choice, refused=None) -> bool:
        self.seen.append((state, refused))
        return state is not None and refused is None

    def release(self, until_micros):
        return []


def refusal(outcome: SourceOutcome) -> str | None:
    """The reason the storage refused a source (None: stored)."""
    assert (outcome.stored is None) == (outcome.refusal is not None)
    return None if outcome.refusal is None else outcome.refusal.reason


def config(values: dict[str, tuple[str, ...]], lookback_s: int | None = None) -> FilterConfig:
    return FilterConfig(tuple(sorted(values.items())), None if lookback_s is None else lookback_s * MICROS_PER_SECOND)


DATA = (("geo", ()), ("product", ("123", "456")))


@pytest.mark.parametrize(("pair", "expected"), [
    (FilterPair(), True),
    (FilterPair((config({"product": ("123",)}),)), True),
    (FilterPair((config({"product": ("789",)}),)), False),
    (FilterPair((config({"product": ()}),)), False),  # an empty list matches only an empty list
    (FilterPair((config({"geo": ()}),)), True),
    (FilterPair((config({"campaign": ("x",)}),)), True),  # a key the source lacks does not filter
    (FilterPair((config({"source_type": ("event",)}),)), False),
    (FilterPair((config({"source_type": ("navigation",)}),)), True),
    (FilterPair((config({"product": ("789",)}), config({"product": ("456",)}))), True),  # any config of a list
    (FilterPair(not_filters=(config({"product": ("789",)}),)), True),
    (FilterPair(not_filters=(config({"product": ("123",)}),)), False),
    (FilterPair(not_filters=(config({"product": ()}),)), True),  # negated: an empty list matches a non-empty one
    (FilterPair(not_filters=(config({"geo": ()}),)), False),
    (FilterPair((config({}, lookback_s=31),)), True),  # the trigger 30 s after the source
    (FilterPair((config({}, lookback_s=29),)), False),
    (FilterPair(not_filters=(config({}, lookback_s=29),)), True),
    (FilterPair(not_filters=(config({}, lookback_s=30),)), False),  # within the window when equal
])
def test_filters_match(pair, expected):
    assert filters_match(source(filter_data=DATA), 30 * MICROS_PER_SECOND, pair) is expected


def test_the_trigger_goes_to_the_highest_priority_then_the_most_recent_and_the_losers_are_deactivated():
    part = Recorder()
    storage = AttributionStorage([part])
    for index, (time_s, priority) in enumerate([(0, 5), (1, 5), (2, 1)], start=1):
        storage.register_source(source(time_s, event_id=index, priority=priority), [None])
    assert storage.register_trigger(trigger(10), [None]).registration.source_event_id == 2
    assert [stored.active for stored in storage.sources] == [False, True, False]
    storage.register_trigger(trigger(11), [None])
    assert part.seen == [(2, None), (2, None)]


def test_top_level_filters_apply_to_the_chosen_source_only_and_deactivate_nothing():
    part = Recorder()
    storage = AttributionStorage([part])
    storage.register_source(source(0, event_id=1, source_type=EVENT), [None])
    storage.register_source(source(1, event_id=2), [None])  # the most recent: chosen, then filtered out
    filters = FilterPair((config({"source_type": ("event",)}),))
    assert storage.register_trigger(trigger(5, filters=filters), [None]) is None
    assert all(stored.active for stored in storage.sources)
    assert part.seen == [(None, None)]


def test_matching_needs_the_reporting_origin_the_destination_and_a_live_source():
    part = Recorder()
    storage = AttributionStorage([part])
    storage.register_source(source(0, event_id=1, expiry_days=1), [None])
    assert storage.register_trigger(trigger(5, origin="https://other.example"), [None]) is None
    assert storage.register_trigger(trigger(6, destination="https://other.example"), [None]) is None
    assert storage.register_trigger(trigger(86_400), [None]) is None  # expired at exactly the expiry
    assert storage.register_trigger(trigger(86_399), [None]) is not None


def test_sources_per_origin_count_only_unexpired_sources():
    storage = AttributionStorage([Recorder()], OriginLimits(sources_per_origin=1))
    storage.register_source(source(0, expiry_days=1), [None])
    assert refusal(storage.register_source(source(10), [None])) == "source_storage_limit"
    assert refusal(storage.register_source(source(86_400), [None])) is None  # the first has expired


def test_one_reporting_origin_per_source_site_and_reporting_site_a_day():
    storage = AttributionStorage([Recorder()], OriginLimits(per_site=1))
    storage.register_source(source(0, origin="https://a.adtech.example"), [None])
    a_site = source(1, origin="https://b.adtech.example")._replace(reporting_site="https://a.adtech.example")
    assert refusal(storage.register_source(a_site, [None])) == "source_reporting_origin_per_site_limit"
    assert refusal(storage.register_source(a_site._replace(time_micros=MICROS_PER_DAY), [None])) is None  # a day later


def test_attributions_refused_beyond_the_reporting_origins_of_a_source_and_destination_site():
    part = Recorder()
    storage = AttributionStorage([part], OriginLimits(attributions=1))
    storage.register_source(source(0, origin="https://a.example"), [None])
    storage.register_source(source(1, event_id=2, origin="https://b.example")._replace(reporting_site="https://b.example"),
                            [None])
    storage.register_trigger(trigger(5, origin="https://a.example"), [None])
    storage.register_trigger(trigger(6, origin="https://b.example"), [None])
    assert part.seen == [(1, None), (2, "excessive_reporting_origins")]


def test_replay_releases_in_time_order_and_reports_refused_sources():
    class Timed(Recorder):
        def __init__(self):
            super().__init__()
            self.due = []

        def attribute(self, registration, state, trigger, choice, refused=None):
            self.due.append(trigger.time_micros + 100)
            return True

        def release(self, until_micros):
            out = [t for t in self.due if t <= until_micros]
            self.due = [t for t in self.due if t > until_micros]
            return out

    storage = AttributionStorage([Timed()], OriginLimits(sources_per_origin=1))
    events = [(source(0), None), (source(1), None), (trigger(2), None), (trigger(3), None)]
    reports, refused, outcomes = replay(storage, events)
    assert reports == [2_000_100, 3_000_100]
    assert [(registration.time_micros, error.reason) for registration, error in refused] == [(1_000_000, "source_storage_limit")]
    assert [(type(outcome).__name__, outcome[1] is not None) for outcome in outcomes] == [
        ("SourceOutcome", True), ("SourceOutcome", False), ("TriggerOutcome", True), ("TriggerOutcome", True)]


def test_a_part_that_refuses_a_source_keeps_it_out_before_any_limit():
    class Refusing(Recorder):
        def prepare_source(self, registration, choice):
            raise ValueError("information_gain_too_high")

    part = Refusing()
    storage = AttributionStorage([part], OriginLimits(sources_per_origin=0))  # the storage limit would refuse too
    outcome = storage.register_source(source(0), [None])
    assert str(outcome.refusal) == "information_gain_too_high" and outcome.states == () and part.stored == []


def dests(*names: str) -> tuple[str, ...]:
    return tuple(f"https://{name}.example" for name in names)


def test_the_unexpired_destination_limit_replaces_the_sources_of_the_lowest_destinations():
    """Spec "get sources to delete for the unexpired destination limit": each destination ranks by the highest
    (destination limit priority, time) of its sources, ties to the greater site; a source naming a dropped
    destination is replaced whole (the interop case ``source_destination_limit_fifo``)."""
    part = Recorder()
    storage = AttributionStorage([part], destination_limits=DestinationLimits(unexpired=3))
    storage.register_source(source(0, event_id=1, destinations=dests("d3")), [None])
    storage.register_source(source(1, event_id=2, destinations=dests("d2", "d3", "d4")), [None])
    outcome = storage.register_source(source(2, event_id=3, destinations=dests("d1", "d2")), [None])
    assert outcome.stored is not None and outcome.destination_limit == 3
    assert [stored.active for stored in storage.sources] == [False, False, True]  # d3 (1 s) ranks below d4 (1 s)
    assert part.removed == [(1, SourceRemoval(DESTINATION_LIMIT, 2 * MICROS_PER_SECOND)),
                            (2, SourceRemoval(DESTINATION_LIMIT, 2 * MICROS_PER_SECOND))]
    again = storage.register_source(source(3, event_id=4, destinations=dests("d2")), [None])
    assert again.destination_limit is None  # the replaced sources no longer count: d1, d2


def test_a_source_whose_destinations_rank_lowest_is_refused_and_replaces_nothing():
    part = Recorder()
    storage = AttributionStorage([part], destination_limits=DestinationLimits(unexpired=1))
    storage.register_source(source(0, event_id=1, destinations=dests("d1")), [None])
    low = source(5, event_id=2, destinations=dests("d2"))._replace(destination_limit_priority=-1)
    assert refusal(storage.register_source(low, [None])) == "source_destination_limit"
    both = source(6, event_id=3, destinations=dests("d1", "d2"))  # more destinations than the limit: refused
    assert refusal(storage.register_source(both, [None])) == "source_destination_limit"
    assert part.removed == [] and storage.sources[0].active
    higher = source(7, event_id=4, destinations=dests("d2"))._replace(destination_limit_priority=1)
    assert refusal(storage.register_source(higher, [None])) is None and not storage.sources[0].active
    lower = low._replace(time_micros=30 * MICROS_PER_DAY + 7 * MICROS_PER_SECOND, destination_limit_priority=-2)
    assert refusal(storage.register_source(lower, [None])) is None  # d2's source expired at exactly its expiry


def test_the_time_based_and_per_day_destination_limits():
    """Spec "check if an attribution source exceeds the time-based destination limits" and "... the per day
    destination limits" (the interop cases ``destination_rate_limit``, ``source_destination_limits``): per
    reporting site in the window first, then per day, then, last, every reporting site in the window."""
    limits = DestinationLimits(per_window=2, per_window_reporting_site=1, window_micros=60 * MICROS_PER_SECOND, per_day=2)
    storage = AttributionStorage([Recorder()], OriginLimits(per_site=10), limits)
    a, b, c = "https://a.example", "https://b.example", "https://c.example"
    assert refusal(storage.register_source(source(0, origin=a, destinations=dests("d1", "d2")), [None])) == \
        "source_destination_rate_limit"
    assert refusal(storage.register_source(source(1, origin=a, destinations=dests("d1")), [None])) is None
    assert refusal(storage.register_source(source(2, origin=a, destinations=dests("d2")), [None])) == \
        "source_destination_rate_limit"
    assert refusal(storage.register_source(source(3, origin=b, destinations=dests("d2")), [None])) is None
    assert refusal(storage.register_source(source(4, origin=c, destinations=dests("d3")), [None])) == \
        "source_destination_global_rate_limit"
    assert refusal(storage.register_source(source(62, origin=a, destinations=dests("d4")), [None])) is None
    assert refusal(storage.register_source(source(200, origin=a, destinations=dests("d5")), [None])) == \
        "source_destination_per_day_rate_limit"  # d1, d4 and d5 of a in a day
    assert refusal(storage.register_source(source(86_402, origin=a, destinations=dests("d5")), [None])) is None


def scoped(time_s: float, event_id: int, values: tuple[str, ...] | None, limit: int = 3, max_event_states: int = 3,
           destinations: tuple[str, ...] = (SHOP,)) -> SourceRegistration:
    scopes = None if values is None else AttributionScopes(limit, tuple(sorted(values)), max_event_states)
    return source(time_s, event_id=event_id, destinations=destinations)._replace(attribution_scopes=scopes)


def test_a_trigger_with_scopes_goes_to_the_best_source_sharing_one_and_the_others_are_deactivated():
    """Spec "find matching sources" (the interop case ``attribution_scopes_basic``): only a source whose scopes share
    one of the trigger's may be chosen, but every matching source is deactivated once one is; none sharing: no
    match, nothing deactivated."""
    storage = AttributionStorage([Recorder()])
    for outcome in (storage.register_source(scoped(0, 1, ("1",)), [None]),
                    storage.register_source(scoped(1, 2, ("2",)), [None])):
        assert outcome.stored is not None
    assert storage.register_trigger(trigger(5)._replace(attribution_scopes=("9",)), [None]) is None
    assert all(stored.active for stored in storage.sources)
    chosen = storage.register_trigger(trigger(6)._replace(attribution_scopes=("1", "3")), [None])
    assert chosen.registration.source_event_id == 1 and [s.active for s in storage.sources] == [True, False]
    assert storage.register_trigger(trigger(7), [None]).registration.source_event_id == 1  # no scopes: any source


def test_a_source_without_scopes_clears_the_scopes_of_its_origin_and_destinations_even_when_refused():
    """Spec "remove or update sources for attribution scopes" (``attribution_scopes_null_scopes_removes_data``):
    the update stands though the global destination limit then refuses the new source."""
    storage = AttributionStorage([Recorder()], destination_limits=DestinationLimits(per_window=1))
    storage.register_source(scoped(0, 1, ("1",)), [None])
    refused = storage.register_source(scoped(1, 2, None, destinations=(SHOP, "https://other.example")), [None])
    assert refusal(refused) == "source_destination_global_rate_limit"
    assert storage.sources[0].scopes is None and storage.sources[0].active
    assert storage.register_trigger(trigger(70)._replace(attribution_scopes=("1",)), [None]) is None


@pytest.mark.parametrize(("older", "newer", "kept"), [
    (None, ("1",), False),  # no scopes
    (("1",), ("2",), True),  # same limit and max_event_states, room for both values
    ((("1",), 3, 10), ("2",), False),  # another max_event_states
    ((("1",), 2, 3), ("2",), False),  # a smaller limit
    ((("1",), 4, 3), ("2",), True),  # a larger limit stays
    ((("1", "2"), 3, 3), ("3", "4", "5"), False),  # no room left for its values
])
def test_a_source_with_scopes_removes_incompatible_ones(older, newer, kept):
    part = Recorder()
    storage = AttributionStorage([part])
    values, limit, states = (older, 3, 3) if older is None or isinstance(older[0], str) else older
    storage.register_source(scoped(0, 1, values, limit, states), [None])
    storage.register_source(scoped(1, 2, newer), [None])
    assert storage.sources[0].active is kept
    assert part.removed == ([] if kept else [(1, SourceRemoval(ATTRIBUTION_SCOPES, MICROS_PER_SECOND))])


def test_only_the_most_recent_scope_values_within_the_limit_survive():
    """Spec "remove sources with unselected attribution scopes" (``attribution_scopes_older_scopes_removed_2``):
    the new source's values first, then the others by the latest source holding each, ties to the greater value."""
    storage = AttributionStorage([Recorder()])
    for time_s, values in enumerate([("2",), ("3",), ("1", "2", "3"), ("1",)]):
        storage.register_source(scoped(time_s, time_s, values, limit=4), [None])
    storage.register_source(scoped(4, 4, ("4", "5"), limit=4), [None])
    assert [stored.active for stored in storage.sources] == [False, True, False, True, True]
