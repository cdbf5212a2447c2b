"""One device's browser under the Attribution Reporting specification: parsed registrations in, reports out
as the browser sends them (URL, time, JSON body). What ``python -m pipelines.interop`` (Chrome's interop cases)
and ``python -m pipelines.registrations`` (registration logs, Beam) share.

* ``BrowserConfig``: the vendor parameters of Chrome's interop ``default_config.json`` that this project
  implements; ``UNIMPLEMENTED_CONFIG`` names the features behind the others.
* ``replay_device``: the registrations of one device, in time order, through the attribution storage with the
  event-level and aggregatable clients' specification modes; every report, in the order it is sent, at the time
  its delivery sends it (``transforms.core.mechanisms.report_delivery``: the device's connectivity and
  navigations, from the log's delivery entries); and the debug reports the registrations ask for, verbose
  (``pipelines.ara_debug_reports``) and aggregatable (``pipelines.ara_aggregatable_debug``), sent at once.
* ``report_record``: a report as ``{"report_url", "report_time", "payload"}``, the interop suite's output form
  (the payload is the report body the browser POSTs, with aggregatable contributions in clear; the report time is
  when it is sent).
"""
from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pipelines.ara_aggregatable_debug import DebugBudgets, source_debug_report, trigger_debug_report
from pipelines.ara_debug_reports import DEBUG_PATH, header_error_report, source_report, trigger_report
from schemas.limits import CONTRIBUTION_BUDGET
from schemas.registration_log import DeliveryChange, ParsedRegistration, RegistrationFailure
from schemas.registrations import EVENT, NAVIGATION, SourceRegistration
from schemas.time_units import MICROS_PER_DAY, MICROS_PER_SECOND
from transforms.core.mechanisms.ara_attribution import (
    AttributionStorage,
    DestinationLimits,
    OriginLimits,
    SourceOutcome,
    replay,
)
from transforms.core.mechanisms.noise import RandomSource
from transforms.core.mechanisms.report_delivery import NAVIGATION_RETRIES, Connectivity, sent_at
from transforms.event_level.mechanisms.ara_spec import SpecEventLevel, SpecEventReport
from transforms.summary_reports.mechanisms.ara_spec import SpecAggregatable, SpecAggregatableReport

EVENT_REPORT_PATH = "/.well-known/attribution-reporting/report-event-attribution"
AGGREGATE_REPORT_PATH = "/.well-known/attribution-reporting/report-aggregate-attribution"
API = "attribution-reporting"
REPORT_VERSION = "1.0"
MICROS_PER_MILLI = 1_000

# interop configuration keys this project does not implement, and the feature each one controls
UNIMPLEMENTED_CONFIG = {
    # the interop harness's feature switches of a case
    "needs_cross_app_web": "cross app and web attribution (Android)",
}
# the interop harness's feature switches of the features this project implements: always on here
IMPLEMENTED_SWITCHES = frozenset({"needs_source_destination_limit", "needs_attribution_scopes",
                                  "needs_aggregatable_named_budgets", "needs_aggregatable_debug"})


@dataclass(frozen=True)
class BrowserConfig:
    """The vendor parameters this project implements (Chrome's interop ``default_config.json`` defaults)."""

    rate_limit_max_attributions: int = 100
    rate_limit_time_window_in_days: int = 30
    max_settable_event_level_epsilon: float = 14.0
    max_event_level_channel_capacity_navigation: float = 11.46173
    max_event_level_channel_capacity_event: float = 6.5
    max_event_level_channel_capacity_scopes_navigation: float = 11.55
    max_event_level_channel_capacity_scopes_event: float = 6.5
    max_aggregatable_reports_per_source: int = 20
    aggregatable_report_min_delay: int = 10  # minutes
    aggregatable_report_delay_span: int = 50  # minutes
    aggregation_coordinator_origins: tuple[str, ...] = ("https://coordinator.test",)
    max_sources_per_origin: int = 1024
    max_trigger_state_cardinality: int = 2**32 - 1
    rate_limit_max_source_registration_reporting_origins: int = 100
    rate_limit_max_attribution_reporting_origins: int = 10
    rate_limit_max_reporting_origins_per_source_reporting_site: int = 1
    rate_limit_origins_per_site_window_in_days: int = 1
    max_event_level_reports_per_destination: int = 1024
    max_aggregatable_reports_per_destination: int = 1024
    max_aggregatable_debug_budget_per_context_site: int = 2**20
    max_aggregatable_debug_reports_per_source: int = 5
    max_destinations_per_source_site_reporting_site: int = 100
    max_destinations_per_rate_limit_window: int = 200  # per source site (the comment in Chrome's file swaps the two)
    max_destinations_per_rate_limit_window_reporting_site: int = 50  # per source site and reporting site
    destination_rate_limit_window_in_minutes: int = 1
    max_destinations_per_reporting_site_per_day: int = 100
    # which retry of a failed report waits for a navigation ("first_retry", "second_retry", "third_retry"; Chrome's
    # kAttributionReportNavigationBasedRetry), or None: every retry is timed
    retry_after_new_navigation: str | None = None

    def __post_init__(self) -> None:
        if self.retry_after_new_navigation not in (None, *NAVIGATION_RETRIES):
            raise ValueError(f"retry_after_new_navigation is one of {', '.join(NAVIGATION_RETRIES)}, got "
                             f"{self.retry_after_new_navigation!r}")

    @classmethod
    def from_json(cls, values: Mapping[str, Any]) -> tuple[BrowserConfig, dict[str, Any]]:
        """The configuration ``values`` set (strings as the interop files write them), and the keys it does not
        know or implement (key -> value)."""
        kwargs: dict[str, Any] = {}
        others: dict[str, Any] = {}
        for key, value in values.items():
            if key in IMPLEMENTED_SWITCHES:
                continue
            if key not in cls.__dataclass_fields__:
                others[key] = value
            elif key == "aggregation_coordinator_origins":
                kwargs[key] = tuple(value)
            elif key == "retry_after_new_navigation":
                kwargs[key] = str(value)
            elif key in ("max_settable_event_level_epsilon", "max_event_level_channel_capacity_navigation",
                         "max_event_level_channel_capacity_event", "max_event_level_channel_capacity_scopes_navigation",
                         "max_event_level_channel_capacity_scopes_event"):
                kwargs[key] = float(value)
            else:
                kwargs[key] = int(value)
        return cls(**kwargs), others


@dataclass
class DeviceReports:
    """What replaying one device gave: the reports it sent, in the order it sent them, and when (``sent_micros``,
    one per report: its report time, later when its delivery was retried), how many it never sent (every try
    offline), and each part's outcome counts."""

    reports: list[SpecEventReport | SpecAggregatableReport]
    sent_micros: list[int]
    undelivered: int = 0
    refused_sources: list[tuple[SourceRegistration, ValueError]] = field(default_factory=list)
    debug_reports: list[dict[str, Any]] = field(default_factory=list)  # verbose and copies, as records, in time order
    event_level_outcomes: dict[str, int] = field(default_factory=dict)
    aggregatable_outcomes: dict[str, int] = field(default_factory=dict)


def event_level_client(config: BrowserConfig, random_source: RandomSource | None = None) -> SpecEventLevel:
    """The event-level client with ``config``'s limits (its ``check`` says whether a source is accepted)."""
    return SpecEventLevel(
        random_source=random_source,
        capacity_bits={NAVIGATION: config.max_event_level_channel_capacity_navigation,
                       EVENT: config.max_event_level_channel_capacity_event},
        scopes_capacity_bits={NAVIGATION: config.max_event_level_channel_capacity_scopes_navigation,
                              EVENT: config.max_event_level_channel_capacity_scopes_event},
        max_epsilon=config.max_settable_event_level_epsilon,
        max_trigger_states=config.max_trigger_state_cardinality,
        max_attributions=config.rate_limit_max_attributions,
        rate_limit_window_micros=config.rate_limit_time_window_in_days * MICROS_PER_DAY,
        max_reports_per_destination=config.max_event_level_reports_per_destination,
    )


def new_storage(config: BrowserConfig, random_source: RandomSource | None,
                fixed_delay: bool) -> tuple[AttributionStorage, SpecEventLevel, SpecAggregatable]:
    """A browser's storage with both clients. ``random_source``: each source's randomized response, report
    delays and null reports where the log does not fix them (None: truthful, no null reports). ``fixed_delay``:
    aggregatable reports at the largest delay (the interop suite's convention)."""
    window = config.rate_limit_time_window_in_days * MICROS_PER_DAY
    event_level = event_level_client(config, random_source)
    aggregatable = SpecAggregatable(
        random_source=random_source,
        fixed_delay_seconds=(config.aggregatable_report_min_delay + config.aggregatable_report_delay_span) * 60
        if fixed_delay else None,
        min_delay_seconds=config.aggregatable_report_min_delay * 60,
        delay_span_seconds=config.aggregatable_report_delay_span * 60,
        max_reports_per_source=config.max_aggregatable_reports_per_source,
        max_attributions=config.rate_limit_max_attributions, rate_limit_window_micros=window,
        max_reports_per_destination=config.max_aggregatable_reports_per_destination,
    )
    limits = OriginLimits(
        sources=config.rate_limit_max_source_registration_reporting_origins,
        attributions=config.rate_limit_max_attribution_reporting_origins, window_micros=window,
        per_site=config.rate_limit_max_reporting_origins_per_source_reporting_site,
        site_window_micros=config.rate_limit_origins_per_site_window_in_days * MICROS_PER_DAY,
        sources_per_origin=config.max_sources_per_origin,
    )
    destinations = DestinationLimits(
        unexpired=config.max_destinations_per_source_site_reporting_site,
        per_window=config.max_destinations_per_rate_limit_window,
        per_window_reporting_site=config.max_destinations_per_rate_limit_window_reporting_site,
        window_micros=config.destination_rate_limit_window_in_minutes * 60 * MICROS_PER_SECOND,
        per_day=config.max_destinations_per_reporting_site_per_day,
    )
    storage = AttributionStorage([event_level, aggregatable], limits, destinations)
    return storage, event_level, aggregatable


def replay_device(registrations: Iterable[ParsedRegistration | DeliveryChange | RegistrationFailure],
                  config: BrowserConfig,
                  random_source: RandomSource | None = None, *, test_choices: bool = False) -> DeviceReports:
    """Every report of one device's registrations (sorted here by time, stable), sent as the device's delivery
    changes allow, and the verbose debug reports they ask for (a failure's, when its header asked for one). With
    ``test_choices`` (the interop suite's test harness, never a real log: the log would then choose the noise),
    the randomized responses and null-report days the registrations fix are used and aggregatable reports take the
    largest delay; without, everything is drawn from ``random_source``."""
    storage, event_level, aggregatable = new_storage(config, random_source, fixed_delay=test_choices)
    registrations = list(registrations)
    changes = [item for item in registrations if isinstance(item, DeliveryChange)]
    parsed = [item for item in registrations if isinstance(item, ParsedRegistration)]
    ordered = sorted(parsed, key=lambda item: item.registration.time_micros)
    events = [
        (parsed.registration,
         None if not test_choices else [parsed.randomized_response, None]
         if isinstance(parsed.registration, SourceRegistration) else [None, parsed.null_report_days])
        for parsed in ordered
    ]
    reports, refused, outcomes = replay(storage, events)
    debug_budgets = DebugBudgets(max_reports_per_source=config.max_aggregatable_debug_reports_per_source,
                                 max_per_context_site=config.max_aggregatable_debug_budget_per_context_site)
    debug = [header_error_report(item.header_error_report, (item.time_millis or 0) * MICROS_PER_MILLI)
             for item in registrations if isinstance(item, RegistrationFailure) and item.header_error_report]
    records = [report.record() for report in debug]
    trigger_results = iter(zip(event_level.results, aggregatable.results, strict=True))  # one per trigger, in order
    for outcome in outcomes:
        if isinstance(outcome, SourceOutcome):
            noised = _noised(outcome)
            report = source_report(outcome, noised, source_debug_limits(config)[outcome.source.source_type])
            aggregatable_debug = source_debug_report(outcome, noised, debug_budgets)
        else:
            results = next(trigger_results)
            report = trigger_report(outcome, *results, trigger_debug_limits(config), _event_report_body)
            aggregatable_debug = trigger_debug_report(outcome, *results, debug_budgets)
            records += [_debug_copy(result.report, outcome.trigger.time_micros) for result in results
                        if result.outcome.startswith("success") and _has_debug_keys(result.report)]
        if report is not None:
            records.append(report.record())
        if aggregatable_debug is not None:
            records.append(aggregatable_debug)
    connectivity = Connectivity.of(
        [(change.time_millis * MICROS_PER_MILLI, online) for change in changes
         if (online := change.connection) is not None],
        [change.time_millis * MICROS_PER_MILLI for change in changes if change.connection is None])
    navigation_retry = NAVIGATION_RETRIES.get(config.retry_after_new_navigation or "")
    sent = [(sent_at(report.report_time_micros, connectivity, navigation_retry), order, report)
            for order, report in enumerate(reports)]
    delivered = sorted((item for item in sent if item[0] is not None), key=lambda item: (item[0], item[1]))
    return DeviceReports([report for _, _, report in delivered], [time for time, _, _ in delivered],
                         len(sent) - len(delivered), refused, sorted(records, key=lambda item: int(item["report_time"])),
                         dict(event_level.outcomes), dict(aggregatable.outcomes))


def _has_debug_keys(report: SpecEventReport | SpecAggregatableReport) -> bool:
    return report.source_debug_key is not None and report.trigger_debug_key is not None


def _debug_copy(report: SpecEventReport | SpecAggregatableReport, trigger_micros: int) -> dict[str, Any]:
    """A report with both debug keys is also sent at once, when its trigger is attributed, to the debug path
    (the interop cases ``success_debug_*``); the copy's body is the report's."""
    path = EVENT_REPORT_PATH if isinstance(report, SpecEventReport) else AGGREGATE_REPORT_PATH
    return {**report_record(report), "report_url": report.reporting_origin + DEBUG_PATH + path.rsplit("/", 1)[1],
            "report_time": _millis(trigger_micros)}


@functools.lru_cache(maxsize=16)  # a run has one configuration: built once, not per registration
def source_debug_limits(config: BrowserConfig) -> dict[str, dict[str, Any]]:
    """Per source type, the limit each refusal's debug report names, as the body writes it (counts as strings)."""
    common = {"source-storage-limit": str(config.max_sources_per_origin),
              "source-reporting-origin-per-site-limit":
                  str(config.rate_limit_max_reporting_origins_per_source_reporting_site),
              "source-trigger-state-cardinality-limit": str(config.max_trigger_state_cardinality),
              "source-destination-limit": str(config.max_destinations_per_source_site_reporting_site),
              "source-destination-rate-limit": str(config.max_destinations_per_rate_limit_window_reporting_site),
              "source-destination-per-day-rate-limit": str(config.max_destinations_per_reporting_site_per_day)}
    return {NAVIGATION: {**common, "source-channel-capacity-limit": config.max_event_level_channel_capacity_navigation,
                         "source-scopes-channel-capacity-limit":
                             config.max_event_level_channel_capacity_scopes_navigation},
            EVENT: {**common, "source-channel-capacity-limit": config.max_event_level_channel_capacity_event,
                    "source-scopes-channel-capacity-limit": config.max_event_level_channel_capacity_scopes_event}}


@functools.lru_cache(maxsize=16)
def trigger_debug_limits(config: BrowserConfig) -> dict[str, str]:
    """The limit each of a trigger's limit reports names, as the body writes it."""
    return {"trigger-reporting-origin-limit": str(config.rate_limit_max_attribution_reporting_origins),
            "trigger-event-attributions-per-source-destination-limit": str(config.rate_limit_max_attributions),
            "trigger-aggregate-attributions-per-source-destination-limit": str(config.rate_limit_max_attributions),
            "trigger-event-storage-limit": str(config.max_event_level_reports_per_destination),
            "trigger-aggregate-storage-limit": str(config.max_aggregatable_reports_per_destination),
            "trigger-aggregate-excessive-reports": str(config.max_aggregatable_reports_per_source),
            "trigger-aggregate-insufficient-budget": str(CONTRIBUTION_BUDGET)}


def _event_report_body(report: SpecEventReport) -> dict[str, Any]:
    return event_report_record(report)["payload"]


def _noised(outcome: SourceOutcome) -> bool:
    """Whether a source's randomized response was not truthful (its event-level state holds fake reports, perhaps
    none), stored or not."""
    return bool(outcome.states) and outcome.states[0].fake is not None


def _millis(micros: int) -> str:
    return str(micros // MICROS_PER_MILLI)


def _seconds(micros: int) -> str:
    return str(micros // MICROS_PER_SECOND)


def _debug_keys(payload: dict[str, Any], source_key: int | None, trigger_key: int | None) -> None:
    if source_key is not None:
        payload["source_debug_key"] = str(source_key)
    if trigger_key is not None:
        payload["trigger_debug_key"] = str(trigger_key)


def event_report_record(report: SpecEventReport, sent_micros: int | None = None) -> dict[str, Any]:
    """An event-level report: its URL, the time it is sent (``sent_micros``; by default its report time) and body
    (spec "serialize an event-level report")."""
    destinations = report.attribution_destination
    payload: dict[str, Any] = {
        "attribution_destination": destinations[0] if len(destinations) == 1 else list(destinations),
        "randomized_trigger_rate": report.randomized_trigger_rate,
        "scheduled_report_time": _seconds(report.report_time_micros),
        "source_event_id": str(report.source_event_id),
        "source_type": report.source_type,
        "trigger_data": str(report.trigger_data),
    }
    _debug_keys(payload, report.source_debug_key, report.trigger_debug_key)
    sent = report.report_time_micros if sent_micros is None else sent_micros
    return {"report_url": report.reporting_origin + EVENT_REPORT_PATH, "report_time": _millis(sent), "payload": payload}


def aggregatable_report_record(report: SpecAggregatableReport, sent_micros: int | None = None) -> dict[str, Any]:
    """An aggregatable report: its URL, the time it is sent (``sent_micros``; by default its report time) and body
    with the histogram contributions in clear (spec "serialize an aggregatable report"; the encrypted payload's
    plaintext as ``histograms``)."""
    shared_info: dict[str, Any] = {
        "api": API,
        "attribution_destination": report.attribution_destination,
        "reporting_origin": report.reporting_origin,
        "scheduled_report_time": _seconds(report.report_time_micros),
        "version": REPORT_VERSION,
    }
    if report.source_registration_time_seconds is not None:
        shared_info["source_registration_time"] = str(report.source_registration_time_seconds)
    if report.source_debug_key is not None and report.trigger_debug_key is not None:
        shared_info["debug_mode"] = "enabled"  # a report with both debug keys is also sent in clear for debugging
    payload: dict[str, Any] = {
        "aggregation_coordinator_origin": report.aggregation_coordinator_origin,
        "histograms": [{"id": str(filtering_id), "key": hex(key), "value": value}
                       for key, value, filtering_id in report.contributions],
        "shared_info": shared_info,
    }
    if report.trigger_context_id is not None:
        payload["trigger_context_id"] = report.trigger_context_id
    _debug_keys(payload, report.source_debug_key, report.trigger_debug_key)
    sent = report.report_time_micros if sent_micros is None else sent_micros
    return {"report_url": report.reporting_origin + AGGREGATE_REPORT_PATH, "report_time": _millis(sent),
            "payload": payload}


def report_record(report: SpecEventReport | SpecAggregatableReport, sent_micros: int | None = None) -> dict[str, Any]:
    if isinstance(report, SpecEventReport):
        return event_report_record(report, sent_micros)
    return aggregatable_report_record(report, sent_micros)
