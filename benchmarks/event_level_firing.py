"""The event-level job's live firings, in one process: what a firing of the streaming job's device step costs on the
soak's dataset (``streaming_soak.py``), without Beam, the topics or the state store around it.

    python benchmarks/event_level_firing.py [--events-per-firing 10000] [--cycles 2] [--runs 3] [--json PATH]

The soak feeds the job 5,000 devices' 30 days of sources and triggers over and over, each pass (a cycle) shifted
30 days, and the job fires every 2 s: at 5,000 events/s a firing takes 10,000 events and replays nearly every
device. Here the same events, cut into firings of ``--events-per-firing`` in time order and packed as a topic
source packs them, go through the device step's own firing (``DeviceShardFn._fire`` of the event-level job's
``_DeviceFn``, secure noise, as the soak runs it), its state held as a durable job holds it: in the process and
in a SQLite state store, where each firing writes its snapshot, not in Beam state. The garbage collector runs at
the thresholds a streaming run sets (``pipelines.release``). Printed per cycle: the median and mean of a firing's
time (the mean counts the firings a full collection of the collector lands in). The first cycle
starts from no state; the later ones replay devices that hold a month of sources, as the live job does for as
long as it runs. Compare two versions by running this from a checkout of each, one after the other.
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

from schemas.codecs import EVENT_LEVEL_SOURCE, EVENT_LEVEL_TRIGGER, validate
from schemas.rows import EventLevelSource
from transforms.core.collector import streaming_collector
from transforms.core.device_stream import pack_events
from transforms.core.durable.step import DurableStep
from transforms.core.mechanisms.noise import SecureSource
from transforms.core.noise_key import KeyLocation, resolve_key
from transforms.event_level.reports import _DeviceFn

DAY = 86_400_000_000
EPSILON = 14.0  # the job's default


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


def _events(data_dir: str) -> list:
    rows = []
    for spec, prefix in ((EVENT_LEVEL_SOURCE, "sources-"), (EVENT_LEVEL_TRIGGER, "triggers-")):
        for path in sorted(glob.glob(os.path.join(data_dir, f"{prefix}*"))):
            with open(path, "rb") as file:
                rows += [validate(spec, record) for record in fastavro.reader(file)]
    return sorted(rows, key=lambda row: row.event_time_micros)


def _shifted(row, cycle: int, span: int):
    """``row`` in ``cycle``: its time shifted by ``cycle`` spans and its id suffixed, as the soak replays it."""
    ids = {"source_id": f"{row.source_id}~{cycle}"} if type(row) is EventLevelSource else \
        {"trigger_id": f"{row.trigger_id}~{cycle}"}
    return row._replace(event_time_micros=row.event_time_micros + cycle * span, **ids)


def run(rows: list, per_firing: int, cycles: int, store: str, key: KeyLocation) -> list[list[float]]:
    """Each cycle's firing times (seconds), from no state, snapshots in the SQLite file ``store``."""
    step = _DeviceFn(EPSILON, SecureSource(), 0)
    step.setup()
    step.durable = DurableStep(f"sqlite:///{store}", f"event-level-firing-{uuid.uuid4().hex}", "devices", key)
    step.start_bundle()
    pending = _Bag()
    # the order of _fire's parameters: shard, token, needed, hint, timer_at, catch_at, restored, FLUSH, CATCH_UP
    cells = [_Cell() for _ in range(9)]
    span = ((rows[-1].event_time_micros - rows[0].event_time_micros) // DAY + 1) * DAY
    times: list[list[float]] = []
    for cycle in range(cycles):
        times.append([])
        for start in range(0, len(rows), per_firing):
            chunk = [_shifted(row, cycle, span) for row in rows[start:start + per_firing]]
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
    parser.add_argument("--events-per-firing", type=int, default=10_000, help="events a firing takes (default 10,000)")
    parser.add_argument("--cycles", type=int, default=2, help="passes over the dataset, the first from no state "
                                                              "(default 2)")
    parser.add_argument("--runs", type=int, default=3, help="runs, each from no state (default 3)")
    parser.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "pm-beam-soak-data", "event_level"),
                        help="the soak's event-level dataset (generated there when absent; the soak's own place)")
    parser.add_argument("--json", help="write the result here")
    args = parser.parse_args(argv)
    if args.events_per_firing < 1 or args.cycles < 2 or args.runs < 1:
        parser.error("--events-per-firing and --runs must be at least 1, --cycles at least 2")
    generate(JOBS["event_level"], args.data)
    rows = _events(args.data)
    key = resolve_key(None)
    medians: list[float] = []
    means: list[float] = []
    with streaming_collector():  # as in the job; what is alive at its start (the input rows too) frozen
        for index in range(args.runs):
            print(f"run {index + 1}: {len(rows):,} events, {args.events_per_firing:,} a firing", flush=True)
            with tempfile.TemporaryDirectory() as directory:
                times = run(rows, args.events_per_firing, args.cycles, os.path.join(directory, "state.sqlite"), key)
            later = [t for cycle in times[1:] for t in cycle]
            medians.append(statistics.median(later))
            means.append(statistics.mean(later))
    result = {"events_per_firing": args.events_per_firing, "cycles": args.cycles,
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
