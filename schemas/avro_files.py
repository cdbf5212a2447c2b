"""Avro container files from outside, read with two guards fastavro does not have.

* **The writer schema.** ``open_avro`` refuses a file whose writer schema is recursive (a record that holds itself)
  or nested deeper than ``MAX_SCHEMA_DEPTH``. fastavro's compiled decoder follows nested values on the C stack: a
  recursive schema lets a 100 KB file nest records 100,000 deep and crash the process with a segmentation fault
  before any record reaches Python. Every schema the project reads is a few levels deep.
* **Compressed blocks.** A block is decompressed into at most ``MAX_BLOCK_BYTES``; a larger one is refused. fastavro
  inflates a block whole, so a 200 KB deflate block can hold a 200 MB record (and its dead letter). Writers cut
  blocks at about 16 KB (fastavro, Beam) to 64 KB (Java Avro) of records. The bounded readers replace fastavro's
  ``deflate``, ``bzip2`` and ``xz`` block readers, for every fastavro reader of the process, when this module is
  imported; the xz decoder's own memory (its dictionary, which the stream declares) is bounded as well.

A refused file raises ``ValueError`` from ``open_avro`` or while its records are read, which the readers turn into
their ``malformed_avro`` dead letter (the rest of the file is lost, as for any corrupt block).
"""
from __future__ import annotations

import bz2
import io
import lzma
import zlib
from collections.abc import Callable
from typing import IO, Any

import fastavro
import fastavro.read

MAX_SCHEMA_DEPTH = 32  # nested records, arrays, maps and unions of a writer schema
MAX_BLOCK_BYTES = 64 * 2**20  # a block's records, decompressed


def open_avro(handle: IO[bytes]) -> Any:
    """fastavro's reader of the container file ``handle``, once its writer schema passed ``schema_problem``;
    ``ValueError`` naming the problem otherwise (fastavro raises its own errors for a corrupt header)."""
    reader = fastavro.reader(handle)
    problem = schema_problem(reader.writer_schema)
    if problem is not None:
        raise ValueError(problem)
    return reader


def schema_problem(schema: Any, enclosing: tuple = (), depth: int = 0) -> str | None:
    """Why a (parsed, fully qualified) writer schema cannot be read safely, or None: a named type used inside its
    own definition (``enclosing`` holds the records being defined around ``schema``), or nesting deeper than
    ``MAX_SCHEMA_DEPTH``."""
    if depth > MAX_SCHEMA_DEPTH:
        return f"writer schema nested deeper than {MAX_SCHEMA_DEPTH} levels"
    if isinstance(schema, str):
        return f"recursive writer schema: {schema} holds itself" if schema in enclosing else None
    if isinstance(schema, list):
        inner = schema
    elif isinstance(schema, dict):
        kind = schema.get("type")
        if kind in ("record", "error"):
            enclosing += (schema.get("name"),)
            inner = [field.get("type") for field in schema.get("fields", ())]
        else:
            inner = [schema.get("items") if kind == "array" else schema.get("values") if kind == "map" else kind]
    else:
        return None
    for part in inner:
        problem = schema_problem(part, enclosing, depth + 1)
        if problem is not None:
            return problem
    return None


def _read_long(handle: IO[bytes]) -> int:
    """An Avro ``long`` (zig-zag varint) read from ``handle``."""
    shift = result = 0
    while True:
        byte = handle.read(1)
        if not byte:
            raise EOFError("Avro block length cut short")
        result |= (byte[0] & 0x7F) << shift
        if byte[0] < 0x80:
            return (result >> 1) ^ -(result & 1)
        shift += 7
        if shift > 63:
            raise ValueError("Avro block length longer than 64 bits")


def _block_bytes(source: Any) -> bytes:
    """A block's compressed bytes: fastavro's compiled reader passes its file, the pure-Python one its decoder."""
    if hasattr(source, "read_bytes"):
        return source.read_bytes()
    size = _read_long(source)
    if size < 0:
        raise ValueError("negative Avro block length")
    return source.read(size)


def _bounded(decompressor: Callable[[], Any]) -> Callable[[Any], io.BytesIO]:
    """A fastavro block reader that decompresses with ``decompressor()`` into at most ``MAX_BLOCK_BYTES``."""
    def read_block(source: Any) -> io.BytesIO:
        data = decompressor().decompress(_block_bytes(source), MAX_BLOCK_BYTES + 1)
        if len(data) > MAX_BLOCK_BYTES:
            raise ValueError(f"Avro block decompresses to more than {MAX_BLOCK_BYTES} bytes")
        return io.BytesIO(data)

    return read_block


fastavro.read.BLOCK_READERS.update({
    "deflate": _bounded(lambda: zlib.decompressobj(-15)),  # raw deflate, as the Avro specification writes it
    "bzip2": _bounded(bz2.BZ2Decompressor),
    # xz declares its dictionary in the stream (up to 1.5 GiB): the decoder's memory is bounded too (preset 9 uses 64 MiB)
    "xz": _bounded(lambda: lzma.LZMADecompressor(memlimit=2 * MAX_BLOCK_BYTES)),
})
