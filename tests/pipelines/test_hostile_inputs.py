"""Every input path of the pipelines, fed valid records mixed with a fixed, seeded batch of hostile ones
(``tests.support.hostile_inputs``: fields replaced by NaN, infinities, 2^70, blank text, lone surrogates, nested
values, or removed or written twice; lines cut short, invalid UTF-8, nesting deeper than any parser allows; Avro
records of a loose writer schema; protobuf messages with bytes flipped, cut or random; for the aggregation job CBOR
bombs, payloads, shared_info and key ids past their bounds, reports over the contribution limits) through the real
command with ``--max-error-fraction 1``: the run does not crash, its summary's counts reconcile (read = parsed or
aggregated + dead lettered, and read is every record of the files) and each dead letter carries its raw input,
where it came from and a documented reason. Each run takes 2 to 4 s."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipelines import aggregate, event_level, kanon, measurement, summary_client
from pipelines.common import output_records
from schemas import codecs
from schemas.codecs import EVENT_SPECS
from schemas.rows import AraSource, EventLevelSource, JoinEvent
from tests.support import aggregatable_reports, event_level_events, measurement_data, summary_events
from tests.support.cli import run_main
from tests.support.hostile_inputs import (
    T,
    documented_reasons,
    hostile_reports,
    wire_record,
    write_hostile_files,
    write_loose_avro,
)
from transforms.event_level.mechanisms.config import REASONS as CONFIGURATION_REASONS

HOSTILE = 30  # records of each format in each hostile input
EVENT_REASONS = documented_reasons(codecs.__doc__)
REPORT_REASONS = documented_reasons((Path(__file__).parents[2] / "docs" / "aggregation.md").read_text())


def _input(directory: Path, name: str, rows: list, seed: int) -> tuple[str, int]:
    """``directory/name/``: the valid ``rows`` of event type ``name`` as JSON Lines and the hostile files; its glob
    and how many records it holds."""
    folder = directory / name
    folder.mkdir()
    (folder / "valid.jsonl").write_text("".join(json.dumps(wire_record(name, row)) + "\n" for row in rows))
    return str(folder / "*"), len(rows) + write_hostile_files(folder, EVENT_SPECS[name], HOSTILE, seed)


def _inputs(tmp_path: Path, pipeline: str) -> tuple[list[str], int]:
    """The arguments naming a pipeline's inputs, each valid records and a hostile batch, and how many records."""
    if pipeline == "kanon":
        joins = [JoinEvent(f"https://dsp.example/ig/{i % 4}", f"u{i}", T + i * 60_000_000) for i in range(40)]
        pattern, count = _input(tmp_path, "join_event", joins, seed=1)
        return ["--input", pattern], count
    if pipeline == "measurement":
        impressions, conversions = measurement_data.random_population(1, devices=6, days=20)
        first, count_i = _input(tmp_path, "impression", impressions, seed=2)
        second, count_c = _input(tmp_path, "conversion", conversions, seed=3)
        return ["--impressions", first, "--conversions", second, "--batch-size", "5"], count_i + count_c
    if pipeline == "event_level":
        rows = event_level_events.random_events(1)
        names = ("event_level_source", "event_level_trigger")
        groups = [[row for row in rows if isinstance(row, EventLevelSource) == (name == names[0])] for name in names]
    else:
        rows = summary_events.random_ara(1)
        names = ("ara_source", "ara_trigger")
        groups = [[row for row in rows if isinstance(row, AraSource) == (name == names[0])] for name in names]
    (sources, count_s), (triggers, count_t) = (_input(tmp_path, name, group, seed) for seed, (name, group)
                                               in enumerate(zip(names, groups, strict=True), start=4))
    return ([] if pipeline == "event_level" else ["ara"]) + ["--sources", sources, "--triggers", triggers], count_s + count_t


# reasons the pipelines give after parsing: an event-level source's configuration (its ``ConfigurationError``)
PIPELINE_REASONS = {"event_level": set(CONFIGURATION_REASONS)}
MAINS = {"kanon": kanon.main, "measurement": measurement.main, "event_level": event_level.main,
         "summary_client": summary_client.main}


def _dead_letters(output: Path) -> list[dict]:
    letters = list(output_records(str(output), "dead_letters"))
    assert all(letter["raw"] and letter["source"] and letter["reason"] for letter in letters)
    return letters


@pytest.mark.parametrize("pipeline", MAINS)
def test_an_event_pipeline_reads_hostile_records_as_counted_dead_letters(pipeline, tmp_path, capsys):
    arguments, records = _inputs(tmp_path, pipeline)
    output = tmp_path / "out"
    status, summary, printed = run_main(MAINS[pipeline], capsys, [*arguments, "--output", output, "--seed", "1",
                                                                  "--max-error-fraction", "1"])
    assert status == 0, printed
    counts = summary["counts"]
    assert counts["read"] == records == counts["parsed"] + counts["dead_lettered"]
    letters = _dead_letters(output)
    assert len(letters) == counts["dead_lettered"] >= 2 * HOSTILE  # a few hostile records are valid ones
    undocumented = {letter["reason"] for letter in letters if not EVENT_REASONS.fullmatch(letter["reason"])}
    assert undocumented <= PIPELINE_REASONS.get(pipeline, set()), undocumented


def test_the_aggregation_job_reads_hostile_reports_as_counted_dead_letters(tmp_path, capsys):
    folder = tmp_path / "reports"
    folder.mkdir()
    valid = [aggregatable_reports.record(aggregatable_reports.shared_info(i), [(1 + i % 5, 100, 0)]) for i in range(40)]
    aggregatable_reports.write_avro(str(folder / "valid.avro"), valid)
    hostile = hostile_reports(aggregatable_reports.record(aggregatable_reports.shared_info(99), [(7, 1, 0)]), 3 * HOSTILE, 7)
    write_loose_avro(folder / "hostile.avro", "AggregatableReport", hostile)
    output = tmp_path / "out"
    status, summary, printed = run_main(aggregate.main, capsys, [
        "--reports", folder / "*.avro", "--output", output, "--now", aggregatable_reports.NOW, "--mode", "key-discovery",
        "--ledger", f"sqlite:///{tmp_path / 'ledger.db'}", "--seed", "1", "--max-error-fraction", "1"])
    assert status == 0, printed
    counts = summary["counts"]
    assert counts["read"] == len(valid) + len(hostile) == counts["aggregated_reports"] + counts["dead_lettered"]
    letters = _dead_letters(output)
    assert len(letters) == counts["dead_lettered"] and counts["aggregated_reports"] >= len(valid)
    assert all(REPORT_REASONS.fullmatch(letter["reason"]) for letter in letters), counts["dead_lettered_by_reason"]
    assert {"too_many_contributions", "value_sum_over_bound", "oversized_field:payload", "oversized_field:key_id",
            "oversized_field:shared_info", "malformed_payload"} <= set(counts["dead_lettered_by_reason"])
