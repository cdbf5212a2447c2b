"""The distribution as a user installs it: the sdist and wheel that ``python -m build`` makes, and a virtual
environment holding only the wheel (tests/deploy/; deploy/README.md).

The environment is made for the test, away from the source tree: no project directory on ``sys.path``, another
working directory, no ``PYTHONPATH``. Installing the third-party dependencies again from the registries would cost
minutes per run, so they come from the test's own environment: one ``.pth`` line adds its ``site-packages``, whose
own ``.pth`` files (the editable install of this project among them) a plain path line does not process. Every
module and data file of the project is the wheel's.
"""
from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("pipelines", "transforms", "schemas", "synthetic", "evaluation")
DATA_SUFFIXES = (".py", ".pyi", ".avsc", ".proto", ".json", ".csv")  # what a package may read at run time


@dataclass(frozen=True)
class WheelEnvironment:
    """A virtual environment with the project installed from its wheel only."""

    root: Path

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def python(self) -> str:
        return str(self.bin / "python")

    def environment(self, **extra: str) -> dict[str, str]:
        """The process environment of a command run there: its ``bin`` first on ``PATH`` (Beam's worker pool
        starts its workers as ``python``), no ``PYTHONPATH``."""
        environment = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
        environment["PATH"] = f"{self.bin}{os.pathsep}{environment.get('PATH', '')}"
        return {**environment, **extra}

    def run(self, arguments: list[str], cwd: Path, timeout: float = 300, **extra: str) -> subprocess.CompletedProcess:
        """``arguments`` (``python`` meaning this environment's) in ``cwd``, output captured as text."""
        command = [self.python if arguments[0] == "python" else arguments[0], *arguments[1:]]
        return subprocess.run(command, cwd=cwd, env=self.environment(**extra), capture_output=True, text=True,
                              timeout=timeout)


def packaged_files() -> set[str]:
    """Every module and data file of the project's packages, as paths relative to the project root."""
    return {str(path.relative_to(ROOT)) for package in PACKAGES for path in (ROOT / package).rglob("*")
            if path.suffix in DATA_SUFFIXES and "__pycache__" not in path.parts}


def build_distribution(out: Path) -> tuple[Path, Path]:
    """``python -m build`` of the project into ``out`` (the sdist, then the wheel built from the sdist), with
    the setuptools of this environment; returns (sdist, wheel)."""
    result = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (sdist,), (wheel,) = sorted(out.glob("*.tar.gz")), sorted(out.glob("*.whl"))
    return sdist, wheel


def make_wheel_environment(wheel: Path, root: Path) -> WheelEnvironment:
    """A fresh virtual environment at ``root`` with ``wheel`` installed (without its dependencies, which the
    ``.pth`` line of the module docstring provides)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    environment = WheelEnvironment(root)
    site = subprocess.run([environment.python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", environment.python, "install", "--quiet", "--no-deps",
                    "--no-index", str(wheel)], check=True, timeout=300, capture_output=True)
    return environment
