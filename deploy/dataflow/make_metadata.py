"""Writes the Flex Template metadata of every pipeline, ``deploy/dataflow/templates/NAME.json``, from the pipeline's
own command-line parser, so that a template offers exactly the options the command line takes.

    python deploy/dataflow/make_metadata.py    # after changing an option; tests/deploy checks the files are current

A template is one pipeline (for summary-client, one client) in one variant: ``NAME`` reads files, ``NAME-streaming``
reads topics (an input that is a topic makes the job streaming). Each parameter is one option of the parser,
named as the option without its dashes, because the Flex Template launcher passes every parameter back to the
program as ``--NAME=VALUE`` (a flag as ``--NAME=true`` or ``--NAME=false``, which the command line takes); its
label, help and ``isOptional`` come from the option, and its one validation
regex (a POSIX egrep expression, as the metadata format asks, written so that Python's ``re`` reads it alike) from
the option's argparse type or choices. The options a template leaves out are listed, with the reason, in its
description and in deploy/dataflow/README.md. Format: https://cloud.google.com/dataflow/docs/guides/templates/
configuring-flex-templates ("Metadata parameters").
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pipelines.__main__ import COMMANDS
from pipelines.options.aggregate import filtering_ids
from pipelines.options.measurement import optional_epsilon
from schemas.option_values import POSITIVE_EXACT, Exact, Integer, Real, location

TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"


@dataclass(frozen=True)
class Pattern:
    """A parameter's validation: a regex that POSIX egrep and Python read alike, and one value it accepts."""

    regex: str
    example: str


BEAM_FILE_URL = r"(gs|s3|azfs|hdfs)://.+"  # a path a Dataflow worker can reach: one of Beam's remote file systems
FILES = Pattern(f"^{BEAM_FILE_URL}$", "gs://bucket/path/*")
TOPIC = Pattern(r"^(kafka|pubsub)://.+$", "kafka://broker:9092/topic")
HOST_PORT = Pattern(r"^[^:]+:[0-9]+$", "expansion-service:8097")
KEY_VALUE = Pattern(r"^[^=]+=.*$", "security.protocol=SSL")
SECRET = Pattern(rf"^(env:[A-Za-z_][A-Za-z0-9_]*|{BEAM_FILE_URL})$", "env:PM_BEAM_PRIVATE_KEYS")  # transforms.core.secrets
POSTGRES = Pattern(r"^postgresql://.+$", "postgresql://ledger@10.0.0.5/privacy_budget")
INTEGER_LIST = Pattern(r"^[0-9]+(,[0-9]+)*$", "0,1")
TEXT = Pattern(r"^.+$", "text")
# the options whose values are plain strings, by their metavar
BY_METAVAR = {"URI": TOPIC, "HOST:PORT": HOST_PORT, "KEY=VALUE": KEY_VALUE, "LOCATION": SECRET}
DECIMAL = r"([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?"  # what float() and schemas.option_values.Exact read

BOOLEAN = Pattern("^(true|false)$", "true")  # a flag, which the command line also takes as --FLAG=true|false
# add_run_options' options that only the local runner reads (DESIGN.md; docs/durability.md): Dataflow keeps a
# streaming job's state itself, and a Flex Template launch does not wait for the job it submits
LOCAL_RUNNER_ONLY = {
    "--state-store": "the local runner's state store, as Dataflow keeps the state itself",
    "--snapshot-seconds": "how often the local runner snapshots that state",
    "--job-id": "the job whose state --state-store restores, as a Dataflow job goes on by --update",
    "--progress-seconds": "progress lines of a process that waits for the run, which a launch does not",
    "--metrics-port": "the local runner's Prometheus endpoint, as Dataflow's job page shows the Beam metrics",
}


@dataclass(frozen=True)
class Pipeline:
    """A pipeline that has templates: its ``pm-beam`` command (with the summary-client's client), the options
    naming its inputs (files in batch, topics when streaming), whether it has a streaming variant, the options
    left out (with the reason) and the options Dataflow needs although the command line has a default."""

    command: tuple[str, ...]
    inputs: tuple[str, ...]
    streaming: bool
    left_out: Mapping[str, str] = field(default_factory=dict)
    required: Mapping[str, Pattern] = field(default_factory=dict)

    def parser(self) -> argparse.ArgumentParser:
        """The parser ``pm-beam COMMAND`` reads its options with (the client's, for summary-client)."""
        parser = importlib.import_module(COMMANDS[self.command[0]][0]).build_parser()
        for client in self.command[1:]:
            parser = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction)
                          ).choices[client]
        return parser


PIPELINES = (
    Pipeline(("kanon",), ("--input",), True, LOCAL_RUNNER_ONLY),
    Pipeline(("measurement",), ("--impressions", "--conversions"), True, LOCAL_RUNNER_ONLY),
    Pipeline(("summary-client", "ara"), ("--sources", "--triggers"), True, LOCAL_RUNNER_ONLY),
    Pipeline(("summary-client", "paa"), ("--events",), True, LOCAL_RUNNER_ONLY),
    Pipeline(("event-level",), ("--sources", "--triggers"), True, LOCAL_RUNNER_ONLY),
    # a budget charged to a ledger on a worker's disk would be lost with the worker: a PostgreSQL ledger, and a job
    # id, so that a launch retried after a failure is not charged twice (deploy/README.md)
    # --local-test releases without privacy (the service's Local Testing Tool): a local tool, never a launched job
    # registration logs are files, replayed in batch
    Pipeline(("registrations",), ("--registrations",), False, {
        **LOCAL_RUNNER_ONLY,
        "--streaming": "batch only: registration logs are files",
        "--allowed-lateness-seconds": "batch only: registration logs are files",
        "--output-topic": "the reports are files (event-level JSON Lines, aggregatable Avro)",
    }),
    Pipeline(("aggregate",), ("--reports", "--domain"), False,
             {"--local-test": "a local testing mode in which nothing is private, never a production job"},
             required={"--ledger": POSTGRES, "--job-id": TEXT}),
)
# The Beam pipelines with no template, and why (tests/deploy checks that every other one has templates).
NOT_TEMPLATED = {
    "compare-policies": "runs one job per policy, then compares their outputs in the submitting process; a Flex "
    "Template launch submits one job and does not wait for it (run the measurement template once per policy)",
}


@dataclass(frozen=True)
class Template:
    """One template: a pipeline in its batch or its streaming variant."""

    pipeline: Pipeline
    streaming: bool

    @property
    def name(self) -> str:
        return "-".join(self.pipeline.command) + ("-streaming" if self.streaming else "")

    @property
    def path(self) -> Path:
        return TEMPLATE_DIR / f"{self.name}.json"


TEMPLATES = tuple(Template(pipeline, streaming) for pipeline in PIPELINES
                  for streaming in ((False, True) if pipeline.streaming else (False,)))


def option_of(action: argparse.Action) -> str:
    """The option's long spelling (``--max-error-fraction``)."""
    return next(option for option in action.option_strings if option.startswith("--"))


def parameter_name(option: str) -> str:
    """The template parameter of an option: the launcher passes it back as ``--NAME=VALUE``."""
    return option.removeprefix("--")


def options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The parser's options, in their order, without ``--help``."""
    return [action for action in parser._actions if action.option_strings and not isinstance(action, argparse._HelpAction)]


def left_out(template: Template, action: argparse.Action) -> str | None:
    """Why the template does not offer the option, or None when it does."""
    return template.pipeline.left_out.get(option_of(action))


def number_pattern(kind: Integer | Real | Exact, *words: str) -> Pattern:
    """Digits, a decimal, or (``Exact``) a decimal or a ratio; signed only when the domain has negative numbers;
    or one of ``words``. The bounds themselves are the command line's to check."""
    if isinstance(kind, Integer):
        digits = "[1-9][0-9]*" if kind.low >= 1 else "(0|[1-9][0-9]*)"
        return Pattern(f"^{'' if kind.low >= 0 else '-?'}{digits}$", kind.valid_example())
    sign = "" if kind.low is not None and kind.low >= 0 else "[-+]?"
    ratio = f"|{sign}[0-9]+/[0-9]+" if isinstance(kind, Exact) else ""
    return Pattern(f"^({sign}{DECIMAL}{ratio}{''.join('|' + word for word in words)})$", kind.valid_example())


def choices_pattern(choices: tuple[str, ...]) -> Pattern:
    """One of the choices, each a plain word (no regex syntax to escape)."""
    assert all(choice.replace("-", "").replace("_", "").isalnum() for choice in choices), choices
    return Pattern(f"^({'|'.join(choices)})$", choices[0])


def pattern(template: Template, action: argparse.Action) -> Pattern:
    """The validation of an option in a template: Dataflow's needs first, then the option's inputs and output,
    choices, numeric type, or metavar."""
    option = option_of(action)
    if option in template.pipeline.required:
        return template.pipeline.required[option]
    if option in template.pipeline.inputs:
        return TOPIC if template.streaming else FILES
    if option == "--output":
        return FILES
    if isinstance(action, argparse._StoreTrueAction):
        return BOOLEAN
    if action.choices:
        return choices_pattern(tuple(action.choices))
    if isinstance(action.type, Integer | Real | Exact):
        return number_pattern(action.type)
    if action.type is filtering_ids:
        return INTEGER_LIST
    if action.type is optional_epsilon:
        return number_pattern(POSITIVE_EXACT, "none")
    if action.type is None or action.type is location:  # location: a path made absolute, else as given
        return BY_METAVAR.get(str(action.metavar), TEXT)
    raise ValueError(f"{option}: no validation regex for its type {action.type!r}: add one to {__file__}")


def parameter(template: Template, action: argparse.Action) -> dict:
    option = option_of(action)
    return {
        "name": parameter_name(option),
        "label": parameter_name(option).replace("-", " ").capitalize(),
        "helpText": action.help,
        "isOptional": not (action.required or option in template.pipeline.required),
        "regexes": [pattern(template, action).regex],
    }


def metadata(template: Template) -> dict:
    """The template's metadata file, as a dict."""
    parser = template.pipeline.parser()
    reasons = {option_of(action): reason for action in options(parser) if (reason := left_out(template, action))}
    by_reason: dict[str, list[str]] = {}
    for option, reason in reasons.items():
        by_reason.setdefault(reason, []).append(option)
    left = "; ".join(f"{', '.join(options_left)}: {reason}" for reason, options_left in by_reason.items())
    return {
        "name": f"pm-beam {' '.join(template.pipeline.command)}" + (" (streaming)" if template.streaming else ""),
        "description": f"{parser.description} Options not offered here: {left}." if left else parser.description,
        "streaming": template.streaming,
        "parameters": [parameter(template, action) for action in options(parser) if option_of(action) not in reasons],
    }


def render(template: Template) -> str:
    """The file's text: sorted keys, two-space indent, a final newline."""
    return json.dumps(metadata(template), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main() -> int:
    """Writes every template's metadata and removes the files of templates that no longer exist."""
    TEMPLATE_DIR.mkdir(exist_ok=True)
    for template in TEMPLATES:
        template.path.write_text(render(template), encoding="utf-8")
    current = {template.path for template in TEMPLATES}
    for stale in set(TEMPLATE_DIR.glob("*.json")) - current:
        stale.unlink()
    print(f"wrote {len(current)} templates into {TEMPLATE_DIR}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
