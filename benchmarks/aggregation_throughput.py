"""Throughput of the Aggregation Service job (issue: 1,000,000 contributions in 200,000 reports over 100,000
buckets with a 100,000-bucket domain, secure noise; target >= 200,000 contributions/s and < 2 GB).

    python benchmarks/aggregation_throughput.py [--quick] [--json PATH] [--runs 3] [--data DIR] [--encrypted]

Generates the reports once (``python -m pipelines.generate reports``: 5 contributions per report padded to 20
as Chrome pads them, clear-text payloads, or HPKE-encrypted with ``--encrypted``; cached under --data), then
runs the whole ``pipelines.aggregate`` job in a fresh process per run (in-memory FnApiRunner, domain mode,
epsilon 10, secure exact discrete Laplace noise, a fresh SQLite ledger, Avro output) and the same work as a
plain Python/numpy loop without Beam (the same decoders, sums and noise, no ledger or files). Reports the
median contributions per second of each, their ratio, and the peak RSS of the job process. Never part of the
test suite.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from harness import ROOT, benchmark_parser, cached, compare, pipeline_child, print_comparison, run_sides, runs_of, write_json

NOW = 1_767_225_600
FULL = {"reports": 200_000, "contributions": 5, "buckets": 100_000, "domain-buckets": 100_000}
QUICK = {"reports": 40_000, "contributions": 5, "buckets": 20_000, "domain-buckets": 20_000}

_PIPELINE_CHILD = pipeline_child("pipelines.aggregate", {"contributions": 'summary["counts"]["contributions"]',
                                                         "released": 'summary["counts"]["released_buckets"]'})

_REFERENCE_CHILD = """
import glob, json, resource, sys, time
import fastavro, numpy as np
from pipelines.aggregate import parse_job
from schemas.aggregatable import decode_payloads, parse_shared_info
from transforms.summary_reports.aggregation import make_decrypter
from transforms.summary_reports.mechanisms.aggregation import KeyedSums, aggregate, budget_units, keys_of, report_unit_group
from transforms.core.mechanisms.noise import make_source
job, _ = parse_job(sys.argv[1:])
started = time.perf_counter()
decrypter = make_decrypter(job.job)
payloads, groups = [], set()
for path in sorted(glob.glob(job.reports)):
    with open(path, "rb") as handle:
        for record in fastavro.reader(handle):
            info = parse_shared_info(record["shared_info"])
            payload = record["payload"]
            payloads.append(payload if decrypter is None else decrypter.decrypt(payload, record["shared_info"], record["key_id"]))
            groups.add(report_unit_group(info))
units = budget_units(groups, job.job.filtering_ids)
columns = decode_payloads(payloads)
sums = KeyedSums.of(columns.high, columns.low, columns.values)
with open(job.domain, "rb") as handle:
    domain = keys_of(int.from_bytes(r["bucket"], "big") for r in fastavro.reader(handle))
outcomes = aggregate(job.params, sums, domain, make_source(job.seed))
elapsed = time.perf_counter() - started
print(json.dumps({"seconds": elapsed, "contributions": int(columns.owner.size), "released": int(outcomes.released.sum()),
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def _dataset(data_dir: str, scale: dict, encrypted: bool) -> tuple[str, str, list[str]]:
    """The reports pattern, the domain file and the extra job options (the private key) of the cached dataset."""
    key_args: list[str] = []
    if encrypted:
        key_args = ["--private-key", os.path.join(data_dir, "private_key.json")]
    wanted = {name.replace("-", "_"): value for name, value in scale.items()}
    if cached(data_dir, {**wanted, "encrypted": encrypted}):
        return os.path.join(data_dir, "reports-*.avro"), os.path.join(data_dir, "domain.avro"), key_args
    print(f"generating {scale['reports']:,} reports into {data_dir} ...", flush=True)
    os.makedirs(data_dir, exist_ok=True)
    extra = []
    if encrypted:
        subprocess.run([sys.executable, "-c", _KEYS, data_dir], check=True, cwd=ROOT)
        extra = ["--public-key", os.path.join(data_dir, "public_key.json")]
    subprocess.run([sys.executable, "-m", "pipelines.generate", "reports", "--output", data_dir, "--seed", "1", "--quiet",
                    "--now", str(NOW), *(f"--{name}={value}" for name, value in scale.items()), *extra],
                   check=True, cwd=ROOT)
    return os.path.join(data_dir, "reports-*.avro"), os.path.join(data_dir, "domain.avro"), key_args


_KEYS = """
import os, sys
from schemas.aggregatable import generate_key_pair, write_key_file
private, public = generate_key_pair()
write_key_file(os.path.join(sys.argv[1], "private_key.json"), {"bench": private})
write_key_file(os.path.join(sys.argv[1], "public_key.json"), {"bench": public})
"""


def main(argv: list[str] | None = None) -> int:
    parser = benchmark_parser(__doc__, "40,000 reports, one run each (a smoke test)")
    parser.add_argument("--encrypted", action="store_true", help="HPKE-encrypted payloads (the job decrypts them)")
    args = parser.parse_args(argv)
    scale = QUICK if args.quick else FULL
    runs = runs_of(args)
    kind = "encrypted" if args.encrypted else "clear"
    data_dir = args.data or os.path.join(tempfile.gettempdir(), f"pm-beam-aggregation-bench-{scale['reports']}-{kind}")
    reports, domain, key_args = _dataset(data_dir, scale, args.encrypted)

    def job_args() -> list[str]:  # a fresh output directory and ledger for every run
        out_dir = tempfile.mkdtemp(prefix="pm-beam-aggregation-bench-out-")
        return ["--reports", reports, "--domain", domain, "--output", out_dir, "--now", str(NOW), "--mode", "domain",
                "--epsilon", "10", "--ledger", f"sqlite:///{out_dir}/ledger.db", *key_args, "--runner=FnApiRunner"]

    pipeline_runs, reference_runs = run_sides(_PIPELINE_CHILD, _REFERENCE_CHILD, job_args, runs)
    contributions = pipeline_runs[0]["contributions"]
    assert all(r["contributions"] == contributions for r in pipeline_runs + reference_runs), "runs disagree"
    result = compare("aggregation_throughput", pipeline_runs, reference_runs, "contributions", {
        "payloads": kind, "reports": scale["reports"], "contributions": contributions, "buckets": scale["buckets"],
        "domain_buckets": scale["domain-buckets"], "released_buckets": pipeline_runs[0]["released"]})
    print_comparison(result, "contributions", ">= 200,000 contributions/s, peak RSS < 2048 MB")
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
