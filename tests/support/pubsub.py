"""The Pub/Sub emulator for the tests, when this machine has it: the Google Cloud CLI's emulator package (Java), which
cannot be installed from the package registries. Started once per session on 127.0.0.1 and a free port, stopped
by its process id; the clients (``google-cloud-pubsub``, part of the ``test`` extra) find it through
``PUBSUB_EMULATOR_HOST``. Skipped with the reason when the emulator, Java or the client is missing."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipelines.processes import free_port

_START_SECONDS = 60.0
PROJECT = "pm-beam-test"


def emulator_command() -> list[str] | str:
    """The emulator's launcher (``cloud-pubsub-emulator`` of the Google Cloud CLI), or why it cannot run here."""
    if shutil.which("java") is None:
        return "the Pub/Sub emulator needs Java, which is not installed"
    roots = [os.environ.get("CLOUDSDK_ROOT_DIR", ""), "/usr/lib/google-cloud-sdk", "/usr/share/google-cloud-sdk"]
    gcloud = shutil.which("gcloud")
    if gcloud is not None:
        roots.append(str(Path(os.path.realpath(gcloud)).parents[1]))
    for root in filter(None, roots):
        launcher = Path(root) / "platform" / "pubsub-emulator" / "bin" / "cloud-pubsub-emulator"
        if launcher.is_file():
            return [str(launcher)]
    return ("the Pub/Sub emulator is not on this machine (gcloud components install pubsub-emulator, or the "
            "google-cloud-cli-pubsub-emulator package)")


class PubSubEmulator:
    """A running emulator: its ``host`` (HOST:PORT, for ``PUBSUB_EMULATOR_HOST``)."""

    def __init__(self, command: list[str]) -> None:
        self._command = command
        self._folder = tempfile.mkdtemp(prefix="pm-test-pubsub-")
        self._process: subprocess.Popen | None = None
        self.host = ""

    def start(self) -> PubSubEmulator:
        port = free_port()
        self.host = f"127.0.0.1:{port}"
        log = open(os.path.join(self._folder, "emulator.log"), "wb")  # noqa: SIM115 - the child writes it
        self._process = subprocess.Popen([*self._command, "--host=127.0.0.1", f"--port={port}"], stdout=log,
                                         stderr=subprocess.STDOUT, cwd=self._folder, start_new_session=True)
        log.close()
        deadline = time.monotonic() + _START_SECONDS
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"the Pub/Sub emulator exited: {self.log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return self
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"the Pub/Sub emulator did not answer within {_START_SECONDS:.0f} s: {self.log_tail()}")

    def log_tail(self) -> str:
        path = os.path.join(self._folder, "emulator.log")
        return Path(path).read_text(errors="replace")[-2000:] if os.path.exists(path) else ""

    def stop(self) -> None:
        """Stop the emulator (its launcher and the Java process, one process group) by its process id."""
        if self._process is not None and self._process.poll() is None:
            os.killpg(self._process.pid, signal.SIGTERM)
            try:
                self._process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self._process.pid, signal.SIGKILL)
                self._process.wait()
        shutil.rmtree(self._folder, ignore_errors=True)


@pytest.fixture(scope="session")
def pubsub_emulator() -> Iterator[PubSubEmulator]:
    try:
        from google.cloud import pubsub_v1  # noqa: F401
    except ImportError:
        pytest.skip("google-cloud-pubsub is not installed: pip install -e '.[test]'")
    command = emulator_command()
    if isinstance(command, str):
        pytest.skip(command)
    emulator = PubSubEmulator(command).start()
    try:
        yield emulator
    finally:
        emulator.stop()
