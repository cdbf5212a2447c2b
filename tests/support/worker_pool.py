"""A Beam SDK worker pool in a process of its own: the ``EXTERNAL`` environment of the portable runner, the same
contract as Flink's Python worker-pool sidecar (deploy/flink/compose.yaml runs this very command)."""
from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from pipelines.processes import free_port, stop_process_group
from tests.support.distribution import WheelEnvironment

WORKER_POOL_COMMAND = ("python", "-m", "apache_beam.runners.worker.worker_pool_main")
PORT_OPTION = "--service_port"
START_SECONDS = 60


def external_options(port: int) -> list[str]:
    """The Beam options of a job whose SDK workers the pool at ``port`` starts (embedded job server)."""
    return ["--runner", "PortableRunner", "--job_endpoint", "embed", "--environment_type", "EXTERNAL",
            "--environment_config", f"localhost:{port}"]


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@contextlib.contextmanager
def worker_pool(environment: WheelEnvironment, cwd: Path, **variables: str) -> Iterator[int]:
    """A worker pool started from ``environment`` in ``cwd`` with the extra environment ``variables`` (what only
    the workers see), on a free port of 127.0.0.1; yields the port, stops the pool by its process id."""
    port = free_port()
    command = [environment.python, *WORKER_POOL_COMMAND[1:], f"{PORT_OPTION}={port}"]
    log = open(cwd / "worker_pool.log", "wb")  # noqa: SIM115 - closed with the pool, below
    process = subprocess.Popen(command, cwd=cwd, env=environment.environment(**variables), stdout=log,
                               stderr=subprocess.STDOUT, start_new_session=True)  # the pool and its workers
    try:
        deadline = time.monotonic() + START_SECONDS
        while not _answers(port):
            assert process.poll() is None, (cwd / "worker_pool.log").read_text()
            assert time.monotonic() < deadline, "the worker pool did not start"
            time.sleep(0.1)
        yield port
    finally:
        stop_process_group(process)
        log.close()
