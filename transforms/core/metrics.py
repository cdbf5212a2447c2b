"""What an operator watches in a running job, recorded twice: as Beam metrics and as Prometheus metrics.

* **Beam's metrics** (every runner: Flink's web UI, Dataflow's job page, ``PipelineResult.metrics()``): counters
  and distributions under ``pmbeam.*`` namespaces, updated where the work is done (a sink's bundle, a stateful
  step's firing, a snapshot). Outside a DoFn they are no-ops, as Beam makes them.
* **Prometheus** (the local runner, ``--metrics-port``): the same numbers in this process's ``JobMetrics``
  registry, served over HTTP by ``serve`` (``prometheus_client``), together with what the topic source reports
  from its own process (``KafkaStreamProcess``): events read per input, what it dead-lettered, the watermark and
  its lag, and the consumer lag per partition. On the local runner every DoFn runs in the driver's process, so
  one registry sees the whole job.

``begin_run`` gives each run a registry of its own (a second run in one process starts from zero); the server
serves whichever run is current. The metric names and their meaning are listed in docs/operations.md.
"""
from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterable, Mapping

from apache_beam.metrics import Metrics
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

OUTPUTS_NAMESPACE = "pmbeam.outputs"  # counter per sink: records written
DEAD_LETTERS_NAMESPACE = "pmbeam.dead_letters"  # counter per reason: dead letters written
FIRINGS_NAMESPACE = "pmbeam.firings"  # per stateful step: a firing's duration in microseconds, the keys it took
SNAPSHOTS_NAMESPACE = "pmbeam.snapshots"  # distributions per step: a snapshot's duration (us) and size (bytes)
REFUSALS_NAMESPACE = "pmbeam.budget_refusals"  # counter per kind: what a privacy budget refused
# a firing or a snapshot takes from a millisecond (a quiet shard) to seconds (the end of a long input)
_SECONDS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class JobMetrics:
    """One run's Prometheus metrics: those the driver's steps update, and the topic source's latest status
    (``source_status``), read when scraped."""

    def __init__(self) -> None:
        self.registry = registry = CollectorRegistry()
        self.outputs = Counter("pmbeam_outputs_written", "Records written, per sink (a topic, or an output file "
                               "prefix written when the run drains)", ["sink"], registry=registry)
        self.dead_letters = Counter("pmbeam_dead_letters", "Dead letters written (the source's and the stateful "
                                    "steps'), per reason", ["reason"], registry=registry)
        self.firings = Histogram("pmbeam_firing_seconds", "Duration of a stateful step's timer firing (the state "
                                 "read, the replay or evaluation, the snapshot)", ["step"], buckets=_SECONDS_BUCKETS,
                                 registry=registry)
        self.fired_keys = Counter("pmbeam_firing_keys", "Keys a stateful step's firings replayed or evaluated "
                                  "(devices, interest groups), those with events and those due to wake", ["step"],
                                  registry=registry)
        self.fired_through = Gauge("pmbeam_firing_event_time_seconds", "The event time of a step's latest timer "
                                   "firing (Unix seconds): what it has made final", ["step"], registry=registry)
        self.snapshots = Histogram("pmbeam_snapshot_seconds", "Duration of writing a firing's snapshot to the state "
                                   "store", ["step"], buckets=_SECONDS_BUCKETS, registry=registry)
        self.snapshot_bytes = Gauge("pmbeam_snapshot_bytes", "Size of the last snapshot a step wrote (its record, "
                                    "changed keys, held input and release log)", ["step"], registry=registry)
        self.store_bytes = Gauge("pmbeam_state_store_bytes", "Size of the state store, measured after a snapshot "
                                 "at most every few seconds (SQLite: its files; PostgreSQL: its tables)",
                                 registry=registry)
        self.release_log = Gauge("pmbeam_release_log_entries", "Entries in a step's release log in the state store: "
                                 "snapshots whose outputs some sink has not yet written (docs/durability.md)",
                                 ["step"], registry=registry)
        self.refusals = Counter("pmbeam_budget_refusals", "What a privacy budget refused, per kind (SENSITIVE in "
                                "aggregate: docs/operations.md)", ["kind"], registry=registry)
        self._status: dict = {}
        self._fired_micros: dict[str, int] = {}
        self._lock = threading.Lock()
        registry.register(_SourceCollector(self))
        registry.register(_CollectorPauses())

    def fired(self, step: str, fired_micros: int) -> None:
        """``step`` fired at event time ``fired_micros`` (shards fire in any order: the gauge keeps the latest)."""
        with self._lock:
            if fired_micros > self._fired_micros.get(step, -1):
                self._fired_micros[step] = fired_micros
                self.fired_through.labels(step).set(fired_micros / 1e6)

    def source_status(self, status: dict) -> None:
        """The topic source's latest status (``KafkaStreamService.status``)."""
        with self._lock:
            self._status = status

    def latest_status(self) -> dict:
        with self._lock:
            return self._status


class _SourceCollector(Collector):
    """The topic source's numbers, from its latest status, in Prometheus form."""

    def __init__(self, metrics: JobMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterable:
        status = self._metrics.latest_status()
        read = CounterMetricFamily("pmbeam_events_read", "Messages read from each input topic", labels=["input"])
        dead = CounterMetricFamily("pmbeam_events_dead_lettered", "Messages of each input topic the source "
                                   "dead-lettered (undecodable, invalid, late, duplicate)", labels=["input"])
        lag = GaugeMetricFamily("pmbeam_consumer_lag_messages", "Messages of each input partition not yet read "
                                "(the partition's end at its last fetch minus the next offset)",
                                labels=["input", "partition"])
        for name, numbers in sorted(status.get("inputs", {}).items()):
            read.add_metric([name], numbers["read"])
            dead.add_metric([name], numbers["dead_lettered"])
            for partition, behind in sorted(numbers["consumer_lag"].items()):
                lag.add_metric([name, str(partition)], behind)
        yield from (read, dead, lag)
        watermark, behind = status.get("watermark_micros"), status.get("lag_micros")
        if watermark is not None:
            yield GaugeMetricFamily("pmbeam_watermark_seconds", "The slowest input's watermark (event time, "
                                    "seconds since the Unix epoch)", value=watermark / 1e6)
        if behind is not None:
            yield GaugeMetricFamily("pmbeam_watermark_lag_seconds", "How far the watermark is behind the latest "
                                    "event time read (seconds of event time)", value=behind / 1e6)


class _CollectorPauses(Collector):
    """The time Python's cyclic garbage collector held this process, per generation, since the run began: each
    collection stops every thread of the job, and a full one walks every live object (seconds, with a shard of
    devices held in the process). Measured by a ``gc.callbacks`` entry (``_TimedCollections``)."""

    def __init__(self) -> None:
        self._since = _collections.totals()

    def collect(self) -> Iterable:
        seconds = CounterMetricFamily("pmbeam_gc_pause_seconds", "Time Python's garbage collector held the process "
                                      "(every thread of the job), per generation (2: a full collection)",
                                      labels=["generation"])
        for generation, (total, before) in enumerate(zip(_collections.totals(), self._since, strict=True)):
            seconds.add_metric([str(generation)], total - before)
        yield seconds


class _TimedCollections:
    """The collector's time per generation, over the life of the process (one ``gc.callbacks`` entry)."""

    def __init__(self) -> None:
        self._seconds = [0.0] * 3
        self._started = 0.0
        gc.callbacks.append(self._timed)

    def _timed(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self._seconds[info["generation"]] += time.perf_counter() - self._started

    def totals(self) -> list[float]:
        return list(self._seconds)


_collections = _TimedCollections()
_current = JobMetrics()
_servers: dict[tuple[str, int], object] = {}
_servers_lock = threading.Lock()


def current() -> JobMetrics:
    """The metrics of this process's current run."""
    return _current


def begin_run() -> JobMetrics:
    """A fresh registry for a run starting now, which becomes the current one."""
    global _current
    _current = JobMetrics()
    return _current


class _CurrentRun(Collector):
    """What a server serves: the current run's metrics, whichever run that is when scraped."""

    def collect(self) -> Iterable:
        yield from _current.registry.collect()


def serve(port: int, address: str = "127.0.0.1") -> int:
    """Serve the current run's metrics on ``address:port`` (``/metrics``) for as long as the process lives; once
    per address and port (a later run in the process is served by the same server). The port served (``port``
    0: a free one)."""
    with _servers_lock:
        if port and (address, port) in _servers:
            return port
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_CurrentRun())
        server, _ = start_http_server(port, addr=address, registry=registry)
        served = server.server_address[1]
        _servers[(address, served)] = server
        return served


def outputs_written(sink: str, count: int) -> None:
    """``count`` records written to ``sink``."""
    if count:
        Metrics.counter(OUTPUTS_NAMESPACE, sink).inc(count)
        _current.outputs.labels(sink).inc(count)


def dead_letters_written(by_reason: Mapping[str, int]) -> None:
    """Dead letters written, by reason."""
    for reason, count in by_reason.items():
        Metrics.counter(DEAD_LETTERS_NAMESPACE, reason).inc(count)
        _current.dead_letters.labels(reason).inc(count)


def firing_done(step: str, started: float, fired_micros: int | None, keys: int) -> None:
    """A firing of ``step`` at event time ``fired_micros`` (None: the firing at the end of the input, at no event
    time) that began at ``started`` (``time.perf_counter``) has done its work on ``keys`` keys (devices, groups)."""
    seconds = time.perf_counter() - started
    Metrics.distribution(FIRINGS_NAMESPACE, f"{step}_micros").update(int(seconds * 1e6))
    Metrics.counter(FIRINGS_NAMESPACE, f"{step}_keys").inc(keys)
    _current.firings.labels(step).observe(seconds)
    _current.fired_keys.labels(step).inc(keys)
    if fired_micros is not None:
        _current.fired(step, fired_micros)


def snapshot_written(step: str, seconds: float, size_bytes: int, store_bytes: int | None,
                     release_log_entries: int) -> None:
    """``step`` wrote a snapshot of ``size_bytes`` in ``seconds``; the store now takes ``store_bytes`` (None: not
    measured this time) and holds ``release_log_entries`` of the step's release log."""
    Metrics.distribution(SNAPSHOTS_NAMESPACE, f"{step}_micros").update(int(seconds * 1e6))
    Metrics.distribution(SNAPSHOTS_NAMESPACE, f"{step}_bytes").update(size_bytes)
    _current.snapshots.labels(step).observe(seconds)
    _current.snapshot_bytes.labels(step).set(size_bytes)
    _current.release_log.labels(step).set(release_log_entries)
    if store_bytes is not None:
        _current.store_bytes.set(store_bytes)


def budget_refused(kind: str, count: int) -> None:
    """A privacy budget refused ``count`` times (``kind``: what it refused)."""
    if count:
        Metrics.counter(REFUSALS_NAMESPACE, kind).inc(count)
        _current.refusals.labels(kind).inc(count)
