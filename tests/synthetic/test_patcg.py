"""Tests of the PATCG-like dataset generator (``synthetic.patcg``, Cookie Monster paper Sec. 8.3).

Statistical checks run on fixed seeds (reproducible); each tolerance is justified next to it as a number of
standard deviations of the checked statistic, at least 5 (a false-failure rate below 1e-6 for a fresh seed).
"""
from __future__ import annotations

import bisect
import collections
import json
import math
from pathlib import Path

import numpy as np
import pytest

from pipelines import generate
from schemas.codecs import CONVERSION, IMPRESSION
from schemas.proto import events_pb2
from schemas.rows import Conversion, Impression
from schemas.time_units import parse_start
from synthetic import patcg
from synthetic.files import RequestEncoder, encode_impressions, encode_record
from synthetic.patcg import (
    PATCG_EPSILON,
    PatcgStats,
    generate_patcg,
    patcg_hit_probability,
    patcg_impressed_probability,
    patcg_request,
)
from tests.support.files import read_rows

DAY = 86_400 * 1_000_000
START = parse_start("2024-01-01")
SMALL = 0.0005  # 8,000 users, about 12,000 conversions
STATS_SCALE = 0.002  # 32,000 users, about 48,000 conversions and 2,300 users shown ads


def read_dataset(stats: PatcgStats):
    impressions, dead_i = read_rows(sorted(stats.impression_files), IMPRESSION)
    conversions, dead_c = read_rows(sorted(stats.conversion_files), CONVERSION)
    assert dead_i == [] and dead_c == []
    return impressions, conversions


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The dataset at ``STATS_SCALE`` (Avro), its stats and its rows read back."""
    out = tmp_path_factory.mktemp("patcg")
    stats = generate_patcg(out, scale=STATS_SCALE, seed=11, progress=False)
    impressions, conversions = read_dataset(stats)
    return out, stats, impressions, conversions


def attributable(impressions, conversions, window_days: int) -> int:
    """Conversions with an impression of the same device in [t - window, t], from the rows alone."""
    times = collections.defaultdict(list)
    for imp in impressions:
        times[imp.device_id].append(imp.event_time_micros)
    for device_times in times.values():
        device_times.sort()
    hits = 0
    for conv in conversions:
        device_times = times.get(conv.device_id, [])
        i = bisect.bisect_right(device_times, conv.event_time_micros) - 1
        hits += i >= 0 and device_times[i] >= conv.event_time_micros - window_days * DAY
    return hits


# --------------------------------------------------------------------------- files and counts


def test_files_read_back_and_match_stats(run):
    out, stats, impressions, conversions = run
    assert all(type(row) is Impression for row in impressions) and all(type(row) is Conversion for row in conversions)
    assert len(impressions) == stats.impressions and len(conversions) == stats.conversions
    assert stats.users == round(16_000_000 * STATS_SCALE) == len({c.device_id for c in conversions})
    assert stats.impressed_users == len({i.device_id for i in impressions})
    assert [Path(p).name for p in stats.impression_files] == ["impressions-00000-of-00001.avro"]
    assert [Path(p).name for p in stats.conversion_files] == ["conversions-00000-of-00001.avro"]
    summary = json.loads((out / "generation.json").read_text())
    assert summary["dataset"] == "patcg-like"
    assert summary["parameters"] == {"scale": STATS_SCALE, "seed": 11, "format": "avro", "window_days": 7,
                                     "start": "2024-01-01T00:00:00Z", "start_micros": START}
    model = summary["model"]
    assert (model["expected_batch_sum"], model["alpha"], model["beta"]) == (2000, 0.05, 0.01)
    assert model["impressed_probability"] == pytest.approx(patcg_impressed_probability(7))
    recorded = summary["stats"]
    assert (recorded["impressions"], recorded["conversions"]) == (len(impressions), len(conversions))
    assert (recorded["batch_size"], recorded["epsilon"], recorded["queries"]) == (stats.batch_size, PATCG_EPSILON, 80)
    assert recorded["conversion_files"] == ["conversions-00000-of-00001.avro"]


@pytest.mark.parametrize("fmt", ["jsonl", "pb"])
def test_other_formats_give_the_same_rows(fmt, tmp_path):
    avro = generate_patcg(tmp_path / "avro", scale=SMALL, seed=2, progress=False)
    other = generate_patcg(tmp_path / fmt, scale=SMALL, seed=2, fmt=fmt, progress=False)
    assert Path(other.conversion_files[0]).name == f"conversions-00000-of-00001.{fmt}"
    assert read_dataset(other) == read_dataset(avro)


def test_ids_devices_and_order(run):
    _, stats, impressions, conversions = run
    width = len(str(stats.users))
    assert all(len(c.device_id) == len("device-") + width for c in conversions)
    assert [c.conversion_id for c in conversions] == [f"conv-{n:0{len(str(stats.conversions))}d}"
                                                     for n in range(stats.conversions)]
    assert [i.impression_id for i in impressions] == [f"imp-{n:0{len(str(stats.impressions))}d}"
                                                     for n in range(stats.impressions)]
    times = [c.event_time_micros for c in conversions]
    assert times == sorted(times)
    assert START + 30 * DAY <= times[0] and times[-1] < START + 150 * DAY
    assert all(START <= i.event_time_micros < START + 150 * DAY for i in impressions)
    # impressions user by user, each user's in time order
    keys = [(i.device_id, i.event_time_micros) for i in impressions]
    assert keys == sorted(keys)
    assert {(i.advertiser_site, i.publisher_site, i.campaign_id, i.product_id, i.filter_keys) for i in impressions} == {
        ("advertiser.example", "publisher.example", "patcg-ads", "", ())}


def test_requests(run):
    _, stats, _, conversions = run
    for conv in conversions[:2000]:
        attribute = int(conv.product_id.removeprefix("product-"))
        request = conv.attribution_request
        assert (conv.advertiser_site, conv.querier_site) == ("advertiser.example", "advertiser.example")
        assert request.query_key == f"attribute={attribute}" and request.product_id == conv.product_id
        assert (request.window_days, request.campaign_ids, request.logic, request.dimension, request.norm) == (
            7, ("patcg-ads",), "last_touch", 1, "L1")
        assert request.report_global_sensitivity == request.query_global_sensitivity == 15.0
        assert request.requested_epsilon == PATCG_EPSILON == pytest.approx(15 * math.log(100) / (0.05 * 2000))
    assert PATCG_EPSILON == pytest.approx(0.690776, abs=1e-6)


def test_batch_size_fills_eight_batches_per_key(run):
    _, stats, _, conversions = run
    counts = collections.Counter(c.attribution_request.query_key for c in conversions)
    assert sorted(counts) == [f"attribute={a}" for a in range(10)]
    assert [counts[f"attribute={a}"] for a in range(10)] == stats.conversions_by_attribute
    assert stats.batch_size == min(counts.values()) // 8 and stats.queries == 80


# --------------------------------------------------------------------------- the model's statistics


def test_conversions_per_user_and_attribute_shares(run):
    _, stats, _, conversions = run
    per_user = len(conversions) / stats.users
    # 1 + Poisson(0.5) over 32,000 users: sd of the mean sqrt(0.5 / 32000) = 0.004; 0.05 is 12 sd.
    assert per_user == pytest.approx(1.5, abs=0.05) and stats.conversions_per_user == per_user
    counts = collections.Counter(c.product_id for c in conversions)
    # Each share is a binomial proportion over ~48,000 conversions: sd sqrt(0.09 / 48000) = 0.14 %; 1.5 % is 11 sd.
    for name in (f"product-{a}" for a in range(10)):
        assert counts[name] / len(conversions) == pytest.approx(0.10, abs=0.015)


def test_attributable_fraction_from_the_rows(run):
    _, stats, impressions, conversions = run
    hits = attributable(impressions, conversions, 7)
    assert hits == stats.attributable_conversions  # the generator's vectorised count is exact
    # Expected exactly 1 % by construction (see test_hit_probability_matches_a_simulation). About 480 hits; a
    # user's conversions share its impressions, so the variance is up to (1 + E[extra conversions]) = 1.5 times
    # the Poisson one: sd <= sqrt(1.5 * 480) / 48,000 = 0.056 %, and 0.5 % is 9 sd.
    assert hits / len(conversions) == pytest.approx(0.01, abs=0.005)
    assert stats.attributable_fraction == hits / len(conversions)


def test_impressions_per_impressed_user(run):
    _, stats, impressions, _ = run
    per_device = collections.Counter(i.device_id for i in impressions)
    mean = len(impressions) / len(per_device)
    # 1 + Poisson(2.2) over ~2,290 users shown ads: sd of the mean sqrt(2.2 / 2290) = 0.031; 0.16 is 5.2 sd.
    assert mean == pytest.approx(3.2, abs=0.16) and stats.impressions_per_impressed_user == pytest.approx(mean)
    # Users shown ads: binomial with p = 0.0716 over 32,000 users, sd 0.0014; 0.0075 is 5.2 sd.
    assert len(per_device) / stats.users == pytest.approx(patcg_impressed_probability(7), abs=0.0075)


def test_values(run):
    _, _, _, conversions = run
    values = np.array([c.value for c in conversions])
    assert values.min() >= 0.01 and values.max() == 15.0
    assert np.all(np.abs(values * 100 - np.rint(values * 100)) < 1e-6)  # two decimals
    # P(lognormal(1.5, 0.8) >= 15) = 1 - Phi((ln 15 - 1.5) / 0.8) = 0.0655; sd over 48,000 is 0.0011; 0.006 is 5.3 sd.
    at_cap = 0.5 * math.erfc((math.log(14.995) - 1.5) / 0.8 / math.sqrt(2))
    assert np.mean(values == 15.0) == pytest.approx(at_cap, abs=0.006)


def test_hit_probability_matches_a_simulation():
    """The closed form of P(an impressed user's conversion has an impression in its window) against a direct
    simulation of the model: 400,000 samples, sd <= sqrt(0.25 / 4e5) = 0.0008; 0.004 is 5 sd."""
    rng = np.random.default_rng(5)
    n = 400_000
    counts = 1 + rng.poisson(2.2, size=n)
    impression_days = rng.uniform(0, 150, size=(n, counts.max()))
    present = np.arange(counts.max()) < counts[:, None]
    t = rng.uniform(30, 150, size=n)
    for window in (1, 7, 30, 60, 150):
        inside = present & (impression_days <= t[:, None]) & (impression_days >= t[:, None] - window)
        assert patcg_hit_probability(window) == pytest.approx(inside.any(axis=1).mean(), abs=0.004), window
    assert patcg_hit_probability(7) == pytest.approx(1 - (1 - 7 / 150) * math.exp(-2.2 * 7 / 150))
    assert patcg_impressed_probability(7) == pytest.approx(0.0716, abs=1e-4)


def test_other_window(tmp_path):
    stats = generate_patcg(tmp_path, scale=0.001, seed=3, window_days=30, progress=False)
    impressions, conversions = read_dataset(stats)
    assert {c.attribution_request.window_days for c in conversions} == {30}
    hits = attributable(impressions, conversions, 30)
    assert hits == stats.attributable_conversions
    # ~240 hits of 24,000: sd <= sqrt(1.5 * 240) / 24,000 = 0.08 %; 0.5 % is 6 sd.
    assert hits / len(conversions) == pytest.approx(0.01, abs=0.005)


# --------------------------------------------------------------------------- determinism, files, encoders


def test_same_seed_gives_the_same_files(tmp_path):
    runs = [generate_patcg(tmp_path / name, scale=SMALL, seed=seed, progress=False)
            for name, seed in (("a", 7), ("b", 7), ("c", 8))]
    for kind in ("impression_files", "conversion_files"):
        a, b, c = (getattr(stats, kind)[0] for stats in runs)
        assert Path(a).read_bytes() == Path(b).read_bytes() != Path(c).read_bytes()
    assert (tmp_path / "a" / "generation.json").read_bytes() == (tmp_path / "b" / "generation.json").read_bytes()


def test_records_do_not_depend_on_the_number_of_files(tmp_path, monkeypatch):
    # Chunks have their own streams: another chunk size gives other rows, so both runs use 4 chunks of 2,000 users.
    monkeypatch.setattr(patcg, "PATCG_CHUNK_USERS", 2000)
    one = generate_patcg(tmp_path / "one", scale=SMALL, seed=4, progress=False)
    monkeypatch.setattr(patcg, "PATCG_RECORDS_PER_SHARD", 1000)
    many = generate_patcg(tmp_path / "many", scale=SMALL, seed=4, progress=False)
    assert len(one.conversion_files) == len(one.impression_files) == 1
    assert len(many.impression_files) == 2 and len(many.conversion_files) == -(-many.conversions // 1000)
    assert Path(many.conversion_files[-1]).name == f"conversions-{len(many.conversion_files) - 1:05d}-of-" \
                                                   f"{len(many.conversion_files):05d}.avro"
    assert read_dataset(many) == read_dataset(one)  # conversion files are consecutive time slices
    assert not list((tmp_path / "many").glob(".patcg-buckets-*"))  # the temporary buckets are gone


def test_fast_encoders_match_the_record_encoder():
    requests = [patcg_request(a, 7) for a in range(3)]
    encoder = RequestEncoder(requests)
    columns = (["device-1", "device-2"], [5, 6], ["conv-1", "conv-2"], "advertiser.example", [1.25, 15.0],
               ["product-1", "product-2"], [1, 2])
    for fmt in ("avro", "jsonl", "pb"):
        slow = [encode_record(fmt, events_pb2.Conversion, {
            "device_id": d, "event_time_micros": t, "conversion_id": i, "advertiser_site": "advertiser.example",
            "querier_site": "advertiser.example", "value": v, "product_id": p, "attribution_request": requests[r]})
            for d, t, i, v, p, r in zip(*columns[:3], *columns[4:], strict=True)]
        assert encoder.encode(fmt, *columns) == slow
        impression = {"device_id": "d", "event_time_micros": 3, "impression_id": "imp-1", "publisher_site": "p.example",
                      "advertiser_site": "a.example", "campaign_id": "c", "product_id": "x", "filter_keys": []}
        assert encode_impressions(fmt, ["d"], [3], ["imp-1"], publisher="p.example", advertiser="a.example",
                                  campaign="c", product=["x"]) == [encode_record(fmt, events_pb2.Impression, impression)]


# --------------------------------------------------------------------------- CLI


def test_cli_writes_files_and_summary(tmp_path, capsys):
    out = tmp_path / "cli"
    code = generate.main(["patcg-like", "--output", str(out), "--scale", str(SMALL), "--seed", "3", "--format", "jsonl",
                          "--window-days", "10", "--start", "2024-02-01"])
    assert code == 0
    captured = capsys.readouterr()
    assert "generate patcg-like: wrote 8,000 users" in captured.out and "queries: 80 (10 keys x 8 batches" in captured.out
    assert "10-day window" in captured.out and "conversions-00000-of-00001.jsonl" in captured.out
    assert captured.err.startswith("generate patcg-like: [")  # progress on stderr
    summary = json.loads((out / "generation.json").read_text())
    assert summary["parameters"]["start_micros"] == parse_start("2024-02-01")
    assert summary["parameters"]["window_days"] == 10 and summary["parameters"]["format"] == "jsonl"
    assert generate.main(["patcg-like", "--output", str(out), "--scale", str(SMALL), "--quiet"]) == 0
    assert capsys.readouterr().err == ""
    assert sorted(p.name for p in out.glob("*-of-*")) == ["conversions-00000-of-00001.avro",
                                                          "impressions-00000-of-00001.avro"]  # earlier files replaced


@pytest.mark.parametrize("options", [
    ["--scale", "0"], ["--scale", "-1"], ["--scale", "nan"], ["--scale", "inf"], ["--scale", "0.00001"],
    ["--window-days", "0"], ["--window-days", "151"], ["--start", "not-a-date"], ["--start", "2099-12-01"],
])
def test_cli_rejects_bad_options_with_one_line(options, tmp_path, capsys):
    with pytest.raises(SystemExit) as raised:
        generate.main(["patcg-like", "--output", str(tmp_path / "x"), *options])
    assert raised.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith("generate patcg-like: error: ") and error.count("\n") == 1
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("argv", [["patcg-like"], ["patcg-like", "--output", "x", "--format", "csv"],
                                  ["patcg-like", "--output", "x", "--scale", "abc"]])
def test_cli_usage_errors(argv, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as raised:
        generate.main(argv)
    assert raised.value.code == 2
