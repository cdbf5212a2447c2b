"""One tiny batch job of every pipeline, run by ``tests/deploy/test_wheel.py`` inside the wheel-only environment.

A script of its own (run by path, so that only this folder, never the project's root, is on ``sys.path``): it
generates small datasets and runs each command through ``pm-beam``'s entry point, in the working directory it
is given, and prints one JSON object: each command's exit status and where the project was imported from.

    python tests/deploy/tiny_jobs.py
"""
from __future__ import annotations

import contextlib
import io
import json
import sys

import pipelines
from pipelines.__main__ import COMMANDS, main

GENERATE = [
    ["generate", "kanon", "--output", "data/joins", "--groups", "40", "--joins", "8000", "--days", "3",
     "--seed", "7", "--quiet"],
    ["generate", "microbenchmark", "--output", "data/micro", "--knob1", "0.1", "--knob2", "0.1", "--batch-size", "40",
     "--products", "2", "--seed", "7", "--quiet"],
    ["generate", "ara", "--output", "data/ara", "--devices", "200", "--days", "3", "--seed", "7", "--registrations",
     "--quiet"],
    ["generate", "paa", "--output", "data/paa", "--devices", "200", "--days", "2", "--seed", "7", "--quiet"],
    ["generate", "event-level", "--output", "data/event-level", "--sources", "400", "--days", "3", "--seed", "7",
     "--quiet"],
]
MICRO = ["--impressions", "data/micro/impressions-*", "--conversions", "data/micro/conversions-*", "--batch-size", "40"]
JOBS = {
    "kanon": ["kanon", "--input", "data/joins/joins-*", "--output", "out/kanon", "--seed", "1"],
    "measurement": ["measurement", *MICRO, "--output", "out/measurement-cookie-monster", "--seed", "1"],
    "compare-policies": ["compare-policies", *MICRO, "--output", "out/measurement", "--seed", "1"],
    "summary-client ara": ["summary-client", "ara", "--sources", "data/ara/sources-*", "--triggers",
                           "data/ara/triggers-*", "--output", "out/ara-reports", "--seed", "1"],
    "summary-client paa": ["summary-client", "paa", "--events", "data/paa/events-*", "--output", "out/paa-reports",
                           "--seed", "1"],
    "aggregate": ["aggregate", "--reports", "out/ara-reports/reports-*", "--domain", "data/ara/domain.avro",
                  "--mode", "threshold", "--output", "out/summary-report", "--ledger", "sqlite:///out/ledger.db",
                  "--job-id", "tiny", "--now", "1706745600", "--seed", "1"],
    "event-level": ["event-level", "--sources", "data/event-level/sources-*", "--triggers",
                    "data/event-level/triggers-*", "--output", "out/event-level", "--seed", "1"],
    "registrations": ["registrations", "--registrations", "data/ara/registrations-*", "--output", "out/registrations",
                      "--seed", "1"],
    "kanon-privacy": ["kanon-privacy", "--epsilon", "3", "--delta", "1e-5", "--json"],
    "kanon-accuracy": ["kanon-accuracy", "--epsilon", "3", "--delta", "1e-5", "--repetitions", "20", "--output",
                       "out/kanon-accuracy", "--seed", "1"],
    "evaluate": ["evaluate", "microbenchmark-knob1", "--tiny", "--quiet", "--output", "out/evaluate"],
    "demo-report": ["demo-report", "--demo-dir", "out"],  # the page of what the jobs above wrote, as `make demo`'s
}


def _quietly(arguments: list[str]) -> int:
    """``pm-beam ARGUMENTS``, its printed report kept off this script's output (the JSON object)."""
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            return main(arguments)
        except SystemExit as done:  # --help
            return int(done.code or 0)


def run() -> dict:
    helps = {name: _quietly([name, "--help"]) for name in COMMANDS}
    generated = [_quietly(arguments) for arguments in GENERATE]
    jobs = {name: _quietly(arguments) for name, arguments in JOBS.items()}
    return {"imported_from": pipelines.__file__, "help": helps, "generate": generated, "jobs": jobs}


if __name__ == "__main__":
    print(json.dumps(run()))
    sys.exit(0)
