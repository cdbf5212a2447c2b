"""``python -m pipelines.aggregate`` end to end: sums, validation, modes, the ledger's rules, HPKE, runners."""
from __future__ import annotations

import json
import math
from pathlib import Path

import fastavro
import pytest

from pipelines.aggregate import main
from pipelines.common import read_records
from schemas.aggregatable import encode_payload, generate_key_pair, report_record, write_key_file
from schemas.rows import API_PROTECTED_AUDIENCE
from tests.support.aggregatable_reports import NOW, record, shared_info, write_avro
from tests.support.keys import run_key
from transforms.core.mechanisms.budget_units import epsilon_units
from transforms.summary_reports.aggregation import AggregationJob, charge
from transforms.summary_reports.ledger import LedgerLimits, open_ledger
from transforms.summary_reports.mechanisms.aggregation import AggregationParams, budget_units, report_unit_group

HOUR = 3600
LIMITS = LedgerLimits(epsilon_units(64, "down"), 1)


def _run(reports: Path, output: Path, *extra: str) -> int:
    return main(["--reports", str(reports), "--output", str(output), "--now", str(NOW), "--output-format", "jsonl", *extra])


def _summary(output: Path) -> dict:
    return json.loads((output / "summary.json").read_text())


def _facts(output: Path, prefix: str = "summary_report") -> dict[int, dict]:
    return {int(row["bucket"]): row for path in sorted(output.glob(f"{prefix}-*")) for row in read_records(str(path))}


def _domain(path: Path, buckets) -> Path:
    path.write_text("".join(f"{bucket}\n" for bucket in buckets))
    return path


@pytest.fixture
def debug_reports(tmp_path) -> Path:
    """Debug-mode reports with known sums: bucket b gets 10 * b from each of 3 reports; one duplicate report
    id, one contribution with filtering id 1, one report that is not in debug mode."""
    records = [record(shared_info(i, debug=True), [(b, 10 * b, 0) for b in (1, 2, 3)]) for i in range(3)]
    records.append(record(shared_info(0, debug=True), [(1, 9_999, 0)]))  # duplicate of report 0: dropped
    records.append(record(shared_info(7, debug=True), [(4, 5, 1), (2, 1, 0)]))
    records.append(record(shared_info(8), [(1, 1_000, 0)]))  # not a debug report
    return write_avro(str(tmp_path / "reports.avro"), records) and tmp_path / "reports.avro"


def test_debug_run_without_noise_gives_exact_sums_and_annotations(debug_reports, tmp_path, capsys):
    output = tmp_path / "out"
    domain = _domain(tmp_path / "domain.txt", [1, 2, 9])
    assert _run(debug_reports, output, "--mode", "threshold", "--domain", str(domain), "--debug", "--no-noise") == 0
    facts = _facts(output)
    assert {b: row["metric"] for b, row in facts.items()} == {1: 30, 2: 61, 9: 0}  # bucket 3 (sum 90) < T
    debug = _facts(output, "debug_summary_report")
    assert {b: (row["unnoised_metric"], row["noise"], row["annotations"]) for b, row in debug.items()} == {
        1: (30, 0, ["in_domain", "in_reports"]), 2: (61, 0, ["in_domain", "in_reports"]),
        3: (90, 0, ["in_reports"]), 9: (0, 0, ["in_domain"])}
    counts = _summary(output)["counts"]
    assert counts["dead_lettered_by_reason"] == {"duplicate_report_id": 1, "not_debug_report": 1}
    assert counts["read"] == 6 == counts["aggregated_reports"] + counts["dead_lettered"]
    assert counts["contributions"] == 10 and counts["contributions_other_filtering_ids"] == 1
    assert "noise source: none" in capsys.readouterr().out


def test_filtering_ids_choose_the_contributions(debug_reports, tmp_path):
    output = tmp_path / "out"
    domain = _domain(tmp_path / "domain.txt", [4])
    assert _run(debug_reports, output, "--mode", "threshold", "--domain", str(domain), "--debug", "--no-noise",
                "--filtering-ids", "1") == 0
    debug = _facts(output, "debug_summary_report")
    assert {b: row["unnoised_metric"] for b, row in debug.items()} == {4: 5}
    assert {b: row["metric"] for b, row in _facts(output).items()} == {4: 5}


def _reason_records(tmp_path: Path) -> tuple[Path, dict]:
    """One report per validation path, plus two valid ones; the expected reasons."""
    valid = [record(shared_info(i), [(1, 5, 0)]) for i in range(2)]
    bad = [
        report_record(shared_info(10, version="2.0"), encode_payload([(1, 1, 0)])),
        report_record(shared_info(11, api="topics"), encode_payload([(1, 1, 0)])),
        report_record(shared_info(12).replace('"report_id"', '"id"'), encode_payload([(1, 1, 0)])),
        report_record(shared_info(13, scheduled=NOW - 91 * 24 * HOUR), encode_payload([(1, 1, 0)])),
        report_record(shared_info(14), b"\xffnot cbor"),
        report_record(shared_info(15), encode_payload([(1, 1, 0)]).replace(b"histogram", b"histogrum")),
        report_record(shared_info(16), encode_payload([(1, 1, 0)]).replace(b"\x50" + bytes(15) + b"\x01", b"\x51" + bytes(17))),
        report_record("{}", b""),
        valid[0],  # a duplicate
    ]
    expected = {"unsupported_version": 1, "unknown_api": 1, "missing_field:report_id": 1, "report_too_old": 1,
                "malformed_payload": 2, "wrong_operation": 1, "malformed_shared_info": 0, "missing_field:version": 1,
                "duplicate_report_id": 1}
    path = write_avro(str(tmp_path / "mixed.avro"), valid + bad)
    return Path(path), {k: v for k, v in expected.items() if v}


def test_every_validation_path_is_a_counted_dead_letter(tmp_path):
    reports, expected = _reason_records(tmp_path)
    output = tmp_path / "out"
    ledger = f"sqlite:///{tmp_path / 'ledger.db'}"
    assert _run(tmp_path / "*.avro", output, "--mode", "key-discovery", "--ledger", ledger,
                "--max-error-fraction", "0.95") == 0
    summary = _summary(output)
    assert summary["counts"]["dead_lettered_by_reason"] == dict(sorted(expected.items()))
    assert summary["counts"]["read"] == 2 + sum(expected.values())
    assert summary["counts"]["aggregated_reports"] == 2
    letters = [row for path in output.glob("dead_letters-*") for row in read_records(str(path))]
    assert all(letter["raw"] and "#" in letter["source"] for letter in letters)


@pytest.mark.parametrize("broken, code", [
    (b"Obj\x01 this is not avro", "INPUT_FILE_BROKEN"),  # a corrupt header: the whole file lost
    (None, "INPUT_FILE_BROKEN"),  # a valid file cut short: its last block lost
])
def test_a_broken_report_file_fails_the_job_whatever_the_threshold(broken, code, tmp_path, capsys):
    write_avro(str(tmp_path / "good.avro"), [record(shared_info(i), [(1, 5, 0)]) for i in range(3)])
    if broken is None:
        whole = write_avro(str(tmp_path / "whole.bin"), [record(shared_info(10 + i), [(1, 5, 0)]) for i in range(400)])
        broken = Path(whole).read_bytes()[:-200]
    (tmp_path / "broken.avro").write_bytes(broken)
    output, ledger_path = tmp_path / "out", tmp_path / "ledger.db"
    assert _run(tmp_path / "*.avro", output, "--mode", "key-discovery", "--ledger", f"sqlite:///{ledger_path}",
                "--max-error-fraction", "1") == 1
    summary = _summary(output)
    assert summary["status"] == "failed" and summary["receipt"]["code"] == code
    assert "malformed_avro" in summary["counts"]["dead_lettered_by_reason"]
    assert not list(output.glob("summary_report-*"))
    errors = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("INFO ")]  # progress lines
    assert len(errors) == 1 and errors[0].startswith(f"error: {code}: a report file is truncated")
    with open_ledger(f"sqlite:///{ledger_path}", LIMITS) as ledger:
        groups = {report_unit_group(_info(i)) for i in range(3)}
        assert set(ledger.usage(budget_units(groups, [0])).values()) == {(0, 0)}


def test_no_valid_report_fails_the_job(tmp_path, capsys):
    write_avro(str(tmp_path / "empty.avro"), [])
    output = tmp_path / "out"
    assert _run(tmp_path / "empty.avro", output, "--mode", "key-discovery", "--ledger",
                f"sqlite:///{tmp_path / 'ledger.db'}") == 1
    assert _summary(output)["receipt"]["code"] == "NO_VALID_REPORTS"
    assert "NO_VALID_REPORTS" in capsys.readouterr().err


def test_too_many_bad_reports_fail_the_job_without_spending(tmp_path, capsys):
    reports, _ = _reason_records(tmp_path)
    output, ledger_path = tmp_path / "out", tmp_path / "ledger.db"
    assert _run(reports, output, "--mode", "key-discovery", "--ledger", f"sqlite:///{ledger_path}", "--job-id", "j") == 1
    summary = _summary(output)
    assert summary["status"] == "failed" and summary["receipt"]["code"] == "REPORTS_WITH_ERRORS_EXCEEDED_THRESHOLD"
    assert not list(output.glob("summary_report-*"))
    assert "REPORTS_WITH_ERRORS_EXCEEDED_THRESHOLD" in capsys.readouterr().err
    with open_ledger(f"sqlite:///{ledger_path}", LIMITS) as ledger:
        groups = {report_unit_group(_info(i)) for i in range(2)}
        assert set(ledger.usage(budget_units(groups, [0])).values()) == {(0, 0)}


def _info(number: int, **changes):
    from schemas.aggregatable import parse_shared_info

    return parse_shared_info(shared_info(number, **changes))


def test_a_job_over_an_exhausted_unit_fails_and_charges_no_unit(tmp_path, capsys):
    first = write_avro(str(tmp_path / "first.avro"), [record(shared_info(i), [(1, 5, 0)]) for i in range(3)])
    # the second job's reports: two in the first job's hour, one an hour later (a fresh unit)
    later = [record(shared_info(10 + i, scheduled=NOW - 3600 + HOUR * (i == 2)), [(1, 5, 0)]) for i in range(3)]
    second = write_avro(str(tmp_path / "second.avro"), later)
    ledger = f"sqlite:///{tmp_path / 'ledger.db'}"
    assert _run(Path(first), tmp_path / "a", "--mode", "key-discovery", "--ledger", ledger, "--seed", "1") == 0
    assert _run(Path(second), tmp_path / "b", "--mode", "key-discovery", "--ledger", ledger, "--seed", "1") == 1
    receipt = _summary(tmp_path / "b")["receipt"]
    assert receipt["code"] == "PRIVACY_BUDGET_EXHAUSTED" and receipt["details"]["exhausted_units"] == 1
    assert "PRIVACY_BUDGET_EXHAUSTED" in capsys.readouterr().out
    fresh = budget_units({report_unit_group(_info(12, scheduled=NOW))}, [0])
    with open_ledger(ledger, LIMITS) as opened:
        assert set(opened.usage(fresh).values()) == {(0, 0)}  # all or nothing


def test_requerying_sums_epsilons_and_uses_per_unit(tmp_path):
    reports = write_avro(str(tmp_path / "r.avro"), [record(shared_info(i), [(1, 5, 0)]) for i in range(3)])
    ledger = f"sqlite:///{tmp_path / 'ledger.db'}"
    common = ["--mode", "key-discovery", "--ledger", ledger, "--epsilon-star", "20", "--max-uses", "3"]
    assert _run(Path(reports), tmp_path / "a", *common, "--epsilon", "10") == 0
    assert _run(Path(reports), tmp_path / "b", *common, "--epsilon", "7.5") == 0
    assert _run(Path(reports), tmp_path / "c", *common, "--epsilon", "2.5000001") == 1  # 10 + 7.5 + 2.5000001 > 20
    assert _run(Path(reports), tmp_path / "d", *common, "--epsilon", "2.5") == 0  # exactly 20
    units = budget_units({report_unit_group(_info(0))}, [0])
    with open_ledger(ledger, LedgerLimits(epsilon_units(20, "down"), 3)) as opened:
        assert list(opened.usage(units).values()) == [(epsilon_units(20, "up"), 3)]
    assert _run(Path(reports), tmp_path / "e", *common, "--epsilon", "0.001") == 1  # a fourth use


def test_a_retried_charge_of_the_same_job_id_does_not_charge_twice(tmp_path):
    ledger = f"sqlite:///{tmp_path / 'ledger.db'}"
    job = AggregationJob(AggregationParams("key-discovery", 10, "1e-5"), "job-1", ledger_url=ledger, limits=LIMITS,
                         noise_key=run_key())
    groups = {report_unit_group(_info(0))}
    stats = {"read": 1, "aggregated_reports": 1}
    assert charge(job, stats, groups)["charge"] == "charged"
    assert charge(job, stats, groups)["charge"] == "already_charged"  # a worker retried after a crash
    other = AggregationJob(AggregationParams("key-discovery", 10, "1e-5"), "job-2", ledger_url=ledger, limits=LIMITS,
                           noise_key=run_key())
    assert charge(other, stats, groups)["code"] == "PRIVACY_BUDGET_EXHAUSTED"
    with open_ledger(ledger, LIMITS) as opened:
        assert list(opened.usage(budget_units(groups, [0])).values()) == [(epsilon_units(10, "up"), 1)]


def test_a_completed_job_id_is_refused(tmp_path):
    reports = write_avro(str(tmp_path / "r.avro"), [record(shared_info(0), [(1, 5, 0)])])
    ledger = f"sqlite:///{tmp_path / 'ledger.db'}"
    assert _run(Path(reports), tmp_path / "a", "--mode", "key-discovery", "--ledger", ledger, "--job-id", "x") == 0
    assert _run(Path(reports), tmp_path / "b", "--mode", "key-discovery", "--ledger", ledger, "--job-id", "x") == 1
    assert _summary(tmp_path / "b")["receipt"]["code"] == "JOB_ALREADY_COMPLETED"


def test_encrypted_reports_are_opened_with_the_key_file(tmp_path):
    private, public = generate_key_pair()
    _, stranger = generate_key_pair()
    write_key_file(str(tmp_path / "private.json"), {"key-1": private})
    records = [record(shared_info(i, api=API_PROTECTED_AUDIENCE, debug=True), [(5, 7, 0)], public_key=public)
               for i in range(4)]
    records.append(record(shared_info(9, api=API_PROTECTED_AUDIENCE, debug=True), [(5, 7, 0)], public_key=stranger))
    reports = write_avro(str(tmp_path / "r.avro"), records)
    output = tmp_path / "out"
    assert _run(Path(reports), output, "--mode", "key-discovery", "--l1", "7", "--debug", "--no-noise",
                "--private-key", str(tmp_path / "private.json"), "--max-error-fraction", "0.25") == 0  # tau = 17.2
    assert _facts(output)[5]["metric"] == 28
    assert _summary(output)["counts"]["dead_lettered_by_reason"] == {"undecryptable_payload": 1}


@pytest.mark.parametrize("mode", ["domain", "key-discovery", "threshold"])
def test_released_buckets_follow_each_mode_rule_with_seeded_noise(tmp_path, mode):
    # Buckets with sums from 0 to ~1.5 tau so that noise decides some of them (every report within L1).
    records = [record(shared_info(i, debug=True), [(1 + i % 40, 1_000 * (1 + i % 40), 0)]) for i in range(1600)]
    reports = write_avro(str(tmp_path / "r.avro"), records)
    extra = [] if mode == "key-discovery" else ["--domain", str(_domain(tmp_path / "d.txt", range(0, 60, 2)))]
    output = tmp_path / "out"
    assert _run(Path(reports), output, "--mode", mode, "--epsilon", "1", "--debug", "--seed", "3", *extra) == 0
    params = AggregationParams(mode, 1, "1e-5")
    debug = _facts(output, "debug_summary_report")
    expected = {b for b, row in debug.items()
                if params.released(row["unnoised_metric"] + row["noise"], "in_domain" in row["annotations"])}
    facts = _facts(output)
    assert set(facts) == expected and expected
    assert all(facts[b]["metric"] == debug[b]["unnoised_metric"] + debug[b]["noise"] for b in facts)
    assert any(row["noise"] for row in debug.values())
    if mode == "key-discovery":
        assert all(abs(row["noise"]) <= math.floor(params.tau) for row in debug.values())


def test_avro_summary_report_has_minimal_bucket_bytes(tmp_path):
    reports = write_avro(str(tmp_path / "r.avro"), [record(shared_info(i, debug=True), [(300, 1, 0)]) for i in range(3)])
    output = tmp_path / "out"
    assert main(["--reports", reports, "--output", str(output), "--now", str(NOW), "--mode", "key-discovery", "--l1", "1",
                 "--debug", "--no-noise"]) == 0
    [path] = output.glob("summary_report-*.avro")
    with open(path, "rb") as handle:
        assert list(fastavro.reader(handle)) == [{"bucket": b"\x01\x2c", "metric": 3}]


@pytest.mark.parametrize(
    "arguments, mentions",
    [
        (["--epsilon", "0"], "epsilon"),
        (["--epsilon", "65"], "epsilon"),
        (["--delta", "x"], "--delta"),
        (["--mode", "domain"], "--domain"),
        (["--mode", "key-discovery", "--domain", "d.txt"], "drop --domain"),
        (["--mode", "key-discovery", "--no-noise"], "add --debug or --local-test"),
        (["--mode", "key-discovery", "--local-test", "--ledger", "sqlite:///l.db"], "drop --ledger"),
        (["--mode", "key-discovery", "--filtering-ids", "a"], "--filtering-ids"),
        # a path is made absolute on the command line (the workers of a cluster run elsewhere): named so
        (["--mode", "key-discovery", "--private-key", "missing.json"], f"private keys: cannot read '{Path.cwd()}/missing.json'"),
    ],
)
def test_bad_options_exit_2_with_one_line(tmp_path, capsys, arguments, mentions):
    reports = write_avro(str(tmp_path / "r.avro"), [record(shared_info(0), [(1, 1, 0)])])
    assert main(["--reports", reports, "--output", str(tmp_path / "o"), *arguments]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and mentions in err and "\n" not in err


def test_local_test_mode_says_nothing_is_private_and_never_opens_a_ledger(tmp_path, capsys, monkeypatch):
    """--local-test (the service's Local Testing Tool): exact sums without --debug, a report over L1 aggregated,
    no ledger file created (not even the default one), and the guarantee says nothing is private."""
    monkeypatch.chdir(tmp_path)
    ledger = tmp_path / "ledger.db"
    monkeypatch.setenv("PM_BEAM_LEDGER", f"sqlite:///{ledger}")
    reports = write_avro(str(tmp_path / "r.avro"), [record(shared_info(0), [(1, 1_000_000, 0)]),
                                                   record(shared_info(1), [(1, 7, 0), (2, 5, 0)])])
    assert _run(Path(reports), tmp_path / "out", "--mode", "key-discovery", "--local-test", "--no-noise") == 0
    printed = capsys.readouterr()
    assert printed.err.startswith("LOCAL TEST MODE: none: nothing in this run is private")
    summary = _summary(tmp_path / "out")
    assert summary["privacy"]["guarantee"].startswith("none: nothing in this run is private")
    assert summary["parameters"]["local_test"] and summary["parameters"]["ledger"] is None
    assert summary["receipt"]["charge"] == "none" and not ledger.exists() and not (tmp_path / ".pm-beam").exists()
    assert {b: row["metric"] for b, row in _facts(tmp_path / "out").items()} == {1: 1_000_007}  # 5 < tau
    assert _run(Path(reports), tmp_path / "again", "--mode", "key-discovery", "--seed", "1",  # a real job
                "--max-error-fraction", "1") == 0
    assert _summary(tmp_path / "again")["counts"]["dead_lettered_by_reason"] == {"value_sum_over_bound": 1}


def test_ledger_limits_that_differ_from_the_ledgers_are_refused(tmp_path, capsys):
    reports = write_avro(str(tmp_path / "r.avro"), [record(shared_info(0), [(1, 1, 0)])])
    ledger = f"sqlite:///{tmp_path / 'ledger.db'}"
    assert _run(Path(reports), tmp_path / "a", "--mode", "key-discovery", "--ledger", ledger) == 0
    assert _run(Path(reports), tmp_path / "b", "--mode", "key-discovery", "--ledger", ledger, "--max-uses", "2") == 2
    assert "ledger" in capsys.readouterr().err


def test_portable_runner_loopback_gives_the_same_sums(debug_reports, tmp_path):
    output = tmp_path / "out"
    domain = _domain(tmp_path / "domain.txt", [1, 2, 3])
    assert _run(debug_reports, output, "--mode", "threshold", "--domain", str(domain), "--debug", "--no-noise",
                "--runner=PortableRunner", "--job_endpoint=embed", "--environment_type=LOOPBACK") == 0
    assert {b: row["metric"] for b, row in _facts(output).items()} == {1: 30, 2: 61, 3: 90}


def test_domain_files_in_avro_and_text_with_bad_buckets_as_dead_letters(debug_reports, tmp_path):
    domain_dir = tmp_path / "domain"
    domain_dir.mkdir()
    write_avro(str(domain_dir / "a.avro"), [{"bucket": (1).to_bytes(16, "big")}, {"bucket": b"\x02"}, {"bucket": bytes(17)}],
               "aggregation_bucket")
    (domain_dir / "b.txt").write_text("0x3\n\n12\njunk\n-5\n")
    output = tmp_path / "out"
    assert _run(debug_reports, output, "--domain", str(domain_dir / "*"), "--debug", "--no-noise") == 0
    assert {b: row["metric"] for b, row in _facts(output).items()} == {1: 30, 2: 61, 3: 90, 12: 0}
    assert _summary(output)["counts"]["dead_lettered_by_reason"]["malformed_bucket"] == 3


def test_a_postgresql_ledger_serves_the_job_and_refuses_the_second_query(tmp_path, postgres_url):
    reports = write_avro(str(tmp_path / "r.avro"), [record(shared_info(i), [(1, 5, 0)]) for i in range(3)])
    assert _run(Path(reports), tmp_path / "a", "--mode", "key-discovery", "--ledger", postgres_url, "--seed", "1") == 0
    summary = _summary(tmp_path / "a")
    assert summary["receipt"]["charge"] == "charged" and summary["receipt"]["units"] == 1
    assert _run(Path(reports), tmp_path / "b", "--mode", "key-discovery", "--ledger", postgres_url) == 1
    assert _summary(tmp_path / "b")["receipt"]["code"] == "PRIVACY_BUDGET_EXHAUSTED"
