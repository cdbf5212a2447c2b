from schemas.proto import events_pb2 as _events_pb2
from schemas.proto import reports_pb2 as _reports_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AboveThresholdInstanceState(_message.Message):
    __slots__ = ("start_step", "threshold_noise", "has_step_noises", "step_noises", "latched")
    START_STEP_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_NOISE_FIELD_NUMBER: _ClassVar[int]
    HAS_STEP_NOISES_FIELD_NUMBER: _ClassVar[int]
    STEP_NOISES_FIELD_NUMBER: _ClassVar[int]
    LATCHED_FIELD_NUMBER: _ClassVar[int]
    start_step: int
    threshold_noise: float
    has_step_noises: bool
    step_noises: _containers.RepeatedScalarFieldContainer[float]
    latched: bool
    def __init__(self, start_step: _Optional[int] = ..., threshold_noise: _Optional[float] = ..., has_step_noises: bool = ..., step_noises: _Optional[_Iterable[float]] = ..., latched: bool = ...) -> None: ...

class KAnonGroupState(_message.Message):
    __slots__ = ("version", "group", "window_users", "window_last_steps", "window_now", "instance", "last_step", "last_verdict", "reachable")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    WINDOW_USERS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_LAST_STEPS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_NOW_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    LAST_STEP_FIELD_NUMBER: _ClassVar[int]
    LAST_VERDICT_FIELD_NUMBER: _ClassVar[int]
    REACHABLE_FIELD_NUMBER: _ClassVar[int]
    version: int
    group: str
    window_users: _containers.RepeatedScalarFieldContainer[str]
    window_last_steps: _containers.RepeatedScalarFieldContainer[int]
    window_now: int
    instance: AboveThresholdInstanceState
    last_step: int
    last_verdict: bool
    reachable: bool
    def __init__(self, version: _Optional[int] = ..., group: _Optional[str] = ..., window_users: _Optional[_Iterable[str]] = ..., window_last_steps: _Optional[_Iterable[int]] = ..., window_now: _Optional[int] = ..., instance: _Optional[_Union[AboveThresholdInstanceState, _Mapping]] = ..., last_step: _Optional[int] = ..., last_verdict: bool = ..., reachable: bool = ...) -> None: ...

class KAnonShardState(_message.Message):
    __slots__ = ("version", "groups", "final_through", "positions")
    class GroupsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: bytes
        def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ...) -> None: ...
    VERSION_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    FINAL_THROUGH_FIELD_NUMBER: _ClassVar[int]
    POSITIONS_FIELD_NUMBER: _ClassVar[int]
    version: int
    groups: _containers.ScalarMap[str, bytes]
    final_through: int
    positions: InputPositions
    def __init__(self, version: _Optional[int] = ..., groups: _Optional[_Mapping[str, bytes]] = ..., final_through: _Optional[int] = ..., positions: _Optional[_Union[InputPositions, _Mapping]] = ...) -> None: ...

class KAnonPendingJoins(_message.Message):
    __slots__ = ("version", "step", "groups", "users", "event_time_micros", "source_watermark_micros", "positions")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    USERS_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_MICROS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_WATERMARK_MICROS_FIELD_NUMBER: _ClassVar[int]
    POSITIONS_FIELD_NUMBER: _ClassVar[int]
    version: int
    step: int
    groups: _containers.RepeatedScalarFieldContainer[str]
    users: _containers.RepeatedScalarFieldContainer[str]
    event_time_micros: _containers.RepeatedScalarFieldContainer[int]
    source_watermark_micros: int
    positions: _containers.RepeatedCompositeFieldContainer[SourcePosition]
    def __init__(self, version: _Optional[int] = ..., step: _Optional[int] = ..., groups: _Optional[_Iterable[str]] = ..., users: _Optional[_Iterable[str]] = ..., event_time_micros: _Optional[_Iterable[int]] = ..., source_watermark_micros: _Optional[int] = ..., positions: _Optional[_Iterable[_Union[SourcePosition, _Mapping]]] = ...) -> None: ...

class BufferedEvent(_message.Message):
    __slots__ = ("time_micros", "impression", "conversion", "ara_source", "ara_trigger", "paa_event", "event_level_source", "event_level_trigger")
    TIME_MICROS_FIELD_NUMBER: _ClassVar[int]
    IMPRESSION_FIELD_NUMBER: _ClassVar[int]
    CONVERSION_FIELD_NUMBER: _ClassVar[int]
    ARA_SOURCE_FIELD_NUMBER: _ClassVar[int]
    ARA_TRIGGER_FIELD_NUMBER: _ClassVar[int]
    PAA_EVENT_FIELD_NUMBER: _ClassVar[int]
    EVENT_LEVEL_SOURCE_FIELD_NUMBER: _ClassVar[int]
    EVENT_LEVEL_TRIGGER_FIELD_NUMBER: _ClassVar[int]
    time_micros: int
    impression: _events_pb2.Impression
    conversion: _events_pb2.Conversion
    ara_source: _events_pb2.AraSource
    ara_trigger: _events_pb2.AraTrigger
    paa_event: _events_pb2.PaaEvent
    event_level_source: _events_pb2.EventLevelSource
    event_level_trigger: _events_pb2.EventLevelTrigger
    def __init__(self, time_micros: _Optional[int] = ..., impression: _Optional[_Union[_events_pb2.Impression, _Mapping]] = ..., conversion: _Optional[_Union[_events_pb2.Conversion, _Mapping]] = ..., ara_source: _Optional[_Union[_events_pb2.AraSource, _Mapping]] = ..., ara_trigger: _Optional[_Union[_events_pb2.AraTrigger, _Mapping]] = ..., paa_event: _Optional[_Union[_events_pb2.PaaEvent, _Mapping]] = ..., event_level_source: _Optional[_Union[_events_pb2.EventLevelSource, _Mapping]] = ..., event_level_trigger: _Optional[_Union[_events_pb2.EventLevelTrigger, _Mapping]] = ...) -> None: ...

class DeviceRecordState(_message.Message):
    __slots__ = ("version", "cut", "timer_target", "buffered", "budget_device", "ara_device", "paa_device", "event_level_device")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CUT_FIELD_NUMBER: _ClassVar[int]
    TIMER_TARGET_FIELD_NUMBER: _ClassVar[int]
    BUFFERED_FIELD_NUMBER: _ClassVar[int]
    BUDGET_DEVICE_FIELD_NUMBER: _ClassVar[int]
    ARA_DEVICE_FIELD_NUMBER: _ClassVar[int]
    PAA_DEVICE_FIELD_NUMBER: _ClassVar[int]
    EVENT_LEVEL_DEVICE_FIELD_NUMBER: _ClassVar[int]
    version: int
    cut: int
    timer_target: int
    buffered: _containers.RepeatedCompositeFieldContainer[BufferedEvent]
    budget_device: BudgetDeviceState
    ara_device: AraDeviceState
    paa_device: PaaDeviceState
    event_level_device: EventLevelDeviceState
    def __init__(self, version: _Optional[int] = ..., cut: _Optional[int] = ..., timer_target: _Optional[int] = ..., buffered: _Optional[_Iterable[_Union[BufferedEvent, _Mapping]]] = ..., budget_device: _Optional[_Union[BudgetDeviceState, _Mapping]] = ..., ara_device: _Optional[_Union[AraDeviceState, _Mapping]] = ..., paa_device: _Optional[_Union[PaaDeviceState, _Mapping]] = ..., event_level_device: _Optional[_Union[EventLevelDeviceState, _Mapping]] = ...) -> None: ...

class DeviceShardState(_message.Message):
    __slots__ = ("version", "devices", "side", "retired_cut", "positions")
    class DevicesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: bytes
        def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ...) -> None: ...
    VERSION_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    SIDE_FIELD_NUMBER: _ClassVar[int]
    RETIRED_CUT_FIELD_NUMBER: _ClassVar[int]
    POSITIONS_FIELD_NUMBER: _ClassVar[int]
    version: int
    devices: _containers.ScalarMap[str, bytes]
    side: bytes
    retired_cut: int
    positions: InputPositions
    def __init__(self, version: _Optional[int] = ..., devices: _Optional[_Mapping[str, bytes]] = ..., side: _Optional[bytes] = ..., retired_cut: _Optional[int] = ..., positions: _Optional[_Union[InputPositions, _Mapping]] = ...) -> None: ...

class DevicePendingEvents(_message.Message):
    __slots__ = ("version", "earliest_micros", "rows", "source_watermarks", "latest_micros", "positions", "held_at_cut", "more_rows")
    class SourceWatermarksEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    VERSION_FIELD_NUMBER: _ClassVar[int]
    EARLIEST_MICROS_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_WATERMARKS_FIELD_NUMBER: _ClassVar[int]
    LATEST_MICROS_FIELD_NUMBER: _ClassVar[int]
    POSITIONS_FIELD_NUMBER: _ClassVar[int]
    HELD_AT_CUT_FIELD_NUMBER: _ClassVar[int]
    MORE_ROWS_FIELD_NUMBER: _ClassVar[int]
    version: int
    earliest_micros: int
    rows: bytes
    source_watermarks: _containers.ScalarMap[str, int]
    latest_micros: int
    positions: _containers.RepeatedCompositeFieldContainer[SourcePosition]
    held_at_cut: int
    more_rows: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, version: _Optional[int] = ..., earliest_micros: _Optional[int] = ..., rows: _Optional[bytes] = ..., source_watermarks: _Optional[_Mapping[str, int]] = ..., latest_micros: _Optional[int] = ..., positions: _Optional[_Iterable[_Union[SourcePosition, _Mapping]]] = ..., held_at_cut: _Optional[int] = ..., more_rows: _Optional[_Iterable[bytes]] = ...) -> None: ...

class FilterCharge(_message.Message):
    __slots__ = ("querier_site", "epoch", "consumed_units")
    QUERIER_SITE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    CONSUMED_UNITS_FIELD_NUMBER: _ClassVar[int]
    querier_site: str
    epoch: int
    consumed_units: int
    def __init__(self, querier_site: _Optional[str] = ..., epoch: _Optional[int] = ..., consumed_units: _Optional[int] = ...) -> None: ...

class EpochImpressions(_message.Message):
    __slots__ = ("epoch", "impressions")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    IMPRESSIONS_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    impressions: _containers.RepeatedCompositeFieldContainer[_events_pb2.Impression]
    def __init__(self, epoch: _Optional[int] = ..., impressions: _Optional[_Iterable[_Union[_events_pb2.Impression, _Mapping]]] = ...) -> None: ...

class ImpressionColumns(_message.Message):
    __slots__ = ("epochs", "event_time_micros", "impression_ids", "attributes")
    EPOCHS_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_MICROS_FIELD_NUMBER: _ClassVar[int]
    IMPRESSION_IDS_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    epochs: _containers.RepeatedScalarFieldContainer[int]
    event_time_micros: _containers.RepeatedScalarFieldContainer[int]
    impression_ids: _containers.RepeatedScalarFieldContainer[str]
    attributes: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, epochs: _Optional[_Iterable[int]] = ..., event_time_micros: _Optional[_Iterable[int]] = ..., impression_ids: _Optional[_Iterable[str]] = ..., attributes: _Optional[_Iterable[int]] = ...) -> None: ...

class ImpressionAttributes(_message.Message):
    __slots__ = ("publisher_site", "advertiser_site", "campaign_id", "product_id", "filter_keys", "intermediary_site", "conversion_callers")
    PUBLISHER_SITE_FIELD_NUMBER: _ClassVar[int]
    ADVERTISER_SITE_FIELD_NUMBER: _ClassVar[int]
    CAMPAIGN_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCT_ID_FIELD_NUMBER: _ClassVar[int]
    FILTER_KEYS_FIELD_NUMBER: _ClassVar[int]
    INTERMEDIARY_SITE_FIELD_NUMBER: _ClassVar[int]
    CONVERSION_CALLERS_FIELD_NUMBER: _ClassVar[int]
    publisher_site: str
    advertiser_site: str
    campaign_id: str
    product_id: str
    filter_keys: _containers.RepeatedScalarFieldContainer[str]
    intermediary_site: str
    conversion_callers: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, publisher_site: _Optional[str] = ..., advertiser_site: _Optional[str] = ..., campaign_id: _Optional[str] = ..., product_id: _Optional[str] = ..., filter_keys: _Optional[_Iterable[str]] = ..., intermediary_site: _Optional[str] = ..., conversion_callers: _Optional[_Iterable[str]] = ...) -> None: ...

class BudgetDeviceState(_message.Message):
    __slots__ = ("impressions", "filters", "occupied_epochs", "device_id", "impression_columns", "attributes", "filter_columns", "schedule")
    IMPRESSIONS_FIELD_NUMBER: _ClassVar[int]
    FILTERS_FIELD_NUMBER: _ClassVar[int]
    OCCUPIED_EPOCHS_FIELD_NUMBER: _ClassVar[int]
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    IMPRESSION_COLUMNS_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    FILTER_COLUMNS_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    impressions: _containers.RepeatedCompositeFieldContainer[EpochImpressions]
    filters: _containers.RepeatedCompositeFieldContainer[FilterCharge]
    occupied_epochs: _containers.RepeatedScalarFieldContainer[int]
    device_id: str
    impression_columns: ImpressionColumns
    attributes: _containers.RepeatedCompositeFieldContainer[ImpressionAttributes]
    filter_columns: FilterColumns
    schedule: BatchScheduleState
    def __init__(self, impressions: _Optional[_Iterable[_Union[EpochImpressions, _Mapping]]] = ..., filters: _Optional[_Iterable[_Union[FilterCharge, _Mapping]]] = ..., occupied_epochs: _Optional[_Iterable[int]] = ..., device_id: _Optional[str] = ..., impression_columns: _Optional[_Union[ImpressionColumns, _Mapping]] = ..., attributes: _Optional[_Iterable[_Union[ImpressionAttributes, _Mapping]]] = ..., filter_columns: _Optional[_Union[FilterColumns, _Mapping]] = ..., schedule: _Optional[_Union[BatchScheduleState, _Mapping]] = ...) -> None: ...

class BatchScheduleState(_message.Message):
    __slots__ = ("interval", "next_id", "requests", "held", "epochs", "public_filters")
    INTERVAL_FIELD_NUMBER: _ClassVar[int]
    NEXT_ID_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    EPOCHS_FIELD_NUMBER: _ClassVar[int]
    PUBLIC_FILTERS_FIELD_NUMBER: _ClassVar[int]
    interval: int
    next_id: int
    requests: _containers.RepeatedCompositeFieldContainer[ScheduledConversionState]
    held: _containers.RepeatedCompositeFieldContainer[HeldReportState]
    epochs: _containers.RepeatedCompositeFieldContainer[ScheduledEpochState]
    public_filters: FilterColumns
    def __init__(self, interval: _Optional[int] = ..., next_id: _Optional[int] = ..., requests: _Optional[_Iterable[_Union[ScheduledConversionState, _Mapping]]] = ..., held: _Optional[_Iterable[_Union[HeldReportState, _Mapping]]] = ..., epochs: _Optional[_Iterable[_Union[ScheduledEpochState, _Mapping]]] = ..., public_filters: _Optional[_Union[FilterColumns, _Mapping]] = ...) -> None: ...

class ScheduledConversionState(_message.Message):
    __slots__ = ("request_id", "remaining_attempts", "conversion", "waiting")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    REMAINING_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    CONVERSION_FIELD_NUMBER: _ClassVar[int]
    WAITING_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    remaining_attempts: int
    conversion: _events_pb2.Conversion
    waiting: bool
    def __init__(self, request_id: _Optional[int] = ..., remaining_attempts: _Optional[int] = ..., conversion: _Optional[_Union[_events_pb2.Conversion, _Mapping]] = ..., waiting: bool = ...) -> None: ...

class HeldReportState(_message.Message):
    __slots__ = ("interval", "request_id", "report")
    INTERVAL_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    REPORT_FIELD_NUMBER: _ClassVar[int]
    interval: int
    request_id: int
    report: ReportRecordState
    def __init__(self, interval: _Optional[int] = ..., request_id: _Optional[int] = ..., report: _Optional[_Union[ReportRecordState, _Mapping]] = ...) -> None: ...

class ScheduledEpochState(_message.Message):
    __slots__ = ("epoch", "releases", "impression_sites")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    RELEASES_FIELD_NUMBER: _ClassVar[int]
    IMPRESSION_SITES_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    releases: int
    impression_sites: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, epoch: _Optional[int] = ..., releases: _Optional[int] = ..., impression_sites: _Optional[_Iterable[str]] = ...) -> None: ...

class FilterColumns(_message.Message):
    __slots__ = ("querier_sites", "epochs", "consumed_units", "kinds")
    QUERIER_SITES_FIELD_NUMBER: _ClassVar[int]
    EPOCHS_FIELD_NUMBER: _ClassVar[int]
    CONSUMED_UNITS_FIELD_NUMBER: _ClassVar[int]
    KINDS_FIELD_NUMBER: _ClassVar[int]
    querier_sites: _containers.RepeatedScalarFieldContainer[str]
    epochs: _containers.RepeatedScalarFieldContainer[int]
    consumed_units: _containers.RepeatedScalarFieldContainer[int]
    kinds: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, querier_sites: _Optional[_Iterable[str]] = ..., epochs: _Optional[_Iterable[int]] = ..., consumed_units: _Optional[_Iterable[int]] = ..., kinds: _Optional[_Iterable[str]] = ...) -> None: ...

class ContributionBudgetState(_message.Message):
    __slots__ = ("contributions", "total")
    CONTRIBUTIONS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    contributions: int
    total: int
    def __init__(self, contributions: _Optional[int] = ..., total: _Optional[int] = ...) -> None: ...

class RegisteredAraSourceState(_message.Message):
    __slots__ = ("source", "budget")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    source: _events_pb2.AraSource
    budget: ContributionBudgetState
    def __init__(self, source: _Optional[_Union[_events_pb2.AraSource, _Mapping]] = ..., budget: _Optional[_Union[ContributionBudgetState, _Mapping]] = ...) -> None: ...

class AraDeviceState(_message.Message):
    __slots__ = ("sources",)
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    sources: _containers.RepeatedCompositeFieldContainer[RegisteredAraSourceState]
    def __init__(self, sources: _Optional[_Iterable[_Union[RegisteredAraSourceState, _Mapping]]] = ...) -> None: ...

class PaaOriginStorage(_message.Message):
    __slots__ = ("reporting_origin", "campaigns_seen")
    REPORTING_ORIGIN_FIELD_NUMBER: _ClassVar[int]
    CAMPAIGNS_SEEN_FIELD_NUMBER: _ClassVar[int]
    reporting_origin: str
    campaigns_seen: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, reporting_origin: _Optional[str] = ..., campaigns_seen: _Optional[_Iterable[str]] = ...) -> None: ...

class PaaWindowBudget(_message.Message):
    __slots__ = ("reporting_origin", "window", "budget")
    REPORTING_ORIGIN_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    reporting_origin: str
    window: int
    budget: ContributionBudgetState
    def __init__(self, reporting_origin: _Optional[str] = ..., window: _Optional[int] = ..., budget: _Optional[_Union[ContributionBudgetState, _Mapping]] = ...) -> None: ...

class PaaDeviceState(_message.Message):
    __slots__ = ("storage", "budgets")
    STORAGE_FIELD_NUMBER: _ClassVar[int]
    BUDGETS_FIELD_NUMBER: _ClassVar[int]
    storage: _containers.RepeatedCompositeFieldContainer[PaaOriginStorage]
    budgets: _containers.RepeatedCompositeFieldContainer[PaaWindowBudget]
    def __init__(self, storage: _Optional[_Iterable[_Union[PaaOriginStorage, _Mapping]]] = ..., budgets: _Optional[_Iterable[_Union[PaaWindowBudget, _Mapping]]] = ...) -> None: ...

class RegisteredEventSourceState(_message.Message):
    __slots__ = ("name", "index", "values", "last_bucket", "sent", "counts", "inactive", "scheduled", "randomized", "fake", "rate")
    NAME_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    LAST_BUCKET_FIELD_NUMBER: _ClassVar[int]
    SENT_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    INACTIVE_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_FIELD_NUMBER: _ClassVar[int]
    RANDOMIZED_FIELD_NUMBER: _ClassVar[int]
    FAKE_FIELD_NUMBER: _ClassVar[int]
    RATE_FIELD_NUMBER: _ClassVar[int]
    name: str
    index: int
    values: _containers.RepeatedScalarFieldContainer[int]
    last_bucket: _containers.RepeatedScalarFieldContainer[int]
    sent: int
    counts: _containers.RepeatedScalarFieldContainer[int]
    inactive: bool
    scheduled: _containers.RepeatedScalarFieldContainer[bool]
    randomized: bool
    fake: _containers.RepeatedScalarFieldContainer[int]
    rate: float
    def __init__(self, name: _Optional[str] = ..., index: _Optional[int] = ..., values: _Optional[_Iterable[int]] = ..., last_bucket: _Optional[_Iterable[int]] = ..., sent: _Optional[int] = ..., counts: _Optional[_Iterable[int]] = ..., inactive: bool = ..., scheduled: _Optional[_Iterable[bool]] = ..., randomized: bool = ..., fake: _Optional[_Iterable[int]] = ..., rate: _Optional[float] = ...) -> None: ...

class ScheduledWindow(_message.Message):
    __slots__ = ("time_micros", "index", "trigger_spec", "window")
    TIME_MICROS_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_SPEC_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    time_micros: int
    index: int
    trigger_spec: int
    window: int
    def __init__(self, time_micros: _Optional[int] = ..., index: _Optional[int] = ..., trigger_spec: _Optional[int] = ..., window: _Optional[int] = ...) -> None: ...

class NamedEventLevelSource(_message.Message):
    __slots__ = ("name", "source")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    name: str
    source: _events_pb2.EventLevelSource
    def __init__(self, name: _Optional[str] = ..., source: _Optional[_Union[_events_pb2.EventLevelSource, _Mapping]] = ...) -> None: ...

class EventLevelDeviceState(_message.Message):
    __slots__ = ("registered", "sources", "client_sources", "windows", "now_micros")
    REGISTERED_FIELD_NUMBER: _ClassVar[int]
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    CLIENT_SOURCES_FIELD_NUMBER: _ClassVar[int]
    WINDOWS_FIELD_NUMBER: _ClassVar[int]
    NOW_MICROS_FIELD_NUMBER: _ClassVar[int]
    registered: int
    sources: _containers.RepeatedCompositeFieldContainer[NamedEventLevelSource]
    client_sources: _containers.RepeatedCompositeFieldContainer[RegisteredEventSourceState]
    windows: _containers.RepeatedCompositeFieldContainer[ScheduledWindow]
    now_micros: int
    def __init__(self, registered: _Optional[int] = ..., sources: _Optional[_Iterable[_Union[NamedEventLevelSource, _Mapping]]] = ..., client_sources: _Optional[_Iterable[_Union[RegisteredEventSourceState, _Mapping]]] = ..., windows: _Optional[_Iterable[_Union[ScheduledWindow, _Mapping]]] = ..., now_micros: _Optional[int] = ...) -> None: ...

class ReportRecordState(_message.Message):
    __slots__ = ("querier_site", "query_key", "conversion_time_micros", "device_id", "conversion_id", "report_id", "histogram", "requested_epsilon", "query_global_sensitivity", "first_epoch", "last_epoch", "charged_units", "dropped_epochs", "bias_weight")
    QUERIER_SITE_FIELD_NUMBER: _ClassVar[int]
    QUERY_KEY_FIELD_NUMBER: _ClassVar[int]
    CONVERSION_TIME_MICROS_FIELD_NUMBER: _ClassVar[int]
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    CONVERSION_ID_FIELD_NUMBER: _ClassVar[int]
    REPORT_ID_FIELD_NUMBER: _ClassVar[int]
    HISTOGRAM_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_EPSILON_FIELD_NUMBER: _ClassVar[int]
    QUERY_GLOBAL_SENSITIVITY_FIELD_NUMBER: _ClassVar[int]
    FIRST_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LAST_EPOCH_FIELD_NUMBER: _ClassVar[int]
    CHARGED_UNITS_FIELD_NUMBER: _ClassVar[int]
    DROPPED_EPOCHS_FIELD_NUMBER: _ClassVar[int]
    BIAS_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    querier_site: str
    query_key: str
    conversion_time_micros: int
    device_id: str
    conversion_id: str
    report_id: str
    histogram: _containers.RepeatedScalarFieldContainer[float]
    requested_epsilon: float
    query_global_sensitivity: float
    first_epoch: int
    last_epoch: int
    charged_units: int
    dropped_epochs: int
    bias_weight: float
    def __init__(self, querier_site: _Optional[str] = ..., query_key: _Optional[str] = ..., conversion_time_micros: _Optional[int] = ..., device_id: _Optional[str] = ..., conversion_id: _Optional[str] = ..., report_id: _Optional[str] = ..., histogram: _Optional[_Iterable[float]] = ..., requested_epsilon: _Optional[float] = ..., query_global_sensitivity: _Optional[float] = ..., first_epoch: _Optional[int] = ..., last_epoch: _Optional[int] = ..., charged_units: _Optional[int] = ..., dropped_epochs: _Optional[int] = ..., bias_weight: _Optional[float] = ...) -> None: ...

class QueryCutterState(_message.Message):
    __slots__ = ("querier_site", "query_key", "next_index", "pending")
    QUERIER_SITE_FIELD_NUMBER: _ClassVar[int]
    QUERY_KEY_FIELD_NUMBER: _ClassVar[int]
    NEXT_INDEX_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    querier_site: str
    query_key: str
    next_index: int
    pending: _containers.RepeatedCompositeFieldContainer[ReportRecordState]
    def __init__(self, querier_site: _Optional[str] = ..., query_key: _Optional[str] = ..., next_index: _Optional[int] = ..., pending: _Optional[_Iterable[_Union[ReportRecordState, _Mapping]]] = ...) -> None: ...

class MeasurementQueriesState(_message.Message):
    __slots__ = ("version", "cutters", "central", "rows")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CUTTERS_FIELD_NUMBER: _ClassVar[int]
    CENTRAL_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    version: int
    cutters: _containers.RepeatedCompositeFieldContainer[QueryCutterState]
    central: _containers.RepeatedCompositeFieldContainer[FilterCharge]
    rows: _containers.RepeatedCompositeFieldContainer[_reports_pb2.DeviceEpochBudget]
    def __init__(self, version: _Optional[int] = ..., cutters: _Optional[_Iterable[_Union[QueryCutterState, _Mapping]]] = ..., central: _Optional[_Iterable[_Union[FilterCharge, _Mapping]]] = ..., rows: _Optional[_Iterable[_Union[_reports_pb2.DeviceEpochBudget, _Mapping]]] = ...) -> None: ...

class PartitionOffset(_message.Message):
    __slots__ = ("partition", "next_offset", "read", "dead")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    NEXT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    READ_FIELD_NUMBER: _ClassVar[int]
    DEAD_FIELD_NUMBER: _ClassVar[int]
    partition: int
    next_offset: int
    read: int
    dead: int
    def __init__(self, partition: _Optional[int] = ..., next_offset: _Optional[int] = ..., read: _Optional[int] = ..., dead: _Optional[int] = ...) -> None: ...

class SourcePosition(_message.Message):
    __slots__ = ("input", "sequence", "partitions")
    INPUT_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    input: str
    sequence: int
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionOffset]
    def __init__(self, input: _Optional[str] = ..., sequence: _Optional[int] = ..., partitions: _Optional[_Iterable[_Union[PartitionOffset, _Mapping]]] = ...) -> None: ...

class InputPositions(_message.Message):
    __slots__ = ("inputs",)
    class Input(_message.Message):
        __slots__ = ("input", "next_sequence", "partitions", "ahead")
        INPUT_FIELD_NUMBER: _ClassVar[int]
        NEXT_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        AHEAD_FIELD_NUMBER: _ClassVar[int]
        input: str
        next_sequence: int
        partitions: _containers.RepeatedCompositeFieldContainer[PartitionOffset]
        ahead: _containers.RepeatedCompositeFieldContainer[SourcePosition]
        def __init__(self, input: _Optional[str] = ..., next_sequence: _Optional[int] = ..., partitions: _Optional[_Iterable[_Union[PartitionOffset, _Mapping]]] = ..., ahead: _Optional[_Iterable[_Union[SourcePosition, _Mapping]]] = ...) -> None: ...
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    inputs: _containers.RepeatedCompositeFieldContainer[InputPositions.Input]
    def __init__(self, inputs: _Optional[_Iterable[_Union[InputPositions.Input, _Mapping]]] = ...) -> None: ...

class StepSnapshot(_message.Message):
    __slots__ = ("version", "shard", "positions", "ended")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    SHARD_FIELD_NUMBER: _ClassVar[int]
    POSITIONS_FIELD_NUMBER: _ClassVar[int]
    ENDED_FIELD_NUMBER: _ClassVar[int]
    version: int
    shard: bytes
    positions: InputPositions
    ended: bool
    def __init__(self, version: _Optional[int] = ..., shard: _Optional[bytes] = ..., positions: _Optional[_Union[InputPositions, _Mapping]] = ..., ended: bool = ...) -> None: ...
