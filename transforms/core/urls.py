"""Database URLs as they may be shown: without their password."""
from __future__ import annotations

from typing import overload
from urllib.parse import urlsplit, urlunsplit


@overload
def redact_url(url: str) -> str: ...
@overload
def redact_url(url: None) -> None: ...
def redact_url(url: str | None) -> str | None:
    """``url`` without its password (None stays None)."""
    if url is None:
        return None
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        return urlunsplit(parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@")))
    except ValueError:
        return "<unparsable URL>"
