"""The architecture's rules, checked: the import contracts of ``.importlinter`` hold (mechanisms are Beam-free,
subject packages are independent, layers point one way), and every subject package is under the contracts."""
from __future__ import annotations

import configparser
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_import_contracts_hold():
    lint_imports = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run(
        [str(lint_imports), "--no-cache", "--config", str(ROOT / ".importlinter")],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BROKEN" not in result.stdout and result.stdout.count("KEPT") == 4


def test_every_subject_package_is_under_the_contracts():
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    independent = set(config["importlinter:contract:subjects"]["modules"].split())
    subjects = {
        f"transforms.{path.name}" for path in (ROOT / "transforms").iterdir()
        if (path / "__init__.py").exists() and path.name != "core"
    }
    assert subjects == independent
    for subject in subjects | {"transforms.core"}:
        package = ROOT / subject.replace(".", "/")
        assert (package / "mechanisms" / "__init__.py").exists(), f"{subject} has no Beam-free mechanisms/ package"
