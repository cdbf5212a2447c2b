"""``pm-beam flink up|down|status|jobs|stop``: the local Flink cluster of ``make flink-up`` (docs/flink.md).

    pm-beam flink up [--home DIR] [--rest-port 8081] [--slots 2]   fetch what is missing, start the cluster
    pm-beam flink status [--home DIR]                               its processes, addresses and task slots
    pm-beam flink jobs [--home DIR]                                 Flink's jobs, newest first
    pm-beam flink stop JOB [--drain] [--savepoint-dir URL]          stop a streaming job with a savepoint
    pm-beam flink down [--home DIR]                                 stop exactly what `up` started

``JOB`` is a Flink job id or a job name (``--job_name``; the newest job of that name). ``stop`` keeps the job's
state in a savepoint taken while it runs, then cancels it, and prints the savepoint's location: run the same
command again with ``--savepoint_path LOCATION`` to resume it (``pipelines.flink.rest.stop_with_savepoint`` says
why not Flink's own ``stop``). ``--drain`` first lets the watermark run to the end, so every timer fires and the job's files are
written: a drained job is finished and cannot be resumed.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pipelines.flink import rest
from pipelines.flink.artifacts import ArtifactUnavailable
from pipelines.flink.cluster import (
    DEFAULT_REST_PORT,
    DEFAULT_SLOTS,
    ClusterRecord,
    ClusterUnavailable,
    FlinkCluster,
    default_home,
    stop_recorded,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pm-beam flink", description=__doc__.split("\n\n")[0], allow_abbrev=False)
    commands = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, allow_abbrev=False)
        sub.add_argument("--home", type=Path, default=None, help="the cluster's directory: configuration, logs, "
                         "checkpoints and savepoints, cluster.json (default $PM_BEAM_FLINK_HOME, else "
                         "~/.local/state/pm-beam/flink)")
        return sub

    up = command("up", "fetch what is missing and start the cluster (a JobManager, a TaskManager, Beam's job "
                       "server, a Kafka expansion service, a Python SDK worker pool)")
    up.add_argument("--rest-port", type=int, default=DEFAULT_REST_PORT,
                    help=f"Flink's REST API and web UI on 127.0.0.1 (default {DEFAULT_REST_PORT})")
    up.add_argument("--slots", type=int, default=DEFAULT_SLOTS,
                    help=f"task slots of the TaskManager, and the runs' default parallelism (default {DEFAULT_SLOTS})")
    command("status", "the recorded cluster's processes, addresses and task slots")
    command("jobs", "Flink's jobs, newest first")
    stop = command("stop", "stop a streaming job with a savepoint and print its location")
    stop.add_argument("job", help="a Flink job id, or a job name (the newest job of that name)")
    stop.add_argument("--drain", action="store_true", help="first let the watermark run to the end (every timer "
                      "fires, the files are written): the job is finished for good")
    stop.add_argument("--savepoint-dir", default=None, help="where the savepoint goes (default: the cluster's "
                      "state.savepoints.dir)")
    command("down", "stop every process `up` started, by process id (checkpoints and savepoints stay)")
    return parser


def _record(home: Path) -> ClusterRecord:
    record = ClusterRecord.load(home)
    if record is None:
        raise ClusterUnavailable(f"no cluster is recorded in {home}: start one with make flink-up")
    return record


def _up(args: argparse.Namespace, home: Path) -> None:
    print(f"starting Flink in {home} (the first start fetches Flink, Beam's job server and their jars: minutes)",
          flush=True)
    record = FlinkCluster(home, rest_port=args.rest_port, slots=args.slots, tied=False).start()
    print(f"Flink {record.flink_version} with Beam {record.beam_version}'s job server: web UI and REST API at "
          f"http://{record.rest}")
    print(f"  job server {record.job_endpoint}, Kafka expansion service {record.expansion_service}, "
          f"Python worker pool {record.worker_pool}, parallelism {record.parallelism}")
    print(f"  checkpoints {record.checkpoints}, savepoints {record.savepoints}, logs {home / 'log'}")
    print(f"run a pipeline there: pm-beam kanon --input ... --output ... --runner FlinkRunner --flink_master {record.rest}")
    print("stop it: make flink-down")


def _status(home: Path) -> None:
    record = _record(home)
    running = record.running()
    print(f"Flink {record.flink_version}, Beam {record.beam_version}, recorded in {home}")
    for name, pid in record.pids.items():
        print(f"  {name:18} pid {pid:<8} {'running' if running[name] else 'NOT RUNNING'}")
    try:
        overview = rest.overview(record.rest)
        print(f"  REST {record.rest}: {overview['taskmanagers']} task manager(s), {overview['slots-available']} of "
              f"{overview['slots-total']} slots free, {overview['jobs-running']} job(s) running")
    except rest.FlinkRestError as error:
        print(f"  REST {record.rest}: {error}")


def _jobs(home: Path) -> None:
    record = _record(home)
    for job in sorted(rest.jobs(record.rest), key=lambda job: -job["start-time"]):
        print(f"{job['jid']}  {job['state']:10} {job['name']}")


def _stop(args: argparse.Namespace, home: Path) -> None:
    record = _record(home)
    job = args.job
    if not (len(job) == 32 and all(c in "0123456789abcdef" for c in job)):
        found = rest.job_named(record.rest, job)
        if found is None:
            raise ClusterUnavailable(f"Flink at {record.rest} has no job named {job!r} (pm-beam flink jobs lists them)")
        job = found["jid"]
    location = rest.stop_with_savepoint(record.rest, job, args.savepoint_dir, drain=args.drain)
    print(f"stopped {job} with a savepoint{' (drained: finished for good)' if args.drain else ''}: {location}")
    if not args.drain:
        print(f"resume it: the same command with --savepoint_path {location}")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    home = (args.home or default_home()).resolve()
    try:
        if args.command == "up":
            _up(args, home)
        elif args.command == "down":
            stopped = stop_recorded(home)
            print(f"stopped {', '.join(stopped) if stopped else 'nothing (no recorded process was running)'}; "
                  f"checkpoints and savepoints stay in {home / 'state'}")
        elif args.command == "status":
            _status(home)
        elif args.command == "jobs":
            _jobs(home)
        else:
            _stop(args, home)
    except (ClusterUnavailable, ArtifactUnavailable, rest.FlinkRestError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
