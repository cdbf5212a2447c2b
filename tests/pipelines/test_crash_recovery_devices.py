"""The device jobs survive a crash (docs/durability.md): the measurement job reads two live topics and is killed
with SIGKILL before its first snapshot, in the middle of one, between snapshots, in the middle of and just after
the end's; the ARA summary-report client over a backlog just after its end's snapshot. Each
is started again with the same ``--job-id``; its reports and budgets are the batch job's, no budget is above
capacity, and no id is released with two different values.

Real processes, a real broker (``tests.support.kafka``) and a real SQLite store; kill points are chosen by the
store's fault variable (``PM_BEAM_KILL_IN_SNAPSHOT``) or by the job's progress line. Deterministic outcomes
(seeded randomness): no false-failure probability to state."""
from __future__ import annotations

import json
import signal
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest

from pipelines.common import read_records
from tests.support import crash
from tests.support.crash import no_job_outlives_its_test  # noqa: F401  (autouse fixture)
from tests.support.kafka import consume_all, fresh_topic, produce

MEASUREMENT = ("--policy", "cookie_monster", "--batch-size", "3", "--seed", "5", "--emit-budgets")
# the Attribution API's budgets with Big Bird's quotas, tight enough to refuse epochs, and its batched scheduling
# (daily batches, 2 attempts, the global budget in 3 slices): the filters and the schedules are restored too
BIG_BIRD = ("--policy", "big_bird", "--global-epsilon", "0.6", "--impression-quota-epsilon", "0.4",
            "--conversion-quota-epsilon", "0.5", "--scheduling-interval-hours", "24", "--scheduling-attempts", "2",
            "--global-releases", "3", "--batch-size", "3", "--seed", "5", "--emit-budgets")
POLICIES = {"cookie_monster": MEASUREMENT, "big_bird": BIG_BIRD}
MEASUREMENT_LATENESS = ["--allowed-lateness-seconds", str(7 * 86_400)]  # a piece spans 2.4 days of event time


@pytest.fixture(scope="module")
def population(tmp_path_factory):
    """200 devices' impressions and conversions over 60 days, and where the batch job's outputs from them are,
    under each of ``POLICIES``."""
    from pipelines import measurement
    from tests.support.measurement_data import random_population, write_jsonl

    impressions, conversions = random_population(seed=17, devices=200)
    directory = tmp_path_factory.mktemp("population")
    files = write_jsonl(directory / "i.jsonl", impressions), write_jsonl(directory / "c.jsonl", conversions)
    for policy, options in POLICIES.items():
        assert measurement.main(["--impressions", files[0], "--conversions", files[1], "--output",
                                 str(directory / policy), *options]) == 0
    return impressions, conversions, directory


def _measurement_arguments(address: str, topics: tuple[str, str], results: str, output: Path, store: Path, *,
                           stop: str, policy: str) -> list[str]:
    return ["pipelines.measurement", "--impressions", f"kafka://{address}/{topics[0]}?group=crash&stop={stop}",
            "--conversions", f"kafka://{address}/{topics[1]}?group=crash&stop={stop}", "--output", str(output),
            "--output-topic", f"kafka://{address}/{results}", "--state-store", f"sqlite:///{store}",
            "--job-id", "measurement-crash", "--progress-seconds", "0.2", *crash.SNAPSHOTS, *MEASUREMENT_LATENESS,
            *POLICIES[policy]]


def _events_in_time_order(impressions, conversions) -> list[tuple[int, bytes]]:
    """Every event as (0 impression or 1 conversion, message), in event-time order (as a device's producer sends)."""
    events = [(row.event_time_micros, 0, row) for row in impressions] + [(row.event_time_micros, 1, row)
                                                                        for row in conversions]
    return [(kind, crash.messages([row])[0]) for _, kind, row in sorted(events, key=lambda event: event[:2])]


def _produce_events(address: str, topics: tuple[str, str], events: list[tuple[int, bytes]]) -> None:
    for kind in (0, 1):
        messages = [message for which, message in events if which == kind]
        if messages:
            produce(address, topics[kind], messages)


MEASUREMENT_KILL_POINTS = [
    ("cookie_monster", "before the first snapshot", None, 0),
    ("cookie_monster", "in the middle of the second snapshot", "2", None),
    ("cookie_monster", "between snapshots, halfway", None, 500),
    ("cookie_monster", "in the middle of the end's snapshot", "end", None),
    ("cookie_monster", "just after the end's snapshot", "after:end", None),
    ("big_bird", "between snapshots, halfway", None, 500),
]


@pytest.mark.parametrize(("policy", "moment", "fault", "read"), MEASUREMENT_KILL_POINTS,
                         ids=[f"{p[0]}, {p[1]}" for p in MEASUREMENT_KILL_POINTS])
def test_the_measurement_job_killed_and_restarted_releases_the_same_reports_and_budgets(
        kafka_broker, population, tmp_path, policy, moment, fault, read):
    """Reports and budgets are per device and equal the batch job's; which reports share a query batch follows the
    firings (different in every live run), so the query results are compared by their shape, and each result's
    id must carry one value."""
    impressions, conversions, batches = population
    batch = batches / policy
    topics, results = (fresh_topic("crash-impressions"), fresh_topic("crash-conversions")), fresh_topic("results")
    store = tmp_path / "state.sqlite"
    events = _events_in_time_order(impressions, conversions)
    if fault in ("end", "after:end"):
        _produce_events(kafka_broker.address, topics, events)
        job = crash.start(_measurement_arguments(kafka_broker.address, topics, results, tmp_path / "first", store,
                                            stop="end", policy=policy), fault)
        printed = job.communicate(timeout=300)[0]
    else:
        # both topics exist before the job joins them: the first piece, and the first conversion (conversions
        # start later) moved to it, each topic still in event-time order
        first_conversion = next(event for event in events if event[0] == 1)
        chunks = crash.chunks([event for event in events if event is not first_conversion])
        _produce_events(kafka_broker.address, topics, [*chunks[0], first_conversion])
        job = crash.start(_measurement_arguments(kafka_broker.address, topics, results, tmp_path / "first", store,
                                            stop="never", policy=policy), fault)
        started = "".join(crash.reading(job))
        if read == 0:
            job.kill()
        feeder = threading.Thread(target=lambda: [(time.sleep(crash.PAUSE_SECONDS), _produce_events(
            kafka_broker.address, topics, chunk)) for chunk in chunks[1:]], daemon=True)
        feeder.start()
        if read == 0:
            printed = started + job.communicate(timeout=120)[0]
        else:
            printed = started + (crash.killed_by_fault(job, feeder) if fault else crash.kill_when_read(job, read))
        feeder.join()
    assert job.returncode == -signal.SIGKILL, printed
    snapshotted = crash.snapshots(store)
    again = crash.start(_measurement_arguments(kafka_broker.address, topics, results, tmp_path / "again", store,
                                          stop="end", policy=policy))
    rest, _ = again.communicate(timeout=300)
    assert again.returncode == 0, rest
    assert ("state: job measurement-crash restored" in rest) == (snapshotted > 0), rest
    output = tmp_path / "again"
    for prefix in ("reports", "SENSITIVE_device_epoch_budgets"):
        assert crash.lines(output, prefix) == crash.lines(batch, prefix), (moment, prefix)
    assert all(row["consumed_epsilon"] <= row["capacity_epsilon"]
               for row in map(json.loads, crash.lines(output, "SENSITIVE_device_epoch_budgets")))

    def shape(lines: list[str]) -> list[tuple]:
        return sorted((r["query_key"], r["batch_index"], r["report_count"]) for r in map(json.loads, lines))

    released = crash.by_id(consume_all(kafka_broker.address, results))
    assert all(len(values) == 1 for values in released.values()), moment
    files = crash.lines(output, "query_results")
    assert sorted(json.dumps(json.loads(line), sort_keys=True) for line in files) == sorted(
        next(iter(values)) for values in released.values()), moment
    assert shape(files) == shape(crash.lines(batch, "query_results")) != [], moment




def test_the_ara_client_killed_just_after_its_end_and_restarted_sends_the_batch_reports(kafka_broker, tmp_path):
    """The summary-report client (ARA) over a backlog, killed just after its end's snapshot, which holds no device
    (each is final at the end): the restart restores it, reads nothing new and sends its release log again; its
    report files are the batch job's, and each report id on the topic carries one report."""
    from pipelines import summary_client
    from synthetic.ara import generate_ara
    from tests.support.kafka import produce as produce_values

    data = tmp_path / "ara"
    generate_ara(data, devices=20, days=6, impressions_per_day=4, seed=2, fmt="jsonl", bad_fraction=0.0,
                 progress=False)
    assert summary_client.main(["ara", "--sources", str(data / "sources-*"), "--triggers", str(data / "triggers-*"),
                                "--output", str(tmp_path / "batch"), "--seed", "7"]) == 0
    topics, reports = (fresh_topic("ara-sources"), fresh_topic("ara-triggers")), fresh_topic("ara-reports")
    for topic, prefix in zip(topics, ("sources", "triggers"), strict=True):
        lines = [line.encode() for path in sorted(data.glob(f"{prefix}-*")) for line in path.read_text().splitlines()]
        produce_values(kafka_broker.address, topic, lines)

    def arguments(output: str) -> list[str]:
        return ["pipelines.summary_client", "ara", "--sources", f"kafka://{kafka_broker.address}/{topics[0]}?stop=end",
                "--triggers", f"kafka://{kafka_broker.address}/{topics[1]}?stop=end", "--output",
                str(tmp_path / output), "--seed", "7", "--allowed-lateness-seconds", "3600", "--output-topic",
                f"kafka://{kafka_broker.address}/{reports}", "--state-store", f"sqlite:///{tmp_path}/state.sqlite",
                "--job-id", "ara-crash"]

    job = crash.start(arguments("first"), "after:end")
    printed, _ = job.communicate(timeout=300)
    assert job.returncode == -signal.SIGKILL, printed
    assert crash.snapshots(tmp_path / "state.sqlite") >= 1 and crash.keyed(tmp_path / "state.sqlite") == 0
    again = crash.start(arguments("again"))
    rest, _ = again.communicate(timeout=300)
    assert again.returncode == 0, rest

    def report_records(output: Path) -> list:
        return sorted((r["shared_info"], r["payload"]) for path in output.glob("reports-*.avro")
                      for r in read_records(str(path)))

    expected = report_records(tmp_path / "batch")
    assert report_records(tmp_path / "again") == expected != []
    ids = defaultdict(set)
    for message in consume_all(kafka_broker.address, reports):
        ids[dict(message.headers())["id"].decode()].add(message.value())
    assert len(ids) == len(expected) and all(len(values) == 1 for values in ids.values())
