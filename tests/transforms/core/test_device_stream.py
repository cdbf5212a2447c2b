"""``transforms.core.device_stream``'s pending records: packed as a topic source packs a poll, read back as rows
whole or split at a firing's cut, and decoded on arrival (``_DecodedRecords``) into the same rows a firing would
decode itself. The device replays themselves are tested through the jobs (budgeting, event-level, summary-report
clients)."""
from schemas.proto import state_pb2
from schemas.rows import AttributionRequest, Conversion, Impression
from transforms.core.device_stream import _DecodedRecords, _rows_of, _split_rows, pack_events

IMPRESSIONS = [Impression(f"device-{index % 3}", 1_000 * index, f"impression-{index}", "news.example",
                          "shoes.example", "campaign", "product", ("key",)) for index in range(6)]
REQUEST = AttributionRequest(7, None, None, ("campaign",), "product", (), "last_touch", 1, 1, 0.5, 1.0, 1.0, "L1",
                             "purchases")
CONVERSIONS = [Conversion(f"device-{index % 2}", 1_000 * index + 500, f"conversion-{index}", "shoes.example",
                          "querier.example", 1.0, "product", REQUEST) for index in range(4)]


def _record(rows: list) -> tuple[bytes, state_pb2.DevicePendingEvents]:
    (_, _, data), = pack_events(type(rows[0]), [tuple(row) for row in rows])  # one shard, one hour: one record
    return data, state_pb2.DevicePendingEvents.FromString(data)


def test_a_packed_poll_reads_back_as_its_rows_and_splits_at_a_cut():
    _, record = _record(IMPRESSIONS)
    assert (record.earliest_micros, record.latest_micros) == (0, 5_000)
    rows = _rows_of(record)
    assert rows == IMPRESSIONS and all(type(row) is Impression for row in rows)
    before, after, span = _split_rows(rows, 3_500)
    assert before == IMPRESSIONS[:4]
    assert after == {"Impression": [tuple(row) for row in IMPRESSIONS[4:]]} and span == (4_000, 5_000)


def test_rows_decoded_on_arrival_are_the_rows_a_firing_decodes():
    decoded = _DecodedRecords(limit=100)
    impressions, conversions = _record(IMPRESSIONS), _record(CONVERSIONS)
    decoded.add(*impressions)
    decoded.add(*impressions)  # the same record again: held once
    held = decoded.take(*impressions)
    assert held == IMPRESSIONS and all(type(row) is Impression for row in held)
    assert decoded.take(*conversions) == CONVERSIONS  # never added: decoded by the firing that takes it
    again = decoded.take(*impressions)  # taken already: decoded again, the same rows
    assert again == held and again is not held


def test_records_beyond_the_limit_are_decoded_by_their_firing():
    decoded = _DecodedRecords(limit=len(IMPRESSIONS))
    impressions, conversions = _record(IMPRESSIONS), _record(CONVERSIONS)
    decoded.add(*impressions)
    decoded.add(*conversions)  # the limit is reached: not held
    assert decoded._rows.keys() == {impressions[0]}
    assert decoded.take(*conversions) == CONVERSIONS
    assert decoded.take(*impressions) == IMPRESSIONS
    decoded.add(*conversions)  # room again once a firing took what was held
    assert decoded._rows.keys() == {conversions[0]}
