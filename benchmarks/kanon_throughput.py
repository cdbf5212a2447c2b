"""Throughput of the k-anonymity pipeline (issue: 1,000,000 joins, 20,000 groups, 30 days, DirectRunner in memory).

    python benchmarks/kanon_throughput.py [--quick] [--json PATH] [--runs 3] [--data DIR]

Generates the dataset once (Avro, seed 1; cached under --data), then runs
the whole ``pipelines.kanon`` job in a fresh process per run (in-memory
FnApiRunner, the DirectRunner's batch engine, default secure noise) and the
same algorithm as a plain Python/numpy loop without Beam (same reader,
same fold, same vectorised replay) on the same file. Reports the median
joins per second of each, their ratio, and the peak RSS of the pipeline
process. Never part of the test suite.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from harness import ROOT, benchmark_parser, cached, compare, pipeline_child, print_comparison, run_sides, runs_of, write_json

FULL = {"joins": 1_000_000, "groups": 20_000, "users": 200_000, "days": 30}
QUICK = {"joins": 200_000, "groups": 4_000, "users": 40_000, "days": 30}

_PIPELINE_CHILD = pipeline_child("pipelines.kanon", {"joins": 'summary["counts"]["parsed"]'})

_REFERENCE_CHILD = """
import glob, json, resource, sys, time
from schemas.codecs import JOIN_EVENT, READERS, format_of
from schemas.rows import DeadLetter
from pipelines.kanon import parse_job
from transforms.kanon.join_fold import GroupJoinsByGroup
from transforms.kanon.mechanisms.batch_replay import GroupJoins, batch_group_verdicts
from transforms.core.mechanisms.noise import make_source
job, _ = parse_job(sys.argv[1:])
parameters, source = job.parameters(), make_source(job.run.seed)
started = time.perf_counter()
fold, joins, verdicts = GroupJoinsByGroup(), 0, 0
for path in sorted(glob.glob(job.input)):
    with open(path, "rb") as handle:
        for row in READERS[format_of(path)](JOIN_EVENT, handle, path):
            if type(row) is not DeadLetter:
                fold.add(row)
                joins += 1
for group, wire in fold.drain():
    verdicts += len(batch_group_verdicts(group, GroupJoins.from_wire(wire), parameters, source))
elapsed = time.perf_counter() - started
print(json.dumps({"seconds": elapsed, "joins": joins, "verdicts": verdicts,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def _dataset(data_dir: str, scale: dict) -> str:
    if cached(data_dir, scale):
        return os.path.join(data_dir, "joins-*.avro")
    print(f"generating {scale['joins']:,} joins into {data_dir} ...", flush=True)
    subprocess.run(
        [sys.executable, "-m", "pipelines.generate", "kanon", "--output", data_dir, "--seed", "1", "--quiet",
         *(f"--{name}={value}" for name, value in scale.items())],
        check=True, cwd=ROOT,
    )
    return os.path.join(data_dir, "joins-*.avro")


def main(argv: list[str] | None = None) -> int:
    args = benchmark_parser(__doc__, "200,000 joins, one run each (a smoke test)").parse_args(argv)
    scale = QUICK if args.quick else FULL
    runs = runs_of(args)
    data_dir = args.data or os.path.join(tempfile.gettempdir(), f"pm-beam-kanon-bench-{scale['joins']}")
    pattern = _dataset(data_dir, scale)
    out_dir = tempfile.mkdtemp(prefix="pm-beam-kanon-bench-out-")
    job_args = ["--input", pattern, "--output", out_dir, "--runner=FnApiRunner"]
    pipeline_runs, reference_runs = run_sides(_PIPELINE_CHILD, _REFERENCE_CHILD, lambda: job_args, runs)
    result = compare("kanon_throughput", pipeline_runs, reference_runs, "joins",
                     {"joins": pipeline_runs[0]["joins"], "groups": scale["groups"], "days": scale["days"]})
    print_comparison(result, "joins", ">= 150,000 joins/s, peak RSS <= 2048 MB")
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
