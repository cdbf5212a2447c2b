"""What the throughput benchmarks share: running a measurement in a fresh Python process."""
from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_child(code: str, args: list[str]) -> dict:
    """Run ``code`` in a fresh interpreter with ``args`` as ``sys.argv[1:]``; the JSON its last line prints."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"benchmark child failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


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
