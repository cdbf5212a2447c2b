"""The ARA and PAA dataset generators (``synthetic.ara`` and ``paa``): determinism, formats, shape.

Statistical checks run on fixed seeds (reproducible); each tolerance is at least 5 standard deviations of the
checked statistic (a false-failure rate below 1e-6 for a fresh seed), computed next to it.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import fastavro
import pytest

from pipelines import generate
from schemas.codecs import ARA_SOURCE, ARA_TRIGGER, PAA_EVENT
from schemas.limits import MAX_EXPIRY_SECONDS
from synthetic.ara import ARA_CLICK_SHARE, ARA_COUNT_VALUE, ARA_VIEW_EXPIRY_SECONDS, generate_ara
from synthetic.paa import PAA_PROTECTED_AUDIENCE_SHARE, generate_paa, paa_campaigns
from tests.support.files import output_bytes, read_rows
from transforms.summary_reports.mechanisms.paa_client import campaign_bucket

DAY = 86_400 * 1_000_000


def domain(stats) -> list[int]:
    with open(stats.domain_files[0], "rb") as handle:
        return [int.from_bytes(record["bucket"], "big") for record in fastavro.reader(handle)]


@pytest.fixture(scope="module")
def ara(tmp_path_factory):
    """1,000 devices over 30 days (about 60,000 sources), Avro, read back."""
    stats = generate_ara(tmp_path_factory.mktemp("ara"), devices=1000, seed=4, progress=False)
    sources, dead_s = read_rows(stats.source_files, ARA_SOURCE)
    triggers, dead_t = read_rows(stats.trigger_files, ARA_TRIGGER)
    assert dead_s == dead_t == []
    return stats, sources, triggers


def test_ara_counts_and_shape(ara):
    stats, sources, triggers = ara
    assert (len(sources), len(triggers)) == (stats.sources, stats.triggers)
    # sources ~ Poisson(2 * 30) per device: mean 60, sd of the total sqrt(60,000) = 245; 5 sd = 1,225
    assert abs(stats.sources - 60_000) < 1_225
    # clicks ~ Binomial(n, 0.1): sd sqrt(n * 0.09) = 73; 5 sd = 370
    assert abs(stats.clicks - ARA_CLICK_SHARE * stats.sources) < 370
    # ad-driven triggers ~ 1.4 % of the sources (less the few past the end), organic ~ Poisson(0.3 per device);
    # the data are seeded, so these bands are deterministic checks of the model (no chance failures)
    assert 0.01 < (stats.triggers - stats.organic_triggers) / stats.sources < 0.015
    assert 0.01 < stats.triggers / stats.sources < 0.03
    for source in sources[:2000]:
        click = source.priority == 100
        assert source.expiry_seconds == (MAX_EXPIRY_SECONDS if click else ARA_VIEW_EXPIRY_SECONDS)
        assert [key.name for key in source.aggregation_keys] == ["purchaseCount", "purchaseValue"]
        assert 1 <= len(source.filter_data) <= 3
    sites = {(s.destination, s.reporting_origin) for s in sources}
    for trigger in triggers:
        assert (trigger.destination, trigger.reporting_origin) in sites and len(trigger.filters) == 1
        values = dict(trigger.aggregatable_values)
        assert values["purchaseCount"] == ARA_COUNT_VALUE and 1 <= values["purchaseValue"] <= ARA_COUNT_VALUE
    # every bucket a report can hold is in the domain: a source key OR the key piece of a trigger of its site
    keys: dict[str, set] = {}
    for source in sources:
        keys.setdefault(source.destination, set()).update(key.key for key in source.aggregation_keys)
    buckets = {key | trigger.aggregatable_trigger_data[0].key_piece for trigger in triggers for key in keys[trigger.destination]}
    assert buckets <= set(domain(stats))
    assert len(domain(stats)) == stats.domain_buckets == 6 * 4 * 2 * 4  # advertisers x campaigns x keys x categories


def test_ara_is_deterministic_and_the_same_in_every_format(tmp_path):
    first = generate_ara(tmp_path / "a", devices=150, days=10, seed=8, progress=False)
    again = generate_ara(tmp_path / "b", devices=150, days=10, seed=8, progress=False)
    assert output_bytes(first) == output_bytes(again)
    assert output_bytes(generate_ara(tmp_path / "c", devices=150, days=10, seed=9, progress=False)) != output_bytes(first)
    rows = read_rows(first.source_files, ARA_SOURCE)[0], read_rows(first.trigger_files, ARA_TRIGGER)[0]
    for fmt in ("jsonl", "pb"):
        other = generate_ara(tmp_path / fmt, devices=150, days=10, seed=8, fmt=fmt, shards=2, progress=False)
        assert len(other.source_files) == 2
        assert (read_rows(other.source_files, ARA_SOURCE)[0], read_rows(other.trigger_files, ARA_TRIGGER)[0]) == rows


@pytest.mark.parametrize("fmt", ["avro", "jsonl", "pb"])
def test_bad_records_read_back_with_their_reasons(tmp_path, fmt):
    stats = generate_ara(tmp_path / "ara", devices=100, days=10, seed=1, fmt=fmt, bad_fraction=0.05, progress=False)
    (sources, dead_s), (triggers, dead_t) = read_rows(stats.source_files, ARA_SOURCE), read_rows(stats.trigger_files, ARA_TRIGGER)
    assert (len(sources), len(triggers), len(dead_s), len(dead_t)) == (stats.sources, stats.triggers, stats.bad_sources,
                                                                       stats.bad_triggers)
    reasons: dict[str, int] = {}
    for letter in dead_s + dead_t:
        reasons[letter.reason] = reasons.get(letter.reason, 0) + 1
    assert reasons == stats.bad_by_reason
    # bad records are counted per chunk to keep bad / (valid + bad) at the fraction, up to rounding
    assert abs(stats.bad_sources / (stats.sources + stats.bad_sources) - 0.05) < 0.001
    paa = generate_paa(tmp_path / "paa", devices=50, days=3, seed=1, fmt=fmt, bad_fraction=0.05, progress=False)
    events, dead = read_rows(paa.event_files, PAA_EVENT)
    assert (len(events), len(dead)) == (paa.events, paa.bad_events)
    assert {letter.reason for letter in dead} == set(paa.bad_by_reason)


def test_paa_shape_and_determinism(tmp_path):
    stats = generate_paa(tmp_path / "a", devices=1000, days=7, seed=3, progress=False)
    events, dead = read_rows(stats.event_files, PAA_EVENT)
    assert dead == [] and len(events) == stats.events
    # per device: Poisson(1.5 * 7) sessions of 1 + Poisson(3) views, mean 42, variance 10.5 * (4 + 16) = 210
    # (compound Poisson: lambda E[N^2]); over 1,000 devices the total has sd sqrt(210,000) = 458; 5 sd = 2,291
    assert abs(stats.events - 42_000) < 2_291 + 0.01 * 42_000  # views past the end of the data are dropped
    share = sum(event.api == "protected-audience" for event in events) / len(events)
    assert abs(share - PAA_PROTECTED_AUDIENCE_SHARE) < 5 * math.sqrt(0.21 / len(events))  # Binomial(n, 0.3), 5 sd
    audiences: dict[str, set] = {}
    for event in events:
        audiences.setdefault(event.device_id, set()).add((event.reporting_origin, event.campaign_id))
    assert set().union(*audiences.values()) <= set(paa_campaigns())
    assert 3 < sum(map(len, audiences.values())) / len(audiences) < 4.5  # audiences of 1 + Poisson(3), fewer seen
    assert sorted(domain(stats)) == sorted(campaign_bucket(campaign) for _, campaign in paa_campaigns())
    again = generate_paa(tmp_path / "b", devices=1000, days=7, seed=3, progress=False)
    assert Path(again.event_files[0]).read_bytes() == Path(stats.event_files[0]).read_bytes()


def test_cli_writes_and_reports(tmp_path, capsys):
    assert generate.main(["ara", "--output", str(tmp_path / "ara"), "--devices", "20", "--days", "5", "--quiet"]) == 0
    assert generate.main(["paa", "--output", str(tmp_path / "paa"), "--devices", "20", "--days", "2", "--format", "pb"]) == 0
    printed = capsys.readouterr()
    assert "generate ara: wrote 20 devices" in printed.out and "generate paa: wrote 20 devices" in printed.out
    assert "sources-00000-of-00001.avro" in printed.out and "events-00000-of-00001.pb" in printed.out
    recorded = json.loads((tmp_path / "ara" / "generation.json").read_text())
    assert recorded["dataset"] == "ara" and recorded["stats"]["source_files"] == ["sources-00000-of-00001.avro"]


@pytest.mark.parametrize("argv, message", [
    (["ara", "--devices", "0"], "error: argument --devices: must be an integer in [1, 100000000], got 0"),
    (["ara", "--bad-fraction", "1"], "error: argument --bad-fraction: must be a number in [0, 1), got 1"),
    (["paa", "--start", "yesterday"], "--start must be a date"),
])
def test_cli_rejects_bad_options_with_one_line(tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit) as raised:
        generate.main([*argv, "--output", str(tmp_path)])
    assert raised.value.code == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_files_are_the_same_bytes_whatever_the_hash_seed(tmp_path):
    """Avro headers (the schema's key order) and the domain's sync marker do not depend on the process: two
    processes with different PYTHONHASHSEED write identical files for the same seed."""
    root = Path(__file__).resolve().parents[2]
    written = []
    for hash_seed in ("1", "2"):
        out = tmp_path / hash_seed
        subprocess.run([sys.executable, "-m", "pipelines.generate", "ara", "--output", str(out), "--devices", "40",
                        "--seed", "3", "--quiet"], check=True, cwd=root, env={**os.environ, "PYTHONHASHSEED": hash_seed})
        written.append({path.name: path.read_bytes() for path in sorted(out.glob("*.avro"))})
    assert "domain.avro" in written[0] and len(written[0]) > 2
    assert written[0] == written[1]
