"""A stateful step's side of the durable store: ``DurableStep`` names where a step keeps its state (it travels
with the DoFn), ``StepStore`` restores it once and writes a snapshot at every firing.

The contract the two stateful steps (``transforms.kanon.verdicts``, ``transforms.core.device_stream``) keep:

* a firing computes its outputs and its new state, **writes them in one transaction** (the shard's record
  without its keys, the keys it changed or dropped, the buffered input records, the input positions the state
  reflects, and the outputs themselves in the release log), and only then emits the outputs. A crash before the
  commit releases nothing that the restarted job will not recompute from the same state; a crash after it
  re-emits the logged outputs unchanged. Noise drawn in a firing is thus never drawn again for a released output;
* on the first element of a run, the step restores its last snapshot into Beam state and re-emits its release
  log, so that the restarted run's outputs hold everything the job released (with their stable ids: consumers of
  a topic see each again and drop the copy by id; a file output drops the lines it already holds);
* the release log keeps an entry only until every sink has written its outputs (``acknowledgement``): a step
  emits its outputs at ``release_time``, and its next snapshot drops the entries acknowledged since.

Released records are kept as pickles of the job's own output rows (``schemas.rows``: named tuples of plain
values); the state is kept as the explicit records of ``schemas/proto/state.proto``.
"""
from __future__ import annotations

import collections
import hashlib
import pickle
import threading
import time
from dataclasses import dataclass
from typing import Any, cast

import apache_beam as beam
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from schemas.proto import state_pb2
from transforms.core import metrics
from transforms.core.durable.acknowledgement import acknowledged as acknowledged_before
from transforms.core.durable.acknowledgement import release_time, stamped
from transforms.core.durable.positions import restarted
from transforms.core.durable.store import StateStore, StepWrite
from transforms.core.durable.stores import open_store
from transforms.core.noise_key import KeyLocation
from transforms.core.state import STATE_VERSION

_KEY, _PENDING = "k/", "p/"  # a group's or device's record; a buffered input record (by its digest)
# how often a step measures the store's size for its metrics (PostgreSQL: one query; a job snapshots every second)
STORE_SIZE_SECONDS = 5.0


class StreamEnded(RuntimeError):
    """The runner ended a durable job's input without the topic source's end (its source failed): a firing at the
    end would release every step as final, which the job's input has not made so."""


@dataclass(frozen=True)
class DurableStep:
    """Where a stateful step of a local streaming job keeps its state: the store, the job, the step's name, and the
    key its rows are sealed with (its location: each process reads the key itself)."""

    store_uri: str
    job_id: str
    step: str
    key: KeyLocation

    def open(self) -> StepStore:
        """This process's ``StepStore`` of the step (one per process, whatever the number of DoFn instances)."""
        with _OPEN_LOCK:
            step = _OPEN.get(self)
            if step is None:
                step = _OPEN[self] = StepStore(self, open_store(self.store_uri, self.key))
            return step


_OPEN: dict[DurableStep, StepStore] = {}
_OPEN_LOCK = threading.Lock()


@dataclass
class Restored:
    """A step's state as its last snapshot left it, ready to be written into Beam state."""

    shard: Message  # the shard's record with its keys, and the positions restarted for this run
    pending: list[bytes]  # the buffered input records
    releases: list  # the outputs released and not yet acknowledged, in order (values or TaggedOutputs), stamped


@dataclass(frozen=True)
class Saved:
    """What a snapshot wrote: the bytes of the state it set (the shard's record and the keys it changed: what its
    step's ``ArenaBound`` counts), and the time its releases are emitted at (``release_time``)."""

    state_bytes: int
    at: int | None


def encode_releases(outputs: list) -> bytes:
    """What one snapshot releases (rows, or ``TaggedOutput``s of rows), as one entry of the release log."""
    tagged = beam.pvalue.TaggedOutput
    return pickle.dumps([(output.tag, output.value) if isinstance(output, tagged) else (None, output)
                         for output in outputs], protocol=5)


def decode_releases(data: bytes) -> list:
    """The outputs of one entry of the release log, in order."""
    return [value if tag is None else beam.pvalue.TaggedOutput(tag, value) for tag, value in pickle.loads(data)]


def _digest(record: bytes) -> str:
    return _PENDING + hashlib.blake2b(record, digest_size=16).hexdigest()


def _without(record: Message, *fields: str) -> Message:
    """A copy of ``record`` without ``fields`` (its map of per-key records, stored one row each; its positions,
    which the snapshot keeps beside it)."""
    copy = type(record)()
    for descriptor, value in record.ListFields():
        if descriptor.name in fields:
            continue
        if descriptor.label == FieldDescriptor.LABEL_REPEATED:
            getattr(copy, descriptor.name).extend(value)
        elif descriptor.message_type is not None:
            getattr(copy, descriptor.name).CopyFrom(value)
        else:
            setattr(copy, descriptor.name, value)
    return copy


class StepStore:
    """One step's state in the store, for the DoFns of this process."""

    def __init__(self, step: DurableStep, store: StateStore) -> None:
        self.step = step
        self._store = store
        # the buffered input records the store holds and their digests (its keys): most stay from one save to the next
        self._digests: dict[bytes, str] = {}
        self._emitted: list = []  # outputs emitted between snapshots (recomputed from the input if none follows)
        self._emitted_at: int | None = None  # the latest time they were emitted at
        self._logged: collections.deque[tuple[int, int]] = collections.deque()  # (entry, time it was emitted at)
        self._log_entries = 0  # the entries of the step's release log in the store (all, acknowledged or not)
        self._sized_at: float | None = None  # when the store's size was last measured (time.monotonic)
        self._lock = threading.Lock()

    def emitted(self, outputs: list, natural_micros: int) -> list:
        """Outputs a step emits outside a firing (a dead letter for a late record as it arrives), as it emits them
        (``stamped``): deterministic in the input, they join the release log with the next snapshot, which covers
        that input."""
        at = release_time(self.step.job_id, natural_micros)
        with self._lock:
            self._emitted += outputs
            if at is not None:
                self._emitted_at = max(at, self._emitted_at or at)
        return stamped(outputs, at)

    def restore(self, shard_type: type[Message], key_field: str, natural_micros: int) -> Restored | None:
        """The step's last snapshot (None when it never wrote one), its shard record rebuilt with its keys, and the
        releases not yet acknowledged, stamped to be emitted again now (their natural time ``natural_micros``)."""
        loaded = self._store.load(self.step.job_id, self.step.step)
        if loaded.snapshot is None:
            return None
        shard = shard_type.FromString(loaded.snapshot.shard)
        keyed = getattr(shard, key_field)
        pending = []
        with self._lock:
            self._digests = {}
            for key, value in loaded.keys.items():
                if key.startswith(_KEY):
                    keyed[key[len(_KEY):]] = value
                else:
                    self._digests[value] = key
                    pending.append(value)
        cast(Any, shard).positions.CopyFrom(restarted(loaded.snapshot.positions))
        at = release_time(self.step.job_id, natural_micros)
        with self._lock:
            self._log_entries = len(loaded.releases)
            self._logged = collections.deque((seq, at) for seq, _ in loaded.releases) if at is not None else \
                collections.deque()
        releases = [output for _, data in loaded.releases for output in decode_releases(data)]
        return Restored(shard, pending, stamped(releases, at))

    def _store_size(self) -> int | None:
        """The store's size in bytes, measured at most every ``STORE_SIZE_SECONDS`` (None in between)."""
        now = time.monotonic()
        if self._sized_at is not None and now - self._sized_at < STORE_SIZE_SECONDS:
            return None
        self._sized_at = now
        return self._store.size_bytes()

    def _acknowledged(self) -> int:
        """How many of the oldest release log entries this process wrote or restored have had their outputs
        written by every sink (``acknowledgement``)."""
        acknowledged = acknowledged_before(self.step.job_id)
        count = 0
        if acknowledged is not None:
            for _, at in self._logged:
                if at >= acknowledged:
                    break
                count += 1
        return count

    def save(self, shard: Message, key_field: str, changed: set[str], pending: list[bytes], releases: list,
             fired_micros: int, ended: bool = False) -> Saved:
        """Write a firing's snapshot: the shard record without ``key_field``, the keys ``changed`` since the last
        one (written when the shard's map holds them, deleted when it no longer does), the buffered input records
        now held, and ``releases`` (the outputs the firing at ``fired_micros`` is about to emit, at the returned
        ``Saved.at``: ``stamped``); ``ended``: the firing took the end of the input. The release log entries every
        sink has written go in the same transaction. Raises ``StoreUnavailable`` when the store fails: the firing
        then emits nothing."""
        keyed = getattr(shard, key_field)
        upserts = {_KEY + key: keyed[key] for key in changed if key in keyed}
        deletes = {_KEY + key for key in changed if key not in keyed}
        with self._lock:
            digests = {record: self._digests.get(record) or _digest(record) for record in pending}
            held = {digest: record for record, digest in digests.items()}
            stored = set(self._digests.values())
            upserts.update((key, record) for key, record in held.items() if key not in stored)
            deletes.update(stored - held.keys())
            snapshot = state_pb2.StepSnapshot(
                version=STATE_VERSION, shard=_without(shard, key_field, "positions").SerializeToString(),
                positions=cast(Any, shard).positions, ended=ended)
            logged = [*self._emitted, *releases]
            at = release_time(self.step.job_id, fired_micros)
            dropped = self._acknowledged()
            write = StepWrite(snapshot, upserts, frozenset(deletes), (encode_releases(logged),) if logged else (),
                              self._logged[dropped - 1][0] if dropped else None)
            started = time.perf_counter()
            first = self._store.save(self.step.job_id, self.step.step, write)
            seconds = time.perf_counter() - started
            for _ in range(dropped):
                self._logged.popleft()
            self._log_entries += (first is not None) - dropped
            if first is not None and at is not None:  # the entry is acknowledged once the latest of its outputs is
                self._logged.append((first, max(at, self._emitted_at or at)))
            state_bytes = snapshot.ByteSize() + sum(map(len, upserts.values()))
            metrics.snapshot_written(self.step.step, seconds, state_bytes + sum(map(len, write.releases)),
                                     self._store_size(), self._log_entries)
            self._digests = digests
            self._emitted, self._emitted_at = [], None
            return Saved(state_bytes, at)


class StateNotHere(RuntimeError):
    """A durable step's shard was written by another process: its record is in the store, not in Beam state."""


def shard_bytes(shard_state, token_state, durable: bool) -> bytes | None:
    """The shard's record as Beam state holds it, for a stateful step whose process-held copy is missing.

    A durable step (a local job, one process) keeps its shards' records in the store and in this process only:
    Beam state holds a record just from its restore to the shard's first firing, which clears it, so that a
    firing costs what it touches instead of a serialization of the whole shard. A shard written before (it has a
    token) that this process does not hold cannot then be read from Beam state: ``StateNotHere``, never an
    empty record in its place."""
    raw = shard_state.read()
    if raw is None and durable and token_state.read():
        raise StateNotHere("a durable step's shard was written by another process: its state is in the job's "
                           "store only (the durable store serves the local runner, one process)")
    return raw
