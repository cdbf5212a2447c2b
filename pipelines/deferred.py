"""A run submitted without waiting for it (a Dataflow template launch), released later by ``pm-beam release``.

A Flex Template's launcher runs the pipeline's program with ``--template_location``: the program builds the job,
hands it over (``pipeline.run()`` writes the job file and returns at once) and exits; the launcher submits the job
(Dataflow, "Configure Flex Templates"). The job writes into its staging directory as every run does
(``pipelines.release``), but no driver waits for its end to judge its input and release its outputs. So the
submitting run writes a manifest, ``OUTPUT/submitted.json``: the pipeline's own command-line arguments (never
Beam's, nor ``--kafka-config``, which may hold credentials) and its staging directory. Once the job has finished
(or been drained), ``pm-beam release --output OUTPUT`` runs the same command with the staged results standing in
for a run: the input is judged, the outputs published or not, ``summary.json`` written and the manifest removed,
exactly as a waiting driver does. The job marks its own end: a last step, which waits for every other step's
output (as side inputs), writes ``job-complete.json`` beside its outputs, and a release without it refuses,
touching nothing. Beam's counters stay in the runner's job metrics; every count the summary takes from the outputs
is exact.
"""
from __future__ import annotations

import contextlib
import contextvars
import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import GoogleCloudOptions, PipelineOptions
from apache_beam.pipeline import PipelineVisitor
from apache_beam.transforms.trigger import AccumulationMode, AfterWatermark
from apache_beam.transforms.window import GlobalWindows

MANIFEST = "submitted.json"
COMPLETE = "job-complete.json"  # written by the job's last step, once every other step has finished
COUNTERS_NOTE = ("released by pm-beam release after the job ran elsewhere: Beam's counters are in the runner's job "
                 "metrics (counts read from the outputs are exact; the others are 0 here)")
UNSAVED_OPTIONS = ("--kafka-config",)  # may hold credentials: left out of the manifest (and so of the release)
_RELEASING: contextvars.ContextVar[str | None] = contextvars.ContextVar("releasing", default=None)


class Submitted(Exception):  # noqa: N818 - an outcome, not an error: the job was handed over, not run here
    """The job was handed to the runner and will run without this process; its outputs wait in ``staging``
    (None: the job releases its own outputs, as the Aggregation Service's does)."""

    def __init__(self, output: str, staging: str | None) -> None:
        super().__init__(f"submitted; its outputs wait in {staging or output}")
        self.output, self.staging = output, staging


def submits_only(options: PipelineOptions) -> bool:
    """Whether running the pipeline only hands it over (``--template_location``: a template launch)."""
    return bool(options.view_as(GoogleCloudOptions).template_location)


def releasing() -> str | None:
    """The staging directory whose results stand in for a run (inside ``pm-beam release``), else None."""
    return _RELEASING.get()


@contextlib.contextmanager
def releasing_from(staging: str) -> Iterator[None]:
    """Within: a pipeline's run does not build or run anything; its results are those staged in ``staging``."""
    token = _RELEASING.set(staging)
    try:
        yield
    finally:
        _RELEASING.reset(token)


@dataclass(frozen=True)
class NoMetrics:
    """The result of a run that happened elsewhere: Beam's counters of a finished job are the runner's."""

    def metrics(self) -> NoMetrics:
        return self

    def query(self, _filter=None) -> dict:
        return {"counters": [], "distributions": [], "gauges": [], "string_sets": [], "bounded_tries": []}


class _Leaves(PipelineVisitor):
    """The PCollections no step reads: what a pipeline ends in (its writes' results)."""

    def __init__(self) -> None:
        self.produced: dict[int, beam.PCollection] = {}
        self.read: set[int] = set()

    def visit_transform(self, node) -> None:
        for value in node.outputs.values():
            if isinstance(value, beam.PCollection):
                self.produced[id(value)] = value
        for value in (*node.inputs, *(side.pvalue for side in node.side_inputs)):
            self.read.add(id(value))

    def leaves(self) -> list[beam.PCollection]:
        return [value for key, value in self.produced.items() if key not in self.read]


def mark_completion(pipeline: beam.Pipeline, directory: str) -> None:
    """Adds the job's last step: ``directory/job-complete.json``, written once every PCollection the pipeline
    ends in is complete (each counted, the counts side inputs of the one element that writes the mark). In a
    streaming job that is when it is drained."""
    visitor = _Leaves()
    pipeline.visit(visitor)
    # one pane per leaf, at the end of the global window: the end of the input, or the drain of a streaming job
    # (an explicit trigger: Beam refuses the default one on an unbounded PCollection)
    counts = [leaf | f"Completion/Window{index}" >> beam.WindowInto(
                  GlobalWindows(), trigger=AfterWatermark(), accumulation_mode=AccumulationMode.DISCARDING)
              | f"Completion/Count{index}" >> beam.combiners.Count.Globally()
              for index, leaf in enumerate(visitor.leaves())]
    (pipeline
     | "Completion/Start" >> beam.Create([directory])
     | "Completion/Mark" >> beam.Map(_write_mark, *(beam.pvalue.AsSingleton(count) for count in counts)))


def _write_mark(directory: str, *counts: int) -> None:
    with FileSystems.create(f"{directory.rstrip('/')}/{COMPLETE}") as handle:
        handle.write(json.dumps({"final_steps": len(counts), "elements": sum(counts)}).encode("utf-8") + b"\n")


def is_complete(directory: str) -> bool:
    """Whether the job that writes into ``directory`` has marked its end."""
    return FileSystems.exists(f"{directory.rstrip('/')}/{COMPLETE}")


def remove_mark(directory: str) -> None:
    """Removes ``directory``'s completion mark, if it has one."""
    if is_complete(directory):
        FileSystems.delete([f"{directory.rstrip('/')}/{COMPLETE}"])


def pipeline_arguments(argv: list[str], beam_args: list[str]) -> list[str]:
    """``argv`` without the Beam arguments it ended in (``beam_args``, in order) and without ``UNSAVED_OPTIONS``."""
    rest = list(beam_args)
    kept: list[str] = []
    skip_value = False
    for argument in argv:
        if rest and argument == rest[0]:
            rest.pop(0)
            continue
        if skip_value:
            skip_value = False
            continue
        name = argument.split("=", 1)[0]
        if name in UNSAVED_OPTIONS:
            skip_value = "=" not in argument
            continue
        kept.append(argument)
    return kept


def module_of(function: Callable) -> str:
    """The importable name of ``function``'s module, also when it runs as ``python -m pipelines.NAME`` (where
    its module is ``__main__``)."""
    name = function.__module__
    if name == "__main__":
        spec = getattr(sys.modules["__main__"], "__spec__", None)
        name = spec.name if spec is not None else name
    return name


def write_manifest(submitted: Submitted, module: str, arguments: list[str]) -> str:
    """``OUTPUT/submitted.json`` of a submitted run; returns its path."""
    path = f"{submitted.output.rstrip('/')}/{MANIFEST}"
    staging = None if submitted.staging is None else submitted.staging.rstrip("/").rsplit("/", 1)[-1]
    document = {"module": module, "arguments": arguments, "staging": staging}  # staging: inside the output
    with FileSystems.create(path) as handle:
        handle.write(json.dumps(document, indent=2).encode("utf-8") + b"\n")
    return path


def read_manifest(output: str) -> dict:
    """The manifest of the run submitted into ``output``; ``FileNotFoundError`` when there is none."""
    path = f"{output.rstrip('/')}/{MANIFEST}"
    if not FileSystems.exists(path):
        raise FileNotFoundError(path)
    with FileSystems.open(path) as handle:
        return json.loads(handle.read())


def remove_manifest(output: str) -> None:
    FileSystems.delete([f"{output.rstrip('/')}/{MANIFEST}"])
