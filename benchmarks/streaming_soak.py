"""Soak: each streaming job fed live for an hour or more, through weeks of event time, with its state store on.

    python benchmarks/streaming_soak.py [--jobs kanon,measurement,summary_client,event_level] [--minutes 60]
        [--rate JOB=EVENTS_PER_SECOND ...] [--snapshot-seconds JOB=SECONDS ...] [--data DIR] [--out benchmarks/soak]

Starts Apache Kafka's broker (``pipelines.kafka_broker``; tansu, the tests' broker, keeps every message in memory,
and its fetches slowed until they stopped after 7.3 million messages, eight minutes of a soak) and, for each job in
turn, its dataset (generated once, cached under --data): k-anonymity 200,000 joins of 2,000 groups over 30 days;
measurement the Cookie Monster microbenchmark (knob1 = knob2 = 0.1: 20,000 devices, 280,000 events); the ARA summary
client 5,000 devices over 30 days (305,000 sources and triggers); event-level 5,000 devices over 30 days (about
300,000). The job runs live (``stop=never``) with a SQLite state store, an output topic and ``--metrics-port``,
while a producer replays its dataset over and over in event-time order at a fixed rate (default: half the job's
sustained rate, ``benchmarks/README.md``, less for event-level: ``RATES``), each pass (a *cycle*) shifted a whole
dataset span later in event time, with fresh event ids and the same devices and groups. So the job's windows,
epochs, expiries and deduplication horizons roll over many times, and its devices keep coming back.

Every minute the sampler records (``<out>/<job>.jsonl``): the RSS of the job and of its topic source process,
the state store's size and rows per table, the size of the file outputs spilled until the drain (outputs, not
state), events read per second and dead letters (from the job's own metrics endpoint), the event-time lag of its
watermark, the consumer lag, the stateful steps' firings (how many, their time, the keys each replayed), the time
the garbage collector held the job (all, and in full collections), and the end-to-end delay of the firings of
that minute: from the producer sending the first event at or after a firing's event time (which lets the
watermark pass it) to the job reporting that firing done (``pmbeam_firing_event_time_seconds``, scraped every
0.25 s: a delay is over-stated by at most that).

Targets (issue 40): after the first cycle (30 days of event time, longer than every job's state horizon: the
k-anonymity window of 7 days, 30-day attribution windows and source expiries), RSS and store size grow by at most
5 % per further cycle (a least-squares line through the samples after the first cycle, over the value at its
end); the p95 delay stays under 5 s in every minute. Plots of RSS, store size and delay: ``<out>/<job>.png``.
Never part of the test suite.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from bisect import bisect_left

import orjson

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from harness import ROOT  # noqa: E402
from streaming_jobs import JOBS, StreamingJob, generate, input_records  # noqa: E402

from pipelines.kafka_broker import KafkaBroker  # noqa: E402
from pipelines.processes import free_port  # noqa: E402

DAY = 86_400_000_000
TABLES = ("steps", "keyed", "releases", "source_dead_letters")
TARGET_GROWTH_PER_CYCLE, TARGET_P95_SECONDS = 0.05, 5.0


# the producer's rate per job, events/s: half the sustained rate measured from a backlog (benchmarks/README.md);
# event-level 5,000: live, its devices hold their truthful sources until a trigger (session 16), and it took 6,000
# with half of each minute in firings and fell behind at 10,000 (before holding it fell behind at 2,500)
RATES = {"kanon": 15_000, "measurement": 15_000, "summary_client": 10_000, "event_level": 5_000}
# how often the watermark moves (``--snapshot-seconds``, default 1): each move is a firing and a snapshot. The
# datasets have few devices for their rate (5,000 to 20,000 devices at 10,000 to 15,000 events/s), so a firing
# replays many devices and encodes their whole records: the summary client's 5,000 (60 sources each) about 0.8 s a
# firing; measurement's devices hold their impressions until a conversion (session 15), so a firing replays about
# 5,000 of its 20,000 where it replayed nearly all (0.75 s), and event-level's their truthful sources until a
# trigger (session 16: about 600 of 5,000 at 5,000 events/s); at one firing a second they fell behind (measured)
SNAPSHOT_SECONDS = {"measurement": 2.0, "summary_client": 2.0, "event_level": 2.0}


class Replay:
    """The dataset's messages in event-time order, replayed cycle after cycle: cycle k shifts every event time
    by k spans (the dataset's span rounded up to whole days) and suffixes every event id with ``~k``."""

    def __init__(self, job: StreamingJob, data: str) -> None:
        events = []
        for option, prefix, id_field in job.inputs:
            events += [(record["event_time_micros"], option, id_field, record) for record in input_records(data, prefix)]
        events.sort(key=lambda event: event[0])
        self.events = events
        first, last = events[0][0], events[-1][0]
        self.span = -(-(last - first + 1) // DAY) * DAY

    def messages(self, cycle: int):
        """(option, event time, message) of every event of ``cycle``."""
        shift = cycle * self.span
        for micros, option, id_field, record in self.events:
            record = dict(record, event_time_micros=micros + shift)
            if id_field is not None:
                record[id_field] = f"{record[id_field]}~{cycle}"
            yield option, micros + shift, orjson.dumps(record)


class Producer(threading.Thread):
    """Sends the replay to the job's topics at ``rate`` messages/s until stopped; logs (event time, wall time)
    every 100 messages, for the delays."""

    def __init__(self, address: str, topics: dict[str, str], replay: Replay, rate: float) -> None:
        super().__init__(daemon=True)
        from confluent_kafka import Producer as KafkaProducer

        self._producer = KafkaProducer({"bootstrap.servers": address, "linger.ms": 5})
        self._topics, self._replay, self._rate = topics, replay, rate
        self.stop = threading.Event()
        self.sent, self.cycle = 0, 0
        self.log_times: list[int] = []  # event times, increasing
        self.log_walls: list[float] = []

    def run(self) -> None:
        started = time.perf_counter()
        while not self.stop.is_set():
            for option, micros, message in self._replay.messages(self.cycle):
                if self.sent % 100 == 0:
                    while (ahead := started + self.sent / self._rate - time.perf_counter()) > 0:
                        time.sleep(min(ahead, 0.01))
                    self.log_times.append(micros)
                    self.log_walls.append(time.perf_counter())
                    self._producer.poll(0)
                    if self.stop.is_set():
                        break
                self._producer.produce(self._topics[option], value=message)
                self.sent += 1
            else:
                self.cycle += 1
        self._producer.flush(30)

    def sent_at(self, micros: int) -> float | None:
        """When the first message at or after event time ``micros`` was sent (to within 100 messages)."""
        index = bisect_left(self.log_times, micros)
        return self.log_walls[index] if index < len(self.log_walls) else None


# a topic keeps 5 minutes of messages (by the producer's wall-clock timestamps), in 64 MB segments: an hour at
# 15,000 messages/s would otherwise hold 54 million
_TOPIC_CONFIG = {"retention.ms": "300000", "segment.bytes": str(64 << 20)}


def _create_topics(address: str, names: list[str]) -> None:
    """Create the topics before the job reads or writes them, one partition each: event time runs about 200,000
    times faster than the wall clock here, so the default lateness (one hour) is some 20 ms of wall time, less
    than the skew between partitions' deliveries, and several partitions would make late records that real time
    would not."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": address})
    topics = [NewTopic(name, num_partitions=1, replication_factor=1, config=_TOPIC_CONFIG) for name in names]
    for future in admin.create_topics(topics).values():
        future.result(timeout=30)


def _scrape(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    values: dict = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values


def _sum(values: dict, prefix: str) -> float:
    return sum(value for name, value in values.items() if name.startswith(prefix))


def _grown(values: dict, last: dict, prefix: str) -> float:
    """A counter's growth between two scrapes."""
    return _sum(values, prefix) - _sum(last, prefix)


def _rss_mb(pid: int) -> tuple[float, float]:
    """The RSS of ``pid`` and of all its descendants, MB."""
    def rss(process: int) -> float:
        try:
            with open(f"/proc/{process}/status", encoding="ascii") as handle:
                return next(int(line.split()[1]) for line in handle if line.startswith("VmRSS:")) / 1024
        except (OSError, StopIteration):
            return 0.0

    def children(process: int) -> list[int]:
        found = []
        try:
            for task in os.listdir(f"/proc/{process}/task"):
                with open(f"/proc/{process}/task/{task}/children", encoding="ascii") as handle:
                    found += [int(child) for child in handle.read().split()]
        except OSError:
            pass
        return found

    descendants, frontier = [], children(pid)
    while frontier:
        descendants += frontier
        frontier = [child for process in frontier for child in children(process)]
    return rss(pid), sum(map(rss, descendants))


def _spill_mb(store: str) -> float:
    """What the job's file outputs spilled beside its store until the drain (``StateStore.spill_home``), in MB:
    its outputs, which grow with every release (not state)."""
    total = 0
    for directory, _, names in os.walk(f"{store}.spill"):
        for name in names:
            try:
                total += os.path.getsize(os.path.join(directory, name))
            except FileNotFoundError:  # a chunk the job renamed or dropped since the listing
                continue
    return total / 1e6


def _store(path: str) -> tuple[float, dict]:
    """The store's size (database and WAL, MB) and its rows per table."""
    size = sum(os.path.getsize(p) for p in (path, f"{path}-wal") if os.path.exists(p)) / 1e6
    rows = {}
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30) as connection:
            for table in TABLES:
                rows[table] = connection.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]  # noqa: S608
    except sqlite3.Error:
        pass
    return size, rows


class Delays(threading.Thread):
    """Scrapes the job's firing event times every 0.25 s; each new one's delay: now minus when the producer sent
    the first event at or after it."""

    def __init__(self, port: int, producer: Producer) -> None:
        super().__init__(daemon=True)
        self._port, self._producer = port, producer
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self._delays: list[float] = []
        self._seen = -1.0

    def run(self) -> None:
        while not self.stop.wait(0.25):
            try:
                values = _scrape(self._port)
            except OSError:
                continue
            fired = max((v for n, v in values.items() if n.startswith("pmbeam_firing_event_time_seconds")), default=-1)
            if fired > self._seen:
                self._seen = fired
                sent = self._producer.sent_at(int(fired * 1e6))
                if sent is not None:
                    with self._lock:
                        self._delays.append(time.perf_counter() - sent)

    def take(self) -> list[float]:
        with self._lock:
            taken, self._delays = self._delays, []
        return taken


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _growth(samples: list[dict], field: str, after_minute: float, minutes_per_cycle: float) -> float | None:
    """The least-squares growth of ``field`` per cycle after ``after_minute``, over its value then."""
    points = [(s["minute"], s[field]) for s in samples if s["minute"] >= after_minute and s[field] is not None]
    if len(points) < 3:
        return None
    xs, ys = zip(*points, strict=True)
    slope = statistics.linear_regression(xs, ys).slope
    return slope * minutes_per_cycle / ys[0] if ys[0] else None


def soak(job: StreamingJob, address: str, data: str, out: str, minutes: float, rate: float,
         snapshot_seconds: float) -> dict:
    replay = Replay(job, data)
    suffix = uuid.uuid4().hex[:8]
    topics = {option: f"soak-{job.name}-{option.strip('-')}-{suffix}" for option, *_ in job.inputs}
    output_topic, group = f"soak-{job.name}-out-{suffix}", f"soak-{suffix}"
    directory = tempfile.mkdtemp(prefix=f"pm-beam-soak-{job.name}-")
    store, port = os.path.join(directory, "state.sqlite"), free_port()
    _create_topics(address, [*topics.values(), output_topic])
    inputs = [item for option, topic in topics.items() for item in (option, f"kafka://{address}/{topic}?group={group}")]
    command = [sys.executable, "-m", job.module, *job.leading, *inputs, "--output", os.path.join(directory, "out"),
               "--output-topic", f"kafka://{address}/{output_topic}", "--state-store", f"sqlite:///{store}",
               "--metrics-port", str(port), "--progress-seconds", "60", "--snapshot-seconds", f"{snapshot_seconds:g}",
               *job.extra]
    log = open(os.path.join(directory, "job.log"), "w", encoding="utf-8")  # noqa: SIM115 - closed below
    process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        print(f"{job.name}: job {process.pid} ({directory}), metrics on :{port}, {rate:,.0f} events/s for {minutes:g} min, "
              f"cycle {replay.span / DAY:.0f} days of {len(replay.events):,} events", flush=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                _scrape(port)
                break
            except OSError:
                time.sleep(0.5)
        producer = Producer(address, topics, replay, rate)
        delays = Delays(port, producer)
        producer.start()
        delays.start()
        samples: list[dict] = []
        started = time.monotonic()
        last_read, last_at, last_values = 0.0, started, {}
        path = os.path.join(out, f"{job.name}.jsonl")
        with open(path, "w", encoding="utf-8") as record:
            while time.monotonic() - started < minutes * 60 and process.poll() is None:
                time.sleep(max(0.0, started + 60 * (len(samples) + 1) - time.monotonic()))
                try:
                    values = _scrape(port)
                except OSError:
                    continue
                now = time.monotonic()
                read = _sum(values, "pmbeam_events_read_total")
                job_rss, source_rss = _rss_mb(process.pid)
                store_mb, rows = _store(store)
                minute_delays = delays.take()
                fired = _grown(values, last_values, "pmbeam_firing_seconds_count")
                sample = {
                    "minute": round((now - started) / 60, 2), "cycle": producer.cycle, "sent": producer.sent,
                    "events_read": int(read), "events_per_second": round((read - last_read) / (now - last_at)),
                    "rss_mb": round(job_rss + source_rss, 1), "job_rss_mb": round(job_rss, 1),
                    "source_rss_mb": round(source_rss, 1), "store_mb": round(store_mb, 2), "rows": rows,
                    "spill_mb": round(_spill_mb(store), 1),
                    "watermark_lag_seconds": values.get("pmbeam_watermark_lag_seconds"),
                    "consumer_lag": int(_sum(values, "pmbeam_consumer_lag_messages")),
                    "dead_letters": int(_sum(values, "pmbeam_dead_letters_total")),
                    "firings": len(minute_delays),
                    "firings_done": int(fired),
                    "firing_seconds": round(_grown(values, last_values, "pmbeam_firing_seconds_sum"), 2),
                    "keys_per_firing": round(_grown(values, last_values, "pmbeam_firing_keys_total") / fired) if fired
                    else None,
                    "gc_seconds": round(_grown(values, last_values, "pmbeam_gc_pause_seconds_total"), 2),
                    "gc_full_seconds": round(_grown(values, last_values, 'pmbeam_gc_pause_seconds_total{generation="2"}'),
                                             2),
                    "delay_p50_seconds": _quantile(minute_delays, 0.5), "delay_p95_seconds": _quantile(minute_delays, 0.95),
                }
                last_read, last_at, last_values = read, now, values
                samples.append(sample)
                record.write(json.dumps(sample) + "\n")
                record.flush()
                print(f"{job.name} {sample['minute']:6.1f} min: cycle {sample['cycle']}, {sample['events_per_second']:,}/s, "
                      f"RSS {sample['rss_mb']:,.0f} MB, store {store_mb:,.1f} MB {rows}, p95 delay "
                      f"{sample['delay_p95_seconds']}, consumer lag {sample['consumer_lag']:,}, firings "
                      f"{sample['firings_done']} ({sample['firing_seconds']} s, {sample['keys_per_firing']} keys each), "
                      f"collector {sample['gc_seconds']} s", flush=True)
        producer.stop.set()
        producer.join()
        delays.stop.set()
        delays.join()
        failed = process.poll()
        drained_in = None
        if failed is None:
            drain = time.monotonic()
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=3600)
            drained_in = round(time.monotonic() - drain, 1)
        log.close()
        minutes_per_cycle = (samples[-1]["minute"] / max(samples[-1]["cycle"], 1)) if samples else 0
        first_cycle_end = next((s["minute"] for s in samples if s["cycle"] >= 1), None)
        p95s = [s["delay_p95_seconds"] for s in samples if s["delay_p95_seconds"] is not None]
        result = {
            "job": job.name, "minutes": minutes, "rate_events_per_second": rate, "snapshot_seconds": snapshot_seconds,
            "events_sent": producer.sent,
            "cycles": producer.cycle, "cycle_days": replay.span / DAY, "event_days": round(producer.sent / len(replay.events)
                                                                                           * replay.span / DAY, 1),
            "exit": failed if failed is not None else process.returncode, "drain_seconds": drained_in,
            "rss_mb_after_first_cycle": next((s["rss_mb"] for s in samples if s["cycle"] >= 1), None),
            "rss_mb_end": samples[-1]["rss_mb"] if samples else None,
            "store_mb_after_first_cycle": next((s["store_mb"] for s in samples if s["cycle"] >= 1), None),
            "store_mb_end": samples[-1]["store_mb"] if samples else None,
            "rss_growth_per_cycle": None if first_cycle_end is None else _growth(samples, "rss_mb", first_cycle_end,
                                                                                 minutes_per_cycle),
            "store_growth_per_cycle": None if first_cycle_end is None else _growth(samples, "store_mb", first_cycle_end,
                                                                                   minutes_per_cycle),
            "delay_p95_seconds_worst_minute": max(p95s, default=None),
            "delay_p50_seconds_median_minute": statistics.median(s["delay_p50_seconds"] for s in samples
                                                                 if s["delay_p50_seconds"] is not None) if p95s else None,
            "events_per_second_median": statistics.median(s["events_per_second"] for s in samples) if samples else None,
            "dead_letters": samples[-1]["dead_letters"] if samples else None,
            "samples": path, "job_log": os.path.join(directory, "job.log"),
        }
        _plot(job.name, rate, samples, os.path.join(out, f"{job.name}.png"))
        return result
    except BaseException:  # interrupted (Ctrl-C, SIGTERM: ``main``) or failed: the job does not outlive the soak
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=120)
            except subprocess.TimeoutExpired:
                process.kill()
        raise


def _plot(name: str, rate: float, samples: list[dict], path: str) -> None:
    """RSS, store size and the p95 delay per minute, one panel each."""
    if not samples:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    minutes = [s["minute"] for s in samples]
    figure, axes = plt.subplots(3, 1, figsize=(8, 7), sharex=True)
    axes[0].plot(minutes, [s["rss_mb"] for s in samples], label="job + source")
    axes[0].plot(minutes, [s["job_rss_mb"] for s in samples], label="job")
    axes[0].set_ylabel("RSS (MB)")
    axes[0].legend(loc="lower right")
    axes[1].plot(minutes, [s["store_mb"] for s in samples])
    axes[1].set_ylabel("state store (MB)")
    axes[2].plot(minutes, [s["delay_p95_seconds"] for s in samples], label="p95")
    axes[2].plot(minutes, [s["delay_p50_seconds"] for s in samples], label="p50")
    axes[2].axhline(TARGET_P95_SECONDS, color="grey", linestyle="--", linewidth=0.8)
    axes[2].set_ylabel("delay (s)")
    axes[2].set_xlabel("minutes")
    axes[2].legend(loc="upper right")
    for axis in axes:
        axis.set_ylim(bottom=0)
        axis.grid(alpha=0.3)
    figure.suptitle(f"{name}: soak at {rate:,.0f} events/s")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", default=",".join(JOBS), help=f"which jobs, in turn (default {','.join(JOBS)})")
    parser.add_argument("--minutes", type=float, default=60.0, help="wall time per job (default 60)")
    parser.add_argument("--rate", action="append", default=[], metavar="JOB=EVENTS_PER_SECOND",
                        help="the producer's rate for a job (default: half its sustained rate)")
    parser.add_argument("--snapshot-seconds", action="append", default=[], metavar="JOB=SECONDS",
                        help="how often a job's watermark moves, each move a firing and a snapshot (default 1; "
                             "measurement, summary_client and event_level 2)")
    parser.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "pm-beam-soak-data"),
                        help="dataset cache directory")
    parser.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "soak"), help="samples, plots, results")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stopped: stop the job and the broker too
    rates = {name: float(value) for name, value in (item.split("=", 1) for item in args.rate)}
    snapshots = {**SNAPSHOT_SECONDS, **{name: float(value) for name, value in
                                        (item.split("=", 1) for item in args.snapshot_seconds)}}
    os.makedirs(args.out, exist_ok=True)
    results = []
    with KafkaBroker() as broker:
        for name in args.jobs.split(","):
            job = JOBS[name]
            data = os.path.join(args.data, name)
            generate(job, data)
            result = soak(job, broker.address, data, args.out, args.minutes, rates.get(name, RATES[name]),
                          snapshots.get(name, 1.0))
            results.append(result)
            with open(os.path.join(args.out, f"{name}.json"), "w", encoding="utf-8") as handle:
                json.dump(result, handle, indent=1)
            print(json.dumps(result, indent=1), flush=True)
    print(f"{'job':16}{'events/s':>10}{'event days':>12}{'RSS MB':>16}{'growth/cycle':>14}{'store MB':>16}"
          f"{'growth/cycle':>14}{'worst p95 s':>13}")
    for r in results:
        print(f"{r['job']:16}{r['rate_events_per_second']:>10,.0f}{r['event_days']:>12,.0f}"
              f"{r['rss_mb_after_first_cycle']!s:>8}->{r['rss_mb_end']!s:<7}{r['rss_growth_per_cycle'] or 0:>14.2%}"
              f"{r['store_mb_after_first_cycle']!s:>8}->{r['store_mb_end']!s:<7}{r['store_growth_per_cycle'] or 0:>14.2%}"
              f"{r['delay_p95_seconds_worst_minute'] or 0:>13.2f}")
    print(f"targets: growth <= {TARGET_GROWTH_PER_CYCLE:.0%} per cycle after the first, p95 delay < "
          f"{TARGET_P95_SECONDS:g} s in every minute")
    return 0


if __name__ == "__main__":
    sys.exit(main())
