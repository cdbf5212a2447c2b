"""Throughput and memory of the measurement pipeline on the Cookie Monster microbenchmark (Cookie Monster paper Sec. 8.1).

    python benchmarks/measurement_throughput.py [--quick] [--json PATH] [--runs 3] [--workers 2]
        [--policies cookie_monster,ara_like,ipa_like,attribution_api,big_bird,big_bird+scheduling] [--data DIR]

Generates (once; cached under --data) the microbenchmark with knob2 = 0.1 and
knob1 = 0.1 (20,000 users, 280,000 events) and knob1 = 0.01 (200,000 users,
2,440,000 events), as Avro. For each dataset and policy it runs the whole
``pipelines.measurement`` batch job in a fresh process per run (the
DirectRunner: with ``--workers 2``, its multi-processing mode with two SDK
worker processes; with ``--workers 1``, the in-process FnApiRunner; secure
noise) and the same simulation as a plain Python loop without Beam (the same
codecs read every record, ``transforms.budgeting.mechanisms.simulation.simulate``
replays every device and runs the queries). Reports the median events per
second of each, their ratio, and peak resident memory: of the job process,
and of the largest worker process; the policies run in turn within each run,
and each policy's rate is also given over the first policy's (the median of
the runs' paired ratios). Never part of the test suite.

The published research simulator of the paper processes about 15,000 events
per second per core and needs about 260 MB and 1.35 GB for the two datasets;
the issue's target is at least 150,000 events/s and at most half that memory.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

from harness import ROOT, cached, pipeline_child, run_child, write_json

DATASETS = {"knob1=0.1": {"knob1": 0.1, "knob2": 0.1, "shards": 2}, "knob1=0.01": {"knob1": 0.01, "knob2": 0.1, "shards": 6}}
PUBLISHED_MB = {"knob1=0.1": 260, "knob1=0.01": 1350}
POLICIES = ("cookie_monster", "ara_like", "ipa_like", "attribution_api", "big_bird")
# policies with options, by name: Big Bird's batched scheduling (daily batches, 2 attempts, the global budget in 4)
VARIANTS = {"big_bird+scheduling": ("--policy", "big_bird", "--scheduling-interval-hours", "24",
                                    "--scheduling-attempts", "2", "--global-releases", "4")}


def _policy_args(policy: str) -> list[str]:
    """The job's options for ``policy``: one of ``POLICIES`` or of ``VARIANTS``."""
    if policy in VARIANTS:
        return list(VARIANTS[policy])
    if policy not in POLICIES:
        raise SystemExit(f"unknown policy {policy!r}: one of {', '.join([*POLICIES, *VARIANTS])}")
    return ["--policy", policy]

_PIPELINE_CHILD = pipeline_child(
    "pipelines.measurement", {"events": 'summary["counts"]["parsed"]', "executed": 'summary["counts"]["queries_executed"]'}
)

_REFERENCE_CHILD = """
import glob, json, resource, sys, time
from schemas.codecs import CONVERSION, IMPRESSION, READERS, format_of
from schemas.rows import DeadLetter
from pipelines.measurement import parse_job
from transforms.core.mechanisms.noise import make_source
from transforms.budgeting.mechanisms.simulation import simulate
job, _ = parse_job(sys.argv[1:])
started = time.perf_counter()
events = []
for spec, pattern in ((IMPRESSION, job.impressions), (CONVERSION, job.conversions)):
    for path in sorted(glob.glob(pattern)):
        with open(path, "rb") as handle:
            events += [row for row in READERS[format_of(path)](spec, handle, path) if type(row) is not DeadLetter]
result = simulate(events, job.config, make_source(job.run.seed), job.batch_size)
elapsed = time.perf_counter() - started
print(json.dumps({"seconds": elapsed, "events": len(events), "executed": sum(r.status == "executed" for r in result.results),
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def _dataset(data_dir: str, scale: dict) -> tuple[str, str]:
    if cached(data_dir, {"knob1": scale["knob1"], "knob2": scale["knob2"]}):
        return os.path.join(data_dir, "impressions-*.avro"), os.path.join(data_dir, "conversions-*.avro")
    print(f"generating the microbenchmark knob1 = {scale['knob1']}, knob2 = {scale['knob2']} into {data_dir} ...", flush=True)
    subprocess.run(
        [sys.executable, "-m", "pipelines.generate", "microbenchmark", "--output", data_dir, "--seed", "1", "--quiet",
         "--knob1", str(scale["knob1"]), "--knob2", str(scale["knob2"]), "--shards", str(scale["shards"])],
        check=True, cwd=ROOT,
    )
    return os.path.join(data_dir, "impressions-*.avro"), os.path.join(data_dir, "conversions-*.avro")


def _runner_args(workers: int) -> list[str]:
    if workers == 1:
        return ["--runner=FnApiRunner"]
    return ["--runner=DirectRunner", f"--direct_num_workers={workers}", "--direct_running_mode=multi_processing"]


def measure(name: str, scale: dict, policies: tuple[str, ...], runs: int, workers: int, data_root: str) -> list[dict]:
    """Every policy's runs on one dataset, the policies in turn within each run (so that a drift of the machine's
    speed weighs on all alike); each row's ``vs_first`` is the median over runs of its rate over the first policy's
    in the same run."""
    impressions, conversions = _dataset(os.path.join(data_root, f"pm-beam-microbenchmark-{scale['knob1']}"), scale)
    out_dir = tempfile.mkdtemp(prefix="pm-beam-measurement-bench-out-")
    pipeline_runs: dict[str, list] = {policy: [] for policy in policies}
    reference_runs: dict[str, list] = {policy: [] for policy in policies}
    for index in range(runs):
        for policy in policies:
            job_args = ["--impressions", impressions, "--conversions", conversions, "--output", out_dir,
                        *_policy_args(policy)]
            pipeline_runs[policy].append(run_child(_PIPELINE_CHILD, job_args + _runner_args(workers)))
            reference_runs[policy].append(run_child(_REFERENCE_CHILD, job_args))
            print(f"  {name} {policy} run {index + 1}/{runs}: pipeline {pipeline_runs[policy][-1]['seconds']:.2f} s, "
                  f"reference {reference_runs[policy][-1]['seconds']:.2f} s", flush=True)
    rows = []
    first = pipeline_runs[policies[0]]
    for policy in policies:
        mine, reference = pipeline_runs[policy], reference_runs[policy]
        assert mine[0]["executed"] == reference[0]["executed"], "pipeline and reference disagree"
        rate = statistics.median(r["events"] / r["seconds"] for r in mine)
        reference_rate = statistics.median(r["events"] / r["seconds"] for r in reference)
        rows.append({
            "dataset": name,
            "policy": policy,
            "events": mine[0]["events"],
            "events_per_second": round(rate),
            "peak_rss_mb": round(max(r["peak_rss_mb"] for r in mine), 1),
            "worker_peak_rss_mb": round(max(r["worker_peak_rss_mb"] for r in mine), 1),
            "reference_events_per_second": round(reference_rate),
            "reference_peak_rss_mb": round(max(r["peak_rss_mb"] for r in reference), 1),
            "ratio": round(rate / reference_rate, 3),
            "vs_first": round(statistics.median(b["seconds"] / a["seconds"] for a, b in zip(mine, first, strict=True)), 3),
            "pipeline_seconds": [round(r["seconds"], 3) for r in mine],
            "reference_seconds": [round(r["seconds"], 3) for r in reference],
            "queries_executed": mine[0]["executed"],
        })
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the knob1 = 0.1 dataset only, Cookie Monster only, one run")
    parser.add_argument("--runs", type=int, help="runs of each side (default 3, 1 with --quick)")
    parser.add_argument("--workers", type=int, default=2, help="DirectRunner worker processes (1: in-process FnApiRunner)")
    parser.add_argument("--policies", default=",".join(POLICIES),
                        help=f"comma-separated policies (default: all five; also {', '.join(VARIANTS)})")
    parser.add_argument("--json", help="write the results as JSON here")
    parser.add_argument("--data", help="dataset cache directory (default: the system temp dir)")
    args = parser.parse_args(argv)
    runs = args.runs or (1 if args.quick else 3)
    datasets = {"knob1=0.1": DATASETS["knob1=0.1"]} if args.quick else DATASETS
    policies = ("cookie_monster",) if args.quick else tuple(args.policies.split(","))
    rows = [row for name, scale in datasets.items()
            for row in measure(name, scale, policies, runs, args.workers, args.data or tempfile.gettempdir())]
    print(f"\n{'dataset':<12}{'policy':<22}{'events':>11}{'events/s':>11}{'job MB':>8}{'worker MB':>10}"
          f"{'reference/s':>13}{'ratio':>7}{'vs ' + policies[0]:>20}")
    for row in rows:
        print(f"{row['dataset']:<12}{row['policy']:<22}{row['events']:>11,}{row['events_per_second']:>11,}"
              f"{row['peak_rss_mb']:>8,.0f}{row['worker_peak_rss_mb']:>10,.0f}{row['reference_events_per_second']:>13,}"
              f"{row['ratio']:>7.2f}{row['vs_first']:>20.2f}")
    print(f"target: >= 150,000 events/s; peak RSS <= {PUBLISHED_MB['knob1=0.1'] // 2} MB (knob1 = 0.1) and "
          f"<= {PUBLISHED_MB['knob1=0.01'] // 2} MB (knob1 = 0.01), half the published simulator's")
    if args.json:
        headline = min(rows, key=lambda row: row["events_per_second"])
        result = {
            "name": "measurement_throughput",
            "runs": runs,
            "workers": args.workers,
            "events_per_second": headline["events_per_second"],
            "peak_rss_mb": max(row["peak_rss_mb"] for row in rows),
            "reference_events_per_second": headline["reference_events_per_second"],
            "ratio": headline["ratio"],
            "rows": rows,
        }
        write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
