"""The per-report limits of ``python -m pipelines.aggregate`` (docs/aggregation.md, "Limits"), through the real
command: reports past a limit are dead letters with its reason, reports exactly at the limits are aggregated
(through both payload decoders: the canonical layout of 20 entries goes the vectorised way, a payload padded to
1000 entries the one-by-one way), the two options move the limits within L0 and L1 and never past them, and
summary.json records them."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipelines.aggregate import main
from pipelines.common import read_records
from schemas.aggregatable import encode_payload, report_record
from schemas.limits import MAX_KEY_ID_CHARS, MAX_PAYLOAD_BYTES, MAX_PAYLOAD_ENTRIES, MAX_SHARED_INFO_CHARS
from tests.support.aggregatable_reports import NOW, record, shared_info, write_avro

L1 = 65_536
AT_THE_LIMITS = [(bucket, L1 // 20, 0) for bucket in range(1, 21)]  # 20 contributions summing to 65536 ...
AT_THE_LIMITS[0] = (1, L1 // 20 + L1 % 20, 0)


def _run(tmp_path: Path, records: list[dict], *options: str) -> tuple[int, dict, dict[int, int]]:
    """The job (debug, exact sums, buckets 0 to 1000 as the domain) on ``records``: its status, summary and sums."""
    tmp_path.mkdir(exist_ok=True)
    reports = write_avro(str(tmp_path / "reports.avro"), records)
    (tmp_path / "domain.txt").write_text("".join(f"{bucket}\n" for bucket in range(1001)))
    output = tmp_path / "out"
    status = main(["--reports", reports, "--output", str(output), "--now", str(NOW), "--output-format", "jsonl",
                   "--mode", "domain", "--domain", str(tmp_path / "domain.txt"), "--debug", "--no-noise",
                   "--max-error-fraction", "1", *options])
    if status != 0:
        return status, {}, {}
    sums = {int(row["bucket"]): row["metric"] for path in output.glob("summary_report-*")
            for row in read_records(str(path)) if row["metric"]}
    return status, json.loads((output / "summary.json").read_text()), sums


def test_the_probe_reports_are_dead_letters_and_reports_at_the_limits_are_aggregated(tmp_path):
    hundred_thousand = [(bucket, 1, 0) for bucket in range(1, 100_001)]
    records = [
        record(shared_info(0, debug=True), hundred_thousand, pad_to=0),  # the probe: 100,000 contributions
        record(shared_info(1, debug=True), [(7, 2**32 - 1, 0)]),  # the probe: a value of 2^32 - 1
        record(shared_info(2, debug=True), [(bucket, 1, 0) for bucket in range(1, 22)]),  # 21 contributions
        record(shared_info(3, debug=True), [(7, 1, 0)], pad_to=MAX_PAYLOAD_ENTRIES + 1),  # 1001 entries, in 41 KB
        record(shared_info(4, debug=True), [(1, 1, 0)], key_id="k" * (MAX_KEY_ID_CHARS + 1)),
        report_record(shared_info(5, debug=True) + " " * MAX_SHARED_INFO_CHARS, encode_payload([(1, 1, 0)]), ""),
        record(shared_info(10, debug=True), AT_THE_LIMITS),  # 20 entries: the vectorised decoder
        record(shared_info(11, debug=True), AT_THE_LIMITS, pad_to=MAX_PAYLOAD_ENTRIES),  # 1000 entries: one by one
    ]
    assert len(records[0]["payload"]) > MAX_PAYLOAD_BYTES > len(records[3]["payload"]) > len(records[7]["payload"])
    status, summary, sums = _run(tmp_path, records)
    assert status == 0
    assert summary["counts"]["dead_lettered_by_reason"] == {
        "oversized_field:payload": 1, "value_sum_over_bound": 1, "too_many_contributions": 1,
        "too_many_payload_entries": 1, "oversized_field:key_id": 1, "oversized_field:shared_info": 1}
    assert summary["counts"]["aggregated_reports"] == 2
    assert sums == {bucket: 2 * value for bucket, value, _ in AT_THE_LIMITS}
    parameters = summary["parameters"]
    assert (parameters["max_contributions_per_report"], parameters["max_report_value_sum"]) == (20, L1)
    assert (parameters["max_payload_entries"], parameters["max_payload_bytes"], parameters["max_key_id_chars"],
            parameters["max_shared_info_chars"]) == (1000, 65_536, 128, 4096)


def test_the_options_lower_the_limits_and_move_with_l0_and_l1(tmp_path):
    six = record(shared_info(0, debug=True), [(bucket, 10, 0) for bucket in range(1, 7)])  # 6 contributions, sum 60
    status, summary, _ = _run(tmp_path / "a", [six], "--max-contributions-per-report", "5")
    assert status == 1  # its only report is a dead letter: nothing to aggregate
    status, summary, sums = _run(tmp_path / "b", [six], "--max-report-value-sum", "60")
    assert status == 0 and sum(sums.values()) == 60
    hundred = record(shared_info(1, debug=True), [(bucket, 1, 0) for bucket in range(1, 101)], pad_to=0)
    assert _run(tmp_path / "c", [six, hundred])[1]["counts"]["dead_lettered_by_reason"] == {"too_many_contributions": 1}
    status, summary, sums = _run(tmp_path / "d", [six, hundred], "--l0", "100")  # Protected Audience's 100
    assert status == 0 and summary["parameters"]["max_contributions_per_report"] == 100 and sum(sums.values()) == 160


@pytest.mark.parametrize("options, says", [
    (["--max-contributions-per-report", "21"], "--max-contributions-per-report 21 is above --l0 20"),
    (["--max-report-value-sum", "65537"], "--max-report-value-sum 65537 is above --l1 65536"),
    (["--l1", "100", "--max-report-value-sum", "101"], "above --l1 100"),
    (["--max-contributions-per-report", "0"], "--max-contributions-per-report"),
])
def test_limits_past_the_guarantees_bounds_are_refused_in_one_line(tmp_path, capsys, options, says):
    assert _run(tmp_path, [record(shared_info(0, debug=True), [(1, 1, 0)])], *options)[0] == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and says in err and "\n" not in err
