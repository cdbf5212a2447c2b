"""The Aggregation Service's private keys stay off the job graph: ``--private-key`` names where the workers read
them (a path, a Beam file system URL or ``env:NAME``), and the serialised pipeline never holds them
(transforms.core.secrets; deploy/README.md, "Secrets")."""
from __future__ import annotations

import base64
import bz2
import json
import zlib
from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.portability import common_urns
from apache_beam.portability.api import beam_runner_api_pb2

from pipelines import aggregate, common
from pipelines.common import read_records
from schemas.aggregatable import generate_key_pair, write_key_file
from schemas.rows import API_PROTECTED_AUDIENCE
from tests.support.aggregatable_reports import NOW, record, shared_info, write_avro

KEYS_VARIABLE = "PM_BEAM_TEST_PRIVATE_KEYS"


@pytest.fixture
def keys(tmp_path) -> tuple[bytes, Path]:
    """A private key and the key file holding it."""
    private, public = generate_key_pair()
    path = tmp_path / "private.json"
    write_key_file(str(path), {"key-1": private})
    (tmp_path / "public").write_bytes(public)
    return private, path


@pytest.fixture
def reports(tmp_path, keys) -> Path:
    """Four debug-mode reports encrypted to the key: bucket 5 gets 7 from each."""
    public = (tmp_path / "public").read_bytes()
    records = [record(shared_info(i, api=API_PROTECTED_AUDIENCE, debug=True), [(5, 7, 0)], public_key=public)
               for i in range(4)]
    return Path(write_avro(str(tmp_path / "reports.avro"), records))


def _arguments(reports: Path, output: Path, location: str) -> list[str]:
    return ["--reports", str(reports), "--output", str(output), "--now", str(NOW), "--output-format", "jsonl",
            "--mode", "key-discovery", "--l1", "7", "--debug", "--no-noise", "--private-key", location]  # tau = 17.2


def _raw_pickle(data: bytes) -> bytes:
    """A function payload as Beam's picklers write it (base64 of a bz2 or zlib stream), opened."""
    packed = base64.b64decode(data)
    try:
        return bz2.decompress(packed)
    except OSError:
        return zlib.decompress(packed)


def _graph_bytes(pipeline: beam.Pipeline) -> bytes:
    """The serialised pipeline, followed by every ParDo's pickled function opened (where a captured value would
    sit as its raw bytes)."""
    proto = pipeline.to_runner_api()
    opened = []
    for transform in proto.components.transforms.values():
        if transform.spec.urn == common_urns.primitives.PAR_DO.urn:
            opened.append(_raw_pickle(beam_runner_api_pb2.ParDoPayload.FromString(transform.spec.payload).do_fn.payload))
    assert opened, "a pipeline without ParDos says nothing about what it captured"
    return proto.SerializeToString() + b"".join(opened)


def test_the_serialised_pipeline_holds_the_keys_location_and_never_the_keys(tmp_path, keys, reports):
    private, path = keys
    job, beam_args = aggregate.parse_job(_arguments(reports, tmp_path / "out", str(path)))
    pipeline = beam.Pipeline(options=common.pipeline_options(beam_args, streaming=False))
    aggregate.build(pipeline, job, str(tmp_path / "out"))
    graph = _graph_bytes(pipeline)
    assert str(path).encode() in graph  # the search reaches what the functions captured: the location is there
    assert private not in graph
    assert base64.b64encode(private) not in graph
    assert path.read_bytes() not in graph


def test_workers_read_the_keys_from_an_environment_variable(tmp_path, keys, reports, monkeypatch):
    monkeypatch.setenv(KEYS_VARIABLE, keys[1].read_text())
    output = tmp_path / "out"
    assert aggregate.main(_arguments(reports, output, f"env:{KEYS_VARIABLE}")) == 0
    facts = [row for path in sorted(output.glob("summary_report-*")) for row in read_records(str(path))]
    assert [(int(row["bucket"]), row["metric"]) for row in facts] == [(5, 28)]
    parameters = json.loads((output / "summary.json").read_text())["parameters"]
    assert parameters["private_key"] == f"env:{KEYS_VARIABLE}" and parameters["encrypted_payloads"] is True


def test_keys_missing_where_the_workers_run_fail_the_job_in_one_line_releasing_nothing(tmp_path, reports, monkeypatch,
                                                                                     capsys):
    monkeypatch.delenv(KEYS_VARIABLE, raising=False)
    output = tmp_path / "out"
    assert aggregate.main(_arguments(reports, output, f"env:{KEYS_VARIABLE}")) == 1
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith(f"error: private keys: environment variable '{KEYS_VARIABLE}'") and "not set" in error
    assert not list(output.glob("summary_report-*"))


def test_a_key_file_that_is_not_one_is_refused_before_any_work_naming_its_location(tmp_path, reports, capsys):
    bad = tmp_path / "not-keys.json"
    bad.write_text('{"keys": "secret material"}')
    output = tmp_path / "out"
    assert aggregate.main(_arguments(reports, output, str(bad))) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: private keys: key file") and str(bad) in error and "secret material" not in error
    assert not output.exists()
