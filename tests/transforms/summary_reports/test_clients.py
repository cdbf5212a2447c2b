"""The summary-client PTransforms: batch and streaming (TestStream, out of order) against a plain replay per
device, late events, and the portable runner."""
from __future__ import annotations

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from schemas.aggregatable import decode_payload
from schemas.codecs import ARA_SOURCE, ARA_TRIGGER, PAA_EVENT
from schemas.rows import AraSource, AraTrigger
from tests.support.streams import shuffled_stream, streaming_options
from tests.support.summary_events import DAY, MINUTE, random_ara, random_paa, write_jsonl
from transforms.core.io import DEAD_LETTERS
from transforms.core.mechanisms.noise import SeededSource
from transforms.summary_reports.clients import REPORTS, ClientInput, SummaryReportsBatch, SummaryReportsStreaming
from transforms.summary_reports.mechanisms.ara_client import AraSummaryClient
from transforms.summary_reports.mechanisms.contributions import ContributionLimits
from transforms.summary_reports.mechanisms.paa_client import PaaSummaryClient, ReachCounting
from transforms.summary_reports.report_records import report_record_of

SEED = 5
ARA = AraSummaryClient(ContributionLimits(l0=3, l1=50_000))  # small budgets: some sources run out
PAA = PaaSummaryClient(ReachCounting(30_000))  # two first sightings exhaust a window's L1


def expected_records(client, rows) -> list[tuple]:
    """What the clients send, replayed device by device without Beam, as (shared_info, payload) pairs."""
    devices: dict[str, list] = {}
    for row in rows:
        devices.setdefault(row.device_id, []).append(row)
    records = []
    for device_id, events in devices.items():
        reports = client.replay(device_id, sorted(events, key=client.order), client.new_state(), SeededSource(SEED))
        records += [report_record_of(report) for report in reports]
    return [(record["shared_info"], record["payload"]) for record in records]


def pairs(records):
    return records | beam.Map(lambda record: (record["shared_info"], record["payload"]))


def ara_inputs(tmp_path, rows):
    sources = write_jsonl(tmp_path / "sources.jsonl", [row for row in rows if type(row) is AraSource])
    triggers = write_jsonl(tmp_path / "triggers.jsonl", [row for row in rows if type(row) is AraTrigger])
    return [ClientInput(sources, ARA_SOURCE, False), ClientInput(triggers, ARA_TRIGGER, True)]


def test_ara_batch_equals_the_plain_replay(tmp_path):
    rows = random_ara(seed=1)
    expected = expected_records(ARA, rows)
    assert {bool(decode_payload(payload)) for _, payload in expected} == {True, False}  # attributed and null ones
    inputs = ara_inputs(tmp_path, rows)
    with open(inputs[1].pattern, "a") as handle:
        handle.write('{"device_id": "x"}\n')
    with TestPipeline(runner="FnApiRunner") as p:
        out = p | SummaryReportsBatch(ARA, inputs, SeededSource(SEED), shards=3)
        assert_that(pairs(out[REPORTS]), equal_to(expected), label="reports")
        assert_that(out[DEAD_LETTERS] | beam.Map(lambda d: d.reason), equal_to(["missing_field:event_time_micros"]),
                    label="dead")


def test_paa_batch_equals_the_plain_replay(tmp_path):
    rows = random_paa(seed=2)
    events = write_jsonl(tmp_path / "events.jsonl", rows)
    with TestPipeline(runner="FnApiRunner") as p:
        out = p | SummaryReportsBatch(PAA, [ClientInput(events, PAA_EVENT, True)], SeededSource(SEED), shards=2)
        assert_that(pairs(out[REPORTS]), equal_to(expected_records(PAA, rows)))


@pytest.mark.parametrize("client, rows", [(ARA, random_ara(seed=3)), (PAA, random_paa(seed=4))], ids=["ara", "paa"])
def test_streaming_with_out_of_order_events_equals_the_plain_replay(client, rows):
    """Batch equals the plain replay (above), so this is streaming equal to batch."""
    late = [rows[0]._replace(device_id="dev0", event_time_micros=rows[0].event_time_micros - MINUTE)]
    stream = shuffled_stream(rows, seed=9, chunks=5, lead_micros=MINUTE, tail_micros=DAY, late=late)
    with TestPipeline(options=streaming_options()) as p:
        out = p | stream | SummaryReportsStreaming(client, SeededSource(SEED))
        assert_that(pairs(out[REPORTS]), equal_to(expected_records(client, rows)), label="reports")
        assert_that(out[DEAD_LETTERS] | beam.Map(lambda d: d.reason), equal_to(["late"]), label="late")


def test_portable_runner_loopback(tmp_path):
    rows = random_ara(seed=6, devices=3)
    options = PipelineOptions(["--runner=PortableRunner", "--job_endpoint=embed", "--environment_type=LOOPBACK"])
    with beam.Pipeline(options=options) as p:
        out = p | SummaryReportsBatch(ARA, ara_inputs(tmp_path, rows), SeededSource(SEED), shards=2)
        assert_that(pairs(out[REPORTS]), equal_to(expected_records(ARA, rows)))
