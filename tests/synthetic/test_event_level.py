"""The event-level dataset generator (``synthetic.event_level``): determinism, formats, shape, bad records.

Statistical checks run on fixed seeds (reproducible); each tolerance is at least 5 standard deviations of the
checked statistic (a false-failure rate below 1e-6 for a fresh seed), computed next to it.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import fastavro
import pytest

from pipelines import generate
from schemas.codecs import EVENT_LEVEL_SOURCE, EVENT_LEVEL_TRIGGER
from schemas.formats import load_avro_schema
from synthetic.event_level import (
    EL_CLICK_CONVERSION,
    EL_CLICK_SHARE,
    EL_CUSTOM_SPECS,
    EL_MAX_VALUE,
    EL_VIEW_CONVERSION,
    EL_VIEW_EXPIRY_SECONDS,
    generate_event_level,
)
from tests.support.files import output_bytes, read_rows
from transforms.event_level.mechanisms.client import EventLevelClient, EventSource, EventTrigger
from transforms.event_level.mechanisms.config import EventLevelConfig, TriggerDataSpec, uniform_config
from transforms.event_level.mechanisms.information_gain import check_configuration
from transforms.event_level.mechanisms.outputs import count_outputs

POPULARITY = [1 / (a + 1) for a in range(6)]
POPULARITY = [w / sum(POPULARITY) for w in POPULARITY]


def avro_records(paths, schema: str) -> list[dict]:
    """The records of Avro files, read with fastavro against the project's schema as reader schema."""
    parsed = fastavro.parse_schema(load_avro_schema(schema))
    records = []
    for path in paths:
        with open(path, "rb") as handle:
            records.extend(fastavro.reader(handle, reader_schema=parsed))
    return records


def config_of(record: dict) -> EventLevelConfig:
    """The configuration a source record asks for (ARA's defaults where it leaves fields null)."""
    kind, expiry = record["source_type"], record["expiry_seconds"] or 30 * 86_400
    if record["trigger_specs"] is None:
        return uniform_config(kind, expiry_seconds=expiry, max_event_level_reports=record["max_event_level_reports"])
    specs = tuple(TriggerDataSpec(value, tuple(spec["window_ends_seconds"]), tuple(spec["summary_buckets"]))
                  for spec in record["trigger_specs"] for value in spec["trigger_data"])
    return EventLevelConfig(kind, expiry, record["max_event_level_reports"], specs, record["trigger_data_matching"])


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """1,000 devices over 30 days (about 60,000 sources), Avro, read with fastavro."""
    stats = generate_event_level(tmp_path_factory.mktemp("el"), devices=1000, seed=4, progress=False)
    return stats, avro_records(stats.source_files, "event_level_source"), avro_records(stats.trigger_files,
                                                                                       "event_level_trigger")


def test_files_read_with_fastavro_and_the_project_readers(dataset):
    stats, sources, triggers = dataset
    assert (len(sources), len(triggers)) == (stats.sources, stats.triggers)
    assert set(sources[0]) == {field["name"] for field in load_avro_schema("event_level_source")["fields"]}
    assert set(triggers[0]) == {field["name"] for field in load_avro_schema("event_level_trigger")["fields"]}
    rows, dead = read_rows(stats.source_files, EVENT_LEVEL_SOURCE)
    assert dead == [] and [row.source_id for row in rows] == [record["source_id"] for record in sources]
    rows, dead = read_rows(stats.trigger_files, EVENT_LEVEL_TRIGGER)
    assert dead == [] and [row.trigger_id for row in rows] == [record["trigger_id"] for record in triggers]
    recorded = json.loads((Path(stats.source_files[0]).parent / "generation.json").read_text())
    assert recorded["dataset"] == "event-level" and recorded["stats"]["sources"] == stats.sources


def test_rates_of_the_model(dataset):
    stats, sources, triggers = dataset
    n = stats.sources
    # sources ~ Poisson(2 * 30) per device: the total has sd sqrt(60,000) = 245; 5 sd = 1,225
    assert abs(n - 60_000) < 1_225
    # navigation ~ Binomial(n, 0.1): sd sqrt(n * 0.09) = 73; 5 sd = 367
    assert abs(stats.navigation - EL_CLICK_SHARE * n) < 5 * math.sqrt(n * 0.09)
    # custom specs: shop 5 (every campaign) and campaign 3 of shop 2, Binomial(n, p)
    p = POPULARITY[5] + POPULARITY[2] / 4
    assert abs(stats.custom_specs - p * n) < 5 * math.sqrt(n * p * (1 - p))
    # conversions: clicks Binomial(clicks, 0.05); views Binomial(views, sum_a popularity_a * rate_a)
    clicks, views = stats.navigation, n - stats.navigation
    assert abs(stats.converted_clicks - EL_CLICK_CONVERSION * clicks) < 5 * math.sqrt(clicks * 0.05 * 0.95)
    q = sum(w * r for w, r in zip(POPULARITY, EL_VIEW_CONVERSION, strict=True))
    assert 0.015 < q < 0.017 and abs(stats.converted_views - q * views) < 5 * math.sqrt(views * q * (1 - q))
    # about 1.3 triggers per converting ad (a few past the end are dropped) and Poisson(0.3) organic per device
    assert abs(stats.organic_triggers - 300) < 5 * math.sqrt(300)
    driven = stats.triggers - stats.organic_triggers
    # the data are seeded, so the next three bands are deterministic checks of the model (no chance failures),
    # around its expectations: 1.3 triggers per converting ad, about 3 triggers per 100 sources
    assert 1.1 < driven / (stats.converted_clicks + stats.converted_views) < 1.35
    assert 0.02 < stats.triggers / n < 0.04

    counted = {"navigation": 0, "custom": 0}
    for source in sources:
        navigation = source["source_type"] == "navigation"
        counted["navigation"] += navigation
        counted["custom"] += source["trigger_specs"] is not None
        assert source["expiry_seconds"] == (None if navigation else EL_VIEW_EXPIRY_SECONDS)
        assert source["priority"] == (100 if navigation else 0) and 1 <= len(source["filter_data"]) <= 3
        assert (source["trigger_specs"] is None) == (source["max_event_level_reports"] is None)
    assert counted == {"navigation": stats.navigation, "custom": stats.custom_specs}
    sites = {(s["destination"], s["reporting_origin"]) for s in sources}
    for trigger in triggers:
        assert (trigger["destination"], trigger["reporting_origin"]) in sites and len(trigger["filters"]) == 1
        assert 0 <= trigger["trigger_data"] <= 7
        if trigger["value"] is not None:
            assert trigger["destination"] == "https://shop-5.example" and trigger["trigger_data"] == 0
            assert 1 <= trigger["value"] <= EL_MAX_VALUE
    assert any(trigger["value"] is not None for trigger in triggers)
    # every device's records are in time order, and ids are unique
    for records, key in ((sources, "source_id"), (triggers, "trigger_id")):
        assert len({record[key] for record in records}) == len(records)
        pairs = [(record["device_id"], record["event_time_micros"]) for record in records]
        assert pairs == sorted(pairs)


def test_configurations_are_valid_at_epsilon_14(dataset):
    _, sources, _ = dataset
    seen = {}
    for source in sources:
        key = (source["source_type"], source["expiry_seconds"], json.dumps(source["trigger_specs"]))
        if key not in seen:
            seen[key] = check_configuration(config_of(source), 14.0).states
    # default navigation and event configurations, and the fast and value ones of each source type
    assert sorted(seen.values()) == sorted([2925, 3, 91, 15, 15, 3])
    for kind, by_type in EL_CUSTOM_SPECS.items():
        for source_type, (reports, _, specs) in by_type.items():
            assert reports <= len(specs[0]["summary_buckets"]), (kind, source_type)
    assert count_outputs(uniform_config("navigation")) == 2925


def test_triggers_are_attributed_and_reported(tmp_path):
    """The noiseless client (Alg. 4) sends reports for default and custom sources of both types."""
    stats = generate_event_level(tmp_path, devices=300, seed=2, progress=False)
    sources = avro_records(stats.source_files, "event_level_source")
    triggers = avro_records(stats.trigger_files, "event_level_trigger")
    by_device: dict[str, list] = {}
    kinds = {}
    for s in sources:
        config = config_of(s)
        kinds[s["source_id"]] = (s["source_type"], s["trigger_specs"] is not None)
        by_device.setdefault(s["device_id"], []).append(EventSource(
            s["source_id"], s["destination"], s["event_time_micros"], config, tuple(s["filter_data"]), s["priority"],
            s["reporting_origin"]))
    for t in triggers:
        by_device.setdefault(t["device_id"], []).append(EventTrigger(
            t["trigger_id"], t["destination"], t["event_time_micros"], t["trigger_data"], t["value"] or 1,
            tuple(t["filters"]), t["reporting_origin"]))
    attributed, reported = 0, set()
    for events in by_device.values():
        client = EventLevelClient()
        for report in client.replay(events):
            reported.add(kinds[report.source_id])
        attributed += sum(sum(r.values) > 0 for r in client.sources)
    assert reported == {("navigation", False), ("navigation", True), ("event", False), ("event", True)}
    # most ads that converted get a trigger (the rest went to a later ad of the same shop, or past the end);
    # seeded data, so a deterministic check
    assert attributed >= 0.7 * (stats.converted_clicks + stats.converted_views)


def test_sources_scale_gives_exactly_that_many(tmp_path):
    stats = generate_event_level(tmp_path, sources=12_345, days=7, seed=1, shards=2, progress=False)
    assert stats.sources == 12_345 and stats.devices == math.ceil(12_345 / 14)
    assert len(avro_records(stats.source_files, "event_level_source")) == 12_345
    with pytest.raises(ValueError, match="not both"):
        generate_event_level(tmp_path, sources=10, devices=10, progress=False)


def test_deterministic_and_the_same_in_every_format(tmp_path):
    first = generate_event_level(tmp_path / "a", devices=1500, days=10, seed=8, progress=False)
    again = generate_event_level(tmp_path / "b", devices=1500, days=10, seed=8, progress=False)
    assert output_bytes(first) == output_bytes(again)
    other_seed = generate_event_level(tmp_path / "c", devices=1500, days=10, seed=9, progress=False)
    assert output_bytes(other_seed) != output_bytes(first)
    rows = read_rows(first.source_files, EVENT_LEVEL_SOURCE)[0], read_rows(first.trigger_files, EVENT_LEVEL_TRIGGER)[0]
    for fmt in ("jsonl", "pb"):
        other = generate_event_level(tmp_path / fmt, devices=1500, days=10, seed=8, fmt=fmt, shards=2, progress=False)
        assert len(other.source_files) == 2 and all(Path(path).stat().st_size for path in other.source_files)
        assert (read_rows(other.source_files, EVENT_LEVEL_SOURCE)[0],
                read_rows(other.trigger_files, EVENT_LEVEL_TRIGGER)[0]) == rows


@pytest.mark.parametrize("fmt", ["avro", "jsonl", "pb"])
def test_bad_records_fraction_and_reasons(tmp_path, fmt):
    stats = generate_event_level(tmp_path, devices=200, days=10, seed=1, fmt=fmt, bad_fraction=0.05, progress=False)
    (sources, dead_s), (triggers, dead_t) = (read_rows(stats.source_files, EVENT_LEVEL_SOURCE),
                                             read_rows(stats.trigger_files, EVENT_LEVEL_TRIGGER))
    assert (len(sources), len(triggers), len(dead_s), len(dead_t)) == (stats.sources, stats.triggers, stats.bad_sources,
                                                                       stats.bad_triggers)
    reasons: dict[str, int] = {}
    for letter in dead_s + dead_t:
        reasons[letter.reason] = reasons.get(letter.reason, 0) + 1
    assert reasons == stats.bad_by_reason
    expected = {"avro": 3, "jsonl": 6, "pb": 5}[fmt]  # files.COMMON_BAD_KINDS, each with its own reason
    assert len(reasons) == expected
    # the count of bad records is rounded per chunk to keep bad / (valid + bad) at the fraction (deterministic;
    # the triggers' chunks are small, so their rounding moves the fraction more)
    assert abs(stats.bad_sources / (stats.sources + stats.bad_sources) - 0.05) < 0.001
    assert abs(stats.bad_triggers / (stats.triggers + stats.bad_triggers) - 0.05) < 0.01


def test_cli_writes_and_summarises(tmp_path, capsys):
    assert generate.main(["event-level", "--output", str(tmp_path), "--sources", "3000", "--days", "5", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "generate event-level: wrote 300 devices, 3,000 sources" in out and "generation.json" in out
    assert (tmp_path / "sources-00000-of-00001.avro").exists() and (tmp_path / "triggers-00000-of-00001.avro").exists()


def test_default_options_keep_the_files(tmp_path):
    """--navigation-share 0.1 and no --default-configs are the files of before these options (counts fixed then)."""
    implicit = generate_event_level(tmp_path / "a", sources=20_000, seed=1, progress=False)
    explicit = generate_event_level(tmp_path / "b", sources=20_000, seed=1, navigation_share=EL_CLICK_SHARE,
                                    default_configs=False, progress=False)
    assert output_bytes(implicit) == output_bytes(explicit)
    assert (implicit.devices, implicit.sources, implicit.navigation, implicit.custom_specs, implicit.triggers,
            implicit.organic_triggers) == (334, 20_000, 1_959, 1_903, 626, 96)
    parameters = json.loads((tmp_path / "a" / "generation.json").read_text())["parameters"]
    assert (parameters["navigation_share"], parameters["default_configs"]) == (0.1, False)


def test_all_navigation_with_default_configs_from_the_cli(tmp_path, capsys):
    argv = ["event-level", "--output", str(tmp_path), "--sources", "3000", "--days", "5", "--seed", "3",
            "--navigation-share", "1", "--default-configs", "--quiet"]
    assert generate.main(argv) == 0
    assert "3,000 sources (3,000 navigation, 0 with custom trigger specs)" in capsys.readouterr().out
    recorded = json.loads((tmp_path / "generation.json").read_text())
    stats = recorded["stats"]
    assert (recorded["parameters"]["navigation_share"], recorded["parameters"]["default_configs"]) == (1.0, True)
    assert recorded["model"]["navigation_share"] == 1.0
    assert {campaign["trigger_specs"] for campaign in recorded["model"]["campaigns"]} == {"default"}
    assert (stats["sources"], stats["navigation"], stats["custom_specs"], stats["converted_views"]) == (3000, 3000, 0, 0)
    sources = avro_records(sorted(tmp_path.glob("sources-*")), "event_level_source")
    triggers = avro_records(sorted(tmp_path.glob("triggers-*")), "event_level_trigger")
    assert len(sources) == 3000 and len(triggers) == stats["triggers"] > 0
    for source in sources:
        assert source["source_type"] == "navigation" and source["priority"] == 100 and source["expiry_seconds"] is None
        assert (source["max_event_level_reports"], source["trigger_data_matching"], source["trigger_specs"]) == (
            None, None, None)
    assert all(trigger["value"] is None for trigger in triggers)


def test_default_configs_change_only_the_configurations_and_values(tmp_path):
    """The same sources but for the three configuration fields, the same triggers but for shop 5's values."""
    custom = generate_event_level(tmp_path / "a", devices=400, days=10, seed=5, progress=False)
    default = generate_event_level(tmp_path / "b", devices=400, days=10, seed=5, default_configs=True, progress=False)
    assert default.custom_specs == 0 < custom.custom_specs
    configuration = ("max_event_level_reports", "trigger_data_matching", "trigger_specs")
    sources = avro_records(default.source_files, "event_level_source")
    assert sources == [{**source, **dict.fromkeys(configuration)}
                       for source in avro_records(custom.source_files, "event_level_source")]
    before = avro_records(custom.trigger_files, "event_level_trigger")
    assert any(trigger["value"] is not None for trigger in before)
    assert avro_records(default.trigger_files, "event_level_trigger") == [{**t, "value": None} for t in before]


def test_navigation_share_zero_gives_views_only(tmp_path):
    stats = generate_event_level(tmp_path, sources=5000, days=10, seed=2, navigation_share=0, progress=False)
    assert (stats.sources, stats.navigation, stats.converted_clicks) == (5000, 0, 0)
    sources = avro_records(stats.source_files, "event_level_source")
    assert {source["source_type"] for source in sources} == {"event"}
    assert stats.custom_specs == sum(source["trigger_specs"] is not None for source in sources) > 0
    for share in (-0.1, 1.5, float("nan"), True, "0.5"):
        with pytest.raises(ValueError, match="--navigation-share must be a number in"):
            generate_event_level(tmp_path / "bad", sources=10, navigation_share=share, progress=False)


@pytest.mark.parametrize(("argv", "message"), [
    (["--devices", "0"], "error: argument --devices: must be an integer in [1, 100000000], got 0"),
    (["--sources", "0"], "error: argument --sources: must be an integer in [1, 2000000000], got 0"),
    (["--bad-fraction", "1"], "error: argument --bad-fraction: must be a number in [0, 1), got 1"),
    (["--navigation-share", "1.01"], "error: argument --navigation-share: must be a number in [0, 1], got 1.01"),
    (["--navigation-share", "-0.5"], "error: argument --navigation-share: must be a number in [0, 1], got -0.5"),
    (["--start", "yesterday"], "--start must be a date"),
])
def test_cli_rejects_bad_options_with_one_line(tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit) as raised:
        generate.main(["event-level", *argv, "--output", str(tmp_path)])
    assert raised.value.code == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
