"""Fuzzing the aggregatable-report Avro path of the aggregation job: an Avro file read with ``open_avro``
(``schemas/avro_files.py``), each record through ``report_fields`` and ``parse_shared_info``, then its payload
through ``decode_payloads`` (``schemas/aggregatable.py``), in the job's order.

Property: every record of a well-formed file becomes a report with contributions within the limits, or one
``ReportError`` with a reason the module documents; a corrupt file ends with one error; nothing else is raised.
Inputs: records written with a loose writer schema (any field of any type, missing, or extra), payloads past the
byte bound and CBOR bombs, key ids past their bound, shared_info mutated or past its bound, and random or mutated
files.

Examples: 300 and 200, about 2 s on one core (the folder: about 15 s, under 30 s).
"""
from __future__ import annotations

import contextlib
import io

import fastavro
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas import aggregatable
from schemas.aggregatable import (
    PayloadLimits,
    ReportError,
    decode_payloads,
    encode_payload,
    parse_shared_info,
    report_fields,
    report_record,
    shared_info_json,
)
from schemas.avro_files import open_avro
from schemas.formats import load_avro_schema
from schemas.limits import MAX_KEY_ID_CHARS, MAX_PAYLOAD_BYTES
from tests.support.hostile_inputs import (
    AVRO_VALUES,
    FUZZ,
    cbor_bombs,
    cbor_payloads,
    documented_reasons,
    hostile_records,
    loose_schema,
    mutations,
)

REASONS = documented_reasons(aggregatable.__doc__)
INFO = shared_info_json(api="protected-audience", report_id="6b3f1e0c-1d2a-4c5b-9e8f-0a1b2c3d4e5f",
                        reporting_origin="https://adtech.test", scheduled_report_time=1_700_000_000)
VALID = report_record(INFO, encode_payload([(5, 7, 0)], pad_to=20), "k1")
LIMITS = PayloadLimits()
field_values = (AVRO_VALUES | cbor_payloads() | st.sampled_from(cbor_bombs() + [bytes(MAX_PAYLOAD_BYTES + 1)])
                | mutations(INFO.encode()).map(lambda data: data.decode("utf-8", "replace"))
                | st.just("k" * (MAX_KEY_ID_CHARS + 1)))


def reports_of(records: list) -> list:
    """The job's per-record outcome: ``(shared_info, contributions)`` or the dead-letter reason."""
    outcomes: list = []
    payloads, owners = [], []
    for record in records:
        try:
            payload, _, text = report_fields(record)
            outcomes.append(parse_shared_info(text))
        except ReportError as error:
            outcomes.append(error.reason)
            continue
        payloads.append(payload)
        owners.append(len(outcomes) - 1)
    decoded = decode_payloads(payloads, LIMITS)
    for index, owner in enumerate(owners):
        reason = decoded.errors.get(index)
        outcomes[owner] = reason if reason is not None else (outcomes[owner], decoded.values[decoded.owner == index])
    return outcomes


def checked(outcomes: list) -> None:
    for outcome in outcomes:
        if isinstance(outcome, str):
            assert REASONS.fullmatch(outcome), outcome
        else:
            values = outcome[1]
            assert values.size <= LIMITS.max_contributions and int(values.sum()) <= LIMITS.max_value_sum


@settings(FUZZ, max_examples=300)
@given(records=st.lists(hostile_records(VALID, field_values), min_size=1, max_size=4))
def test_every_record_of_any_writer_schema_is_a_report_or_a_documented_dead_letter(records):
    out = io.BytesIO()
    fastavro.writer(out, loose_schema("AggregatableReport", VALID), records)  # fields it does not name are left out
    read = list(open_avro(io.BytesIO(out.getvalue())))
    assert len(read) == len(records)
    checked(reports_of(read))


def _valid_file() -> bytes:
    out = io.BytesIO()
    fastavro.writer(out, load_avro_schema("aggregatable_report"), [VALID, VALID])
    return out.getvalue()


@settings(FUZZ, max_examples=200)
@given(data=st.binary(max_size=64) | mutations(_valid_file()))
def test_a_random_or_mutated_report_file_gives_reports_dead_letters_or_one_error(data):
    records: list = []
    with contextlib.suppress(Exception):  # any error ends the file: the job's one malformed_avro dead letter
        records.extend(open_avro(io.BytesIO(data)))
    checked(reports_of(records))
