"""``transforms/core/io.py``: ReadEvents over mixed formats (rows, dead letters, counters, fold) and the writers."""
from __future__ import annotations

import base64
import glob
import io
import json
import os
import pickle

import apache_beam as beam
import fastavro
import pytest
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.test_stream import TestStream
from apache_beam.testing.util import assert_that, equal_to

from pipelines.common import count_records, counters, distribution_max, read_records
from schemas.codecs import JOIN_EVENT, encode_delimited, row_to_dict
from schemas.formats import load_avro_schema
from schemas.proto import events_pb2
from schemas.rows import DeadLetter, JoinEvent, KAnonVerdict
from transforms.core.io import (
    DEAD_LETTER_PREFIX,
    METRICS_NAMESPACE,
    ReadEvents,
    WriteDeadLetters,
    WriteRecords,
)
from transforms.kanon.join_fold import GroupJoinsByGroup
from transforms.kanon.mechanisms.batch_replay import GroupJoins

HOUR = 3_600_000_000
T0 = 491_000 * HOUR  # an hour boundary in 2026

LOOSE_SCHEMA = {
    "type": "record",
    "name": "LooseJoin",
    "fields": [
        {"name": "interest_group", "type": "string"},
        {"name": "user_id", "type": ["null", "string"]},
        {"name": "event_time_micros", "type": ["long", "string"]},
    ],
}

# Good rows per file (g1 appears in two files, with a duplicate (user, hour) in the Avro one).
AVRO_GOOD = [JoinEvent("g1", "a", T0 + 5), JoinEvent("g1", "a", T0 + 60_000_000), JoinEvent("g2", "b", T0 + HOUR)]
JSONL_GOOD = [JoinEvent("g1", "c", T0 + 2 * HOUR), JoinEvent("g3", "d", T0 + 3 * HOUR + 7)]
PB_GOOD = [JoinEvent("g3", "d", T0 + 4 * HOUR), JoinEvent("g4", "e", T0 + 9 * HOUR)]  # the latest event time


def _write_inputs(directory) -> tuple[str, list[JoinEvent], list[DeadLetter]]:
    """Three files, each with good and bad records: (glob pattern, good rows, expected dead letters)."""
    avro_path = os.path.join(directory, "joins.avro")
    jsonl_path = os.path.join(directory, "joins.jsonl")
    pb_path = os.path.join(directory, "joins.pb")

    avro_bad = [
        {"interest_group": "g1", "user_id": None, "event_time_micros": T0},
        {"interest_group": "g2", "user_id": "b", "event_time_micros": str(T0)},
    ]
    avro_records = [row_to_dict(AVRO_GOOD[0]), avro_bad[0], row_to_dict(AVRO_GOOD[1]), avro_bad[1],
                    row_to_dict(AVRO_GOOD[2])]
    with open(avro_path, "wb") as handle:
        fastavro.writer(handle, fastavro.parse_schema(LOOSE_SCHEMA), avro_records)

    jsonl_bad = ['{"interest_group": "g1", "user_id": "c"', json.dumps({"interest_group": "g1", "user_id": "c",
                                                                       "event_time_micros": -HOUR})]
    jsonl_lines = [json.dumps(row_to_dict(JSONL_GOOD[0])), jsonl_bad[0], "", jsonl_bad[1],
                   json.dumps(row_to_dict(JSONL_GOOD[1]))]
    with open(jsonl_path, "w", encoding="utf-8") as handle:
        handle.write("\n".join(jsonl_lines) + "\n")

    garbage = b"\x04\x0a\x64zz"  # length 4, then a field claiming 100 bytes
    no_time = encode_delimited(events_pb2.JoinEvent(interest_group="g4", user_id="e"))
    parts = [encode_delimited(events_pb2.JoinEvent(**row_to_dict(PB_GOOD[0]))), garbage, no_time,
             encode_delimited(events_pb2.JoinEvent(**row_to_dict(PB_GOOD[1])))]
    with open(pb_path, "wb") as handle:
        handle.write(b"".join(parts))
    offset = lambda i: sum(len(p) for p in parts[:i])  # noqa: E731

    dead = [
        DeadLetter(json.dumps(avro_bad[0]), "missing_field:user_id", f"{avro_path}#1"),
        DeadLetter(json.dumps(avro_bad[1]), "wrong_type:event_time_micros", f"{avro_path}#3"),
        DeadLetter(jsonl_bad[0], "malformed_json", f"{jsonl_path}:2"),
        DeadLetter(jsonl_bad[1], "negative_timestamp:event_time_micros", f"{jsonl_path}:4"),
        DeadLetter(base64.b64encode(garbage[1:]).decode(), "malformed_protobuf", f"{pb_path}@{offset(1)}"),
        DeadLetter(base64.b64encode(no_time[1:]).decode(), "missing_field:event_time_micros", f"{pb_path}@{offset(2)}"),
    ]
    return os.path.join(directory, "joins.*"), AVRO_GOOD + JSONL_GOOD + PB_GOOD, dead


@pytest.fixture
def inputs(tmp_path):
    return _write_inputs(str(tmp_path))


def test_read_events_from_mixed_formats_and_counters_reconcile(inputs):
    """Rows and dead letters are exactly the expected ones; read == parsed + dead_lettered, per reason too."""
    pattern, good, dead = inputs
    pipeline = TestPipeline(runner="FnApiRunner")
    read = pipeline | ReadEvents(pattern, JOIN_EVENT)
    assert_that(read.events, equal_to(good), label="events")
    assert_that(read.dead_letters, equal_to(dead), label="dead_letters")
    result = pipeline.run()
    result.wait_until_finish()

    values = counters(result, METRICS_NAMESPACE)
    assert values["read"] == len(good) + len(dead) == 13
    assert values["parsed"] == len(good)
    assert values["dead_lettered"] == len(dead)
    assert values["read"] == values["parsed"] + values["dead_lettered"]
    by_reason = {name[len(DEAD_LETTER_PREFIX):]: n for name, n in values.items() if name.startswith(DEAD_LETTER_PREFIX)}
    assert sum(by_reason.values()) == values["dead_lettered"]
    expected_reasons: dict[str, int] = {}
    for letter in dead:
        expected_reasons[letter.reason] = expected_reasons.get(letter.reason, 0) + 1
    assert by_reason == expected_reasons

    # The same counters through Beam's own query API, and the latest event time.
    queried = result.metrics().query(MetricsFilter().with_namespace(METRICS_NAMESPACE))["counters"]
    assert {c.key.metric.name for c in queried} == set(values)
    assert distribution_max(result, METRICS_NAMESPACE, "event_time_micros") == max(r.event_time_micros for r in good)


def test_read_events_with_an_explicit_format(tmp_path):
    """With fmt given, files are decoded in that format whatever their extension."""
    path = tmp_path / "joins.data"
    path.write_text(json.dumps(row_to_dict(JSONL_GOOD[0])) + "\n{}\n")
    with TestPipeline(runner="FnApiRunner") as pipeline:
        read = pipeline | ReadEvents(str(path), JOIN_EVENT, "jsonl")
        assert_that(read.events, equal_to([JSONL_GOOD[0]]), label="events")
        assert_that(read.dead_letters, equal_to([DeadLetter("{}", "missing_field:interest_group", f"{path}:2")]),
                    label="dead")


def test_read_events_with_no_matching_file_fails(tmp_path):
    """An empty match is an error, not an empty input."""
    with pytest.raises(Exception, match="(?i)no files|match"), TestPipeline(runner="FnApiRunner") as pipeline:
        pipeline | ReadEvents(str(tmp_path / "nothing-*.jsonl"), JOIN_EVENT)


def _decoded(aggregate) -> tuple[str, tuple[tuple[int, str], ...]]:
    """(group, sorted distinct (hour step, user)) of a ``(group, GroupJoins.to_wire())`` aggregate."""
    group, wire = aggregate
    joins = GroupJoins.from_wire(wire)
    return group, tuple(sorted((int(step), joins.users[code]) for step, code in zip(joins.steps, joins.codes, strict=True)))


def _expected_aggregates(rows: list[JoinEvent]) -> list[tuple[str, tuple[tuple[int, str], ...]]]:
    pairs: dict[str, set[tuple[int, str]]] = {}
    for row in rows:
        pairs.setdefault(row.interest_group, set()).add((row.event_time_micros // HOUR, row.user_id))
    return [(group, tuple(sorted(p))) for group, p in pairs.items()]


def test_read_events_with_fold_gives_one_aggregate_per_group_and_file(inputs):
    """With fold=GroupJoinsByGroup, events are (group, wire) aggregates of each file's distinct (step, user) pairs."""
    pattern, _, dead = inputs
    expected = _expected_aggregates(AVRO_GOOD) + _expected_aggregates(JSONL_GOOD) + _expected_aggregates(PB_GOOD)
    pipeline = TestPipeline(runner="FnApiRunner")
    read = pipeline | ReadEvents(pattern, JOIN_EVENT, fold=GroupJoinsByGroup)
    assert_that(read.events | beam.Map(_decoded), equal_to(expected), label="aggregates")
    assert_that(read.dead_letters, equal_to(dead), label="dead_letters")
    result = pipeline.run()
    result.wait_until_finish()
    values = counters(result, METRICS_NAMESPACE)
    # Folding changes what is emitted, not what is counted.
    assert values["read"] == 13
    assert values["parsed"] == len(AVRO_GOOD + JSONL_GOOD + PB_GOOD)
    assert values["read"] == values["parsed"] + values["dead_lettered"]


def test_unencodable_string_does_not_crash_the_folded_read(tmp_path):
    """Bad input never crashes a pipeline: the line is dead-lettered and the good line is kept."""
    path = tmp_path / "joins.jsonl"
    path.write_text('{"interest_group": "g\\ud800", "user_id": "u", "event_time_micros": 1}\n'
                    + json.dumps(row_to_dict(JSONL_GOOD[0])) + "\n")
    with TestPipeline(runner="FnApiRunner") as pipeline:
        read = pipeline | ReadEvents(str(path), JOIN_EVENT, fold=GroupJoinsByGroup)
        assert_that(read.events | beam.Map(_decoded), equal_to(_expected_aggregates([JSONL_GOOD[0]])), label="events")
        assert_that(read.dead_letters | beam.Map(lambda d: d.source), equal_to([f"{path}:1"]), label="dead")


VERDICTS = [
    KAnonVerdict("g1", 491_000, 491_000 * HOUR, True, 490_896),
    KAnonVerdict("g1", 491_064, 491_064 * HOUR, False, 491_064),
    KAnonVerdict("https://dsp-3.example/ig/000042", 491_001, 491_001 * HOUR, True, 490_896),
]


@pytest.mark.parametrize("fmt", ["jsonl", "avro"])
def test_write_records_writes_one_shard_that_reads_back(tmp_path, fmt):
    """WriteRecords writes <prefix>-00000-of-00001.<fmt>; its records are the rows' dicts."""
    prefix = str(tmp_path / "out" / "verdicts")
    with TestPipeline(runner="FnApiRunner") as pipeline:
        _ = pipeline | beam.Create(VERDICTS) | WriteRecords(prefix, fmt, "kanon_verdict")
    files = sorted(glob.glob(prefix + "-*"))
    assert files == [f"{prefix}-00000-of-00001.{fmt}"]
    records = list(read_records(files[0]))
    assert sorted(KAnonVerdict(**r) for r in records) == sorted(VERDICTS)
    if fmt == "avro":
        with open(files[0], "rb") as handle:
            reader = fastavro.reader(handle)
            assert reader.writer_schema["name"] == "pmbeam.reports.KAnonVerdict"
            assert [f["name"] for f in reader.writer_schema["fields"]] == list(KAnonVerdict._fields)
    else:
        with open(files[0], encoding="utf-8") as handle:
            lines = [line for line in handle.read().splitlines() if line]
        assert all(list(json.loads(line)) == list(KAnonVerdict._fields) for line in lines)  # field order kept


@pytest.mark.parametrize("fmt", ["jsonl", "avro"])
def test_write_records_of_an_unbounded_input_writes_everything_at_the_drain(tmp_path, fmt):
    """A stream's rows, in several bundles and around a watermark step, end up in one shard written at the drain,
    each record once."""
    prefix = str(tmp_path / "verdicts")
    stream = (TestStream().add_elements(VERDICTS[:2]).advance_watermark_to(10).add_elements(VERDICTS[2:])
              .advance_watermark_to_infinity())
    with TestPipeline(options=PipelineOptions(["--streaming"])) as pipeline:
        _ = pipeline | stream | WriteRecords(prefix, fmt, "kanon_verdict")
    files = sorted(glob.glob(prefix + "-*"))
    assert files == [f"{prefix}-00000-of-00001.{fmt}"]
    assert sorted(KAnonVerdict(**r) for r in read_records(files[0])) == sorted(VERDICTS)


def test_write_records_with_several_shards(tmp_path):
    """num_shards fixes the number of files; together they hold every record once."""
    prefix = str(tmp_path / "verdicts")
    with TestPipeline(runner="FnApiRunner") as pipeline:
        _ = pipeline | beam.Create(VERDICTS) | WriteRecords(prefix, "jsonl", num_shards=2)
    files = sorted(glob.glob(prefix + "-*"))
    assert files == [f"{prefix}-0000{i}-of-00002.jsonl" for i in range(2)]
    assert sorted(KAnonVerdict(**r) for f in files for r in read_records(f)) == sorted(VERDICTS)


@pytest.mark.parametrize("fmt", ["jsonl", "avro"])
def test_count_records_counts_every_shard_without_decoding(tmp_path, fmt):
    """count_records gives as many records as reading the shards back, over all of them."""
    prefix = str(tmp_path / "verdicts")
    with TestPipeline(runner="FnApiRunner") as pipeline:
        _ = pipeline | beam.Create(VERDICTS * 3) | WriteRecords(prefix, fmt, "kanon_verdict", num_shards=2)
    assert count_records(str(tmp_path), "verdicts") == len(VERDICTS) * 3
    assert count_records(str(tmp_path), "nothing") == 0


def test_write_records_rejects_bad_options():
    """Only jsonl and avro; Avro needs a schema name."""
    with pytest.raises(ValueError, match="output format"):
        WriteRecords("/tmp/x", "csv")
    with pytest.raises(ValueError, match="Avro schema"):
        WriteRecords("/tmp/x", "avro")


def test_write_dead_letters_round_trips_read_dead_letters(inputs, tmp_path):
    """Dead letters from ReadEvents go to <dir>/dead_letters-00000-of-00001.jsonl as {raw, reason, source}."""
    pattern, _, dead = inputs
    out_dir = tmp_path / "out"
    with TestPipeline(runner="FnApiRunner") as pipeline:
        read = pipeline | ReadEvents(pattern, JOIN_EVENT)
        _ = read.dead_letters | WriteDeadLetters(str(out_dir) + "/")
    files = sorted(glob.glob(str(out_dir / "dead_letters-*")))
    assert files == [str(out_dir / "dead_letters-00000-of-00001.jsonl")]
    records = list(read_records(files[0]))
    assert all(list(r) == ["raw", "reason", "source"] for r in records)
    assert sorted(DeadLetter(**r) for r in records) == sorted(dead)


def test_write_dead_letters_writes_a_file_even_when_there_are_none(tmp_path):
    """An empty dead-letter output is still one (empty) shard, so every run has the same outputs."""
    with TestPipeline(runner="FnApiRunner") as pipeline:
        _ = pipeline | beam.Create([]).with_output_types(DeadLetter) | WriteDeadLetters(str(tmp_path))
    files = glob.glob(str(tmp_path / "dead_letters-*"))
    assert files == [str(tmp_path / "dead_letters-00000-of-00001.jsonl")]
    assert list(read_records(files[0])) == []


def test_avro_output_reads_back_with_the_codec_reader(tmp_path):
    """JoinEvents written by WriteRecords as Avro are read back by ReadEvents unchanged."""
    prefix = str(tmp_path / "joins")
    rows = AVRO_GOOD + JSONL_GOOD
    with TestPipeline(runner="FnApiRunner") as pipeline:
        _ = pipeline | beam.Create(rows) | WriteRecords(prefix, "avro", "join_event")
    with TestPipeline(runner="FnApiRunner") as pipeline:
        read = pipeline | ReadEvents(prefix + "-*.avro", JOIN_EVENT)
        assert_that(read.events, equal_to(rows), label="events")
        assert_that(read.dead_letters, equal_to([]), label="dead")
    schema = load_avro_schema("join_event")
    with open(glob.glob(prefix + "-*.avro")[0], "rb") as handle:
        assert fastavro.reader(io.BytesIO(handle.read()), reader_schema=schema).writer_schema["name"] == schema["name"]


def test_a_live_runs_spilled_chunks_are_read_back_in_order_and_removed_after_the_run(tmp_path):
    """The local streaming file sink's spill (``spill_directory``): emptied as a run starts (``start_spills``),
    chunks read back in the order they came, gone after the run."""
    from transforms.core import io

    prefix = str(tmp_path / "reports")
    left = tmp_path / "reports.spill"
    left.mkdir()
    (left / "00000000000000000001-old-0.chunk").write_bytes(b"from an earlier job\n")
    directory = io.spill_directory(prefix)
    assert directory == str(left) and left.exists()  # not at build: the run may resume a durable job
    io.start_spills(keep=False)
    assert not left.exists()
    left.mkdir()  # as the sink's DoFn does in its setup
    chunks = [f'{{"n": {n}}}\n'.encode() for n in range(30)]
    for chunk in chunks:
        io._spill(directory, chunk)
    assert list(io._spilled(directory, "jsonl")) == chunks
    io._write_chunks(f"{prefix}-00000-of-00001.jsonl", io._spilled(directory, "jsonl"), "jsonl", None)
    assert (tmp_path / "reports-00000-of-00001.jsonl").read_bytes() == b"".join(chunks)
    io.remove_spills()
    assert not left.exists() and sorted(path.name for path in tmp_path.iterdir()) == ["reports-00000-of-00001.jsonl"]


@pytest.mark.parametrize("fmt", ["jsonl", "avro"])
def test_a_restarted_jobs_spill_keeps_what_its_crashed_run_spilled_once(tmp_path, fmt):
    """A durable job restarted after a crash keeps its spill (``start_spills(keep=True)``): the records its crashed
    run spilled and its restart emits again (its release log's entries not yet dropped) are written once, in the
    order they first came (every record of these outputs is distinct: a report has its id, a dead letter its
    message's place); a spill of one run is read as it is."""
    from transforms.core import io

    def chunk(*numbers: int) -> bytes:
        records = [{"n": n} for n in numbers]
        return io._chunk_of(records, fmt)

    def records(data: bytes) -> list:
        return pickle.loads(data) if fmt == "avro" else [json.loads(line) for line in data.splitlines()]

    directory = io.spill_directory(str(tmp_path / "reports"))
    io.start_spills(keep=False)
    os.makedirs(directory)  # as the sink's DoFn does in its setup
    io._spill(directory, chunk(1, 2))
    io._spill(directory, chunk(3, 3))
    assert [record for data in io._spilled(directory, fmt) for record in records(data)] == \
        [{"n": n} for n in (1, 2, 3, 3)]  # one run: nothing is dropped
    io.forget_spills()  # the run failed

    directory = io.spill_directory(str(tmp_path / "reports"))
    io.start_spills(keep=True)
    io._spill(directory, chunk(2, 3, 4))  # the restart's release log again, then what follows
    io._spill(directory, chunk(5))
    assert [record for data in io._spilled(directory, fmt) for record in records(data)] == \
        [{"n": n} for n in (1, 2, 3, 4, 5)]
    io.remove_spills()
