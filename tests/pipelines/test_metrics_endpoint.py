"""``--metrics-port``: a streaming job on the local runner serves Prometheus metrics while it runs, and their numbers
are the run's own: scraped from the running k-anonymity and measurement jobs (a real broker,
``tests.support.kafka``), they are checked against each run's summary, its output files and topics, and (budget
refusals) against the budgeting mechanism replayed on the same events."""
from __future__ import annotations

import gc
import json
import os
import signal
import threading
import urllib.request
from collections import defaultdict

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pipelines import generate, kanon, measurement
from pipelines.processes import free_port
from schemas.codecs import JOIN_EVENT, row_to_dict
from tests.support.crash import logged
from tests.support.files import read_rows
from tests.support.kafka import consume_all, fresh_topic, produce
from tests.support.measurement_data import random_population
from transforms.budgeting.mechanisms.device import DeviceState, replay, sort_events
from transforms.budgeting.mechanisms.policies import make_policy
from transforms.core.mechanisms.noise import SeededSource
from transforms.core.metrics import JobMetrics

DATASET = ["--groups", "100", "--joins", "6000", "--days", "6", "--seed", "31", "--format", "jsonl", "--quiet"]


def _scrape(port: int) -> dict[tuple, float]:
    """(metric sample name, sorted labels) -> value, from http://127.0.0.1:port/metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return _samples(text_string_to_metric_families(text))


def _samples(families) -> dict[tuple, float]:
    """(metric sample name, sorted labels) -> value, of metric families (parsed, or a registry's)."""
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in families for sample in family.samples}


def _by(samples: dict, name: str, label: str) -> dict[str, float]:
    """The samples of ``name``, by the value of ``label``."""
    return {dict(labels)[label]: value for (sample, labels), value in samples.items() if sample == name}


class _Scraper:
    """Scrapes ``port`` every 0.2 s while a job runs in the test's main thread; keeps every answer. With
    ``drain_when``, sends this process SIGINT (the job drains, as on Ctrl-C) once an answer satisfies it."""

    def __init__(self, port: int, drain_when=None) -> None:
        self.port, self.answers, self._stop = port, [], threading.Event()
        self._drain_when = drain_when
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            try:
                self.answers.append(_scrape(self.port))
            except OSError:  # not serving yet
                continue
            if self._drain_when is not None and self._drain_when(self.answers[-1]):
                self._drain_when = None
                os.kill(os.getpid(), signal.SIGINT)

    def __enter__(self) -> _Scraper:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def test_a_running_kanon_job_serves_its_numbers_and_they_are_the_runs(kafka_broker, tmp_path, capsys):
    directory = tmp_path / "joins"
    assert generate.main(["kanon", "--output", str(directory), *DATASET]) == 0
    rows, _ = read_rows(sorted(directory.glob("joins-*")), JOIN_EVENT)
    values = [json.dumps(row_to_dict(row)).encode() for row in rows]
    sent = [*values, *values[:50], b"{broken", b"[]"]  # 50 duplicates and two undecodable messages
    topic, verdict_topic = fresh_topic("joins"), fresh_topic("verdicts")
    produce(kafka_broker.address, topic, sent)
    port, output = free_port(), tmp_path / "out"
    latest = max(row.event_time_micros for row in rows) / 1e6

    def everything_read_and_fired(answer: dict) -> bool:  # the hour the last join makes final has fired
        fired = answer.get(("pmbeam_firing_event_time_seconds", (("step", "verdicts"),)), 0)
        return answer.get(("pmbeam_events_read_total", (("input", "joins"),))) == len(sent) and fired > latest - 3600

    # live (the topic never ends): drained by SIGINT once everything was read and fired
    with _Scraper(port, everything_read_and_fired) as scraper:
        assert kanon.main(["--input", f"kafka://{kafka_broker.address}/{topic}", "--output", str(output),
                           "--seed", "3", "--output-topic", f"kafka://{kafka_broker.address}/{verdict_topic}",
                           "--metrics-port", str(port), "--state-store", f"sqlite:///{tmp_path}/state.sqlite"]) == 0
    assert f"metrics: http://127.0.0.1:{port}/metrics" in capsys.readouterr().out
    final = _scrape(port)  # the server outlives the run, with the run's last numbers
    summary = json.loads((output / "summary.json").read_text())
    counts = summary["counts"]
    # it was scraped while the job ran, and its counts only grew
    live = [answer for answer in scraper.answers if ("pmbeam_events_read_total", (("input", "joins"),)) in answer]
    assert live, "no scrape saw the source's numbers while the job ran"
    reads = [answer[("pmbeam_events_read_total", (("input", "joins"),))] for answer in live]
    assert reads == sorted(reads)
    # the source's numbers are the summary's
    assert counts["read"] == len(sent)
    assert _by(final, "pmbeam_events_read_total", "input") == {"joins": len(sent)}
    assert _by(final, "pmbeam_events_dead_lettered_total", "input") == {"joins": counts["dead_lettered"]}
    assert _by(final, "pmbeam_dead_letters_total", "reason") == counts["dead_lettered_by_reason"] == {
        "duplicate": 50, "malformed_json": 1, "not_an_object": 1}
    assert set(_by(final, "pmbeam_consumer_lag_messages", "partition").values()) == {0}
    assert final[("pmbeam_watermark_seconds", ())] == max(row.event_time_micros for row in rows) / 1e6
    # every sink's records: the verdict files, the output topic, the dead letters
    verdicts = sum(1 for path in output.glob("verdicts-*") for line in path.read_text().splitlines() if line)
    topic_verdicts = len(consume_all(kafka_broker.address, verdict_topic, expected=verdicts))
    written = _by(final, "pmbeam_outputs_written_total", "sink")
    assert written["verdicts"] == topic_verdicts == verdicts == counts["verdict_records"] > 0
    assert written[verdict_topic] == verdicts
    assert written["dead_letters"] == counts["dead_lettered"]
    # the stateful step fired, and each firing wrote a snapshot to the job's state store
    firings = final[("pmbeam_firing_seconds_count", (("step", "verdicts"),))]
    assert firings >= 1 and final[("pmbeam_snapshot_seconds_count", (("step", "verdicts"),))] == firings
    # every group with joins was evaluated at least once (and again at each later step its window still holds)
    groups = len({row.interest_group for row in rows})
    assert groups <= final[("pmbeam_firing_keys_total", (("step", "verdicts"),))] <= groups * firings
    assert set(_by(final, "pmbeam_gc_pause_seconds_total", "generation")) == {"0", "1", "2"}
    assert final[("pmbeam_snapshot_bytes", (("step", "verdicts"),))] > 0
    # the last timer (an hour's end plus the lateness) at or before the watermark; the drain's firing has no time
    assert latest - 3600 < final[("pmbeam_firing_event_time_seconds", (("step", "verdicts"),))] <= latest
    assert final[("pmbeam_state_store_bytes", ())] > 0
    # the release log's entries still in the store: those the drain's snapshot wrote after the last acknowledgement
    assert final[("pmbeam_release_log_entries", (("step", "verdicts"),))] == logged(tmp_path / "state.sqlite")


def test_a_measurement_job_counts_the_epochs_its_budgets_refused(kafka_broker, tmp_path):
    impressions, conversions = random_population(seed=11, devices=40)
    options = ["--policy", "cookie_monster", "--batch-size", "3", "--seed", "5", "--epsilon-g", "0.5"]
    topics = fresh_topic("impressions"), fresh_topic("conversions")
    for topic, rows in zip(topics, (impressions, conversions), strict=True):
        produce(kafka_broker.address, topic, [json.dumps(row_to_dict(row)).encode()
                                              for row in sorted(rows, key=lambda row: row.event_time_micros)])
    port = free_port()
    arguments = ["--impressions", f"kafka://{kafka_broker.address}/{topics[0]}?stop=end",
                 "--conversions", f"kafka://{kafka_broker.address}/{topics[1]}?stop=end",
                 "--output", str(tmp_path / "out"), "--metrics-port", str(port), *options]
    assert measurement.main(arguments) == 0
    final = _scrape(port)
    # the epochs that could not pay, as the Cookie Monster replay of every device's events finds them
    job, _ = measurement.parse_job(arguments)
    config, policy = job.config, make_policy("cookie_monster")
    events = defaultdict(list)
    for row in [*impressions, *conversions]:
        events[row.device_id].append(row)
    refused = sum(report.dropped_epochs for device_id, rows in events.items()
                  for report in replay(device_id, sort_events(rows), DeviceState(config.new_filters()), config, policy,
                                       SeededSource(5)))
    assert refused > 0
    assert _by(final, "pmbeam_budget_refusals_total", "kind") == {"device_epoch": refused}
    assert _by(final, "pmbeam_events_read_total", "input") == {"impressions": len(impressions),
                                                                "conversions": len(conversions)}
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert _by(final, "pmbeam_outputs_written_total", "sink")["reports"] == summary["counts"]["reports"]


def test_the_source_collector_gives_each_input_and_partition():
    metrics = JobMetrics()
    metrics.source_status({"read": 7, "dead_lettered": 1, "watermark_micros": 5_000_000, "lag_micros": 2_500_000,
                           "inputs": {"sources": {"read": 4, "dead_lettered": 1, "consumer_lag": {0: 3, 1: 0}},
                                      "triggers": {"read": 3, "dead_lettered": 0, "consumer_lag": {0: 9}}}})
    samples = _samples(metrics.registry.collect())
    assert _by(samples, "pmbeam_events_read_total", "input") == {"sources": 4, "triggers": 3}
    assert samples[("pmbeam_consumer_lag_messages", (("input", "sources"), ("partition", "0")))] == 3
    assert samples[("pmbeam_consumer_lag_messages", (("input", "triggers"), ("partition", "0")))] == 9
    assert samples[("pmbeam_watermark_seconds", ())] == 5.0 and samples[("pmbeam_watermark_lag_seconds", ())] == 2.5


def test_the_collectors_pauses_count_from_the_runs_start():
    def full_collections(metrics: JobMetrics) -> float:
        return _samples(metrics.registry.collect())[("pmbeam_gc_pause_seconds_total", (("generation", "2"),))]

    earlier = JobMetrics()
    gc.collect()
    later = JobMetrics()
    counted = full_collections(earlier)
    assert counted > 0  # the full collection after the first run began, and not before the second
    gc.collect()
    assert full_collections(earlier) > counted and 0 < full_collections(later) < full_collections(earlier)


def test_metrics_need_topic_inputs_and_a_free_port(kafka_broker, tmp_path, capsys):
    joins = tmp_path / "joins.jsonl"
    joins.write_text("")
    assert kanon.main(["--input", str(joins), "--output", str(tmp_path / "a"), "--metrics-port", "9"]) == 2
    assert "--metrics-port serves the metrics of a run reading topics" in capsys.readouterr().err
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        topic = fresh_topic("joins")
        produce(kafka_broker.address, topic, [b"{}"])
        status = kanon.main(["--input", f"kafka://{kafka_broker.address}/{topic}?stop=end", "--output",
                             str(tmp_path / "b"), "--metrics-port", str(port)])
    assert status == 2
    assert f"--metrics-port {port}: cannot serve on 127.0.0.1:{port}" in capsys.readouterr().err


@pytest.mark.parametrize("port", ["-1", "x"])
def test_a_bad_metrics_port_is_a_usage_error(port, tmp_path, capsys):
    assert kanon.main(["--input", "kafka://127.0.0.1:9/t", "--output", str(tmp_path), "--metrics-port", port]) == 2
    assert "--metrics-port: must be an integer >= 0" in capsys.readouterr().err
