"""A release that a retry cannot duplicate (the aggregation job).

A runner retries a failed bundle, and an operator re-runs a job whose driver died: neither may publish a second
noisy answer. The job's secure noise is derived from the noise key, the job id and the nonce the ledger records
with the job's first charge (``transforms.core.noise_key``), and every summary-report shard is written whole and
renamed into place. So: a release step that fails half way and is run again, and a job re-run with the same job
id before it completed, write the same complete files, byte for byte, with a single charge in the ledger; a
different job gets different noise. And the ledger holds nothing the noise could be recomputed from (docs/security.md):
no key, no derived secret, and it is private to its owner; a run without its key, or under another key than
its job's, releases nothing and charges nothing.
"""
from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from pipelines import aggregate, common
from schemas.aggregatable import parse_shared_info
from tests.support.aggregatable_reports import NOW, record, shared_info, write_avro
from tests.support.keys import make_key_file, run_key
from transforms.core.mechanisms.budget_units import epsilon_units
from transforms.summary_reports import aggregation
from transforms.summary_reports.ledger import LedgerLimits, open_ledger
from transforms.summary_reports.mechanisms.aggregation import budget_units, report_unit_group

LIMITS = LedgerLimits(epsilon_units(64, "down"), 1)
BUCKETS = 200  # spread over the 16 bucket shards


@pytest.fixture
def reports(tmp_path) -> Path:
    records = [record(shared_info(i), [(bucket, 100 + bucket, 0) for bucket in range(i, BUCKETS, 10)]) for i in range(10)]
    return Path(write_avro(str(tmp_path / "reports.avro"), records))


def _argv(reports: Path, output: Path, ledger: Path, job_id: str) -> list[str]:
    domain = output.parent / "domain.txt"
    domain.write_text("".join(f"{bucket}\n" for bucket in range(BUCKETS)))
    return ["--reports", str(reports), "--domain", str(domain), "--output", str(output), "--now", str(NOW),
            "--ledger", f"sqlite:///{ledger}", "--job-id", job_id]


def _shards(output: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(output.glob("summary_report-*"))}


def _charges(ledger: Path) -> set:
    with open_ledger(f"sqlite:///{ledger}", LIMITS) as opened:
        groups = {report_unit_group(parse_shared_info(shared_info(i))) for i in range(10)}
        return set(opened.usage(budget_units(groups, [0])).values())


def _run_without_completing(argv: list[str]) -> dict:
    """The job up to its release, as a driver that dies before ``complete`` leaves it."""
    job, beam_args = aggregate.parse_job(argv)
    common.prepare_output(job.output, aggregate.OUTPUT_PREFIXES)
    return aggregate.release_job(job, beam_args)


def test_a_rerun_of_the_same_job_id_writes_the_same_answer_and_charges_once(reports, tmp_path):
    ledger = tmp_path / "ledger.db"
    first = _run_without_completing(_argv(reports, tmp_path / "a", ledger, "job-1"))
    assert first["receipt"]["charge"] == "charged"
    assert aggregate.main(_argv(reports, tmp_path / "b", ledger, "job-1")) == 0  # re-run, then completed
    # the same bytes, shard by shard: no second noisy answer exists
    assert _shards(tmp_path / "a") == _shards(tmp_path / "b") and len(_shards(tmp_path / "a")) == 16
    assert _charges(ledger) == {(epsilon_units(10, "up"), 1)}  # one charge of epsilon 10 per unit
    assert aggregate.main(_argv(reports, tmp_path / "c", ledger, "job-1")) == 1  # completed: refused


def test_another_job_draws_other_noise(reports, tmp_path):
    assert aggregate.main(_argv(reports, tmp_path / "a", tmp_path / "l1.db", "job-1")) == 0
    assert aggregate.main(_argv(reports, tmp_path / "b", tmp_path / "l2.db", "job-1")) == 0
    assert _shards(tmp_path / "a") != _shards(tmp_path / "b")  # another ledger, another secret


def test_a_release_step_that_fails_half_way_is_redone_whole_and_identical(reports, tmp_path, monkeypatch):
    """The release step crashes while writing its fourth shard (a partial temporary file left behind); the job
    is run again with the same job id: every shard complete, the shards written before the crash unchanged."""
    ledger, output = tmp_path / "ledger.db", tmp_path / "out"
    write = aggregation.write_shard_file
    calls = []

    def crash_on_the_fourth(path, records, fmt, schema):
        calls.append(path)
        if len(calls) == 4:
            Path(f"{path}.tmp-crashed").write_bytes(b"Obj\x01 half a file")
            raise OSError("the worker died while writing")
        write(path, records, fmt, schema)

    monkeypatch.setattr(aggregation, "write_shard_file", crash_on_the_fourth)
    with pytest.raises(Exception, match="the worker died"):
        aggregate.main(_argv(reports, output, ledger, "job-1"))
    before = _shards(output)
    assert len([name for name in before if ".tmp-" not in name]) == 3
    monkeypatch.setattr(aggregation, "write_shard_file", write)
    assert aggregate.main(_argv(reports, output, ledger, "job-1")) == 0
    after = _shards(output)
    assert len(after) == 16 and not [name for name in after if ".tmp-" in name]
    assert all(after[name] == content for name, content in before.items() if ".tmp-" not in name)
    assert _charges(ledger) == {(epsilon_units(10, "up"), 1)}


def _at_rest(ledger: Path) -> bytes:
    """The ledger's file and its write-ahead log, as whoever reads the disk sees them."""
    return b"".join(path.read_bytes() for path in ledger.parent.glob(ledger.name + "*"))


def test_the_ledger_holds_no_key_and_no_secret_and_is_private(reports, tmp_path):
    ledger = tmp_path / "made-here" / "ledger.db"
    assert aggregate.main(_argv(reports, tmp_path / "a", ledger, "job-1")) == 0
    key = run_key()
    material = key.read().material
    with open_ledger(f"sqlite:///{ledger}", LIMITS) as opened:  # the nonce is public: ask the ledger for it
        nonce = opened.charge("job-2", 1, [("00" * 32, 1)], key.key_id).noise_nonce
    secret = key.read().derive("aggregation", "job-2", salt=nonce)
    at_rest = _at_rest(ledger)
    for value in (material, secret):
        assert value not in at_rest and value.hex().encode() not in at_rest
    assert key.key_id.encode() in at_rest  # what the ledger does record: the key's id
    assert {stat.S_IMODE(path.stat().st_mode) for path in ledger.parent.iterdir()} == {0o600}
    assert stat.S_IMODE(ledger.parent.stat().st_mode) == 0o700


def test_a_run_without_its_key_fails_before_it_charges_or_writes(reports, tmp_path, capsys):
    ledger = tmp_path / "ledger.db"
    argv = [*_argv(reports, tmp_path / "a", ledger, "job-1"), "--noise-key", "env:PM_BEAM_TEST_NO_SUCH_KEY"]
    assert aggregate.main(argv) == 2
    assert "--noise-key: environment variable 'PM_BEAM_TEST_NO_SUCH_KEY'" in capsys.readouterr().err
    assert not ledger.exists() and not (tmp_path / "a").exists()


def test_a_rerun_under_another_key_is_refused_and_releases_nothing(reports, tmp_path):
    ledger = tmp_path / "ledger.db"
    _run_without_completing(_argv(reports, tmp_path / "a", ledger, "job-1"))
    other = make_key_file(str(tmp_path / "other.key"))
    argv = [*_argv(reports, tmp_path / "b", ledger, "job-1"), "--noise-key", other.location]
    assert aggregate.main(argv) == 1
    summary = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert summary["receipt"]["code"] == "NOISE_KEY_MISMATCH" and not _shards(tmp_path / "b")
    assert _charges(ledger) == {(epsilon_units(10, "up"), 1)}


def test_a_ledger_others_may_read_is_refused_until_accepted(reports, tmp_path, capsys):
    ledger = tmp_path / "ledger.db"
    assert aggregate.main(_argv(reports, tmp_path / "a", ledger, "job-1")) == 0
    ledger.chmod(0o644)
    capsys.readouterr()  # the first run's lines
    assert aggregate.main(_argv(reports, tmp_path / "b", ledger, "job-2")) == 2
    error = capsys.readouterr().err
    assert f"chmod 600 {ledger}" in error and "--accept-shared-files" in error and len(error.strip().splitlines()) == 1
    # accepted: the job opens the ledger and is judged by it (job-1 spent these reports' budget)
    assert aggregate.main([*_argv(reports, tmp_path / "c", ledger, "job-3"), "--accept-shared-files"]) == 1
    assert json.loads((tmp_path / "c" / "summary.json").read_text())["receipt"]["code"] == "PRIVACY_BUDGET_EXHAUSTED"
