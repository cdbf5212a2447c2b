"""Aggregatable reports from a topic into the Aggregation Service's batch layout: one folder per reporting origin and
hour, closed once no more reports can arrive for it.

The public Aggregation Service takes batches of Avro files ``{payload, key_id, shared_info}``; its documentation's
batching strategies group reports by reporting origin and by the hour of their scheduled report time. A
``ReportBatches`` keeps the reports of every (origin, hour) still open, in the order they arrived, and closes an
hour once the watermark (the latest scheduled report time seen) has passed its end plus the allowed lateness; a
report for an hour already closed is ``late``, a second copy of a report id within an open hour a ``duplicate``,
and a report whose ``shared_info`` the service would refuse a dead letter with the service's reason. It also says
which offsets may be committed: for each partition, the lowest offset of a report still held in an open hour (or
the next offset when it holds none), so that a crash after the commit loses nothing that was not yet in a file.
This is what Kafka Connect's object-store sinks do, for the service's layout.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from schemas.aggregatable import ReportError, parse_shared_info

SECONDS_PER_HOUR = 3600
LATE, DUPLICATE = "late", "duplicate"


@dataclass
class OpenHour:
    """The reports of one (reporting origin, hour) not yet written, and the offsets they came from."""

    origin: str
    hour: int  # hours since the epoch, of the scheduled report time
    records: list = field(default_factory=list)
    report_ids: set = field(default_factory=set)
    offsets: dict = field(default_factory=dict)  # partition -> the lowest offset held here


class ReportBatches:
    """Open hours per (origin, hour); ``add`` a report, ``close`` what the watermark has passed."""

    def __init__(self, lateness_seconds: int) -> None:
        self._lateness = lateness_seconds
        self.open: dict[tuple[str, int], OpenHour] = {}
        self.closed: set[tuple[str, int]] = set()
        self.watermark: int | None = None  # the latest scheduled report time seen, in seconds
        self._next_offsets: dict[int, int] = {}

    def read(self, partition: int, offset: int) -> None:
        """Note that the message at ``offset`` was read (whatever became of it)."""
        self._next_offsets[partition] = offset + 1

    def add(self, record: dict, partition: int, offset: int) -> str | None:
        """Hold ``record`` (an AggregatableReport) in its hour; the dead-letter reason when it cannot be held."""
        self.read(partition, offset)
        try:
            info = parse_shared_info(record["shared_info"])
        except ReportError as error:
            return error.reason
        key = (info.reporting_origin, info.scheduled_report_time // SECONDS_PER_HOUR)
        if key in self.closed:
            return LATE
        hour = self.open.get(key)
        if hour is None:
            hour = self.open[key] = OpenHour(*key)
        if info.report_id in hour.report_ids:
            return DUPLICATE
        hour.report_ids.add(info.report_id)
        hour.records.append(record)
        hour.offsets.setdefault(partition, offset)
        if self.watermark is None or info.scheduled_report_time > self.watermark:
            self.watermark = info.scheduled_report_time
        return None

    def due(self, everything: bool = False) -> list[OpenHour]:
        """The hours the watermark has passed (end plus the allowed lateness), or all of them; removed from the
        open ones and remembered as closed."""
        if everything:
            keys = list(self.open)
        elif self.watermark is None:
            keys = []
        else:
            keys = [key for key in self.open if (key[1] + 1) * SECONDS_PER_HOUR + self._lateness <= self.watermark]
        hours = [self.open.pop(key) for key in sorted(keys)]
        self.closed.update(keys)
        return hours

    def committable(self) -> dict[int, int]:
        """Per partition, the offset a consumer may commit: nothing before it is held in an open hour."""
        held: dict[int, int] = {}
        for hour in self.open.values():
            for partition, offset in hour.offsets.items():
                held[partition] = min(offset, held.get(partition, offset))
        return {partition: held.get(partition, following) for partition, following in self._next_offsets.items()}
