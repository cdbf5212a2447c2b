"""``schemas.jsonc``: ``//`` line comments are removed outside JSON strings only, and the rest parses as JSON."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from schemas import jsonc

INTEROP = Path(__file__).resolve().parent.parent / "conformance" / "attribution_reporting_interop"


@pytest.mark.parametrize(("text", "expected"), [
    ('{"a": 1} // trailing', '{"a": 1} '),
    ('// a whole line\n{"a": 1}', '\n{"a": 1}'),
    ('{"a": 1, // note\n "b": 2}', '{"a": 1, \n "b": 2}'),
    ('{"u": "https://a.test"}', '{"u": "https://a.test"}'),
    ('{"u": "x // not a comment"} // a comment', '{"u": "x // not a comment"} '),
    ('{"q": "say \\"hi\\" // still a string"}', '{"q": "say \\"hi\\" // still a string"}'),
    ('{"b": "ends with a backslash \\\\"} // gone', '{"b": "ends with a backslash \\\\"} '),
    ("no comments at all", "no comments at all"),
    ("", ""),
])
def test_strip_comments(text, expected):
    assert jsonc.strip_comments(text) == expected


def test_a_comment_at_the_end_of_the_file_without_a_newline():
    assert jsonc.loads('{"a": [1, 2]}\n// the end') == {"a": [1, 2]}
    assert jsonc.loads('[1]//x') == [1]


def test_loads_keeps_urls_and_slashes_inside_strings():
    text = """{
      // the context
      "context_origin": "https://source.test", // trailing
      "note": "a // b",
      "escaped": "quote \\" then // still inside",
      "path": "https://reporter.test//double"
    }"""
    assert jsonc.loads(text) == {
        "context_origin": "https://source.test",
        "note": "a // b",
        "escaped": 'quote " then // still inside',
        "path": "https://reporter.test//double",
    }


def test_a_newline_ends_the_comment_and_is_kept():
    assert jsonc.strip_comments("1 // x\n2") == "1 \n2"


def test_a_single_slash_is_not_a_comment():
    with pytest.raises(json.JSONDecodeError):
        jsonc.loads("{/ 1}")


def test_text_without_comments_parses_as_json_does():
    text = json.dumps({"a": "b\\c", "d": ["//", "\"//\""], "e": None})
    assert jsonc.loads(text) == json.loads(text)
    assert jsonc.strip_comments(text) == text


def test_invalid_json_is_still_an_error():
    with pytest.raises(json.JSONDecodeError):
        jsonc.loads('{"a": } // comment')


@pytest.mark.skipif(not INTEROP.is_dir(), reason="the interop suite is not in this checkout")
def test_every_interop_case_parses():
    files = sorted(INTEROP.glob("*.json"))
    assert files
    for path in files:
        assert isinstance(jsonc.loads(path.read_text()), dict), path.name
