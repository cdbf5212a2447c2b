"""Every batch pipeline on a real Flink cluster (``tests.support.flink``: a JobManager and a TaskManager with two
slots, Beam's job server, the Python worker pool), at parallelism 2, writes what the local runner writes for the
same inputs and seed: every output file's records, and the same counts in ``summary.json``; Flink's REST API
lists the job as finished. The Aggregation Service's run keeps its budget in a PostgreSQL ledger and opens
encrypted reports with a key file the workers read. Deterministic (seeded noise): no false-failure probability
to state."""
from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from pipelines.generate import main as generate
from tests.support.aggregatable_reports import encrypted_ara_reports
from tests.support.flink import finished_job, output_records

pytestmark = pytest.mark.flink

NOW = "1706745600"  # the ARA data's job time, as in `make demo`
SAME_ACROSS_RUNNERS = ("pipeline", "status", "counts", "privacy")  # summary.json: what must not depend on the runner


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    data = tmp_path_factory.mktemp("data")
    for arguments in (
        ["kanon", "--output", str(data / "joins"), "--groups", "40", "--joins", "8000", "--days", "3"],
        ["microbenchmark", "--output", str(data / "micro"), "--knob1", "0.1", "--knob2", "0.1", "--batch-size", "40",
         "--products", "2"],
        ["event-level", "--output", str(data / "event-level"), "--sources", "400", "--days", "3"],
        ["ara", "--output", str(data / "ara"), "--devices", "300", "--days", "3", "--registrations"],
        ["paa", "--output", str(data / "paa"), "--devices", "100", "--days", "2"],
    ):
        assert generate([*arguments, "--seed", "7", "--quiet"]) == 0
    encrypted_ara_reports(data)
    return data


# one job per policy (about 20 s each on the test cluster): the central filters of IPA and the Attribution API's
# (big_bird) beside the measurement job's Cookie Monster
COMPARED = ("ipa_like", "big_bird")


def _jobs(data: Path) -> dict[str, list[str]]:
    micro = ["--impressions", f"{data}/micro/impressions-*", "--conversions", f"{data}/micro/conversions-*",
             "--batch-size", "40"]
    return {
        "kanon": ["pipelines.kanon", "--input", f"{data}/joins/joins-*"],
        "measurement": ["pipelines.measurement", *micro],
        "compare-policies": ["pipelines.compare_policies", *micro, "--policies", ",".join(COMPARED)],
        "summary-client-ara": ["pipelines.summary_client", "ara", "--sources", f"{data}/ara/sources-*",
                               "--triggers", f"{data}/ara/triggers-*"],
        "summary-client-paa": ["pipelines.summary_client", "paa", "--events", f"{data}/paa/events-*"],
        "event-level": ["pipelines.event_level", "--sources", f"{data}/event-level/sources-*", "--triggers",
                        f"{data}/event-level/triggers-*"],
        "registrations": ["pipelines.registrations", "--registrations", f"{data}/ara/registrations-*"],
        "aggregate": ["pipelines.aggregate", "--reports", f"{data}/reports/reports-*", "--domain",
                      f"{data}/ara/domain.avro", "--mode", "threshold", "--job-id", "flink-batch", "--now", NOW,
                      "--private-key", f"{data}/private.json", "--output-format", "jsonl"],
    }


def _summary(output: Path) -> dict:
    summary = json.loads((output / "summary.json").read_text())
    return {key: summary.get(key) for key in SAME_ACROSS_RUNNERS}


@pytest.mark.parametrize("name", ["kanon", "measurement", "compare-policies", "summary-client-ara",
                                  "summary-client-paa", "event-level", "registrations", "aggregate"])
def test_a_batch_job_on_flink_writes_what_the_local_runner_writes(name, data, on_flink, flink_cluster, postgres_url,
                                                                  tmp_path):
    module, *arguments = _jobs(data)[name]
    main = importlib.import_module(module).main
    local, flink = tmp_path / "local", tmp_path / "flink"
    ledger = {"local": ["--ledger", f"sqlite:///{tmp_path}/ledger.db"], "flink": ["--ledger", postgres_url]}
    is_aggregate = name == "aggregate"
    assert main([*arguments, "--seed", "1", "--output", str(local), *(ledger["local"] if is_aggregate else []),
                 "--runner", "FnApiRunner"]) == 0
    job_name = f"batch-{name}"  # compare-policies runs one job per policy, each of this name
    assert main([*arguments, "--seed", "1", "--output", str(flink), *(ledger["flink"] if is_aggregate else []),
                 *on_flink, "--job_name", job_name]) == 0
    expected, found = output_records(local), output_records(flink)
    assert any(records for records in expected.values()), expected.keys()
    assert found == expected
    if name == "compare-policies":
        for policy in COMPARED:
            assert _summary(flink / policy) == _summary(local / policy)
    else:
        assert _summary(flink) == _summary(local)
    finished_job(flink_cluster, job_name)
    if is_aggregate:
        counts = _summary(flink)["counts"]
        assert counts["aggregated_reports"] > 0 and counts["dead_lettered"] == 0  # every payload opened
