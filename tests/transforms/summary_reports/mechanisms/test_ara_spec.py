"""The ARA summary client's specification mode (``transforms.summary_reports.mechanisms.ara_spec``): report delays,
null-report rates, the per-source limits and the contribution rules, on hand-built registrations.

Each statistical test fails falsely with probability about 2e-9 (a count or a mean outside 6 standard deviations
of its expectation, by the normal approximation)."""
from __future__ import annotations

import math
import statistics

from schemas.registrations import (
    EXCLUDE,
    INCLUDE,
    NAVIGATION,
    AggregatableTriggerData,
    AggregatableValues,
    NamedBudgetCandidate,
    SourceRegistration,
    TriggerRegistration,
)
from schemas.time_units import MICROS_PER_SECOND
from transforms.core.mechanisms.ara_attribution import DESTINATION_LIMIT, PartResult, SourceRemoval
from transforms.core.mechanisms.noise import SeededSource
from transforms.summary_reports.mechanisms.ara_spec import (
    MAX_LOOKBACK_DAYS,
    NULL_REPORT_RATE_EXCLUDE,
    NULL_REPORT_RATE_INCLUDE,
    SpecAggregatable,
    contributions,
)

DAY = 86_400
SHOP = "https://shop.example"
N = 4_000
SPACING = 10_000  # seconds between triggers


def source(time_s: float = 0) -> SourceRegistration:
    return SourceRegistration(
        time_micros=int(time_s * MICROS_PER_SECOND), source_site="https://news.example",
        source_origin="https://news.example", reporting_origin="https://adtech.example",
        reporting_site="https://adtech.example", source_type=NAVIGATION, source_event_id=1, destination_sites=(SHOP,),
        expiry_seconds=30 * DAY, aggregatable_report_window_seconds=30 * DAY,
        aggregation_keys=(("b", 0x100), ("a", 0x1)))


def trigger(time_s: float, values: dict[str, int] | None = None, registration_time: str = EXCLUDE,
            context_id: str | None = None) -> TriggerRegistration:
    return TriggerRegistration(
        time_micros=int(time_s * MICROS_PER_SECOND), destination_site=SHOP, reporting_origin="https://adtech.example",
        reporting_site="https://adtech.example",
        aggregatable_trigger_data=(AggregatableTriggerData(0x10, ("a",)),),
        aggregatable_values=(AggregatableValues(tuple((values or {"a": 5}).items())),),
        source_registration_time=registration_time, trigger_context_id=context_id)


def within_6_sd(count: int, n: int, p: float) -> bool:
    return abs(count - n * p) <= 6 * math.sqrt(n * p * (1 - p))


def test_delays_are_uniform_between_10_and_60_minutes():
    """One trigger a second, each to a source of its own (so no per-source limit binds) with its own value, which
    tells which trigger a report is of."""
    client = SpecAggregatable(random_source=SeededSource(5), max_attributions=N, max_reports_per_destination=N)
    src = source()
    for i in range(N):
        client.attribute(src, client.register_source(src, None), trigger(i, {"a": i + 1}), [])
    delays = [report.report_time_micros // MICROS_PER_SECOND - (report.contributions[0][1] - 1)
              for report in client.release(2**62)]
    assert len(delays) == N and min(delays) >= 600 and max(delays) <= 3_600
    sd_of_mean = 3_000 / math.sqrt(12) / math.sqrt(N)
    assert abs(statistics.fmean(delays) - 2_100) <= 6 * sd_of_mean
    assert len(set(delays)) > 1_000  # drawn, not fixed


def test_null_reports_excluded_come_at_5_percent_of_unattributed_triggers():
    client = SpecAggregatable(random_source=SeededSource(6))
    for i in range(N):
        client.attribute(None, None, trigger(SPACING * i), None)
    reports = client.release(2**62)
    assert all(report.is_null and report.contributions == ((0, 0, 0),) for report in reports)
    assert all(report.source_registration_time_seconds is None for report in reports)
    assert within_6_sd(len(reports), N, NULL_REPORT_RATE_EXCLUDE)


def test_null_reports_included_come_at_0_8_percent_of_each_lookback_day():
    client = SpecAggregatable(random_source=SeededSource(7))
    n = 2_000
    for i in range(n):
        client.attribute(None, None, trigger(DAY * 40 + SPACING * i, registration_time=INCLUDE), None)
    reports = client.release(2**62)
    assert within_6_sd(len(reports), n * (MAX_LOOKBACK_DAYS + 1), NULL_REPORT_RATE_INCLUDE)
    assert all(report.source_registration_time_seconds % DAY == 0 for report in reports)


def test_a_trigger_context_id_sends_at_once_and_always_a_null_report_when_nothing_is_attributed():
    client = SpecAggregatable(random_source=SeededSource(8))
    client.attribute(None, None, trigger(100, context_id="x"), None)
    [report] = client.release(2**62)
    assert report.is_null and report.report_time_micros == 100 * MICROS_PER_SECOND and report.trigger_context_id == "x"


def test_contributions_in_key_id_order_with_the_key_pieces_ored():
    assert contributions(source(), trigger(5, {"a": 3, "b": 4, "c": 9})) == [(0x11, 3, 0), (0x100, 4, 0)]


def test_the_budget_of_65536_per_source_drops_a_report_whole():
    client = SpecAggregatable()
    src = source()
    state = client.register_source(src, None)
    for time_s, values in [(1, {"a": 65_530, "b": 7}), (2, {"a": 65_535}), (3, {"a": 2}), (4, {"b": 1})]:
        client.attribute(src, state, trigger(time_s, values), [])
    assert client.outcomes == {"insufficient_budget": 2, "success": 2}
    assert [report.contributions for report in client.release(2**62)] == [((0x11, 65_535, 0),), ((0x100, 1, 0),)]


def test_a_filtering_id_width_other_than_the_default_is_sent_at_once_with_a_null_report_when_unattributed():
    """Spec "generate null reports": a trigger with ``aggregatable_filtering_id_max_bytes`` other than 1, as one with
    a trigger context id, is reported without delay and sends a null report whenever it makes no real one; its
    contributions carry their filtering ids (the interop case ``aggregatable_contributions_with_filtering_ids``)."""
    client = SpecAggregatable(random_source=SeededSource(2))
    wide = trigger(100)._replace(filtering_id_max_bytes=2, aggregatable_values=(
        AggregatableValues((("a", 5),), filtering_ids=(("a", 300),)),))
    assert client.attribute(source(), client.register_source(source()), wide, None)
    for i in range(50):
        client.attribute(None, None, trigger(200 + i)._replace(filtering_id_max_bytes=3), None)
    reports = client.release(2**62)
    real = [report for report in reports if not report.is_null]
    assert [(r.contributions, r.report_time_micros, r.filtering_id_max_bytes) for r in real] == \
        [(((0x11, 5, 300),), 100 * MICROS_PER_SECOND, 2)]
    nulls = [report for report in reports if report.is_null]
    assert [r.report_time_micros for r in nulls] == [(200 + i) * MICROS_PER_SECOND for i in range(50)]


def test_named_budgets_are_checked_after_the_l1_budget_and_charged_with_it():
    """Spec "named budgets" (the interop case ``aggregatable_named_budgets``): the first candidate whose filters
    match names the budget; one the source lacks charges nothing; the debug budget is set aside from L1."""
    src = source()._replace(named_budgets=(("a", 10), ("z", 0)), aggregatable_debug_budget=65_000)
    client = SpecAggregatable()
    state = client.register_source(src)
    named = trigger(1, {"a": 10})._replace(named_budgets=(NamedBudgetCandidate("a"),))
    assert client.attribute(src, state, named)
    assert not client.attribute(src, state, trigger(2, {"a": 1})._replace(named_budgets=(NamedBudgetCandidate("a"),)))
    assert client.results[-1] == PartResult("insufficient_named_budget", None, ("a", 10))
    assert not client.attribute(src, state, trigger(3, {"a": 600})._replace(named_budgets=(NamedBudgetCandidate("z"),)))
    assert client.results[-1].outcome == "insufficient_budget"  # 10 + 600 > 65,536 - 65,000, before the named one
    unknown = trigger(4, {"a": 500})._replace(named_budgets=(NamedBudgetCandidate("nope"), NamedBudgetCandidate("z")))
    assert client.attribute(src, state, unknown)  # the first candidate wins: a name the source lacks charges nothing
    assert state.budget.total == 65_000 + 10 + 500


def test_a_source_replaced_under_the_destination_limit_drops_its_pending_reports_only():
    """Spec "delete sources for unexpired destination limit": the source's unsent aggregatable reports go with their
    attribution records; one already sent keeps its record (it still counts against the attribution rate limit)."""
    client = SpecAggregatable(max_attributions=2)
    src = source()
    state = client.register_source(src)
    assert client.attribute(src, state, trigger(100))
    sent = client.release(10**12)  # the first report is sent
    assert client.attribute(src, state, trigger(200_000))
    client.remove_source(src, state, SourceRemoval(DESTINATION_LIMIT, 200_001 * MICROS_PER_SECOND))
    assert len(sent) == 1 and client.release(2**62) == []  # the pending one is dropped
    other = source(300_000)._replace(source_event_id=2)
    other_state = client.register_source(other)
    assert client.attribute(other, other_state, trigger(300_100))  # its record was forgotten: room for one more
    assert not client.attribute(other, other_state, trigger(300_200))  # the sent one's record still counts
    assert client.results[-1].outcome == "excessive_attributions"
