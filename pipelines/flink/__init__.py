"""A local Flink cluster without Docker, and what a pipeline run on it takes from it (docs/flink.md).

* ``artifacts``: the Java artefacts (Flink's distribution, Beam's Flink job server, Apache Kafka's broker),
  fetched once into a cache outside the tree.
* ``cluster``: the cluster's processes (a JobManager, a TaskManager, Beam's job server, a Kafka expansion
  service, a Python SDK worker pool) and the record ``make flink-up`` leaves of them.
* ``rest``: Flink's REST API (jobs, checkpoints, stop with a savepoint).
* ``defaults``: the options a run on ``--runner FlinkRunner --flink_master ADDRESS`` takes from the record.
"""
