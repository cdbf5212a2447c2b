"""The Cookie Monster evaluation at a chosen scale: time, events per second and peak memory per experiment, against a
baseline revision of the code on the same run (issue 21: the full Sec. 8 suite plus Appendix D at the paper's
scale in under 60 minutes on 2 cores, peak memory at most 16 GB).

    python benchmarks/evaluation_scale.py [--scale 1] [--experiments patcg criteo ...] [--size full|quick|tiny]
        [--runs 1] [--baseline REV] [--json PATH] [--data DIR]

Each experiment runs as ``python -m pipelines.evaluate EXPERIMENT --SIZE --scale S --output TMP --quiet`` in a fresh
process (``--scale`` for patcg and criteo: by default 1, the paper's, at the full size, and the size's own scale at
the others), cold (its datasets generated into a fresh directory, which the run's time includes) unless ``--data``
names a directory of datasets to reuse. Its events are the impressions and conversions its ``results.json`` records
having read (every dataset it loads, once; the microbenchmark reads one per knob value, Criteo-like its augmented
datasets too). With ``--baseline REV`` the same runs are made with the code of git revision REV (checked out once
into a temporary worktree) and each experiment's ratio is baseline seconds / current seconds. Reports the median
seconds over ``--runs``, events per second, the peak memory (the proportional set size of the run's process and its
worker processes, sampled twice a second: forked workers share most of their pages with the run, which summed
resident sizes would count two or three times; the run's own peak RSS and its largest worker's are kept in the JSON
too), and the totals. Never part of the test suite.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from harness import ROOT, write_json

EXPERIMENTS = ("microbenchmark-knob1", "microbenchmark-knob2", "patcg", "criteo", "bias-detection")
TARGET_SECONDS, TARGET_MEMORY_MB = 3_600, 16 * 1024

_CHILD = """
import glob, json, resource, sys, threading, time
from pipelines.evaluate import main

def pss_mb():
    # the proportional set size of this process and its children (forked workers share most pages with it:
    # PSS counts a shared page once, split among its sharers)
    pids = ["self"] + [pid for path in glob.glob("/proc/self/task/*/children") for pid in open(path).read().split()]
    total = 0
    for pid in pids:
        try:
            for line in open(f"/proc/{pid}/smaps_rollup"):
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024

peak = [0.0]
def watch():
    while True:
        peak[0] = max(peak[0], pss_mb())
        time.sleep(0.5)

threading.Thread(target=watch, daemon=True).start()
started = time.perf_counter()
status = main(sys.argv[1:])
seconds = time.perf_counter() - started
own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(json.dumps({"status": status, "seconds": seconds, "peak_memory_mb": peak[0], "own_rss_mb": own,
                  "worker_rss_mb": workers}))
"""


def _events(results_path: str) -> int | None:
    """The events the experiment read (every dataset it loaded, once: ``settings.events_read`` in its results),
    or for results written before that was recorded, its dataset's impressions and conversions."""
    try:
        with open(results_path, encoding="utf-8") as handle:
            found = json.load(handle)["experiments"]
    except (OSError, KeyError, ValueError):
        return None
    settings = next(iter(found.values()), {}).get("settings", {}) if found else {}
    if "events_read" in settings:
        return int(settings["events_read"])
    data = settings.get("data", {})
    if "impressions" in data and "conversions" in data:
        return int(data["impressions"]) + int(data["conversions"])
    return None


def run_once(root: str, experiment: str, size: str, scale: float | None, data: str | None) -> dict:
    """One cold (or ``data``-warm) run of ``experiment`` with the code under ``root``."""
    with tempfile.TemporaryDirectory() as output:
        arguments = [experiment, f"--{size}", "--output", output, "--quiet",
                     "--data-dir", data or os.path.join(output, "data")]
        if experiment in ("patcg", "criteo") and scale is not None:
            arguments += ["--scale", str(scale)]
        env = dict(os.environ, PYTHONPATH=root)
        done = subprocess.run([sys.executable, "-c", _CHILD, *arguments], capture_output=True, text=True, env=env,
                              cwd=root)
        if done.returncode != 0:
            raise SystemExit(f"{experiment} failed under {root}:\n{done.stderr[-3000:]}")
        measured = json.loads(done.stdout.strip().splitlines()[-1])
        measured["events"] = _events(os.path.join(output, "results.json"))
        return measured


def measure(root: str, experiments: list[str], args: argparse.Namespace, label: str) -> dict:
    results = {}
    for experiment in experiments:
        runs = [run_once(root, experiment, args.size, args.scale, args.data) for _ in range(args.runs)]
        seconds = statistics.median(run["seconds"] for run in runs)
        events = runs[0]["events"]
        results[experiment] = {
            "seconds": round(seconds, 1), "runs": [round(run["seconds"], 1) for run in runs],
            "peak_memory_mb": round(max(run["peak_memory_mb"] for run in runs)),
            "own_rss_mb": round(max(run["own_rss_mb"] for run in runs)),
            "worker_rss_mb": round(max(run["worker_rss_mb"] for run in runs)), "events": events,
            "events_per_second": round(events / seconds) if events else None,
        }
        print(f"{label} {experiment}: {seconds:,.1f} s, peak memory {results[experiment]['peak_memory_mb']:,} MB (PSS)"
              + (f", {events:,} events, {events / seconds:,.0f} events/s" if events else ""), flush=True)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, help="patcg and criteo scale (default: 1, the paper's, with --size "
                        "full; the size's own otherwise, 0.005 and 0.05 for quick)")
    parser.add_argument("--experiments", nargs="+", choices=EXPERIMENTS, default=list(EXPERIMENTS))
    parser.add_argument("--size", choices=("full", "quick", "tiny"), default="full", help="sweep size (default full)")
    parser.add_argument("--runs", type=int, default=1, help="runs per experiment and side (default 1)")
    parser.add_argument("--baseline", metavar="REV", help="also run the code of this git revision and compare")
    parser.add_argument("--data", help="reuse the datasets in this directory (default: generate them per run)")
    parser.add_argument("--json", help="write the results as JSON here")
    args = parser.parse_args()
    if args.scale is None and args.size == "full":
        args.scale = 1.0
    result = {"name": "evaluation_scale", "scale": args.scale, "size": args.size, "runs": args.runs,
              "current": measure(ROOT, args.experiments, args, "current")}
    if args.baseline:
        with tempfile.TemporaryDirectory() as worktree:
            subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", worktree, args.baseline], check=True,
                           capture_output=True)
            try:
                result["baseline"] = {"revision": args.baseline, **measure(worktree, args.experiments, args, "baseline")}
            finally:
                subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", worktree], check=False)
        for experiment in args.experiments:
            current, baseline = result["current"][experiment], result["baseline"][experiment]
            current["ratio_to_baseline"] = round(baseline["seconds"] / current["seconds"], 2)
    total = sum(entry["seconds"] for entry in result["current"].values())
    peak = max(entry["peak_memory_mb"] for entry in result["current"].values())
    result["total_seconds"], result["peak_memory_mb"] = round(total, 1), peak
    print(f"total {total:,.0f} s (target {TARGET_SECONDS:,} s at scale 1, --full), peak memory {peak:,} MB (PSS) "
          f"(target {TARGET_MEMORY_MB:,} MB)")
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
