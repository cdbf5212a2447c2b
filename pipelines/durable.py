"""A local streaming job's durable state, on the driver's side: claim the job in its store, resume its topics
from where its state stands, hand its stateful steps their place in the store (``transforms.core.durable``).

A streaming run that reads Kafka topics on the local runner keeps its state in ``--state-store`` (default
``.pm-beam/state.sqlite``) under ``--job-id`` (default: ``<pipeline>@<consumer group of its first topic>``, so
that two pipelines reading with the same group are two jobs). At the start the
driver claims the job (a second process with the same id is refused while the first lives; a drained job is
refused, its state being final), reads its steps' last snapshots and starts the topic source at the offsets they
reflect; each stateful step restores its own state on its first element. ``--state-store none`` keeps the state
in the runner's memory only, as before: a crash then loses it (docs/durability.md).
"""
from __future__ import annotations

import contextlib
import dataclasses

from pipelines.common import RunFailure
from pipelines.options.run import RunOptions
from transforms.core.bus.kafka_stream import TopicInput
from transforms.core.durable.acknowledgement import WatermarkBound, forget
from transforms.core.durable.positions import Place, resume_places
from transforms.core.durable.step import DurableStep
from transforms.core.durable.store import JobClaim, JobRefused, StateStore, StoreUnavailable
from transforms.core.durable.stores import open_store
from transforms.core.noise_key import KeyLocation

NO_STORE = "none"


@dataclasses.dataclass
class DurableJob:
    """A claimed job: its store (the driver's connection, which holds the claim) and where its topics resume."""

    store_uri: str
    job_id: str
    key: KeyLocation  # the key the store's rows are sealed with
    store: StateStore
    claim: JobClaim
    resume: dict[str, dict[int, Place]]  # input -> partition -> where a restarted job reads on
    restarted: bool  # the job has state from an earlier run
    # the highest watermark its topic source has sent (the acknowledgement of its releases)
    bound: WatermarkBound = dataclasses.field(default_factory=WatermarkBound.create)

    @property
    def noise_nonce(self) -> bytes:
        """The public nonce the job's noise is derived with, drawn when the job started (``pipelines.noise``)."""
        return self.claim.noise_nonce

    def step(self, name: str) -> DurableStep:
        """The place of the stateful step ``name`` in the job's store."""
        return DurableStep(self.store_uri, self.job_id, name, self.key)

    def resumed(self, inputs: list[TopicInput]) -> list[TopicInput]:
        """``inputs`` numbering their elements with positions, from the offsets the job's state reflects."""
        return [dataclasses.replace(source, durable=(self.store_uri, self.job_id, self.key),
                                    watermark_bound=self.bound.path, resume=tuple(
            (partition, *place) for partition, place in sorted(self.resume.get(source.name, {}).items())))
            for source in inputs]

    def drained(self) -> None:
        """The run processed the end of its input and finished: the job's state is final, and a next run of the
        same id is refused. (A crash before this, even after the end's snapshot, leaves the job resumable: its
        restart finds nothing new and re-emits what was released.)"""
        try:
            self.store.mark_drained(self.job_id)
        except StoreUnavailable as error:
            raise RunFailure(str(error)) from None

    def close(self) -> None:
        forget(self.job_id)
        self.bound.close(remove=True)
        self.claim.release()
        self.store.close()


def open_job(options: RunOptions, inputs: list[TopicInput]) -> DurableJob | None:
    """Claim the job of a local streaming run from ``inputs`` in its store (None with ``--state-store none``); a
    ``RunFailure`` (one line, exit status 1) when the store cannot be used or refuses the job."""
    if options.state_store == NO_STORE:
        return None
    first = inputs[0]
    key, noise_key = options.sealing_key, options.noise_key
    if key is None or noise_key is None:
        raise ValueError("a durable job needs its keys (RunOptions.noise_key)")
    job_id = options.job_id or f"{first.pipeline}@{getattr(first.topic, 'group', None) or first.group}"
    with contextlib.ExitStack() as undo:  # what was opened is closed again when a later step fails
        try:
            store = open_store(options.state_store, key)
            undo.callback(store.close)
            claim = store.claim(job_id, first.pipeline, noise_key.key_id)
            undo.callback(claim.release)
            snapshots = store.snapshots(job_id)
        except StoreUnavailable as error:
            raise RunFailure(f"{error} (--state-store none runs without durable state)") from None
        except JobRefused as error:
            raise RunFailure(str(error)) from None
        undo.pop_all()
    resume: dict[str, dict[int, Place]] = {}
    for snapshot in snapshots.values():
        for name, places in resume_places(snapshot.positions).items():
            for partition, place in places.items():  # several steps: the earliest any of them needs
                resume.setdefault(name, {})[partition] = min(place, resume.get(name, {}).get(partition, place))
    if snapshots:
        where = "; ".join(f"{name} at {', '.join(f'{p}@{place[0]}' for p, place in sorted(places.items()))}"
                          for name, places in sorted(resume.items()))
        print(f"state: job {job_id} restored from {store.uri} ({where or 'no input read yet'})", flush=True)
    else:
        print(f"state: job {job_id} starts with empty state in {store.uri}", flush=True)
    return DurableJob(options.state_store, job_id, key, store, claim, resume, restarted=bool(snapshots))
