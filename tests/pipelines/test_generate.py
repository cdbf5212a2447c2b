"""Tests of the synthetic data generator ``pipelines.generate`` (``kanon`` and ``microbenchmark`` datasets)."""
from __future__ import annotations

import collections
import json
import math
from pathlib import Path

import numpy as np
import pytest

from pipelines import generate
from schemas.codecs import CONVERSION, IMPRESSION, JOIN_EVENT
from schemas.rows import Conversion, Impression
from schemas.time_units import parse_start
from synthetic.kanon import GenerationStats, generate_kanon, midnight_utc_micros
from synthetic.microbenchmark import (
    MICRO_BAD_KINDS,
    MicrobenchmarkStats,
    generate_microbenchmark,
    micro_conversions,
    micro_epsilon,
    micro_impressions_per_user,
    micro_users,
)
from tests.support.files import read_rows

START = midnight_utc_micros("2026-01-05")
DAY = 86_400 * 1_000_000
WEEK = 7 * DAY
SMALL = dict(groups=200, users=5000, joins=8000, days=14, start_micros=START, k=20)

EXPECTED_REASONS = {
    "avro": {"empty_field:user_id", "empty_field:interest_group", "negative_timestamp:event_time_micros",
             "absurd_timestamp:event_time_micros"},
    "jsonl": {"missing_field:interest_group", "missing_field:user_id", "missing_field:event_time_micros",
              "empty_field:user_id", "negative_timestamp:event_time_micros", "absurd_timestamp:event_time_micros",
              "wrong_type:event_time_micros", "malformed_json"},
    "pb": {"missing_field:event_time_micros", "empty_field:user_id", "empty_field:interest_group",
           "negative_timestamp:event_time_micros", "absurd_timestamp:event_time_micros", "malformed_protobuf"},
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One small run per format with bad records and two shards: fmt -> (stats, out dir, valid, dead)."""
    result = {}
    for fmt in ("avro", "jsonl", "pb"):
        out = tmp_path_factory.mktemp(f"gen_{fmt}")
        stats = generate_kanon(out, **SMALL, seed=7, bad_fraction=0.05, fmt=fmt, shards=2, progress=False)
        result[fmt] = (stats, out, *read_rows(stats.files, JOIN_EVENT))
    return result


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """A run without bad records: (stats, valid rows)."""
    out = tmp_path_factory.mktemp("gen_clean")
    stats = generate_kanon(out, **SMALL, seed=3, fmt="avro", progress=False)
    return stats, read_rows(stats.files, JOIN_EVENT)[0]


@pytest.mark.parametrize("fmt", ["avro", "jsonl", "pb"])
def test_files_read_back_and_reconcile_with_stats(runs, fmt):
    stats, out, valid, dead = runs[fmt]
    assert isinstance(stats, GenerationStats)
    assert [Path(p).name for p in stats.files] == [f"joins-0000{s}-of-00002.{fmt}" for s in range(2)]
    assert all(Path(p).parent == out for p in stats.files)
    assert len(valid) == stats.joins_written
    assert len(dead) == stats.bad_written
    assert dict(collections.Counter(d.reason for d in dead)) == stats.bad_by_reason
    summary = json.loads((out / "generation.json").read_text())
    assert summary["dataset"] == "kanon"
    assert summary["parameters"]["format"] == fmt and summary["parameters"]["k"] == SMALL["k"]
    assert summary["stats"]["joins_written"] == stats.joins_written
    assert summary["stats"]["bad_written"] == stats.bad_written
    assert summary["stats"]["files"] == [Path(p).name for p in stats.files]


@pytest.mark.parametrize("fmt", ["avro", "jsonl", "pb"])
def test_bad_fraction_gives_dead_letters_of_the_expected_reasons(runs, fmt):
    stats, _, valid, dead = runs[fmt]
    reasons = {d.reason for d in dead}
    assert reasons == EXPECTED_REASONS[fmt]  # every kind the format can express, nothing else
    fraction = len(dead) / (len(valid) + len(dead))
    assert fraction == pytest.approx(0.05, abs=0.001)


def test_valid_joins_do_not_depend_on_format_shards_or_bad_records(runs, clean, tmp_path):
    rows = {fmt: sorted(runs[fmt][2]) for fmt in runs}
    assert rows["avro"] == rows["jsonl"] == rows["pb"]
    stats = generate_kanon(tmp_path, **SMALL, seed=7, fmt="jsonl", shards=1, progress=False)
    assert stats.bad_written == 0
    assert sorted(read_rows(stats.files, JOIN_EVENT)[0]) == rows["avro"]


@pytest.mark.parametrize("fmt", ["avro", "jsonl", "pb"])
def test_same_seed_gives_the_same_files(tmp_path, fmt):
    params = dict(SMALL, joins=3000, bad_fraction=0.02, fmt=fmt, shards=2, progress=False)
    first = generate_kanon(tmp_path / "a", **params, seed=11)
    second = generate_kanon(tmp_path / "b", **params, seed=11)
    other = generate_kanon(tmp_path / "c", **params, seed=12)
    assert first.joins_written == second.joins_written
    for a, b in zip(first.files, second.files, strict=True):
        assert Path(a).read_bytes() == Path(b).read_bytes()
    assert read_rows(first.files, JOIN_EVENT)[0] == read_rows(second.files, JOIN_EVENT)[0]
    assert read_rows(first.files, JOIN_EVENT)[0] != read_rows(other.files, JOIN_EVENT)[0]
    assert (tmp_path / "a" / "generation.json").read_bytes() == (tmp_path / "b" / "generation.json").read_bytes()


def test_total_joins_close_to_target(clean, tmp_path):
    stats, valid = clean
    assert stats.expected_joins == pytest.approx(SMALL["joins"], rel=1e-6)
    assert abs(stats.joins_written - SMALL["joins"]) <= 0.05 * SMALL["joins"]
    other = generate_kanon(tmp_path, **dict(SMALL, joins=20_000, groups=400, days=30), seed=1, fmt="jsonl",
                           progress=False)
    assert abs(other.joins_written - 20_000) <= 0.03 * 20_000


def test_timestamps_in_range_and_follow_a_daily_cycle(clean):
    _, valid = clean
    end = START + SMALL["days"] * DAY
    assert all(START <= row.event_time_micros < end for row in valid)
    days = {(row.event_time_micros - START) // DAY for row in valid}
    assert days == set(range(SMALL["days"]))
    hours = collections.Counter((row.event_time_micros // 3_600_000_000) % 24 for row in valid)
    assert hours[20] > 3 * hours[8]


def test_ids_have_the_documented_shape(clean):
    _, valid = clean
    assert all(row.interest_group.startswith("https://dsp-") and ".example/ig/" in row.interest_group for row in valid)
    assert all(row.user_id[0] == "u" and row.user_id[1:].isdigit() and len(row.user_id) == 8 for row in valid)
    assert all(0 <= int(row.user_id[1:]) < SMALL["users"] for row in valid)


def test_group_size_classes(clean):
    stats, valid = clean
    k = SMALL["k"]
    assert sum(stats.groups_by_class.values()) == SMALL["groups"]
    assert stats.groups_by_class["band"] == pytest.approx(0.1 * SMALL["groups"], abs=2)
    assert 1 <= stats.groups_by_class["large"] < stats.groups_by_class["band"] < stats.groups_by_class["small"]
    weekly = collections.defaultdict(set)
    for row in valid:
        weekly[row.interest_group, (row.event_time_micros - START) // WEEK].add(row.user_id)
    sizes = collections.defaultdict(list)
    for (group, _), users in weekly.items():
        sizes[group].append(len(users))
    peak = {group: max(values) for group, values in sizes.items()}
    assert sum(size >= 10 * k for size in peak.values()) >= 1  # far above k
    assert sum(size >= k for size in peak.values()) >= stats.groups_by_class["large"]
    near = [group for group, values in sizes.items() if all(abs(v - k) <= 10 for v in values)]
    assert len(near) >= 0.8 * stats.groups_by_class["band"]
    assert sum(size < k // 2 for size in peak.values()) >= 0.5 * SMALL["groups"]  # most groups far below k
    # Users recur across weeks within a group.
    recurring = sum(len(weekly[g, 0] & weekly[g, 1]) for g in near)
    assert recurring > 0


def test_cli_writes_files_and_summary(tmp_path, capsys):
    out = tmp_path / "cli"
    code = generate.main(["kanon", "--output", str(out), "--groups", "50", "--users", "2000", "--joins", "2000",
                          "--days", "7", "--start", "2026-02-02", "--format", "jsonl", "--shards", "3",
                          "--bad-fraction", "0.1", "--k", "20", "--seed", "5", "--quiet"])
    assert code == 0
    summary = json.loads((out / "generation.json").read_text())
    assert summary["parameters"]["start_micros"] == midnight_utc_micros("2026-02-02")
    files = sorted(out.glob("joins-*-of-00003.jsonl"))
    assert len(files) == 3
    valid, dead = read_rows(files, JOIN_EVENT)
    assert len(valid) == summary["stats"]["joins_written"] and len(dead) == summary["stats"]["bad_written"]
    assert "wrote" in capsys.readouterr().out
    # A second run with fewer shards replaces the earlier shards.
    generate.main(["kanon", "--output", str(out), "--groups", "50", "--joins", "500", "--days", "7", "--quiet"])
    assert sorted(p.name for p in out.glob("joins-*")) == ["joins-00000-of-00001.avro"]


@pytest.mark.parametrize("argv", [
    ["kanon", "--output", "x", "--bad-fraction", "1.0"],
    ["kanon", "--output", "x", "--start", "not-a-date"],
    ["kanon", "--output", "x", "--format", "csv"],
    ["kanon", "--output", "x", "--groups", "0"],
    [],
])
def test_cli_rejects_bad_options(argv, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as raised:
        generate.main(argv)
    assert raised.value.code == 2



# --------------------------------------------------------------------------- deprecated spellings

RENAMED = {"--out": ("--output", "output", "d"), "--start-date": ("--start", "start", "2024-02-01")}
REQUIRED = {"microbenchmark": ["--knob1", "0.5", "--knob2", "0.1"]}
WITH_START_DATE = ("microbenchmark", "patcg-like", "criteo-like", "ara", "paa", "event-level")  # not kanon, reports
DEPRECATED = [(name, old) for _, name, _, _ in generate.DATASETS for old in RENAMED
              if old == "--out" or name in WITH_START_DATE]


def _parse(argv: list[str], capsys) -> tuple[dict, str]:
    parsed = vars(generate.build_parser().parse_args(argv))
    parsed.pop("run")
    return parsed, capsys.readouterr().err


@pytest.mark.parametrize("dataset, old", DEPRECATED, ids=[f"{name} {old}" for name, old in DEPRECATED])
@pytest.mark.parametrize("joined", [False, True], ids=["separate", "joined"])
def test_a_deprecated_spelling_still_works_with_one_warning(dataset, old, joined, capsys):
    new, dest, value = RENAMED[old]
    base = [dataset, *REQUIRED.get(dataset, []), *([] if old == "--out" else ["--output", "d"])]

    def spelt(option: str) -> list[str]:
        return [f"{option}={value}"] if joined else [option, value]

    with_old, warned = _parse([*base, *spelt(old)], capsys)
    with_new, quiet = _parse([*base, *spelt(new)], capsys)
    assert with_old == with_new and with_old[dest] == value
    assert warned == f"warning: {old} is deprecated and will be removed; use {new}\n"
    assert quiet == ""


def test_the_old_spellings_are_not_offered_where_they_never_were(capsys):
    with pytest.raises(SystemExit) as raised:
        generate.main(["kanon", "--output", "x", "--start-date", "2026-01-05"])
    assert raised.value.code == 2
    assert capsys.readouterr().err == "generate kanon: error: unknown option --start-date (did you mean --start?)\n"


def test_a_run_with_the_old_spellings_writes_the_same_files(tmp_path, capsys):
    options = ["--knob1", "1", "--knob2", "0.05", "--batch-size", "5", "--products", "1", "--days", "40", "--quiet"]
    assert generate.main(["microbenchmark", *options, "--out", str(tmp_path / "old"), "--start-date=2024-03-01"]) == 0
    warnings = capsys.readouterr().err.splitlines()
    assert warnings == ["warning: --out is deprecated and will be removed; use --output",
                        "warning: --start-date is deprecated and will be removed; use --start"]
    assert generate.main(["microbenchmark", *options, "--output", str(tmp_path / "new"), "--start=2024-03-01"]) == 0
    assert capsys.readouterr().err == ""
    files = sorted(path.name for path in (tmp_path / "new").iterdir())
    assert files == sorted(path.name for path in (tmp_path / "old").iterdir()) and "generation.json" in files
    for name in files:
        assert (tmp_path / "old" / name).read_bytes() == (tmp_path / "new" / name).read_bytes(), name


# --------------------------------------------------------------------------- microbenchmark

MICRO_START = parse_start("2024-01-01T00:00:00Z")
MICRO = dict(knob1=0.25, knob2=0.1, batch_size=50, products=3, days=40)  # 200 users x 4 impressions, 300 conversions
MICRO_USERS, MICRO_PER_USER = 200, 4
MICRO_REASONS = {
    "missing_device": "missing_field:device_id", "empty_device": "empty_field:device_id",
    "empty_advertiser": "empty_field:advertiser_site", "negative_time": "negative_timestamp:event_time_micros",
    "absurd_time": "absurd_timestamp:event_time_micros", "empty_filter_key": "empty_field:filter_keys",
    "string_time": "wrong_type:event_time_micros", "missing_time": "missing_field:event_time_micros",
    "negative_value": "negative_value:value", "unknown_logic": "unknown_logic",
    "nonpositive_epsilon": "nonpositive:requested_epsilon", "report_above_query": "report_sensitivity_above_query",
    "missing_request": "missing_field:attribution_request", "missing_value": "missing_field:value",
    "broken_json": "malformed_json", "garbage": "malformed_protobuf",
}


def read_micro(stats: MicrobenchmarkStats) -> dict:
    impressions, dead_impressions = read_rows(stats.impression_files, IMPRESSION)
    conversions, dead_conversions = read_rows(stats.conversion_files, CONVERSION)
    return {"impressions": impressions, "dead_impressions": dead_impressions, "conversions": conversions,
            "dead_conversions": dead_conversions}


@pytest.fixture(scope="module")
def micro_runs(tmp_path_factory):
    """fmt -> (stats, out dir, rows) for a clean run with two impression shards, and fmt -> (stats, rows) with 5 %
    bad records."""
    clean, bad = {}, {}
    for fmt in ("avro", "jsonl", "pb"):
        out = tmp_path_factory.mktemp(f"micro_{fmt}")
        stats = generate_microbenchmark(out, **MICRO, seed=7, fmt=fmt, shards=2, progress=False)
        clean[fmt] = (stats, out, read_micro(stats))
        stats = generate_microbenchmark(tmp_path_factory.mktemp(f"micro_bad_{fmt}"), **MICRO, seed=7, fmt=fmt,
                                        bad_fraction=0.05, progress=False)
        bad[fmt] = (stats, read_micro(stats))
    return clean, bad


def test_micro_sizes_follow_the_knobs():
    assert micro_users(2000, 0.1) == 20_000
    assert micro_users(2000, 0.01) == 200_000
    assert micro_users(2000, 0.001) == 2_000_000
    assert micro_users(2000, 1.0) == 2000
    assert micro_users(2000, 0.3) == 6667
    assert micro_impressions_per_user(0.1, 120) == 12  # 0.1 * 120 is 12.000000000000002 in floating point
    assert micro_impressions_per_user(0.001, 120) == 1
    assert micro_impressions_per_user(1.5, 120) == 180
    assert micro_epsilon(2000) == pytest.approx(5 * math.log(100) / (0.05 * 2000 * 5))
    assert micro_epsilon(2000) == pytest.approx(0.0460517, rel=1e-6)


@pytest.mark.parametrize("fmt", ["avro", "jsonl", "pb"])
def test_micro_files_read_back_and_reconcile_with_generation_json(micro_runs, fmt):
    stats, out, rows = micro_runs[0][fmt]
    assert rows["dead_impressions"] == [] and rows["dead_conversions"] == []
    assert [Path(p).name for p in stats.impression_files] == [f"impressions-0000{s}-of-00002.{fmt}" for s in range(2)]
    assert [Path(p).name for p in stats.conversion_files] == [f"conversions-00000-of-00001.{fmt}"]
    assert all(Path(p).parent == out for p in stats.impression_files + stats.conversion_files)
    assert stats.users == MICRO_USERS and stats.impressions_per_user == MICRO_PER_USER
    assert stats.impressions == len(rows["impressions"]) == MICRO_USERS * MICRO_PER_USER
    assert stats.conversions == len(rows["conversions"]) == MICRO["products"] * 2 * MICRO["batch_size"]
    assert stats.queries == 2 * MICRO["products"]
    assert stats.bad_impressions == stats.bad_conversions == 0
    summary = json.loads((out / "generation.json").read_text())
    assert summary["dataset"] == "microbenchmark"
    assert summary["parameters"]["knob1"] == MICRO["knob1"] and summary["parameters"]["knob2"] == MICRO["knob2"]
    assert summary["parameters"]["format"] == fmt and summary["parameters"]["start_micros"] == MICRO_START
    assert summary["parameters"]["start"] == "2024-01-01T00:00:00Z"
    for key in ("users", "impressions", "conversions", "queries", "bad_impressions", "bad_conversions"):
        assert summary["stats"][key] == getattr(stats, key)
    assert summary["stats"]["epsilon"] == stats.epsilon == micro_epsilon(MICRO["batch_size"])
    assert summary["stats"]["impression_files"] == [Path(p).name for p in stats.impression_files]
    assert summary["stats"]["conversion_files"] == [Path(p).name for p in stats.conversion_files]


@pytest.mark.parametrize("fmt", ["avro", "jsonl", "pb"])
def test_micro_bad_fraction_gives_dead_letters_of_the_expected_reasons(micro_runs, fmt):
    clean_rows = micro_runs[0][fmt][2]
    stats, rows = micro_runs[1][fmt]
    for kind, count in (("impressions", stats.bad_impressions), ("conversions", stats.bad_conversions)):
        dead = rows[f"dead_{kind}"]
        assert len(dead) == count > 0
        assert dict(collections.Counter(d.reason for d in dead)) == stats.bad_by_reason[kind]
        assert {d.reason for d in dead} <= {MICRO_REASONS[k] for k in MICRO_BAD_KINDS[kind][fmt]}
        assert len(dead) / (len(dead) + len(rows[kind])) == pytest.approx(0.05, abs=0.01)
        assert sorted(rows[kind]) == sorted(clean_rows[kind])  # bad records come on top of the same valid ones
    summary = json.loads((Path(stats.conversion_files[0]).parent / "generation.json").read_text())
    assert summary["stats"]["bad_by_reason"] == stats.bad_by_reason


def test_micro_valid_records_do_not_depend_on_format_or_shards(micro_runs, tmp_path):
    clean = micro_runs[0]
    for kind in ("impressions", "conversions"):
        assert clean["avro"][2][kind] == clean["jsonl"][2][kind] == clean["pb"][2][kind]
    stats = generate_microbenchmark(tmp_path, **MICRO, seed=7, fmt="jsonl", shards=3, progress=False)
    rows = read_micro(stats)
    assert len(stats.impression_files) == 3
    assert rows["impressions"] == clean["avro"][2]["impressions"]
    assert rows["conversions"] == clean["avro"][2]["conversions"]


def test_micro_impressions(micro_runs):
    stats, _, rows = micro_runs[0]["avro"]
    impressions: list[Impression] = rows["impressions"]
    per_device = collections.Counter(row.device_id for row in impressions)
    assert sorted(per_device) == [f"device-{u:03d}" for u in range(MICRO_USERS)]
    assert set(per_device.values()) == {MICRO_PER_USER}
    end = MICRO_START + MICRO["days"] * DAY
    assert all(MICRO_START <= row.event_time_micros < end for row in impressions)
    assert len({row.impression_id for row in impressions}) == len(impressions)
    assert {(row.advertiser_site, row.campaign_id, row.publisher_site, row.product_id, row.filter_keys)
            for row in impressions} == {("nike.example", "campaign-all", "news.example", "", ())}
    times = collections.defaultdict(list)
    for row in impressions:
        times[row.device_id].append(row.event_time_micros)
    assert all(values == sorted(values) for values in times.values())  # written user by user, in time order


def test_micro_conversions_form_the_schedules(micro_runs):
    stats, _, rows = micro_runs[0]["avro"]
    conversions: list[Conversion] = rows["conversions"]
    batch = MICRO["batch_size"]
    lo, hi = MICRO_START + 31 * DAY, MICRO_START + MICRO["days"] * DAY
    assert all(lo <= row.event_time_micros < hi for row in conversions)
    assert [row.event_time_micros for row in conversions] == sorted(row.event_time_micros for row in conversions)
    assert len({row.conversion_id for row in conversions}) == len(conversions)
    by_product = collections.defaultdict(list)
    for row in conversions:
        by_product[row.product_id].append(row)
    assert sorted(by_product) == [f"product-{p}" for p in range(MICRO["products"])]
    for product, group in by_product.items():
        group.sort(key=lambda row: row.event_time_micros)
        times = [row.event_time_micros for row in group]
        assert len(group) == 2 * batch and len(set(times)) == len(times)
        for schedule in range(2):  # each batch of B in time order: B distinct users
            devices = {row.device_id for row in group[schedule * batch:(schedule + 1) * batch]}
            assert len(devices) == batch
            assert all(0 <= int(device.removeprefix("device-")) < MICRO_USERS for device in devices)
        for row in group:
            request = row.attribution_request
            assert (row.advertiser_site, row.querier_site, row.value) == ("nike.example", "nike.example", 5.0)
            assert request.window_days == 30 and request.campaign_ids == ("campaign-all",)
            assert request.logic == "last_touch" and request.dimension == 1 and request.norm == "L1"
            assert request.report_global_sensitivity == request.query_global_sensitivity == 5.0
            assert request.requested_epsilon == micro_epsilon(batch) == stats.epsilon
            assert request.query_key == f"product={product}"


def test_micro_schedules_are_the_batches_in_time_order():
    rng = np.random.Generator(np.random.PCG64(3))
    conversions = micro_conversions(rng, users=120, batch_size=100, products=4, days=40, start_micros=MICRO_START)
    assert np.all(np.diff(conversions.time) >= 0)
    for product in range(4):
        mine = conversions.product == product
        schedule, user = conversions.schedule[mine], conversions.user[mine]
        assert schedule.tolist() == [0] * 100 + [1] * 100
        assert len(set(user[:100].tolist())) == len(set(user[100:].tolist())) == 100


@pytest.mark.parametrize("fmt", ["avro", "jsonl", "pb"])
def test_micro_same_seed_gives_the_same_files(tmp_path, fmt):
    params = dict(MICRO, fmt=fmt, shards=2, bad_fraction=0.02, progress=False)
    first = generate_microbenchmark(tmp_path / "a", **params, seed=11)
    second = generate_microbenchmark(tmp_path / "b", **params, seed=11)
    other = generate_microbenchmark(tmp_path / "c", **params, seed=12)
    for a, b, c in zip(first.impression_files + first.conversion_files,
                       second.impression_files + second.conversion_files,
                       other.impression_files + other.conversion_files, strict=True):
        assert Path(a).read_bytes() == Path(b).read_bytes()
        assert Path(a).read_bytes() != Path(c).read_bytes()
    assert (tmp_path / "a" / "generation.json").read_bytes() == (tmp_path / "b" / "generation.json").read_bytes()


def test_micro_default_size(tmp_path):
    """The paper's sizes: 10 products x 2 batches of 2000 = 40,000 conversions (knob2 tiny to stay fast)."""
    stats = generate_microbenchmark(tmp_path, knob1=1.0, knob2=0.001, progress=False)
    assert (stats.users, stats.impressions_per_user, stats.impressions) == (2000, 1, 2000)
    assert (stats.conversions, stats.queries, stats.batch_size) == (40_000, 20, 2000)
    assert stats.epsilon == pytest.approx(math.log(100) / 100)
    assert [Path(p).name for p in stats.impression_files] == ["impressions-00000-of-00001.avro"]


def test_micro_cli_writes_files_and_summary(tmp_path, capsys):
    out = tmp_path / "cli"
    code = generate.main(["microbenchmark", "--knob1", "0.5", "--knob2", "0.05", "--output", str(out), "--batch-size",
                          "20", "--products", "2", "--days", "60", "--start", "2024-03-01", "--format", "pb",
                          "--shards", "3", "--bad-fraction", "0.1", "--seed", "4", "--quiet"])
    assert code == 0
    summary = json.loads((out / "generation.json").read_text())
    assert summary["parameters"]["start_micros"] == midnight_utc_micros("2024-03-01")
    assert summary["stats"]["users"] == 40 and summary["stats"]["impressions_per_user"] == 3
    impression_files = sorted(str(p) for p in out.glob("impressions-*-of-00003.pb"))
    assert len(impression_files) == 3
    valid, dead = read_rows(impression_files, IMPRESSION)
    assert len(valid) == summary["stats"]["impressions"] == 120 and len(dead) == summary["stats"]["bad_impressions"]
    valid, dead = read_rows([str(out / "conversions-00000-of-00001.pb")], CONVERSION)
    assert len(valid) == summary["stats"]["conversions"] == 80 and len(dead) == summary["stats"]["bad_conversions"]
    printed = capsys.readouterr().out
    assert "wrote 40 users x 3 = 120 impressions and 80 conversions" in printed
    assert "impressions-00000-of-00003.pb" in printed and "conversions-00000-of-00001.pb" in printed
    # A second run replaces the earlier files.
    generate.main(["microbenchmark", "--knob1", "1", "--knob2", "0.05", "--output", str(out), "--batch-size", "5",
                   "--products", "1", "--days", "40", "--quiet"])
    assert sorted(p.name for p in out.glob("*-of-*")) == ["conversions-00000-of-00001.avro",
                                                          "impressions-00000-of-00001.avro"]


@pytest.mark.parametrize("options", [
    ["--knob1", "0", "--knob2", "0.1"],
    ["--knob1", "1.5", "--knob2", "0.1"],
    ["--knob1", "-0.1", "--knob2", "0.1"],
    ["--knob1", "nan", "--knob2", "0.1"],
    ["--knob1", "0.1", "--knob2", "0"],
    ["--knob1", "0.1", "--knob2", "-1"],
    ["--knob1", "0.1", "--knob2", "inf"],
    ["--knob1", "0.1", "--knob2", "0.1", "--days", "31"],
    ["--knob1", "0.1", "--knob2", "0.1", "--batch-size", "0"],
    ["--knob1", "0.1", "--knob2", "0.1", "--shards", "0"],
    ["--knob1", "0.1", "--knob2", "0.1", "--bad-fraction", "1"],
    ["--knob1", "0.1", "--knob2", "0.1", "--start", "not-a-date"],
    ["--knob1", "0.1", "--knob2", "0.1", "--start", "2099-12-01"],
])
def test_micro_cli_rejects_bad_options_with_one_line(options, tmp_path, capsys):
    with pytest.raises(SystemExit) as raised:
        generate.main(["microbenchmark", "--output", str(tmp_path / "x"), *options])
    assert raised.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith("generate microbenchmark: error: ") and error.count("\n") == 1
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("argv", [
    ["microbenchmark", "--output", "x", "--knob2", "0.1"],
    ["microbenchmark", "--output", "x", "--knob1", "0.1", "--knob2", "0.1", "--format", "csv"],
    ["microbenchmark", "--output", "x", "--knob1", "abc", "--knob2", "0.1"],
])
def test_micro_cli_usage_errors(argv, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as raised:
        generate.main(argv)
    assert raised.value.code == 2
