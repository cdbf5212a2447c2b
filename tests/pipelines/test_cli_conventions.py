"""Every entry point keeps the command-line conventions of DESIGN.md.

* ``--help`` works and exits 0;
* an option that is neither the entry point's own nor one Beam knows is an error (exit 2, one line naming it
  and the closest real option), never silently ignored; Beam's own options pass where a pipeline runs Beam;
* every numeric option declares its domain (``schemas.option_values``), and every value outside it, for every
  option, is exit 2 and one line naming the option, never a traceback.

The entry points and their sub-commands are discovered from their parsers, so a new option or sub-command is
held to the same rules without editing this file.
"""
from __future__ import annotations

import argparse
import importlib
import subprocess
import sys

import pytest

from schemas.option_values import Exact, Integer, Real

ENTRY_POINTS = (
    "pipelines.kanon",
    "pipelines.kanon_privacy",
    "pipelines.kanon_accuracy",
    "pipelines.measurement",
    "pipelines.compare_policies",
    "pipelines.evaluate",
    "pipelines.summary_client",
    "pipelines.aggregate",
    "pipelines.event_level",
    "pipelines.generate",
    "pipelines.demo_report",
    "pipelines.audit",
)
RUNS_BEAM = {"pipelines.kanon", "pipelines.measurement", "pipelines.compare_policies", "pipelines.summary_client",
             "pipelines.aggregate", "pipelines.event_level"}
DOMAINS = (Integer, Real, Exact)


def _commands() -> list[tuple[str, tuple[str, ...], argparse.ArgumentParser]]:
    """(entry point, sub-command words, parser) for every entry point and each of its sub-commands."""
    found = []
    for module in ENTRY_POINTS:
        parser = importlib.import_module(module).build_parser()
        subs = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
        if subs:
            found += [(module, (name,), sub) for name, sub in subs[0].choices.items()]
        else:
            found.append((module, (), parser))
    return found


COMMANDS = _commands()


def _required(parser: argparse.ArgumentParser) -> list[str]:
    """Placeholder values for the required options and positionals: enough to reach the option under test."""
    argv = []
    for action in parser._actions:
        if action.option_strings and action.required:
            argv += [action.option_strings[0], action.type.valid_example() if isinstance(action.type, DOMAINS) else "x"]
        elif not action.option_strings and action.nargs in ("+", None) and not isinstance(action, argparse._SubParsersAction):
            argv.append(action.choices[0] if action.choices else "all")
    return argv


def _numeric_options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [action for action in parser._actions if action.option_strings and isinstance(action.type, DOMAINS)]


def _run(module: str, argv: list[str], capsys) -> tuple[int, str, str]:
    main = importlib.import_module(module).main
    try:
        status = main(argv)
    except SystemExit as exit_:  # argparse's --help
        status = exit_.code
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def _id(command) -> str:
    module, words, _ = command
    return " ".join((module.split(".")[1], *words))


@pytest.mark.parametrize("command", COMMANDS, ids=_id)
def test_help_exits_0(command, capsys):
    module, words, _ = command
    status, out, err = _run(module, [*words, "--help"], capsys)
    assert status == 0 and out.startswith("usage:") and not err


def test_pm_beam_help_lists_every_entry_point():
    printed = subprocess.run([sys.executable, "-m", "pipelines", "--help"], capture_output=True, text=True, check=True).stdout
    for module in ENTRY_POINTS:
        assert module.split(".")[1].replace("_", "-") in printed


@pytest.mark.parametrize("command", COMMANDS, ids=_id)
def test_a_misspelt_option_is_an_error_naming_the_real_one(command, capsys):
    module, words, parser = command
    options = [option for action in parser._actions for option in action.option_strings if option.startswith("--")]
    option = next((option for option in options if "-" in option[2:]), options[-1])
    misspelt = "--" + option[2:].replace("-", "_") if "-" in option[2:] else option[:-1]  # --window_hours, --scal
    status, _, err = _run(module, [*words, *_required(parser), misspelt, "1"], capsys)
    assert status == 2
    assert err.endswith(f"error: unknown option {misspelt} (did you mean {option}?)\n") and err.count("\n") == 1


@pytest.mark.parametrize("command", COMMANDS, ids=_id)
def test_a_stray_argument_is_an_error(command, capsys):
    module, words, parser = command
    status, _, err = _run(module, [*words, *_required(parser), "--seed", "1", "stray"], capsys)
    assert status == 2 and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("module", sorted(RUNS_BEAM))
def test_beam_options_pass_and_a_misspelt_one_names_beams(module, capsys):
    command = next(command for command in COMMANDS if command[0] == module)
    _, words, parser = command
    status, _, err = _run(module, [*words, *_required(parser), "--runner=DirectRunner", "--temp_locaton", "/tmp"], capsys)
    assert status == 2 and err.strip() == "error: unknown option --temp_locaton (did you mean --temp_location?)"


@pytest.mark.parametrize("command", COMMANDS, ids=_id)
def test_every_numeric_option_declares_its_domain(command):
    _, _, parser = command
    undeclared = [
        action.option_strings[0] for action in parser._actions
        if action.option_strings and action.type in (int, float, str)
        or (action.option_strings and action.type is None and isinstance(action.default, (int, float))
            and not isinstance(action.default, bool) and action.nargs != 0)
    ]
    assert not undeclared, f"give these options a domain from schemas.option_values: {undeclared}"


BAD_VALUES = [
    pytest.param(module, words, parser, action.option_strings[0], bad,
                 id=f"{_id((module, words, parser))} {action.option_strings[0]} {bad!r}")
    for module, words, parser in COMMANDS
    for action in _numeric_options(parser)
    for bad in action.type.invalid_examples()
]


@pytest.mark.parametrize("module, words, parser, option, bad", BAD_VALUES)
def test_a_value_outside_the_domain_is_one_line_naming_the_option(module, words, parser, option, bad, capsys):
    status, _, err = _run(module, [*words, *_required(parser), f"{option}={bad}"], capsys)
    assert status == 2
    assert f"error: argument {option}: must be" in err and err.count("\n") == 1 and "Traceback" not in err


def test_there_are_numeric_options_to_check():
    assert len({(module, option) for module, _, _, option, _ in (param.values for param in BAD_VALUES)}) >= 60


@pytest.mark.parametrize("module, argv, dest, value, warning", [
    ("pipelines.kanon", ["--input", "x", "--output", "o", "--input-format", "avro"], "input_format", "avro",
     "warning: --input-format is deprecated and will be removed; use --format"),
    ("pipelines.measurement", ["--impressions", "i", "--conversions", "c", "--output", "o", "--input-format=pb"],
     "input_format", "pb", "warning: --input-format is deprecated and will be removed; use --format"),
    ("pipelines.aggregate", ["--reports", "r", "--output", "o", "--error-threshold", "0.5"], "max_error_fraction", 0.5,
     "warning: --error-threshold is deprecated and will be removed; use --max-error-fraction"),
    ("pipelines.aggregate", ["--reports", "r", "--output", "o", "--output-format", "json"], "output_format", "jsonl",
     "warning: --output-format json is deprecated and will be removed; use jsonl"),
])
def test_an_old_spelling_still_works_with_one_warning(module, argv, dest, value, warning, capsys):
    args, _ = importlib.import_module(module).build_parser().parse_known_args(argv)
    assert getattr(args, dest) == value
    assert capsys.readouterr().err.splitlines() == [warning]


def test_the_new_spelling_warns_nothing(capsys):
    args, _ = importlib.import_module("pipelines.kanon").build_parser().parse_known_args(
        ["--input", "x", "--output", "o", "--format", "jsonl"])
    assert args.input_format == "jsonl" and capsys.readouterr().err == ""


@pytest.mark.parametrize(("flag", "expected"), [
    ([], False), (["--streaming"], True), (["--streaming=true"], True), (["--streaming=True"], True),
    (["--streaming=false"], False),
])
def test_a_flag_also_takes_true_or_false_as_a_template_launcher_passes_it(flag, expected):
    args, rest = importlib.import_module("pipelines.kanon").build_parser().parse_known_args(
        ["--input", "x", "--output", "o", *flag])
    assert args.streaming is expected and rest == []


def test_a_flag_with_another_value_is_one_line_naming_it():
    from pipelines.common import CliError
    with pytest.raises(CliError, match="--debug takes no value, or =true or =false, got 'yes'"):
        importlib.import_module("pipelines.aggregate").build_parser().parse_known_args(
            ["--reports", "r", "--output", "o", "--debug=yes"])
