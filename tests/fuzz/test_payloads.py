"""Fuzzing the CBOR payload decoders of ``schemas/aggregatable.py``: ``decode_payload`` (one by one) and
``decode_payloads`` (vectorised, the aggregation job's hot path).

Properties: a payload decodes to contributions within the limits (non-null, buckets below 2^128, values below 2^32,
filtering ids below 2^64, at most ``max_contributions`` of them summing to at most ``max_value_sum``) or raises a
``ReportError`` with a reason the module documents, and nothing else; ``decode_payloads`` gives, for every payload of
a batch, the same contributions or the same reason as ``decode_payload`` with the same limits; CBOR bombs (headers
announcing 2^64 items, nesting 100,000 deep, indefinite-length items never closed, shared references, huge bignums
and bigfloats) are refused while the decoder allocates a few MiB at most. Inputs: any CBOR document (tags, simple
values, byte and text strings, maps with any keys), the histogram shape with hostile entries, random bytes,
mutations of canonical payloads (which exercise the vectorised layout checks byte by byte), and limits from 1.

Examples: 600 and 400, about 4 s on one core (the folder: about 15 s, under 30 s).
"""
from __future__ import annotations

import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas import aggregatable
from schemas.aggregatable import PayloadLimits, ReportError, decode_payload, decode_payloads, encode_payload
from schemas.limits import MAX_PAYLOAD_BYTES, MAX_PAYLOAD_ENTRIES
from tests.support.hostile_inputs import FUZZ, cbor_bombs, cbor_payloads, documented_reasons, mutations

REASONS = documented_reasons(aggregatable.__doc__)
contributions = st.lists(st.tuples(st.integers(0, 2**128 - 1) | st.sampled_from([0, 1]),
                                   st.integers(0, 2**32 - 1) | st.sampled_from([0, 1, 65_536]),
                                   st.integers(0, 255)), max_size=22)
canonical = st.builds(encode_payload, contributions, st.sampled_from([0, 20]))  # the vectorised layout (< 24 entries)
other_layouts = st.builds(encode_payload, contributions, st.sampled_from([0, 20]), st.sampled_from([2, 8]))
payloads = (canonical | canonical.flatmap(mutations) | other_layouts | cbor_payloads() | st.binary(max_size=80)
            | st.sampled_from(cbor_bombs()))
limits = st.builds(PayloadLimits, st.integers(1, 25), st.integers(1, 2**33)) | st.just(PayloadLimits())


def outcome(payload: bytes, limit: PayloadLimits) -> list | str:
    """What ``decode_payload`` makes of ``payload``: its contributions, or its dead-letter reason."""
    try:
        found = decode_payload(payload, limit)
    except ReportError as error:
        assert REASONS.fullmatch(error.reason), error.reason
        return error.reason
    assert len(found) <= limit.max_contributions and sum(value for _, value, _ in found) <= limit.max_value_sum
    for bucket, value, filtering_id in found:
        assert 0 <= bucket < 2**128 and 0 <= value < 2**32 and 0 <= filtering_id < 2**64 and (bucket or value)
    return found


@settings(FUZZ, max_examples=600)
@given(payload=payloads, limit=limits)
def test_a_payload_decodes_within_the_limits_or_gives_a_documented_reason(payload, limit):
    outcome(payload, limit)


@settings(FUZZ, max_examples=400)
@given(batch=st.lists(payloads, max_size=12), limit=limits)
def test_decoding_a_batch_together_equals_decoding_each_payload(batch, limit):
    columns = decode_payloads(batch, limit)
    found: dict[int, list] = {}
    for owner, high, low, value, filtering_id in zip(*(column.tolist() for column in columns[:5]), strict=True):
        found.setdefault(owner, []).append(((high << 64) | low, value, filtering_id))
    assert set(found).isdisjoint(columns.errors)
    for index, payload in enumerate(batch):
        assert columns.errors.get(index, found.get(index, [])) == outcome(payload, limit), index


@pytest.mark.parametrize("bomb", cbor_bombs(), ids=range(len(cbor_bombs())))
def test_a_cbor_bomb_is_refused_within_a_few_mebibytes(bomb):
    tracemalloc.start()
    try:
        reason = outcome(bomb, PayloadLimits())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert reason in ("malformed_payload", "too_many_payload_entries", "oversized_field:payload")
    assert peak < 2 * len(bomb) + 4 * 2**20


def test_a_payload_padded_to_the_largest_allowed_size_is_read_and_one_more_entry_is_refused():
    padded = encode_payload([(7, 3, 0)], pad_to=MAX_PAYLOAD_ENTRIES, filtering_id_bytes=8)
    assert len(padded) < MAX_PAYLOAD_BYTES and decode_payload(padded) == [(7, 3, 0)]
    assert outcome(encode_payload([(7, 3, 0)], pad_to=MAX_PAYLOAD_ENTRIES + 1), PayloadLimits()) == "too_many_payload_entries"
    assert outcome(bytes(MAX_PAYLOAD_BYTES + 1), PayloadLimits()) == "oversized_field:payload"
