"""The four streaming jobs as the streaming benchmarks run them (``streaming_throughput``, ``streaming_soak``): each
job's dataset (generator and parameters, full and a tenth-size quick one), its inputs and its command."""
from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass

from harness import ROOT, cached

from schemas.codecs import (
    ARA_SOURCE,
    ARA_TRIGGER,
    CONVERSION,
    EVENT_LEVEL_SOURCE,
    EVENT_LEVEL_TRIGGER,
    IMPRESSION,
    JOIN_EVENT,
    read_files,
)


@dataclass(frozen=True)
class StreamingJob:
    """A streaming job and its dataset. ``inputs``: (job option, file prefix, event spec, id field or None) per
    input; ``leading``: the arguments before the inputs (the summary client's client); ``extra``: options the
    benchmarks add."""

    name: str
    generator: str
    parameters: dict
    quick: dict
    inputs: tuple
    leading: tuple = ()
    extra: tuple = ()

    @property
    def module(self) -> str:
        return f"pipelines.{self.name}"


JOBS = {
    "kanon": StreamingJob("kanon", "kanon", {"joins": 200_000, "groups": 2_000, "days": 30},
                          {"joins": 20_000, "groups": 200, "days": 30}, (("--input", "joins-", JOIN_EVENT, None),)),
    "measurement": StreamingJob("measurement", "microbenchmark", {"knob1": 0.1, "knob2": 0.1},
                                {"knob1": 1.0, "knob2": 0.1},  # a tenth of the devices
                                (("--impressions", "impressions-", IMPRESSION, "impression_id"),
                                 ("--conversions", "conversions-", CONVERSION, "conversion_id")),
                                extra=("--policy", "cookie_monster")),
    "summary_client": StreamingJob("summary_client", "ara", {"devices": 5_000, "days": 30}, {"devices": 500, "days": 30},
                                   (("--sources", "sources-", ARA_SOURCE, "source_id"),
                                    ("--triggers", "triggers-", ARA_TRIGGER, "trigger_id")), leading=("ara",)),
    "event_level": StreamingJob("event_level", "event-level", {"devices": 5_000, "days": 30},
                                {"devices": 500, "days": 30},
                                (("--sources", "sources-", EVENT_LEVEL_SOURCE, "source_id"),
                                 ("--triggers", "triggers-", EVENT_LEVEL_TRIGGER, "trigger_id"))),
}


def generate(job: StreamingJob, data_dir: str, quick: bool = False) -> None:
    """The job's dataset in ``data_dir`` (seed 1), unless it is there already."""
    parameters = job.quick if quick else job.parameters
    if cached(data_dir, parameters):
        return
    print(f"generating the {job.name} dataset into {data_dir} ...", flush=True)
    subprocess.run([sys.executable, "-m", "pipelines.generate", job.generator, "--output", data_dir, "--seed", "1",
                    "--quiet", *(f"--{name}={value}" for name, value in parameters.items())], check=True, cwd=ROOT)


def input_rows(data_dir: str, prefix: str, spec) -> list:
    """The rows of the dataset's files named ``prefix*``, in event-time order (as devices would send them)."""
    paths = sorted(os.path.join(data_dir, name) for name in os.listdir(data_dir) if name.startswith(prefix))
    rows, _ = read_files(paths, spec)
    return sorted(rows, key=lambda row: row.event_time_micros)
