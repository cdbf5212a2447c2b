"""What every pipeline entry point shares: errors, Beam options, input checks, counters and summary.json."""
from __future__ import annotations

import argparse
import difflib
import functools
import glob
import importlib
import json
import logging
import os
import shutil
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator

import fastavro
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions, _BeamArgumentParser

from pipelines import deferred
from pipelines.flink import defaults as flink_defaults
from pipelines.options.flink import FlinkStateOptions
from pipelines.runners import RunnerUnavailable, check_runner
from schemas.codecs import format_of
from transforms.core.io import INPUT_FILES, InputError, require_input


class RunFailure(Exception):
    """A run that could not finish, for a reason outside its input (a broker went away): one line, exit status 1."""


class CliError(InputError):
    """A bad option or unreadable input: reported as one line, exit status 2."""


class CliParser(argparse.ArgumentParser):
    """The parser of every entry point (DESIGN.md, "Command-line conventions").

    Errors become a ``CliError``, so ``main`` reports them in one line and returns 2. Options are never
    abbreviated (``--epsil`` is not ``--epsilon``). A flag also takes ``=true`` or ``=false``. An argument that is
    neither the parser's own option nor, with ``beam_options``, one that Beam knows is an error naming it and the
    closest real option: a mistyped option must never be silently ignored. ``parse_known_args`` returns the Beam
    options; ``parse_args`` accepts none. An old spelling registered with ``add_alias`` still works for one
    release, with one warning on stderr."""

    def __init__(self, *args, beam_options: bool = False, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        if beam_options:
            kwargs.setdefault("epilog", "Beam's own options (--runner, --project, --temp_location, ...) are passed "
                              "to Beam; any other option is an error.")
        super().__init__(*args, **kwargs)
        self.beam_options = beam_options

    def add_alias(self, old: str, new: str) -> None:
        """``old`` (a deprecated spelling) is read as the option ``new``."""
        add_alias(self, old, new)

    @property
    def aliases(self) -> dict[str, str]:
        """Deprecated spelling -> option, of every option of this parser and its groups."""
        return {old: action.option_strings[0] for action in self._actions
                for old in getattr(action, "deprecated_aliases", ())}

    def error(self, message: str):
        raise CliError(message)

    def _renamed(self, args: list[str], aliases: dict[str, str]) -> list[str]:
        renamed = []
        for argument in args:
            name, equals, value = argument.partition("=")
            if name in aliases:
                print(f"warning: {name} is deprecated and will be removed; use {aliases[name]}", file=sys.stderr)
                argument = aliases[name] + equals + value
            renamed.append(argument)
        return renamed

    def _flag_values(self, args: list[str]) -> list[str]:
        """``--flag=true`` is ``--flag`` and ``--flag=false`` its absence (a Flex Template passes every parameter,
        a flag too, as ``--NAME=VALUE``: deploy/dataflow/README.md)."""
        flags = {option for action in self._actions if isinstance(action, argparse._StoreTrueAction)
                 for option in action.option_strings}
        given = []
        for argument in args:
            name, equals, value = argument.partition("=")
            if equals and name in flags:
                if value.lower() not in ("true", "false"):
                    self.error(f"{name} takes no value, or =true or =false, got {value!r}")
                if value.lower() == "true":
                    given.append(name)
                continue
            given.append(argument)
        return given

    def parse_known_args(self, args=None, namespace=None):
        args = self._flag_values(sys.argv[1:] if args is None else list(args))
        aliases = self.aliases
        parsed, rest = super().parse_known_args(self._renamed(args, aliases) if aliases else args, namespace)
        unknown = unknown_arguments(rest) if self.beam_options else rest
        if unknown:
            self.error(unknown_argument_message(unknown, self))
        return parsed, rest


def run_imported(module: str) -> None:
    """``python -m pipelines.<job>``: exit with the ``main`` of ``module`` imported under its own name rather than
    the copy running as ``__main__``. The streaming DirectRunner pickles every DoFn again for every bundle, and
    dill pickles what ``__main__`` defines (a job's lambdas: a record's key, its id) by value: run as ``__main__``,
    a live k-anonymity job with ``--output-topic`` grew 6 to 9 MB a minute; imported, 0.4 (benchmarks/README.md,
    "Running for weeks")."""
    sys.exit(importlib.import_module(module).main())


def add_alias(container: argparse._ActionsContainer, old: str, new: str) -> None:
    """On a ``CliParser`` or one of its groups: ``old``, a deprecated spelling, is read as the option ``new``
    (for one release; each use prints one warning)."""
    action = container._option_string_actions[new]
    action.deprecated_aliases = (*getattr(action, "deprecated_aliases", ()), old)


@functools.lru_cache(maxsize=1)
def _beam_parser() -> argparse.ArgumentParser:
    """A parser of every option Beam's own option classes declare (as ``PipelineOptions.get_all_options`` builds
    it), so what Beam knows is read from Beam, not from a list of ours."""
    parser = _BeamArgumentParser(allow_abbrev=False, add_help=False)
    # Beam's own classes, and ours for the options of Beam's Flink runner its Python SDK does not declare
    classes = {str(cls): cls for cls in {*PipelineOptions.__subclasses__(), FlinkStateOptions}}
    for cls in classes.values():
        cls._add_argparse_args(parser)  # noqa: SLF001 (Beam's own way of collecting its options)
    return parser


def unknown_arguments(beam_args: list[str]) -> list[str]:
    """The arguments of ``beam_args`` that Beam does not know."""
    _, unknown = _beam_parser().parse_known_args(beam_args)
    return unknown


def _option_strings(parser: argparse.ArgumentParser) -> list[str]:
    return [option for action in parser._actions for option in action.option_strings if option.startswith("--")]


def unknown_argument_message(unknown: list[str], parser: argparse.ArgumentParser) -> str:
    """``unknown option --window_hours (did you mean --window-hours?)``: the first unknown argument, and the
    closest option of the pipeline or (when it takes them) of Beam."""
    first = next((argument for argument in unknown if argument.startswith("-")), unknown[0])
    if not first.startswith("-"):
        return f"unexpected argument {first!r}"
    name = first.split("=", 1)[0]
    known = _option_strings(parser)
    if getattr(parser, "beam_options", False):
        known += _option_strings(_beam_parser())

    def normal(option: str) -> str:
        return option.lstrip("-").replace("_", "-").lower()

    by_normal = {normal(option): option for option in reversed(known)}  # the entry point's own win a tie
    key = normal(name)
    closest = [key] if key in by_normal else difflib.get_close_matches(key, by_normal, n=1)
    hint = f" (did you mean {by_normal[closest[0]]}?)" if closest else ""
    return f"unknown option {name}{hint}"


def configure_logging() -> None:
    """Importing Beam configures the root logger; take it back (DESIGN.md, Beam facts)."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s", force=True)
    logging.getLogger("pmbeam").setLevel(logging.INFO)  # the project's own progress lines


def pipeline_options(beam_args: list[str], *, streaming: bool, name: str = "job") -> PipelineOptions:
    """Beam's own options as given, with a local default runner that needs no download.

    Batch defaults to the in-process ``FnApiRunner`` (the DirectRunner would
    first try to fetch the Prism runner); streaming defaults to the
    DirectRunner, whose streaming mode supports event-time timers. A run on Flink takes what it leaves out from
    the cluster ``make flink-up`` recorded (``pipelines.flink.defaults``; ``name``, the pipeline's, names its
    job). A runner that cannot start from here is a ``CliError`` (``pipelines.runners.check_runner``).
    """
    options = PipelineOptions(beam_args)
    standard = options.view_as(StandardOptions)
    if streaming:
        standard.streaming = True
    if standard.runner is None:
        standard.runner = "DirectRunner" if standard.streaming else "FnApiRunner"
    flink_defaults.complete(options, name)
    try:
        check_runner(options)
    except RunnerUnavailable as error:
        raise CliError(str(error)) from None
    return options


DIAGNOSTICS = ("dead_letters", INPUT_FILES)  # what every run writes besides its outputs, and keeps when it fails


def prepare_output(output_dir: str, prefixes: Iterable[str]) -> None:
    """Create a local output directory and remove what a previous run left: the shards under ``prefixes`` and
    the diagnostics, and any staging directory (``pipelines.release``) of a run that died.

    Remote directories (gs://, s3://) need no creation and are left as they are; so is the directory of a run
    being released (``pm-beam release``: its job wrote there, and its staging directory waits there).
    """
    if "://" in output_dir or deferred.releasing() is not None:
        return
    try:
        os.makedirs(output_dir, exist_ok=True)
    except OSError as error:
        raise CliError(f"cannot create output directory {output_dir!r}: {error.strerror}") from None
    for prefix in (*prefixes, *DIAGNOSTICS):
        for path in glob.glob(os.path.join(output_dir, f"{prefix}-*-of-*")):
            os.remove(path)
    for path in glob.glob(os.path.join(output_dir, ".staging-*")):
        shutil.rmtree(path, ignore_errors=True)


def read_records(path: str) -> Iterator[dict]:
    """The records of one output shard written by ``WriteRecords`` (JSON Lines or Avro)."""
    with FileSystems.open(path) as handle:
        if path.endswith(".avro"):
            yield from fastavro.reader(handle)
        else:
            for line in handle:
                if line.strip():
                    yield json.loads(line)


def counters(result, namespace: str) -> dict[str, int]:
    """Committed counter values of ``namespace`` (attempted where the runner does not commit)."""
    values: dict[str, int] = {}
    for counter in result.metrics().query(MetricsFilter().with_namespace(namespace))["counters"]:
        value = counter.committed if counter.committed is not None else counter.attempted
        values[counter.key.metric.name] = values.get(counter.key.metric.name, 0) + int(value or 0)
    return values


def distribution_max(result, namespace: str, name: str) -> int | None:
    """The maximum of a Beam distribution metric, or None when nothing was recorded."""
    found = result.metrics().query(MetricsFilter().with_namespace(namespace).with_name(name))["distributions"]
    values = [d.committed if d.committed is not None else d.attempted for d in found]
    maxima = [v.max for v in values if v is not None and v.count]
    return max(maxima) if maxima else None


def output_files(output_dir: str, prefix: str) -> list[str]:
    """The shards ``<output_dir>/<prefix>-*`` a run wrote, sorted."""
    matches = FileSystems.match([f"{output_dir.rstrip('/')}/{prefix}-*"])[0].metadata_list
    return sorted(m.path for m in matches)


def output_records(output_dir: str, prefix: str) -> Iterator[dict]:
    """The records of every shard ``<output_dir>/<prefix>-*`` a run wrote."""
    for path in output_files(output_dir, prefix):
        yield from read_records(path)


def count_records(output_dir: str, prefix: str) -> int:
    """How many records the shards ``<output_dir>/<prefix>-*`` hold, without decoding them: the non-empty lines of
    JSON Lines, the block counts of Avro."""
    count = 0
    for path in output_files(output_dir, prefix):
        with FileSystems.open(path) as handle:
            if path.endswith(".avro"):
                count += sum(block.num_records for block in fastavro.block_reader(handle))
            else:
                count += sum(1 for line in handle if line.strip())
    return count


def diagnostic_files(output_dir: str) -> dict[str, list[str]]:
    """The summary's ``outputs`` entries of the diagnostics: dead letters and the input report."""
    return {prefix: output_files(output_dir, prefix) for prefix in DIAGNOSTICS}


def dead_letters_by_reason(output_dir: str) -> dict[str, int]:
    """How many dead letters a run wrote under ``output_dir``, per reason, sorted by reason."""
    return dict(sorted(Counter(letter["reason"] for letter in output_records(output_dir, "dead_letters")).items()))


STREAMING_COUNTERS_NOTE = "Beam counters under-report on the streaming DirectRunner; file-based counts are exact."


def input_counts(files: list[dict], dead_by_reason: dict[str, int]) -> dict:
    """The summary's input counts, from what a run wrote (exact on every runner): its input files' reports
    (``input_files-*``: records read and parsed) and its dead letters per reason."""
    return {
        "input_files": len(files),
        "read": sum(report["read"] for report in files),
        "parsed": sum(report["parsed"] for report in files),
        "dead_lettered": sum(dead_by_reason.values()),
        "dead_lettered_by_reason": dead_by_reason,
    }


def write_summary(output_dir: str, summary: dict) -> str:
    """Writes ``<output_dir>/summary.json`` and returns its path."""
    path = f"{output_dir.rstrip('/')}/summary.json"
    with FileSystems.create(path) as handle:
        handle.write(json.dumps(summary, indent=2, sort_keys=True).encode("utf-8") + b"\n")
    return path


def fail(error: Exception) -> int:
    """Print one line for a CliError and return the exit status."""
    print(f"error: {error}", file=sys.stderr)
    return 2


def print_lines(lines: Iterable[str]) -> None:
    for line in lines:
        print(line)


def output_lines(summary: dict) -> list[str]:
    """The closing lines of a report: the time taken, then every output path of the summary, one a line."""
    lines = [f"took {summary['elapsed_seconds']:.1f} s", "outputs:"]
    for paths in summary["outputs"].values():
        lines += [f"  {path}" for path in ([paths] if isinstance(paths, str) else paths)]
    return lines


def dead_letters_text(counts: dict) -> str:
    """``dead letters N (reason n, ...)`` from a summary's counts."""
    reasons = ", ".join(f"{reason} {count}" for reason, count in counts["dead_lettered_by_reason"].items()) or "none"
    return f"dead letters {counts['dead_lettered']} ({reasons})"


def input_files(patterns: Iterable[str], input_format: str | None) -> list[str]:
    """Every file the patterns match, each with a format we can tell; a CliError otherwise."""
    files = [path for pattern in patterns for path in require_input(pattern)]
    for path in files:
        try:
            format_of(path, input_format)
        except ValueError as error:
            raise CliError(str(error)) from None
    return files


def failure_lines(summary: dict) -> list[str]:
    """What a failed run prints: what it read, and where its dead letters and summary are."""
    counts = summary["counts"]
    return [f"FAILED: {summary['failure']}", f"read {counts['read']}, {dead_letters_text(counts)}",
            *output_lines(summary)]


def cli_main(argv: list[str] | None, parse_job: Callable, run: Callable, report_lines: Callable) -> int:
    """A pipeline's ``main``: parse, run, print the report. A CliError is one line and exit status 2; a run that
    failed (``status`` not ``ok``: its input, or its budget) prints what it read, one ``error:`` line on stderr,
    and exits 1, having released nothing."""
    configure_logging()
    argv = sys.argv[1:] if argv is None else list(argv)
    beam_args: list[str] = []
    try:
        job, beam_args = parse_job(argv)
        summary = run(job, beam_args)
    except deferred.Submitted as submitted:  # a template launch: the runner runs the job, released later
        manifest = deferred.write_manifest(submitted, deferred.module_of(parse_job),
                                           deferred.pipeline_arguments(argv, beam_args))
        print_lines([str(submitted), f"once the job has finished: pm-beam release --output {submitted.output} "
                     f"(manifest {manifest})"])
        return 0
    except InputError as error:
        return fail(error)
    except RunFailure as error:  # the run could not finish (a topic source or sink failed): nothing was released
        print(f"error: {error}", file=sys.stderr)
        return 1
    if summary.get("status") == "suspended":  # a streaming job on Flink stopped with a savepoint, to be resumed
        savepoint = summary["savepoint"]
        print_lines(["the job stopped without draining: nothing is final and nothing was released",
                     f"resume it: the same command with --savepoint_path {savepoint}" if savepoint else
                     "it left no savepoint: its state is gone (run it again as a new job)"])
        return 0
    if summary.get("status", "ok") != "ok":
        print_lines(failure_lines(summary))
        print(f"error: {summary['failure']}", file=sys.stderr)
        return 1
    print_lines(report_lines(job, summary))
    return 0
