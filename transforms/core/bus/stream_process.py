"""The local streaming source in a process of its own: ``KafkaStreamProcess``.

``KafkaStreamService`` (``kafka_stream``) consumes the topics, decodes and validates every message, deduplicates
and keeps the watermarks: per message, work of the same order as the pipeline's own, and Python runs one thread
at a time in a process. Started in a child process, it runs on a core of its own while the DirectRunner works in
the driver's; the runner's ``TestStream`` reads it over gRPC exactly as before, through a Unix socket.

The child is a fresh interpreter (``python -m transforms.core.bus.stream_process``, with the driver's import
path: gRPC and the Kafka client do not survive a fork, and multiprocessing's ``spawn`` would run the driver's
main script again), started while the graph is built, so that its imports overlap the driver's. ``ready`` waits
for it to have joined the topics, and raises what made it fail (an unknown topic, a missing extra) for the driver
to report. Control is one request at a time over a socket pair: ``status`` (the progress line and the
metrics), ``stop`` (drain), ``commit`` (after the run is judged), ``outcome`` (whether the whole stream was sent).
The child ignores SIGINT (the driver's handler drains the run) and exits when the driver closes the socket or
dies.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from multiprocessing.connection import Connection
from typing import Any

from transforms.core.bus.kafka_stream import KafkaStreamService, StreamIncomplete, TopicInput
from transforms.core.collector import streaming_collector
from transforms.core.metrics import JobMetrics
from transforms.core.progress import ProgressLine

_START_SECONDS = 120.0  # the child joins the topics within this (imports, metadata, committed offsets)
_METRICS_SECONDS = 1.0  # with metrics, the source's status is asked this often (a scrape sees it this fresh)


def _serve(connection: Connection) -> None:
    """The child: a ``KafkaStreamService`` of the inputs and on the address the driver sends first, answering the
    driver's requests until it closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        inputs, address = connection.recv()
        service = KafkaStreamService(inputs).start(address)
    except ImportError as error:  # a missing extra: the driver names the install command
        connection.send(("failed", ImportError(str(error))))
        return
    except Exception as error:  # noqa: BLE001 - handed to the driver, which reports it in one line
        connection.send(("failed", ValueError(str(error))))  # librdkafka's errors do not survive pickling
        return
    connection.send(("ready", None))
    with contextlib.closing(service), streaming_collector():  # the child's whole life from here is the stream
        while True:
            try:
                request = connection.recv()
            except EOFError:  # the driver is gone
                break
            if request == "close":
                break
            if request == "status":
                connection.send(service.status())
            elif request == "stop":
                service.request_stop()
                connection.send(None)
            elif request == "commit":
                service.commit()
                connection.send(None)
            elif request == "outcome":
                connection.send((service.completed, service.error))


class KafkaStreamProcess:
    """A ``KafkaStreamService`` for ``inputs`` in a child process; the driver's handle on it, with the
    ``endpoint`` ``ReadTopics`` reads. ``progress`` is given the service's status once per its interval while the
    pipeline runs, and ``metrics`` every ``_METRICS_SECONDS`` and once more when the source closes."""

    def __init__(self, inputs: list[TopicInput], progress: ProgressLine | None = None,
                 metrics: JobMetrics | None = None) -> None:
        self.inputs = inputs
        self._progress = progress
        self._metrics = metrics
        self._folder = tempfile.mkdtemp(prefix="pm-beam-stream-")
        self.endpoint = f"unix:{self._folder}/events.sock"
        self._lock = threading.Lock()  # one request and its answer at a time
        self._done = threading.Event()
        self._watcher: threading.Thread | None = None
        self._process: subprocess.Popen | None = None
        self._connection: Connection | None = None

    def start(self) -> KafkaStreamProcess:
        """Start the child; it joins the topics while the driver builds the pipeline."""
        ours, theirs = socket.socketpair()
        path = os.pathsep.join(entry or os.getcwd() for entry in sys.path)
        self._process = subprocess.Popen(
            [sys.executable, "-m", __name__, str(theirs.fileno())], pass_fds=[theirs.fileno()],
            env={**os.environ, "PYTHONPATH": path})
        theirs.close()
        self._connection = Connection(ours.detach())
        self._connection.send((self.inputs, self.endpoint))
        return self

    def _exit_code(self) -> int | None:
        return None if self._process is None else self._process.poll()

    def ready(self) -> None:
        """Wait until the child serves the stream; raise what stopped it (as it was raised there)."""
        assert self._connection is not None, "start() first"
        if not self._connection.poll(_START_SECONDS):
            raise TimeoutError(f"the topic source did not start within {_START_SECONDS:.0f} s")
        try:
            state, error = self._connection.recv()
        except EOFError:
            raise RuntimeError(f"the topic source exited with code {self._exit_code()}") from None
        if state == "failed":
            raise error
        if self._progress is not None or self._metrics is not None:
            self._watcher = threading.Thread(target=self._watch, daemon=True, name="pm-beam-topic-progress")
            self._watcher.start()

    def _request(self, request: str) -> Any:
        assert self._connection is not None, "start() first"
        with self._lock:
            self._connection.send(request)
            return self._connection.recv()

    def _watch(self) -> None:
        progress, metrics = self._progress, self._metrics  # one of them at least (start)
        intervals = ([] if progress is None else [progress.interval]) + ([] if metrics is None else [_METRICS_SECONDS])
        interval = min(intervals)
        while not self._done.wait(interval):
            try:
                status = self._request("status")
            except (EOFError, OSError):  # the child is gone: the run fails on its outcome
                return
            if progress is not None:
                progress(status)  # which prints at most once per its own interval
            if metrics is not None:
                metrics.source_status(status)

    def request_stop(self) -> None:
        """End the stream at the next poll: the pipeline drains what it has and finishes."""
        self._request("stop")

    def commit(self) -> None:
        """Commit the offsets read, for the next run of the same group to start from."""
        self._request("commit")

    def raise_if_incomplete(self) -> None:
        """After the pipeline finished: a ``StreamIncomplete`` unless the whole stream was sent and read."""
        try:
            completed, error = self._request("outcome")
        except (EOFError, OSError):
            completed, error = False, f"the topic source exited with code {self._exit_code()}"
        if not completed:
            raise StreamIncomplete(f"reading the input topics failed: {error or 'the stream did not end'}; "
                                   "nothing was released or committed")

    def close(self) -> None:
        """Stop the child (it closes its consumers) and remove its socket."""
        self._done.set()
        if self._watcher is not None:
            self._watcher.join()
        if self._metrics is not None and self._connection is not None:  # the counts the source ends with
            with contextlib.suppress(EOFError, OSError):
                self._metrics.source_status(self._request("status"))
        if self._connection is not None:
            with contextlib.suppress(OSError):
                self._connection.send("close")
            self._connection.close()
        if self._process is not None:
            try:
                self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        shutil.rmtree(self._folder, ignore_errors=True)


if __name__ == "__main__":
    _serve(Connection(int(sys.argv[1])))
    # everything it opened is closed (consumers, store, socket): the interpreter's teardown of gRPC, librdkafka
    # and the modules took 0.2 s more, which the driver's close waits for (measured); skipped
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
