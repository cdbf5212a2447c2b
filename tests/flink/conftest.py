"""What every test of the Flink path shares: no job of a test is left running on the session's cluster (a test that
failed half-way would otherwise hold its slots, and every later job would wait for them)."""
from __future__ import annotations

import pytest

from pipelines.flink import rest


@pytest.fixture(autouse=True)
def _no_job_left_running(flink_cluster):
    yield
    for job in rest.jobs(flink_cluster.rest):
        if job["state"] not in rest.TERMINAL_STATES:
            rest.cancel(flink_cluster.rest, job["jid"])
            rest.wait_for_state(flink_cluster.rest, job["jid"], rest.TERMINAL_STATES, 60)
