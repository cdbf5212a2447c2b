"""The report collector's hours: closed by the watermark plus the lateness, late and duplicate reports refused,
and only offsets of reports already written are committable."""
from __future__ import annotations

import uuid

from schemas.aggregatable import shared_info_json
from transforms.summary_reports.collector import ReportBatches

HOUR = 3600
T0 = 1_704_067_200  # an hour boundary


def report(seconds: int, origin: str = "https://adtech.example", report_id: str | None = None) -> dict:
    info = shared_info_json(api="attribution-reporting", report_id=report_id or str(uuid.uuid4()),
                            reporting_origin=origin, scheduled_report_time=seconds,
                            attribution_destination="https://shop.example")
    return {"payload": b"", "key_id": "", "shared_info": info}


def test_hours_close_after_their_end_plus_the_lateness_and_refuse_what_comes_later():
    batches = ReportBatches(lateness_seconds=600)
    same = str(uuid.uuid4())
    assert batches.add(report(T0 + 10, report_id=same), 0, 0) is None
    assert batches.add(report(T0 + 20, report_id=same), 0, 1) == "duplicate"
    assert batches.add(report(T0 + 30, origin="https://other.example"), 1, 0) is None
    assert batches.add(report(T0 + HOUR + 599), 0, 2) is None
    assert batches.due() == []  # the watermark is 599 s past the first hour: within the lateness
    assert batches.committable() == {0: 0, 1: 0}  # both partitions still hold an unwritten report
    assert batches.add(report(T0 + HOUR + 600), 0, 3) is None
    closed = batches.due()
    assert [(hour.origin, hour.hour, len(hour.records)) for hour in closed] == [
        ("https://adtech.example", T0 // HOUR, 1), ("https://other.example", T0 // HOUR, 1)]
    assert batches.committable() == {0: 2, 1: 1}  # partition 0 still holds offsets 2 and 3
    assert batches.add(report(T0 + 50), 1, 1) == "late"
    assert batches.add({"payload": b"", "key_id": "", "shared_info": "{}"}, 1, 2) is not None
    rest = batches.due(everything=True)
    assert sum(len(hour.records) for hour in rest) == 2 and batches.committable() == {0: 4, 1: 3}
