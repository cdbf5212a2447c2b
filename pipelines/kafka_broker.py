"""Apache Kafka's own broker, one node in KRaft mode, for the tests and benchmarks of the Flink path.

    python -m pipelines.kafka_broker [--port N]      # runs one in the foreground until Ctrl-C

Beam's Java KafkaIO (what ``kafka://`` becomes on Flink, ``transforms.core.bus.production``) is the Java client,
and it is tested here against the broker it is written for: Apache Kafka's, from its Maven artefacts
(``deploy/kafka/pom.xml``; ``pipelines.flink.artifacts``), rather than the tansu broker the local path's tests use,
whose known faults (ListOffsets LATEST wrong, DESIGN.md) the Java consumer's offset handling would meet head on.
``KafkaBroker`` formats a fresh log directory, starts the broker and controller in one JVM on 127.0.0.1 (a free
port each), waits until it answers a metadata request, and stops it by its process id. Topics are created on
first use with one partition, as on the local broker.
"""
from __future__ import annotations

import argparse
import base64
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from pipelines.flink.artifacts import KAFKA_VERSION, ArtifactUnavailable, kafka_classpath
from pipelines.processes import answers, free_port, java, log_tail, start, stop_process_group, wait_until

_START_SECONDS = 60
_HEAP = "-Xmx512m"
_LOG4J = """\
rootLogger.level = WARN
rootLogger.appenderRef.file.ref = File
appender.file.type = File
appender.file.name = File
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d %-5p %c - %m%n
"""


class BrokerUnavailable(Exception):
    """Apache Kafka's broker cannot run here (no Java, its jars could not be fetched, or it did not start)."""



def _cluster_id() -> str:
    """A random cluster id as Kafka makes one (``Uuid.randomUuid``): 16 bytes in URL-safe base64 without padding,
    drawn again when it starts with ``-``, which the storage tool would read as an option (1 in 64 did)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id

class KafkaBroker:
    """Apache Kafka ``KAFKA_VERSION`` on 127.0.0.1:``port`` (broker and controller in one process, KRaft), with its
    log directory in a temporary directory removed when it stops; a context manager. ``java_options`` go to its
    JVMs (the tests': ``tests.support.flink.SHORT_LIVED_JVM``)."""

    def __init__(self, port: int | None = None, *, java_options: tuple[str, ...] = ()) -> None:
        self.port = port or free_port()
        self.java_options = java_options
        self.address = f"127.0.0.1:{self.port}"
        self._directory = Path(tempfile.mkdtemp(prefix="kafka-broker-"))
        self.log = self._directory / "broker.log"
        self._process: subprocess.Popen | None = None

    def _configure(self) -> Path:
        controller = free_port()
        properties = self._directory / "server.properties"
        properties.write_text("\n".join([
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.voters=1@127.0.0.1:{controller}",
            f"listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{controller}",
            f"advertised.listeners=PLAINTEXT://{self.address}",
            "controller.listener.names=CONTROLLER",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            f"log.dirs={self._directory / 'data'}",
            "num.partitions=1",
            "auto.create.topics.enable=true",
            # retention by time reads each message's timestamp, which producers on the Flink path set to the
            # record's event time: replayed data months old would be deleted as soon as it is written; and a
            # timestamp ahead of the broker's clock (data of days to come, tests/flink) is accepted
            "log.retention.ms=-1",
            "log.message.timestamp.after.max.ms=9223372036854775807",
            "offsets.topic.replication.factor=1",
            "offsets.topic.num.partitions=4",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "share.coordinator.state.topic.replication.factor=1",
            "group.initial.rebalance.delay.ms=0",
            "",
        ]))
        (self._directory / "log4j2.properties").write_text(_LOG4J.format(log=self.log))
        return properties

    def _java(self, main: str, *arguments: str) -> list[str]:
        return [java(), _HEAP, *self.java_options,
                f"-Dlog4j2.configurationFile={self._directory / 'log4j2.properties'}",
                "-cp", f"{kafka_classpath()}/*", main, *arguments]

    def start(self) -> KafkaBroker:
        try:
            properties = self._configure()
            cluster_id = _cluster_id()
            formatted = subprocess.run(self._java("kafka.tools.StorageTool", "format", "--cluster-id", cluster_id,
                                                  "--config", str(properties)),
                                       capture_output=True, text=True, timeout=_START_SECONDS)
            if formatted.returncode != 0:
                raise BrokerUnavailable(f"Apache Kafka could not format its log directory: {formatted.stderr[-500:]}")
            self._process = start(self._java("kafka.Kafka", str(properties)), self._directory / "broker.out")
            wait_until(self._answers, self._process, _START_SECONDS, f"Apache Kafka on {self.address}",
                       self._directory / "broker.out")
        except (ArtifactUnavailable, FileNotFoundError, RuntimeError) as error:
            self.stop()
            raise BrokerUnavailable(str(error)) from None
        return self

    def _answers(self) -> bool:
        """Whether the broker accepts connections and then answers a metadata request with itself."""
        from confluent_kafka.admin import AdminClient

        if not answers(self.port):
            return False
        try:
            return bool(AdminClient({"bootstrap.servers": self.address}).list_topics(timeout=1).brokers)
        except Exception:  # noqa: BLE001 - KafkaException while the broker is starting
            return False

    def log_tail(self) -> str:
        return log_tail(self.log)

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def stop(self) -> None:
        """Stop the broker by its process id (SIGTERM, then SIGKILL after 10 s) and remove its log directory."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            stop_process_group(process)
        shutil.rmtree(self._directory, ignore_errors=True)

    def __enter__(self) -> KafkaBroker:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipelines.kafka_broker", description=__doc__.split("\n\n")[0],
                                     allow_abbrev=False)
    parser.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default: a free one)")
    args = parser.parse_args(argv)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        broker = KafkaBroker(args.port).start()
    except BrokerUnavailable as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"Apache Kafka {KAFKA_VERSION} (KRaft, one node) at {broker.address}, pid {broker.pid}; Ctrl-C stops it",
          flush=True)
    try:
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    finally:
        broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
