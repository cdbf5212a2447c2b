"""Parse rate of the Attribution Reporting registration adapter (issue 20: at least 50,000 registrations/s).

    python benchmarks/registration_parse.py [--quick] [--json PATH] [--runs 3] [--data DIR]

Generates the synthetic ARA dataset once with its registration log (``python -m pipelines.generate ara --devices N
--registrations --format jsonl --seed 1``: about 60 registrations per device, 93 % sources, header JSON as
browsers receive it; cached under --data). Then, each in a fresh process and alternating:

* **the adapter**: every line of the log decoded (``orjson.loads``, as the pipeline decodes it) and parsed by
  ``schemas.registration_log.parse_entry`` (the request, the response, the header by the specification's rules,
  sites by the Public Suffix List), exactly what ``python -m pipelines.registrations`` does per line before the
  replay;
* **the reference, same data**: the lines decoded by ``orjson.loads`` only, the floor any parser of this format pays.

With ``--features``, every source and trigger header of the log also carries the fields of the specification's
newer features (attribution scopes, named budgets, aggregatable debug reporting, a destination limit priority, a
filtering id width), written once beside the generated log, so that the parse pays for them.

Reports the median registrations per second of each, their ratio, and the peak RSS. With ``--pipeline``, also runs
the whole ``python -m pipelines.registrations`` job on the log as many times (in-memory FnApiRunner, seeded) and
reports its median registrations per second end to end and its peak RSS. Never part of the test suite.
"""
from __future__ import annotations

import glob
import json
import os
import statistics
import sys
import tempfile

from harness import ROOT, benchmark_parser, cached, compare, pipeline_child, run_child, runs_of, write_json

FULL, QUICK = 20_000, 2_000  # devices

_ADAPTER_CHILD = """
import glob, json, resource, sys, time
import orjson
from schemas.registration_log import ParsedRegistration, parse_entry
lines = [line for path in sorted(glob.glob(sys.argv[1])) for line in open(path, "rb")]
started = time.perf_counter()
parsed = failed = 0
coordinators = ("https://coordinator.test",)
for line in lines:
    for result in parse_entry(orjson.loads(line), coordinators):
        if isinstance(result, ParsedRegistration):
            parsed += 1
        else:
            failed += 1
seconds = time.perf_counter() - started
print(json.dumps({"seconds": seconds, "registrations": parsed + failed, "failed": failed,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

_REFERENCE_CHILD = """
import glob, json, resource, sys, time
import orjson
lines = [line for path in sorted(glob.glob(sys.argv[1])) for line in open(path, "rb")]
started = time.perf_counter()
registrations = sum(len(orjson.loads(line)["responses"]) for line in lines)
seconds = time.perf_counter() - started
print(json.dumps({"seconds": seconds, "registrations": registrations,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

_PIPELINE_CHILD = pipeline_child("pipelines.registrations", {
    "registrations": 'summary["counts"]["read"]', "dead": 'summary["counts"]["dead_lettered"]',
    "event_level_reports": 'summary["counts"]["event_level_reports"]',
    "aggregatable_reports": 'summary["counts"]["aggregatable_reports"]'})


def _dataset(data_dir: str, devices: int) -> str:
    """The registration log of ``devices`` devices (generated unless cached); its glob."""
    if not cached(data_dir, {"devices": devices, "seed": 1, "registrations": True}):
        from synthetic.ara import generate_ara  # noqa: PLC0415 - only when generating
        print(f"generating {devices:,} devices into {data_dir} ...", flush=True)
        generate_ara(data_dir, devices=devices, seed=1, fmt="jsonl", registrations=True, progress=False)
    return os.path.join(data_dir, "registrations-*.jsonl")


SOURCE_FEATURES = {
    "attribution_scopes": {"limit": 4, "values": ["campaign"], "max_event_states": 3},
    "named_budgets": {"biddable": 30_000, "other": 30_000},
    "aggregatable_debug_reporting": {"budget": 1_000, "key_piece": "0x1", "debug_data": [
        {"types": ["source-success", "source-noised"], "key_piece": "0x2", "value": 10},
        {"types": ["unspecified"], "key_piece": "0x3", "value": 5}]},
    "destination_limit_priority": "1",
}
TRIGGER_FEATURES = {
    "attribution_scopes": ["campaign"],
    "named_budgets": [{"name": "biddable", "filters": {"category": ["boots"]}}, {"name": "other"}],
    "aggregatable_debug_reporting": {"key_piece": "0x10", "debug_data": [
        {"types": ["trigger-no-matching-source", "trigger-aggregate-insufficient-budget"], "key_piece": "0x20",
         "value": 10}]},
    "aggregatable_filtering_id_max_bytes": 1,
}


def _with_features(log: str, data_dir: str) -> str:
    """The log with ``SOURCE_FEATURES`` and ``TRIGGER_FEATURES`` added to every header (written once); its glob."""
    target = os.path.join(data_dir, "featured")
    pattern = os.path.join(target, "registrations-*.jsonl")
    if glob.glob(pattern):
        return pattern
    os.makedirs(target, exist_ok=True)
    for path in sorted(glob.glob(log)):
        with open(path, encoding="utf-8") as lines, open(os.path.join(target, os.path.basename(path)), "w",
                                                         encoding="utf-8") as out:
            for line in lines:
                entry = json.loads(line)
                for response in entry.get("responses", []):
                    for name, extra in (("Attribution-Reporting-Register-Source", SOURCE_FEATURES),
                                        ("Attribution-Reporting-Register-Trigger", TRIGGER_FEATURES)):
                        if name in response["response"]:
                            response["response"][name] = {**response["response"][name], **extra}
                out.write(json.dumps(entry, separators=(",", ":")) + "\n")
    return pattern


def main() -> int:
    parser = benchmark_parser(__doc__, f"{QUICK:,} devices instead of {FULL:,}")
    parser.add_argument("--pipeline", action="store_true", help="also time python -m pipelines.registrations end to end")
    parser.add_argument("--features", action="store_true",
                        help="every header also carries the newer features' fields (scopes, named budgets, debug ...)")
    args = parser.parse_args()
    sys.path.insert(0, ROOT)
    devices = QUICK if args.quick else FULL
    data_dir = args.data or os.path.join(tempfile.gettempdir(), f"pmbeam-bench-registrations-{devices}")
    log = _dataset(data_dir, devices)
    if args.features:
        log = _with_features(log, data_dir)
    adapter, reference = [], []
    for index in range(runs_of(args)):
        adapter.append(run_child(_ADAPTER_CHILD, [log]))
        reference.append(run_child(_REFERENCE_CHILD, [log]))
        print(f"run {index + 1}: adapter {adapter[-1]['seconds']:.2f} s, orjson.loads only {reference[-1]['seconds']:.2f} s",
              flush=True)
    if any(run["failed"] for run in adapter):
        raise SystemExit(f"the adapter refused {adapter[0]['failed']} generated registrations")
    result = compare("registration_parse", adapter, reference, "registrations",
                     {"devices": devices, "registrations": adapter[0]["registrations"], "features": args.features})
    print(f"adapter: {result['events_per_second']:,} registrations/s (median), peak RSS {result['peak_rss_mb']:,.0f} MB")
    print(f"orjson.loads only: {result['reference_events_per_second']:,} registrations/s; ratio {result['ratio']:.2f}")
    print("target: at least 50,000 registrations/s")
    if args.pipeline:
        jobs = []
        for _ in range(runs_of(args)):
            with tempfile.TemporaryDirectory() as output:
                jobs.append(run_child(_PIPELINE_CHILD, ["--registrations", log, "--output", output, "--seed", "1"]))
        job = jobs[0]
        rate = statistics.median(run["registrations"] / run["seconds"] for run in jobs)
        peak = max(run["peak_rss_mb"] for run in jobs)
        result["pipeline"] = {"registrations_per_second": round(rate), "seconds": [round(run["seconds"], 1) for run in jobs],
                              "peak_rss_mb": round(peak), "event_level_reports": job["event_level_reports"],
                              "aggregatable_reports": job["aggregatable_reports"], "dead": job["dead"]}
        seconds = ", ".join(f"{run['seconds']:.1f}" for run in jobs)
        print(f"python -m pipelines.registrations end to end: {rate:,.0f} registrations/s (median; runs {seconds} s), "
              f"{job['event_level_reports']:,} event-level and {job['aggregatable_reports']:,} aggregatable reports, "
              f"peak RSS {peak:,.0f} MB")
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
