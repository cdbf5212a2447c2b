"""Typed rows used inside the pipelines.

NamedTuples with annotated fields: Beam infers a schema for them and encodes
them with a deterministic ``RowCoder``, so they can be used as keys and
compared across runners. Field names and order match the protobuf messages in
``schemas/proto`` and the Avro records in ``schemas/avro``.
"""
from __future__ import annotations

from typing import NamedTuple


class JoinEvent(NamedTuple):
    """Join(u, t) of k-anonymity note Sec. 2.1: ``user_id`` joined ``interest_group`` at ``event_time_micros``."""

    interest_group: str
    user_id: str
    event_time_micros: int


class KAnonVerdict(NamedTuple):
    """The released verdict o_t of k-anonymity note Alg. 1 for one interest group and hour step."""

    interest_group: str
    step: int
    step_start_micros: int
    k_anonymous: bool
    instance_start_step: int


class DeadLetter(NamedTuple):
    """An input that could not be used: the raw input (as text), why, and where it came from."""

    raw: str
    reason: str
    source: str


class Impression(NamedTuple):
    """An ad impression on a device (Cookie Monster paper Sec. 4.1: an element of I in the device-epoch database D_d^e)."""

    device_id: str
    event_time_micros: int
    impression_id: str
    publisher_site: str
    advertiser_site: str
    campaign_id: str
    product_id: str
    filter_keys: tuple
    intermediary_site: str = ""  # the W3C Attribution API's impression caller when not the publisher
    conversion_callers: tuple = ()  # the API's conversionCallers: who may measure against it (empty: any)


ATTRIBUTION_LOGICS = ("last_touch", "first_touch", "equal_credit", "last_n")
NORMS = ("L1", "L2")
MAX_DIMENSION = 4096


class AttributionRequest(NamedTuple):
    """The querier's parameters for one report (Cookie Monster paper Code Listing 1, ``attribution_request``).

    ``window_days`` None means the job's default window, unless ``first_epoch``
    and ``last_epoch`` name the epochs explicitly; ``requested_epsilon`` None
    means the job's accuracy target decides (Cookie Monster paper Sec. 8.1).
    """

    window_days: int | None
    first_epoch: int | None
    last_epoch: int | None
    campaign_ids: tuple
    product_id: str
    filter_keys: tuple
    logic: str
    last_n: int
    dimension: int
    requested_epsilon: float | None
    report_global_sensitivity: float
    query_global_sensitivity: float
    norm: str
    query_key: str
    impression_sites: tuple = ()  # the W3C Attribution API's impressionSites (empty: any)
    impression_callers: tuple = ()  # and impressionCallers (empty: any)


class Conversion(NamedTuple):
    """A conversion on a device with the attribution request its querier attached (Cookie Monster paper Sec. 3.3)."""

    device_id: str
    event_time_micros: int
    conversion_id: str
    advertiser_site: str
    querier_site: str
    value: float
    product_id: str
    attribution_request: AttributionRequest


class AttributionReport(NamedTuple):
    """A fixed-shape report as the querier receives it (Cookie Monster paper Code Listing 1, Step 4)."""

    report_id: str
    querier_site: str
    query_key: str
    histogram: tuple
    requested_epsilon: float
    query_global_sensitivity: float


class QueryResult(NamedTuple):
    """A batch of reports summed with Laplace noise, or rejected by a central budget (Cookie Monster paper Alg. 1).

    With bias detection (Cookie Monster paper Appendix D), ``empty_count_estimate`` is the noisy count of empty epochs
    (Thm. 15) or of reports with one (Thm. 16) and ``bias_bound`` the bound on the L1 bias that holds with
    probability 1 - beta; both None otherwise."""

    querier_site: str
    query_key: str
    batch_index: int
    report_count: int
    noisy_value: tuple
    epsilon: float
    noise_scale: float
    status: str
    empty_count_estimate: float | None = None
    bias_bound: float | None = None


class DeviceEpochBudget(NamedTuple):
    """SENSITIVE (evaluation only): the budget one querier consumed from one device-epoch (Cookie Monster paper Eq. 3)."""

    querier_site: str
    device_id: str
    epoch: int
    consumed_epsilon: float
    capacity_epsilon: float


class IncompleteBatch(NamedTuple):
    """Reports of one (querier site, query key) still waiting for a full batch of B when the input ended."""

    querier_site: str
    query_key: str
    waiting_reports: int


class AggregationKey(NamedTuple):
    """One named 128-bit source key of an ARA source (Ghazi et al. Alg. 2's srcKey; ARA's ``aggregation_keys``)."""

    name: str
    key: int


class AraSource(NamedTuple):
    """An Attribution Reporting source registration (Ghazi et al. Alg. 2: (srcId, dest, expDate, srcFilt, srcKey)).

    ``expiry_seconds`` is measured from ``event_time_micros`` (expDate); ``aggregation_keys`` holds at most 20
    ``AggregationKey`` with distinct names."""

    device_id: str
    event_time_micros: int
    source_id: str
    reporting_origin: str
    destination: str
    expiry_seconds: int
    priority: int
    filter_data: tuple
    aggregation_keys: tuple


class AggregatableTriggerData(NamedTuple):
    """A key piece of an ARA trigger (trigKey), OR-ed into the source keys named in ``source_keys``."""

    key_piece: int
    source_keys: tuple


class AggregatableValue(NamedTuple):
    """The value (trigValue) an ARA trigger contributes for the source key called ``name``."""

    name: str
    value: int


class AraTrigger(NamedTuple):
    """An Attribution Reporting trigger registration (Ghazi et al. Alg. 2: (dest, trigId, trigFilt, trigKey,
    trigValue)); ``aggregatable_values`` have distinct names."""

    device_id: str
    event_time_micros: int
    trigger_id: str
    reporting_origin: str
    destination: str
    filters: tuple
    aggregatable_trigger_data: tuple
    aggregatable_values: tuple


class PaaEvent(NamedTuple):
    """An ad event handled by the Private Aggregation API (Ghazi et al. Alg. 3, "Event Registration");
    ``api`` is ``shared-storage`` or ``protected-audience``."""

    device_id: str
    event_time_micros: int
    event_id: str
    reporting_origin: str
    api: str
    campaign_id: str


class TriggerSpec(NamedTuple):
    """One entry of an event-level source's trigger specification (Ghazi et al. Sec. 2.2, trigSpec): the trigger data
    values it covers, their reporting window ends (seconds after the source; empty: the source type's defaults)
    and summary buckets (increasing thresholds; empty: 1, ..., max reports)."""

    trigger_data: tuple
    window_ends_seconds: tuple
    summary_buckets: tuple


class EventLevelSource(NamedTuple):
    """An Attribution Reporting source registration for event-level reports (Ghazi et al. Sec. 2.2, Alg. 4).

    Syntactically valid only: the event-level configuration (source type, expiry, max reports, matching, trigger
    specs) is judged by ``transforms.event_level.mechanisms.config`` (its ``ConfigurationError`` reasons).
    ``max_event_level_reports`` and ``trigger_specs`` None take the source type's defaults;
    ``trigger_data_matching`` "" is ``modulus``."""

    device_id: str
    event_time_micros: int
    source_id: str
    reporting_origin: str
    destination: str
    source_type: str
    expiry_seconds: int
    priority: int
    filter_data: tuple
    max_event_level_reports: int | None
    trigger_data_matching: str
    trigger_specs: tuple | None


class EventLevelTrigger(NamedTuple):
    """An Attribution Reporting trigger registration for event-level reports (Ghazi et al. Sec. 2.2, Alg. 4):
    ``trigger_data`` >= 0, ``value`` >= 1 (default 1)."""

    device_id: str
    event_time_micros: int
    trigger_id: str
    reporting_origin: str
    destination: str
    filters: tuple
    trigger_data: int
    value: int


class EventLevelReport(NamedTuple):
    """One ARA event-level report (Ghazi et al. Sec. 2.2): truthful (Alg. 4) or from the source's randomized output
    (Alg. 8), with the same shape. ``report_time`` is UTC microseconds (the source time plus the window end)."""

    source_id: str
    reporting_origin: str
    destination: str
    trigger_data: int
    window_index: int
    summary_bucket: int
    report_time: int
    randomized_trigger_rate: float


# The Aggregation Service's reports (Ghazi et al. Sec. 2.1): the APIs that send them and their validated metadata.
API_ATTRIBUTION_REPORTING = "attribution-reporting"
API_ATTRIBUTION_REPORTING_DEBUG = "attribution-reporting-debug"
API_PROTECTED_AUDIENCE = "protected-audience"
API_SHARED_STORAGE = "shared-storage"
APIS = (API_ATTRIBUTION_REPORTING, API_ATTRIBUTION_REPORTING_DEBUG, API_PROTECTED_AUDIENCE, API_SHARED_STORAGE)
ATTRIBUTION_APIS = (API_ATTRIBUTION_REPORTING, API_ATTRIBUTION_REPORTING_DEBUG)


class SharedInfo(NamedTuple):
    """The validated fields of ``shared_info`` (the report's metadata m, Ghazi et al. Sec. 2.1)."""

    version: str
    api: str
    report_id: str
    reporting_origin: str
    scheduled_report_time: int  # seconds since the Unix epoch
    source_registration_time: str | None  # the decimal string as written, None when absent
    attribution_destination: str | None
    debug_mode: bool


def version_at_least(version: str, major: int, minor: int) -> bool:
    """Whether a validated ``major.minor`` version string is at least ``major.minor``."""
    found_major, found_minor = (int(part) for part in version.split("."))
    return (found_major, found_minor) >= (major, minor)
