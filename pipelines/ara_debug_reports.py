"""Verbose debug reports of the Attribution Reporting API: what the browser tells a reporting origin, at once, about
a registration it asked about (the specification's "verbose debug reports"; Chrome's ``AttributionDebugReport``),
sent to ``<reporting origin>/.well-known/attribution-reporting/debug/verbose`` at the registration's time, with a
body of one or more ``{"type", "body"}`` entries.

Who may ask: a source or a trigger that sets ``debug_reporting`` and was registered with debug permission (Chrome:
third-party cookies allowed, the interop cases' ``debug_permission``); a response whose header cannot be parsed
when it carries ``Attribution-Reporting-Info: report-header-errors`` (no permission needed: it says nothing about
the user). The types sent here (``TYPES``):

* sources: ``source-success`` (stored, its randomized response truthful; also when the storage refuses it for too
  many reporting origins, which must not be told apart from a success), ``source-noised`` (stored, with fake
  reports or none), ``source-storage-limit``, ``source-reporting-origin-per-site-limit``,
  ``source-channel-capacity-limit`` and ``source-trigger-state-cardinality-limit`` (refused, with the ``limit``
  that refused it);
* triggers: ``trigger-no-matching-source`` (no stored source of its reporting origin names its destination);
* headers: ``header-parsing-error`` (the header's name and value as received, and the context site).

The debug reports of the attributed trigger's outcomes (``trigger-event-*``, ``trigger-aggregate-*``,
``trigger-no-matching-filter-data``) and of destination limits are not sent yet.
"""
from __future__ import annotations

from typing import Any, NamedTuple

from schemas.registration_log import HeaderErrorReport
from schemas.registrations import SourceRegistration, TriggerRegistration
from transforms.core.mechanisms.ara_attribution import SourceOutcome, TriggerOutcome

VERBOSE_PATH = "/.well-known/attribution-reporting/debug/verbose"
SOURCE_SUCCESS, SOURCE_NOISED = "source-success", "source-noised"
TRIGGER_NO_MATCHING_SOURCE, HEADER_PARSING_ERROR = "trigger-no-matching-source", "header-parsing-error"
# a refused source's reason (the storage's, or the event-level client's) -> its debug report's type
REFUSAL_TYPES = {
    "source_storage_limit": "source-storage-limit",
    "source_reporting_origin_per_site_limit": "source-reporting-origin-per-site-limit",
    "source_success_excessive_reporting_origins": SOURCE_SUCCESS,
    "information_gain_too_high": "source-channel-capacity-limit",
    "too_many_states": "source-trigger-state-cardinality-limit",
}
TYPES = frozenset({SOURCE_SUCCESS, SOURCE_NOISED, TRIGGER_NO_MATCHING_SOURCE, HEADER_PARSING_ERROR,
                   *REFUSAL_TYPES.values()})


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
    if outcome.refusal is None:
        kind = SOURCE_NOISED if noised else SOURCE_SUCCESS
    else:
        kind = REFUSAL_TYPES.get(getattr(outcome.refusal, "reason", ""), "")
        if not kind:
            return None
        if kind in limits:
            body["limit"] = limits[kind]
    return VerboseDebugReport(source.reporting_origin, source.time_micros, ((kind, body),))


def trigger_report(outcome: TriggerOutcome) -> VerboseDebugReport | None:
    """The debug report of a trigger's registration, if it asked for one and its outcome has a type here."""
    trigger: TriggerRegistration = outcome.trigger
    if not (trigger.debug_reporting and trigger.debug_permission) or outcome.matched:
        return None
    body: dict[str, Any] = {"attribution_destination": trigger.destination_site}
    if trigger.debug_key is not None:
        body["trigger_debug_key"] = str(trigger.debug_key)
    return VerboseDebugReport(trigger.reporting_origin, trigger.time_micros, ((TRIGGER_NO_MATCHING_SOURCE, body),))


def header_error_report(report: HeaderErrorReport, time_micros: int) -> VerboseDebugReport:
    """A ``header-parsing-error`` report of a header the browser could not parse."""
    body = {"context_site": report.context_site, "header": report.header, "value": report.value}
    return VerboseDebugReport(report.reporting_origin, time_micros, ((HEADER_PARSING_ERROR, body),))
