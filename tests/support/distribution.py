"""The distribution as a user installs it: the sdist and wheel that ``python -m build`` makes, and a virtual
environment holding only the wheel (tests/deploy/; deploy/README.md).

The environment is made for the test, away from the source tree: no project directory on ``sys.path``, another
working directory, no ``PYTHONPATH``. Installing the third-party dependencies again from the registries would cost
minutes per run, so they come from the test's own environment, but only those the wheel declares: the closure of
its ``Requires-Dist`` (the core, plus the extras asked for) is linked, module by module as each distribution's
``RECORD`` lists them, into one directory that a ``.pth`` line adds to the path. A module the project imports
without declaring it is then missing there, as it would be on a worker. Every module and data file of the project
is the wheel's.
"""
from __future__ import annotations

import fcntl
import importlib.metadata
import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from email.parser import Parser
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

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
    the setuptools of this environment; returns (sdist, wheel).

    Setuptools makes the sdist's tree in the project's directory and removes it when archived, so two builds at
    once (two test workers) take each other's files away ("No such file or directory"): a build holds a lock on
    the project's directory for its duration."""
    tree = os.open(ROOT, os.O_RDONLY)
    try:
        fcntl.flock(tree, fcntl.LOCK_EX)
        result = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
                                capture_output=True, text=True, timeout=300)
    finally:
        os.close(tree)  # and with it the lock
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (sdist,), (wheel,) = sorted(out.glob("*.tar.gz")), sorted(out.glob("*.whl"))
    return sdist, wheel


def _requirements(requires: list[str] | None, extras: set[str]) -> Iterator[Requirement]:
    """The requirements of a ``Requires-Dist`` list that apply here with ``extras`` asked for."""
    for text in requires or ():
        requirement = Requirement(text)
        marker = requirement.marker
        if marker is None or any(marker.evaluate({"extra": extra}) for extra in {"", *extras}):
            yield requirement


def declared_closure(wheel: Path, extras: tuple[str, ...]) -> list[importlib.metadata.Distribution]:
    """The installed distributions that the wheel's requirements (core and ``extras``) bring, transitively."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(name for name in archive.namelist() if name.endswith(".dist-info/METADATA"))
        requires = Parser().parsestr(archive.read(name).decode()).get_all("Requires-Dist")
    pending = list(_requirements(requires, set(extras)))
    found: dict[str, importlib.metadata.Distribution] = {}
    while pending:
        requirement = pending.pop()
        key = canonicalize_name(requirement.name)
        if key in found:
            continue
        found[key] = importlib.metadata.distribution(requirement.name)
        pending.extend(_requirements(found[key].requires, requirement.extras))
    return list(found.values())


def _link_modules(distributions: list[importlib.metadata.Distribution], directory: Path) -> None:
    """Links each distribution's top-level modules, packages and metadata (by its RECORD) into ``directory``."""
    directory.mkdir()
    for distribution in distributions:
        base = Path(distribution.locate_file(""))
        for top in {file.parts[0] for file in distribution.files or () if file.parts[0] != ".."}:
            target = directory / top
            if not target.exists() and (base / top).exists():
                target.symlink_to(base / top)


def make_wheel_environment(wheel: Path, root: Path, extras: tuple[str, ...] = ()) -> WheelEnvironment:
    """A fresh virtual environment at ``root`` with ``wheel`` installed and, of its dependencies, only those it
    declares for the core and ``extras`` (see the module docstring)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    environment = WheelEnvironment(root)
    site = subprocess.run([environment.python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    _link_modules(declared_closure(wheel, extras), root / "dependencies")
    Path(site, "_dependencies.pth").write_text(f"{root / 'dependencies'}\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", environment.python, "install", "--quiet", "--no-deps",
                    "--no-index", str(wheel)], check=True, timeout=300, capture_output=True)
    return environment
