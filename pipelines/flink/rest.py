"""Flink's REST API, the few calls the project makes: the cluster's overview and task managers, jobs, their
checkpoints, and stopping a job with a savepoint (Flink 1.19, "REST API" in Flink's operations documentation)."""
from __future__ import annotations

import contextlib
import json
import time
import urllib.error
import urllib.request
from typing import Any

_TIMEOUT_SECONDS = 10
TERMINAL_STATES = ("FINISHED", "CANCELED", "FAILED")


class FlinkRestError(Exception):
    """Flink's REST API refused a call or did not answer: one line."""


def base_url(address: str) -> str:
    """``http://HOST:PORT`` of ``HOST:PORT`` or of an address that already has its scheme."""
    address = address.rstrip("/")
    return address if "://" in address else f"http://{address}"


def call(address: str, path: str, body: dict | None = None, method: str | None = None) -> Any:
    """The JSON answer of ``path`` (``/jobs/overview``) at the REST ``address``; POST when ``body`` is given."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{base_url(address)}{path}", data=data, method=method or ("POST" if data else "GET"),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=_TIMEOUT_SECONDS) as response:
            text = response.read()
    except urllib.error.HTTPError as error:
        detail = error.read().decode(errors="replace")
        with contextlib.suppress(ValueError):
            detail = "; ".join(json.loads(detail).get("errors", [detail]))
        raise FlinkRestError(f"Flink at {address} refused {path}: {error.code} {detail.splitlines()[0][:300]}") from None
    except OSError as error:
        raise FlinkRestError(f"no Flink REST API answers at {address} ({error})") from None
    return json.loads(text) if text else None


def overview(address: str) -> dict:
    """``{"taskmanagers", "slots-total", "slots-available", "jobs-running", ..., "flink-version"}``."""
    return call(address, "/overview")


def jobs(address: str) -> list[dict]:
    """Every job the cluster knows: ``{"jid", "name", "state", "start-time", "end-time", "duration", ...}``."""
    return call(address, "/jobs/overview")["jobs"]


def job(address: str, job_id: str) -> dict:
    return call(address, f"/jobs/{job_id}")


def job_named(address: str, name: str) -> dict | None:
    """The most recently started job called ``name`` (Beam names a Flink job by its ``--job_name``), or None."""
    named = [entry for entry in jobs(address) if entry["name"] == name]
    return max(named, key=lambda entry: entry["start-time"]) if named else None


def checkpoints(address: str, job_id: str) -> dict:
    """The job's checkpoint statistics: ``{"counts": {"completed", "failed", ...}, "latest": {...}, ...}``."""
    return call(address, f"/jobs/{job_id}/checkpoints")


def completed_checkpoints(address: str, job_id: str) -> int:
    return checkpoints(address, job_id)["counts"]["completed"]


def restored_from(address: str, job_id: str) -> dict | None:
    """The checkpoint or savepoint the job last restored its state from (``{"id", "external_path", ...}``)."""
    return (checkpoints(address, job_id).get("latest") or {}).get("restored")


def wait_for_state(address: str, job_id: str, states: tuple[str, ...], seconds: float) -> str:
    """Wait until the job is in one of ``states``; its state. A ``FlinkRestError`` after ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        state = job(address, job_id)["state"]
        if state in states:
            return state
        if time.monotonic() > deadline:
            raise FlinkRestError(f"Flink job {job_id} is {state}, not {' or '.join(states)}, after {seconds:g} s")
        time.sleep(0.2)


def stop_with_savepoint(address: str, job_id: str, directory: str | None, *, drain: bool,
                        seconds: float = 300) -> str:
    """Stop a streaming job with a savepoint and return the savepoint's location.

    With ``drain`` (Flink's ``stop --drain``) the sources first send the watermark to the end of time, so every
    window and timer fires (the job's last outputs) before the savepoint: the job is finished for good.

    Without ``drain`` the savepoint is taken while the job runs and the job is cancelled once it is complete
    (Flink's cancel with savepoint), so that no timer fires early and the job can be resumed from it as if it had
    not stopped. Not Flink's ``stop`` without drain: that stops a source before its savepoint's barrier, and Beam
    2.62's source (``UnboundedSourceWrapper``) sends the end of time when it is stopped, so the steps downstream
    may fire their end-of-input timers before they take their part of the savepoint (measured here: a job resumed
    from it had lost the topic counts of what it read before, its counting step's end having fired). ``directory``
    None uses the cluster's ``state.savepoints.dir``."""
    if drain:
        body: dict[str, Any] = {"drain": True}
        if directory:
            body["targetDirectory"] = directory
        trigger = call(address, f"/jobs/{job_id}/stop", body)["request-id"]
    else:
        body = {"cancel-job": True}
        if directory:
            body["target-directory"] = directory
        trigger = call(address, f"/jobs/{job_id}/savepoints", body)["request-id"]
    deadline = time.monotonic() + seconds
    while True:
        status = call(address, f"/jobs/{job_id}/savepoints/{trigger}")
        if status["status"]["id"] == "COMPLETED":
            operation = status.get("operation") or {}
            if "failure-cause" in operation:
                cause = operation["failure-cause"].get("stack-trace", "").splitlines()
                raise FlinkRestError(f"Flink could not stop job {job_id} with a savepoint: {cause[0] if cause else '?'}")
            return operation["location"]
        if time.monotonic() > deadline:
            raise FlinkRestError(f"Flink's savepoint of job {job_id} took more than {seconds:g} s")
        time.sleep(0.2)


def cancel(address: str, job_id: str) -> None:
    """Cancel a job without a savepoint (its state is dropped)."""
    call(address, f"/jobs/{job_id}?mode=cancel", method="PATCH")
