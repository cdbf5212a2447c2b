from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class KAnonVerdict(_message.Message):
    __slots__ = ("interest_group", "step", "step_start_micros", "k_anonymous", "instance_start_step")
    INTEREST_GROUP_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    STEP_START_MICROS_FIELD_NUMBER: _ClassVar[int]
    K_ANONYMOUS_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_START_STEP_FIELD_NUMBER: _ClassVar[int]
    interest_group: str
    step: int
    step_start_micros: int
    k_anonymous: bool
    instance_start_step: int
    def __init__(self, interest_group: _Optional[str] = ..., step: _Optional[int] = ..., step_start_micros: _Optional[int] = ..., k_anonymous: bool = ..., instance_start_step: _Optional[int] = ...) -> None: ...

class AttributionReport(_message.Message):
    __slots__ = ("report_id", "querier_site", "query_key", "histogram", "requested_epsilon", "query_global_sensitivity")
    REPORT_ID_FIELD_NUMBER: _ClassVar[int]
    QUERIER_SITE_FIELD_NUMBER: _ClassVar[int]
    QUERY_KEY_FIELD_NUMBER: _ClassVar[int]
    HISTOGRAM_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_EPSILON_FIELD_NUMBER: _ClassVar[int]
    QUERY_GLOBAL_SENSITIVITY_FIELD_NUMBER: _ClassVar[int]
    report_id: str
    querier_site: str
    query_key: str
    histogram: _containers.RepeatedScalarFieldContainer[float]
    requested_epsilon: float
    query_global_sensitivity: float
    def __init__(self, report_id: _Optional[str] = ..., querier_site: _Optional[str] = ..., query_key: _Optional[str] = ..., histogram: _Optional[_Iterable[float]] = ..., requested_epsilon: _Optional[float] = ..., query_global_sensitivity: _Optional[float] = ...) -> None: ...

class QueryResult(_message.Message):
    __slots__ = ("querier_site", "query_key", "batch_index", "report_count", "noisy_value", "epsilon", "noise_scale", "status", "empty_count_estimate", "bias_bound")
    QUERIER_SITE_FIELD_NUMBER: _ClassVar[int]
    QUERY_KEY_FIELD_NUMBER: _ClassVar[int]
    BATCH_INDEX_FIELD_NUMBER: _ClassVar[int]
    REPORT_COUNT_FIELD_NUMBER: _ClassVar[int]
    NOISY_VALUE_FIELD_NUMBER: _ClassVar[int]
    EPSILON_FIELD_NUMBER: _ClassVar[int]
    NOISE_SCALE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    EMPTY_COUNT_ESTIMATE_FIELD_NUMBER: _ClassVar[int]
    BIAS_BOUND_FIELD_NUMBER: _ClassVar[int]
    querier_site: str
    query_key: str
    batch_index: int
    report_count: int
    noisy_value: _containers.RepeatedScalarFieldContainer[float]
    epsilon: float
    noise_scale: float
    status: str
    empty_count_estimate: float
    bias_bound: float
    def __init__(self, querier_site: _Optional[str] = ..., query_key: _Optional[str] = ..., batch_index: _Optional[int] = ..., report_count: _Optional[int] = ..., noisy_value: _Optional[_Iterable[float]] = ..., epsilon: _Optional[float] = ..., noise_scale: _Optional[float] = ..., status: _Optional[str] = ..., empty_count_estimate: _Optional[float] = ..., bias_bound: _Optional[float] = ...) -> None: ...

class DeviceEpochBudget(_message.Message):
    __slots__ = ("querier_site", "device_id", "epoch", "consumed_epsilon", "capacity_epsilon")
    QUERIER_SITE_FIELD_NUMBER: _ClassVar[int]
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    CONSUMED_EPSILON_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_EPSILON_FIELD_NUMBER: _ClassVar[int]
    querier_site: str
    device_id: str
    epoch: int
    consumed_epsilon: float
    capacity_epsilon: float
    def __init__(self, querier_site: _Optional[str] = ..., device_id: _Optional[str] = ..., epoch: _Optional[int] = ..., consumed_epsilon: _Optional[float] = ..., capacity_epsilon: _Optional[float] = ...) -> None: ...

class EventLevelReport(_message.Message):
    __slots__ = ("source_id", "reporting_origin", "destination", "trigger_data", "window_index", "summary_bucket", "report_time", "randomized_trigger_rate")
    SOURCE_ID_FIELD_NUMBER: _ClassVar[int]
    REPORTING_ORIGIN_FIELD_NUMBER: _ClassVar[int]
    DESTINATION_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_DATA_FIELD_NUMBER: _ClassVar[int]
    WINDOW_INDEX_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_BUCKET_FIELD_NUMBER: _ClassVar[int]
    REPORT_TIME_FIELD_NUMBER: _ClassVar[int]
    RANDOMIZED_TRIGGER_RATE_FIELD_NUMBER: _ClassVar[int]
    source_id: str
    reporting_origin: str
    destination: str
    trigger_data: int
    window_index: int
    summary_bucket: int
    report_time: int
    randomized_trigger_rate: float
    def __init__(self, source_id: _Optional[str] = ..., reporting_origin: _Optional[str] = ..., destination: _Optional[str] = ..., trigger_data: _Optional[int] = ..., window_index: _Optional[int] = ..., summary_bucket: _Optional[int] = ..., report_time: _Optional[int] = ..., randomized_trigger_rate: _Optional[float] = ...) -> None: ...
