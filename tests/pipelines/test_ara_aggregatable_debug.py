"""Aggregatable debug reports (``pipelines.ara_aggregatable_debug``): their types, keys and budgets, on hand-built
outcomes whose answer the specification fixes (Chrome's interop cases ``aggregatable_debug_reports*`` check the same
rules end to end)."""
from __future__ import annotations

from pipelines.ara_aggregatable_debug import DebugBudgets, source_debug_report, trigger_debug_report
from schemas.registrations import NAVIGATION, AggregatableDebugConfig, SourceRegistration, TriggerRegistration
from schemas.time_units import MICROS_PER_DAY
from transforms.core.mechanisms.ara_attribution import PartResult, SourceOutcome, SourceRefused, StoredSource, TriggerOutcome

COORDINATOR = "https://coordinator.test"
REPORTER = "https://reporter.test"


def config(key_piece: int, *data: tuple[str, int, int]) -> AggregatableDebugConfig:
    return AggregatableDebugConfig(key_piece, tuple(sorted(data)), COORDINATOR)


def source(budget: int = 0, debug: AggregatableDebugConfig | None = None, time_micros: int = 0) -> SourceRegistration:
    return SourceRegistration(
        time_micros=time_micros, source_site="https://source.test", source_origin="https://source.test",
        reporting_origin=REPORTER, reporting_site=REPORTER, source_type=NAVIGATION, source_event_id=1,
        destination_sites=("https://d2.test", "https://d1.test"), expiry_seconds=86_400,
        aggregatable_debug_budget=budget, aggregatable_debug=debug)


def trigger(time_micros: int, debug: AggregatableDebugConfig | None) -> TriggerRegistration:
    return TriggerRegistration(time_micros=time_micros, destination_site="https://d1.test", reporting_origin=REPORTER,
                               reporting_site=REPORTER, aggregatable_debug=debug)


def histograms(record: dict) -> list[tuple[str, int]]:
    return [(entry["key"], entry["value"]) for entry in record["payload"]["histograms"]]


def test_a_source_report_names_its_outcome_and_a_replacement_in_chromes_order():
    debug = config(0x3, ("source-success", 0x4, 8), ("source-destination-limit-replaced", 0x8, 10))
    registration = source(100, debug)
    stored = StoredSource(registration, 0, MICROS_PER_DAY)
    record = source_debug_report(SourceOutcome(registration, stored, None, (), 1), False, DebugBudgets())
    assert histograms(record) == [("0x7", 8), ("0xb", 10)]
    assert record["report_url"] == REPORTER + "/.well-known/attribution-reporting/debug/report-aggregate-debug"
    info = record["payload"]["shared_info"]
    assert (info["api"], info["attribution_destination"], info["version"]) == (
        "attribution-reporting-debug", "https://d1.test", "1.0")  # the first destination in order


def test_a_refusal_told_as_a_success_in_verbose_reports_is_told_as_itself_here():
    debug = config(0, ("source-reporting-origin-limit", 0x1, 1), ("source-success", 0x2, 1))
    refused = SourceRefused("source_success_excessive_reporting_origins", "")
    record = source_debug_report(SourceOutcome(source(10, debug), None, refused), False, DebugBudgets())
    assert histograms(record) == [("0x1", 1)]


def test_a_report_beyond_the_sources_budget_or_count_is_a_null_report_and_costs_nothing():
    debug = config(0, ("source-success", 0x1, 6), ("trigger-no-matching-filter-data", 0x2, 3))
    registration = source(10, debug)
    stored = StoredSource(registration, 0, MICROS_PER_DAY)
    budgets = DebugBudgets(max_reports_per_source=2)
    assert histograms(source_debug_report(SourceOutcome(registration, stored, None), False, budgets)) == [("0x1", 6)]
    unattributed = TriggerOutcome(trigger(1, debug), stored, False)
    quiet = PartResult("no_matching_source_filter_data")
    assert histograms(trigger_debug_report(unattributed, quiet, quiet, budgets)) == [("0x2", 3)]  # 9 of 10, 2 of 2
    assert histograms(trigger_debug_report(unattributed, quiet, quiet, budgets)) == [("0x0", 0)]  # count spent
    assert budgets.of(stored).remaining == 1 and len(budgets.sent) == 2


def test_the_day_budgets_of_a_context_site():
    """Per context site at most ``max_per_context_site`` and per (context site, reporting site) 65,536 in the last
    day; a record exactly a day old no longer counts."""
    debug = config(0, ("trigger-no-matching-source", 0x1, 65_536))
    budgets = DebugBudgets(max_per_context_site=100_000)
    missed = PartResult("no_matching_sources")
    first = trigger_debug_report(TriggerOutcome(trigger(0, debug), None, False), missed, missed, budgets)
    again = trigger_debug_report(TriggerOutcome(trigger(5, debug), None, False), missed, missed, budgets)
    later = trigger_debug_report(TriggerOutcome(trigger(MICROS_PER_DAY, debug), None, False), missed, missed, budgets)
    assert [histograms(r) for r in (first, again, later)] == [[("0x1", 65_536)], [("0x0", 0)], [("0x1", 65_536)]]


def test_no_report_without_listed_types_or_data():
    assert source_debug_report(SourceOutcome(source(10, config(1)), None, None), False, DebugBudgets()) is None
    nothing = PartResult("not_registered")
    debug = config(0, ("trigger-no-matching-source", 0x1, 1))
    assert trigger_debug_report(TriggerOutcome(trigger(0, debug), None, False), nothing, nothing, DebugBudgets()) is None
