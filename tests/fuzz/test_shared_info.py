"""Fuzzing ``parse_shared_info`` (``schemas/aggregatable.py``), which reads the one field of a report the browser
writes in clear and the service authenticates.

Properties: any value gives a ``SharedInfo`` whose fields are what the job uses them for (a lower-case UUID, a
supported version, a known api, a non-negative scheduled time, Unicode text from which a budget key can be hashed)
or a ``ReportError`` with a reason the module documents, and nothing else; the browser-serialisation fast path and
the JSON path agree (the same text re-serialised with spaces takes the JSON path). Inputs: mutations of a browser's
exact serialisation (bytes flipped, cut, inserted, decoded with lone surrogates kept), JSON objects with hostile
field values (NaN, infinities, 2^70, nesting, blank and lone-surrogate text) and duplicate keys, versions of
thousands of digits, text past the length bound, values that are not text.

Examples: 600 and 400, about 2 s on one core (the folder: about 15 s, under 30 s).
"""
from __future__ import annotations

import json
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from schemas import aggregatable
from schemas.aggregatable import SUPPORTED_MAJOR_VERSIONS, ReportError, parse_shared_info, shared_info_json
from schemas.limits import MAX_SHARED_INFO_CHARS
from schemas.rows import APIS, SharedInfo
from tests.support.hostile_inputs import FUZZ, JSON_VALUES, TEXT, documented_reasons, hostile_records, mutations
from transforms.summary_reports.mechanisms.aggregation import budget_key, report_identity, shared_id_fields

REASONS = documented_reasons(aggregatable.__doc__)
BROWSER = shared_info_json(api="attribution-reporting", report_id="6b3f1e0c-1d2a-4c5b-9e8f-0a1b2c3d4e5f",
                           reporting_origin="https://adtech.test", scheduled_report_time=1_700_000_000,
                           attribution_destination="https://shop.test", source_registration_time=1_699_920_000,
                           debug_mode=True)
FIELDS = json.loads(BROWSER)
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")

texts = (
    mutations(BROWSER.encode()).map(lambda data: data.decode("utf-8", "surrogateescape"))
    | st.builds(json.dumps, hostile_records(FIELDS, JSON_VALUES), sort_keys=st.booleans())
    | st.builds(lambda text, where: BROWSER.replace("https://adtech.test", text) if where else BROWSER.replace('"1.0"', text),
                TEXT | st.sampled_from(['"' + "1" * 5_000 + '.0"', '"0001.0"', '"x" * 9', "null"]), st.booleans())
    | st.just(BROWSER.replace("adtech", "a" * MAX_SHARED_INFO_CHARS)) | TEXT
)


def outcome(value: object) -> SharedInfo | str:
    """``parse_shared_info(value)`` after checking it: a usable ``SharedInfo``, or a documented reason."""
    try:
        info = parse_shared_info(value)  # type: ignore[arg-type]  # the hostile values include non-strings
    except ReportError as error:
        assert REASONS.fullmatch(error.reason), error.reason
        return error.reason
    assert UUID.fullmatch(info.report_id) and info.api in APIS and info.scheduled_report_time >= 0
    assert (info.version.split(".")[0].lstrip("0") or "0") in SUPPORTED_MAJOR_VERSIONS
    assert all(type(text) is str and text.strip() for text in (info.reporting_origin, info.version))
    budget_key(shared_id_fields(report_identity(info)), info.version, 0)  # hashes UTF-8: no lone surrogate
    return info


@settings(FUZZ, max_examples=600)
@given(value=texts | st.none() | st.integers() | st.binary(max_size=8))
def test_shared_info_gives_usable_fields_or_a_documented_reason(value):
    outcome(value)


@settings(FUZZ, max_examples=400)
@given(text=texts)
def test_the_browser_fast_path_and_the_json_path_agree(text):
    try:
        text.encode("utf-8")  # lone surrogates: not text, which re-serialising (as escapes) would change
        document = json.loads(text)
    except (ValueError, RecursionError):
        return
    if type(document) is dict and len(text) <= MAX_SHARED_INFO_CHARS // 2:
        assert outcome(text) == outcome(json.dumps(document, indent=1))  # indented: never the browser's form
