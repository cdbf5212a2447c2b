"""Tests of the Criteo-like dataset generator (``synthetic.criteo``, Cookie Monster paper Sec. 8.4, Criteo++).

Statistical checks run on fixed seeds (reproducible); each tolerance is justified next to it as a number of
standard deviations of the checked statistic, at least 5 (a false-failure rate below 1e-6 for a fresh seed).
"""
from __future__ import annotations

import bisect
import collections
import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest

from pipelines import generate
from schemas.codecs import CONVERSION, IMPRESSION
from schemas.rows import Conversion, Impression
from schemas.time_units import parse_start
from synthetic import criteo
from synthetic.criteo import (
    CRITEO_AUDIENCE_SHARE,
    CRITEO_EPSILON,
    CRITEO_LARGEST_SHARE,
    CRITEO_POPULATION_RHO,
    CriteoStats,
    criteo_advertisers,
    criteo_population,
    criteo_population_rho,
    criteo_shares,
    criteo_weight_law,
    device_tail,
    generate_criteo,
)
from tests.support.files import read_rows
from transforms.budgeting.mechanisms.attribution import select_relevant

DAY = 86_400 * 1_000_000
START = parse_start("2024-01-01")
END = START + 90 * DAY
SCALE = 0.002  # about 24,000 impressions, 2,600 conversions, 20,000 devices
AUGMENT = 3


def read_dataset(stats: CriteoStats):
    impressions, dead_i = read_rows(sorted(stats.impression_files), IMPRESSION)
    conversions, dead_c = read_rows(sorted(stats.conversion_files), CONVERSION)
    assert dead_i == [] and dead_c == []
    return impressions, conversions


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The dataset at ``SCALE`` without and with augmentation (same seed): out dir, stats, rows read back."""
    result = {}
    for augment in (0, AUGMENT):
        out = tmp_path_factory.mktemp(f"criteo-a{augment}")
        stats = generate_criteo(out, scale=SCALE, augment=augment, seed=21, progress=False)
        result[augment] = (out, stats, *read_dataset(stats))
    return result


def key(row):
    return row.device_id, row.advertiser_site, row.product_id


# --------------------------------------------------------------------------- files and counts


def test_files_read_back_and_match_stats(runs):
    out, stats, impressions, conversions = runs[0]
    assert all(type(r) is Impression for r in impressions) and all(type(r) is Conversion for r in conversions)
    assert len(impressions) == stats.impressions and len(conversions) == stats.conversions
    assert stats.augmented_impressions == 0 and stats.augment == 0
    assert stats.users == len({i.device_id for i in impressions})
    assert stats.advertisers == 292 == len({i.advertiser_site for i in impressions})
    summary = json.loads((out / "generation.json").read_text())
    assert summary["dataset"] == "criteo-like"
    assert summary["parameters"] == {"scale": SCALE, "augment": 0, "seed": 21, "format": "avro",
                                     "start": "2024-01-01T00:00:00Z", "start_micros": START, "api_fields": False}
    recorded = summary["stats"]
    assert (recorded["impressions"], recorded["conversions"], recorded["users"]) == (
        len(impressions), len(conversions), stats.users)
    assert (recorded["batch_size"], recorded["epsilon"]) == (350, CRITEO_EPSILON)
    assert recorded["impression_files"] == ["impressions-00000-of-00001.avro"]
    assert summary["model"]["population_rho"] == CRITEO_POPULATION_RHO
    assert (recorded["max_device_impressions"], recorded["top_1pct_device_share"]) == (
        stats.max_device_impressions, stats.top_1pct_device_share)


@pytest.mark.parametrize("fmt", ["avro", "jsonl", "pb"])
def test_the_attribution_api_fields_change_only_those_fields(fmt, tmp_path):
    """--api-fields: publishers round robin, the advertiser's ad tech as intermediary, the advertiser as the only
    conversion caller; every other field (and every draw) as without them."""
    plain = read_dataset(generate_criteo(tmp_path / "plain", scale=0.0005, augment=1, seed=2, progress=False))
    api = read_dataset(generate_criteo(tmp_path / fmt, scale=0.0005, augment=1, seed=2, fmt=fmt, progress=False,
                                       api_fields=True))
    assert api[1] == plain[1]
    assert len(api[0]) == len(plain[0])
    for with_fields, without in zip(api[0], plain[0], strict=True):
        assert with_fields._replace(publisher_site=without.publisher_site, intermediary_site="",
                                    conversion_callers=()) == without
        assert with_fields.conversion_callers == (without.advertiser_site,)
        assert with_fields.intermediary_site == criteo.criteo_api_intermediary(int(without.advertiser_site[11:14]))
    publishers = collections.Counter(row.publisher_site for row in api[0] if row.impression_id.startswith("imp-"))
    assert len(publishers) == criteo.CRITEO_API_PUBLISHERS and max(publishers.values()) - min(publishers.values()) <= 1


@pytest.mark.parametrize("fmt", ["jsonl", "pb"])
def test_other_formats_give_the_same_rows(fmt, tmp_path):
    avro = generate_criteo(tmp_path / "avro", scale=0.0005, augment=1, seed=2, progress=False)
    other = generate_criteo(tmp_path / fmt, scale=0.0005, augment=1, seed=2, fmt=fmt, progress=False)
    assert Path(other.impression_files[0]).name == f"impressions-00000-of-00001.{fmt}"
    assert read_dataset(other) == read_dataset(avro)


def test_totals_near_the_paper_scaled(runs):
    _, stats, impressions, conversions = runs[0]
    # Impressions: the advertisers' counts are rounded shares of 12M * s (each at least 1): off by at most 292.
    assert abs(len(impressions) - 12_000_000 * SCALE) <= 292
    # Conversions: expected exactly 1.3M * s = 2,600 (calibrated rates); a sum of Bernoullis, sd <= sqrt(2600) = 51,
    # and 10 % (260) is 5.1 sd.
    assert len(conversions) == pytest.approx(1_300_000 * SCALE, rel=0.10)
    # Distinct devices: 10M * s = 20,000 in the large-population limit (rho solves for it). At this tiny scale the
    # audiences are small and their total weights vary, which adds about 0.7 %: over seeds 0 to 199 the count had
    # mean 20,138 and sd 155 (0.77 %), impressions per device mean 1.193 and sd 0.0092, so 5 % is more than 5.5 sd
    # from the mean for both (test_population_gives_ten_million_devices checks the calibration to 1 % at 0.05).
    assert stats.users == pytest.approx(10_000_000 * SCALE, rel=0.05)
    assert stats.impressions_per_user == pytest.approx(1.2, rel=0.05)


def test_advertisers(runs):
    _, stats, impressions, conversions = runs[0]
    per_advertiser = collections.Counter(i.advertiser_site for i in impressions)
    assert sorted(per_advertiser) == [f"advertiser-{a:03d}.example" for a in range(292)]
    largest, count = per_advertiser.most_common(1)[0]
    assert (stats.largest_advertiser, stats.max_advertiser_impressions) == (largest, count)
    assert count / len(impressions) == pytest.approx(CRITEO_LARGEST_SHARE, abs=1e-3) == 2.6 / 12
    assert stats.largest_advertiser_impression_share == count / len(impressions)
    assert stats.min_advertiser_impressions == min(per_advertiser.values()) >= 1
    sales = collections.Counter(c.advertiser_site for c in conversions)
    assert stats.largest_advertiser_conversions == sales[largest]
    assert stats.advertisers_with_conversions == len(sales) < 292  # about 10 % never sell
    # categories: category-0 is the most frequent of every large advertiser (Zipf-like weights)
    categories = collections.Counter(i.product_id for i in impressions if i.advertiser_site == largest)
    assert categories.most_common(1)[0][0] == "category-0"


def test_device_activity_is_heavy_tailed(runs):
    _, stats, impressions, conversions = runs[0]
    per_device = collections.Counter(i.device_id for i in impressions)
    counts = sorted(per_device.values(), reverse=True)
    top = -(-len(counts) // 100)
    assert stats.max_device_impressions == counts[0]
    assert stats.top_1pct_device_share == sum(counts[:top]) / len(impressions)
    assert stats.devices_with_10_impressions == sum(n >= 10 for n in counts)
    # The top 1 % of the devices hold a heavy share of the impressions: over seeds 0 to 199 at this scale the share
    # had mean 7.75 % and sd 0.63 % (min 6.1 %), so 4.5 % is over 5 sd below the mean; the former mild skew
    # (device = floor(N u^1.3)) gave 2.8 %, with no device over about 10 impressions.
    assert stats.top_1pct_device_share >= 0.045
    assert stats.max_device_impressions >= 20  # seeds 0 to 199: 35 to 205
    # The ARA-like stress: conversions less than 30 days after another of the same device and advertiser.
    by_pair = collections.defaultdict(list)
    for conv in conversions:
        by_pair[conv.device_id, conv.advertiser_site].append(conv.event_time_micros)
    repeats = sum(b - a < 30 * DAY for times in by_pair.values() for a, b in itertools.pairwise(times))
    assert stats.repeat_conversion_share == repeats / len(conversions) > 0


def test_conversions_follow_their_click(runs):
    _, _, impressions, conversions = runs[0]
    clicks = collections.defaultdict(list)
    for imp in impressions:
        clicks[key(imp)].append(imp.event_time_micros)
    for times in clicks.values():
        times.sort()
    for conv in conversions:
        times = clicks[key(conv)]
        i = bisect.bisect_right(times, conv.event_time_micros) - 1
        assert i >= 0 and times[i] > conv.event_time_micros - 30 * DAY, conv  # its click, < 30 days before
    times = [c.event_time_micros for c in conversions]
    assert times == sorted(times) and START <= times[0] and times[-1] < END
    assert all(START <= i.event_time_micros < END for i in impressions)


def test_values_and_requests(runs):
    _, _, _, conversions = runs[0]
    values = np.array([c.value for c in conversions])
    assert set(values.tolist()) <= {1.0, 2.0, 3.0, 4.0, 5.0} and values.max() <= 5.0
    # min(5, 1 + Poisson(0.35)): mean 1.35, sd 0.59; over ~2,600 conversions the mean's sd is 0.012; 0.06 is 5 sd.
    assert values.mean() == pytest.approx(1.35, abs=0.06)
    for conv in conversions:
        request = conv.attribution_request
        assert conv.querier_site == conv.advertiser_site and conv.product_id.startswith("category-")
        assert (request.campaign_ids, request.product_id, request.query_key) == (
            (), conv.product_id, f"category={conv.product_id}")
        assert (request.window_days, request.logic, request.dimension, request.norm) == (30, "last_touch", 1, "L1")
        assert request.report_global_sensitivity == request.query_global_sensitivity == 5.0
        assert request.requested_epsilon == CRITEO_EPSILON
    assert CRITEO_EPSILON == pytest.approx(5 * math.log(100) / (0.05 * 350 * 2))


def test_requests_select_the_click(runs):
    """An empty campaign list selects by product (``select_relevant``): the click is among the relevant impressions."""
    _, _, impressions, conversions = runs[0]
    by_device = collections.defaultdict(list)
    for imp in impressions:
        by_device[imp.device_id].append(imp)
    for conv in conversions[:300]:
        found = select_relevant(by_device[conv.device_id], conv.advertiser_site, conv.attribution_request,
                                conv.event_time_micros)
        assert found and all(key(i) == key(conv) for i in found)


def test_query_stats(tmp_path):
    stats = generate_criteo(tmp_path, scale=0.01, seed=5, progress=False)
    conversions, dead = read_rows(sorted(stats.conversion_files), CONVERSION)
    assert dead == [] and len(conversions) == stats.conversions
    pairs = collections.Counter((c.advertiser_site, c.attribution_request.query_key) for c in conversions)
    assert stats.queries == sum(n // 350 for n in pairs.values()) > 0
    assert stats.query_pairs == sum(n >= 350 for n in pairs.values())
    assert stats.advertisers_with_a_query == len({a for (a, _), n in pairs.items() if n >= 350}) > 0
    assert stats.max_advertiser_conversions == max(collections.Counter(c.advertiser_site for c in conversions).values())


# --------------------------------------------------------------------------- augmentation (Criteo++)


def test_augmentation_adds_x_impressions_per_conversion_in_its_window(runs):
    _, base, base_impressions, base_conversions = runs[0]
    _, stats, impressions, conversions = runs[AUGMENT]
    assert conversions == base_conversions
    augmented = [i for i in impressions if i.impression_id.startswith("aug-")]
    assert [i for i in impressions if not i.impression_id.startswith("aug-")] == base_impressions
    assert len(augmented) == stats.augmented_impressions == AUGMENT * len(conversions)
    assert len(impressions) == stats.impressions + stats.augmented_impressions and stats.impressions == base.impressions
    assert sorted(i.impression_id for i in augmented) == sorted(f"aug-{n}" for n in range(len(augmented)))
    sales = collections.defaultdict(list)
    for conv in conversions:
        sales[key(conv)].append(conv.event_time_micros)
    per_key = collections.Counter(key(i) for i in augmented)
    assert per_key == collections.Counter({k: AUGMENT * len(times) for k, times in sales.items()})
    for imp in augmented:  # inside [max(start, t - 30 d), t) of a conversion of its device, advertiser and category
        assert imp.event_time_micros >= START
        assert any(t - 30 * DAY <= imp.event_time_micros < t for t in sales[key(imp)]), imp


def test_augmentation_leaves_the_conversion_files_identical(runs):
    (_, base, *_), (_, augmented, *_) = runs[0], runs[AUGMENT]
    for a, b in zip(base.conversion_files, augmented.conversion_files, strict=True):
        assert Path(a).read_bytes() == Path(b).read_bytes()


# --------------------------------------------------------------------------- model pieces, determinism, files


def draw_devices(scale: float, seed: int):
    """The advertisers, population and every advertiser's impression devices of the model at ``scale`` (no files)."""
    rng = np.random.default_rng(seed)
    adv = criteo_advertisers(rng, scale)
    population = criteo_population(rng, adv.impressions)
    return adv, population, [population.draw(rng, a, n) for a, n in enumerate(adv.impressions.tolist())]


def test_population_gives_ten_million_devices():
    assert criteo_population_rho() == pytest.approx(CRITEO_POPULATION_RHO, abs=1e-6)
    weights, probabilities = criteo_weight_law()
    assert weights.tolist() == list(range(1, 5_001)) and probabilities.sum() == pytest.approx(1.0)
    assert probabilities[0] / probabilities[1] == pytest.approx(2 ** 2.5)
    # The model against a direct draw at scale 0.05 (600,000 impressions): 500,000 distinct devices expected; over
    # seeds 0 to 29 the count had mean 500,069 and sd 952, so 1 % (5,000) is over 5 sd; the top 1 % of the devices
    # held 8.16 % of the impressions, sd 0.16 %, so 7.3 % is over 5 sd below; the most active device had 158 to 232.
    adv, population, draws = draw_devices(0.05, 1)
    assert population.size == sum(max(1, round(n / CRITEO_POPULATION_RHO)) for n in adv.impressions.tolist())
    devices = np.concatenate(draws)
    assert 0 <= devices.min() and devices.max() < population.size
    tail = device_tail(devices.astype(np.uint32))
    assert tail["users"] == pytest.approx(500_000, rel=0.01) and tail["users"] == np.unique(devices).size
    assert tail["top_1pct_device_share"] >= 0.073 and tail["max_device_impressions"] >= 100
    # Audiences: an impression's device is in its advertiser's audience with probability 0.75 + 0.25 x the
    # audience's share of the total weight; for the largest advertiser (130,000 impressions) the observed share's
    # sd is at most sqrt(0.25 / 130,000) = 0.0014, and 0.007 is 5 sd.
    big = int(np.argmax(adv.impressions))
    lo, hi = population.device_of(population.audience[big:big + 2] - np.array([0, 1])) + np.array([0, 1])
    own = np.mean((draws[big] >= lo) & (draws[big] < hi))
    weight_share = (population.audience[big + 1] - population.audience[big]) / population.audience[-1]
    assert own == pytest.approx(CRITEO_AUDIENCE_SHARE + (1 - CRITEO_AUDIENCE_SHARE) * weight_share, abs=0.007)


def test_population_cells_give_devices_in_proportion_to_weight():
    """Each device owns ``weight`` consecutive units: the units of a cell map to its devices in order."""
    _, population, _ = draw_devices(0.0005, 3)
    units = np.arange(population.audience[-1])
    devices = population.device_of(units)
    owned = np.bincount(devices, minlength=population.size)
    expected = np.repeat(population.weight, np.diff(np.append(population.first, population.size)))
    assert owned.tolist() == expected.tolist()  # every device gets exactly its weight, devices in id order
    assert np.all(np.diff(devices) >= 0) and devices[-1] == population.size - 1


def test_categories_grow_with_the_advertiser():
    # K_a - 1 ~ Poisson((I_a / 7,000)^1.75): the sum over advertisers is Poisson too, within 5 sd of its mean.
    adv = criteo_advertisers(np.random.default_rng(4), 1.0)
    means = (adv.impressions / 7_000) ** 1.75
    assert abs(int(np.sum(adv.categories - 1)) - means.sum()) <= 5 * math.sqrt(means.sum())
    assert adv.categories[np.argmax(adv.impressions)] > 25_000  # 2.6M impressions: mean 31,600, sd 178
    assert all(w.size == k and w[0] / w[-1] == pytest.approx(k ** 0.7) for w, k in
               zip(adv.category_weights, adv.categories.tolist(), strict=True) if k > 1)


def test_shares():
    rng = np.random.default_rng(3)
    for _ in range(20):
        shares = criteo_shares(rng.lognormal(0, 2.2, size=292))
        assert shares.sum() == pytest.approx(1.0) and shares.max() == pytest.approx(2.6 / 12)
    # water-filling: the second and third weights would get 0.7 * 9 / 19 = 0.33 > 0.3, so they are capped
    shares = criteo_shares(np.array([10.0, 9.0, 9.0, 1.0, 1.0]), largest=0.3)
    assert shares.tolist() == pytest.approx([0.3, 0.3, 0.3, 0.05, 0.05])


def test_same_seed_gives_the_same_files(tmp_path):
    runs = [generate_criteo(tmp_path / name, scale=0.0005, augment=2, seed=seed, progress=False)
            for name, seed in (("a", 7), ("b", 7), ("c", 8))]
    for kind in ("impression_files", "conversion_files"):
        a, b, c = (getattr(stats, kind)[0] for stats in runs)
        assert Path(a).read_bytes() == Path(b).read_bytes() != Path(c).read_bytes()
    assert (tmp_path / "a" / "generation.json").read_bytes() == (tmp_path / "b" / "generation.json").read_bytes()


def test_records_do_not_depend_on_the_number_of_files(tmp_path, monkeypatch):
    one = generate_criteo(tmp_path / "one", scale=0.0005, augment=1, seed=4, progress=False)
    monkeypatch.setattr(criteo, "CRITEO_RECORDS_PER_SHARD", 300)
    many = generate_criteo(tmp_path / "many", scale=0.0005, augment=1, seed=4, progress=False)
    assert len(one.impression_files) == len(one.conversion_files) == 1
    assert len(many.impression_files) == -(-many.impressions // 300) > 10  # files of about 300 base impressions
    assert len(many.conversion_files) == -(-many.conversions // 300) > 1  # about 650 conversions
    assert read_dataset(many) == read_dataset(one)


# --------------------------------------------------------------------------- CLI


def test_cli_writes_files_and_summary(tmp_path, capsys):
    out = tmp_path / "cli"
    code = generate.main(["criteo-like", "--output", str(out), "--scale", "0.0005", "--augment", "2", "--seed", "3",
                          "--format", "pb", "--start", "2024-02-01"])
    assert code == 0
    captured = capsys.readouterr()
    assert "generate criteo-like: wrote 6,0" in captured.out and "augmented) of 292 advertisers" in captured.out
    assert "batches of 350" in captured.out and "impressions-00000-of-00001.pb" in captured.out
    assert captured.err.startswith("generate criteo-like: [")  # progress on stderr
    summary = json.loads((out / "generation.json").read_text())
    assert summary["parameters"]["start_micros"] == parse_start("2024-02-01") and summary["parameters"]["augment"] == 2
    assert summary["stats"]["augmented_impressions"] == 2 * summary["stats"]["conversions"]
    assert generate.main(["criteo-like", "--output", str(out), "--scale", "0.0005", "--quiet"]) == 0
    assert capsys.readouterr().err == ""
    assert sorted(p.name for p in out.glob("*-of-*")) == ["conversions-00000-of-00001.avro",
                                                          "impressions-00000-of-00001.avro"]  # earlier files replaced


@pytest.mark.parametrize("options", [
    ["--scale", "0"], ["--scale", "-0.1"], ["--scale", "nan"], ["--scale", "inf"], ["--scale", "0.00001"],
    ["--augment", "-1"], ["--augment", "101"], ["--start", "not-a-date"], ["--start", "2099-12-01"],
])
def test_cli_rejects_bad_options_with_one_line(options, tmp_path, capsys):
    with pytest.raises(SystemExit) as raised:
        generate.main(["criteo-like", "--output", str(tmp_path / "x"), *options])
    assert raised.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith("generate criteo-like: error: ") and error.count("\n") == 1
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("argv", [["criteo-like"], ["criteo-like", "--output", "x", "--format", "csv"],
                                  ["criteo-like", "--output", "x", "--augment", "1.5"]])
def test_cli_usage_errors(argv, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as raised:
        generate.main(argv)
    assert raised.value.code == 2
