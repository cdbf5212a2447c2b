"""The distribution carries everything (deploy/README.md): ``python -m build`` makes an sdist and a wheel holding
every module and data file the packages read, and from an environment holding only the wheel, in another working
directory, every command answers ``--help``, one tiny batch job of every pipeline runs, and a streaming job reads
a topic of a real broker."""
from __future__ import annotations

import json
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from pipelines.__main__ import COMMANDS
from pipelines.generate import main as generate
from tests.support.distribution import ROOT, build_distribution, make_wheel_environment, packaged_files
from tests.support.kafka import fresh_topic, produce

TINY_JOBS = ROOT / "tests" / "deploy" / "tiny_jobs.py"


@pytest.fixture(scope="module")
def distribution(tmp_path_factory):
    """(sdist, wheel, the wheel-only environment), built once for this file."""
    sdist, wheel = build_distribution(tmp_path_factory.mktemp("dist"))
    # the extras the tiny jobs need: figures (kanon-accuracy, evaluate) and kafka:// (the streaming job)
    return sdist, wheel, make_wheel_environment(wheel, tmp_path_factory.mktemp("venv") / "env", ("plots", "kafka"))


def test_the_sdist_and_the_wheel_carry_every_module_and_data_file(distribution):
    sdist, wheel, _ = distribution
    expected = packaged_files()
    assert {"schemas/avro/join_event.avsc", "schemas/proto/state.proto", "schemas/proto/state_pb2.py"} <= expected
    assert expected - set(zipfile.ZipFile(wheel).namelist()) == set()
    with tarfile.open(sdist) as archive:
        top = f"{sdist.name.removesuffix('.tar.gz')}/"
        in_sdist = {name.removeprefix(top) for name in archive.getnames()}
    assert expected | {"setup.py", "README.md"} <= in_sdist


def _metadata(wheel: Path) -> tuple[list[str], list[str]]:
    """(Requires-Dist, Provides-Extra) of the wheel."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(name for name in archive.namelist() if name.endswith(".dist-info/METADATA"))
        message = Parser().parsestr(archive.read(name).decode())
    return message.get_all("Requires-Dist"), message.get_all("Provides-Extra")


def test_the_wheel_declares_the_core_requirements_and_the_extras_a_user_installs(distribution):
    requires, extras = _metadata(distribution[1])
    core = {Requirement(text).name for text in requires if Requirement(text).marker is None}
    assert core == {"apache-beam", "numpy", "protobuf", "fastavro", "packaging", "cbor2", "pyhpke", "orjson", "polars",
                    "pyarrow", "publicsuffixlist", "prometheus-client"}
    assert {"gcp", "kafka", "postgres", "plots", "eval"} <= set(extras)
    assert 'apache-beam[gcp]==2.62.*; extra == "gcp"' in requires


def test_from_the_wheel_alone_every_command_answers_help_and_every_pipeline_runs_a_tiny_batch_job(distribution,
                                                                                                  tmp_path):
    environment = distribution[2]
    undeclared = environment.run(["python", "-c", "import importlib.util as u; "
                                  "print([name for name in ('pytest', 'psycopg', 'hypothesis') if u.find_spec(name)])"],
                                 cwd=tmp_path)
    assert undeclared.stdout.strip() == "[]"  # what the wheel does not declare (for these extras) is not there
    console = environment.run([str(environment.bin / "pm-beam"), "--help"], cwd=tmp_path)
    assert console.returncode == 0 and all(name in console.stdout for name in COMMANDS)
    result = environment.run(["python", str(TINY_JOBS)], cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    report = json.loads(result.stdout.splitlines()[-1])
    assert Path(report["imported_from"]).is_relative_to(environment.root)  # the wheel's copy, not the source tree
    assert report["help"] == dict.fromkeys(COMMANDS, 0)
    assert report["generate"] == [0] * 5
    assert set(report["jobs"].values()) == {0}, report["jobs"]
    out = tmp_path / "out"
    for job in ("kanon", "measurement-cookie-monster", "ara-reports", "paa-reports", "summary-report", "event-level",
                "registrations"):
        summary = json.loads((out / job / "summary.json").read_text())
        assert summary["status"] == "ok" and summary["counts"]["read"] > 0, job
    assert json.loads((out / "summary-report" / "summary.json").read_text())["counts"]["released_buckets"] > 0
    assert (out / "measurement" / "comparison.csv").exists() and (out / "index.html").exists()
    assert list((out / "kanon-accuracy").glob("*.png")) and (out / "evaluate" / "report.md").exists()


def test_from_the_wheel_alone_a_streaming_job_reads_a_topic_and_keeps_its_state(distribution, kafka_broker, tmp_path):
    environment = distribution[2]
    assert generate(["kanon", "--output", str(tmp_path / "joins"), "--groups", "40", "--joins", "4000", "--days", "2",
                     "--format", "jsonl", "--seed", "7", "--quiet"]) == 0
    messages = [line.encode() for path in sorted((tmp_path / "joins").glob("joins-*"))
                for line in path.read_text().splitlines()]
    topic = fresh_topic("wheel-joins")
    produce(kafka_broker.address, topic, messages)
    store = tmp_path / "state.sqlite"
    result = environment.run(["python", "-m", "pipelines.kanon", "--input",
                              f"kafka://{kafka_broker.address}/{topic}?stop=end&group=wheel", "--output", "out",
                              "--seed", "3", "--state-store", f"sqlite:///{store}"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-4000:]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["status"] == "ok" and summary["parameters"]["streaming"]
    assert summary["counts"]["read"] == len(messages) and summary["counts"]["verdict_records"] > 0
    assert store.stat().st_size > 0  # the job's state and offsets, kept as a restart would need them
