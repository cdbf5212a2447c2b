"""What the deploy/ tests share: the recipes' paths, their Python files loaded by path (deploy/ is not a package),
and their shell scripts run against stand-ins for the commands they call (gcloud, docker, python), which record
each call instead of reaching a cloud or a daemon."""
from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from pipelines.__main__ import COMMANDS

ROOT = Path(__file__).resolve().parents[2]
DATAFLOW = ROOT / "deploy" / "dataflow"
FLINK = ROOT / "deploy" / "flink"
FIELD = "\x1f"  # separates a recorded call's arguments (a stand-in writes one call per line)


def load(path: Path) -> ModuleType:
    """The Python file at ``path`` as a module named after it (registered, as dataclasses need)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


def bash_syntax_error(script: Path) -> str:
    """What ``bash -n`` reports for ``script`` (empty when it parses)."""
    return subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, timeout=30).stderr


def run_recorded(script: Path, arguments: list[str], tmp_path: Path, commands: tuple[str, ...],
                 **environment: str) -> tuple[subprocess.CompletedProcess, list[list[str]]]:
    """``bash script arguments`` with ``commands`` replaced by stand-ins that record their calls: the finished
    process and every call, as ``[command, argument, ...]``, in order."""
    stand_ins = tmp_path / "bin"
    stand_ins.mkdir(exist_ok=True)
    log = tmp_path / "calls"
    log.touch()
    for command in commands:
        stand_in = stand_ins / command
        stand_in.write_text(f"#!/bin/sh\nprintf '%s{FIELD}' \"{command}\" \"$@\" >> '{log}'\nprintf '\\n' >> '{log}'\n")
        stand_in.chmod(0o755)
    variables = {**os.environ, "PATH": f"{stand_ins}{os.pathsep}{os.environ['PATH']}", **environment}
    done = subprocess.run(["bash", str(script), *arguments], capture_output=True, text=True, timeout=30, env=variables)
    calls = [line.rstrip(FIELD).split(FIELD) for line in log.read_text().splitlines()]
    return done, calls


def beam_pipelines() -> set[str]:
    """The ``pm-beam`` commands that are Beam pipelines: those whose parser passes Beam's options on."""
    pipelines = set()
    for command, (module, _) in COMMANDS.items():
        build_parser = getattr(importlib.import_module(module), "build_parser", None)
        if build_parser is not None and getattr(build_parser(), "beam_options", False):
            pipelines.add(command)
    return pipelines
