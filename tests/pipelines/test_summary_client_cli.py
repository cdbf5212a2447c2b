"""``python -m pipelines.summary_client`` end to end on tiny generated datasets."""
from __future__ import annotations

import glob

import fastavro
import pytest

from pipelines import summary_client
from schemas.aggregatable import (
    PayloadDecrypter,
    decode_payload,
    generate_key_pair,
    parse_shared_info,
    write_key_file,
)
from synthetic.ara import generate_ara
from synthetic.paa import generate_paa
from tests.support.cli import run_main


@pytest.fixture(scope="module")
def ara_data(tmp_path_factory):
    out = tmp_path_factory.mktemp("ara")
    stats = generate_ara(out, devices=40, days=10, impressions_per_day=4, seed=2, fmt="jsonl", bad_fraction=0.02,
                         progress=False)
    return stats, str(out / "sources-*"), str(out / "triggers-*")


@pytest.fixture(scope="module")
def paa_data(tmp_path_factory):
    out = tmp_path_factory.mktemp("paa")
    stats = generate_paa(out, devices=30, days=2, seed=3, progress=False)
    return stats, str(out / "events-*")


def _run(capsys, argv) -> tuple[int, dict, str]:
    return run_main(summary_client.main, capsys, argv)


def _reports(output) -> list[dict]:
    return [record for path in sorted(glob.glob(str(output / "reports-*.avro"))) for record in fastavro.reader(open(path, "rb"))]


def test_ara_batch_writes_reports_dead_letters_and_a_summary(ara_data, tmp_path, capsys):
    stats, sources, triggers = ara_data
    output = tmp_path / "out"
    status, summary, printed = _run(capsys, ["ara", "--sources", sources, "--triggers", triggers, "--output", output,
                                             "--seed", "7", "--l0", "4"])
    assert status == 0
    counts = summary["counts"]
    valid, bad = stats.sources + stats.triggers, stats.bad_sources + stats.bad_triggers
    assert (counts["read"], counts["parsed"], counts["dead_lettered"]) == (valid + bad, valid, bad)
    assert counts["dead_lettered_by_reason"] == stats.bad_by_reason
    assert counts["reports"] == stats.triggers  # one report per trigger
    reports = _reports(output)
    decoded = [decode_payload(report["payload"]) for report in reports]
    assert counts["null_reports"] == sum(1 for contributions in decoded if not contributions) > 0
    assert any(decoded) and all(len(contributions) <= 2 for contributions in decoded)
    for report in reports:
        info = parse_shared_info(report["shared_info"])
        assert info.api == "attribution-reporting" and info.attribution_destination.startswith("https://shop-")
        assert report["key_id"] == ""
    assert summary["parameters"]["noise_source"] == "seeded" and summary["parameters"]["l0"] == 4
    assert "Cor. 4.4" in summary["privacy"]
    for paths in summary["outputs"].values():
        for path in [paths] if isinstance(paths, str) else paths:
            assert path in printed
    assert f"reports {counts['reports']} (null {counts['null_reports']})" in printed


def test_ara_streaming_writes_the_same_reports_as_batch(ara_data, tmp_path, capsys):
    _, sources, triggers = ara_data
    common = ["ara", "--sources", sources, "--triggers", triggers, "--seed", "7"]
    assert _run(capsys, [*common, "--output", tmp_path / "batch"])[0] == 0
    status, summary, _ = _run(capsys, [*common, "--output", tmp_path / "stream", "--streaming"])
    assert status == 0 and summary["parameters"]["streaming"]
    batch, stream = _reports(tmp_path / "batch"), _reports(tmp_path / "stream")
    key = lambda record: record["shared_info"]  # noqa: E731
    assert sorted(batch, key=key) == sorted(stream, key=key) and batch


def test_paa_with_a_public_key_encrypts_every_payload(paa_data, tmp_path, capsys, monkeypatch):
    stats, events = paa_data
    private, public = generate_key_pair()
    write_key_file(str(tmp_path / "public.json"), {"k1": public})
    monkeypatch.setenv("PM_BEAM_TEST_PUBLIC_KEYS", (tmp_path / "public.json").read_text())
    output = tmp_path / "out"  # the key file from a location: here an environment variable (transforms.core.secrets)
    status, summary, printed = _run(capsys, ["paa", "--events", events, "--output", output, "--public-key",
                                             "env:PM_BEAM_TEST_PUBLIC_KEYS", "--reach-value", "20000"])
    assert status == 0
    assert summary["parameters"]["noise_source"] == "secure" and summary["parameters"]["key_id"] == "k1"
    reports = _reports(output)
    assert len(reports) == summary["counts"]["reports"] == stats.events
    decrypter = PayloadDecrypter({"k1": private})
    values = []
    for report in reports:
        assert report["key_id"] == "k1"
        assert parse_shared_info(report["shared_info"]).api in ("shared-storage", "protected-audience")
        contributions = decode_payload(decrypter.decrypt(report["payload"], report["shared_info"], "k1"))
        values += [value for _, value, _ in contributions]
    assert set(values) == {20000}
    assert summary["counts"]["null_reports"] == stats.events - len(values) > 0
    assert "HPKE" in printed


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--l0", "0"], "argument --l0: must be an integer >= 1, got 0"),
        (["--l1", "100", "--reach-value", "101"], "--reach-value must be in [1, --l1 = 100]"),
        (["--key-id", "x"], "--key-id needs --public-key"),
        (["--public-key", "/nonexistent/keys.json"], "public key: cannot read '/nonexistent/keys.json'"),
        (["--allowed-lateness-seconds", "-1"], "argument --allowed-lateness-seconds: must be an integer >= 0, got -1"),
    ],
)
def test_bad_options_are_one_line_errors(paa_data, tmp_path, capsys, extra, message):
    status, _, printed = _run(capsys, ["paa", "--events", paa_data[1], "--output", tmp_path / "out", *extra])
    assert status == 2 and message in printed and len(printed.strip().splitlines()) == 1


def test_key_files_with_several_keys_need_a_key_id(paa_data, tmp_path, capsys):
    write_key_file(str(tmp_path / "keys.json"), {"a": generate_key_pair()[1], "b": generate_key_pair()[1]})
    status, _, printed = _run(capsys, ["paa", "--events", paa_data[1], "--output", tmp_path / "out", "--public-key",
                                       tmp_path / "keys.json"])
    assert status == 2 and "choose one with --key-id" in printed


def test_missing_input_and_client_are_one_line_errors(tmp_path, capsys):
    status, _, printed = _run(capsys, ["ara", "--sources", tmp_path / "none-*.avro", "--triggers", tmp_path / "t.avro",
                                       "--output", tmp_path / "out"])
    assert status == 2 and "no input file matches" in printed
    assert summary_client.main(["ipa", "--output", str(tmp_path)]) == 2
    assert "invalid choice" in capsys.readouterr().err
