"""JSON with ``//`` line comments, as Chromium's test data writes it (the Attribution Reporting interop cases are
read by Chrome's JSON reader with comments allowed). Comments are removed outside strings only, so a URL such
as ``"https://a.test"`` is kept whole; the rest is standard JSON."""
from __future__ import annotations

import json
from typing import Any


def strip_comments(text: str) -> str:
    """``text`` without its ``//`` line comments (each up to, not including, its newline)."""
    out, i, n, in_string = [], 0, len(text), False
    while i < n:
        char = text[i]
        if in_string:
            if char == "\\":
                out.append(text[i:i + 2])
                i += 2
                continue
            in_string = char != '"'
        elif char == '"':
            in_string = True
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        out.append(char)
        i += 1
    return "".join(out)


def loads(text: str) -> Any:
    """Parse JSON that may hold ``//`` line comments."""
    return json.loads(strip_comments(text))
