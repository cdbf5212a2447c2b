"""What a topic read on a production runner accounts for, run on Beam's FnApiRunner: the first copy of each record
id passes at its own event time and every later copy, within a bundle or across bundles and shards, is a dead
letter ``duplicate`` naming its message; and one report per partition counts what was read and dead-lettered."""
from __future__ import annotations

import apache_beam as beam
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms.window import TimestampedValue

from schemas.rows import JoinEvent
from schemas.time_units import MICROS_PER_HOUR
from transforms.core.bus.kafka_stream import DUPLICATE, partition_path
from transforms.core.bus.production_accounting import SHARDS, FirstCopies, TopicReport
from transforms.core.io import DEAD_LETTERS, InputFileReport

URI = "kafka://127.0.0.1:9092/joins"
H = MICROS_PER_HOUR


def _joins() -> list[tuple[str, tuple[str, JoinEvent]]]:
    """``(record id, (place, row))``: 3 hours of 40 groups, every 7th join delivered twice (another offset)."""
    keyed, offset = [], 0
    for index in range(120):
        row = JoinEvent(interest_group=f"g{index % 40}", user_id=f"u{index}", event_time_micros=(index % 3) * H + index)
        for _ in range(2 if index % 7 == 0 else 1):
            keyed.append((f"{row.interest_group}/{row.user_id}/{row.event_time_micros}",
                          (f"{partition_path(URI, index % 2)}@{offset}", row)))
            offset += 1
    return keyed


def test_first_copies_pass_at_their_event_time_and_later_copies_are_duplicates():
    keyed = _joins()
    rows = sorted({row for _, (_, row) in keyed})
    copies = [(place, row) for index, (_, (place, row)) in enumerate(keyed)
              if index > 0 and keyed[index - 1][0] == keyed[index][0]]
    assert len(copies) == 18 and SHARDS > 1
    with beam.Pipeline(runner="FnApiRunner") as pipeline:
        once = (pipeline | beam.Create(keyed) | beam.Map(lambda element: TimestampedValue(element, 0))
                | FirstCopies(lateness_micros=H))
        passed = once["rows"] | "Stamped" >> beam.ParDo(_WithTimestamp())
        assert_that(passed, equal_to([(row, row.event_time_micros) for row in rows]), label="rows")
        letters = once[DEAD_LETTERS] | beam.Map(lambda letter: (letter.reason, letter.source))
        # which copy is first depends on bundle order: each id's second place or its first
        assert_that(letters | beam.combiners.Count.Globally(), equal_to([len(copies)]), label="count")
        assert_that(letters | beam.Map(lambda pair: pair[0]) | beam.Distinct(), equal_to([DUPLICATE]), label="why")


class _WithTimestamp(beam.DoFn):
    def process(self, row, timestamp=beam.DoFn.TimestampParam):
        yield row, timestamp.micros


def test_a_report_per_partition_counts_its_messages_and_dead_letters():
    from schemas.rows import DeadLetter

    messages = [(index % 2, index, b"{}") for index in range(9)]  # partition 0: 5 messages, partition 1: 4
    letters = [DeadLetter(raw="{", reason="bad json", source=f"{partition_path(URI, 1)}@3")]
    with beam.Pipeline(runner="FnApiRunner") as pipeline:
        reports = ((pipeline | "Messages" >> beam.Create(messages), pipeline | "Letters" >> beam.Create(letters))
                   | TopicReport(URI))
        assert_that(reports, equal_to([InputFileReport(partition_path(URI, 0), 5, 5, 0, None),
                                       InputFileReport(partition_path(URI, 1), 4, 3, 1, None)]))
