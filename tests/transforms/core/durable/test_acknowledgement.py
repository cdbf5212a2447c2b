"""The acknowledgement of a durable job's releases: the watermark bound, the time outputs are stamped with, and the
release log entries a snapshot drops once every sink has written them."""
from __future__ import annotations

import os
import subprocess
import sys

import apache_beam as beam
import pytest

from schemas.proto import state_pb2
from tests.support.keys import run_key
from transforms.core.durable import acknowledgement
from transforms.core.durable.acknowledgement import (
    END_MICROS,
    WatermarkBound,
    acknowledge,
    acknowledge_sinks,
    release_time,
    sink_written,
    stamped,
)
from transforms.core.durable.step import DurableStep


@pytest.fixture
def bound():
    made = WatermarkBound.create()
    yield made
    made.close(remove=True)


def test_the_bound_is_the_highest_watermark_published_and_reads_in_another_process(bound):
    bound.publish(5_000_000)
    bound.publish(3_000_000)  # a lower watermark (another input's) leaves the bound
    script = f"from transforms.core.durable.acknowledgement import WatermarkBound; print(WatermarkBound({bound.path!r}).read())"
    read = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert int(read.stdout) == bound.read() == 5_000_000


def test_the_bound_outlives_its_files_name_once_both_processes_have_it_open(bound):
    """The driver removes the name once the source has the file open: a SIGKILLed run leaves nothing behind."""
    script = ("import sys; from transforms.core.durable.acknowledgement import WatermarkBound; "
              f"opened = WatermarkBound({bound.path!r}); print('open', flush=True); sys.stdin.readline(); "
              "opened.publish(9_000_000); print(opened.read(), flush=True)")
    other = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout.readline().strip() == "open"
        bound.unlink()
        assert not os.path.exists(bound.path)
        bound.publish(7_000_000)
        other.stdin.write("\n")
        other.stdin.flush()
        assert int(other.stdout.readline()) == 9_000_000 == bound.read()  # one file still, seen from both sides
    finally:
        other.wait(timeout=30)


def _acknowledged_job(job_id: str, bound: WatermarkBound) -> beam.Pipeline:
    pipeline = beam.Pipeline()
    sink_written(pipeline | beam.Create([1]))
    assert acknowledge_sinks(pipeline, job_id, bound)
    return pipeline


def test_outputs_are_stamped_after_the_bound_on_a_whole_millisecond(bound):
    assert release_time("not acknowledged", 7) is None
    assert stamped(["x"], None) == ["x"]
    _acknowledged_job("stamp", bound)
    try:
        bound.publish(5_000_000)
        assert release_time("stamp", 1_000) == 5_001_000  # after every watermark of the run
        assert release_time("stamp", 9_000_000) == 9_000_000  # never before the output's own time
        assert release_time("stamp", END_MICROS) == END_MICROS
        bound.publish(5_000_500)
        assert release_time("stamp", 0) == 5_001_000
        [value, tagged] = stamped(["x", beam.pvalue.TaggedOutput("late", "y")], 5_001_000)
        assert (value.value, value.timestamp.micros) == ("x", 5_001_000)
        assert (tagged.tag, tagged.value.value, tagged.value.timestamp.micros) == ("late", "y", 5_001_000)
    finally:
        acknowledgement.forget("stamp")


def test_a_pipeline_without_a_sink_is_not_acknowledged(bound):
    assert not acknowledge_sinks(beam.Pipeline(), "no sinks", bound)
    assert release_time("no sinks", 0) is None


def test_a_snapshot_drops_the_entries_stamped_before_the_acknowledgement(tmp_path, bound):
    """Entries go once the acknowledgement is past the time their outputs were stamped with, in order; a restart
    emits again only those left, stamped anew."""
    _acknowledged_job("job", bound)
    try:
        step = DurableStep(f"sqlite:///{tmp_path}/state.sqlite", "job", "verdicts", run_key()).open()
        shard = state_pb2.KAnonShardState(version=3)
        bound.publish(10_000)
        first = step.save(shard, "groups", set(), [], ["a"], 1_000)
        late = step.emitted(["late"], 50_000)  # a dead letter between firings, of an input ahead of the watermark
        bound.publish(20_000)
        second = step.save(shard, "groups", set(), [], ["b"], 2_000)
        assert (first.at, late[0].timestamp.micros, second.at) == (11_000, 50_000, 21_000)
        store = step._store
        acknowledge("job", 11_000)  # not past the first entry's time: nothing goes
        step.save(shard, "groups", set(), [], [], 3_000)
        assert [seq for seq, _ in store.load("job", "verdicts").releases] == [0, 1]
        acknowledge("job", 30_000)  # past the first; the second holds a dead letter stamped 50_000
        step.save(shard, "groups", set(), [], [], 4_000)
        assert [seq for seq, _ in store.load("job", "verdicts").releases] == [1]
        bound.publish(60_000)
        restored = step.restore(state_pb2.KAnonShardState, "groups", 5_000)
        assert [(output.value, output.timestamp.micros) for output in restored.releases] == \
            [("late", 61_000), ("b", 61_000)]
        acknowledge("job", 61_001)
        step.save(shard, "groups", set(), [], [], 6_000)
        assert store.load("job", "verdicts").releases == []
    finally:
        acknowledgement.forget("job")
