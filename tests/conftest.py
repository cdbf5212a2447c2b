"""Fixtures shared by several test modules: a real PostgreSQL server for the ledger's tests, a real Kafka-protocol
broker for the event-bus tests and the Pub/Sub emulator when the machine has it (each started once per worker)."""
import os
from collections.abc import Iterator

import pytest  # noqa: E402
from xdist.scheduler import LoadFileScheduling

import pipelines  # noqa: F401  (Beam 2.62: the FnApiRunner runner name, see pipelines/__init__.py)
from tests.support import beam_caches
from tests.support.flink import apache_kafka, flink_cluster, on_flink  # noqa: F401  (fixtures)
from tests.support.kafka import kafka_broker  # noqa: F401  (fixture)
from tests.support.keys import make_key_file
from tests.support.postgres import postgres_dsn, postgres_tls, postgres_url  # noqa: F401  (fixtures)
from tests.support.pubsub import pubsub_emulator  # noqa: F401  (fixture)
from transforms.core.durable.store import STORE_ENVIRONMENT  # noqa: E402
from transforms.core.noise_key import KEY_ENVIRONMENT

# argparse sizes a help formatter to the terminal for every option added (shutil.get_terminal_size: a system call
# unless COLUMNS and LINES say it), and Beam adds every one of its options at every PipelineOptions made: the width
# a terminal-less run gets anyway, for this process and the jobs it starts
os.environ.setdefault("COLUMNS", "80")
os.environ.setdefault("LINES", "24")
beam_caches.install()  # what the local runners repeat on the same inputs, done once (tests/support/beam_caches.py)


class _FlinkFilesTogether(LoadFileScheduling):
    """``--dist loadfile`` with every file of tests/flink/ in one scope, so on one worker: the Flink cluster and
    Apache Kafka's broker are session fixtures, started once per worker that runs a Flink test. Two clusters at
    once on 2 cores (each a JobManager, a 4 GB TaskManager, Beam's job server and expansion service) slowed the
    whole suite and let a failover test's restore time out."""

    def _split_scope(self, nodeid: str) -> str:
        scope = super()._split_scope(nodeid)
        return "tests/flink" if scope.startswith("tests/flink/") else scope


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    """The README's ``make test`` distributes by file (``--dist loadfile``), the Flink files together."""
    return _FlinkFilesTogether(config, log) if config.getvalue("dist") == "loadfile" else None


@pytest.fixture(scope="session", autouse=True)
def _noise_key_file(tmp_path_factory) -> Iterator[str]:
    """The test worker's noise key, in a directory of its own, named by ``PM_BEAM_NOISE_KEY`` from the session's
    start: module- and session-scoped fixtures that run pipelines come before any test's own fixtures, and must
    not make the user's ``~/.config/pm-beam/noise.key``."""
    path = str(tmp_path_factory.mktemp("keys") / "noise.key")
    make_key_file(path)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(KEY_ENVIRONMENT, path)
        yield path


@pytest.fixture(autouse=True)
def _state_store_of_the_test(tmp_path, monkeypatch, _noise_key_file):
    """Every test's streaming jobs keep their durable state in a store of the test's own (the default,
    ``.pm-beam/state.sqlite`` of the working directory, would be shared by every test of the run), and every run
    derives its noise from the worker's test key (not the user's own ``~/.config/pm-beam/noise.key``)."""
    monkeypatch.setenv(STORE_ENVIRONMENT, f"sqlite:///{tmp_path}/state.sqlite")
    monkeypatch.setenv(KEY_ENVIRONMENT, _noise_key_file)


# The test files that take longest (measured with --durations on 2 cores), longest first. `make test` runs the suite
# with pytest-xdist's loadfile distribution, which hands files to the workers in collection order: starting the long
# files first keeps one worker from being left with a long file at the end while the other idles.
LONGEST_FIRST = (
    "tests/flink/test_streaming_on_flink.py",
    "tests/flink/test_failover_on_flink.py",
    "tests/flink/test_batch_on_flink.py",
    "tests/pipelines/test_crash_recovery.py",
    "tests/pipelines/test_crash_recovery_devices.py",
    "tests/transforms/budgeting/test_measurement.py",
    "tests/pipelines/test_pubsub_streams.py",
    "tests/pipelines/test_kafka_streams.py",
    "tests/deploy/test_remote_workers.py",
    "tests/deploy/test_wheel.py",
    "tests/pipelines/test_aggregate_cli.py",
    "tests/evaluation/test_evaluate_cli.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The items of ``LONGEST_FIRST``'s files first, in its order; the others after, in their collected order."""
    rank = {path: index for index, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))
