"""Remote-style workers: small jobs submitted through ``PortableRunner`` (embedded job server) whose SDK workers
live in another process, a worker pool started from the wheel-only environment in a directory of its own (the
``EXTERNAL`` environment, the contract of Flink's Python worker-pool sidecar). Each job's outputs equal those of
the same job run in-process. This is what breaks on a cluster: a transform closing over something unpicklable,
module state set only on the driver, a file found by a path relative to the source tree, a secret read on the
driver (the aggregation's private keys exist only in the worker pool's environment here)."""
from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from pipelines.common import read_records
from pipelines.generate import main as generate
from tests.support.aggregatable_reports import encrypted_ara_reports
from tests.support.distribution import build_distribution, make_wheel_environment
from tests.support.worker_pool import external_options, worker_pool

KEYS_VARIABLE = "PM_BEAM_WORKER_PRIVATE_KEYS"
NOW = "1706745600"  # the ARA data's job time, as in `make demo`
VARYING = ("elapsed_seconds", "outputs")  # of summary.json: how long it took, where it wrote


@pytest.fixture(scope="module")
def setting(tmp_path_factory):
    """(the wheel-only environment, the datasets' directory, the private key file's text, a worker pool's port)."""
    _, wheel = build_distribution(tmp_path_factory.mktemp("dist"))
    environment = make_wheel_environment(wheel, tmp_path_factory.mktemp("venv") / "env")
    data = tmp_path_factory.mktemp("data")
    assert generate(["kanon", "--output", str(data / "joins"), "--groups", "40", "--joins", "8000", "--days", "3",
                     "--seed", "7", "--quiet"]) == 0
    assert generate(["microbenchmark", "--output", str(data / "micro"), "--knob1", "0.1", "--knob2", "0.1",
                     "--batch-size", "40", "--products", "2", "--seed", "7", "--quiet"]) == 0
    assert generate(["event-level", "--output", str(data / "event-level"), "--sources", "400", "--days", "3",
                     "--seed", "7", "--quiet"]) == 0
    assert generate(["ara", "--output", str(data / "ara"), "--devices", "300", "--days", "3", "--seed", "7",
                     "--quiet"]) == 0
    encrypted_ara_reports(data)
    keys = (data / "private.json").read_text()
    pool_directory = tmp_path_factory.mktemp("worker-pool")
    with worker_pool(environment, pool_directory, **{KEYS_VARIABLE: keys}) as port:
        yield environment, data, keys, port


def _jobs(data: Path) -> dict[str, list[str]]:
    micro = ["--impressions", f"{data}/micro/impressions-*", "--conversions", f"{data}/micro/conversions-*",
             "--batch-size", "40"]
    return {
        "kanon": ["pipelines.kanon", "--input", f"{data}/joins/joins-*", "--seed", "1"],
        "measurement": ["pipelines.measurement", *micro, "--seed", "1"],
        "aggregate": ["pipelines.aggregate", "--reports", f"{data}/reports/reports-*", "--domain",
                      f"{data}/ara/domain.avro", "--mode", "threshold", "--job-id", "remote-workers", "--now", NOW,
                      "--seed", "1", "--private-key", f"env:{KEYS_VARIABLE}", "--output-format", "jsonl"],
        "event-level": ["pipelines.event_level", "--sources", f"{data}/event-level/sources-*", "--triggers",
                        f"{data}/event-level/triggers-*", "--seed", "1"],
    }


def _records(path: Path) -> list:
    if path.suffix == ".avro":
        import fastavro  # noqa: PLC0415 - only the Avro outputs need it

        with path.open("rb") as handle:
            return [json.dumps(record, sort_keys=True, default=repr) for record in fastavro.reader(handle)]
    return [json.dumps(record, sort_keys=True) for record in read_records(str(path))]


def _outputs(output: Path) -> dict:
    """Every output file's records, sorted, by its name without the shard, and summary.json without what
    varies between two runs of one job."""
    outputs: dict[str, list] = {}
    for path in sorted(output.iterdir()):
        if path.name == "summary.json":
            summary = json.loads(path.read_text())
            outputs["summary"] = {key: value for key, value in summary.items() if key not in VARYING}
            for where in ("output", "ledger"):
                outputs["summary"]["parameters"].pop(where, None)
        elif path.is_file() and path.suffix in (".avro", ".jsonl"):
            outputs.setdefault(path.name.split("-0")[0], []).extend(_records(path))
    return {name: sorted(records) if isinstance(records, list) else records for name, records in outputs.items()}


def _arguments(job: list[str], output: Path, ledger: Path) -> list[str]:
    """The job's command-line arguments (without its module), writing to ``output`` (and ``ledger``)."""
    ledger_option = ["--ledger", f"sqlite:///{ledger}"] if job[0] == "pipelines.aggregate" else []
    return [*job[1:], *ledger_option, "--output", str(output)]


@pytest.mark.parametrize("name", ["kanon", "measurement", "aggregate", "event-level"])
def test_a_job_on_external_workers_from_the_wheel_equals_the_job_in_process(setting, name, tmp_path, monkeypatch):
    environment, data, keys, port = setting
    job = _jobs(data)[name]
    in_process, external = tmp_path / "in-process", tmp_path / "external"
    # in process (here, on the default runner) the workers are the driver: only there does the driver hold the keys
    monkeypatch.setenv(KEYS_VARIABLE, keys)
    assert importlib.import_module(job[0]).main(_arguments(job, in_process, tmp_path / "ledger-in-process.db")) == 0
    monkeypatch.delenv(KEYS_VARIABLE)
    # the driver from the wheel-only environment, its workers in the pool's processes
    result = environment.run(["python", "-m", job[0], *_arguments(job, external, tmp_path / "ledger-external.db"),
                              *external_options(port)], cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    expected, found = _outputs(in_process), _outputs(external)
    assert len(expected) > 2 and any(records for records in expected.values() if isinstance(records, list))
    assert found == expected
    if name == "aggregate":
        summary = expected["summary"]
        assert summary["parameters"]["encrypted_payloads"] and summary["counts"]["aggregated_reports"] > 0
        assert summary["counts"]["dead_lettered"] == 0  # every payload opened, by workers that read the keys
