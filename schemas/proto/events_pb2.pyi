from google.protobuf import descriptor_pb2 as _descriptor_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
KIND_FIELD_NUMBER: _ClassVar[int]
kind: _descriptor.FieldDescriptor

class JoinEvent(_message.Message):
    __slots__ = ("interest_group", "user_id", "event_time_micros")
    INTEREST_GROUP_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_MICROS_FIELD_NUMBER: _ClassVar[int]
    interest_group: str
    user_id: str
    event_time_micros: int
    def __init__(self, interest_group: _Optional[str] = ..., user_id: _Optional[str] = ..., event_time_micros: _Optional[int] = ...) -> None: ...

class Impression(_message.Message):
    __slots__ = ("device_id", "event_time_micros", "impression_id", "publisher_site", "advertiser_site", "campaign_id", "product_id", "filter_keys", "intermediary_site", "conversion_callers")
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_MICROS_FIELD_NUMBER: _ClassVar[int]
    IMPRESSION_ID_FIELD_NUMBER: _ClassVar[int]
    PUBLISHER_SITE_FIELD_NUMBER: _ClassVar[int]
    ADVERTISER_SITE_FIELD_NUMBER: _ClassVar[int]
    CAMPAIGN_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCT_ID_FIELD_NUMBER: _ClassVar[int]
    FILTER_KEYS_FIELD_NUMBER: _ClassVar[int]
    INTERMEDIARY_SITE_FIELD_NUMBER: _ClassVar[int]
    CONVERSION_CALLERS_FIELD_NUMBER: _ClassVar[int]
    device_id: str
    event_time_micros: int
    impression_id: str
    publisher_site: str
    advertiser_site: str
    campaign_id: str
    product_id: str
    filter_keys: _containers.RepeatedScalarFieldContainer[str]
    intermediary_site: str
    conversion_callers: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, device_id: _Optional[str] = ..., event_time_micros: _Optional[int] = ..., impression_id: _Optional[str] = ..., publisher_site: _Optional[str] = ..., advertiser_site: _Optional[str] = ..., campaign_id: _Optional[str] = ..., product_id: _Optional[str] = ..., filter_keys: _Optional[_Iterable[str]] = ..., intermediary_site: _Optional[str] = ..., conversion_callers: _Optional[_Iterable[str]] = ...) -> None: ...

class AttributionRequest(_message.Message):
    __slots__ = ("window_days", "first_epoch", "last_epoch", "campaign_ids", "product_id", "filter_keys", "logic", "last_n", "dimension", "requested_epsilon", "report_global_sensitivity", "query_global_sensitivity", "norm", "query_key", "impression_sites", "impression_callers")
    WINDOW_DAYS_FIELD_NUMBER: _ClassVar[int]
    FIRST_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LAST_EPOCH_FIELD_NUMBER: _ClassVar[int]
    CAMPAIGN_IDS_FIELD_NUMBER: _ClassVar[int]
    PRODUCT_ID_FIELD_NUMBER: _ClassVar[int]
    FILTER_KEYS_FIELD_NUMBER: _ClassVar[int]
    LOGIC_FIELD_NUMBER: _ClassVar[int]
    LAST_N_FIELD_NUMBER: _ClassVar[int]
    DIMENSION_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_EPSILON_FIELD_NUMBER: _ClassVar[int]
    REPORT_GLOBAL_SENSITIVITY_FIELD_NUMBER: _ClassVar[int]
    QUERY_GLOBAL_SENSITIVITY_FIELD_NUMBER: _ClassVar[int]
    NORM_FIELD_NUMBER: _ClassVar[int]
    QUERY_KEY_FIELD_NUMBER: _ClassVar[int]
    IMPRESSION_SITES_FIELD_NUMBER: _ClassVar[int]
    IMPRESSION_CALLERS_FIELD_NUMBER: _ClassVar[int]
    window_days: int
    first_epoch: int
    last_epoch: int
    campaign_ids: _containers.RepeatedScalarFieldContainer[str]
    product_id: str
    filter_keys: _containers.RepeatedScalarFieldContainer[str]
    logic: str
    last_n: int
    dimension: int
    requested_epsilon: float
    report_global_sensitivity: float
    query_global_sensitivity: float
    norm: str
    query_key: str
    impression_sites: _containers.RepeatedScalarFieldContainer[str]
    impression_callers: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, window_days: _Optional[int] = ..., first_epoch: _Optional[int] = ..., last_epoch: _Optional[int] = ..., campaign_ids: _Optional[_Iterable[str]] = ..., product_id: _Optional[str] = ..., filter_keys: _Optional[_Iterable[str]] = ..., logic: _Optional[str] = ..., last_n: _Optional[int] = ..., dimension: _Optional[int] = ..., requested_epsilon: _Optional[float] = ..., report_global_sensitivity: _Optional[float] = ..., query_global_sensitivity: _Optional[float] = ..., norm: _Optional[str] = ..., query_key: _Optional[str] = ..., impression_sites: _Optional[_Iterable[str]] = ..., impression_callers: _Optional[_Iterable[str]] = ...) -> None: ...

class Conversion(_message.Message):
    __slots__ = ("device_id", "event_time_micros", "conversion_id", "advertiser_site", "querier_site", "value", "product_id", "attribution_request")
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_MICROS_FIELD_NUMBER: _ClassVar[int]
    CONVERSION_ID_FIELD_NUMBER: _ClassVar[int]
    ADVERTISER_SITE_FIELD_NUMBER: _ClassVar[int]
    QUERIER_SITE_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    PRODUCT_ID_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTION_REQUEST_FIELD_NUMBER: _ClassVar[int]
    device_id: str
    event_time_micros: int
    conversion_id: str
    advertiser_site: str
    querier_site: str
    value: float
    product_id: str
    attribution_request: AttributionRequest
    def __init__(self, device_id: _Optional[str] = ..., event_time_micros: _Optional[int] = ..., conversion_id: _Optional[str] = ..., advertiser_site: _Optional[str] = ..., querier_site: _Optional[str] = ..., value: _Optional[float] = ..., product_id: _Optional[str] = ..., attribution_request: _Optional[_Union[AttributionRequest, _Mapping]] = ...) -> None: ...

class AggregationKey(_message.Message):
    __slots__ = ("name", "key")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    name: str
    key: str
    def __init__(self, name: _Optional[str] = ..., key: _Optional[str] = ...) -> None: ...

class AraSource(_message.Message):
    __slots__ = ("device_id", "event_time_micros", "source_id", "reporting_origin", "destination", "expiry_seconds", "priority", "filter_data", "aggregation_keys")
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_MICROS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    REPORTING_ORIGIN_FIELD_NUMBER: _ClassVar[int]
    DESTINATION_FIELD_NUMBER: _ClassVar[int]
    EXPIRY_SECONDS_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    FILTER_DATA_FIELD_NUMBER: _ClassVar[int]
    AGGREGATION_KEYS_FIELD_NUMBER: _ClassVar[int]
    device_id: str
    event_time_micros: int
    source_id: str
    reporting_origin: str
    destination: str
    expiry_seconds: int
    priority: int
    filter_data: _containers.RepeatedScalarFieldContainer[str]
    aggregation_keys: _containers.RepeatedCompositeFieldContainer[AggregationKey]
    def __init__(self, device_id: _Optional[str] = ..., event_time_micros: _Optional[int] = ..., source_id: _Optional[str] = ..., reporting_origin: _Optional[str] = ..., destination: _Optional[str] = ..., expiry_seconds: _Optional[int] = ..., priority: _Optional[int] = ..., filter_data: _Optional[_Iterable[str]] = ..., aggregation_keys: _Optional[_Iterable[_Union[AggregationKey, _Mapping]]] = ...) -> None: ...

class AggregatableTriggerData(_message.Message):
    __slots__ = ("key_piece", "source_keys")
    KEY_PIECE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_KEYS_FIELD_NUMBER: _ClassVar[int]
    key_piece: str
    source_keys: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, key_piece: _Optional[str] = ..., source_keys: _Optional[_Iterable[str]] = ...) -> None: ...

class AggregatableValue(_message.Message):
    __slots__ = ("name", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: int
    def __init__(self, name: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...

class AraTrigger(_message.Message):
    __slots__ = ("device_id", "event_time_micros", "trigger_id", "reporting_origin", "destination", "filters", "aggregatable_trigger_data", "aggregatable_values")
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_MICROS_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_ID_FIELD_NUMBER: _ClassVar[int]
    REPORTING_ORIGIN_FIELD_NUMBER: _ClassVar[int]
    DESTINATION_FIELD_NUMBER: _ClassVar[int]
    FILTERS_FIELD_NUMBER: _ClassVar[int]
    AGGREGATABLE_TRIGGER_DATA_FIELD_NUMBER: _ClassVar[int]
    AGGREGATABLE_VALUES_FIELD_NUMBER: _ClassVar[int]
    device_id: str
    event_time_micros: int
    trigger_id: str
    reporting_origin: str
    destination: str
    filters: _containers.RepeatedScalarFieldContainer[str]
    aggregatable_trigger_data: _containers.RepeatedCompositeFieldContainer[AggregatableTriggerData]
    aggregatable_values: _containers.RepeatedCompositeFieldContainer[AggregatableValue]
    def __init__(self, device_id: _Optional[str] = ..., event_time_micros: _Optional[int] = ..., trigger_id: _Optional[str] = ..., reporting_origin: _Optional[str] = ..., destination: _Optional[str] = ..., filters: _Optional[_Iterable[str]] = ..., aggregatable_trigger_data: _Optional[_Iterable[_Union[AggregatableTriggerData, _Mapping]]] = ..., aggregatable_values: _Optional[_Iterable[_Union[AggregatableValue, _Mapping]]] = ...) -> None: ...

class PaaEvent(_message.Message):
    __slots__ = ("device_id", "event_time_micros", "event_id", "reporting_origin", "api", "campaign_id")
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_MICROS_FIELD_NUMBER: _ClassVar[int]
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    REPORTING_ORIGIN_FIELD_NUMBER: _ClassVar[int]
    API_FIELD_NUMBER: _ClassVar[int]
    CAMPAIGN_ID_FIELD_NUMBER: _ClassVar[int]
    device_id: str
    event_time_micros: int
    event_id: str
    reporting_origin: str
    api: str
    campaign_id: str
    def __init__(self, device_id: _Optional[str] = ..., event_time_micros: _Optional[int] = ..., event_id: _Optional[str] = ..., reporting_origin: _Optional[str] = ..., api: _Optional[str] = ..., campaign_id: _Optional[str] = ...) -> None: ...

class TriggerSpec(_message.Message):
    __slots__ = ("trigger_data", "window_ends_seconds", "summary_buckets")
    TRIGGER_DATA_FIELD_NUMBER: _ClassVar[int]
    WINDOW_ENDS_SECONDS_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_BUCKETS_FIELD_NUMBER: _ClassVar[int]
    trigger_data: _containers.RepeatedScalarFieldContainer[int]
    window_ends_seconds: _containers.RepeatedScalarFieldContainer[int]
    summary_buckets: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, trigger_data: _Optional[_Iterable[int]] = ..., window_ends_seconds: _Optional[_Iterable[int]] = ..., summary_buckets: _Optional[_Iterable[int]] = ...) -> None: ...

class EventLevelSource(_message.Message):
    __slots__ = ("device_id", "event_time_micros", "source_id", "reporting_origin", "destination", "source_type", "expiry_seconds", "priority", "filter_data", "max_event_level_reports", "trigger_data_matching", "trigger_specs")
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_MICROS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    REPORTING_ORIGIN_FIELD_NUMBER: _ClassVar[int]
    DESTINATION_FIELD_NUMBER: _ClassVar[int]
    SOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    EXPIRY_SECONDS_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    FILTER_DATA_FIELD_NUMBER: _ClassVar[int]
    MAX_EVENT_LEVEL_REPORTS_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_DATA_MATCHING_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_SPECS_FIELD_NUMBER: _ClassVar[int]
    device_id: str
    event_time_micros: int
    source_id: str
    reporting_origin: str
    destination: str
    source_type: str
    expiry_seconds: int
    priority: int
    filter_data: _containers.RepeatedScalarFieldContainer[str]
    max_event_level_reports: int
    trigger_data_matching: str
    trigger_specs: _containers.RepeatedCompositeFieldContainer[TriggerSpec]
    def __init__(self, device_id: _Optional[str] = ..., event_time_micros: _Optional[int] = ..., source_id: _Optional[str] = ..., reporting_origin: _Optional[str] = ..., destination: _Optional[str] = ..., source_type: _Optional[str] = ..., expiry_seconds: _Optional[int] = ..., priority: _Optional[int] = ..., filter_data: _Optional[_Iterable[str]] = ..., max_event_level_reports: _Optional[int] = ..., trigger_data_matching: _Optional[str] = ..., trigger_specs: _Optional[_Iterable[_Union[TriggerSpec, _Mapping]]] = ...) -> None: ...

class EventLevelTrigger(_message.Message):
    __slots__ = ("device_id", "event_time_micros", "trigger_id", "reporting_origin", "destination", "filters", "trigger_data", "value")
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_MICROS_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_ID_FIELD_NUMBER: _ClassVar[int]
    REPORTING_ORIGIN_FIELD_NUMBER: _ClassVar[int]
    DESTINATION_FIELD_NUMBER: _ClassVar[int]
    FILTERS_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_DATA_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    device_id: str
    event_time_micros: int
    trigger_id: str
    reporting_origin: str
    destination: str
    filters: _containers.RepeatedScalarFieldContainer[str]
    trigger_data: int
    value: int
    def __init__(self, device_id: _Optional[str] = ..., event_time_micros: _Optional[int] = ..., trigger_id: _Optional[str] = ..., reporting_origin: _Optional[str] = ..., destination: _Optional[str] = ..., filters: _Optional[_Iterable[str]] = ..., trigger_data: _Optional[int] = ..., value: _Optional[int] = ...) -> None: ...
