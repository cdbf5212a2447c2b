"""The ``pm-beam`` console entry point dispatches to every pipeline."""
from __future__ import annotations

import json

from pipelines.__main__ import COMMANDS, main


def test_lists_the_commands(capsys):
    assert main([]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in COMMANDS)


def test_dispatches_with_the_remaining_arguments(capsys):
    assert main(["kanon-privacy", "--epsilon", "3", "--delta", "1e-5", "--json"]) == 0
    described = json.loads(capsys.readouterr().out)
    assert described["stream_epsilon"] == 3.0 and described["noise_epsilon"] == 0.75


def test_unknown_command_is_an_error(capsys):
    assert main(["frobnicate"]) == 2
    assert "unknown command" in capsys.readouterr().err
