"""The noise key on the command line (docs/security.md): the default key file made ``0600`` on first use and named
in the summary; secure runs derive their noise from it (two runs, two nonces: other noise; the same key id); a
run whose key cannot be read, or whose key or state store others may read, stops in one line (exit 2) before it
reads anything; ``pm-beam noise-key`` makes keys and names them. Deterministic but for one test that states its
false-failure probability (2**-53)."""
from __future__ import annotations

import json
import stat
from pathlib import Path

import apache_beam as beam
import pytest

from pipelines import generate, kanon, noise_key
from pipelines.noise import noise_source
from transforms.core.noise_key import KEY_ENVIRONMENT

DATASET = ["--groups", "40", "--joins", "2000", "--days", "3", "--seed", "5", "--format", "jsonl", "--quiet"]


@pytest.fixture(scope="module")
def joins(tmp_path_factory) -> str:
    directory = tmp_path_factory.mktemp("joins")
    assert generate.main(["kanon", "--output", str(directory), *DATASET]) == 0
    return str(directory / "joins-*")


def _kanon(joins: str, output: Path, *extra: str) -> int:
    return kanon.main(["--input", joins, "--output", str(output), "--runner=FnApiRunner", *extra])


def _summary(output: Path) -> dict:
    return json.loads((output / "summary.json").read_text())


def test_the_default_key_is_made_private_on_first_use_and_named_in_the_summary(joins, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(KEY_ENVIRONMENT)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    assert _kanon(joins, tmp_path / "a", "--output-format", "jsonl") == 0
    key_file = tmp_path / "config" / "pm-beam" / "noise.key"
    assert f"noise key: created {key_file}" in capsys.readouterr().out
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600 and stat.S_IMODE(key_file.parent.stat().st_mode) == 0o700
    assert noise_key.main(["id"]) == 0
    key_id = capsys.readouterr().out.split()[0]
    recorded = _summary(tmp_path / "a")["parameters"]["noise_key"]
    assert recorded == {"location": str(key_file), "key_id": key_id}
    assert key_file.read_text().strip() not in json.dumps(_summary(tmp_path / "a"))
    assert _kanon(joins, tmp_path / "b", "--output-format", "jsonl") == 0  # the same key, a run of its own
    assert "created" not in capsys.readouterr().out
    assert _summary(tmp_path / "b")["parameters"]["noise_key"]["key_id"] == key_id


def test_two_runs_under_one_key_draw_other_noise(joins, tmp_path):
    """Each run derives its noise with a nonce of its own: the same keyed draw differs between two runs' sources
    (equal with probability 2**-53, the false-failure probability), and is the same twice within one."""
    runs = [kanon.parse_job(["--input", joins, "--output", str(tmp_path / name)])[0].run for name in "ab"]
    first, second = (noise_source(beam.Pipeline(), run, "kanon") for run in runs)
    assert first.kind == second.kind == "secure" and runs[0].run_nonce != runs[1].run_nonce
    assert first.keyed_uniform(("group", 1)) != second.keyed_uniform(("group", 1))
    assert first.keyed_uniform(("group", 1)) == noise_source(beam.Pipeline(), runs[0], "kanon").keyed_uniform(("group", 1))


def test_a_run_whose_key_cannot_be_read_stops_before_reading(joins, tmp_path, capsys):
    for location, reason in ((str(tmp_path / "absent.key"), "cannot read"),
                             ("env:PM_BEAM_TEST_UNSET", "is not set in this process")):
        assert _kanon(joins, tmp_path / "out", "--noise-key", location) == 2
        [line] = capsys.readouterr().err.strip().splitlines()
        assert line.startswith("error: --noise-key:") and reason in line
    (tmp_path / "short.key").write_text("abcd\n")
    (tmp_path / "short.key").chmod(0o600)
    assert _kanon(joins, tmp_path / "out", "--noise-key", str(tmp_path / "short.key")) == 2
    assert "is not a noise key" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_key_or_a_state_store_others_may_read_is_refused_in_one_line(joins, tmp_path, capsys):
    assert noise_key.main(["new", str(tmp_path / "k.key")]) == 0
    (tmp_path / "k.key").chmod(0o644)
    assert _kanon(joins, tmp_path / "out", "--noise-key", str(tmp_path / "k.key")) == 2
    error = capsys.readouterr().err
    assert "chmod 600" in error and "--accept-shared-files" in error
    store = tmp_path / "state.sqlite"
    store.write_bytes(b"")
    store.chmod(0o640)
    assert _kanon(joins, tmp_path / "out", "--state-store", f"sqlite:///{store}") == 2
    assert f"the state store {store} is readable or writable by group or others (mode 0640)" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_noise_key_new_never_overwrites_and_id_names_the_key(tmp_path, capsys):
    path = tmp_path / "keys" / "k.key"
    assert noise_key.main(["new", str(path)]) == 0
    made = capsys.readouterr().out
    assert noise_key.main(["id", str(path)]) == 0
    key_id = capsys.readouterr().out.split()[0]
    assert key_id in made and len(key_id) == 16 and path.read_text().strip() not in made
    before = path.read_bytes()
    assert noise_key.main(["new", str(path)]) == 2
    assert "never overwritten" in capsys.readouterr().err and path.read_bytes() == before
