"""The event-level device's codec (``transforms.event_level.state``) keeps the bytes of each registered source's
entry while its counters stay the same (``EncodedRows.into_part``): after every event of a replay, the record
encoded again gives the bytes of the same state encoded by a record that never encoded it. Deterministic, on
seeded random events with noise on: no false-failure probability to state."""
from __future__ import annotations

from schemas.proto import state_pb2
from schemas.rows import EventLevelSource
from tests.support.event_level_events import per_device, random_events
from transforms.core.device_state import DeviceRecord
from transforms.core.mechanisms.noise import SeededSource
from transforms.event_level.mechanisms.devices import EventLevelDevice, choose_randomized, event_order
from transforms.event_level.state import device_record_codec_for

EPSILON = 1.5  # low enough that some sources are randomized


def test_a_device_encoded_after_every_event_encodes_as_a_record_that_never_encoded_it():
    codec = device_record_codec_for(EPSILON, SeededSource(3))
    reencoded, sources_seen = 0, 0
    for device_id, rows in per_device(random_events(seed=8, devices=6, per_device=40)).items():
        record = DeviceRecord(EventLevelDevice(EPSILON, SeededSource(5)))
        for row in sorted(rows, key=event_order):
            sources = [(device_id, row)] if type(row) is EventLevelSource else []
            record.state.feed([row], choose_randomized(sources, EPSILON, SeededSource(7)))
            record.state.advance_to(row.event_time_micros)
            record.state.forget_expired()  # as a streaming replay does: the kept sources are renumbered
            record.cut = row.event_time_micros
            previous = record.rows  # the record's kept encodings, which the next encode uses
            kept = codec.encode(record)
            never = DeviceRecord(record.state)
            never.cut = record.cut
            assert kept == codec.encode(never), (device_id, row)
            assert record.rows is previous
            sources_seen += len(record.state.client.sources)
            reencoded += 1
        message = state_pb2.DeviceRecordState.FromString(kept)
        assert len(message.event_level_device.client_sources) == len(record.state.client.sources)
    assert reencoded == 240 and sources_seen > 1000  # the replays went on long enough to say something
