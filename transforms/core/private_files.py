"""Files that hold budgets, state or keys, private to their owner: created ``0600`` in directories created ``0700``,
and refused when they already exist readable by group or others (docs/security.md).

A privacy-budget ledger, a streaming job's state store and a noise key file are read by whoever may read the file.
Under the usual umask (022) a new file is ``0644``: every local user could read the state's user ids or the key that
derives every noise value. So the project creates these files for their owner only, and an existing one whose mode
lets group or others read or write it is refused, in one line naming ``chmod`` and the option that accepts it
(``--accept-shared-files``, for an operator who shares the file on purpose, e.g. with a group of operators).
"""
from __future__ import annotations

import os
import stat

ACCEPT_OPTION = "--accept-shared-files"
FILE_MODE = 0o600
DIRECTORY_MODE = 0o700
_SHARED_BITS = stat.S_IRWXG | stat.S_IRWXO


class SharedFile(Exception):
    """A private file (a ledger, a state store, a key) that group or others may read or write."""


def make_private_directory(path: str) -> None:
    """The directory ``path`` and its missing parents, each one created here ``0700`` (existing ones unchanged)."""
    path = os.path.abspath(path)
    missing = []
    while path and not os.path.isdir(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, DIRECTORY_MODE)
        except FileExistsError:
            continue
        os.chmod(folder, DIRECTORY_MODE)  # mkdir's mode is masked by the umask; chmod is not


def create_private_file(path: str) -> bool:
    """Create ``path`` empty and ``0600`` (its directory as ``make_private_directory``) unless it exists; whether it
    was created here. Created before any library opens it, so it never exists with a wider mode."""
    make_private_directory(os.path.dirname(os.path.abspath(path)))
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return False
    os.fchmod(descriptor, FILE_MODE)
    os.close(descriptor)
    return True


def check_private(path: str, what: str, accept_shared: bool = False) -> None:
    """``SharedFile`` when ``path`` exists and group or others may read or write it, unless ``accept_shared`` (a path
    that cannot be found passes: whoever opens it says why)."""
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return
    if mode & _SHARED_BITS and not accept_shared:
        raise SharedFile(f"{what} {path} is readable or writable by group or others (mode {mode:04o}): "
                         f"chmod 600 {path}, or accept it with {ACCEPT_OPTION}")
