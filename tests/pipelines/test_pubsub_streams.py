"""Pub/Sub in and out, against the real emulator when this machine has it (``tests.support.pubsub``; skipped with the
reason otherwise): the k-anonymity job reads joins from a subscription through Beam's ``ReadFromPubSub`` on the
DirectRunner, with event time from a message attribute, and sends the batch job's verdicts to a topic and a broken
message to the dead-letter topic.

The DirectRunner's Pub/Sub source holds its watermark at the wall clock (``_PubSubReadEvaluator``), so the joins
are of the hour that just ended and the allowed lateness is chosen to make that hour final about 25 s after the
test starts, once every join has been read; a trickle of joins of a later hour, for another group, keeps the
source's pulls answering (an empty pull waits 30 s)."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

from pipelines import kanon
from schemas.rows import JoinEvent
from tests.support.pubsub import PROJECT

ROOT = Path(__file__).resolve().parents[2]
HOUR_MICROS = 3_600_000_000
# the hour of the joins is final this long after the streaming job starts (measured from its start, not the test's:
# on a slow machine the publishing and the batch run before it took more than 25 s, and every join came late)
FINAL_AFTER_SECONDS = 30
GROUPS = {"https://dsp.example/ig/few": 8, "https://dsp.example/ig/near": 50, "https://dsp.example/ig/many": 140}


def _joins(hour_start: int) -> list[JoinEvent]:
    joins = []
    for group, users in GROUPS.items():
        joins += [JoinEvent(group, f"user-{index}", hour_start + index * 20_000_000) for index in range(users)]
    return sorted(joins, key=lambda join: join.event_time_micros)


def _message(join: JoinEvent) -> bytes:
    return json.dumps(join._asdict()).encode()


def _pull(subscriber, subscription: str) -> list:
    """The messages waiting on ``subscription`` (at most 100), acknowledged."""
    response = subscriber.pull(subscription=subscription, max_messages=100, timeout=5, retry=None)
    if response.received_messages:
        subscriber.acknowledge(subscription=subscription,
                               ack_ids=[message.ack_id for message in response.received_messages])
    return [message.message for message in response.received_messages]


def test_joins_from_a_subscription_give_the_batch_verdicts_on_a_topic(pubsub_emulator, tmp_path, monkeypatch):
    from google.cloud import pubsub_v1

    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", pubsub_emulator.host)
    publisher, subscriber = pubsub_v1.PublisherClient(), pubsub_v1.SubscriberClient()
    run = uuid.uuid4().hex[:8]
    paths = {}
    for name in ("joins", "verdicts", "dead"):
        topic = publisher.topic_path(PROJECT, f"{name}-{run}")
        publisher.create_topic(name=topic)
        subscription = subscriber.subscription_path(PROJECT, f"{name}-{run}-sub")
        subscriber.create_subscription(name=subscription, topic=topic)
        paths[name] = (topic, subscription)

    hour_end = int(time.time() // 3600) * 3600
    joins = _joins((hour_end - 3600) * 1_000_000)
    futures = [publisher.publish(paths["joins"][0], _message(join), ts=str(join.event_time_micros // 1000))
               for join in joins]
    futures.append(publisher.publish(paths["joins"][0], b"{broken", ts=str(hour_end * 1000)))
    for future in futures:
        future.result(timeout=30)

    batch_input = tmp_path / "joins.jsonl"
    batch_input.write_bytes(b"\n".join(_message(join) for join in joins) + b"\n")
    common = ["--seed", "3", "--emit", "all"]
    assert kanon.main(["--input", str(batch_input), "--output", str(tmp_path / "batch"), *common,
                       "--runner=FnApiRunner"]) == 0
    step = hour_end // 3600 - 1
    expected = sorted(line for path in (tmp_path / "batch").glob("verdicts-*")
                      for line in path.read_text().splitlines() if json.loads(line)["step"] == step)
    assert len(expected) == len(GROUPS)

    log = open(tmp_path / "job.log", "wb")  # noqa: SIM115 - the job writes it
    lateness = math.ceil(time.time() + FINAL_AFTER_SECONDS - hour_end)
    job = subprocess.Popen(
        [sys.executable, "-m", "pipelines.kanon", "--input", f"pubsub://{paths['joins'][1]}",
         "--output", str(tmp_path / "stream"), *common, "--allowed-lateness-seconds", str(lateness),
         "--timestamp-attribute", "ts", "--output-topic", f"pubsub://{paths['verdicts'][0]}",
         "--dead-letter-topic", f"pubsub://{paths['dead'][0]}"],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    received: list[str] = []
    dead: list[dict] = []
    try:
        deadline = time.monotonic() + FINAL_AFTER_SECONDS + 90
        keepalive = 0
        while (len(received) < len(expected) or not dead) and time.monotonic() < deadline and job.poll() is None:
            later = JoinEvent("https://dsp.example/ig/keepalive", f"user-{keepalive}", int(time.time() * 1e6))
            publisher.publish(paths["joins"][0], _message(later), ts=str(later.event_time_micros // 1000))
            keepalive += 1
            for message in _pull(subscriber, paths["verdicts"][1]):
                verdict = json.loads(message.data)
                assert message.attributes["key"] == verdict["interest_group"]
                assert message.attributes["id"] == f"{verdict['interest_group']}/{verdict['step']}"
                if verdict["step"] == step:
                    received.append(json.dumps(verdict))
            dead += [json.loads(message.data) for message in _pull(subscriber, paths["dead"][1])]
            time.sleep(0.5)
    finally:
        job.terminate()
        job.wait(timeout=60)
        log.close()
    output = (tmp_path / "job.log").read_text(errors="replace")[-3000:]
    assert sorted(received) == sorted(json.dumps(json.loads(line)) for line in expected), output
    assert [letter["reason"] for letter in dead] == ["malformed_json"], output
    assert dead[0]["source"] == f"pubsub://{paths['joins'][1]}"
