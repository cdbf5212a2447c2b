"""The four streaming jobs as the streaming benchmarks run them (``streaming_throughput``, ``streaming_soak``): each
job's dataset (generator and parameters, full and a tenth-size quick one), its inputs and its command."""
from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass

import fastavro
from harness import ROOT, cached

from synthetic.files import without_none


@dataclass(frozen=True)
class StreamingJob:
    """A streaming job and its dataset. ``inputs``: (job option, file prefix, id field or None) per input;
    ``leading``: the arguments before the inputs (the summary client's client); ``extra``: options the benchmarks
    add."""

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
                          {"joins": 20_000, "groups": 200, "days": 30}, (("--input", "joins-", None),)),
    "measurement": StreamingJob("measurement", "microbenchmark", {"knob1": 0.1, "knob2": 0.1},
                                {"knob1": 1.0, "knob2": 0.1},  # a tenth of the devices
                                (("--impressions", "impressions-", "impression_id"),
                                 ("--conversions", "conversions-", "conversion_id")),
                                extra=("--policy", "cookie_monster")),
    "summary_client": StreamingJob("summary_client", "ara", {"devices": 5_000, "days": 30}, {"devices": 500, "days": 30},
                                   (("--sources", "sources-", "source_id"),
                                    ("--triggers", "triggers-", "trigger_id")), leading=("ara",)),
    "event_level": StreamingJob("event_level", "event-level", {"devices": 5_000, "days": 30},
                                {"devices": 500, "days": 30},
                                (("--sources", "sources-", "source_id"),
                                 ("--triggers", "triggers-", "trigger_id"))),
}


def generate(job: StreamingJob, data_dir: str, quick: bool = False) -> None:
    """The job's dataset in ``data_dir`` (seed 1), unless it is there already."""
    parameters = job.quick if quick else job.parameters
    if cached(data_dir, parameters):
        return
    print(f"generating the {job.name} dataset into {data_dir} ...", flush=True)
    subprocess.run([sys.executable, "-m", "pipelines.generate", job.generator, "--output", data_dir, "--seed", "1",
                    "--quiet", *(f"--{name}={value}" for name, value in parameters.items())], check=True, cwd=ROOT)


def input_records(data_dir: str, prefix: str) -> list[dict]:
    """The records of the dataset's Avro files named ``prefix*`` in event-time order (as devices would send them),
    each in the form a topic's JSON message has (the Avro record without its unset fields, as the generator's
    JSON Lines: nested records as objects, 128-bit keys as hex strings)."""
    records = []
    for name in sorted(name for name in os.listdir(data_dir) if name.startswith(prefix)):
        if not name.endswith(".avro"):
            raise SystemExit(f"{os.path.join(data_dir, name)}: the streaming benchmarks read Avro datasets")
        with open(os.path.join(data_dir, name), "rb") as handle:
            records += [without_none(record) for record in fastavro.reader(handle)]
    return sorted(records, key=lambda record: record["event_time_micros"])
