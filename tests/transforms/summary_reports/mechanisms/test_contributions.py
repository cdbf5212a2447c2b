"""What the summary-report clients share: budgets, report ids and delays, and the AggregatableReport records."""
from __future__ import annotations

import uuid

import cbor2
import pytest

from schemas.aggregatable import PayloadDecrypter, decode_payload, generate_key_pair, parse_shared_info
from transforms.core.mechanisms.noise import SecureSource, SeededSource
from transforms.summary_reports.mechanisms.contributions import (
    MAX_DELAY_SECONDS,
    MIN_DELAY_SECONDS,
    PAD_TO,
    ClientReport,
    ContributionBudget,
    ContributionLimits,
    keyed_below,
    make_report,
)
from transforms.summary_reports.report_records import report_record_of, shared_info_of

EVENT_MICROS = 1_700_000_000_123_456


def report(source, key=("ara", "dev", "t1"), contributions=((5, 7), (1 << 127, 65529))) -> ClientReport:  # L1 = 65536
    return make_report(source, key, api="attribution-reporting", reporting_origin="https://adtech.test",
                       destination="https://shop.test", event_time_micros=EVENT_MICROS, contributions=contributions)


def test_a_budget_charges_only_what_fits_both_limits():
    limits, budget = ContributionLimits(l0=3, l1=100), ContributionBudget()
    assert budget.charge([60, 30], limits) and (budget.count, budget.total) == (2, 90)
    assert not budget.charge([11], limits)  # L1: 101 > 100
    assert not budget.charge([1, 1], limits)  # L0: 4 > 3
    assert (budget.count, budget.total) == (2, 90)  # a refused report costs nothing
    assert budget.charge([10], limits) and (budget.count, budget.total) == (3, 100)  # both exactly at the limits


@pytest.mark.parametrize("bad", [{"l0": 0}, {"l1": -1}, {"l1": 1.5}, {"l0": True}])
def test_limits_are_positive_integers(bad):
    with pytest.raises(ValueError):
        ContributionLimits(**bad)


def test_report_ids_are_uuid4_and_seeded_ones_depend_on_the_key_only():
    first = report(SeededSource(3))
    parsed = uuid.UUID(first.report_id)
    assert parsed.version == 4 and parsed.variant == uuid.RFC_4122 and str(parsed) == first.report_id
    assert report(SeededSource(3)) == first
    assert report(SeededSource(3), key=("ara", "dev", "t2")).report_id != first.report_id
    assert report(SeededSource(4)).report_id != first.report_id
    assert report(SecureSource()).report_id != report(SecureSource()).report_id


def test_delays_are_uniform_between_ten_minutes_and_an_hour():
    """Mean of U{600, ..., 3600} is 2100 with standard deviation 866.3; over 20,000 keyed draws the sample mean
    has standard deviation 6.13, so a tolerance of 40 is 6.5 standard deviations (false failure < 1e-10)."""
    source = SeededSource(11)
    delays = [report(source, key=("paa", "dev", f"e{i}")).scheduled_report_time - EVENT_MICROS // 1_000_000
              for i in range(20_000)]
    assert MIN_DELAY_SECONDS <= min(delays) and max(delays) <= MAX_DELAY_SECONDS
    assert abs(sum(delays) / len(delays) - 2100) < 40


def test_keyed_below_is_in_range_and_reproducible():
    source = SeededSource(1)
    draws = [keyed_below(source, ("k", i), 3) for i in range(300)]
    assert set(draws) == {0, 1, 2}
    assert draws == [keyed_below(SeededSource(1), ("k", i), 3) for i in range(300)]


def test_clear_text_record_is_padded_to_twenty_contributions():
    r = report(SeededSource(1))
    record = report_record_of(r)
    assert record["key_id"] == "" and record["shared_info"] == shared_info_of(r)
    info = parse_shared_info(record["shared_info"])
    assert (info.api, info.report_id, info.attribution_destination, info.source_registration_time) == (
        "attribution-reporting", r.report_id, "https://shop.test", None)
    assert info.scheduled_report_time == r.scheduled_report_time
    assert len(cbor2.loads(record["payload"])["data"]) == PAD_TO
    assert decode_payload(record["payload"]) == [(5, 7, 0), (1 << 127, 65529, 0)]


def test_null_reports_have_the_same_shape():
    null = report_record_of(report(SeededSource(1), contributions=()))
    full = report_record_of(report(SeededSource(1)))
    assert decode_payload(null["payload"]) == []
    assert len(null["payload"]) == len(full["payload"]) and len(null["shared_info"]) == len(full["shared_info"])


def test_encrypted_record_opens_with_the_private_key():
    private, public = generate_key_pair()
    r = report(SeededSource(1))
    record = report_record_of(r, ("key-7", public))
    assert record["key_id"] == "key-7"
    plaintext = PayloadDecrypter({"key-7": private}).decrypt(record["payload"], record["shared_info"], "key-7")
    assert plaintext == report_record_of(r)["payload"]


def test_filtering_ids_go_into_the_payload_at_their_width():
    """Attribution Reporting's filtering ids (``aggregatable_filtering_id_max_bytes``): each contribution's id is
    written in that many bytes, padding included, so that the Aggregation Service's ``--filtering-ids`` selects it."""
    r = report(SeededSource(1), contributions=((5, 7, 65_535), (9, 3, 0)))._replace(filtering_id_bytes=2)
    payload = cbor2.loads(report_record_of(r)["payload"])["data"]
    assert len(payload) == PAD_TO and {len(entry["id"]) for entry in payload} == {2}
    assert decode_payload(report_record_of(r)["payload"]) == [(5, 7, 65_535), (9, 3, 0)]
    null = report_record_of(r._replace(contributions=()))
    assert decode_payload(null["payload"]) == [] and len(null["payload"]) == len(report_record_of(r)["payload"])
