"""Locations of the schema files shipped with the package."""
from __future__ import annotations

import json
from pathlib import Path
from typing import cast

import fastavro

SCHEMA_DIR = Path(__file__).resolve().parent
PROTO_DIR = SCHEMA_DIR / "proto"
AVRO_DIR = SCHEMA_DIR / "avro"


def load_avro_schema(name: str) -> dict:
    """The parsed Avro schema ``schemas/avro/<name>.avsc`` (for example ``join_event``), its keys in a fixed order.

    ``fastavro.parse_schema`` copies a field's optional properties (doc, default, ...) in the order of a set, which
    changes with ``PYTHONHASHSEED``, and writers store the parsed schema as the file header: without the fixed
    order two runs would write the same records under differently ordered headers."""
    with open(AVRO_DIR / f"{name}.avsc", encoding="utf-8") as handle:
        schema = cast(dict, fastavro.parse_schema(json.load(handle)))  # every .avsc here is a record: a dict
    _sort_keys(schema)
    return schema


def _sort_keys(value) -> None:
    """Orders every dict inside ``value`` by key, in place (the parsed schema shares dicts between its named
    types and its fields, so they must stay the same objects)."""
    if isinstance(value, dict):
        items = sorted(value.items())
        value.clear()
        value.update(items)
        for item in value.values():
            _sort_keys(item)
    elif isinstance(value, list):
        for item in value:
            _sort_keys(item)
