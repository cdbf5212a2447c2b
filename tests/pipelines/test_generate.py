"""Tests of the synthetic data generator ``pipelines.generate`` (``kanon`` dataset)."""
from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest

from pipelines import generate
from pipelines.generate import GenerationStats, generate_kanon, midnight_utc_micros
from schemas.codecs import JOIN_EVENT, READERS, format_of
from schemas.rows import DeadLetter, JoinEvent

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


def read_all(files: list[str]) -> tuple[list[JoinEvent], list[DeadLetter]]:
    valid, dead = [], []
    for path in files:
        with open(path, "rb") as handle:
            for parsed in READERS[format_of(path)](JOIN_EVENT, handle, path):
                (dead if isinstance(parsed, DeadLetter) else valid).append(parsed)
    return valid, dead


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One small run per format with bad records and two shards: fmt -> (stats, out dir, valid, dead)."""
    result = {}
    for fmt in ("avro", "jsonl", "pb"):
        out = tmp_path_factory.mktemp(f"gen_{fmt}")
        stats = generate_kanon(out, **SMALL, seed=7, bad_fraction=0.05, fmt=fmt, shards=2, progress=False)
        result[fmt] = (stats, out, *read_all(stats.files))
    return result


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """A run without bad records: (stats, valid rows)."""
    out = tmp_path_factory.mktemp("gen_clean")
    stats = generate_kanon(out, **SMALL, seed=3, fmt="avro", progress=False)
    return stats, read_all(stats.files)[0]


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
    assert sorted(read_all(stats.files)[0]) == rows["avro"]


@pytest.mark.parametrize("fmt", ["avro", "jsonl", "pb"])
def test_same_seed_gives_the_same_files(tmp_path, fmt):
    params = dict(SMALL, joins=3000, bad_fraction=0.02, fmt=fmt, shards=2, progress=False)
    first = generate_kanon(tmp_path / "a", **params, seed=11)
    second = generate_kanon(tmp_path / "b", **params, seed=11)
    other = generate_kanon(tmp_path / "c", **params, seed=12)
    assert first.joins_written == second.joins_written
    for a, b in zip(first.files, second.files):
        assert Path(a).read_bytes() == Path(b).read_bytes()
    assert read_all(first.files)[0] == read_all(second.files)[0]
    assert read_all(first.files)[0] != read_all(other.files)[0]
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
    code = generate.main(["kanon", "--out", str(out), "--groups", "50", "--users", "2000", "--joins", "2000",
                          "--days", "7", "--start", "2026-02-02", "--format", "jsonl", "--shards", "3",
                          "--bad-fraction", "0.1", "--k", "20", "--seed", "5", "--quiet"])
    assert code == 0
    summary = json.loads((out / "generation.json").read_text())
    assert summary["parameters"]["start_micros"] == midnight_utc_micros("2026-02-02")
    files = sorted(out.glob("joins-*-of-00003.jsonl"))
    assert len(files) == 3
    valid, dead = read_all([str(f) for f in files])
    assert len(valid) == summary["stats"]["joins_written"] and len(dead) == summary["stats"]["bad_written"]
    assert "wrote" in capsys.readouterr().out
    # A second run with fewer shards replaces the earlier shards.
    generate.main(["kanon", "--out", str(out), "--groups", "50", "--joins", "500", "--days", "7", "--quiet"])
    assert sorted(p.name for p in out.glob("joins-*")) == ["joins-00000-of-00001.avro"]


@pytest.mark.parametrize("argv", [
    ["kanon", "--out", "x", "--bad-fraction", "1.0"],
    ["kanon", "--out", "x", "--start", "not-a-date"],
    ["kanon", "--out", "x", "--format", "csv"],
    ["kanon", "--out", "x", "--groups", "0"],
    [],
])
def test_cli_rejects_bad_options(argv, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as raised:
        generate.main(argv)
    assert raised.value.code not in (0, None)
