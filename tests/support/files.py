"""Reading back the files a generator or a job wrote, and the project's Avro schema files, for the tests."""
from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from schemas.codecs import read_files
from schemas.formats import AVRO_DIR
from schemas.rows import DeadLetter


def read_rows(paths: Iterable, spec) -> tuple[list, list[DeadLetter]]:
    """The valid rows and the dead letters of ``paths`` (in the order given): ``schemas.codecs.read_files``."""
    return read_files(paths, spec)


def output_bytes(stats) -> list[bytes]:
    """The contents of a generator run's source and trigger files, in order (for determinism checks)."""
    return [Path(path).read_bytes() for path in (*stats.source_files, *stats.trigger_files)]


def avro_field_names(name: str) -> list[str]:
    """The top-level field names, in order, of the Avro schema file ``schemas/avro/<name>.avsc`` as written."""
    with open(AVRO_DIR / f"{name}.avsc", encoding="utf-8") as handle:
        return [field["name"] for field in json.load(handle)["fields"]]
