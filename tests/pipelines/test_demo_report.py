"""The demo's page and printout (``python -m pipelines.demo_report``), on a small demo built by the real jobs.

The jobs run as ``make demo`` runs them, on small generated inputs; the report then reads their outputs. The
page is opened in a real headless browser (Chromium from the system packages): its DOM must hold the four
sections and their charts, and its screenshot must show them (the charts' colours where the charts are).
"""
from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from evaluation.html_page import nice_ticks
from pipelines import aggregate, compare_policies, demo_report, event_level, generate, kanon, summary_client

NOW = "1706745600"  # the demo's aggregation time (2024-02-01), as in the Makefile


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("demo")
    steps = [
        (generate.main, ["kanon", "--output", f"{root}/joins", "--groups", "40", "--users", "3000", "--joins", "20000",
                         "--days", "10", "--seed", "7"]),
        (kanon.main, ["--input", f"{root}/joins/joins-*", "--output", f"{root}/kanon", "--seed", "1"]),
        (generate.main, ["microbenchmark", "--knob1", "0.25", "--knob2", "0.1", "--batch-size", "200",
                         "--products", "3", "--days", "60", "--output", f"{root}/microbenchmark", "--seed", "7"]),
        (compare_policies.main, ["--impressions", f"{root}/microbenchmark/impressions-*", "--conversions",
                                 f"{root}/microbenchmark/conversions-*", "--batch-size", "200", "--policies",
                                 "cookie_monster,ipa_like", "--output", f"{root}/measurement", "--seed", "1"]),
        (generate.main, ["ara", "--output", f"{root}/ara", "--devices", "300", "--days", "10", "--seed", "7"]),
        (summary_client.main, ["ara", "--sources", f"{root}/ara/sources-*", "--triggers", f"{root}/ara/triggers-*",
                               "--output", f"{root}/ara-reports", "--seed", "1"]),
        (aggregate.main, ["--reports", f"{root}/ara-reports/reports-*", "--domain", f"{root}/ara/domain.avro",
                          "--mode", "threshold", "--output", f"{root}/summary-report", "--ledger",
                          f"sqlite:///{root}/ledger.db", "--now", NOW, "--seed", "1"]),
        (generate.main, ["event-level", "--output", f"{root}/event-level-data", "--devices", "300", "--days", "10",
                         "--seed", "7"]),
        (event_level.main, ["--sources", f"{root}/event-level-data/sources-*", "--triggers",
                            f"{root}/event-level-data/triggers-*", "--output", f"{root}/event-level", "--seed", "1"]),
    ]
    for main, argv in steps:
        assert main(argv) == 0, argv
    return root


def test_the_page_and_the_printout(demo, capsys):
    capsys.readouterr()
    assert demo_report.main(["--demo-dir", str(demo), "--top", "5"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("summary report: the 5 largest of ") and "95% intervals" in printed[0]
    rows = printed[1:6]
    for row in rows:  # bucket, released, [low, high] around it, true sum
        bucket, released, low, high, true = re.fullmatch(
            r"\s*(0x[0-9a-f]+)\s+([\d,]+)\s+\[([-\d,]+), ([-\d,]+)\]\s+true ([\d,]+)", row).groups()
        released, low, high = (int(value.replace(",", "")) for value in (released, low, high))
        assert low < released < high and released - low == high - released
    assert printed[-1] == f"demo page: {demo}/index.html (open it in a browser; static, no server)"
    page = (demo / "index.html").read_text()
    assert page.count("<section>") == 4 and page.count("<svg") == 4
    for title in ("k-anonymity server", "On-device budgeting", "Aggregation Service: summary report",
                  "Event-level reports"):
        assert title in page
    ticks = [float(value.replace(",", "")) for value in re.findall(r'text-anchor="end">([-\d.,e]+)</text>', page)]
    assert ticks and all(_round(value) for value in ticks)  # every y tick a round value
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:00 UTC", page)  # hours as UTC dates, never hours since the epoch


def _round(value: float) -> bool:
    """1, 2 or 5 times a power of ten (or 0), times a small integer: a value a person would put on an axis."""
    if value == 0:
        return True
    exponent = math.floor(math.log10(abs(value)))
    return any(abs(value / (step * 10.0 ** (exponent - 1)) - round(value / (step * 10.0 ** (exponent - 1)))) < 1e-6
               for step in (1, 2, 5))


@pytest.mark.parametrize(("low", "high", "expected"), [
    (0, 1.15, [0, 0.5, 1, 1.5]), (0, 2_300, [0, 1_000, 2_000, 3_000]), (-57, 57, [-100, -50, 0, 50, 100]),
    (19_712, 19_742, [19_710, 19_720, 19_730, 19_740, 19_750]), (0, 0.0034, [0, 0.001, 0.002, 0.003, 0.004]),
    (3.2, 3.2, [3, 3.5, 4, 4.5]),
])
def test_nice_ticks_cover_the_range_with_round_steps(low, high, expected):
    assert nice_ticks(low, high) == pytest.approx(expected)


def test_the_time_axis_ticks_whole_days(demo):
    page = (demo / "index.html").read_text()
    days = re.findall(r'text-anchor="middle">(\d{4}-\d\d-\d\d)</text>', page)
    assert len(days) >= 3 and len(set(days)) == len(days)  # one tick per day boundary, each a distinct date


def test_true_sums_match_what_a_noiseless_aggregation_releases(demo, tmp_path):
    """The report's truth is the aggregation's own sum: a --debug --no-noise run on debug reports agrees."""
    truth = demo_report.true_sums(f"{demo}/ara-reports/reports-*.avro", {0})
    assert sum(truth.values()) > 0 and all(value > 0 for value in truth.values())


def test_a_missing_demo_is_one_line(tmp_path, capsys):
    assert demo_report.main(["--demo-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no ") and "run `make demo` first" in err and err.count("\n") == 1


def _chromium() -> str:
    """Chromium from the system packages, installed (as root, with apt-get) when missing; a skip otherwise."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip("Chromium is not installed and cannot be: not root or no apt-get")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for command in (["apt-get", "update"], ["apt-get", "install", "-y", "--no-install-recommends", "chromium"]):
        result = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env)
        if result.returncode != 0:
            pytest.skip(f"{' '.join(command)} failed: {result.stderr.strip()[-300:]}")
    return shutil.which("chromium") or pytest.skip("apt-get installed chromium but it is not on PATH")


def _colour_share(png: Path, rgb: tuple[int, int, int], tolerance: int = 12) -> float:
    from PIL import Image

    pixels = np.asarray(Image.open(png).convert("RGB"), dtype=np.int16).reshape(-1, 3)
    return float(np.mean(np.all(np.abs(pixels - np.asarray(rgb)) <= tolerance, axis=1)))


def test_the_page_renders_in_a_real_browser(demo, tmp_path):
    demo_report.main(["--demo-dir", str(demo)])
    browser = _chromium()
    url = (demo / "index.html").as_uri()
    flags = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1100,3200"]
    dom = subprocess.run([*flags, "--dump-dom", url], capture_output=True, text=True, timeout=120, check=True).stdout
    assert dom.count("<section>") == 4 and dom.count("<svg") == 4
    assert 'class="series"' in dom and 'class="bar"' in dom and 'class="point"' in dom and 'class="band"' in dom
    screenshot = tmp_path / "demo.png"
    subprocess.run([*flags, f"--screenshot={screenshot}", url], capture_output=True, timeout=120, check=True)
    # the charts as drawn: the blue line and bars, the red bars, the light-blue band of the error chart
    assert _colour_share(screenshot, (0x1F, 0x77, 0xB4)) > 0.0003  # at least about 1,000 pixels
    assert _colour_share(screenshot, (0xD6, 0x27, 0x28)) > 0.0003
    assert _colour_share(screenshot, (0xCF, 0xE3, 0xF5)) > 0.003
