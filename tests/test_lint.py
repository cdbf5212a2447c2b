"""The linters of ``make lint`` hold on the whole tree: ``ruff check .`` with the rule sets of ``ruff.toml``, and
mypy on ``transforms/`` and ``schemas/`` as ``mypy.ini`` configures it, each run as ``make lint`` runs it. A finding
fails the test with the tool's own report; a tool that is not installed (the ``dev`` extra) skips it with the
reason. The import contracts are ``test_architecture.py``'s."""
from __future__ import annotations

import configparser
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The rule sets issue 15 asked for, besides pycodestyle, pyflakes and isort: ruff.toml may add to them, not drop one.
RULE_SETS = {"E", "F", "W", "I", "B", "UP", "SIM", "C4", "D100", "D104"}


def _run(module: str, *args: str) -> subprocess.CompletedProcess:
    """``python -m module args`` in the project's root (where its configuration is), or a skip if not installed."""
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed: it comes with the dev extra (pip install -e '.[dev]')")
    return subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True, text=True, timeout=900)


def test_ruff_reports_nothing():
    result = _run("ruff", "check", ".")
    assert result.returncode == 0, f"ruff check . found problems:\n{result.stdout}{result.stderr}"


def test_mypy_reports_nothing():
    result = _run("mypy")  # files and options from mypy.ini
    assert result.returncode == 0, f"mypy found problems:\n{result.stdout}{result.stderr}"
    assert result.stdout.startswith("Success: no issues found"), result.stdout + result.stderr


def test_the_rule_sets_stay_selected():
    tomllib = pytest.importorskip("tomllib", reason="reading ruff.toml needs tomllib (Python 3.11)")
    with open(ROOT / "ruff.toml", "rb") as handle:
        lint = tomllib.load(handle)["lint"]
    assert RULE_SETS <= set(lint["select"])
    assert not RULE_SETS & set(lint.get("ignore", [])), "a whole rule set is ignored"


def test_mypy_checks_the_typed_packages_without_blanket_exceptions():
    config = configparser.ConfigParser()
    config.read(ROOT / "mypy.ini")
    assert [name.strip() for name in config["mypy"]["files"].split(",")] == ["transforms", "schemas"]
    for section in config.sections():
        assert config[section].get("ignore_errors", "False") != "True", f"[{section}] ignores every error"
        if section.startswith("mypy-") and section != "mypy-schemas.proto.events_pb2":
            module = section.removeprefix("mypy-")
            assert not module.startswith(("transforms", "schemas")), f"[{section}] loosens a checked package"
