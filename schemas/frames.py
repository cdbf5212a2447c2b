"""Event-level sources as columns (polars): the Avro fast path, and the frame sources travel in.

**Reading.** ``schemas.codecs.read_avro`` decodes a record into a dict and validates it in Python: about 8
microseconds for an event-level source with its nested arrays. ``read_frame`` decodes a whole container file
into a polars ``DataFrame`` in compiled code instead (under 1 microsecond a source), and
``split_event_level_sources`` judges all its records at once. The columnar path is an exact shortcut of the row
path, never a second definition of validity:

* it is taken only when polars reads the file and every field of the spec comes out with the column type the
  project's own schema gives it (``EVENT_LEVEL_SOURCE_COLUMNS``); files written with another schema, a codec
  polars does not read (bzip2, xz, zstandard) or a corrupt block, or on which polars panics (a writer schema with
  a map, some corrupt blocks), return None and go through ``read_avro``;
  so does every file when polars is not installed (``COLUMNAR`` is False): the row path gives the same rows
  and dead letters, only slower;
* the vectorised test accepts a subset of what the row path's ``accept`` accepts (printable ASCII
  identifiers), and builds for those records the very values ``accept`` would; every other record is handed
  back, with its position in the file, for ``codecs.avro_record``, so it becomes the same row or the same dead
  letter as on the row path.

**Frames.** A source frame (``SOURCE_FRAME_COLUMNS``) holds ``EventLevelSource`` rows column by column, the
rows' defaults applied; ``sources_frame`` and ``source_rows`` convert both ways, ``frame_bytes`` and
``frame_of_bytes`` move a frame between pipeline stages as Arrow IPC. A whole file is held in memory while it
is read: about 600 bytes a source at the peak (150 MB measured for a file of 240,000 sources), so very large
inputs should come as several files, as they should anyway (files are the unit of parallelism).
"""
from __future__ import annotations

import io
from collections.abc import Sequence
from typing import IO, NamedTuple, cast

import pyarrow as pa

from schemas.limits import MAX_EXPIRY_SECONDS
from schemas.rows import EventLevelSource, TriggerSpec
from schemas.time_units import MAX_EVENT_TIME_MICROS

try:
    import polars as pl
except ImportError:  # a shortcut, not a requirement, of reading: ``read_frame`` then leaves every file to the row path
    pl = None  # type: ignore[assignment]

POSITION = "position"  # a record's index in its file (dead letters name it)
COLUMNAR = pl is not None  # whether polars is installed, so that the columnar path can be taken


def _event_level_source_columns() -> dict[str, pl.DataType]:
    """Every field of schemas/avro/event_level_source.avsc with the polars type it decodes to (none without
    polars)."""
    if pl is None:
        return {}
    return {
        "device_id": pl.String(),
        "event_time_micros": pl.Int64(),
        "source_id": pl.String(),
        "reporting_origin": pl.String(),
        "destination": pl.String(),
        "source_type": pl.String(),
        "expiry_seconds": pl.Int64(),
        "priority": pl.Int64(),
        "filter_data": pl.List(pl.String()),
        "max_event_level_reports": pl.Int32(),
        "trigger_data_matching": pl.String(),
        "trigger_specs": pl.List(pl.Struct({
            "trigger_data": pl.List(pl.Int64()),
            "window_ends_seconds": pl.List(pl.Int64()),
            "summary_buckets": pl.List(pl.Int64()),
        })),
    }


EVENT_LEVEL_SOURCE_COLUMNS: dict[str, pl.DataType] = _event_level_source_columns()
# An identifier the columnar test accepts: printable ASCII with a non-space character (a subset of the row
# path's "non-blank ASCII", which also takes control characters and tabs).
_PRINTABLE = r"^[ -~]*$"
_VISIBLE = r"[!-~]"


def read_frame(handle: IO[bytes], columns: dict[str, pl.DataType]) -> pl.DataFrame | None:
    """The records of an Avro container file as a ``DataFrame`` of ``columns`` with a ``POSITION`` column, or
    None when the file is not for the columnar path (polars cannot read it, or a field is missing or decodes to
    another type), and always when polars is not installed."""
    if pl is None:
        return None
    try:
        frame = pl.read_avro(handle)
    # polars raises several types for unreadable files, and panics (a BaseException) on some writer schemas (maps)
    # and corrupt blocks: the row path judges them all
    except (Exception, pl.exceptions.PanicException):  # noqa: BLE001
        return None
    if any(frame.schema.get(name) != dtype for name, dtype in columns.items()):
        return None
    return frame.select(list(columns)).with_row_index(POSITION)


def _identifier(name: str) -> pl.Expr:
    column = pl.col(name)
    return column.is_not_null() & column.str.contains(_PRINTABLE) & column.str.contains(_VISIBLE)


class SourceSplit(NamedTuple):
    """``split_event_level_sources``' answer: ``rows``, the accepted records as a source frame with their
    ``POSITION``, and ``others``, the records the row path must judge, as (position, record dict)."""

    rows: pl.DataFrame
    others: list[tuple[int, dict]]


# A frame of ``EventLevelSource`` rows: one column per field, defaults applied as in the rows; ``trigger_specs``
# keeps the Avro shape (a list of {trigger_data, window_ends_seconds, summary_buckets}), null for the defaults.
SOURCE_FRAME_COLUMNS: dict[str, pl.DataType] = {
    **EVENT_LEVEL_SOURCE_COLUMNS, "max_event_level_reports": pl.Int64(),
} if pl is not None else {}
_SOURCE_SCHEMA = pl.DataFrame(schema=SOURCE_FRAME_COLUMNS).to_arrow().schema if pl is not None else None
_SOURCE_STRUCT = pa.struct([_SOURCE_SCHEMA.field(name) for name in EventLevelSource._fields]) if pl is not None else None


def split_event_level_sources(frame: pl.DataFrame) -> SourceSplit:
    """Splits a ``read_frame`` of event-level sources into the records the row path's ``accept`` turns into a row
    (printable identifiers; any trigger specs, which the file's schema already makes lists of 64-bit integers),
    built here column by column, and all the others."""
    accepted = (
        _identifier("device_id") & _identifier("source_id") & _identifier("reporting_origin")
        & _identifier("destination") & _identifier("source_type")
        & pl.col("event_time_micros").is_between(0, MAX_EVENT_TIME_MICROS, closed="left").fill_null(False)
        & (pl.col("trigger_data_matching").is_null() | pl.col("trigger_data_matching").str.contains(_PRINTABLE))
        & pl.col("filter_data").is_not_null()
        & pl.col("filter_data").list.eval(
            pl.element().str.contains(_PRINTABLE) & pl.element().str.contains(_VISIBLE)
        ).list.all().fill_null(False)
    )
    judged = frame.with_columns(accepted.fill_null(False).alias("_accepted"))
    specs = pl.col("trigger_specs")
    as_in_rows = {  # the row path's defaults; an empty list of trigger specs is the defaults too
        "expiry_seconds": pl.col("expiry_seconds").fill_null(MAX_EXPIRY_SECONDS),
        "priority": pl.col("priority").fill_null(0),
        "max_event_level_reports": pl.col("max_event_level_reports").cast(pl.Int64),
        "trigger_data_matching": pl.col("trigger_data_matching").fill_null(""),
        "trigger_specs": pl.when(specs.list.len() > 0).then(specs).otherwise(None),
    }
    rows = judged.filter(pl.col("_accepted")).select(
        POSITION, *(as_in_rows.get(name, pl.col(name)).alias(name) for name in SOURCE_FRAME_COLUMNS))
    others = judged.filter(~pl.col("_accepted")).drop("_accepted")
    return SourceSplit(rows, [(record.pop(POSITION), record) for record in others.to_dicts()] if others.height else [])


def frame_of_columns(columns: dict[str, list], schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """Python lists (tuples for list values) as a frame of ``schema``, built through Arrow: polars' own
    constructor takes several microseconds for every list value, ten times Arrow's."""
    arrow_schema = pl.DataFrame(schema=schema).to_arrow().schema
    return cast(pl.DataFrame, pl.from_arrow(pa.table(columns, schema=arrow_schema)))  # a Table (pyarrow is untyped)


def sources_frame(rows: Sequence[EventLevelSource]) -> pl.DataFrame:
    """Rows (of any reader) as a source frame. Each row is one value of a struct of the row's fields, its trigger
    specs a list of structs, which Arrow reads from the tuples themselves: four times faster than transposing
    the rows into columns in Python first (300,000 sources of the event-level benchmark, 0.29 s against 1.1 s)."""
    table = pa.Table.from_struct_array(pa.array(rows, type=_SOURCE_STRUCT))
    return cast(pl.DataFrame, pl.from_arrow(table)).select(list(SOURCE_FRAME_COLUMNS))


def trigger_specs_of(specs: list | None) -> tuple | None:
    """A frame's ``trigger_specs`` value as the row's (a tuple of ``TriggerSpec``, or None)."""
    if specs is None:
        return None
    return tuple(TriggerSpec(tuple(spec["trigger_data"]), tuple(spec["window_ends_seconds"]),
                             tuple(spec["summary_buckets"])) for spec in specs)


def source_rows(frame: pl.DataFrame) -> list[EventLevelSource]:
    """A source frame's rows, as the row path builds them (the frame's columns are the row's fields, in order)."""
    return [
        # a star-unpacked slice: mypy cannot count its items
        EventLevelSource(*values[:8], tuple(values[8]), values[9], values[10], trigger_specs_of(values[11]))  # type: ignore[call-arg]
        for values in frame.select(list(SOURCE_FRAME_COLUMNS)).iter_rows()
    ]


def frame_bytes(frame: pl.DataFrame) -> bytes:
    """A frame as Arrow IPC bytes, LZ4-compressed (a third of the size; uncompressed copies cost the runner more
    than the compression), to travel as one Beam element."""
    buffer = io.BytesIO()
    frame.write_ipc(buffer, compression="lz4")
    return buffer.getvalue()


def frame_of_bytes(payload: bytes) -> pl.DataFrame:
    """The frame ``frame_bytes`` wrote."""
    return pl.read_ipc(io.BytesIO(payload))
