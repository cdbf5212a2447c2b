"""Writing experiment outputs: CSV tables, the merged ``results.json``, and progress lines."""
from __future__ import annotations

import csv
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def write_csv(path: Path, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> Path:
    """A CSV file with ``header`` and ``rows``."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def write_dict_csv(path: Path, rows: Sequence[dict], columns: Sequence[str]) -> Path:
    """A CSV of the ``columns`` of each dict row (missing values empty)."""
    return write_csv(path, columns, [[row.get(column) for column in columns] for row in rows])


def merge_results(path: Path, experiment: str, entry: dict) -> dict:
    """``path`` (``results.json``) with ``entry`` as experiment ``experiment`` (others kept); written back."""
    results = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {"experiments": {}}
    results["experiments"][experiment] = entry
    path.write_text(json.dumps(results, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    return results


class Progress:
    """Prints ``name [elapsed s] message`` lines on stderr, unless quiet."""

    def __init__(self, name: str, quiet: bool = False) -> None:
        self.name, self.quiet, self.began = name, quiet, time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.began

    def __call__(self, message: str) -> None:
        if not self.quiet:
            print(f"{self.name} [{self.elapsed():4.0f} s] {message}", file=sys.stderr, flush=True)
