"""``python -m pipelines.registrations`` end to end: the synthetic ARA dataset's registration log in, the reports
of the browser's specification modes out, checked against an in-process replay of every device, then summed by
``python -m pipelines.aggregate``."""
from __future__ import annotations

import collections
import glob
import json
from pathlib import Path

import fastavro
import orjson
import pytest

from pipelines import aggregate, registrations
from pipelines.ara_browser import BrowserConfig, event_report_record, replay_device
from pipelines.common import read_records
from schemas.aggregatable import decode_payload
from schemas.registration_log import ParsedRegistration, parse_entry
from synthetic.ara import generate_ara
from tests.support.cli import run_main
from transforms.core.mechanisms.noise import SeededSource
from transforms.event_level.mechanisms.ara_spec import SpecEventReport

SEED = 7
JOB_TIME = 1_705_000_000  # 2024-01-11: the generated reports (2024-01-01 to 2024-01-11) are not yet too old


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    out = tmp_path_factory.mktemp("ara")
    stats = generate_ara(out, devices=60, days=10, impressions_per_day=4, seed=2, fmt="jsonl", registrations=True,
                         progress=False)
    return stats, out


@pytest.fixture(scope="module")
def released(log, tmp_path_factory):
    _, data = log
    output = tmp_path_factory.mktemp("registrations")
    status = registrations.main(["--registrations", str(data / "registrations-*.jsonl"), "--output", str(output),
                                 "--seed", str(SEED)])
    assert status == 0
    return output, json.loads((output / "summary.json").read_text())


def _lines(path_glob: str) -> list[bytes]:
    return [line for path in sorted(glob.glob(path_glob)) for line in Path(path).read_bytes().splitlines()]


def test_counts_reconcile(log, released):
    stats, _ = log
    _, summary = released
    counts = summary["counts"]
    assert counts["read"] == counts["parsed"] == stats.sources + stats.triggers
    assert counts["dead_lettered"] == 0
    assert counts["devices"] == stats.devices
    assert sum(counts["aggregatable_outcomes"].values()) == stats.triggers  # every trigger has aggregatable data
    assert summary["parameters"]["noise_source"] == "seeded"


def test_reports_equal_an_in_process_replay_of_every_device(log, released):
    """The Beam job sends exactly what replaying each device's registrations in process sends, with the same
    per-device randomness."""
    _, data = log
    output, summary = released
    devices = collections.defaultdict(list)
    for line in _lines(str(data / "registrations-*.jsonl")):
        for result in parse_entry(orjson.loads(line), BrowserConfig().aggregation_coordinator_origins):
            assert isinstance(result, ParsedRegistration)
            devices[result.device_id].append(result)
    expected_event, expected_aggregatable = [], []
    for device_id, parsed in devices.items():
        source = SeededSource(SEED).keyed_child(("registrations", device_id))
        for report in replay_device(parsed, BrowserConfig(), random_source=source).reports:
            if isinstance(report, SpecEventReport):
                expected_event.append(json.dumps(event_report_record(report), sort_keys=True))
            else:
                expected_aggregatable.append(report)
    actual_event = [json.dumps(json.loads(line), sort_keys=True) for line in _lines(str(output / "event_level_reports-*"))]
    assert sorted(actual_event) == sorted(expected_event) and actual_event
    assert summary["counts"]["event_level_reports"] == len(expected_event)
    actual = []
    for path in glob.glob(str(output / "aggregatable_reports-*.avro")):
        with open(path, "rb") as handle:
            for record in fastavro.reader(handle):
                info = json.loads(record["shared_info"])
                contributions = tuple(entry for entry in decode_payload(record["payload"]) if entry[1])
                actual.append((info["reporting_origin"], info["attribution_destination"],
                               int(info["scheduled_report_time"]), contributions))
    expected = [(r.reporting_origin, r.attribution_destination, r.report_time_micros // 1_000_000,
                 () if r.is_null else r.contributions) for r in expected_aggregatable]
    assert sorted(actual) == sorted(expected)
    assert sum(1 for *_, contributions in actual if contributions) > 0


def test_the_same_seed_gives_the_same_reports(log, released, tmp_path):
    _, data = log
    output, _ = released
    assert registrations.main(["--registrations", str(data / "registrations-*.jsonl"), "--output", str(tmp_path),
                               "--seed", str(SEED)]) == 0
    assert sorted(_lines(str(tmp_path / "event_level_reports-*"))) == sorted(_lines(str(output / "event_level_reports-*")))


def test_the_aggregation_service_sums_the_reports(log, released, tmp_path):
    """The released aggregatable reports are what ``pipelines.aggregate`` reads: with no noise, in local test
    mode, the summary report over the generator's domain is the sum of the contributions."""
    stats, data = log
    output, _ = released
    sums: collections.Counter = collections.Counter()
    for path in glob.glob(str(output / "aggregatable_reports-*.avro")):
        with open(path, "rb") as handle:
            for record in fastavro.reader(handle):
                for bucket, value, _ in decode_payload(record["payload"]):
                    sums[bucket] += value
    status = aggregate.main(["--reports", str(output / "aggregatable_reports-*.avro"), "--domain",
                             str(data / "domain.avro"), "--output", str(tmp_path), "--local-test", "--no-noise",
                             "--now", str(JOB_TIME)])
    assert status == 0
    summary = {}
    for path in glob.glob(str(tmp_path / "summary_report*")):
        with open(path, "rb") as handle:
            for row in fastavro.reader(handle):
                summary[int.from_bytes(row["bucket"], "big")] = row["metric"]
    assert summary and {bucket: metric for bucket, metric in summary.items() if metric} == \
        {bucket: total for bucket, total in sums.items() if total}


def _entry(device: str, time_ms: int, headers: dict, eligible: str | None = None,
           context: str = "https://publisher.example") -> str:
    request = {"context_origin": context}
    if eligible:
        request["Attribution-Reporting-Eligible"] = eligible
    return json.dumps({"device_id": device, "timestamp": str(time_ms), "registration_request": request,
                       "responses": [{"url": "https://adtech.example/register", "response": headers}]})


def test_dead_letters_carry_the_specification_reasons(tmp_path, capsys):
    source = {"destination": "https://shop.example", "source_event_id": "1"}
    greedy = {**source, "max_event_level_reports": 5}  # 118,755 states: 16.6 bits at eps 14, above 11.46
    huge = {**source, "max_event_level_reports": 20, "trigger_data": list(range(32)),
            "event_report_windows": {"end_times": [3600, 7200, 10800, 14400, 18000]}}  # more than 2^32 - 1 states
    lines = [
        _entry("d1", 1_000, {"Attribution-Reporting-Register-Source": source}, "navigation-source"),
        _entry("d1", 2_000, {"Attribution-Reporting-Register-Source": greedy}, "navigation-source"),
        _entry("d1", 2_500, {"Attribution-Reporting-Register-Source": huge}, "navigation-source"),
        _entry("d1", 3_000, {"Attribution-Reporting-Register-Trigger": {"event_trigger_data": {}}},
               context="https://shop.example"),
        _entry("d1", 4_000, {"Attribution-Reporting-Register-Trigger": {"event_trigger_data": [{"trigger_data": "1"}]}},
               context="https://shop.example"),
        "not json",
    ]
    log_path = tmp_path / "log.jsonl"
    log_path.write_text("\n".join(lines) + "\n")
    output = tmp_path / "out"
    status, summary, printed = run_main(registrations.main, capsys, [
        "--registrations", log_path, "--output", output, "--seed", 1, "--max-error-fraction", 0.9])
    assert status == 0, printed
    counts = summary["counts"]
    assert (counts["read"], counts["parsed"], counts["dead_lettered"]) == (6, 2, 4)
    assert counts["dead_lettered_by_reason"] == {"source_channel_capacity_limit": 1, "event_trigger_data_wrong_type": 1,
                                                 "malformed_json": 1, "source_trigger_state_cardinality_limit": 1}
    assert counts["event_level_outcomes"] == {"success": 1} or counts["event_level_outcomes"] == {
        "falsely_attributed_source": 1} or counts["event_level_outcomes"] == {"never_attributed_source": 1}


def test_numbers_of_thousands_of_digits_are_dead_letters_not_a_failed_job(tmp_path, capsys):
    """Python's ``int`` refuses strings past 4,300 digits with an error of its own: a registration whose priority,
    debug key or time has 5,000 digits is one dead letter with the specification's reason, and the job goes on."""
    source = {"destination": "https://shop.example", "source_event_id": "1"}
    many = "9" * 5_000
    lines = [
        _entry("d1", 1_000, {"Attribution-Reporting-Register-Source": source}, "navigation-source"),
        _entry("d1", 1_500, {"Attribution-Reporting-Register-Source": {**source, "priority": many}}, "navigation-source"),
        _entry("d1", 1_600, {"Attribution-Reporting-Register-Source": {**source, "source_event_id": many}},
               "navigation-source"),
        _entry("d1", 1_700, {"Attribution-Reporting-Register-Source": {**source, "expiry": many}}, "navigation-source"),
        _entry("d1", 2_000, {"Attribution-Reporting-Register-Trigger": {
            "event_trigger_data": [{"trigger_data": "1"}], "debug_key": many}}, context="https://shop.example"),
        _entry("d1", 0, {"Attribution-Reporting-Register-Source": source}, "navigation-source").replace(
            '"timestamp": "0"', f'"timestamp": "{many}"'),
        # leading zeros are allowed, as Chromium's StringToInt64 allows them
        _entry("d1", 3_000, {"Attribution-Reporting-Register-Source": {**source, "priority": "0" * 5_000 + "7"}},
               "navigation-source"),
    ]
    log_path = tmp_path / "log.jsonl"
    log_path.write_text("\n".join(lines) + "\n")
    status, summary, printed = run_main(registrations.main, capsys, [
        "--registrations", log_path, "--output", tmp_path / "out", "--seed", 1, "--max-error-fraction", 0.9])
    assert status == 0, printed
    counts = summary["counts"]
    assert (counts["read"], counts["parsed"], counts["dead_lettered"]) == (7, 3, 4)
    assert counts["dead_lettered_by_reason"] == {"priority_value_invalid": 1, "source_event_id_value_invalid": 1,
                                                 "expiry_value_invalid": 1, "timestamp_invalid": 1}


def _report_times(output: Path) -> list[tuple[str, int]]:
    """(source device's reporting URL, report time) of every event-level report written."""
    return sorted((record["report_url"], int(record["report_time"]))
                  for record in map(json.loads, _lines(str(output / "event_level_reports-*.jsonl"))))


def test_delivery_entries_move_report_times_or_keep_reports_from_being_sent(tmp_path, capsys):
    """Two devices' source and trigger, the same seed with and without their delivery entries: d1 is offline
    across its first report window's end (2 days), so the reports due then are sent 5 minutes later; d2 goes
    offline for good before any report is due, so none of its reports is sent. Nothing else changes."""
    day = 86_400_000
    source = {"destination": "https://shop.example", "source_event_id": "1"}
    trigger = {"event_trigger_data": [{"trigger_data": "1"}]}
    logged = []
    for device, url in (("d1", "https://one.example/register"), ("d2", "https://two.example/register")):
        for line in (_entry(device, 1_000, {"Attribution-Reporting-Register-Source": source}, "navigation-source"),
                     _entry(device, 2_000, {"Attribution-Reporting-Register-Trigger": trigger},
                            context="https://shop.example")):
            logged.append(line.replace("https://adtech.example/register", url))
    due = 1_000 + 2 * day  # the end of the first report window
    delivery = [json.dumps({"device_id": "d1", "timestamp": str(due - 1), "connection": False}),
                json.dumps({"device_id": "d1", "timestamp": str(due + 1), "connection": True}),
                json.dumps({"device_id": "d2", "timestamp": "3000", "connection": False})]
    runs = {}
    for name, lines in (("plain", logged), ("delivered", logged + delivery)):
        log_path = tmp_path / f"{name}.jsonl"
        log_path.write_text("\n".join(lines) + "\n")
        status, summary, printed = run_main(registrations.main, capsys, [
            "--registrations", log_path, "--output", tmp_path / name, "--seed", 3])
        assert status == 0, printed
        runs[name] = (summary, _report_times(tmp_path / name))
    plain, delivered = runs["plain"][1], runs["delivered"][1]
    ones = [(url, time) for url, time in plain if url.startswith("https://one.example")]
    twos = [(url, time) for url, time in plain if url.startswith("https://two.example")]
    assert any(time == due for _, time in ones) and twos  # the case is not vacuous
    moved = sorted((url, time + 5 * 60_000 if time == due else time) for url, time in ones)
    assert delivered == moved
    summary = runs["delivered"][0]
    assert summary["counts"]["report_delivery"] == {"sent_late": sum(time == due for _, time in ones),
                                                    "never_sent": len(twos)}
    assert summary["counts"]["parsed"] == runs["plain"][0]["counts"]["parsed"] + 3  # delivery entries count as read


def test_the_job_writes_the_verbose_debug_reports_registrations_ask_for(tmp_path, capsys):
    """A source asking for debug reports with permission, one asking without, a trigger with no source on its
    destination, and a header that fails to parse with report-header-errors: three verbose debug reports."""
    def entry(time, headers, eligible=None, context="https://publisher.example", permission=True):
        request = {"context_origin": context, **({"Attribution-Reporting-Eligible": eligible} if eligible else {})}
        return json.dumps({"device_id": "d1", "timestamp": str(time), "registration_request": request,
                           "responses": [{"url": "https://adtech.example/register", "debug_permission": permission,
                                          "response": headers}]})

    source = {"destination": "https://shop.example", "source_event_id": "7", "debug_reporting": True}
    lines = [entry(1_000, {"Attribution-Reporting-Register-Source": source}, "navigation-source"),
             entry(1_500, {"Attribution-Reporting-Register-Source": source}, "navigation-source", permission=False),
             entry(2_000, {"Attribution-Reporting-Register-Trigger": {"debug_reporting": True}},
                   context="https://other.example"),
             entry(3_000, {"Attribution-Reporting-Register-Trigger": {"event_trigger_data": {}},
                           "Attribution-Reporting-Info": "report-header-errors"}, context="https://shop.example")]
    log_path = tmp_path / "log.jsonl"
    log_path.write_text("\n".join(lines) + "\n")
    status, summary, printed = run_main(registrations.main, capsys, [
        "--registrations", log_path, "--output", tmp_path / "out", "--seed", 1, "--max-error-fraction", 0.5])
    assert status == 0, printed
    reports = sorted((json.loads(line) for line in _lines(str(tmp_path / "out" / "debug_reports-*.jsonl"))),
                     key=lambda record: int(record["report_time"]))
    assert summary["counts"]["debug_reports"] == 3 and "debug reports 3" in printed
    assert {record["report_url"] for record in reports} == {
        "https://adtech.example/.well-known/attribution-reporting/debug/verbose"}
    assert [record["report_time"] for record in reports] == ["1000", "2000", "3000"]
    assert reports[0]["payload"][0]["type"] in ("source-success", "source-noised")  # its randomized response
    assert reports[0]["payload"][0]["body"] == {"attribution_destination": "https://shop.example",
                                                "source_event_id": "7", "source_site": "https://publisher.example"}
    assert reports[1]["payload"] == [{"type": "trigger-no-matching-source",
                                      "body": {"attribution_destination": "https://other.example"}}]
    assert reports[2]["payload"] == [{"type": "header-parsing-error", "body": {
        "context_site": "https://shop.example", "header": "Attribution-Reporting-Register-Trigger",
        "value": '{"event_trigger_data":{}}'}}]


def test_the_job_sends_aggregatable_debug_reports_and_keeps_named_budgets(tmp_path, capsys):
    """Without debug permission: a source's aggregatable debug report names its outcome (success or noised, the
    same key through unspecified), a trigger with no source on its destination its own, a trigger whose outcome
    its configuration does not list a null report, and a source's named
    budget of 100 lets one trigger of 100 through and refuses the next (interop: aggregatable_named_budgets)."""
    def entry(time, headers, eligible=None, context="https://publisher.example"):
        request = {"context_origin": context, **({"Attribution-Reporting-Eligible": eligible} if eligible else {})}
        return json.dumps({"device_id": "d1", "timestamp": str(time), "registration_request": request,
                           "responses": [{"url": "https://adtech.example/register", "response": headers}]})

    source = {"destination": "https://shop.example", "aggregation_keys": {"k": "0x1"}, "named_budgets": {"n": 100},
              "aggregatable_debug_reporting": {"budget": 50, "key_piece": "0x10", "debug_data": [
                  {"types": ["unspecified"], "key_piece": "0x100", "value": 7}]}}
    trigger = {"aggregatable_trigger_data": [{"key_piece": "0x2", "source_keys": ["k"]}],
               "aggregatable_values": {"k": 100}, "named_budgets": [{"name": "n"}],
               "aggregatable_debug_reporting": {"key_piece": "0x1000", "debug_data": [
                   {"types": ["trigger-no-matching-source"], "key_piece": "0x10000", "value": 9}]}}
    lines = [entry(1_000, {"Attribution-Reporting-Register-Source": source}, "navigation-source"),
             entry(2_000, {"Attribution-Reporting-Register-Trigger": trigger}, context="https://other.example"),
             entry(3_000, {"Attribution-Reporting-Register-Trigger": trigger}, context="https://shop.example"),
             entry(4_000, {"Attribution-Reporting-Register-Trigger": trigger}, context="https://shop.example")]
    log_path = tmp_path / "log.jsonl"
    log_path.write_text("\n".join(lines) + "\n")
    status, summary, printed = run_main(registrations.main, capsys, [
        "--registrations", log_path, "--output", tmp_path / "out", "--seed", 1])
    assert status == 0, printed
    debug = sorted((json.loads(line) for line in _lines(str(tmp_path / "out" / "debug_reports-*.jsonl"))),
                   key=lambda record: int(record["report_time"]))
    assert [(record["report_time"], [(h["key"], h["value"]) for h in record["payload"]["histograms"]])
            for record in debug] == [("1000", [("0x110", 7)]), ("2000", [("0x11000", 9)]),
                                     ("3000", [("0x0", 0)]), ("4000", [("0x0", 0)])]  # types not listed: null
    assert {record["report_url"] for record in debug} == {
        "https://adtech.example/.well-known/attribution-reporting/debug/report-aggregate-debug"}
    assert summary["counts"]["aggregatable_outcomes"]["success"] == 1
    assert summary["counts"]["aggregatable_outcomes"]["insufficient_named_budget"] == 1


def test_filtering_ids_reach_the_aggregation_services_filtering_ids(tmp_path, capsys):
    """A trigger giving one key filtering id 3 (two bytes wide): the job's reports carry it, and the Aggregation
    Service sums that key only under ``--filtering-ids 3``, the other only under the default 0."""
    source = {"destination": "https://shop.example", "aggregation_keys": {"a": "0x100", "b": "0x200"}}
    trigger = {"aggregatable_trigger_data": [{"key_piece": "0x1", "source_keys": ["a", "b"]}],
               "aggregatable_values": {"a": {"value": 40, "filtering_id": "3"}, "b": 2},
               "aggregatable_filtering_id_max_bytes": 2}
    day = 86_400_000
    lines = [_entry("d1", JOB_TIME * 1_000 - 2 * day, {"Attribution-Reporting-Register-Source": source},
                    "navigation-source"),
             _entry("d1", JOB_TIME * 1_000 - day, {"Attribution-Reporting-Register-Trigger": trigger},
                    context="https://shop.example")]
    log_path = tmp_path / "log.jsonl"
    log_path.write_text("\n".join(lines) + "\n")
    status, _, printed = run_main(registrations.main, capsys, [
        "--registrations", log_path, "--output", tmp_path / "out", "--seed", 1])
    assert status == 0, printed
    reports = str(tmp_path / "out" / "aggregatable_reports-*.avro")
    domain = tmp_path / "domain.txt"
    domain.write_text(f"{0x101}\n{0x201}\n")
    sums = {}
    for ids in ("3", "0"):
        output = tmp_path / f"ids-{ids}"
        assert aggregate.main(["--reports", reports, "--domain", str(domain), "--output", str(output),
                               "--local-test", "--no-noise", "--now", str(JOB_TIME), "--filtering-ids", ids]) == 0
        sums[ids] = {int.from_bytes(row["bucket"], "big"): row["metric"] for path in sorted(output.glob("summary_report-*"))
                     for row in read_records(str(path))}
    assert sums == {"3": {0x101: 40, 0x201: 0}, "0": {0x101: 0, 0x201: 2}}


def test_a_pattern_that_matches_no_file_is_a_one_line_error(tmp_path, capsys):
    status, _, printed = run_main(registrations.main, capsys, [
        "--registrations", tmp_path / "none-*.jsonl", "--output", tmp_path / "out"])
    assert status == 2
    assert printed.strip() == f"error: no input file matches '{tmp_path / 'none-*.jsonl'}'"


def test_a_log_of_nothing_valid_releases_nothing(tmp_path, capsys):
    log_path = tmp_path / "log.jsonl"
    log_path.write_text("not json\n{}\n")
    output = tmp_path / "out"
    status, _, printed = run_main(registrations.main, capsys, ["--registrations", log_path, "--output", output])
    assert status == 1
    assert "none of the 2 records read is valid" in printed
    assert not glob.glob(str(output / "event_level_reports-*")) and not glob.glob(str(output / "aggregatable_reports-*"))


def test_streaming_is_refused(tmp_path, capsys):
    status = registrations.main(["--registrations", str(tmp_path / "x.jsonl"), "--output", str(tmp_path), "--streaming"])
    assert status == 2
    assert "batch only" in capsys.readouterr().err


def test_a_log_cannot_choose_the_noise():
    """A real log's ``randomized_response`` (the interop harness's way of fixing a source's randomized response)
    is ignored outside the interop runner: here it asks for a source that is never attributed."""
    fixed = {"Attribution-Reporting-Register-Source": {"destination": "https://shop.example", "source_event_id": "1"}}
    entries = [json.loads(_entry("d1", 1_000, fixed, "navigation-source")),
               json.loads(_entry("d1", 2_000, {"Attribution-Reporting-Register-Trigger": {
                   "event_trigger_data": [{"trigger_data": "1"}]}}, context="https://shop.example"))]
    entries[0]["responses"][0]["randomized_response"] = []
    parsed = [result for entry in entries for result in parse_entry(entry, BrowserConfig().aggregation_coordinator_origins)]
    assert parsed[0].randomized_response == ()
    assert len(replay_device(parsed, BrowserConfig()).reports) == 1  # truthful: the trigger is reported
    assert replay_device(parsed, BrowserConfig(), test_choices=True).reports == []  # the harness's fixed choice
