"""Aggregatable debug reports of the Attribution Reporting API: what the browser tells a reporting origin, at once,
about a registration's outcome, as an aggregatable report whose contributions name the outcome's debug data types
(the specification's "obtain and deliver an aggregatable debug report on source registration" and "... on trigger
registration"; Chrome's ``AggregatableDebugReport`` and ``AttributionResolverImpl::ProcessAggregatableDebugReport``).
Unlike verbose debug reports they need no debug permission: the values are private once aggregated with noise.

A registration with an ``aggregatable_debug_reporting`` configuration that lists some type (a source's own data, a
trigger's that has event-level or aggregatable data) makes one report, sent at the registration's time to
``<reporting origin>/.well-known/attribution-reporting/debug/report-aggregate-debug``:

* its types: a source's outcome (``SOURCE_TYPES``; unlike the verbose report, a refusal by a limit shared across
  reporting sites is told as itself, and a noised source as ``source-noised`` only) and
  ``source-destination-limit-replaced`` when it replaced older sources; a trigger's as its verbose report's
  (``pipelines.ara_debug_reports.typed_results``);
* a contribution per type its configuration lists, in Chrome's order of the types (``TYPE_ORDER``): key = the type's
  key piece | the configuration's key piece (a trigger's: | its source's), value = the type's value;
* a null report instead (one contribution (0, 0), nothing charged) when no type is listed, or when the values
  exceed what is left of the source's debug budget (set aside from its L1 budget at registration; a trigger
  without a source: 65,536 per report), or its ``max_reports_per_source`` reports are sent, or they would take the
  context site (the source's site, the trigger's destination) past ``max_per_context_site`` or the context site
  and reporting site past 65,536 in the last day (``DebugBudgets``).

No attribution changes here: the reports are derived from the registrations' outcomes, in registration order.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pipelines.ara_debug_reports import REFUSAL_TYPES, SOURCE_NOISED, SOURCE_SUCCESS, typed_results
from schemas.limits import CONTRIBUTION_BUDGET
from schemas.registrations import AggregatableDebugConfig
from schemas.time_units import MICROS_PER_DAY
from transforms.core.mechanisms.ara_attribution import PartResult, SourceOutcome, StoredSource, TriggerOutcome

REPORT_PATH = "/.well-known/attribution-reporting/debug/report-aggregate-debug"
API = "attribution-reporting-debug"
VERSION = "1.0"
REPLACED = "source-destination-limit-replaced"
MAX_REPORTS_PER_SOURCE = 5
MAX_PER_CONTEXT_SITE = 2**20
MAX_PER_REPORTING_SITE = CONTRIBUTION_BUDGET
# a refused source's reason -> its type: as the verbose report's, but the refusals told there as a success are told
SOURCE_TYPES = {
    **REFUSAL_TYPES,
    "source_success_excessive_reporting_origins": "source-reporting-origin-limit",
    "source_destination_global_rate_limit": "source-destination-global-rate-limit",
}
# Chrome's ``DebugDataType`` order: the order of a report's contributions
TYPE_ORDER = {kind: index for index, kind in enumerate((
    "source-destination-limit", "source-noised", "source-storage-limit", "source-success", "source-unknown-error",
    "source-destination-rate-limit", "trigger-no-matching-source", "trigger-no-matching-filter-data",
    "trigger-reporting-origin-limit", "trigger-event-deduplicated", "trigger-event-no-matching-configurations",
    "trigger-event-noise", "trigger-event-low-priority", "trigger-event-excessive-reports",
    "trigger-event-storage-limit", "trigger-event-report-window-passed", "trigger-aggregate-deduplicated",
    "trigger-aggregate-no-contributions", "trigger-aggregate-insufficient-budget", "trigger-aggregate-storage-limit",
    "trigger-aggregate-report-window-passed", "trigger-aggregate-excessive-reports", "trigger-unknown-error",
    "trigger-event-report-window-not-started", "trigger-event-no-matching-trigger-data",
    "source-reporting-origin-per-site-limit", "trigger-event-attributions-per-source-destination-limit",
    "trigger-aggregate-attributions-per-source-destination-limit", "source-channel-capacity-limit",
    "source-trigger-state-cardinality-limit", "source-destination-global-rate-limit", "source-reporting-origin-limit",
    "source-destination-per-day-rate-limit", REPLACED, "source-scopes-channel-capacity-limit",
    "source-max-event-states-limit", "trigger-aggregate-insufficient-named-budget",
))}


@dataclass
class DebugBudget:
    """What a source has left for aggregatable debug reports: budget and reports."""

    remaining: int
    reports: int = 0


@dataclass
class DebugBudgets:
    """The limits aggregatable debug reports meet on one device: each stored source's debug budget and report
    count, and the budget sent per context site and per (context site, reporting site) in the last day (Chrome's
    ``AggregatableDebugRateLimitTable``: a record a day old no longer counts)."""

    max_reports_per_source: int = MAX_REPORTS_PER_SOURCE
    max_per_context_site: int = MAX_PER_CONTEXT_SITE
    max_per_reporting_site: int = MAX_PER_REPORTING_SITE
    sources: dict[StoredSource, DebugBudget] = field(default_factory=dict)
    sent: list[tuple[str, str, int, int]] = field(default_factory=list)  # (context site, reporting site, time, budget)

    def of(self, stored: StoredSource) -> DebugBudget:
        if stored not in self.sources:
            self.sources[stored] = DebugBudget(stored.registration.aggregatable_debug_budget)
        return self.sources[stored]

    def allows(self, budget: DebugBudget, need: int, context_site: str, reporting_site: str, time_micros: int) -> bool:
        """Whether a report of ``need`` fits the source's budget and count and the day's budgets of its sites."""
        if need > budget.remaining or budget.reports >= self.max_reports_per_source:
            return False
        recent = [(site, reporting, spent) for site, reporting, time, spent in self.sent
                  if site == context_site and time > time_micros - MICROS_PER_DAY]
        return need + sum(spent for _, _, spent in recent) <= self.max_per_context_site and \
            need + sum(spent for _, reporting, spent in recent if reporting == reporting_site) <= self.max_per_reporting_site

    def charge(self, budget: DebugBudget, need: int, context_site: str, reporting_site: str, time_micros: int) -> None:
        budget.remaining -= need
        budget.reports += 1
        self.sent.append((context_site, reporting_site, time_micros, need))


def _record(config: AggregatableDebugConfig, contributions: list[tuple[int, int]], reporting_origin: str,
            destination: str, time_micros: int) -> dict[str, Any]:
    """The report as the interop suite writes it: URL, time sent (milliseconds), body with the contributions in
    clear (a null report: one (0, 0))."""
    histograms = [{"id": "0", "key": hex(key), "value": value} for key, value in contributions or [(0, 0)]]
    return {
        "report_url": reporting_origin + REPORT_PATH,
        "report_time": str(time_micros // 1_000),
        "payload": {
            "aggregation_coordinator_origin": config.aggregation_coordinator_origin,
            "histograms": histograms,
            "shared_info": {"api": API, "attribution_destination": destination, "reporting_origin": reporting_origin,
                            "scheduled_report_time": str(time_micros // 1_000_000), "version": VERSION},
        },
    }


def _report(config: AggregatableDebugConfig, types: Iterable[str], extra_key: int, budget: DebugBudget,
            budgets: DebugBudgets, context_site: str, reporting_origin: str, reporting_site: str, destination: str,
            time_micros: int) -> dict[str, Any]:
    listed = [(kind, config.data_of(kind)) for kind in sorted(set(types), key=TYPE_ORDER.__getitem__)]
    contributions = [(data[0] | config.key_piece | extra_key, data[1]) for _, data in listed if data is not None]
    need = sum(value for _, value in contributions)
    if contributions and budgets.allows(budget, need, context_site, reporting_site, time_micros):
        budgets.charge(budget, need, context_site, reporting_site, time_micros)
    else:
        contributions = []
    return _record(config, contributions, reporting_origin, destination, time_micros)


def source_debug_report(outcome: SourceOutcome, noised: bool, budgets: DebugBudgets) -> dict[str, Any] | None:
    """The aggregatable debug report of a source's registration, if its configuration lists any type; ``noised``:
    whether its randomized response was not truthful."""
    source = outcome.source
    config = source.aggregatable_debug
    if config is None or not config.reports_any:
        return None
    if outcome.refusal is None:
        kind = SOURCE_NOISED if noised else SOURCE_SUCCESS
    else:
        kind = SOURCE_TYPES.get(getattr(outcome.refusal, "reason", ""), "source-unknown-error")
    types = [kind, REPLACED] if outcome.destination_limit is not None else [kind]
    budget = budgets.of(outcome.stored) if outcome.stored is not None else DebugBudget(source.aggregatable_debug_budget)
    return _report(config, types, 0, budget, budgets, source.source_site, source.reporting_origin, source.reporting_site,
                   min(source.destination_sites), source.time_micros)


def trigger_debug_report(outcome: TriggerOutcome, event_level: PartResult, aggregatable: PartResult,
                         budgets: DebugBudgets) -> dict[str, Any] | None:
    """The aggregatable debug report of a trigger's registration, if it has a configuration and event-level or
    aggregatable data; charged to the source the storage chose for it (its key piece joins the key)."""
    trigger = outcome.trigger
    config = trigger.aggregatable_debug
    if config is None or not config.reports_any or event_level.outcome == aggregatable.outcome == "not_registered":
        return None
    types = [kind for kind, _ in typed_results(outcome, event_level, aggregatable)]
    if outcome.candidate is None:
        budget, extra_key = DebugBudget(CONTRIBUTION_BUDGET), 0
    else:
        source_config = outcome.candidate.registration.aggregatable_debug
        budget, extra_key = budgets.of(outcome.candidate), 0 if source_config is None else source_config.key_piece
    return _report(config, types, extra_key, budget, budgets, trigger.destination_site, trigger.reporting_origin,
                   trigger.reporting_site, trigger.destination_site, trigger.time_micros)
