"""generate -> client -> aggregate -> summary: the ARA and PAA clients' reports through the Aggregation Service."""
from __future__ import annotations

import glob
import json
import math
from pathlib import Path

import fastavro
import pytest

from pipelines import aggregate, summary_client
from pipelines.common import read_records
from schemas.aggregatable import decode_payload
from synthetic.ara import generate_ara
from synthetic.paa import generate_paa

DAY = 86_400
START = 1_704_067_200  # 2024-01-01T00:00:00Z, the generators' default start
pytestmark = pytest.mark.slow


def _true_sums(reports_dir: Path) -> dict[int, int]:
    sums: dict[int, int] = {}
    for path in glob.glob(str(reports_dir / "reports-*")):
        with open(path, "rb") as handle:
            for record in fastavro.reader(handle):
                for bucket, value, _ in decode_payload(record["payload"]):
                    sums[bucket] = sums.get(bucket, 0) + value
    return sums


def _domain(path: Path) -> list[int]:
    with open(path, "rb") as handle:
        return [int.from_bytes(record["bucket"], "big") for record in fastavro.reader(handle)]


def _released(output: Path) -> dict[int, int]:
    return {int(row["bucket"]): row["metric"] for path in sorted(output.glob("summary_report-*"))
            for row in read_records(str(path))}


@pytest.fixture(scope="module")
def ara_reports(tmp_path_factory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("e2e-ara")
    generate_ara(base / "events", devices=1500, days=14, seed=3, progress=False)
    assert summary_client.main(["ara", "--sources", str(base / "events" / "sources-*"), "--triggers",
                                str(base / "events" / "triggers-*"), "--output", str(base / "reports"), "--seed", "1"]) == 0
    return base / "reports", base / "events" / "domain.avro"


def test_ara_summary_errors_shrink_as_epsilon_grows(ara_reports, tmp_path):
    reports, domain_file = ara_reports
    truth, domain = _true_sums(reports), _domain(domain_file)
    assert truth and set(truth) <= set(domain)
    ledger = f"sqlite:///{tmp_path / 'ledger.db'}"
    errors = {}
    for epsilon in ("1", "4", "16"):  # one ledger, three queries of the same reports: requerying, 1 + 4 + 16 <= 21
        output = tmp_path / f"eps{epsilon}"
        assert aggregate.main(["--reports", str(reports / "reports-*"), "--domain", str(domain_file), "--output",
                               str(output), "--epsilon", epsilon, "--ledger", ledger, "--epsilon-star", "21",
                               "--max-uses", "3", "--seed", epsilon, "--output-format", "jsonl",
                               "--now", str(START + 15 * DAY)]) == 0
        summary = json.loads((output / "summary.json").read_text())
        assert summary["counts"]["dead_lettered"] == 0 and summary["counts"]["aggregated_reports"] > 500
        released = _released(output)
        assert set(released) == set(domain)  # domain mode: every domain bucket, 0 + noise when no report holds it
        errors[epsilon] = sum(abs(released[b] - truth.get(b, 0)) for b in domain) / len(domain)
    # Each error is the mean of |DLap(L1 / eps)| over the domain's n >= 100 buckets, close to the scale 65536 / eps
    # (|Z| / scale is near Exp(1)); the Chernoff bound for a mean of n Exp(1) gives P[mean < 1/2] <= e^{-0.19 n} and
    # P[mean > 2] <= e^{-0.30 n}, both below 1e-8 for n >= 100, so a fourfold step in epsilon lowers the error with
    # false-failure probability below 1e-7.
    assert len(domain) >= 100
    assert errors["1"] > errors["4"] > errors["16"]
    for epsilon, error in errors.items():
        assert 0.5 < error / (65536 / int(epsilon)) < 2
    # A fourth query exceeds the ledger's three uses: it fails and releases nothing.
    output = tmp_path / "fourth"
    assert aggregate.main(["--reports", str(reports / "reports-*"), "--domain", str(domain_file), "--output", str(output),
                           "--epsilon", "0.001", "--ledger", ledger, "--epsilon-star", "21", "--max-uses", "3",
                           "--now", str(START + 15 * DAY)]) == 1
    assert not list(output.glob("summary_report-*"))


def test_paa_reach_reports_through_key_discovery(tmp_path):
    generate_paa(tmp_path / "events", devices=400, days=2, seed=5, progress=False)
    assert summary_client.main(["paa", "--events", str(tmp_path / "events" / "events-*"), "--output",
                                str(tmp_path / "reports"), "--seed", "2"]) == 0
    truth = _true_sums(tmp_path / "reports")
    output = tmp_path / "summary"
    assert aggregate.main(["--reports", str(tmp_path / "reports" / "reports-*"), "--output", str(output), "--mode",
                           "key-discovery", "--epsilon", "10", "--ledger", f"sqlite:///{tmp_path / 'ledger.db'}",
                           "--seed", "4", "--output-format", "jsonl", "--now", str(START + 3 * DAY)]) == 0
    released = _released(output)
    tau = 65536 * (1 + math.log(20 / 1e-5) / 10)
    # Key discovery releases exactly the buckets whose noised sum exceeds tau; with |noise| <= tau a bucket with
    # a true sum above 2 tau is always released and one at or below 0 never is.
    assert all(value > tau for value in released.values()) and set(released) <= set(truth)
    assert {b for b, total in truth.items() if total > 2 * tau} <= set(released)
