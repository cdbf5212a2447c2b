"""Secrets named by where they are, read where they are used: on the worker, in a DoFn's ``setup``.

A value read on the submitting machine and captured by a transform travels inside the job's serialised graph,
which a managed runner stores with the job's staging files. So a pipeline carries only a secret's location, and
each worker reads the secret when it starts (deploy/README.md, "Secrets"). A location is one of:

* ``env:NAME``: the environment variable ``NAME`` of the process that reads it (set it on the workers: the
  worker image, the worker-pool container, a Kubernetes secret);
* any path or URL a Beam file system opens: a local path, ``gs://BUCKET/keys.json``, ``s3://...``.
"""
from __future__ import annotations

import os

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

ENVIRONMENT_PREFIX = "env:"


class SecretUnavailable(Exception):
    """A secret's location that cannot be read, named (never the secret itself)."""


def is_environment(location: str) -> bool:
    """Whether ``location`` names an environment variable (``env:NAME``)."""
    return location.startswith(ENVIRONMENT_PREFIX)


def read_secret(location: str) -> bytes:
    """The bytes stored at ``location`` (see the module docstring); ``SecretUnavailable`` naming it otherwise."""
    if is_environment(location):
        name = location[len(ENVIRONMENT_PREFIX):]
        value = os.environ.get(name) if name else None
        if value is None:
            raise SecretUnavailable(f"environment variable {name!r} ({location}) is not set in this process")
        return value.encode("utf-8")
    try:
        with FileSystems.open(location, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
            return handle.read()
    except Exception as error:  # noqa: BLE001 - each Beam file system raises its own types (OSError, RetryError...)
        raise SecretUnavailable(f"cannot read {location!r}: {getattr(error, 'strerror', None) or error}") from None
