"""ARA-Event-Client (Ghazi et al. Sec. 2.2, Alg. 4) with the noise off, and with Alg. 8's randomized response."""
from __future__ import annotations

import numpy as np
import pytest

from tests.support.event_level import seed_example
from transforms.core.mechanisms.noise import SeededSource
from transforms.event_level.mechanisms.client import (
    MICROS_PER_SECOND,
    REPORT_WITHHELD,
    EventLevelClient,
    EventLevelReport,
    EventSource,
    EventTrigger,
    fake_reports,
)
from transforms.event_level.mechanisms.config import (
    EventLevelConfig,
    TriggerDataSpec,
    event_config,
    navigation_config,
    uniform_config,
)
from transforms.event_level.mechanisms.information_gain import randomized_trigger_rate
from transforms.event_level.mechanisms.outputs import count_outputs, rank_output, unrank_output

DAY = 86_400 * MICROS_PER_SECOND
T0 = 1_700_000_000 * MICROS_PER_SECOND  # the source registration ("Day 0")
SANDALS, SNEAKERS = 0, 1


def shoe_source(config: EventLevelConfig | None = None, **kwargs) -> EventSource:
    return EventSource("s", "shoes-website.com", T0, config or seed_example(), **kwargs)


def purchase(day: int, data: int, dollars: int, trigger_id: str | None = None, **kwargs) -> EventTrigger:
    """A purchase during day ``day``, i.e. at noon between the ends of days day - 1 and day."""
    return EventTrigger(trigger_id or f"t{day}", "shoes-website.com", T0 + day * DAY - DAY // 2, data, dollars, **kwargs)


def report(data: int, window: int, bucket: int, day: int) -> EventLevelReport:
    return EventLevelReport("s", data, window, bucket, T0 + day * DAY)


@pytest.mark.parametrize("deactivation", ["max_reports_sent", REPORT_WITHHELD])
def test_the_walk_through_of_section_2_2_step_by_step(deactivation):
    client = EventLevelClient(deactivation=deactivation)
    s = client.register_source(shoe_source())  # Day 0
    assert (s.values, s.last_bucket, s.sent) == ([0, 0], [0, 0], 0)
    # Day 1: $30 sneakers; at the end of day 1 the sandals window passes, V(s, sandals) = 0: no report
    assert client.register_trigger(purchase(1, SNEAKERS, 30)) is s
    assert s.values == [0, 30]
    assert client.advance_to(T0 + DAY) == []
    # Day 2: $60 sandals; at the end of day 2 the sneakers window passes: one report, bucket $20
    assert client.register_trigger(purchase(2, SANDALS, 60)) is s
    assert s.values == [60, 30]
    assert client.advance_to(T0 + 2 * DAY) == [report(SNEAKERS, 0, 20, 2)]
    assert s.last_bucket == [0, 20] and s.sent == 1
    # Day 4: $65 sneakers, V(s, sneakers) = 95
    assert client.register_trigger(purchase(4, SNEAKERS, 65)) is s
    assert s.values == [60, 95]
    # Day 5: the second sandals window passes: two reports, buckets $10 and $50
    assert client.advance_to(T0 + 5 * DAY) == [report(SANDALS, 1, 10, 5), report(SANDALS, 1, 50, 5)]
    assert s.sent == 3 and s.last_bucket == [50, 20]
    # Day 6: $10 sneakers. The walk-through attributes it (V = 105): so does "report_withheld"; with the
    # default the source is inactive from its third report on and the purchase is not attributed.
    chosen = client.register_trigger(purchase(6, SNEAKERS, 10))
    if deactivation == REPORT_WITHHELD:
        assert chosen is s and s.values == [60, 105] and not s.inactive
    else:
        assert chosen is None and s.values == [60, 95] and s.inactive
    # Day 7: the second sneakers window passes: no report, the maximum of 3 is reached
    assert client.advance_to(T0 + 7 * DAY) == []
    assert s.sent == 3 and s.inactive  # ... and the source is now inactive
    assert client.register_trigger(purchase(8, SNEAKERS, 500)) is None
    assert client.register_trigger(purchase(9, SANDALS, 500)) is None
    assert client.flush() == []
    assert client.reports == [report(SNEAKERS, 0, 20, 2), report(SANDALS, 1, 10, 5), report(SANDALS, 1, 50, 5)]
    # the truthful counts n_{t,w}: sandals (day 1, day 5) = (0, 2), sneakers (day 2, day 7) = (1, 0)
    assert s.counts == [0, 2, 1, 0]
    assert rank_output(seed_example(), s.counts) >= 0


def test_replay_gives_the_same_reports():
    events = [purchase(6, SNEAKERS, 10), shoe_source(), purchase(1, SNEAKERS, 30), purchase(2, SANDALS, 60),
              purchase(4, SNEAKERS, 65)]
    assert EventLevelClient().replay(events) == [
        report(SNEAKERS, 0, 20, 2), report(SANDALS, 1, 10, 5), report(SANDALS, 1, 50, 5)]


def test_a_trigger_at_a_window_end_counts_in_the_next_window_and_expired_sources_take_nothing():
    config = navigation_config(3 * 86_400)  # windows [2 days, 3 days]
    source = EventSource("s", "d", T0, config)
    events = [source,
              EventTrigger("a", "d", T0 + 2 * DAY, trigger_data=5),  # exactly at the first window end
              EventTrigger("b", "d", T0 + 3 * DAY, trigger_data=6),  # at the expiry: not attributed
              EventTrigger("c", "d", T0 + 2 * DAY - 1, trigger_data=13)]  # 13 % 8 = 5, first window
    assert EventLevelClient().replay(events) == [
        EventLevelReport("s", 5, 0, 1, T0 + 2 * DAY), EventLevelReport("s", 5, 1, 2, T0 + 3 * DAY)]


def test_attribution_by_priority_then_most_recent_with_filters_destination_and_exact_matching():
    exact = EventLevelConfig("event", 30 * 86_400, 1, (TriggerDataSpec(3, (86_400,), (1,)),), "exact")
    old = EventSource("old", "d", T0, event_config(), priority=5)
    new = EventSource("new", "d", T0 + 1, event_config(), filter_data=("shoes",))
    other = EventSource("other", "e", T0 + 2, event_config(), priority=9)
    strict = EventSource("strict", "x", T0 + 3, exact)
    client = EventLevelClient()
    for source in (old, new, other, strict):
        client.register_source(source)
    assert client.attribute(EventTrigger("t1", "d", T0 + 10, 0)).source is old  # priority wins
    # a source without filter data matches only triggers without filters (``ara_matching.filters_match``)
    assert client.attribute(EventTrigger("t2", "d", T0 + 10, 0, filters=("shoes", "hats"))).source is new
    assert client.attribute(EventTrigger("t3", "d", T0 + 10, 0, filters=("hats",))) is None
    tie = EventSource("tie", "d", T0 + 4, event_config(), priority=5)
    client.register_source(tie)
    assert client.attribute(EventTrigger("t4", "d", T0 + 10, 0)).source is tie  # same priority: most recent
    assert client.register_trigger(EventTrigger("t5", "x", T0 + 10, 4)) is None  # exact: 4 is not listed
    assert client.register_trigger(EventTrigger("t6", "x", T0 + 11, 3, value=0)) is None  # value 0: ignored
    assert client.register_trigger(EventTrigger("t7", "x", T0 + 12, 3)).source is strict
    assert client.flush()[0] == EventLevelReport("strict", 3, 0, 1, T0 + 3 + DAY)


def test_a_full_source_hands_later_triggers_to_an_older_source():
    first = EventSource("first", "d", T0, event_config())
    # one window ending after a day, but the source lives 10 days
    second = EventSource("second", "d", T0 + 1, uniform_config("event", expiry_seconds=10 * 86_400, window_ends=(86_400,)))
    events = [first, second, EventTrigger("a", "d", T0 + 10, 1), EventTrigger("b", "d", T0 + 3 * DAY, 0)]
    assert EventLevelClient().replay(events) == [  # second has sent its 1 report: inactive, b goes to first
        EventLevelReport("second", 1, 0, 1, T0 + 1 + DAY), EventLevelReport("first", 0, 0, 1, T0 + 30 * DAY)]
    # "report_withheld": second stays active until a report is withheld, so it takes b (and sends nothing)
    assert EventLevelClient(deactivation=REPORT_WITHHELD).replay(events) == [
        EventLevelReport("second", 1, 0, 1, T0 + 1 + DAY)]


def test_fake_reports_take_the_next_buckets_of_each_trigger_data_in_window_order():
    source = shoe_source()
    # sandals: 1 on day 1 and 1 on day 5; sneakers: 1 on day 7
    assert fake_reports(source, (1, 1, 0, 1), rate=0.25) == [
        EventLevelReport("s", SANDALS, 0, 10, T0 + DAY, 0.25),
        EventLevelReport("s", SANDALS, 1, 50, T0 + 5 * DAY, 0.25),
        EventLevelReport("s", SNEAKERS, 1, 20, T0 + 7 * DAY, 0.25),
    ]
    assert fake_reports(source, (0, 0, 0, 0)) == []
    with pytest.raises(ValueError):
        fake_reports(source, (0, 0, 0))


def test_with_noise_a_randomized_source_sends_its_random_output_and_attribution_is_unchanged():
    events = [shoe_source(), purchase(1, SNEAKERS, 30), purchase(2, SANDALS, 60), purchase(4, SNEAKERS, 65),
              purchase(6, SNEAKERS, 10)]
    rate = randomized_trigger_rate(27, 0.0)
    seen = set()
    for seed in range(40):
        client = EventLevelClient(epsilon=0.0, random_source=SeededSource(seed))  # eps = 0: always random
        reports = client.replay(events)
        s = client.sources[0]
        assert s.fake is not None
        assert sorted(reports, key=lambda r: (r.report_time_micros, r.trigger_data, r.summary_bucket)) == sorted(
            fake_reports(s.source, s.fake, rate), key=lambda r: (r.report_time_micros, r.trigger_data, r.summary_bucket))
        assert s.counts == [0, 2, 1, 0] and s.inactive  # the hidden truthful run is the noiseless one
        seen.add(s.fake)
    assert len(seen) > 10
    truthful = EventLevelClient(epsilon=14.0, random_source=SeededSource(1))  # truthful with prob. 1 - 2e-5
    reports = truthful.replay(events)
    assert truthful.sources[0].fake is None
    assert [r.summary_bucket for r in reports] == [20, 10, 50]
    assert {r.randomized_trigger_rate for r in reports} == {randomized_trigger_rate(27, 14.0)}


def test_truthful_counts_are_always_outputs_of_o():
    rng = np.random.default_rng(8)
    configs = [navigation_config(), event_config(), seed_example(), navigation_config(3 * 86_400)]
    for _device in range(60):
        events = []
        for i in range(int(rng.integers(1, 4))):
            config = configs[int(rng.integers(len(configs)))]
            events.append(EventSource(f"s{i}", "d", T0 + int(rng.integers(0, 5 * DAY)), config,
                                      priority=int(rng.integers(0, 2))))
        for j in range(int(rng.integers(0, 25))):
            events.append(EventTrigger(f"t{j}", "d", T0 + int(rng.integers(0, 40 * DAY)), int(rng.integers(0, 10)),
                                       int(rng.integers(0, 40))))
        client = EventLevelClient()
        reports = client.replay(events)
        for registered in client.sources:
            config = registered.source.config
            rank = rank_output(config, registered.counts)  # raises unless the counts lie in O
            assert 0 <= rank < count_outputs(config)
            mine = [r for r in reports if r.source_id == registered.source.source_id]
            assert sorted(mine, key=lambda r: (r.trigger_data, r.window_index, r.summary_bucket)) == sorted(
                fake_reports(registered.source, unrank_output(config, rank)),
                key=lambda r: (r.trigger_data, r.window_index, r.summary_bucket))


def test_events_out_of_time_order_are_refused():
    client = EventLevelClient()
    client.register_source(shoe_source())
    with pytest.raises(ValueError):
        client.register_trigger(EventTrigger("t", "shoes-website.com", T0 - 1, 0))
    with pytest.raises(ValueError):
        EventLevelClient(epsilon=1.0)  # noise without a random source
