"""The options of Beam's Flink runner that its Python SDK does not declare: checkpoints and savepoints.

Beam's Java ``FlinkPipelineOptions`` reads ``checkpointingInterval``, ``savepointPath`` and
``allowNonRestoredState`` from the pipeline's options, which the Python SDK sends to the Flink job server; but no
Python options class declares them, so the command line (DESIGN.md, "Command-line conventions": an option that
is neither the pipeline's nor Beam's is an error) would refuse them. Declaring them here, as a
``PipelineOptions`` subclass, makes them Beam options like any other (deploy/README.md, "Streaming jobs").
"""
from __future__ import annotations

from apache_beam.options.pipeline_options import PipelineOptions


class FlinkStateOptions(PipelineOptions):
    """Flink's checkpointing and savepoint options, passed through to the Flink job server."""

    @classmethod
    def _add_argparse_args(cls, parser) -> None:
        parser.add_argument("--checkpointing_interval", type=int, default=None,
                            help="Flink: take a checkpoint every this many milliseconds (none without it: a failure "
                            "then restarts the job with empty state)")
        parser.add_argument("--savepoint_path", default=None,
                            help="Flink: start the job from this savepoint (its state and source positions)")
        parser.add_argument("--shutdown_sources_after_idle_ms", type=int, default=None,
                            help="Flink: stop a source once it has been idle this long, so that a job whose inputs "
                            "end finishes (Beam's default with checkpointing: never)")
        parser.add_argument("--allow_non_restored_state", action="store_true", default=False,
                            help="Flink: start from a savepoint that holds state no step of this job takes (a step "
                            "removed on purpose)")
