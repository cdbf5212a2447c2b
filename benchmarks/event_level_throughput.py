"""Throughput of the ARA event-level job (issue: 1,000,000 sources with ARA's default configurations and realistic
trigger rates; target >= 100,000 sources/s end to end).

    python benchmarks/event_level_throughput.py [--quick] [--json PATH] [--runs 3] [--data DIR]

Generates the sources and triggers once (``python -m pipelines.generate event-level --sources N --seed 1
--shards 4``: 4 Avro files per kind, 2 sources per device and day over 30 days, 10 % navigation, about 90 % with
the default configuration, about 3 triggers per 100 sources; cached under --data), then runs the whole
``pipelines.event_level`` batch job in a fresh process per run (in-memory FnApiRunner, epsilon 14, secure
randomized response, Avro reports) and the same work as a plain Python/numpy loop without Beam: the project's
readers and configuration check, every device's ARA-Event-Client (``transforms/event_level/mechanisms/client.py``) fed
in time order, and the s* of Alg. 8 for every source (``transforms/event_level/mechanisms/randomized_response.py``'s vectorised
randomized response), through the same helpers the pipeline's replay uses
(``transforms/event_level/mechanisms/devices.py``), without writing files. Reports the median sources per second of
each, their ratio, and the peak RSS of the job process. Never part of the test suite.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from harness import ROOT, benchmark_parser, cached, compare, pipeline_child, print_comparison, run_sides, runs_of, write_json

FULL, QUICK = 1_000_000, 100_000
EPSILON = 14
SHARDS = 4  # files per kind, as an ad-tech's exports come

_PIPELINE_CHILD = pipeline_child("pipelines.event_level", {
    "sources": 'summary["counts"]["sources"]', "read": 'summary["counts"]["read"]',
    "reports": 'summary["counts"]["reports"]', "dead": 'summary["counts"]["dead_lettered"]'})

_REFERENCE_CHILD = """
import glob, json, resource, sys, time
from pipelines.event_level import parse_job
from schemas.codecs import EVENT_LEVEL_SOURCE, EVENT_LEVEL_TRIGGER, READERS, format_of
from schemas.rows import DeadLetter
from transforms.event_level.mechanisms.devices import SourceCheck, replay_devices
from transforms.core.mechanisms.noise import make_source
job, _ = parse_job(sys.argv[1:])
started = time.perf_counter()
check = SourceCheck(job.epsilon)
devices, read, dead = {}, 0, 0
for spec, pattern in ((EVENT_LEVEL_SOURCE, job.sources), (EVENT_LEVEL_TRIGGER, job.triggers)):
    for path in sorted(glob.glob(pattern)):
        with open(path, "rb") as handle:
            for row in READERS[format_of(path, job.run.input_format)](spec, handle, path):
                read += 1
                if type(row) is DeadLetter or check(row) is not None:
                    dead += 1
                else:
                    devices.setdefault(row.device_id, []).append(row)
stats = {}
reports = sum(1 for _ in replay_devices(devices, job.epsilon, make_source(job.run.seed), stats))
elapsed = time.perf_counter() - started
print(json.dumps({"seconds": elapsed, "sources": stats.get("sources", 0), "read": read, "reports": reports, "dead": dead,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def _dataset(data_dir: str, sources: int) -> tuple[str, str]:
    """The sources and triggers patterns of the cached dataset (generated when missing or of another size)."""
    patterns = os.path.join(data_dir, "sources-*.avro"), os.path.join(data_dir, "triggers-*.avro")
    if cached(data_dir, {"sources": sources, "seed": 1, "format": "avro", "shards": SHARDS, "navigation_share": 1.0,
                         "default_configs": True}):
        return patterns
    print(f"generating {sources:,} sources into {data_dir} ...", flush=True)
    os.makedirs(data_dir, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pipelines.generate", "event-level", "--output", data_dir, "--sources",
                    str(sources), "--seed", "1", "--shards", str(SHARDS), "--navigation-share", "1", "--default-configs",
                    "--quiet"], check=True, cwd=ROOT)
    return patterns


def main(argv: list[str] | None = None) -> int:
    args = benchmark_parser(__doc__, f"{QUICK:,} sources, one run each (a smoke test)").parse_args(argv)
    scale = QUICK if args.quick else FULL
    runs = runs_of(args)
    data_dir = args.data or os.path.join(tempfile.gettempdir(), f"pm-beam-event-level-bench-{scale}")
    sources, triggers = _dataset(data_dir, scale)

    def job_args() -> list[str]:  # a fresh output directory for every run
        out_dir = tempfile.mkdtemp(prefix="pm-beam-event-level-bench-out-")
        return ["--sources", sources, "--triggers", triggers, "--output", out_dir, "--epsilon", str(EPSILON),
                "--runner=FnApiRunner"]

    pipeline_runs, reference_runs = run_sides(_PIPELINE_CHILD, _REFERENCE_CHILD, job_args, runs)
    first = pipeline_runs[0]
    assert all(r["sources"] == first["sources"] == scale and r["read"] == first["read"] and r["dead"] == 0
               for r in pipeline_runs + reference_runs), "runs disagree"
    result = compare("event_level_throughput", pipeline_runs, reference_runs, "sources", {
        "sources": scale, "records": first["read"], "triggers": first["read"] - scale, "epsilon": EPSILON,
        "noise": "secure", "reports": [r["reports"] for r in pipeline_runs],
        "reference_reports": [r["reports"] for r in reference_runs]})
    print_comparison(result, "sources", ">= 100,000 sources/s")
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
