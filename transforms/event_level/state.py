"""The streaming event-level job's per-device state as an explicit record (``EventLevelDeviceState``,
``transforms.core.state``): the device's sources, and per live source the client's counters and its s*.

Privacy: a source's randomized-response choice s* (Ghazi et al. Alg. 8) is drawn once, at registration, and kept:
a restored source never draws it again, so its reports stay one draw of an eps-DP mechanism (Thm. 5.1). The
epsilon and the random source are the job's, not the state's.
"""
from __future__ import annotations

from schemas.proto import state_pb2
from schemas.row_messages import EncodedRows, length_delimited, message_of, row_of, varint, varint_field
from schemas.rows import EventLevelSource
from transforms.core.device_state import DeviceRecord, device_record_codec
from transforms.core.mechanisms.noise import RandomSource
from transforms.core.state import StateCodec
from transforms.event_level.mechanisms.client import RegisteredEventSource
from transforms.event_level.mechanisms.devices import EventLevelDevice, event_source

_ENTRY = state_pb2.RegisteredEventSourceState
_STATE = state_pb2.EventLevelDeviceState
_FIELDS = {name: field.number for name, field in _STATE.DESCRIPTOR.fields_by_name.items()}
_ENTRY_NAME, _ENTRY_INDEX = _ENTRY.DESCRIPTOR.fields_by_name["name"].number, _ENTRY.DESCRIPTOR.fields_by_name["index"].number


def _client_source_parts(registered: RegisteredEventSource, _revision: int) -> tuple[bytes, bytes]:
    """A registered source's entry but its index, which goes between the two: the name field, and the fields
    after the index (all that its counters change)."""
    tail = _ENTRY(sent=registered.sent, inactive=registered.inactive, randomized=registered.fake is not None,
                  rate=registered.rate, values=registered.values, last_bucket=registered.last_bucket,
                  counts=registered.counts, scheduled=registered.scheduled, fake=registered.fake or ())
    return length_delimited(_ENTRY_NAME, registered.source.source_id.encode()), tail.SerializeToString()


def _named_source(row: EventLevelSource, name: str) -> bytes:
    """A device's source under its ``name`` on the device: a ``sources`` field of the state."""
    entry = state_pb2.NamedEventLevelSource(name=name)
    message_of(row, entry.source)
    return length_delimited(_FIELDS["sources"], entry.SerializeToString())


def _named_sources(encoded: EncodedRows, names: tuple[str, ...], rows: tuple[EventLevelSource, ...]) -> bytes:
    """A device's sources, each kept on its own: most firings register or forget none of them, and one that does
    changes one or two."""
    return b"".join([encoded.kept(row, name, _named_source) for name, row in zip(names, rows, strict=True)])


def _client_sources(encoded: EncodedRows, sources: list[RegisteredEventSource]) -> bytes:
    """The client's registered sources, each one's counters kept on its own: a change to the client changes one
    or two of them (or renumbers them all: the index is set apart from the kept bytes, since every expiry
    renumbers the sources registered after the expired one)."""
    entries = []
    for registered in sources:
        name, tail = encoded.kept(registered, registered.revision, _client_source_parts)
        entries.append(length_delimited(_FIELDS["client_sources"],
                                        name + varint_field(_ENTRY_INDEX, registered.index) + tail))
    return b"".join(entries)


def _windows(windows: list[tuple[int, int, int, int]]) -> bytes:
    """The client's heap of windows (time, source index, t, w), in heap order."""
    message = _STATE()
    for time_micros, index, t, w in windows:
        message.windows.add(time_micros=time_micros, index=index, trigger_spec=t, window=w)
    return message.SerializeToString()


def _to_bytes(device: EventLevelDevice, encoded: EncodedRows) -> bytes:
    """The device's ``EventLevelDeviceState``, put together field by field (in their order) from the bytes kept
    for its parts: a device is encoded at every firing that replays it, and most of its sources stay as they
    were. Its rows are kept whole while the same rows have the same names (a name is never reused), the client's
    sources while the client's ``revision`` stays, its windows while the heap holds the same."""
    client = device.client
    if client.reports:
        raise ValueError("an event-level device's sent reports must be drained before its state is stored")
    sources = device.sources
    return b"".join((
        varint_field(_FIELDS["registered"], device.registered),
        encoded.kept(device, (tuple(sources), tuple(sources.values())),
                     lambda _, version: _named_sources(encoded, *version)),
        encoded.kept(client, client.revision, lambda _, __: _client_sources(encoded, client.sources)),
        encoded.kept(client.windows, (client.windows,), lambda _, version: _windows(version[0])),
        b"" if client.now_micros is None else varint(_FIELDS["now_micros"] << 3) + varint(client.now_micros),  # optional
    ))


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
    return device_record_codec("event_level_device", _to_bytes,
                               lambda message: _from_message(message, epsilon, source), record_type)
