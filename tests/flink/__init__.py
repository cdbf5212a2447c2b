"""The pipelines on a real Flink cluster, with Beam's Java KafkaIO on Apache Kafka (docs/flink.md): batch, streaming,
savepoints and failover. Marked ``flink``; they fetch Flink and build Beam's job server on first use."""
