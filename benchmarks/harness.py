"""What the throughput benchmarks share: their common options, the dataset cache check, running a measurement in a
fresh Python process and reporting it."""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_child(code: str, args: list[str]) -> dict:
    """Run ``code`` in a fresh interpreter with ``args`` as ``sys.argv[1:]``; the JSON its last line prints."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"benchmark child failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def benchmark_parser(doc: str, quick_help: str) -> argparse.ArgumentParser:
    """The options every throughput benchmark takes (--quick, --runs, --json, --data); ``doc``'s first line
    describes it."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--runs", type=int, help="runs of each side (default 3, 1 with --quick)")
    parser.add_argument("--json", help="write the results as JSON here")
    parser.add_argument("--data", help="dataset cache directory (default: a directory under the system temp dir)")
    return parser


def runs_of(args: argparse.Namespace) -> int:
    """The runs of each side ``benchmark_parser``'s options ask for."""
    return args.runs or (1 if args.quick else 3)


def cached(data_dir: str, wanted: dict) -> bool:
    """Whether ``data_dir`` holds a dataset its generation.json records with every parameter of ``wanted``."""
    marker = os.path.join(data_dir, "generation.json")
    if not os.path.exists(marker):
        return False
    with open(marker, encoding="utf-8") as handle:
        parameters = json.load(handle)["parameters"]
    return all(parameters.get(name) == value for name, value in wanted.items())


def pipeline_child(module: str, fields: dict[str, str]) -> str:
    """Code for ``run_child`` that runs ``module``'s ``parse_job`` and ``run`` on its arguments and prints the
    seconds ``run`` took, the peak RSS of the job process and of its largest worker process, and ``fields``
    (a name to an expression over the run's ``summary``) as JSON."""
    values = "".join(f"{name!r}: {expression}, " for name, expression in fields.items())
    return f"""
import json, resource, sys, time
from {module} import parse_job, run
job, beam_args = parse_job(sys.argv[1:])
started = time.perf_counter()
summary = run(job, beam_args)
elapsed = time.perf_counter() - started
print(json.dumps({{"seconds": elapsed, {values}
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "worker_peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}}))
"""


def write_json(path: str | None, result: dict) -> None:
    """The benchmark's result as ``--json`` asks (nothing without a path)."""
    if path:
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=2)
            handle.write("\n")


def run_sides(pipeline_code: str, reference_code: str, job_args: Callable[[], list[str]], runs: int) -> tuple[list, list]:
    """``runs`` alternating runs of the pipeline and the reference, each in a fresh process with ``job_args()``."""
    pipeline_runs, reference_runs = [], []
    for index in range(runs):
        arguments = job_args()
        pipeline_runs.append(run_child(pipeline_code, arguments))
        reference_runs.append(run_child(reference_code, arguments))
        print(f"run {index + 1}/{runs}: pipeline {pipeline_runs[-1]['seconds']:.2f} s, "
              f"reference {reference_runs[-1]['seconds']:.2f} s", flush=True)
    return pipeline_runs, reference_runs


def compare(name: str, pipeline_runs: list[dict], reference_runs: list[dict], count: str, fields: dict) -> dict:
    """The result of a benchmark: the median ``count`` per second of each side, their ratio, the pipeline's peak
    RSS (its process or its largest worker) and every run's seconds, with ``fields`` describing the data."""
    rate = statistics.median(r[count] / r["seconds"] for r in pipeline_runs)
    reference_rate = statistics.median(r[count] / r["seconds"] for r in reference_runs)
    return {
        "name": name,
        "runs": len(pipeline_runs),
        **fields,
        "events_per_second": round(rate),
        "peak_rss_mb": round(max(max(r["peak_rss_mb"], r.get("worker_peak_rss_mb", 0)) for r in pipeline_runs), 1),
        "reference_events_per_second": round(reference_rate),
        "reference_peak_rss_mb": round(max(r["peak_rss_mb"] for r in reference_runs), 1),
        "ratio": round(rate / reference_rate, 3),
        "pipeline_seconds": [round(r["seconds"], 3) for r in pipeline_runs],
        "reference_seconds": [round(r["seconds"], 3) for r in reference_runs],
    }


def print_comparison(result: dict, unit: str, target: str) -> None:
    """The human-readable table of ``compare``'s result."""
    heading = f"{unit}/s (median)"
    width = max(18, len(heading) + 2)
    print(f"{'':24}{heading:>{width}}{'peak RSS MB':>14}")
    print(f"{'pipeline (FnApiRunner)':24}{result['events_per_second']:>{width},}{result['peak_rss_mb']:>14,.0f}")
    print(f"{'plain Python/numpy':24}{result['reference_events_per_second']:>{width},}{result['reference_peak_rss_mb']:>14,.0f}")
    print(f"ratio pipeline / reference: {result['ratio']:.2f}  (target: {target})")
