"""Building aggregatable report files for the aggregation tests (the formats of schemas/aggregatable.py)."""
from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path

import fastavro

from schemas.aggregatable import (
    encode_payload,
    encrypt_payload,
    generate_key_pair,
    report_record,
    shared_info_json,
    write_key_file,
)
from schemas.formats import load_avro_schema
from schemas.rows import API_ATTRIBUTION_REPORTING

NOW = 1_700_000_000  # the job time of the tests, in seconds
ORIGIN = "https://adtech.test"
DESTINATION = "https://shop.test"


def report_id(number: int) -> str:
    """A deterministic UUID for report ``number``."""
    return str(uuid.UUID(int=number + 1, version=4))


def shared_info(number: int, *, scheduled: int = NOW - 3600, api: str = API_ATTRIBUTION_REPORTING, version: str = "1.0",
                origin: str = ORIGIN, destination: str | None = DESTINATION, debug: bool = False, rid: str | None = None) -> str:
    return shared_info_json(api=api, report_id=rid or report_id(number), reporting_origin=origin,
                            scheduled_report_time=scheduled, version=version,
                            attribution_destination=destination if api.startswith("attribution") else None,
                            debug_mode=debug)


def record(info: str, contributions: Sequence[tuple[int, int, int]], public_key: bytes | None = None, pad_to: int = 20,
           key_id: str = "key-1") -> dict:
    """An AggregatableReport record: clear-text payload, or HPKE-encrypted to ``public_key``."""
    payload = encode_payload(contributions, pad_to=pad_to)
    if public_key is not None:
        payload = encrypt_payload(payload, info, public_key)
    return report_record(info, payload, key_id)


def write_avro(path: str, records: Iterable[dict], schema: str = "aggregatable_report") -> str:
    with open(path, "wb") as handle:
        fastavro.writer(handle, load_avro_schema(schema), list(records))
    return path


def encrypted_ara_reports(data: Path) -> None:
    """A key pair (``data/public.json``, ``data/private.json``, key id ``key-1``) and the ARA summary client's
    reports of ``data/ara`` encrypted to it in ``data/reports``: the aggregation job's input on a runner."""
    from pipelines.summary_client import main as summary_client

    private, public = generate_key_pair()
    write_key_file(str(data / "public.json"), {"key-1": public})
    write_key_file(str(data / "private.json"), {"key-1": private})
    assert summary_client(["ara", "--sources", str(data / "ara" / "sources-*"), "--triggers",
                           str(data / "ara" / "triggers-*"), "--public-key", str(data / "public.json"),
                           "--output", str(data / "reports"), "--seed", "1"]) == 0
