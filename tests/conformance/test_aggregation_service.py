"""The Aggregation Service's own library test sets, through ``pipelines.aggregate``.

Every ``input_set_*`` of ``aggregation_service/library/`` (copied from the public service, Apache 2.0: see its
NOTICE.md) runs in local test mode (``--local-test``: the sets are clear-text reports, key id "no_key", as the
service's Local Testing Tool reads them) with the job flags of its ``flags.txt``:

* ``epsilon``: ``--epsilon``; ``no_noise: true``: ``--no-noise``; ``debug_mode: true``: ``--debug``;
* ``skip_domain: true``: no domain, every key of the reports (``--mode threshold`` without ``--domain``: with these
  sums every key is far above the threshold); ``domain_required: true``: the domain's keys only (``--mode
  domain``); neither (the service's default): the domain and the keys above the threshold (``--mode threshold``).

The expected summary report is the set's ``expected_output_set_*`` where the service publishes one, and otherwise
the sums of its reports as ``text_batch_data.txt`` lists them (or as its payloads hold them). Buckets in these
files are short byte strings ("key1" is the 4-byte bucket 0x6b657931); the comparison turns the job's 128-bit
buckets back into them (``bucket_text``). No-noise sets must match exactly. A noised set must hold every expected
bucket, each metric within ``half_width(1 - 1e-11)`` of its expected sum for DLap(L1 / eps) (false failure at most
1e-11 per bucket, 1e-7 for the 10,000 buckets of the largest set), and, with 1,000 buckets or more, a share of
metrics within one noise scale that an exact Clopper-Pearson interval at confidence 1 - 1e-6 accepts for the
discrete Laplace law (false failure at most 1e-6).
"""
from __future__ import annotations

import json
import math
from collections import Counter
from fractions import Fraction
from pathlib import Path

import fastavro
import pytest

from audit.bounds import clopper_pearson
from pipelines import aggregate
from schemas.aggregatable import PayloadLimits, decode_payload
from schemas.limits import UNBOUNDED_VALUE_SUM
from transforms.core.mechanisms.noise import DiscreteLaplace
from transforms.summary_reports.mechanisms.aggregation import DEFAULT_L1

LIBRARY = Path(__file__).parent / "aggregation_service" / "library"
SETS = sorted(path.name for path in LIBRARY.glob("input_set_*"))
EXPECTED = {"input_set_attribution_1": "expected_output_set_1", "input_set_attribution_3": "expected_output_set_3",
            "input_set_attribution_4": "expected_output_set_4",
            "input_set_thresholding_1": "expected_output_set_thresholding"}
DEFAULT_EPSILON = 10  # the service's default, for sets without flags
LOCAL_TEST_LIMITS = PayloadLimits(max_value_sum=UNBOUNDED_VALUE_SUM)  # --local-test's: the sets sum millions per report


def bucket_text(bucket: int) -> str:
    """A bucket as the test data writes it: its big-endian bytes without leading zeros, as text."""
    return bucket.to_bytes(max(1, (bucket.bit_length() + 7) // 8), "big").decode("ascii")


def flags_of(directory: Path) -> dict[str, str]:
    path = directory / "flags.txt"
    lines = path.read_text().splitlines() if path.exists() else []
    return dict(line.split(":", 1) for line in lines if line.strip())


def _reports(directory: Path) -> list[dict]:
    with (directory / "batch.avro").open("rb") as handle:
        return list(fastavro.reader(handle))


def report_sums(directory: Path) -> Counter:
    """The sum per bucket (as text) of the set's reports: from ``text_batch_data.txt`` when there is one (the
    service's readable form), else from the payloads."""
    sums: Counter = Counter()
    text = directory / "text_batch_data.txt"
    if text.exists():
        for line in text.read_text().split():
            for pair in line.split(","):
                key, value = pair.rsplit(":", 1)
                sums[key] += int(value)
        return sums
    for record in _reports(directory):
        for bucket, value, _ in decode_payload(record["payload"], LOCAL_TEST_LIMITS):
            sums[bucket_text(bucket)] += value
    return sums


def domain_of(directory: Path) -> list[str]:
    with (directory / "domain.avro").open("rb") as handle:
        return [record["bucket"].decode("ascii") for record in fastavro.reader(handle)]


def expected_report(name: str, flags: dict[str, str]) -> dict[str, int]:
    """The summary report the service gives without noise: its published one, else the sums over the keys the
    job's domain rule keeps."""
    if name in EXPECTED:
        rows = json.loads((LIBRARY / EXPECTED[name] / "output.json").read_text())
        return {row["bucket"]: row["metric"] for row in rows}
    directory = LIBRARY / name
    sums = report_sums(directory)
    if flags.get("skip_domain") == "true":
        return dict(sums)
    domain = {key: sums.get(key, 0) for key in domain_of(directory)}
    return domain if flags.get("domain_required") == "true" else {**dict(sums), **domain}


def job_arguments(name: str, flags: dict[str, str], output: Path) -> list[str]:
    directory = LIBRARY / name
    latest = max(float(json.loads(record["shared_info"])["scheduled_report_time"]) for record in _reports(directory))
    arguments = ["--reports", str(directory / "batch.avro"), "--output", str(output), "--local-test",
                 "--output-format", "jsonl", "--epsilon", flags.get("epsilon", str(DEFAULT_EPSILON)),
                 "--now", str(int(latest) + 3600), "--runner=FnApiRunner"]
    if flags.get("skip_domain") == "true":
        arguments += ["--mode", "threshold"]
    else:
        arguments += ["--mode", "domain" if flags.get("domain_required") == "true" else "threshold",
                      "--domain", str(directory / "domain.avro")]
    if flags.get("no_noise") == "true":
        arguments.append("--no-noise")
    if flags.get("debug_mode") == "true":
        arguments.append("--debug")
    return arguments


def released(output: Path, prefix: str = "summary_report") -> list[dict]:
    return [json.loads(line) for path in sorted(output.glob(f"{prefix}-*")) for line in path.read_text().splitlines()]


def test_the_buckets_of_the_test_data_round_trip() -> None:
    assert bucket_text(int.from_bytes(b"key1", "big")) == "key1" and bucket_text(int.from_bytes(b"22", "big")) == "22"
    payload = _reports(LIBRARY / "input_set_attribution_1")[0]["payload"]
    assert payload.startswith(b"\xbf")  # an indefinite-length CBOR map, as the service's tools write them
    contributions = decode_payload(payload, LOCAL_TEST_LIMITS)
    assert [(bucket_text(b), v) for b, v, _ in contributions] == [("key1", 1_000_000), ("key2", 1_000_000)]


@pytest.mark.parametrize("name", SETS)
def test_the_set_gives_the_services_summary_report(name: str, tmp_path: Path, capsys) -> None:
    flags = flags_of(LIBRARY / name)
    status = aggregate.main(job_arguments(name, flags, tmp_path))
    printed = capsys.readouterr()
    assert status == 0, printed.out + printed.err
    assert printed.err.startswith("LOCAL TEST MODE: none: nothing in this run is private")
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["receipt"]["charge"] == "none" and summary["parameters"]["ledger"] is None
    assert summary["counts"]["dead_lettered"] == 0 and summary["counts"]["read"] == len(_reports(LIBRARY / name))
    expected = expected_report(name, flags)
    got = {bucket_text(int(row["bucket"])): row["metric"] for row in released(tmp_path)}
    if flags.get("debug_mode") == "true":
        debug = {bucket_text(int(row["bucket"])): row["unnoised_metric"] for row in released(tmp_path, "debug_summary_report")}
        assert debug == expected
    if flags.get("no_noise") == "true":
        assert got == expected
        return
    assert set(expected) <= set(got) and set(got) <= set(expected) | set(report_sums(LIBRARY / name))
    noise = DiscreteLaplace(Fraction(DEFAULT_L1) / Fraction(flags.get("epsilon", str(DEFAULT_EPSILON))))
    width = noise.half_width(1 - 1e-11)
    deviations = [got[key] - expected[key] for key in expected]
    assert max(map(abs, deviations)) <= width, (width, sorted(deviations)[:3], sorted(deviations)[-3:])
    if len(deviations) >= 1000:
        scale = math.floor(noise.scale)
        within = sum(abs(d) <= scale for d in deviations)
        probability = sum(noise.pmf(x) for x in range(-scale, scale + 1))
        lo, hi = clopper_pearson(within, len(deviations), 1 - 1e-6)
        assert lo <= probability <= hi, (within, len(deviations), probability)
