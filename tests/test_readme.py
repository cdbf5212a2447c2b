"""The front page (README.md): at most 200 lines, and every link in it resolves. A link to a file of the repository
names one that exists, and its anchor (``#...``) a heading of that page, as GitHub writes a heading's anchor; a
link to the web is a well-formed https URL (the test machine has no network to fetch it)."""
from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_LINES = 200


def anchor_of(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation but hyphens and underscores dropped, spaces
    to hyphens."""
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors of a Markdown page's headings (fenced code skipped)."""
    found, fenced = set(), False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"^#{1,6} (.+)$", line)):
            found.add(anchor_of(match.group(1)))
    return found


def links(text: str) -> list[str]:
    """The targets of ``[text](target)`` links and of ``<https://...>`` autolinks, outside fenced code."""
    prose = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    return re.findall(r"\]\(([^)\s]+)\)", prose) + re.findall(r"<(https?://[^>\s]+)>", prose)


def test_the_front_page_is_at_most_200_lines() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) <= MAX_LINES


def test_anchor_of_follows_github() -> None:
    assert anchor_of("The interop suite, case by case") == "the-interop-suite-case-by-case"
    assert anchor_of("Privacy: the guarantees and the audit") == "privacy-the-guarantees-and-the-audit"
    assert anchor_of("`python -m pipelines.registrations`") == "python--m-pipelinesregistrations"


@pytest.mark.parametrize("target", sorted(set(links(README.read_text(encoding="utf-8")))))
def test_every_link_resolves(target: str) -> None:
    if target.startswith(("http://", "https://")):
        parts = urlsplit(target)
        assert parts.scheme == "https" and "." in parts.netloc, target
        return
    path, _, anchor = target.partition("#")
    page = (ROOT / path) if path else README
    assert page.exists(), f"{target}: no such file"
    if anchor:
        assert page.suffix == ".md" and anchor in anchors(page), f"{target}: no heading with that anchor"
