"""ARA-SR-Client (Ghazi et al. Alg. 2) on hand-built devices: attribution, key OR-ing, budgets, null reports."""
from __future__ import annotations

from schemas.rows import API_ATTRIBUTION_REPORTING
from tests.support.summary_events import DAY, MINUTE, ORIGIN, SHOP, source, trigger
from tests.support.summary_events import refusals as client_refusals
from transforms.core.mechanisms.ara_matching import filters_match
from transforms.core.mechanisms.noise import SeededSource
from transforms.summary_reports.mechanisms.ara_client import AraSummaryClient, contributions
from transforms.summary_reports.mechanisms.contributions import ContributionLimits

COUNT, VALUE = 0x1 << 64, 0x2 << 64  # the default source keys of tests.support.summary_events


def run(events, limits: ContributionLimits = ContributionLimits(), seed: int = 1):
    """The reports of one device replaying ``events`` (given in time order)."""
    client = AraSummaryClient(limits)
    return list(client.replay("dev", sorted(events, key=client.order), client.new_state(), SeededSource(seed)))


def refusals(events, limits: ContributionLimits = ContributionLimits()) -> list[bool]:
    """Whether each report was made null by its source's budget."""
    return client_refusals(AraSummaryClient(limits), events)


def contributed(events, **kwargs) -> list[tuple]:
    """Each report's contributions, in trigger order."""
    return [report.contributions for report in run(events, **kwargs)]


def keyed_source(minute: float, source_id: str, tag: int, **kwargs):
    """A source whose two keys carry ``tag`` in bits 32-39, so a report tells which source it was attributed to."""
    return source("dev", minute, source_id, {"count": COUNT | tag << 32, "value": VALUE | tag << 32}, **kwargs)


def attributed_tag(report) -> int | None:
    return (report.contributions[0][0] >> 32) & 0xFF if report.contributions else None


def test_contributions_or_every_key_piece_that_names_the_source_key():
    s = source("dev", 0, "s", {"count": COUNT, "value": VALUE, "geo": 0x3 << 64})
    t = trigger("dev", 5, "t", {"count": 1000, "value": 3000, "geo": 0, "unknown": 7},
                pieces=[(0x5, ("count", "value")), (0x100, ("count",)), (0x8000, ("nothing",))])
    # geo has value 0 (no contribution), "unknown" names no source key (ignored)
    assert contributions(s, t) == [(COUNT | 0x5 | 0x100, 1000), (VALUE | 0x5, 3000)]
    assert contributed([s, t]) == [((COUNT | 0x5 | 0x100, 1000), (VALUE | 0x5, 3000))]


def test_l1_is_checked_per_report_before_attributing():
    """L1 = 65536: 30000 + 30000 fit; a third 30000 would make 90000 (null, nothing charged); 5000 still fits."""
    events = [source("dev", 0, "s")] + [
        trigger("dev", 10 + i, f"t{i}", {"count": total - 1, "value": 1}) for i, total in enumerate((30000, 30000, 30000, 5000))
    ]
    assert [len(c) for c in contributed(events)] == [2, 2, 0, 2]


def test_l0_counts_non_zero_contributions_per_source():
    """L0 = 3: two contributions, then two more would make 4 (null), one more makes 3, then nothing fits."""
    events = [source("dev", 0, "s"),
              trigger("dev", 1, "t0"), trigger("dev", 2, "t1"),
              trigger("dev", 3, "t2", {"count": 5, "value": 0}), trigger("dev", 4, "t3", {"count": 5})]
    assert [len(c) for c in contributed(events, limits=ContributionLimits(l0=3))] == [2, 0, 1, 0]


def test_budgets_are_per_source():
    """Once s1 is exhausted (one report allowed), a trigger attributed to a fresh source s2 reports again."""
    events = [keyed_source(0, "s1", 1), trigger("dev", 1, "t0"), trigger("dev", 2, "t1"),
              keyed_source(3, "s2", 2), trigger("dev", 4, "t2")]
    assert [attributed_tag(r) for r in run(events, limits=ContributionLimits(l0=2))] == [1, None, 2]


def test_exhausted_chosen_source_gives_a_null_report_not_an_older_source():
    """ARA's rule (and Remark 2.3): attribution picks the source first; its exhausted budget means a null report,
    even though an older matching source still has budget (Alg. 2's loop read literally would fall back)."""
    events = [keyed_source(0, "old", 1), keyed_source(1, "new", 2), trigger("dev", 2, "t0"), trigger("dev", 3, "t1")]
    reports = run(events, limits=ContributionLimits(l0=2))
    assert [attributed_tag(r) for r in reports] == [2, None]
    assert refusals(events, limits=ContributionLimits(l0=2)) == [False, True]  # null over budget: a refusal


def test_highest_priority_wins_then_the_most_recent():
    events = [keyed_source(0, "a", 1, priority=5), keyed_source(10, "b", 2, priority=0), keyed_source(5, "c", 3, priority=5),
              trigger("dev", 20, "t")]
    assert [attributed_tag(r) for r in run(events)] == [3]  # c: priority 5 like a, registered later


def test_last_touch_with_equal_priorities_and_sources_before_triggers_at_the_same_time():
    events = [keyed_source(0, "a", 1), keyed_source(7, "b", 2), trigger("dev", 7, "t"), keyed_source(8, "c", 3)]
    assert [attributed_tag(r) for r in run(events)] == [2]


def test_filters():
    assert filters_match(["a"], ["b", "a"]) and not filters_match(["a"], ["b"])
    assert not filters_match(["a"], [])  # a source without filter data matches only triggers without filters
    assert filters_match([], ["b"]) and filters_match([], [])  # a trigger without filters matches every source
    events = [keyed_source(0, "ab", 1, filters=("a", "b")), keyed_source(1, "c", 2, filters=("c",)),
              keyed_source(2, "none", 3),
              trigger("dev", 3, "t-a", filters=("a",)), trigger("dev", 4, "t-any"), trigger("dev", 5, "t-z", filters=("z",))]
    assert [attributed_tag(r) for r in run(events)] == [1, 3, None]


def test_expiry_is_half_open():
    """A source with a 1-day expiry takes a trigger a minute before it expires, not one at the expiry time."""
    events = [keyed_source(0, "s", 1, expiry_days=1), trigger("dev", 24 * 60 - 1, "before"), trigger("dev", 24 * 60, "at")]
    assert [attributed_tag(r) for r in run(events)] == [1, None]


def test_destination_reporting_origin_and_time_must_match():
    events = [trigger("dev", 0, "before-any-source"), keyed_source(1, "s", 1),
              trigger("dev", 2, "other-site", destination="https://elsewhere.test"),
              trigger("dev", 3, "other-adtech", origin="https://other-adtech.test"), trigger("dev", 4, "ok")]
    reports = run(events)
    assert [attributed_tag(r) for r in reports] == [None, None, None, 1]
    assert not any(refusals(events))  # null for want of a source: no budget refused anything
    # a null report names the trigger's own destination and reporting origin
    assert (reports[1].attribution_destination, reports[2].reporting_origin) == ("https://elsewhere.test",
                                                                                  "https://other-adtech.test")


def test_a_trigger_with_nothing_to_contribute_is_null_and_charges_nothing():
    events = [source("dev", 0, "s"), trigger("dev", 1, "zero", {"count": 0, "value": 0}), trigger("dev", 2, "t")]
    assert [len(c) for c in contributed(events, limits=ContributionLimits(l0=2))] == [0, 2]


def test_every_trigger_sends_exactly_one_report_with_its_metadata():
    events = [source("dev", 0, "s"), *(trigger("dev", 1 + i, f"t{i}") for i in range(30))]
    reports = run(events)
    assert len(reports) == 30
    for index, report in enumerate(reports):
        assert report.api == API_ATTRIBUTION_REPORTING
        assert (report.reporting_origin, report.attribution_destination) == (ORIGIN, SHOP)
        trigger_seconds = events[1 + index].event_time_micros // 1_000_000
        assert trigger_seconds + 600 <= report.scheduled_report_time <= trigger_seconds + 3600
    assert len({report.report_id for report in reports}) == 30


def test_seeded_reports_depend_on_seed_device_and_trigger_only():
    events = [source("dev", 0, "s"), trigger("dev", 1, "t")]
    first, again = run(events, seed=3), run([*events, trigger("dev", 2, "later")], seed=3)[:1]
    assert first == again
    assert run(events, seed=4)[0].report_id != first[0].report_id


def test_forget_before_drops_only_expired_sources():
    client = AraSummaryClient()
    state = client.new_state()
    events = [source("dev", 0, "short", expiry_days=1), source("dev", 0, "long", expiry_days=30)]
    list(client.replay("dev", events, state, SeededSource(1)))
    client.forget_before(state, events[0].event_time_micros + DAY)
    assert [r.source.source_id for r in state.sources] == ["long"]
    client.forget_before(state, events[0].event_time_micros + DAY - MINUTE)  # forgetting is monotone
    assert len(state.sources) == 1
