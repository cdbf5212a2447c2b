#!/usr/bin/env bash
# Submits a pipeline to the Flink cluster of compose.yaml through Beam's portable runner, and stops and restores
# streaming jobs with savepoints (deploy/flink/README.md). Run it where the project is installed, with the inputs
# and outputs under $PM_BEAM_DATA (the worker pool sees that directory at the same path):
#
#   deploy/flink/submit.sh batch COMMAND OPTIONS...       a batch job: pm-beam COMMAND OPTIONS on Flink
#   deploy/flink/submit.sh stream COMMAND OPTIONS...      a streaming job, checkpointed every minute
#   deploy/flink/submit.sh stop JOB_ID                    stop a streaming job with a savepoint (state kept)
#   deploy/flink/submit.sh restore SAVEPOINT COMMAND OPTIONS...   a streaming job again, from that savepoint
#   deploy/flink/submit.sh jobs                           Flink's jobs, with their ids
#
# COMMAND is a pm-beam command (kanon, measurement, compare-policies, summary-client ara, event-level, aggregate).
# PYTHON (default python) is the interpreter of the project's environment.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
COMPOSE=(docker compose -f "$HERE/compose.yaml")
PYTHON="${PYTHON:-python}"
# compose.yaml's ports: the job server's job and artifact endpoints, the worker pool's port
# as the TaskManager reaches it (the same network namespace)
PORTABLE=(--runner PortableRunner --job_endpoint localhost:8099 --artifact_endpoint localhost:8098
          --environment_type EXTERNAL --environment_config localhost:50000)
# Checkpoints every minute (Beam's Kafka source commits its offsets when one completes), and Kafka's
# cross-language transforms expanded by compose.yaml's expansion service.
STREAMING=(--streaming --checkpointing_interval 60000 --expansion-service localhost:8097)
SAVEPOINTS=file:///flink-state/savepoints  # compose.yaml's state.savepoints.dir

usage() {
  sed -n '2,13s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
  exit 2
}

case "${1:-}" in
  batch)
    shift
    exec "$PYTHON" -m pipelines "$@" "${PORTABLE[@]}"
    ;;
  stream)
    shift
    exec "$PYTHON" -m pipelines "$@" "${PORTABLE[@]}" "${STREAMING[@]}"
    ;;
  stop)
    [[ $# -eq 2 ]] || usage
    # a savepoint taken while the job runs, then the job cancelled (Flink calls this deprecated, but its `stop`
    # without --drain stops Beam 2.62's Kafka source before the savepoint, and that source then sends the end of
    # time: steps may fire their end-of-input timers into the savepoint; docs/flink.md, "Streaming on Flink")
    exec "${COMPOSE[@]}" exec jobmanager flink cancel --withSavepoint "$SAVEPOINTS" "$2"
    ;;
  restore)
    [[ $# -ge 3 ]] || usage
    savepoint="$2"
    shift 2
    exec "$PYTHON" -m pipelines "$@" "${PORTABLE[@]}" "${STREAMING[@]}" --savepoint_path "$savepoint"
    ;;
  jobs)
    exec "${COMPOSE[@]}" exec jobmanager flink list
    ;;
  *)
    usage
    ;;
esac
