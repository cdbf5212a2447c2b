"""Loading an evaluation dataset once, for many runs, as columns: the converting devices' events and the population.

The replay only needs the devices that converted (the others are never asked
for a report, so they pay nothing on device). The budget metrics also need the
population: for each querier, how many devices had any event for it (an
impression of an advertiser it queries for, or a conversion it asked a report
of) and how many converted, and the time span of the data (its epochs).

At the paper's scale (PATCG-like: 24M conversions of 16M devices) a Python
object per event does not fit in memory, so every file is read by the
pipelines' own validating reader (bad records counted by reason) into
columns: numbers as arrays, identifiers as UTF-8 byte strings, and the few
distinct (advertiser, querier, product, request) and (publisher, advertiser,
campaign, product, filter keys) combinations interned. Files are read by
``workers`` processes at once. The event objects of a device are rebuilt only
when the replay asks for them (``Dataset.events``).
"""
from __future__ import annotations

import glob
import io
import os
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import fastavro
import numpy as np
from apache_beam.io.filesystems import FileSystems

from schemas.codecs import CONVERSION, IMPRESSION, READERS, EventSpec, format_of, validate
from schemas.formats import load_avro_schema
from schemas.rows import Conversion, DeadLetter, Impression
from synthetic.files import sidecar_path
from transforms.budgeting.mechanisms.device import sort_events
from transforms.core.io import InputError, require_input

DEFAULT_WORKERS = 2
PROGRESS_SECONDS = 5.0  # at most one progress line this often


@dataclass
class Population:
    """Per querier: how many devices had any event for it and how many converted for it; the data's time span."""

    any_event: dict[str, int] = field(default_factory=dict)
    converted: dict[str, int] = field(default_factory=dict)
    first_micros: int | None = None
    last_micros: int | None = None


@dataclass
class FileColumns:
    """The valid events of one file as columns (``kind`` indexes ``kinds``, this file's distinct combinations),
    with the records read and the dead letters by reason."""

    device: np.ndarray  # UTF-8 bytes
    time: np.ndarray
    event_id: np.ndarray  # UTF-8 bytes
    value: np.ndarray  # conversions only (empty for impressions)
    kind: np.ndarray
    kinds: list[tuple]
    read: int = 0
    dead_letters: dict[str, int] = field(default_factory=dict)


def _utf8(texts: list[str], what: str, path: str) -> np.ndarray:
    if any(text.endswith("\x00") for text in texts):  # byte strings would drop a trailing NUL: two ids could merge
        raise InputError(f"{path}: a {what} ends with a NUL character; such identifiers are not supported here")
    return np.array([text.encode("utf-8") for text in texts], dtype=np.bytes_)


def _kind(row: Conversion | Impression) -> tuple:
    if type(row) is Conversion:
        return (row.advertiser_site, row.querier_site, row.product_id, row.attribution_request)
    return (row.publisher_site, row.advertiser_site, row.campaign_id, row.product_id, row.filter_keys)


def sidecar_columns(path: str, spec: EventSpec) -> FileColumns | None:
    """The columns of ``path`` from the side-car its generator wrote (``synthetic.files.ColumnSidecar``), when
    there is one and the file is as it was then (same size and modification time), or the side-car was written
    alone and there is no file; each distinct kind's sample record is decoded with the file's schema and
    validated like the file's records. None otherwise."""
    where = sidecar_path(path)
    if "://" in path or not where.is_file():
        return None
    written = [os.stat(path).st_size, os.stat(path).st_mtime_ns] if os.path.exists(path) else [-1, -1]
    with np.load(where) as stored:
        if stored["written"].tolist() != written:
            return None
        schema = fastavro.parse_schema(load_avro_schema("conversion" if spec is CONVERSION else "impression"))
        encoded = stored["samples"].tobytes()
        ends = stored["sample_ends"].tolist()
        kinds = []
        for start, end in zip([0, *ends[:-1]], ends, strict=True):
            row = validate(spec, fastavro.schemaless_reader(io.BytesIO(encoded[start:end]), schema, None))
            if isinstance(row, str):
                return None
            kinds.append(_kind(row))
        device = stored["device"]
        return FileColumns(device, stored["time"], stored["event_id"], stored["value"], stored["kind"], kinds,
                           read=int(device.size))


def read_columns(path: str, spec: EventSpec, input_format: str | None = None) -> FileColumns:
    """Every record of the file ``path`` through the reader of its format, the valid ones as columns (from its
    side-car when its generator wrote one: ``sidecar_columns``)."""
    found = sidecar_columns(path, spec)
    if found is not None:
        return found
    if not os.path.exists(path) and "://" not in path:
        raise InputError(f"{path}: neither the file nor a usable column side-car of it exists")
    is_conversion = spec is CONVERSION
    row_type = Conversion if is_conversion else Impression
    devices: list[str] = []
    times: list[int] = []
    ids: list[str] = []
    values: list[float] = []
    kinds: list[int] = []
    kind_index: dict[tuple, int] = {}
    dead: dict[str, int] = {}
    read = 0
    with FileSystems.open(path) as handle:
        for row in READERS[format_of(path, input_format)](spec, handle, path):
            read += 1
            if type(row) is not row_type:
                assert type(row) is DeadLetter
                dead[row.reason] = dead.get(row.reason, 0) + 1
                continue
            devices.append(row.device_id)
            times.append(row.event_time_micros)
            if is_conversion:
                ids.append(row.conversion_id)
                values.append(row.value)
            else:
                ids.append(row.impression_id)
            kind = _kind(row)
            index = kind_index.get(kind)
            if index is None:
                index = kind_index[kind] = len(kind_index)
            kinds.append(index)
    return FileColumns(_utf8(devices, "device id", path), np.array(times, dtype=np.int64),
                       _utf8(ids, "event id", path), np.array(values, dtype=np.float64),
                       np.array(kinds, dtype=np.int64), list(kind_index), read, dead)


def _read_one(job: tuple[str, str, str | None]) -> FileColumns:
    path, name, input_format = job
    return read_columns(path, CONVERSION if name == "conversion" else IMPRESSION, input_format)


def _concatenated(parts: list[FileColumns]) -> FileColumns:
    """One table from the files' columns, with the kinds interned across files."""
    kinds: dict[tuple, int] = {}
    remapped = []
    for part in parts:
        mapping = np.array([kinds.setdefault(kind, len(kinds)) for kind in part.kinds], dtype=np.int64)
        remapped.append(mapping[part.kind] if part.kind.size else part.kind)
    dead: dict[str, int] = {}
    for part in parts:
        for reason, count in part.dead_letters.items():
            dead[reason] = dead.get(reason, 0) + count

    def joined(name: str, dtype) -> np.ndarray:
        arrays = [getattr(part, name) for part in parts if getattr(part, name).size]
        return np.concatenate(arrays) if arrays else np.zeros(0, dtype=dtype)

    return FileColumns(joined("device", np.bytes_), joined("time", np.int64), joined("event_id", np.bytes_),
                       joined("value", np.float64),
                       np.concatenate(remapped) if remapped else np.zeros(0, dtype=np.int64), list(kinds),
                       sum(part.read for part in parts), dead)


@dataclass
class Dataset:
    """Everything the runs share: the converting devices' events as columns (conversions sorted by device and
    replay order, impressions likewise), the population, the counts of what was read.

    ``device_ids`` are the converting devices, sorted (the replay's device order); ``conversion_*`` and
    ``impression_*`` columns index them; ``conversion_kinds`` are (advertiser, querier, product, request) and
    ``impression_kinds`` (publisher, advertiser, campaign, product, filter keys)."""

    name: str
    device_ids: np.ndarray
    conversion_device: np.ndarray
    conversion_time: np.ndarray
    conversion_id: np.ndarray
    conversion_value: np.ndarray
    conversion_kind: np.ndarray
    conversion_kinds: list[tuple]
    impression_device: np.ndarray
    impression_time: np.ndarray
    impression_id: np.ndarray
    impression_kind: np.ndarray
    impression_kinds: list[tuple]
    population: Population
    read: int = 0
    dead_letters: dict[str, int] = field(default_factory=dict)
    impressions: int = 0
    conversions: int = 0

    def device_id(self, device: int) -> str:
        return self.device_ids[device].decode("utf-8")

    def device_events(self, conversions: np.ndarray) -> Iterator[tuple[int, str, list]]:
        """For the conversions at the indices ``conversions`` (ascending), each of their devices (in order) with
        its id and its events as the readers give them, in replay order: all its impressions and those
        conversions (what ``device.replay`` takes). The columns are turned into lists in bulk, then into objects
        one device at a time."""
        conv_device = self.conversion_device[conversions]
        if not conv_device.size:
            return
        firsts = np.flatnonzero(np.r_[True, conv_device[1:] != conv_device[:-1]])
        devices = conv_device[firsts]
        lo = np.searchsorted(self.impression_device, devices, side="left")
        hi = np.searchsorted(self.impression_device, devices, side="right")
        counts = hi - lo
        ends = np.cumsum(counts)
        take = np.repeat(lo - (ends - counts), counts) + np.arange(int(ends[-1]) if ends.size else 0)
        imp_time, imp_id = self.impression_time[take].tolist(), self.impression_id[take].tolist()
        imp_kind, imp_kinds = self.impression_kind[take].tolist(), self.impression_kinds
        conv_time, conv_id = self.conversion_time[conversions].tolist(), self.conversion_id[conversions].tolist()
        conv_value, conv_kind = self.conversion_value[conversions].tolist(), self.conversion_kind[conversions].tolist()
        conv_kinds = self.conversion_kinds
        conv_ends = np.r_[firsts[1:], conversions.size].tolist()
        for j, (device, device_id) in enumerate(zip(devices.tolist(), self.device_ids[devices].tolist(), strict=True)):
            device_id = device_id.decode("utf-8")
            i0, i1 = int(ends[j] - counts[j]), int(ends[j])
            c0, c1 = int(firsts[j]), conv_ends[j]
            events: list = [Impression(device_id, t, i.decode("utf-8"), *imp_kinds[k])
                            for t, i, k in zip(imp_time[i0:i1], imp_id[i0:i1], imp_kind[i0:i1], strict=True)]
            for t, i, v, k in zip(conv_time[c0:c1], conv_id[c0:c1], conv_value[c0:c1], conv_kind[c0:c1], strict=True):
                advertiser, querier, product, request = conv_kinds[k]
                events.append(Conversion(device_id, t, i.decode("utf-8"), advertiser, querier, v, product, request))
            yield device, device_id, sort_events(events)

    @property
    def devices(self) -> dict[str, list]:
        """Every converting device's events, by device id, as objects (``simulation.simulate``'s input: for the
        reference runs, which are small)."""
        return {device_id: events
                for _, device_id, events in self.device_events(np.arange(self.conversion_device.size))}


def input_paths(pattern: str) -> list[str]:
    """The files matching ``pattern``, or, when there are none, the files whose column side-cars alone match it
    (datasets the evaluation generated without event files); an ``InputError`` when there are neither."""
    try:
        return require_input(pattern)
    except InputError:
        alone = sorted(str(Path(where).parent.parent / Path(where).name[:-len(".npz")])
                       for where in glob.glob(str(sidecar_path(pattern))))
        if not alone:
            raise
        return alone


def _files(pattern: str, name: str, input_format: str | None) -> list[tuple[str, str, str | None]]:
    return [(path, name, input_format) for path in input_paths(pattern)]


def _read_all(jobs: list, workers: int, name: str, progress: bool, began: float) -> Iterator[FileColumns]:
    if workers <= 1 or len(jobs) <= 1:
        results: Iterator[FileColumns] = map(_read_one, jobs)
    else:
        pool = ProcessPoolExecutor(max_workers=min(workers, len(jobs)))
        results = pool.map(_read_one, jobs)
    shown = began
    for done, columns in enumerate(results, 1):
        now = time.monotonic()
        if progress and (now - shown >= PROGRESS_SECONDS or done == len(jobs)):
            shown = now
            print(f"  {name}: {done} / {len(jobs)} files read ({now - began:.0f} s)", file=sys.stderr, flush=True)
        yield columns
    if workers > 1 and len(jobs) > 1:
        pool.shutdown()


def load_dataset(name: str, impressions: str, conversions: str, input_format: str | None = None,
                 progress: bool = True, workers: int = DEFAULT_WORKERS) -> Dataset:
    """Reads ``conversions`` and ``impressions`` (file patterns) into a ``Dataset``; bad records are counted by
    reason (the measurement job writes them out; here only their number matters)."""
    began = time.monotonic()
    jobs = _files(conversions, "conversion", input_format) + _files(impressions, "impression", input_format)
    parts = list(_read_all(jobs, workers, name, progress, began))
    n_conversion_files = len(_files(conversions, "conversion", input_format))
    conv = _concatenated(parts[:n_conversion_files])
    imp = _concatenated(parts[n_conversion_files:])
    del parts
    dead = dict(conv.dead_letters)
    for reason, count in imp.dead_letters.items():
        dead[reason] = dead.get(reason, 0) + count
    return dataset_of_columns(name, conv, imp, conv.read + imp.read, dead)


def dataset_of_columns(name: str, conv: FileColumns, imp: FileColumns, read: int,
                       dead_letters: dict[str, int]) -> Dataset:
    """The ``Dataset`` of valid conversion and impression columns: converting devices, replay order, population."""
    # every device a number, in id order (UTF-8 byte order is code point order, the order of Python strings)
    ids, code = np.unique(np.concatenate([conv.device, imp.device]), return_inverse=True)
    code = code.reshape(-1)
    conv_code, imp_code = code[:conv.device.size], code[conv.device.size:]
    queriers = sorted({kind[1] for kind in conv.kinds})
    querier_of_kind = np.array([queriers.index(kind[1]) for kind in conv.kinds] or [0], dtype=np.int64)
    conv_querier = querier_of_kind[conv.kind] if conv.kind.size else conv.kind
    n_ids = max(ids.size, 1)

    # the population: (querier, device) pairs that converted, and those with any event for the querier
    converted_pairs = np.unique(conv_querier * n_ids + conv_code)
    imp_pairs = []
    for q, querier in enumerate(queriers):
        advertisers = {kind[0] for kind in conv.kinds if kind[1] == querier}
        asks = np.array([kind[1] in advertisers for kind in imp.kinds] or [False], dtype=bool)
        chosen = asks[imp.kind] if imp.kind.size else np.zeros(0, dtype=bool)
        imp_pairs.append(q * n_ids + imp_code[chosen])
    any_pairs = np.unique(np.concatenate([converted_pairs, *imp_pairs]))
    times = np.concatenate([conv.time, imp.time])
    population = Population(
        any_event=dict(zip(queriers, np.bincount(any_pairs // n_ids, minlength=len(queriers)).tolist(), strict=True)),
        converted=dict(zip(queriers, np.bincount(converted_pairs // n_ids, minlength=len(queriers)).tolist(),
                           strict=True)),
        first_micros=int(times.min()) if times.size else None,
        last_micros=int(times.max()) if times.size else None,
    )

    # the converting devices, renumbered 0.. in id order; their events in replay order
    converting = np.unique(conv_code)
    renumber = np.full(max(ids.size, 1), -1, dtype=np.int64)
    renumber[converting] = np.arange(converting.size)
    conv_device = renumber[conv_code]
    conv_order = np.lexsort((conv.event_id, conv.time, conv_device))
    imp_device = renumber[imp_code]
    kept = np.flatnonzero(imp_device >= 0)
    imp_order = kept[np.lexsort((imp.event_id[kept], imp.time[kept], imp_device[kept]))]
    return Dataset(
        name=name, device_ids=ids[converting],
        conversion_device=conv_device[conv_order], conversion_time=conv.time[conv_order],
        conversion_id=conv.event_id[conv_order], conversion_value=conv.value[conv_order],
        conversion_kind=conv.kind[conv_order], conversion_kinds=conv.kinds,
        impression_device=imp_device[imp_order], impression_time=imp.time[imp_order],
        impression_id=imp.event_id[imp_order], impression_kind=imp.kind[imp_order], impression_kinds=imp.kinds,
        population=population, read=read, dead_letters=dead_letters,
        impressions=int(imp.time.size), conversions=int(conv.time.size),
    )


def dataset_of_events(name: str, events: list) -> Dataset:
    """The ``Dataset`` of valid event objects (tests, and data made in memory)."""
    def columns(rows: list, is_conversion: bool) -> FileColumns:
        kinds: dict[tuple, int] = {}
        kind = [kinds.setdefault((r.advertiser_site, r.querier_site, r.product_id, r.attribution_request)
                                 if is_conversion else
                                 (r.publisher_site, r.advertiser_site, r.campaign_id, r.product_id, r.filter_keys),
                                 len(kinds)) for r in rows]
        return FileColumns(_utf8([r.device_id for r in rows], "device id", name),
                           np.array([r.event_time_micros for r in rows], dtype=np.int64),
                           _utf8([r.conversion_id if is_conversion else r.impression_id for r in rows], "id", name),
                           np.array([r.value for r in rows] if is_conversion else [], dtype=np.float64),
                           np.array(kind, dtype=np.int64), list(kinds), len(rows))

    conversions = [e for e in events if type(e) is Conversion]
    impressions = [e for e in events if type(e) is Impression]
    return dataset_of_columns(name, columns(conversions, True), columns(impressions, False), len(events), {})
