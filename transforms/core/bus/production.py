"""Topics on Dataflow, Flink and portable runners: Beam's own Kafka and Pub/Sub transforms, options one to one.

* ``kafka://`` selects ``apache_beam.io.kafka.ReadFromKafka`` / ``WriteToKafka``. They are cross-language
  transforms (Java KafkaIO): building the pipeline needs a Kafka expansion service (``--expansion-service
  HOST:PORT``; on the cluster of ``make flink-up`` its own, docs/flink.md). The runner's watermark follows the
  messages' timestamps (Kafka's CreateTime, per partition), so producers set each message's timestamp to its
  record's event time, as they set ``--timestamp-attribute`` on Pub/Sub; each row is then timestamped with its
  own event time. Where the runner supports it, offsets are committed when it finalizes a checkpoint
  (``commit_offset_in_finalize``); the job's own position is in its checkpointed state either way.
* ``pubsub://`` selects ``apache_beam.io.ReadFromPubSub`` / ``WriteToPubSub`` (native on Dataflow, and on the
  DirectRunner against the emulator): event time from the message attribute ``--timestamp-attribute`` (the
  producer sets it to the record's event time, RFC 3339 or milliseconds), and ``--id-attribute`` for Pub/Sub's
  own deduplication of redelivered messages.

Either way each message is decoded by ``schemas.messages`` into a row, timestamped with its event time, or a dead
letter, and a second copy of a record id within the allowed lateness is a dead letter ``duplicate``, so a
redelivered message never counts twice; each topic's counts are reported when the run drains
(``production_accounting``). Written messages carry the record's key (Kafka: the
message key; Pub/Sub: attribute ``key``) and on Pub/Sub its stable id (attribute ``id``); Beam's ``WriteToKafka``
takes headers only as schema'd rows, so the ``id`` header is the local path's (``sinks``).
"""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import apache_beam as beam
from apache_beam.transforms.window import TimestampedValue
from apache_beam.utils.timestamp import Timestamp

from schemas.codecs import EventSpec
from schemas.messages import decode_message
from schemas.record_ids import RECORD_IDS
from schemas.rows import DeadLetter
from transforms.core.bus.endpoints import Endpoint, KafkaTopic, PubSubPath
from transforms.core.bus.kafka_stream import message_place
from transforms.core.bus.production_accounting import FirstCopies, TopicReport
from transforms.core.io import DEAD_LETTERS, INPUT_FILES

EXPANSION_SERVICE_HINT = (
    "Beam's Kafka transforms are Java (cross-language): on the cluster of `make flink-up` the run finds its Kafka "
    "expansion service itself; elsewhere start one (`java -cp beam-runners-flink-1.19-job-server-2.62.0.jar "
    "org.apache.beam.sdk.expansion.service.ExpansionService 8097`, docs/flink.md) and pass --expansion-service "
    "localhost:8097"
)


class _DecodeFn(beam.DoFn):
    """A message ``(partition, offset, value)`` to ``(record id, (its place, row))``, timestamped with the record's
    event time, or a dead letter naming its place (``<topic URI>/<partition>@<offset>`` on Kafka, the URI on
    Pub/Sub)."""

    def __init__(self, spec: EventSpec, fmt: str, uri: str, check: Callable[[Any], str | None] | None,
                 schema_id: int | None) -> None:
        self._spec, self._fmt, self._uri, self._check, self._schema_id = spec, fmt, uri, check, schema_id
        self._record_id = RECORD_IDS[spec.name]

    def process(self, message: tuple[int | None, int | None, bytes]):
        partition, offset, value = message
        place = self._uri if partition is None or offset is None else message_place(self._uri, partition, offset)
        row = decode_message(self._spec, self._fmt, value, place, self._schema_id)
        if type(row) is not DeadLetter and self._check is not None:
            reason = self._check(row)
            if reason is not None:
                row = DeadLetter(raw=value.decode("utf-8", "backslashreplace"), reason=reason, source=place)
        if type(row) is DeadLetter:
            yield beam.pvalue.TaggedOutput(DEAD_LETTERS, row)
        else:
            yield TimestampedValue((json.dumps(self._record_id(row)), (place, row)),
                                   Timestamp(micros=row.event_time_micros))


class ReadTopicProduction(beam.PTransform):
    """A topic or subscription on a production runner: ``{"rows": rows, "dead_letters": DeadLetter,
    "input_files": InputFileReport}`` (the topic's report, emitted when the run drains: ``production_accounting``).

    ``max_records`` bounds a Kafka read (the records the topic held when the run started: ``stop=end``), which
    then ends and drains the run; ``commit_offsets`` commits the consumer group's offsets as the runner finalizes
    checkpoints (Beam's step for it fails on Flink's portable runner: ``pipelines.topics``)."""

    def __init__(self, endpoint: Endpoint, spec: EventSpec, fmt: str, lateness_micros: int, group: str, *,
                 check: Callable[[Any], str | None] | None = None, expansion_service: str | None = None,
                 timestamp_attribute: str | None = None, id_attribute: str | None = None,
                 max_records: int | None = None, commit_offsets: bool = True) -> None:
        super().__init__()
        if isinstance(endpoint, KafkaTopic) and not expansion_service:
            raise ValueError(f"reading {endpoint.uri} on this runner needs --expansion-service: {EXPANSION_SERVICE_HINT}")
        self._endpoint, self._spec, self._fmt, self._lateness, self._group = endpoint, spec, fmt, lateness_micros, group
        self._check, self._expansion_service = check, expansion_service
        self._timestamp_attribute, self._id_attribute = timestamp_attribute, id_attribute
        self._max_records, self._commit_offsets = max_records, commit_offsets

    def expand(self, pbegin):
        endpoint = self._endpoint
        if isinstance(endpoint, KafkaTopic):
            from apache_beam.io.kafka import ReadFromKafka

            config = endpoint.client_config(**{"group.id": endpoint.group or self._group,
                                               "auto.offset.reset": "latest" if endpoint.start == "latest" else "earliest",
                                               # the Kafka client commits what it polls by default, whether or not the
                                               # runner has made it durable: a restart would then skip it
                                               "enable.auto.commit": "false"})
            messages = (
                pbegin
                | "ReadFromKafka" >> ReadFromKafka(consumer_config={k: str(v) for k, v in config.items()},
                                                   topics=[endpoint.topic], commit_offset_in_finalize=self._commit_offsets,
                                                   timestamp_policy="CreateTime", max_num_records=self._max_records,
                                                   with_metadata=True, expansion_service=self._expansion_service)
                | "Places" >> beam.Map(lambda record: (record.partition, record.offset, record.value or b""))
            )
            schema_id = endpoint.schema_id
        else:
            assert isinstance(endpoint, PubSubPath)
            subscription = endpoint.path if endpoint.is_subscription else None
            messages = (
                pbegin
                | "ReadFromPubSub" >> beam.io.ReadFromPubSub(
                    topic=None if subscription else endpoint.path, subscription=subscription,
                    id_label=self._id_attribute, timestamp_attribute=self._timestamp_attribute)
                | "Places" >> beam.Map(lambda data: (None, None, data))
            )
            schema_id = None
        # messages: (partition, offset, value); decoded.rows: (record id, (its place, row)) at the row's event time;
        # decoded.dead_letters: DeadLetter
        decoded = messages | "Decode" >> beam.ParDo(
            _DecodeFn(self._spec, self._fmt, endpoint.uri, self._check, schema_id)).with_outputs(DEAD_LETTERS, main="rows")
        # once["rows"]: the first copy of each record; once["dead_letters"]: the copies after it (``duplicate``)
        once = decoded.rows | "FirstCopies" >> FirstCopies(max(self._lateness, 1_000_000))
        dead_letters = (decoded[DEAD_LETTERS], once[DEAD_LETTERS]) | "DeadLetters" >> beam.Flatten()
        report = (messages, dead_letters) | "Report" >> TopicReport(endpoint.uri)
        return {"rows": once["rows"], DEAD_LETTERS: dead_letters, INPUT_FILES: report}


class WriteTopicProduction(beam.PTransform):
    """Records to a topic on a production runner, each with its key and stable id."""

    def __init__(self, endpoint: Endpoint, encode: Callable[[Any], bytes], key_of: Callable[[Any], str],
                 id_of: Callable[[Any], str], *, expansion_service: str | None = None,
                 id_attribute: str | None = None) -> None:
        super().__init__()
        if isinstance(endpoint, KafkaTopic) and not expansion_service:
            raise ValueError(f"writing {endpoint.uri} on this runner needs --expansion-service: {EXPANSION_SERVICE_HINT}")
        self._endpoint, self._encode, self._key_of, self._id_of = endpoint, encode, key_of, id_of
        self._expansion_service, self._id_attribute = expansion_service, id_attribute

    def expand(self, records):
        endpoint, encode, key_of, id_of = self._endpoint, self._encode, self._key_of, self._id_of
        if isinstance(endpoint, KafkaTopic):
            from apache_beam.io.kafka import WriteToKafka

            return (
                records
                | "KeyAndValue" >> beam.Map(lambda r: (key_of(r).encode(), encode(r))).with_output_types(tuple[bytes, bytes])
                | "WriteToKafka" >> WriteToKafka(producer_config={"bootstrap.servers": endpoint.brokers,
                                                                  **dict(endpoint.config)},
                                                 topic=endpoint.topic, expansion_service=self._expansion_service)
            )
        from apache_beam.io import PubsubMessage

        return (
            records
            | "Message" >> beam.Map(lambda r: PubsubMessage(encode(r), {"key": key_of(r), "id": id_of(r)}))
            | "WriteToPubSub" >> beam.io.WriteToPubSub(endpoint.path, with_attributes=True, id_label=self._id_attribute)
        )
