"""``python -m pipelines.generate ara --registrations``: the ARA dataset as registration logs, parsed as the
specification does (``schemas/registration_log.py``) and replayed through the browser (``pipelines/ara_browser.py``)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fastavro
import pytest

from pipelines import generate
from pipelines.ara_browser import BrowserConfig, replay_device
from schemas.registration_log import ParsedRegistration, parse_entry
from schemas.registrations import SourceRegistration, TriggerRegistration
from synthetic.ara import (
    ARA_ADVERTISERS,
    ARA_CAMPAIGNS_PER_ADVERTISER,
    ARA_CATALOGUE,
    ARA_CLICK_PRIORITY,
    ARA_PUBLISHERS,
    generate_ara,
)
from tests.support.files import output_bytes
from transforms.summary_reports.mechanisms.ara_spec import SpecAggregatableReport

COORDINATORS = ["https://coordinator.test"]


def log_lines(stats) -> list[bytes]:
    return [line for path in stats.registration_files for line in Path(path).read_bytes().splitlines(keepends=True)]


@pytest.fixture(scope="module")
def logged(tmp_path_factory):
    """200 devices over 20 days with the registration log, every line parsed."""
    stats = generate_ara(tmp_path_factory.mktemp("ara"), devices=200, days=20, seed=5, shards=2, progress=False,
                         registrations=True)
    entries = [json.loads(line) for line in log_lines(stats)]
    parsed = [parse_entry(entry, COORDINATORS) for entry in entries]
    return stats, entries, parsed


def test_every_line_parses_into_one_registration(logged):
    stats, entries, parsed = logged
    assert [Path(path).name for path in stats.registration_files] == [
        "registrations-00000-of-00002.jsonl", "registrations-00001-of-00002.jsonl"]
    assert all(len(results) == 1 and isinstance(results[0], ParsedRegistration) for results in parsed)
    registrations = [results[0].registration for results in parsed]
    sources = [r for r in registrations if isinstance(r, SourceRegistration)]
    triggers = [r for r in registrations if isinstance(r, TriggerRegistration)]
    assert (len(sources), len(triggers)) == (stats.sources, stats.triggers) and stats.triggers > 0
    assert stats.registrations == len(entries) == stats.sources + stats.triggers
    assert [results[0].device_id for results in parsed] == [entry["device_id"] for entry in entries]
    # device by device, each in time order, sources first at equal times
    order = [(entry["device_id"], int(entry["timestamp"]), isinstance(r, TriggerRegistration))
             for entry, r in zip(entries, registrations, strict=True)]
    assert order == sorted(order)
    publishers = {f"https://publisher-{p}.example" for p in range(ARA_PUBLISHERS)}
    for source in sources:
        assert source.source_origin in publishers
        assert (source.source_type == "navigation") == (source.priority == ARA_CLICK_PRIORITY)
        assert {dict(source.aggregation_keys)[name] >> 120 for name in ("purchaseCount", "purchaseValue")} == {1, 2}
    assert len({source.source_event_id for source in sources}) == len(sources)  # device index << 32 | K
    for trigger in triggers:
        (category,) = dict(trigger.filters.filters[0].values)["category"]
        assert trigger.event_trigger_data[0].trigger_data == ARA_CATALOGUE.index(category)


def test_the_log_is_deterministic_and_leaves_the_other_files_alone(tmp_path):
    def run(out: Path, registrations: bool = False):
        return generate_ara(out, devices=60, days=10, seed=3, fmt="jsonl", bad_fraction=0.05, progress=False,
                            registrations=registrations)

    first, again, plain = run(tmp_path / "a", True), run(tmp_path / "b", True), run(tmp_path / "c")
    assert log_lines(first) == log_lines(again) and len(log_lines(first)) == first.sources + first.triggers
    assert output_bytes(first) == output_bytes(plain)
    assert plain.registrations == 0 and plain.registration_files == []
    # a run without the log removes an earlier run's log
    run(tmp_path / "a")
    assert not list((tmp_path / "a").glob("registrations-*"))


def test_replayed_reports_use_the_model_keys(logged):
    stats, _, parsed = logged
    with open(stats.domain_files[0], "rb") as handle:
        records: Any = fastavro.reader(handle)
        domain = {int.from_bytes(record["bucket"], "big") for record in records}
    devices: dict[str, list[ParsedRegistration]] = {}
    for (registration,) in parsed:
        assert isinstance(registration, ParsedRegistration)
        devices.setdefault(registration.device_id, []).append(registration)
    campaigns = ARA_ADVERTISERS * ARA_CAMPAIGNS_PER_ADVERTISER
    real = triggers = 0
    for registrations in devices.values():
        triggers += sum(isinstance(r.registration, TriggerRegistration) for r in registrations)
        replayed = replay_device(registrations, BrowserConfig())
        for report in replayed.reports:
            if not isinstance(report, SpecAggregatableReport) or report.is_null:
                continue
            real += 1
            for key, value, filtering_id in report.contributions:
                kind, campaign, category = key >> 120, key >> 64 & (1 << 56) - 1, key & (1 << 64) - 1
                assert kind in (1, 2) and campaign < campaigns and 1 <= category <= len(ARA_CATALOGUE) and value > 0
                assert filtering_id == 0
                assert key in domain  # kind << 120 | campaign << 64 | 1 + category, a category its advertiser sells
    assert 0 < real <= triggers


def test_cli_writes_the_log(tmp_path, capsys):
    out = tmp_path / "ara"
    assert generate.main(["ara", "--devices", "50", "--days", "5", "--registrations", "--output", str(out),
                          "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "registrations logged" in printed and "registrations-00000-of-00001.jsonl" in printed
    recorded = json.loads((out / "generation.json").read_text())
    assert recorded["stats"]["registration_files"] == ["registrations-00000-of-00001.jsonl"]
    lines = (out / "registrations-00000-of-00001.jsonl").read_text().splitlines()
    assert len(lines) == recorded["stats"]["registrations"] == recorded["stats"]["sources"] + recorded["stats"]["triggers"]
    assert generate.main(["ara", "--devices", "50", "--days", "5", "--output", str(tmp_path / "plain"), "--quiet"]) == 0
    assert "registrations" not in capsys.readouterr().out
