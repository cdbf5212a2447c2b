"""``pm-beam release --output DIR``: judge and publish the outputs of a job that was submitted without waiting
for it (a Dataflow template launch), once it has finished or been drained (``pipelines.deferred``).

    python -m pipelines.release_submitted --output DIR

Runs the submitted pipeline's own command again, from the manifest ``DIR/submitted.json``, with the job's staged
results standing in for a run: the same judgement of its input, the same release or refusal, the same
``summary.json`` and exit status (0 released, 1 failed and released nothing); the manifest is then removed.
"""
from __future__ import annotations

import importlib
import sys

from pipelines import common, deferred


def build_parser() -> common.CliParser:
    parser = common.CliParser(
        prog="python -m pipelines.release_submitted",
        description="Judge and publish the outputs of a job submitted as a template (--template_location), once it "
        "has finished: the same judgement, release and summary.json as a run that waits for its job.")
    parser.add_argument("--output", required=True, help="the output directory the submitted job wrote to (local path "
                        f"or a Beam file system URL), where its {deferred.MANIFEST} is")
    return parser


def _require_finished(where: str) -> None:
    """Refuses, touching nothing, a release whose job has not marked its end (``deferred.mark_completion``)."""
    if not deferred.is_complete(where):
        raise common.CliError(f"the job has not finished: {where}/{deferred.COMPLETE} is not there yet; release it "
                              "once it has (Dataflow: gcloud dataflow jobs show JOB_ID, JOB_STATE_DONE, or drained)")


def main(argv: list[str] | None = None) -> int:
    common.configure_logging()
    try:
        output = build_parser().parse_args(argv).output.rstrip("/")
        try:
            manifest = deferred.read_manifest(output)
        except FileNotFoundError:
            raise common.CliError(f"no job was submitted into {output} (no {deferred.MANIFEST}), or it was released "
                                  "already") from None
        staging = output if manifest["staging"] is None else f"{output}/{manifest['staging']}"
        _require_finished(staging)
    except common.InputError as error:
        return common.fail(error)
    module = importlib.import_module(manifest["module"])
    with deferred.releasing_from(staging):
        status = module.main([*manifest["arguments"], "--output", output])
    if status in (0, 1):  # released, or judged and refused: either way the staged results are gone
        deferred.remove_mark(output)  # published with the outputs: it is not one
        deferred.remove_manifest(output)
    return status


if __name__ == "__main__":
    sys.exit(main())
