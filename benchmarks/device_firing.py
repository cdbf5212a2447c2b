"""A streaming device job's live firings, in one process: what a firing of the job's device step costs on the soak's
dataset (``streaming_soak.py``), without Beam or the topics around it.

    python benchmarks/device_firing.py [--job event_level|measurement] [--events-per-firing 10000] [--cycles 2]
        [--runs 3] [--json PATH]

The soak feeds a job its dataset over and over, each pass (a cycle) shifted a whole span of days later, and the
job fires every 2 s: at 5,000 events/s a firing takes 10,000 events. Here the same events, cut into firings of
``--events-per-firing`` in time order and packed as a topic source packs them, go through the device step's own
firing (``DeviceShardFn._fire`` of the job's ``_DeviceFn``, secure noise, the job's default options, as the soak
runs it), its state held as a durable job holds it: in the process and in a SQLite state store, where each firing
writes its snapshot, not in Beam state. The garbage collector runs at the thresholds a streaming run sets
(``pipelines.release``). Printed per cycle: the median and mean of a firing's time (the mean counts the firings a
full collection of the collector lands in). The first cycle starts from no state; the later ones replay devices
that hold a month of events, as the live job does for as long as it runs. Compare two versions by running this
from a checkout of each, one after the other. (Sessions 6 to 9 of ``benchmarks/README.md`` ran it as
``event_level_firing.py``, the event-level job only.)
"""
from __future__ import annotations

import argparse
import glob
import os
import statistics
import sys
import tempfile
import time
import uuid

import fastavro
from harness import write_json
from streaming_jobs import JOBS, generate

from pipelines import event_level, measurement
from schemas.codecs import CONVERSION, EVENT_LEVEL_SOURCE, EVENT_LEVEL_TRIGGER, IMPRESSION, validate
from transforms.budgeting import measurement as measurement_step
from transforms.core.collector import streaming_collector
from transforms.core.device_stream import DeviceShardFn, pack_events
from transforms.core.durable.step import DurableStep
from transforms.core.mechanisms.noise import SecureSource
from transforms.core.noise_key import KeyLocation, resolve_key
from transforms.event_level import reports as event_level_step

DAY = 86_400_000_000


def _event_level_step() -> DeviceShardFn:
    job, _ = event_level.parse_job(["--sources", "-", "--triggers", "-", "--output", "-"])
    return event_level_step._DeviceFn(job.epsilon, SecureSource(), 0)


def _measurement_step() -> DeviceShardFn:
    job, _ = measurement.parse_job(["--impressions", "-", "--conversions", "-", "--output", "-",
                                     "--policy", "cookie_monster"])
    return measurement_step._DeviceFn(job.config, SecureSource(), job.batch_size, job.emit_budgets, 0)


# per job: its device step with the job's default options (the soak's), and its inputs (codec spec, the files'
# prefix in the soak's dataset, the id field the soak suffixes with its cycle)
JOBS_HERE = {
    "event_level": (_event_level_step, ((EVENT_LEVEL_SOURCE, "sources-", "source_id"),
                                        (EVENT_LEVEL_TRIGGER, "triggers-", "trigger_id"))),
    "measurement": (_measurement_step, ((IMPRESSION, "impressions-", "impression_id"),
                                        (CONVERSION, "conversions-", "conversion_id"))),
}


class _Cell:
    """A ReadModifyWriteState or a timer of the device step, held in the process."""

    def __init__(self) -> None:
        self.value = None

    def read(self):
        return self.value

    def write(self, value) -> None:
        self.value = value

    def clear(self) -> None:
        self.value = None

    def set(self, _timestamp) -> None:
        pass


class _Bag:
    """A BagState of the device step, held in the process."""

    def __init__(self) -> None:
        self.items: list = []

    def read(self) -> list:
        return list(self.items)

    def add(self, item) -> None:
        self.items.append(item)

    def clear(self) -> None:
        self.items = []


def _events(job: str, data_dir: str) -> list[tuple]:
    """The dataset's events in time order, each with the name of the id field the soak suffixes."""
    rows = []
    for spec, prefix, id_field in JOBS_HERE[job][1]:
        for path in sorted(glob.glob(os.path.join(data_dir, f"{prefix}*"))):
            with open(path, "rb") as file:
                rows += [(validate(spec, record), id_field) for record in fastavro.reader(file)]
    return sorted(rows, key=lambda row: row[0].event_time_micros)


def _shifted(row, id_field: str, cycle: int, span: int):
    """``row`` in ``cycle``: its time shifted by ``cycle`` spans and its id suffixed, as the soak replays it."""
    return row._replace(event_time_micros=row.event_time_micros + cycle * span,
                        **{id_field: f"{getattr(row, id_field)}~{cycle}"})


def run(job: str, rows: list[tuple], per_firing: int, cycles: int, store: str,
        key: KeyLocation) -> list[list[float]]:
    """Each cycle's firing times (seconds), from no state, snapshots in the SQLite file ``store``."""
    step = JOBS_HERE[job][0]()
    step.setup()
    step.durable = DurableStep(f"sqlite:///{store}", f"{job}-firing-{uuid.uuid4().hex}", "devices", key)
    step.start_bundle()
    pending = _Bag()
    # the order of _fire's parameters: shard, token, needed, hint, timer_at, catch_at, restored, FLUSH, CATCH_UP
    cells = [_Cell() for _ in range(9)]
    span = ((rows[-1][0].event_time_micros - rows[0][0].event_time_micros) // DAY + 1) * DAY
    times: list[list[float]] = []
    for cycle in range(cycles):
        times.append([])
        for start in range(0, len(rows), per_firing):
            chunk = [_shifted(row, id_field, cycle, span) for row, id_field in rows[start:start + per_firing]]
            by_type: dict[type, list] = {}
            for row in chunk:
                by_type.setdefault(type(row), []).append(tuple(row))
            for row_type, tuples in by_type.items():
                for _, _, data in pack_events(row_type, tuples):
                    pending.add(data)
            fired = chunk[-1].event_time_micros + 1_000
            started = time.perf_counter()
            for _ in step._fire(0, fired, pending, *cells):
                pass
            times[-1].append(time.perf_counter() - started)
        print(f"  cycle {cycle}: {len(times[-1])} firings, median {statistics.median(times[-1]) * 1e3:,.0f} ms, "
              f"mean {statistics.mean(times[-1]) * 1e3:,.0f} ms", flush=True)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--job", choices=sorted(JOBS_HERE), default="event_level",
                        help="the job whose device step fires (default event_level)")
    parser.add_argument("--events-per-firing", type=int, default=10_000, help="events a firing takes (default 10,000)")
    parser.add_argument("--cycles", type=int, default=2, help="passes over the dataset, the first from no state "
                                                              "(default 2)")
    parser.add_argument("--runs", type=int, default=3, help="runs, each from no state (default 3)")
    parser.add_argument("--data", help="the soak's dataset of the job (generated there when absent; default the "
                                       "soak's own place)")
    parser.add_argument("--json", help="write the result here")
    args = parser.parse_args(argv)
    if args.events_per_firing < 1 or args.cycles < 2 or args.runs < 1:
        parser.error("--events-per-firing and --runs must be at least 1, --cycles at least 2")
    data = args.data or os.path.join(tempfile.gettempdir(), "pm-beam-soak-data", args.job)
    generate(JOBS[args.job], data)
    rows = _events(args.job, data)
    key = resolve_key(None)
    medians: list[float] = []
    means: list[float] = []
    with streaming_collector():  # as in the job; what is alive at its start (the input rows too) frozen
        for index in range(args.runs):
            print(f"run {index + 1}: {len(rows):,} events, {args.events_per_firing:,} a firing", flush=True)
            with tempfile.TemporaryDirectory() as directory:
                times = run(args.job, rows, args.events_per_firing, args.cycles, os.path.join(directory, "state.sqlite"), key)
            later = [t for cycle in times[1:] for t in cycle]
            medians.append(statistics.median(later))
            means.append(statistics.mean(later))
    result = {"job": args.job, "events_per_firing": args.events_per_firing, "cycles": args.cycles,
              "median_firing_seconds_after_the_first_cycle": statistics.median(medians),
              "mean_firing_seconds_after_the_first_cycle": statistics.median(means),
              "runs": medians, "run_means": means}
    print(f"a firing after the first cycle: median {result['median_firing_seconds_after_the_first_cycle'] * 1e3:,.0f} ms, "
          f"mean {result['mean_firing_seconds_after_the_first_cycle'] * 1e3:,.0f} ms (the median of {args.runs} "
          f"run(s): medians {', '.join(f'{t * 1e3:,.0f}' for t in medians)}; means "
          f"{', '.join(f'{t * 1e3:,.0f}' for t in means)})")
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
