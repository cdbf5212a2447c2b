"""Locations of the schema files shipped with the package."""
from __future__ import annotations

import json
from pathlib import Path

import fastavro

SCHEMA_DIR = Path(__file__).resolve().parent
PROTO_DIR = SCHEMA_DIR / "proto"
AVRO_DIR = SCHEMA_DIR / "avro"


def load_avro_schema(name: str) -> dict:
    """The parsed Avro schema ``schemas/avro/<name>.avsc`` (for example ``join_event``)."""
    with open(AVRO_DIR / f"{name}.avsc", encoding="utf-8") as handle:
        return fastavro.parse_schema(json.load(handle))
