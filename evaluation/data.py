"""Loading an evaluation dataset once, for many runs: the converting devices' events and the population counts.

The replay only needs the devices that converted (the others are never asked
for a report, so they pay nothing on device). The budget metrics also need the
population: for each querier, which devices had any event for it (an
impression of an advertiser it queries for, or a conversion it asked a report
of) and which converted, and the time span of the data (its epochs). So the
conversions are read first, then the impressions are streamed: an impression
is kept only when its device converted, otherwise it is only counted.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

from apache_beam.io.filesystems import FileSystems

from schemas.codecs import CONVERSION, IMPRESSION, READERS, EventSpec, format_of
from schemas.rows import Conversion, Impression
from transforms.budgeting.mechanisms.simulation import devices_in_order
from transforms.core.io import require_input

PROGRESS_EVERY = 1_000_000


@dataclass
class Population:
    """Per querier: how many devices had any event for it and how many converted for it; the data's time span."""

    any_event: dict[str, int] = field(default_factory=dict)
    converted: dict[str, int] = field(default_factory=dict)
    first_micros: int | None = None
    last_micros: int | None = None

    def see(self, time_micros: int) -> None:
        if self.first_micros is None or time_micros < self.first_micros:
            self.first_micros = time_micros
        if self.last_micros is None or time_micros > self.last_micros:
            self.last_micros = time_micros


@dataclass
class Dataset:
    """Everything the runs share: the converting devices' events in replay order, the population, counts."""

    name: str
    devices: dict[str, list]
    population: Population
    read: int = 0
    dead_letters: dict[str, int] = field(default_factory=dict)
    impressions: int = 0
    conversions: int = 0


def _parsed(pattern: str, spec: EventSpec, input_format: str | None):
    for path in require_input(pattern):
        reader = READERS[format_of(path, input_format)]
        with FileSystems.open(path) as handle:
            yield from reader(spec, handle, path)


def load_dataset(
    name: str, impressions: str, conversions: str, input_format: str | None = None, progress: bool = True
) -> Dataset:
    """Reads ``conversions`` then ``impressions`` (file patterns) into a ``Dataset``; bad records are counted
    by reason (the measurement job writes them out; here only their number matters)."""
    began = time.monotonic()
    population = Population()
    dataset = Dataset(name, {}, population)
    advertisers_of: dict[str, set] = {}  # advertiser site -> the queriers asking about it
    any_event: dict[str, set] = {}  # querier -> devices (counted at the end)
    converted: dict[str, set] = {}
    kept: list = []

    def valid(pattern: str, spec: EventSpec, row_type: type):
        """The valid rows of ``pattern``; every record read and every dead letter (by reason) counted."""
        for row in _parsed(pattern, spec, input_format):
            dataset.read += 1
            if type(row) is row_type:
                population.see(row.event_time_micros)
                yield row
            else:
                dataset.dead_letters[row.reason] = dataset.dead_letters.get(row.reason, 0) + 1

    for row in valid(conversions, CONVERSION, Conversion):
        dataset.conversions += 1
        kept.append(row)
        converted.setdefault(row.querier_site, set()).add(row.device_id)
        any_event.setdefault(row.querier_site, set()).add(row.device_id)
        advertisers_of.setdefault(row.advertiser_site, set()).add(row.querier_site)
    converting = {row.device_id for row in kept}
    for row in valid(impressions, IMPRESSION, Impression):
        dataset.impressions += 1
        for querier in advertisers_of.get(row.advertiser_site, ()):
            any_event[querier].add(row.device_id)
        if row.device_id in converting:
            kept.append(row)
        if progress and dataset.impressions % PROGRESS_EVERY == 0:
            print(f"  {name}: {dataset.impressions:,} impressions read ({time.monotonic() - began:.0f} s)",
                  file=sys.stderr, flush=True)
    dataset.devices = devices_in_order(kept)
    population.any_event = {querier: len(devices) for querier, devices in any_event.items()}
    population.converted = {querier: len(devices) for querier, devices in converted.items()}
    return dataset
