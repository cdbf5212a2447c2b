"""Event buses: Kafka and Pub/Sub topics as the pipelines' sources and sinks.

* ``endpoints``: the names of sources and sinks (``kafka://``, ``pubsub://``, files) and their options;
* ``kafka_stream``: the local streaming source, a Kafka consumer that feeds Beam's ``TestStream`` with
  event-time batches, watermarks and deduplication;
* ``sinks``: writing records to a Kafka topic with a key and a stable id;
* ``production``: Beam's own Kafka (cross-language) and Pub/Sub transforms for Dataflow, Flink and portable runners;
* ``progress``: the one-line progress report of a streaming run.
"""
