"""The streaming event-level job's per-device state as an explicit record (``EventLevelDeviceState``,
``transforms.core.state``): the device's sources, and per live source the client's counters and its s*.

Privacy: a source's randomized-response choice s* (Ghazi et al. Alg. 8) is drawn once, at registration, and kept:
a restored source never draws it again, so its reports stay one draw of an eps-DP mechanism (Thm. 5.1). The
epsilon and the random source are the job's, not the state's.
"""
from __future__ import annotations

from schemas.proto import state_pb2
from schemas.row_messages import EncodedRows, row_of
from schemas.rows import EventLevelSource
from transforms.core.device_state import DeviceRecord, device_record_codec
from transforms.core.mechanisms.noise import RandomSource
from transforms.core.state import StateCodec
from transforms.event_level.mechanisms.client import RegisteredEventSource
from transforms.event_level.mechanisms.devices import EventLevelDevice, event_source


def _counters(registered: RegisteredEventSource) -> tuple:
    """What of a registered source's entry (but its index) changes after its registration: N, whether it is
    inactive, V, U, its counts and which of its windows are queued. The lists themselves:
    ``EncodedRows.into_part`` compares them by content."""
    return (registered.sent, registered.inactive, registered.values, registered.last_bucket, registered.counts,
            registered.scheduled)


def _client_source_to(registered: RegisteredEventSource, entry: state_pb2.RegisteredEventSourceState) -> None:
    """The entry of a registered source, but its index (``_to_message`` sets it)."""
    entry.name, entry.sent = registered.source.source_id, registered.sent
    entry.inactive, entry.randomized, entry.rate = registered.inactive, registered.fake is not None, registered.rate
    entry.values.extend(registered.values)
    entry.last_bucket.extend(registered.last_bucket)
    entry.counts.extend(registered.counts)
    entry.scheduled.extend(registered.scheduled)
    if registered.fake is not None:
        entry.fake.extend(registered.fake)


def _to_message(device: EventLevelDevice, message: state_pb2.EventLevelDeviceState, encoded: EncodedRows) -> None:
    client = device.client
    if client.reports:
        raise ValueError("an event-level device's sent reports must be drained before its state is stored")
    message.registered = device.registered
    for name, row in device.sources.items():
        encoded.into(row, message.sources.add(name=name).source)
    for registered in client.sources:
        entry = message.client_sources.add()
        encoded.into_part(registered, _counters(registered), entry, _client_source_to)
        # set apart from the kept bytes: every expiry renumbers the sources registered after the expired one
        entry.index = registered.index
    for time_micros, index, t, w in client.windows:
        message.windows.add(time_micros=time_micros, index=index, trigger_spec=t, window=w)
    if client.now_micros is not None:
        message.now_micros = client.now_micros


def _from_message(message: state_pb2.EventLevelDeviceState, epsilon: float | None, source: RandomSource) -> EventLevelDevice:
    device = EventLevelDevice(epsilon, source)
    device.registered = message.registered
    device.sources = {entry.name: row_of(EventLevelSource, entry.source) for entry in message.sources}
    client = device.client
    for entry in message.client_sources:
        fake = tuple(entry.fake) if entry.randomized else None
        registered = RegisteredEventSource(event_source(entry.name, device.sources[entry.name]), entry.index, fake,
                                           entry.rate)
        registered.values, registered.last_bucket = list(entry.values), list(entry.last_bucket)
        registered.sent, registered.counts = entry.sent, list(entry.counts)
        registered.inactive, registered.scheduled = entry.inactive, list(entry.scheduled)
        client.sources.append(registered)
    client.windows = [(window.time_micros, window.index, window.trigger_spec, window.window) for window in message.windows]
    client.now_micros = message.now_micros if message.HasField("now_micros") else None
    return device


def device_record_codec_for(epsilon: float | None, source: RandomSource,
                            record_type: type[DeviceRecord] = DeviceRecord) -> StateCodec:
    """The codec of a device's record whose state is its ``EventLevelDevice`` (with the job's ``epsilon`` and
    random ``source``)."""
    return device_record_codec("event_level_device", _to_message,
                               lambda message: _from_message(message, epsilon, source), record_type)
