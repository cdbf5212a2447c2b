"""Sites as the Attribution API means them: a host's registrable domain (the Public Suffix List, private suffixes
included, as ``tldts.getDomain(host, {allowPrivateDomains: true})`` in the reference implementation); an IP address
or a public suffix has none."""
from __future__ import annotations

import functools
import ipaddress

from publicsuffixlist import PublicSuffixList

_SUFFIXES = PublicSuffixList()


@functools.lru_cache(maxsize=1 << 14)
def registrable_domain(host: str) -> str | None:
    """The registrable domain of ``host`` (lower case), or None."""
    if not host:
        return None
    try:
        ipaddress.ip_address(host.strip("[]"))
        return None
    except ValueError:
        pass
    return _SUFFIXES.privatesuffix(host.lower())
