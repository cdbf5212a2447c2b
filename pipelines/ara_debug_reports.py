"""Verbose debug reports of the Attribution Reporting API: what the browser tells a reporting origin, at once, about
a registration it asked about (the specification's "verbose debug reports"; Chrome's ``AttributionDebugReport``),
sent to ``<reporting origin>/.well-known/attribution-reporting/debug/verbose`` at the registration's time, with a
body of one or more ``{"type", "body"}`` entries.

Who may ask: a source or a trigger that sets ``debug_reporting`` and was registered with debug permission (Chrome:
third-party cookies allowed, the interop cases' ``debug_permission``); a response whose header cannot be parsed
when it carries ``Attribution-Reporting-Info: report-header-errors`` (no permission needed: it says nothing about
the user). The types sent here (``TYPES``):

* sources: ``source-success`` (stored, its randomized response truthful; also when the storage refuses it for too
  many reporting origins or too many destinations of its source site in the window, limits shared across reporting
  sites whose refusal must not be told apart from a success), ``source-noised`` (the same, with fake reports or
  none), each with ``source_destination_limit`` when the source replaced older ones under the unexpired
  destination limit; ``source-storage-limit``, ``source-reporting-origin-per-site-limit``,
  ``source-destination-limit``, ``source-destination-rate-limit``, ``source-destination-per-day-rate-limit``,
  ``source-channel-capacity-limit``, ``source-trigger-state-cardinality-limit``, and, for a source with attribution
  scopes, ``source-max-event-states-limit`` and ``source-scopes-channel-capacity-limit`` (refused, with the
  ``limit`` that refused it);
* triggers: ``trigger-no-matching-source`` (no stored source of its reporting origin names its destination),
  ``trigger-no-matching-filter-data`` (the chosen source's filter data does not match), and, for a trigger that
  reached a source, one entry per part whose outcome has a type (``EVENT_LEVEL_TYPES``, ``AGGREGATABLE_TYPES``:
  the event-level part's first, the same type once), with the ``limit`` that refused it (a named budget: its
  ``name`` and amount), or, for
  ``trigger-event-low-priority`` and ``trigger-event-excessive-reports``, the body of the report that was not made;
* headers: ``header-parsing-error`` (the header's name and value as received, and the context site).

Beside these, a report made with both a source and a trigger debug key is also sent at once, when its trigger
is attributed, to ``DEBUG_PATH`` + its own path (``pipelines.ara_browser``); and aggregatable debug reports
(``pipelines.ara_aggregatable_debug``) name the same types.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from schemas.registration_log import HeaderErrorReport
from schemas.registrations import SourceRegistration, TriggerRegistration
from transforms.core.mechanisms.ara_attribution import PartResult, SourceOutcome, TriggerOutcome

DEBUG_PATH = "/.well-known/attribution-reporting/debug/"
VERBOSE_PATH = DEBUG_PATH + "verbose"
SOURCE_SUCCESS, SOURCE_NOISED = "source-success", "source-noised"
TRIGGER_NO_MATCHING_SOURCE, HEADER_PARSING_ERROR = "trigger-no-matching-source", "header-parsing-error"
# a refused source's reason (the storage's, or the event-level client's) -> its debug report's type
REFUSAL_TYPES = {
    "source_storage_limit": "source-storage-limit",
    "source_reporting_origin_per_site_limit": "source-reporting-origin-per-site-limit",
    "source_success_excessive_reporting_origins": SOURCE_SUCCESS,
    "source_destination_global_rate_limit": SOURCE_SUCCESS,
    "source_destination_limit": "source-destination-limit",
    "source_destination_rate_limit": "source-destination-rate-limit",
    "source_destination_per_day_rate_limit": "source-destination-per-day-rate-limit",
    "information_gain_too_high": "source-channel-capacity-limit",
    "too_many_states": "source-trigger-state-cardinality-limit",
    "max_event_states_exceeded": "source-max-event-states-limit",
    "scopes_channel_capacity_exceeded": "source-scopes-channel-capacity-limit",
}
MAX_EVENT_STATES_LIMIT = "source-max-event-states-limit"  # its limit is the source's own max_event_states
TRIGGER_NO_MATCHING_FILTER_DATA = "trigger-no-matching-filter-data"
REPORTING_ORIGIN_LIMIT = "trigger-reporting-origin-limit"
# a part's outcome for a trigger (the specification's result names) -> its debug report's type
EVENT_LEVEL_TYPES = {
    "no_matching_configurations": "trigger-event-no-matching-configurations",
    "deduplicated": "trigger-event-deduplicated",
    "report_window_not_started": "trigger-event-report-window-not-started",
    "report_window_passed": "trigger-event-report-window-passed",
    "no_matching_trigger_data": "trigger-event-no-matching-trigger-data",
    "falsely_attributed_source": "trigger-event-noise",
    "never_attributed_source": "trigger-event-noise",
    "excessive_reports": "trigger-event-excessive-reports",
    "priority_too_low": "trigger-event-low-priority",
    "excessive_reporting_origins": REPORTING_ORIGIN_LIMIT,
    "excessive_attributions": "trigger-event-attributions-per-source-destination-limit",
    "no_capacity_for_conversion_destination": "trigger-event-storage-limit",
}
AGGREGATABLE_TYPES = {
    "report_window_passed": "trigger-aggregate-report-window-passed",
    "deduplicated": "trigger-aggregate-deduplicated",
    "no_histograms": "trigger-aggregate-no-contributions",
    "excessive_reports": "trigger-aggregate-excessive-reports",
    "excessive_reporting_origins": REPORTING_ORIGIN_LIMIT,
    "excessive_attributions": "trigger-aggregate-attributions-per-source-destination-limit",
    "no_capacity_for_conversion_destination": "trigger-aggregate-storage-limit",
    "insufficient_budget": "trigger-aggregate-insufficient-budget",
    "insufficient_named_budget": "trigger-aggregate-insufficient-named-budget",
}
REPORT_BODY_TYPES = frozenset({"trigger-event-low-priority", "trigger-event-excessive-reports"})
TYPES = frozenset({SOURCE_SUCCESS, SOURCE_NOISED, TRIGGER_NO_MATCHING_SOURCE, TRIGGER_NO_MATCHING_FILTER_DATA,
                   HEADER_PARSING_ERROR, *REFUSAL_TYPES.values(), *EVENT_LEVEL_TYPES.values(),
                   *AGGREGATABLE_TYPES.values()})


class VerboseDebugReport(NamedTuple):
    """One verbose debug report: where, when, and its ``(type, body)`` entries."""

    reporting_origin: str
    time_micros: int
    entries: tuple[tuple[str, dict[str, Any]], ...]

    def record(self) -> dict[str, Any]:
        """The report as the interop suite writes it (``report_url``, ``report_time`` in milliseconds, body)."""
        return {"report_url": self.reporting_origin + VERBOSE_PATH, "report_time": str(self.time_micros // 1_000),
                "payload": [{"type": kind, "body": body} for kind, body in self.entries]}


def _source_body(source: SourceRegistration) -> dict[str, Any]:
    destinations = source.destination_sites
    body: dict[str, Any] = {
        "attribution_destination": destinations[0] if len(destinations) == 1 else list(destinations),
        "source_event_id": str(source.source_event_id),
        "source_site": source.source_site,
    }
    if source.debug_key is not None:
        body["source_debug_key"] = str(source.debug_key)
    return body


def source_report(outcome: SourceOutcome, noised: bool, limits: dict[str, Any]) -> VerboseDebugReport | None:
    """The debug report of a source's registration, if it asked for one and its outcome has a type here;
    ``noised``: whether its randomized response was not truthful; ``limits``: each refusal type's limit as the
    body writes it."""
    source = outcome.source
    if not (source.debug_reporting and source.debug_permission):
        return None
    body = _source_body(source)
    kind = SOURCE_SUCCESS if outcome.refusal is None else REFUSAL_TYPES.get(getattr(outcome.refusal, "reason", ""), "")
    if not kind:
        return None
    if kind == SOURCE_SUCCESS:  # stored, or refused by a limit told as a success
        kind = SOURCE_NOISED if noised else SOURCE_SUCCESS
        if outcome.destination_limit is not None:
            body["source_destination_limit"] = str(outcome.destination_limit)
    elif kind == MAX_EVENT_STATES_LIMIT and source.attribution_scopes is not None:
        body["limit"] = str(source.attribution_scopes.max_event_states)
    elif kind in limits:
        body["limit"] = limits[kind]
    return VerboseDebugReport(source.reporting_origin, source.time_micros, ((kind, body),))


def typed_results(outcome: TriggerOutcome, event_level: PartResult, aggregatable: PartResult
                  ) -> list[tuple[str, PartResult | None]]:
    """The debug data types of a trigger's registration, each with the part's result that gave it (None: the
    storage's outcome): ``trigger-no-matching-source``, ``trigger-no-matching-filter-data``, or one type per part
    whose outcome has one, the event-level part's first, a type both give once."""
    if outcome.candidate is None:
        return [(TRIGGER_NO_MATCHING_SOURCE, None)]
    if not outcome.attributed:
        return [(TRIGGER_NO_MATCHING_FILTER_DATA, None)]
    typed: list[tuple[str, PartResult | None]] = []
    for result, types in ((event_level, EVENT_LEVEL_TYPES), (aggregatable, AGGREGATABLE_TYPES)):
        kind = types.get(result.outcome)
        if kind is not None and all(kind != seen for seen, _ in typed):
            typed.append((kind, result))
    return typed


def trigger_report(outcome: TriggerOutcome, event_level: PartResult, aggregatable: PartResult,
                   limits: dict[str, Any], report_body: Callable[[Any], dict[str, Any]]) -> VerboseDebugReport | None:
    """The debug report of a trigger's registration, if it asked for one and its outcome has a type here:
    ``event_level`` and ``aggregatable`` are the parts' results for it, ``limits`` each limit type's limit as the
    body writes it, ``report_body`` the body of a report that was not made."""
    trigger: TriggerRegistration = outcome.trigger
    if not (trigger.debug_reporting and trigger.debug_permission):
        return None
    body: dict[str, Any] = {"attribution_destination": trigger.destination_site}
    if outcome.candidate is not None:
        source = outcome.candidate.registration
        body = {**body, "source_event_id": str(source.source_event_id), "source_site": source.source_site}
        if source.debug_key is not None:
            body["source_debug_key"] = str(source.debug_key)
    entries = []
    for kind, result in typed_results(outcome, event_level, aggregatable):
        if result is None:
            entries.append((kind, body))
        elif kind in REPORT_BODY_TYPES:
            entries.append((kind, report_body(result.report)))
        elif result.named_budget is not None:  # the source's own budget: its name and amount
            name, amount = result.named_budget
            entries.append((kind, {**body, "limit": str(amount), "name": name}))
        else:
            entries.append((kind, {**body, "limit": limits[kind]} if kind in limits else body))
    if not entries:
        return None
    if trigger.debug_key is not None:
        entries = [(kind, {**entry, "trigger_debug_key": str(trigger.debug_key)}) if kind not in REPORT_BODY_TYPES
                   else (kind, entry) for kind, entry in entries]
    return VerboseDebugReport(trigger.reporting_origin, trigger.time_micros, tuple(entries))


def header_error_report(report: HeaderErrorReport, time_micros: int) -> VerboseDebugReport:
    """A ``header-parsing-error`` report of a header the browser could not parse."""
    body = {"context_site": report.context_site, "header": report.header, "value": report.value}
    return VerboseDebugReport(report.reporting_origin, time_micros, ((HEADER_PARSING_ERROR, body),))
