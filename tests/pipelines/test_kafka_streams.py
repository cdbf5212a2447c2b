"""Kafka topics in and out, against a real broker (``tests.support.kafka``): the k-anonymity job reads joins from a
topic and releases the same verdicts as from files, deduplicates what the bus delivers twice, sends its verdicts
and dead letters to topics with keys and stable ids, commits its offsets only after a released run, and drains on
SIGTERM; the source dead-letters late records and duplicates by the record's own id."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from apache_beam.coders import PickleCoder

from pipelines import generate, kanon
from pipelines.common import read_records
from schemas.codecs import JOIN_EVENT, row_to_dict
from schemas.rows import JoinEvent
from tests.support import crash
from tests.support.files import read_rows
from tests.support.kafka import consume_all, fresh_topic, produce
from transforms.core.bus.endpoints import parse_endpoint
from transforms.core.bus.kafka_stream import KafkaTopicReader, TopicInput

ROOT = Path(__file__).resolve().parents[2]
HOUR = 3_600_000_000
DATASET = ["--groups", "200", "--joins", "12000", "--days", "10", "--seed", "21", "--format", "jsonl", "--quiet"]


@pytest.fixture(scope="module")
def joins(tmp_path_factory) -> tuple[Path, list[JoinEvent]]:
    directory = tmp_path_factory.mktemp("joins")
    assert generate.main(["kanon", "--output", str(directory), *DATASET]) == 0
    rows, dead = read_rows(sorted(directory.glob("joins-*")), JOIN_EVENT)
    assert not dead
    return directory, rows


@pytest.fixture(scope="module")
def batch_verdicts(joins, tmp_path_factory) -> list[str]:
    directory, _ = joins
    output = tmp_path_factory.mktemp("batch")
    assert kanon.main(["--input", str(directory / "joins-*"), "--output", str(output), "--seed", "3",
                       "--runner=FnApiRunner"]) == 0
    return _verdict_lines(output)


def _verdict_lines(output: Path) -> list[str]:
    return sorted(line for path in output.glob("verdicts-*") for line in path.read_text().splitlines())


def _messages(rows) -> list[bytes]:
    return [json.dumps(row_to_dict(row)).encode() for row in rows]


def test_joins_from_a_topic_give_the_batch_verdicts_once_each_despite_duplicates(kafka_broker, joins, batch_verdicts,
                                                                                  tmp_path, capsys):
    _, rows = joins
    topic, verdict_topic, dead_topic = fresh_topic("joins"), fresh_topic("verdicts"), fresh_topic("dead")
    values = _messages(rows)
    # at-least-once delivery: every 20th message sent twice, right after itself; and three broken messages
    sent = []
    for index, value in enumerate(values):
        sent.append(value)
        if index % 20 == 0:
            sent.append(value)
    sent += [b"{broken", b"[]", json.dumps({**row_to_dict(rows[0]), "user_id": 5}).encode()]
    produce(kafka_broker.address, topic, sent)
    output = tmp_path / "out"
    arguments = ["--input", f"kafka://{kafka_broker.address}/{topic}?stop=end&group=kanon-test", "--output",
                 str(output), "--seed", "3", "--output-topic", f"kafka://{kafka_broker.address}/{verdict_topic}",
                 "--dead-letter-topic", f"kafka://{kafka_broker.address}/{dead_topic}"]
    assert kanon.main(arguments) == 0
    summary = json.loads((output / "summary.json").read_text())
    duplicates = len(range(0, len(values), 20))
    counts = summary["counts"]
    assert summary["status"] == "ok" and summary["parameters"]["streaming"]
    assert counts["read"] == len(sent) and counts["parsed"] == len(values)
    assert counts["dead_lettered_by_reason"] == {"duplicate": duplicates, "malformed_json": 1, "not_an_object": 1,
                                                 "wrong_type:user_id": 1}
    # the same verdicts as the batch job on the files, each once
    assert _verdict_lines(output) == batch_verdicts
    # and on the output topic: key = the group, header id = group/step, value = the verdict
    messages = consume_all(kafka_broker.address, verdict_topic, expected=len(batch_verdicts))
    assert sorted(json.dumps(json.loads(m.value())) for m in messages) == sorted(
        json.dumps(json.loads(line)) for line in batch_verdicts)
    for message in messages:
        verdict = json.loads(message.value())
        assert message.key().decode() == verdict["interest_group"]
        assert dict(message.headers())["id"].decode() == f"{verdict['interest_group']}/{verdict['step']}"
    dead = consume_all(kafka_broker.address, dead_topic, expected=counts["dead_lettered"])
    assert sorted(json.loads(m.value())["reason"] for m in dead) == sorted(
        reason for reason, n in counts["dead_lettered_by_reason"].items() for _ in range(n))
    capsys.readouterr()
    # the job was drained: its state is final, and a run of the same job is refused
    assert kanon.main([*arguments[:1], arguments[1], "--output", str(tmp_path / "again"), "--seed", "3"]) == 1
    assert "was drained" in capsys.readouterr().err
    # the offsets were committed with the released run: a new job of the same group finds nothing new, and fails
    assert kanon.main([*arguments[:1], arguments[1], "--output", str(tmp_path / "again"), "--seed", "3",
                       "--job-id", "the-next-job"]) == 1
    assert "no records" in capsys.readouterr().err


def _one_partition_topic(address: str, prefix: str) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = fresh_topic(prefix)
    admin = AdminClient({"bootstrap.servers": address})  # kept until the future is done
    for future in admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)]).values():
        future.result(timeout=30)
    return topic


def _poll_until(reader: KafkaTopicReader, rows_wanted: int, dead_wanted: int) -> tuple[list, list]:
    rows, dead = [], []
    deadline = time.monotonic() + 30
    while (len(rows) < rows_wanted or len(dead) < dead_wanted) and time.monotonic() < deadline:
        got, lost = reader.poll()
        rows += got
        dead += lost
    return rows, dead


def test_the_source_orders_by_event_time_and_dead_letters_late_records_and_duplicates(kafka_broker):
    topic = _one_partition_topic(kafka_broker.address, "order")
    source = TopicInput("joins", parse_endpoint(f"kafka://{kafka_broker.address}/{topic}"), JOIN_EVENT, "jsonl",
                        lateness_micros=HOUR, group="order-test")
    reader = KafkaTopicReader(source)
    try:
        start = 491_000 * HOUR
        first = [JoinEvent("g", f"u{i}", start + i * HOUR // 4) for i in range(40)]  # 10 hours, in order
        first[10], first[11] = first[11], first[10]  # out of order within the allowed lateness: accepted
        produce(kafka_broker.address, topic, _messages(first))
        rows, dead = _poll_until(reader, len(first), 0)
        assert sorted(rows, key=lambda join: join.user_id) == sorted(first, key=lambda join: join.user_id) and not dead
        watermark = reader.watermark_micros
        assert watermark == max(join.event_time_micros for join in first)  # the latest event time read
        within = JoinEvent("g", "in-time", watermark - HOUR + 1)  # behind the watermark, within the lateness
        late = JoinEvent("g", "late", watermark - HOUR - 1)  # more than the allowed lateness behind it
        produce(kafka_broker.address, topic, _messages([within, late, first[-1], within]))
        rows, dead = _poll_until(reader, 1, 3)
        assert rows == [within]
        assert sorted(letter.reason for letter in dead) == ["duplicate", "duplicate", "late"]
        assert all(letter.source.startswith(f"kafka://{kafka_broker.address}/{topic}/0@") for letter in dead)
        assert reader.at_end()
        [report] = reader.reports()
        assert (report.read, report.parsed, report.dead_lettered) == (44, 41, 3)
    finally:
        reader.close()


def test_a_backlog_is_sent_in_full_polls_whose_watermark_waits(kafka_broker, monkeypatch):
    """Reading a backlog (every poll full), the stream the runner reads (over gRPC, as Beam's TestStream does)
    carries every record, but moves the input's watermark only at the end (well within the 5 s it may wait): the
    stateful steps then take the backlog in one firing instead of one per poll."""
    import grpc
    from apache_beam.portability.api import beam_runner_api_pb2, beam_runner_api_pb2_grpc

    from transforms.core.bus import kafka_stream

    monkeypatch.setattr(kafka_stream, "_POLL_MESSAGES", 100)
    topic = _one_partition_topic(kafka_broker.address, "backlog")
    start = 491_000 * HOUR
    joins = [JoinEvent("g", f"u{i}", start + i * HOUR // 100) for i in range(1000)]
    produce(kafka_broker.address, topic, _messages(joins))
    source = TopicInput("joins", parse_endpoint(f"kafka://{kafka_broker.address}/{topic}?stop=end"), JOIN_EVENT,
                        "jsonl", lateness_micros=HOUR, group="backlog-test")
    service = kafka_stream.KafkaStreamService([source]).start()
    try:
        with grpc.insecure_channel(service.endpoint) as channel:
            stub = beam_runner_api_pb2_grpc.TestStreamServiceStub(channel)
            events = list(stub.Events(beam_runner_api_pb2.EventsRequest(output_ids=service.tags)))
    finally:
        service.close()
    kinds = [(event.WhichOneof("event"), event) for event in events]
    batches = [event.element_event for kind, event in kinds if kind == "element_event"
               and event.element_event.tag == "joins"]
    rows = [row for batch in batches for element in batch.elements
            for row in PickleCoder().decode(element.encoded_element).rows]
    assert sorted(row[1] for row in rows) == sorted(join.user_id for join in joins)
    assert len([batch for batch in batches if batch.elements]) >= 10  # full polls of 100, sent as they came
    watermarks = [index for index, (kind, event) in enumerate(kinds)
                  if kind == "watermark_event" and event.watermark_event.tag == "joins"]
    last_rows = max(index for index, (kind, event) in enumerate(kinds) if kind == "element_event"
                    and event.element_event.tag == "joins" and PickleCoder().decode(
                        event.element_event.elements[0].encoded_element).rows)
    assert watermarks and min(watermarks) > last_rows  # no watermark between the full polls


def test_sigterm_drains_commits_and_exits_0_with_the_verdicts(kafka_broker, joins, batch_verdicts, tmp_path):
    _, rows = joins
    topic = fresh_topic("drain")
    produce(kafka_broker.address, topic, _messages(rows))
    output = tmp_path / "out"
    command = [sys.executable, "-m", "pipelines.kanon", "--input",
               f"kafka://{kafka_broker.address}/{topic}?group=drain-test", "--output", str(output), "--seed", "3",
               "--progress-seconds", "0.5"]
    job = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    try:
        assert job.stdout is not None
        for line in job.stdout:  # run until every join was read, as the progress line says
            lines.append(line)
            if line.startswith("progress:") and f"read {len(rows):,} " in line:
                break
        job.send_signal(signal.SIGTERM)
        rest, _ = job.communicate(timeout=120)
    finally:
        if job.poll() is None:
            job.kill()
    printed = "".join(lines) + rest
    assert job.returncode == 0, printed
    assert "SIGTERM: draining" in printed
    assert _verdict_lines(output) == batch_verdicts
    assert json.loads((output / "summary.json").read_text())["counts"]["read"] == len(rows)
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": kafka_broker.address, "group.id": "drain-test"})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        committed = consumer.committed([TopicPartition(topic, p) for p in partitions], timeout=10)
        assert sum(max(p.offset, 0) for p in committed) == len(rows)
    finally:
        consumer.close()


def test_measurement_from_two_topics_writes_the_batch_outputs(kafka_broker, tmp_path, capsys):
    from pipelines import measurement
    from tests.support.measurement_data import random_population, write_jsonl

    impressions, conversions = random_population(seed=11)
    files = write_jsonl(tmp_path / "i.jsonl", impressions), write_jsonl(tmp_path / "c.jsonl", conversions)
    options = ("--policy", "cookie_monster", "--batch-size", "3", "--seed", "5", "--emit-budgets")
    assert measurement.main(["--impressions", files[0], "--conversions", files[1], "--output", str(tmp_path / "batch"),
                             *options]) == 0
    topics = fresh_topic("impressions"), fresh_topic("conversions")
    for topic, rows in zip(topics, (impressions, conversions), strict=True):
        produce(kafka_broker.address, topic, _messages(sorted(rows, key=lambda row: row.event_time_micros)))
    results = fresh_topic("results")
    status = measurement.main([
        "--impressions", f"kafka://{kafka_broker.address}/{topics[0]}?stop=end",
        "--conversions", f"kafka://{kafka_broker.address}/{topics[1]}?stop=end",
        "--output", str(tmp_path / "topics"), "--output-topic", f"kafka://{kafka_broker.address}/{results}",
        *options])
    assert status == 0, capsys.readouterr()
    # every device's reports and budgets are the batch job's (the device replay follows event time exactly)
    for prefix in ("reports", "SENSITIVE_device_epoch_budgets"):
        assert _lines(tmp_path / "batch", prefix) == _lines(tmp_path / "topics", prefix), prefix
    # the batches have the batch job's shape; which reports share a batch follows the order in which the local
    # runner releases them as the watermark advances (the file replay advances it once, at the end)
    def shape(output: Path) -> list[tuple]:
        return sorted((r["query_key"], r["batch_index"], r["report_count"])
                      for r in map(json.loads, _lines(output, "query_results")))

    assert shape(tmp_path / "batch") == shape(tmp_path / "topics") != []
    expected = _lines(tmp_path / "topics", "query_results")
    messages = consume_all(kafka_broker.address, results, expected=len(expected))
    assert sorted(json.dumps(json.loads(m.value()), sort_keys=True) for m in messages) == sorted(
        json.dumps(json.loads(line), sort_keys=True) for line in expected)
    for message in messages:
        result = json.loads(message.value())
        assert message.key().decode() == result["querier_site"]
        assert dict(message.headers())["id"].decode() == f"{result['querier_site']}/{result['query_key']}/{result['batch_index']}"


def _lines(output: Path, prefix: str) -> list[str]:
    return sorted(line for path in output.glob(f"{prefix}-*") for line in path.read_text().splitlines() if line.strip())


def test_files_and_topics_cannot_be_mixed(kafka_broker, tmp_path, capsys):
    from pipelines import measurement

    status = measurement.main(["--impressions", f"kafka://{kafka_broker.address}/x", "--conversions",
                               str(tmp_path / "c.jsonl"), "--output", str(tmp_path / "out")])
    assert status == 2 and "all from topics or all from files" in capsys.readouterr().err


def test_a_source_that_cannot_join_its_topic_fails_the_run_in_one_line(kafka_broker, tmp_path, capsys):
    """The consumer runs in a child process (``stream_process``): what stops it there reaches the user as one
    line."""
    topic = fresh_topic("never-committed")
    produce(kafka_broker.address, topic, [b"{}"])
    status = kanon.main(["--input", f"kafka://{kafka_broker.address}/{topic}?start=committed&group=fresh",
                         "--output", str(tmp_path / "out")])
    error = capsys.readouterr().err
    assert status == 2, error
    assert "cannot read the input topics" in error and "has no committed offset" in error
    assert "Traceback" not in error


def test_other_runners_build_beams_own_transforms_and_say_what_to_start(tmp_path, capsys):
    """kafka:// on a portable runner goes through Beam's Java KafkaIO: without an expansion service (none can be
    downloaded here) the run is a one-line error that says what to start; Pub/Sub builds Beam's native read."""
    import apache_beam as beam

    base = ["--output", str(tmp_path / "out"), "--runner", "PortableRunner"]
    assert kanon.main(["--input", "kafka://127.0.0.1:9/joins", *base]) == 2
    error = capsys.readouterr().err.strip()
    assert "--expansion-service" in error and "org.apache.beam.sdk.expansion.service.ExpansionService" in error
    assert len(error.splitlines()) == 1
    from pipelines.processes import free_port

    unused = f"127.0.0.1:{free_port()}"
    assert kanon.main(["--input", "kafka://127.0.0.1:9/joins", *base, "--expansion-service", unused]) == 2
    error = capsys.readouterr().err.strip()
    assert f"expansion service at {unused} did not answer" in error and len(error.splitlines()) == 1

    from apache_beam.options.pipeline_options import PipelineOptions

    from pipelines import topics
    from pipelines.options.run import RunOptions

    options = RunOptions(str(tmp_path), None, None, True, 3600, 1, timestamp_attribute="ts", id_attribute="id")
    pipeline = beam.Pipeline(options=PipelineOptions(["--runner", "PortableRunner", "--streaming"]))
    read = topics.read_topics(pipeline, [topics.topic_input(
        "joins", "pubsub://projects/my-project/subscriptions/joins", JOIN_EVENT, options, "kanon")], options)
    topics.write_topic(read["joins"], "pubsub://projects/my-project/topics/out", options, lambda row: b"",
                       lambda row: "k", lambda row: "i", "Send")
    urns = {t.spec.urn for t in pipeline.to_runner_api().components.transforms.values()}
    assert "beam:transform:pubsub_read:v1" in urns


def test_a_broker_restart_in_the_middle_of_a_run_loses_nothing_the_broker_kept(joins, tmp_path):
    """The job keeps running while its broker stops and a new one starts on the same address. tansu keeps its log
    in memory, so the restarted broker is given the log a durable broker would have kept (the first half again,
    keyed by group: the same partitions, the same offsets) and then the second half. The consumer reconnects,
    resumes at its position, reads the second half once, and the verdicts are the batch job's on all the joins.

    The allowed lateness spans the data: after the restart the first fetch answer may hold records of some
    partitions only, while the others' last known ends are the old broker's, and a partition read to its end does
    not hold the watermark back; the watermark may then pass records still on their way (late by design, not
    lost), which is not what this test is about."""
    from pipelines.local_broker import LocalBroker

    _, rows = joins
    ordered = sorted(rows, key=lambda join: join.event_time_micros)
    half = len(ordered) // 2
    first, second = ordered[:half], ordered[half:]
    directory = tmp_path / "files"
    directory.mkdir()
    (directory / "joins.jsonl").write_bytes(b"\n".join(_messages(ordered)) + b"\n")
    assert kanon.main(["--input", str(directory / "joins.jsonl"), "--output", str(tmp_path / "batch"), "--seed", "3",
                       "--runner=FnApiRunner"]) == 0
    broker = LocalBroker().start()
    job = None
    def keys(part):
        return [join.interest_group.encode() for join in part]

    try:
        produce(broker.address, "joins", _messages(first), keys(first))
        job = subprocess.Popen([sys.executable, "-m", "pipelines.kanon", "--input", f"kafka://{broker.address}/joins",
                                "--output", str(tmp_path / "out"), "--seed", "3", "--progress-seconds", "0.5",
                                "--allowed-lateness-seconds", str(365 * 86_400)],
                               cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert job.stdout is not None
        _wait_for_progress(job.stdout, len(first))
        broker.stop()
        broker = LocalBroker(broker.port).start()  # a new broker, same address
        produce(broker.address, "joins", _messages(first), keys(first))  # the log a durable broker keeps
        produce(broker.address, "joins", _messages(second), keys(second))
        _wait_for_progress(job.stdout, len(rows))
        job.send_signal(signal.SIGTERM)
        rest, _ = job.communicate(timeout=120)
        assert job.returncode == 0, rest
    finally:
        if job is not None and job.poll() is None:
            job.kill()
        broker.stop()
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["counts"]["read"] == len(rows) and summary["counts"]["dead_lettered"] == 0, summary["counts"]
    assert _verdict_lines(tmp_path / "out") == _verdict_lines(tmp_path / "batch")


def test_a_source_process_that_dies_fails_the_run_and_releases_nothing(kafka_broker, joins, tmp_path):
    """The topic source's process (``stream_process``) killed in the middle of a live run: the runner's stream
    ends, the run fails in one line, nothing is published and no offset is committed."""
    _, rows = joins
    topic = fresh_topic("source-dies")
    produce(kafka_broker.address, topic, _messages(rows[:500]))
    output = tmp_path / "out"
    job = subprocess.Popen([sys.executable, "-m", "pipelines.kanon", "--input",
                            f"kafka://{kafka_broker.address}/{topic}?group=dies", "--output", str(output),
                            "--progress-seconds", "0.5"],
                           cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert job.stdout is not None
        _wait_for_progress(job.stdout, 500)
        found = subprocess.run(["pgrep", "-P", str(job.pid), "-f", "transforms.core.bus.stream_process"],
                               capture_output=True, text=True)
        [source] = found.stdout.split()
        os.kill(int(source), signal.SIGKILL)
        rest, _ = job.communicate(timeout=120)
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode == 1, rest
    assert "error: reading the input topics failed: the topic source exited with code -9" in rest
    assert "nothing was released or committed" in rest
    assert not list(output.glob("verdicts-*"))
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": kafka_broker.address, "group.id": "dies"})
    try:
        [committed] = consumer.committed([TopicPartition(topic, 0)], timeout=15)
    finally:
        consumer.close()
    assert committed.offset < 0  # nothing committed


def _wait_for_progress(lines, read: int, seconds: float = 90) -> None:
    """Read the job's output until a progress line says it has read ``read`` records."""
    deadline = time.monotonic() + seconds
    for line in lines:
        if line.startswith("progress:") and f"read {read:,} " in line:
            return
        assert time.monotonic() < deadline, f"the job did not read {read} records in {seconds} s"
    raise AssertionError("the job ended before reading everything")


def _produce_lines(address: str, topic: str, paths) -> None:
    """Send the records of JSON Lines files (their wire form) to ``topic``, in event-time order."""
    records = [json.loads(line) for path in paths for line in Path(path).read_text().splitlines() if line.strip()]
    records.sort(key=lambda record: record["event_time_micros"])
    produce(address, topic, [json.dumps(record).encode() for record in records])


def test_ara_clients_from_topics_send_the_batch_reports_to_a_topic(kafka_broker, tmp_path, capsys):
    import fastavro

    from pipelines import summary_client
    from schemas.messages import _parsed_schema
    from synthetic.ara import generate_ara

    data = tmp_path / "ara"
    generate_ara(data, devices=20, days=6, impressions_per_day=4, seed=2, fmt="jsonl", bad_fraction=0.0,
                 progress=False)
    assert summary_client.main(["ara", "--sources", str(data / "sources-*"), "--triggers", str(data / "triggers-*"),
                                "--output", str(tmp_path / "batch"), "--seed", "7"]) == 0
    topics = fresh_topic("sources"), fresh_topic("triggers")
    for topic, prefix in ((topics[0], "sources"), (topics[1], "triggers")):
        _produce_lines(kafka_broker.address, topic, sorted(data.glob(f"{prefix}-*")))
    reports_topic = fresh_topic("reports")
    assert summary_client.main([
        "ara", "--sources", f"kafka://{kafka_broker.address}/{topics[0]}?stop=end",
        "--triggers", f"kafka://{kafka_broker.address}/{topics[1]}?stop=end", "--output", str(tmp_path / "topics"),
        "--seed", "7", "--allowed-lateness-seconds", "3600",
        "--output-topic", f"kafka://{kafka_broker.address}/{reports_topic}"]) == 0, capsys.readouterr()

    def reports(output: Path) -> list:
        return sorted((r["shared_info"], r["payload"]) for path in output.glob("reports-*.avro")
                      for r in read_records(str(path)))

    expected = reports(tmp_path / "batch")
    assert reports(tmp_path / "topics") == expected != []
    schema, header = _parsed_schema("aggregatable_report")
    sent = []
    for message in consume_all(kafka_broker.address, reports_topic, expected=len(expected)):
        import io

        assert message.value().startswith(header)
        record = fastavro.schemaless_reader(io.BytesIO(message.value()[len(header):]), schema, None)
        info = json.loads(record["shared_info"])
        assert message.key().decode() == info["reporting_origin"]
        assert dict(message.headers())["id"].decode() == info["report_id"]
        sent.append((record["shared_info"], record["payload"]))
    assert sorted(sent) == expected


def test_event_level_reports_from_topics_equal_the_file_replay(kafka_broker, tmp_path, capsys):
    from pipelines import event_level
    from tests.support.event_level_events import hand_built, random_events, split, write_jsonl

    sources, triggers = split(hand_built() + random_events(seed=2))
    files = write_jsonl(tmp_path / "sources.jsonl", sources), write_jsonl(tmp_path / "triggers.jsonl", triggers)
    options = ["--seed", "5", "--epsilon", "14", "--allowed-lateness-seconds", "60", "--output-format", "jsonl"]
    assert event_level.main(["--sources", files[0], "--triggers", files[1], "--output", str(tmp_path / "files"),
                             "--streaming", *options]) == 0
    topics = fresh_topic("el-sources"), fresh_topic("el-triggers")
    for topic, path in zip(topics, files, strict=True):
        _produce_lines(kafka_broker.address, topic, [path])
    assert event_level.main(["--sources", f"kafka://{kafka_broker.address}/{topics[0]}?stop=end",
                             "--triggers", f"kafka://{kafka_broker.address}/{topics[1]}?stop=end",
                             "--output", str(tmp_path / "topics"), *options]) == 0, capsys.readouterr()
    assert _lines(tmp_path / "topics", "reports") == _lines(tmp_path / "files", "reports") != []
    # the job's state (the conftest's store) at the end: every device is final, none is kept, though devices here
    # would not be new ones again (they count the sources they registered)
    assert crash.snapshots(tmp_path / "state.sqlite") >= 1 and crash.keyed(tmp_path / "state.sqlite") == 0


def test_reports_through_a_topic_and_the_collector_give_the_same_summary_report(kafka_broker, tmp_path, capsys):
    """producer -> summary client -> topic -> collector -> aggregate -> summary report: the collector writes every
    report once into the service's layout (one folder per reporting origin and hour, a manifest), and the
    Aggregation Service releases from it what it releases from the client's own files (the same seed)."""
    import fastavro

    from pipelines import aggregate, collect_reports, summary_client
    from synthetic.ara import generate_ara

    start, day = 1_704_067_200, 86_400
    events = tmp_path / "events"
    generate_ara(events, devices=300, days=6, seed=3, progress=False)
    reports_topic = fresh_topic("ara-reports")
    assert summary_client.main(["ara", "--sources", str(events / "sources-*"), "--triggers", str(events / "triggers-*"),
                                "--output", str(tmp_path / "client"), "--seed", "1",
                                "--output-topic", f"kafka://{kafka_broker.address}/{reports_topic}"]) == 0
    client_reports = json.loads((tmp_path / "client" / "summary.json").read_text())["counts"]["reports"]
    produce(kafka_broker.address, reports_topic, [b"not a report"])  # one message that is not a report
    collected = tmp_path / "collected"
    assert collect_reports.main(["--input", f"kafka://{kafka_broker.address}/{reports_topic}?stop=end",
                                 "--output", str(collected)]) == 0
    summary = json.loads((collected / "summary.json").read_text())
    assert summary["counts"]["reports_written"] == client_reports
    assert summary["counts"]["dead_lettered_by_reason"] == {"malformed_avro": 1}
    manifest = [json.loads(line) for line in (collected / "manifest.jsonl").read_text().splitlines()]
    assert sum(entry["reports"] for entry in manifest) == client_reports == summary["counts"]["reports_written"]
    for entry in manifest:  # one folder per origin and hour, every report of the file in that hour
        path = Path(entry["path"])
        assert path.parent.name == time.strftime("%Y-%m-%dT%H", time.gmtime(entry["hour"]))
        with open(path, "rb") as handle:
            infos = [json.loads(r["shared_info"]) for r in fastavro.reader(handle)]
        assert len(infos) == entry["reports"]
        assert all(entry["hour"] <= int(info["scheduled_report_time"]) < entry["hour"] + 3600 for info in infos)
        assert {info["reporting_origin"] for info in infos} == {entry["origin"]}
    capsys.readouterr()
    released = {}
    for name, pattern in (("files", str(tmp_path / "client" / "reports-*")), ("collected", str(collected / "*/*/reports*.avro"))):
        output = tmp_path / f"summary-{name}"
        assert aggregate.main(["--reports", pattern, "--domain", str(events / "domain.avro"), "--output", str(output),
                               "--epsilon", "10", "--ledger", f"sqlite:///{tmp_path / name}.db", "--seed", "4", "--job-id", "e2e",
                               "--output-format", "jsonl", "--now", str(start + 8 * day)]) == 0, capsys.readouterr()
        counts = json.loads((output / "summary.json").read_text())["counts"]
        assert counts["read"] == client_reports and counts["dead_lettered"] == 0
        released[name] = _lines(output, "summary_report")
    assert released["files"] == released["collected"] != []
    # a second run of the same group finds nothing new: the offsets were committed
    again = tmp_path / "again"
    assert collect_reports.main(["--input", f"kafka://{kafka_broker.address}/{reports_topic}?stop=end",
                                 "--output", str(again)]) == 0
    assert json.loads((again / "summary.json").read_text())["counts"]["read"] == 0
