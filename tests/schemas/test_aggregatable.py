"""The Aggregation Service formats: shared_info, CBOR payloads (built with cbor2 directly), HPKE, key files."""
from __future__ import annotations

import json
from collections import Counter

import cbor2
import pytest

from schemas.aggregatable import (
    PayloadDecrypter,
    ReportError,
    bucket_bytes,
    bucket_from_bytes,
    decode_payload,
    encode_payload,
    encrypt_payload,
    generate_key_pair,
    minimal_bucket_bytes,
    parse_shared_info,
    read_key_file,
    shared_info_json,
    write_key_file,
)
from schemas.rows import version_at_least

RID = "6b3f1e0c-1d2a-4c5b-9e8f-0a1b2c3d4e5f"


def _info(**changes) -> str:
    info = {"api": "attribution-reporting", "attribution_destination": "https://shop.test", "report_id": RID,
            "reporting_origin": "https://adtech.test", "scheduled_report_time": "1700000000",
            "source_registration_time": "1699920000", "version": "1.0"}
    info.update(changes)
    return json.dumps({k: v for k, v in info.items() if v is not None})


def _reason(call) -> str:
    with pytest.raises(ReportError) as caught:
        call()
    return caught.value.reason


def test_shared_info_fields_are_parsed():
    info = parse_shared_info(_info(debug_mode="enabled"))
    assert info.api == "attribution-reporting" and info.version == "1.0" and info.report_id == RID
    assert info.scheduled_report_time == 1_700_000_000 and info.source_registration_time == "1699920000"
    assert info.attribution_destination == "https://shop.test" and info.debug_mode is True


def test_shared_info_of_private_aggregation_needs_no_destination():
    info = parse_shared_info(_info(api="shared-storage", attribution_destination=None, source_registration_time=None))
    assert info.attribution_destination is None and info.source_registration_time is None and not info.debug_mode


@pytest.mark.parametrize(
    "text, reason",
    [
        ("{not json", "malformed_shared_info"),
        ("[1, 2]", "malformed_shared_info"),
        (_info(version=None), "missing_field:version"),
        (_info(version="one"), "invalid_field:version"),
        (_info(version="2.0"), "unsupported_version"),
        (_info(api="topics"), "unknown_api"),
        (_info(report_id=None), "missing_field:report_id"),
        (_info(report_id="not-a-uuid"), "invalid_field:report_id"),
        (_info(reporting_origin=""), "invalid_field:reporting_origin"),
        (_info(scheduled_report_time=None), "missing_field:scheduled_report_time"),
        (_info(scheduled_report_time=1700000000.5), "invalid_field:scheduled_report_time"),
        (_info(scheduled_report_time=-5), "invalid_field:scheduled_report_time"),
        (_info(scheduled_report_time=True), "invalid_field:scheduled_report_time"),
        (_info(scheduled_report_time="-5"), "invalid_field:scheduled_report_time"),
        (_info(source_registration_time="soon"), "invalid_field:source_registration_time"),
        (_info(attribution_destination=None), "missing_field:attribution_destination"),
        (_info(debug_mode="yes"), "invalid_field:debug_mode"),
    ],
)
def test_each_shared_info_problem_has_its_reason(text, reason):
    assert _reason(lambda: parse_shared_info(text)) == reason


def test_times_may_be_integral_json_numbers_as_the_services_own_test_data_writes_them():
    """The Aggregation Service's library test sets write ``"scheduled_report_time":1640995200.000000000``."""
    text = _info(scheduled_report_time=0, source_registration_time=1640995100).replace(
        '"scheduled_report_time": 0', '"scheduled_report_time": 1640995200.000000000')
    info = parse_shared_info(text)
    assert (info.scheduled_report_time, info.source_registration_time) == (1640995200, "1640995100")


def test_version_zero_is_supported_and_compared():
    assert parse_shared_info(_info(version="0.1")).version == "0.1"
    assert version_at_least("1.0", 1, 0) and not version_at_least("0.1", 1, 0)


def test_shared_info_json_is_compact_sorted_and_parses_back():
    text = shared_info_json(api="attribution-reporting", report_id=RID, reporting_origin="https://a.test",
                            scheduled_report_time=1700000000, attribution_destination="https://b.test", debug_mode=True)
    assert list(json.loads(text)) == sorted(json.loads(text)) and " " not in text
    assert parse_shared_info(text).debug_mode


def _payload(data, operation="histogram") -> bytes:
    return cbor2.dumps({"operation": operation, "data": data})


def _entry(bucket: int, value: int, fid: bytes | None = b"\0", size: int = 16) -> dict:
    entry = {"bucket": bucket.to_bytes(size, "big"), "value": value.to_bytes(4, "big")}
    if fid is not None:
        entry["id"] = fid
    return entry


def test_payload_built_with_cbor2_decodes_and_drops_null_contributions():
    data = [_entry(2**127 + 1, 7), _entry(0, 0), _entry(5, 0), _entry(0, 9, fid=b"\x00\x03"), _entry(3, 1, fid=None)]
    assert decode_payload(_payload(data)) == [(2**127 + 1, 7, 0), (5, 0, 0), (0, 9, 3), (3, 1, 0)]


def test_short_bucket_and_value_bytes_are_big_endian_numbers():
    entry = {"bucket": b"\x01\x00", "value": b"\x02", "id": b"\x00\x00\x00\x00\x00\x00\x00\x05"}
    assert decode_payload(_payload([entry])) == [(256, 2, 5)]


def test_encoded_payload_round_trips_with_padding_in_canonical_order():
    contributions = [(9, 100, 0), (2**128 - 1, 65436, 1)]  # values summing to the bound L1 = 65536
    payload = encode_payload(contributions, pad_to=20)
    assert cbor2.loads(payload)["data"][0] == {"id": b"\0", "value": (100).to_bytes(4, "big"), "bucket": (9).to_bytes(16, "big")}
    assert len(cbor2.loads(payload)["data"]) == 20
    assert decode_payload(payload) == contributions
    assert decode_payload(encode_payload([], pad_to=20)) == []


def test_the_null_padding_shortcut_gives_the_same_contributions_as_a_full_decode():
    # Null entries in the middle, at the end, and in insertion key order: the shortcut only cuts the final run.
    data = [_entry(1, 1), _entry(0, 0), _entry(2, 2)] + [{"id": b"\0", "value": bytes(4), "bucket": bytes(16)}] * 5
    assert decode_payload(cbor2.dumps({"data": data, "operation": "histogram"}, canonical=True)) == [(1, 1, 0), (2, 2, 0)]
    assert decode_payload(_payload(data)) == [(1, 1, 0), (2, 2, 0)]


@pytest.mark.parametrize(
    "payload, reason",
    [
        (b"\xff\x00garbage", "malformed_payload"),
        (cbor2.dumps([1, 2]), "malformed_payload"),
        (cbor2.dumps({"operation": "histogram"}), "malformed_payload"),
        (_payload([_entry(1, 1)], operation="sum"), "wrong_operation"),
        (_payload([{"bucket": bytes(17), "value": bytes(4)}]), "malformed_payload"),
        (_payload([{"bucket": bytes(16), "value": bytes(5)}]), "malformed_payload"),
        (_payload([{"bucket": bytes(16), "value": bytes(4), "id": bytes(9)}]), "malformed_payload"),
        (_payload([{"bucket": 5, "value": bytes(4)}]), "malformed_payload"),
        (_payload([{"value": bytes(4)}]), "malformed_payload"),
        (_payload(["not a map"]), "malformed_payload"),
    ],
)
def test_each_payload_problem_has_its_reason(payload, reason):
    assert _reason(lambda: decode_payload(payload)) == reason


def test_hpke_round_trip_binds_the_shared_info():
    private, public = generate_key_pair()
    info = _info()
    plaintext = encode_payload([(1, 2, 0)], pad_to=20)
    sealed = encrypt_payload(plaintext, info, public)
    decrypter = PayloadDecrypter({"k1": private})
    assert decrypter.decrypt(sealed, info, "k1") == plaintext
    assert decrypter.decrypt(sealed, info, "any id: a single key opens every report") == plaintext
    assert _reason(lambda: decrypter.decrypt(sealed, info.replace("1700000000", "1700000001"), "k1")) == "undecryptable_payload"
    assert _reason(lambda: decrypter.decrypt(sealed[:-1] + bytes([sealed[-1] ^ 1]), info, "k1")) == "undecryptable_payload"
    assert _reason(lambda: decrypter.decrypt(sealed[:20], info, "k1")) == "undecryptable_payload"
    other_private, _ = generate_key_pair()
    assert _reason(lambda: PayloadDecrypter({"other": other_private}).decrypt(sealed, info, "k1")) == "undecryptable_payload"


def test_with_several_keys_the_key_id_chooses_and_unknown_ids_are_dead_letters():
    (first, first_public), (second, _) = generate_key_pair(), generate_key_pair()
    info = _info()
    sealed = encrypt_payload(b"payload", info, first_public)
    decrypter = PayloadDecrypter({"a": first, "b": second})
    assert decrypter.decrypt(sealed, info, "a") == b"payload"
    assert _reason(lambda: decrypter.decrypt(sealed, info, "b")) == "undecryptable_payload"
    assert _reason(lambda: decrypter.decrypt(sealed, info, "c")) == "unknown_key_id"


def test_key_files_round_trip_and_bad_files_are_named(tmp_path):
    private, public = generate_key_pair()
    path = tmp_path / "keys.json"
    write_key_file(str(path), {"k1": private})
    assert read_key_file(str(path)) == {"k1": private}
    assert json.loads(path.read_text())["keys"][0]["id"] == "k1"
    (tmp_path / "bad.json").write_text('{"keys": [{"id": "x", "key": "AAAA"}]}')
    with pytest.raises(ValueError, match="32-byte"):
        read_key_file(str(tmp_path / "bad.json"))
    (tmp_path / "worse.json").write_text("[]")
    with pytest.raises(ValueError, match="is not"):
        read_key_file(str(tmp_path / "worse.json"))
    with pytest.raises(ValueError, match="cannot read"):
        read_key_file(str(tmp_path / "missing.json"))


def test_bucket_byte_forms():
    assert bucket_bytes(1) == bytes(15) + b"\x01"
    assert minimal_bucket_bytes(0) == b"\x00" and minimal_bucket_bytes(256) == b"\x01\x00"
    assert bucket_from_bytes(bytes(15) + b"\x07") == 7
    assert _reason(lambda: bucket_from_bytes(bytes(17))) == "malformed_bucket"
    assert _reason(lambda: bucket_from_bytes(b"")) == "malformed_bucket"


def test_decoding_many_payloads_together_equals_decoding_each():
    """The vectorised path (canonical layout) and the fallback (every other encoding, bad payloads) together give
    what ``decode_payload`` gives payload by payload, reasons included, under the same limits."""
    import random

    from schemas.aggregatable import PayloadLimits, decode_payloads

    rng = random.Random(1)
    limits = PayloadLimits(max_contributions=15, max_value_sum=2**17)
    payloads = []
    for index in range(1500):
        bits = rng.choice([12, 12, 12, 32])  # a quarter of the payloads over the value sum bound
        contributions = [(rng.getrandbits(128), rng.getrandbits(bits), rng.choice([0, 0, 1]))
                         for _ in range(rng.randint(0, 20))]
        if index % 7 == 0:
            contributions = [(0, 0, 0), *contributions, (5, 0, 0), (0, 3, 0)]
        kind = index % 6
        if kind == 0:
            payload = encode_payload(contributions, pad_to=20)
        elif kind == 1:
            payload = encode_payload(contributions)
        elif kind == 2:
            payload = encode_payload(contributions, filtering_id_bytes=2)
        elif kind == 3:
            payload = _payload([_entry(b, v, bytes([f])) for b, v, f in contributions])
        elif kind == 4:
            payload = encode_payload(contributions, pad_to=20)[:-3]
        else:
            payload = encode_payload(contributions, pad_to=20).replace(b"histogram", b"histogrum")
        payloads.append(payload)
    columns = decode_payloads(payloads, limits)
    found: dict[int, list] = {}
    for owner, high, low, value, fid in zip(columns.owner.tolist(), columns.high.tolist(), columns.low.tolist(),
                                            columns.values.tolist(), columns.filtering_ids.tolist(), strict=True):
        found.setdefault(owner, []).append(((high << 64) | low, value, fid))
    for index, payload in enumerate(payloads):
        try:
            expected = decode_payload(payload, limits)
        except ReportError as error:
            expected = error.reason
        assert columns.errors.get(index, found.get(index, [])) == expected, index
    reasons = Counter(columns.errors.values())
    assert reasons["malformed_payload"] + reasons["wrong_operation"] == 500
    assert reasons["too_many_contributions"] > 50 and reasons["value_sum_over_bound"] > 50
    assert len(found) > 300 and decode_payloads([]).owner.size == 0


def test_the_browser_serialisation_shortcut_agrees_with_the_json_path():
    """shared_info in a browser's exact serialisation is read by one regular expression; every text must give
    the same fields (or reason) as decoding the JSON and checking field by field."""
    import orjson

    from schemas.aggregatable import _checked_shared_info

    def slow(text: str):
        try:
            info = orjson.loads(text)
            if type(info) is not dict:
                return "malformed_shared_info"
            return _checked_shared_info(info)
        except orjson.JSONDecodeError:
            return "malformed_shared_info"
        except ReportError as error:
            return error.reason

    def fast(text: str):
        try:
            return parse_shared_info(text)
        except ReportError as error:
            return error.reason

    base = dict(api="attribution-reporting", report_id=RID.upper(), reporting_origin="https://adtech.test",
                scheduled_report_time=1_700_000_000, attribution_destination="https://shop.test")
    texts = [
        shared_info_json(**base),
        shared_info_json(**base, debug_mode=True, source_registration_time=1_699_920_000, version="0.1"),
        shared_info_json(**dict(base, api="shared-storage", attribution_destination=None)),
        shared_info_json(**dict(base, api="protected-audience")),  # a destination the api does not use
        shared_info_json(**dict(base, reporting_origin="   ")),
        shared_info_json(**dict(base, attribution_destination=" ")),
        shared_info_json(**dict(base, api="attribution-reporting-debug", attribution_destination=None)),
        shared_info_json(**dict(base, reporting_origin="https://ädtech.test")),
        shared_info_json(**base).replace("adtech", r"ad\u0074ech"),  # an escape: the JSON path
        shared_info_json(**base).replace("1.0", "1.00"),
        shared_info_json(**base).replace("1.0", "2.0"),
        shared_info_json(**base).replace('"1700000000"', '"17000000000000"'),
        shared_info_json(**base).replace('"}', '","extra":"x"}'),
        shared_info_json(**base).replace("https://adtech.test", "https://adtech.test\n"),
        shared_info_json(**base).replace(RID.upper(), RID + r"\n"),
        shared_info_json(**base)[:-1],
        json.dumps(json.loads(shared_info_json(**base)), indent=1),
    ]
    for text in texts:
        assert fast(text) == slow(text), text
