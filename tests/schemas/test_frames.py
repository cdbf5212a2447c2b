"""The columnar Avro path for event-level sources gives every record the row path's fate (the same row, or the
same dead letter at the same position), refuses files it cannot read exactly, and frames round-trip."""
from __future__ import annotations

import io

import fastavro

from schemas.codecs import EVENT_LEVEL_SOURCE, avro_record, read_avro
from schemas.formats import load_avro_schema
from schemas.frames import (
    EVENT_LEVEL_SOURCE_COLUMNS,
    POSITION,
    frame_bytes,
    frame_of_bytes,
    read_frame,
    source_rows,
    sources_frame,
    split_event_level_sources,
)
from schemas.rows import TriggerSpec
from synthetic.event_level import generate_event_level
from tests.support.event_level_events import record_of, source


def columnar(path: str) -> list:
    """Every record of the file as the columnar path judges it, in file order."""
    with open(path, "rb") as handle:
        split = split_event_level_sources(read_frame(handle, EVENT_LEVEL_SOURCE_COLUMNS))
    items = dict(zip(split.rows[POSITION].to_list(), source_rows(split.rows), strict=True))
    items.update((position, avro_record(EVENT_LEVEL_SOURCE, record, path, position)) for position, record in split.others)
    return [items[position] for position in range(len(items))]


def row_path(path: str) -> list:
    with open(path, "rb") as handle:
        return list(read_avro(EVENT_LEVEL_SOURCE, handle, path))


def test_generated_files_with_bad_records_are_judged_as_on_the_row_path(tmp_path):
    generate_event_level(tmp_path, sources=3_000, seed=4, bad_fraction=0.05, progress=False)
    path = str(tmp_path / "sources-00000-of-00001.avro")
    judged = row_path(path)
    assert columnar(path) == judged
    assert sum(type(item).__name__ == "DeadLetter" for item in judged) > 50  # bad records were there
    assert any(item.trigger_specs for item in judged if hasattr(item, "trigger_specs"))  # and custom specs


def _write(path, records, codec="null", schema=None) -> str:
    with open(path, "wb") as handle:
        fastavro.writer(handle, schema or load_avro_schema("event_level_source"), records, codec=codec)
    return str(path)


def test_identifiers_the_vectorised_test_does_not_clear_go_to_the_row_path(tmp_path):
    good = record_of(source("d", 0, "s", filters=("a",)))
    odd = [
        {**good, "device_id": "d\tevice"},  # a tab: accepted by the row path
        {**good, "source_id": " "},  # blank: refused
        {**good, "reporting_origin": "h\u00e9"},  # not ASCII: refused
        {**good, "filter_data": ["a", ""]},  # a blank filter: refused
        {**good, "filter_data": ["\x1f"]},  # a control character
        {**good, "trigger_data_matching": "\u00e9xact"},
        {**good, "event_time_micros": -1},
        {**good, "trigger_specs": []},  # the defaults
        {**good, "trigger_specs": [{"trigger_data": [1, 2], "window_ends_seconds": [], "summary_buckets": [3]}]},
        {**good, "expiry_seconds": None, "priority": None, "filter_data": []},
        good,
    ]
    path = _write(tmp_path / "odd.avro", odd)
    with open(path, "rb") as handle:
        split = split_event_level_sources(read_frame(handle, EVENT_LEVEL_SOURCE_COLUMNS))
    assert sorted(position for position, _ in split.others) == [0, 1, 2, 3, 4, 5, 6]
    assert columnar(path) == row_path(path)


def _frame_of_file(path: str):
    with open(path, "rb") as handle:
        return read_frame(handle, EVENT_LEVEL_SOURCE_COLUMNS)


def test_files_the_columnar_path_cannot_read_exactly_are_left_to_the_row_path(tmp_path):
    records = [record_of(source("d", 0, "s"))]
    assert _frame_of_file(_write(tmp_path / "ok.avro", records, codec="deflate")) is not None
    assert _frame_of_file(_write(tmp_path / "bz.avro", records, codec="bzip2")) is None
    other = load_avro_schema("event_level_source")
    other = {**other, "fields": [field if field["name"] != "priority" else {"name": "priority", "type": "string"}
                                 for field in other["fields"]]}
    wrong = _write(tmp_path / "wrong.avro", [{**records[0], "priority": "0"}], schema=fastavro.parse_schema(other))
    assert _frame_of_file(wrong) is None
    assert read_frame(io.BytesIO(b"Obj\x01 not really avro"), EVENT_LEVEL_SOURCE_COLUMNS) is None


def test_source_frames_round_trip():
    specs = (TriggerSpec((3, 9), (86_400,), (2, 5)), TriggerSpec((4,), (), ()))
    rows = [source("d1", 0, "a", filters=("x", "y")), source("d2", 1, "b", "event", max_reports=2, matching="exact",
                                                             specs=specs, priority=-4)]
    frame = sources_frame(rows)
    assert source_rows(frame) == rows
    assert source_rows(frame_of_bytes(frame_bytes(frame))) == rows
