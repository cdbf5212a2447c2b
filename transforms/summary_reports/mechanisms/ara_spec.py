"""The ARA summary-report client in the Attribution Reporting specification's mode: registrations as Chrome
receives them (``schemas.registrations``), aggregatable reports as Chrome sends them (W3C/WICG "Attribution
Reporting", "Triggering aggregatable attribution" and "Null attribution reports"; Chrome's
``AttributionStorageSql::MaybeCreateAggregatableAttributionReport``).

Ghazi et al.'s Alg. 2 (``ara_client.py``) is this client with every trigger answered by one (possibly null)
report. The specification answers a trigger that has aggregatable data with a report when it is attributed
within budget, and otherwise sends null reports only as its null-report rule says:

* **Report window**: the trigger must come before the source's ``aggregatable_report_window`` ends.
* **Deduplication**: the first ``aggregatable_deduplication_keys`` entry whose filters match gives the key; a
  key the source has already reported drops the trigger.
* **Contributions**: each source key OR the key pieces of the matching ``aggregatable_trigger_data`` entries
  that name it, with the value the first matching ``aggregatable_values`` entry gives it; none: no report.
* **Limits**: at most ``max_reports_per_source`` (20) reports per source; the values of all its reports sum
  to at most the budget L1 = 65,536 (``ContributionBudget``: a report that would exceed it is dropped whole), less
  what the source set aside for its aggregatable debug reports; and, when the first of the trigger's
  ``named_budgets`` whose filters match names one of the source's, to at most that named budget (spec "named
  budgets"; checked after L1, both charged only for a report made).
* **Attribution rate limit**: as the event-level client, counted separately for aggregatable reports.
* **Storage limit**: at most ``max_reports_per_destination`` unsent reports per destination site.
* **Null reports**: with ``aggregatable_source_registration_time: "include"``, one null report per lookback
  day chosen by the null-report rule (each of days 0..30 with probability 0.008), except the attributed
  source's day when a real report was made, each carrying that day's ``source_registration_time``; with
  ``"exclude"``, one null report (probability 0.05; always for a trigger sent at once, below) when no real
  report was made. A null report has one contribution (0, 0).
* **Report time**: the trigger time plus a delay uniform in [min_delay, min_delay + delay_span] (10 and 50
  minutes), or ``fixed_delay_seconds``; no delay for a trigger with a ``trigger_context_id`` or a filtering id
  max bytes other than 1 (and with either, a null report whenever no real one is made).
* **Filtering ids**: each contribution carries the filtering id its ``aggregatable_values`` entry gives its key
  (default 0), which the Aggregation Service's ``--filtering-ids`` selects.

No Beam import here.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from schemas.limits import CONTRIBUTION_BUDGET, DEFAULT_FILTERING_ID_MAX_BYTES
from schemas.registrations import INCLUDE, SourceRegistration, TriggerRegistration, debug_keys
from schemas.time_units import MICROS_PER_DAY, MICROS_PER_SECOND
from transforms.core.mechanisms.ara_attribution import (
    DESTINATION_LIMIT,
    MAX_ATTRIBUTIONS,
    RATE_LIMIT_WINDOW_MICROS,
    AttributionRateLimit,
    PartResult,
    SourceRemoval,
    filters_match,
    split_due,
)
from transforms.core.mechanisms.noise import RandomSource
from transforms.summary_reports.mechanisms.contributions import (
    MAX_DELAY_SECONDS,
    MIN_DELAY_SECONDS,
    ContributionBudget,
    ContributionLimits,
    keyed_below,
)

MAX_REPORTS_PER_SOURCE = 20
DELAY_SPAN_SECONDS = MAX_DELAY_SECONDS - MIN_DELAY_SECONDS
NULL_REPORT_RATE_INCLUDE = 0.008
NULL_REPORT_RATE_EXCLUDE = 0.05
MAX_LOOKBACK_DAYS = 30
MAX_REPORTS_PER_DESTINATION = 1024
# the budget charges only the sum: the number of contributions is bounded per report by the key count (20)
_SPEC_LIMITS = ContributionLimits(l0=2**31, l1=CONTRIBUTION_BUDGET)


@dataclass(frozen=True)
class SpecAggregatableReport:
    """An aggregatable report as the browser sends it, its histogram contributions in clear."""

    reporting_origin: str
    attribution_destination: str  # the trigger's destination site
    report_time_micros: int
    contributions: tuple[tuple[int, int, int], ...]  # (key, value, filtering id); a null report: ((0, 0, 0),)
    aggregation_coordinator_origin: str
    source_registration_time_seconds: int | None = None  # with "include" only
    trigger_context_id: str | None = None
    source_debug_key: int | None = None
    trigger_debug_key: int | None = None
    is_null: bool = False
    filtering_id_max_bytes: int = 1


@dataclass
class SpecAggregatableSource:
    """The aggregatable state of one stored source."""

    budget: ContributionBudget = field(default_factory=ContributionBudget)
    reports: int = 0
    dedup_keys: set[int] = field(default_factory=set)
    made: list[SpecAggregatableReport] = field(default_factory=list)  # its reports (at most max_reports_per_source)
    named_spent: dict[str, int] = field(default_factory=dict)  # what each of its named budgets has paid


def contributions(source: SourceRegistration, trigger: TriggerRegistration) -> list[tuple[int, int, int]]:
    """(key, value, filtering id) per source key the trigger gives a value, in the order of the key ids (spec
    "create aggregatable contributions"; Chrome keeps them in a sorted map)."""
    keys = dict(source.aggregation_keys)
    for entry in trigger.aggregatable_trigger_data:
        if filters_match(source, trigger.time_micros, entry.filters):
            for name in entry.source_keys:
                if name in keys:
                    keys[name] |= entry.key_piece
    matched = next((entry for entry in trigger.aggregatable_values
                    if filters_match(source, trigger.time_micros, entry.filters)), None)
    if matched is None:
        return []
    values, filtering_ids = dict(matched.values), dict(matched.filtering_ids)
    return [(keys[name], values[name], filtering_ids.get(name, 0)) for name in sorted(keys) if values.get(name, 0) > 0]


def named_budget(source: SourceRegistration, trigger: TriggerRegistration) -> tuple[str, int] | None:
    """The source's named budget (name, amount) a trigger's report is charged to: that of the first of the trigger's
    ``named_budgets`` whose filters match the source, if the source has one by its name (spec "find matching budget
    name")."""
    name = next((candidate.name for candidate in trigger.named_budgets
                 if filters_match(source, trigger.time_micros, candidate.filters)), None)
    budgets = dict(source.named_budgets)
    return (name, budgets[name]) if name is not None and name in budgets else None


def _sent_at_once(trigger: TriggerRegistration) -> bool:
    """A trigger with a ``trigger_context_id`` or a filtering id max bytes other than the default: its report is
    sent without delay, and a null report is always sent when no real one is (spec "generate null reports" with
    the source registration time excluded), so that either setting tells nothing by its timing."""
    return trigger.trigger_context_id is not None or trigger.filtering_id_max_bytes != DEFAULT_FILTERING_ID_MAX_BYTES


def day_floor_seconds(time_micros: int) -> int:
    return time_micros // MICROS_PER_DAY * (MICROS_PER_DAY // MICROS_PER_SECOND)


@dataclass
class SpecAggregatable:
    """The aggregatable ``AttributionPart`` of ``transforms.core.mechanisms.ara_attribution``.

    ``random_source`` draws report delays and null reports when the caller does not fix them; with neither,
    delays are the largest (``min + span``) and no null report is sent."""

    random_source: RandomSource | None = None
    fixed_delay_seconds: int | None = None
    max_reports_per_source: int = MAX_REPORTS_PER_SOURCE
    max_attributions: int = MAX_ATTRIBUTIONS
    rate_limit_window_micros: int = RATE_LIMIT_WINDOW_MICROS
    max_reports_per_destination: int = MAX_REPORTS_PER_DESTINATION
    min_delay_seconds: int = MIN_DELAY_SECONDS
    delay_span_seconds: int = DELAY_SPAN_SECONDS
    outcomes: Counter = field(default_factory=Counter)
    results: list[PartResult] = field(default_factory=list)  # each trigger's, in the order they came
    _due: list[SpecAggregatableReport] = field(default_factory=list)
    _rate_limit: AttributionRateLimit = field(init=False)

    def __post_init__(self) -> None:
        self._rate_limit = AttributionRateLimit(self.max_attributions, self.rate_limit_window_micros)

    def register_source(self, source: SourceRegistration, choice: object = None) -> SpecAggregatableSource:
        """The state of a source stored at once."""
        return self.prepare_source(source, choice)

    def prepare_source(self, source: SourceRegistration, choice: object = None) -> SpecAggregatableSource:
        """A source's state: its L1 budget less what it set aside for aggregatable debug reports."""
        state = SpecAggregatableSource()
        if source.aggregatable_debug_budget:
            state.budget.charge([source.aggregatable_debug_budget], _SPEC_LIMITS)
        return state

    def store_source(self, source: SourceRegistration, state: SpecAggregatableSource) -> None:
        """Nothing to store before a trigger."""

    def remove_source(self, source: SourceRegistration, state: SpecAggregatableSource, removal: SourceRemoval) -> None:
        """Under the unexpired destination limit every pending (not yet sent) report of the source is dropped, with
        its attribution record (spec "delete sources for unexpired destination limit"); a removal for attribution
        scopes drops none."""
        pending = [report for report in state.made if any(report is due for due in self._due)]
        if removal.reason != DESTINATION_LIMIT or not pending:
            return
        self._due = [due for due in self._due if not any(due is report for report in pending)]
        for report in pending:  # a report already sent keeps its record, as Chrome's rate-limit table does
            self._rate_limit.forget(report)
        state.made = [report for report in state.made if not any(report is dropped for dropped in pending)]

    def attribute(self, source: SourceRegistration | None, state: SpecAggregatableSource | None,
                  trigger: TriggerRegistration, choice: Sequence[int] | None = None, refused: str | None = None) -> bool:
        """The specification's aggregatable attribution of ``trigger`` and its null reports; ``choice``: the
        lookback days the null-report rule chose for it (None: draw them); ``refused``: a rate limit of the
        storage refuses it. Whether a (non-null) report was made."""
        if not trigger.has_aggregatable_data:
            self.outcomes["not_registered"] += 1
            self.results.append(PartResult("not_registered"))
            return False
        outcome, report = self._attribute(source, state, trigger, refused)
        self.outcomes[outcome] += 1
        named = named_budget(source, trigger) if outcome == "insufficient_named_budget" and source else None
        self.results.append(PartResult(outcome, report, named))
        if report is not None:
            self._due.append(report)
        days = self._null_report_days(trigger) if choice is None else list(choice)
        source_day = None if report is None or source is None else \
            (day_floor_seconds(trigger.time_micros) - day_floor_seconds(source.time_micros)) // 86_400
        if trigger.source_registration_time == INCLUDE:
            for day in sorted(set(days)):
                if day != source_day:
                    self._due.append(self._null_report(trigger, day_floor_seconds(trigger.time_micros) - day * 86_400))
        elif report is None and (days or _sent_at_once(trigger)):
            self._due.append(self._null_report(trigger, None))
        return report is not None

    def _attribute(self, source: SourceRegistration | None, state: SpecAggregatableSource | None,
                   trigger: TriggerRegistration, refused: str | None) -> tuple[str, SpecAggregatableReport | None]:
        if source is None or state is None:
            return "no_matching_sources", None
        if trigger.time_micros >= source.time_micros + source.aggregatable_report_window_seconds * MICROS_PER_SECOND:
            return "report_window_passed", None
        dedup = next((entry for entry in trigger.aggregatable_dedup_keys
                      if filters_match(source, trigger.time_micros, entry.filters)), None)
        dedup_key = None if dedup is None else dedup.deduplication_key
        if dedup_key is not None and dedup_key in state.dedup_keys:
            return "deduplicated", None
        found = contributions(source, trigger)
        if not found:
            return "no_histograms", None
        if state.reports >= self.max_reports_per_source:
            return "excessive_reports", None
        if refused is not None:
            return refused, None
        if not self._rate_limit.allows(source, trigger):
            return "excessive_attributions", None
        if sum(1 for r in self._due if not r.is_null and r.attribution_destination == trigger.destination_site) \
                >= self.max_reports_per_destination:
            return "no_capacity_for_conversion_destination", None
        refusal = self._charge(source, state, trigger, [value for _, value, _ in found])
        if refusal is not None:
            return refusal, None
        state.reports += 1
        if dedup_key is not None:
            state.dedup_keys.add(dedup_key)
        include = trigger.source_registration_time == INCLUDE
        report = SpecAggregatableReport(
            trigger.reporting_origin, trigger.destination_site, self._report_time(trigger), tuple(found),
            trigger.aggregation_coordinator_origin, day_floor_seconds(source.time_micros) if include else None,
            trigger.trigger_context_id, *debug_keys(source, trigger), filtering_id_max_bytes=trigger.filtering_id_max_bytes,
        )
        self._rate_limit.record(source, trigger, report)
        state.made.append(report)
        return "success", report

    def _charge(self, source: SourceRegistration, state: SpecAggregatableSource, trigger: TriggerRegistration,
                values: list[int]) -> str | None:
        """Charge a report's values to the source's L1 budget and to the named budget the trigger names, if they
        fit both (L1 checked first); the outcome that refuses the report, or None once charged."""
        if not state.budget.fits(values, _SPEC_LIMITS):
            return "insufficient_budget"
        named = named_budget(source, trigger)
        if named is not None and state.named_spent.get(named[0], 0) + sum(values) > named[1]:
            return "insufficient_named_budget"
        state.budget.charge(values, _SPEC_LIMITS)
        if named is not None:
            state.named_spent[named[0]] = state.named_spent.get(named[0], 0) + sum(values)
        return None

    def _report_time(self, trigger: TriggerRegistration) -> int:
        if _sent_at_once(trigger):
            delay = 0  # its null reports always are sent too, below
        elif self.fixed_delay_seconds is not None:
            delay = self.fixed_delay_seconds
        elif self.random_source is not None:
            delay = self.min_delay_seconds + keyed_below(
                self.random_source, ("aggregatable-delay", trigger.reporting_origin, trigger.time_micros),
                self.delay_span_seconds + 1)
        else:
            delay = self.min_delay_seconds + self.delay_span_seconds
        return trigger.time_micros + delay * MICROS_PER_SECOND

    def _null_report_days(self, trigger: TriggerRegistration) -> list[int]:
        if self.random_source is None:
            return []
        key = ("null-reports", trigger.reporting_origin, trigger.time_micros)
        if trigger.source_registration_time == INCLUDE:
            draws = self.random_source.keyed_uniforms(key, MAX_LOOKBACK_DAYS + 1)
            return [day for day, u in enumerate(draws) if u < NULL_REPORT_RATE_INCLUDE]
        return [0] if self.random_source.keyed_uniform(key) < NULL_REPORT_RATE_EXCLUDE else []

    def _null_report(self, trigger: TriggerRegistration, registration_day_seconds: int | None) -> SpecAggregatableReport:
        return SpecAggregatableReport(
            trigger.reporting_origin, trigger.destination_site, self._report_time(trigger), ((0, 0, 0),),
            trigger.aggregation_coordinator_origin, registration_day_seconds, trigger.trigger_context_id,
            is_null=True, filtering_id_max_bytes=trigger.filtering_id_max_bytes,
        )

    def release(self, until_micros: int) -> list[SpecAggregatableReport]:
        """The reports due by ``until_micros``, in report-time order."""
        due, self._due = split_due(self._due, until_micros)
        return due
