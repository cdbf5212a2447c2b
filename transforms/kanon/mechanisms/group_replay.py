"""The k-anonymity verdict stream of one interest group (k-anonymity note Alg. 1 over exact window counts).

``GroupVerdicts`` replays a group's joins, aggregated to the distinct users
of each hour step, in step order: it keeps the exact window count c_t
(``SlidingDistinctCount``) and runs AboveThresholdWithPeriodicRestart on it.
Both the batch path (one call per group over its whole history) and the
streaming path (a stateful DoFn resuming the pickled object on event-time
timers) drive this same object, so both release the same verdicts.

Only steps where the verdict can change are evaluated; every other step's
verdict equals the previous one by construction:

* latched: o_t is true until the instance ends at s + w (Alg. 2);
* not latched and ``cannot_reach`` at step t: without new joins the count can
  only fall, so the comparison stays impossible until the next restart;
* window empty and not latched: o_t is false (``k > A`` is required so that a
  group nobody joined is never released as k-anonymous).

So the work per group is proportional to its join steps, its restarts and
its expirations, not to the number of steps times w: a stretch of unlatched
steps near the threshold without joins is compared in one vectorised call
(``AboveThreshold.compare``) against counts computed from the window's
expiry schedule (``SlidingDistinctCount.counts_ahead``).
"""
from __future__ import annotations

from collections.abc import Collection, Hashable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from schemas.rows import KAnonVerdict
from transforms.core.mechanisms.noise import RandomSource
from transforms.core.mechanisms.sliding_distinct import SlidingDistinctCount
from transforms.core.mechanisms.time_steps import step_start_micros
from transforms.kanon.mechanisms.above_threshold import (
    AboveThreshold,
    AboveThresholdWithPeriodicRestart,
    PeriodicRestartState,
    instance_start_step,
)

EMIT_MODES = ("changes", "all")


@dataclass(frozen=True)
class KAnonParameters:
    """What the k-anonymity server is asked to do: Alg. 1 with threshold k, window w, and what to emit.

    ``emit="changes"``: a verdict whenever o_t differs from o_{t-1} (every
    group starts not k-anonymous); ``emit="all"``: o_t for every step at
    which the group has a user in its window.
    """

    mechanism: AboveThresholdWithPeriodicRestart
    emit: str = "changes"

    def __post_init__(self) -> None:
        if self.emit not in EMIT_MODES:
            raise ValueError(f"emit must be one of {EMIT_MODES}, got {self.emit!r}")
        at = self.above_threshold
        if at.k <= at.total_bound:
            raise ValueError(
                f"k = {at.k} must exceed the noise bound A = {at.total_bound:.2f}: otherwise an interest group that "
                "nobody joined could be released as k-anonymous; use a larger k or a larger per-draw epsilon/delta"
            )

    @property
    def above_threshold(self) -> AboveThreshold:
        return self.mechanism.above_threshold

    @property
    def window_steps(self) -> int:
        return self.above_threshold.window_steps


class GroupVerdicts:
    """Replays one interest group's step aggregates through Alg. 1; picklable so streaming can resume it."""

    def __init__(self, group: str, parameters: KAnonParameters, source: RandomSource) -> None:
        self.group = group
        self.parameters = parameters
        self.source = source
        self.window = SlidingDistinctCount(parameters.window_steps)
        self.restart = PeriodicRestartState()
        self.last_step: int | None = None
        self.last_verdict = False
        self.reachable = False  # whether the running instance could still latch at the last evaluated step

    @property
    def _key(self) -> tuple[Hashable, ...]:
        return (self.group,)

    def process(self, step: int, users: Collection[Hashable] = ()) -> Iterator[KAnonVerdict]:
        """Evaluate o_step after adding the (distinct) users who joined at ``step``; yield what the mode emits."""
        if self.last_step is not None and step <= self.last_step:
            raise ValueError(f"group {self.group!r}: step {step} is not after the last processed step {self.last_step}")
        at = self.parameters.above_threshold
        count = self.window.advance(step, users)
        instance = self.parameters.mechanism.instance_for(self.restart, step)
        verdict = at.step(instance, step, count, self.source, self._key)
        self._note_reachable(count)
        yield from self._record(step, verdict, count)

    def _note_reachable(self, count: int) -> None:
        """Remember whether the running instance could still latch at ``count`` (else nothing changes until it ends)."""
        instance = self.restart.instance
        assert instance is not None  # the one that answered the step just evaluated
        self.reachable = not instance.latched and not self.parameters.above_threshold.cannot_reach(instance, count)

    def _restart_step(self) -> int:
        """The start of the instance after the one that answered the last evaluated step."""
        w = self.parameters.window_steps
        assert self.last_step is not None  # called once a step was evaluated
        return instance_start_step(self.last_step, w) + w

    def _record(self, step: int, verdict: bool, count: int) -> Iterator[KAnonVerdict]:
        """Remember o_step and yield its record if the emit mode asks for it."""
        changed = verdict != self.last_verdict
        self.last_step, self.last_verdict = step, verdict
        if (self.parameters.emit == "all" and count > 0) or (self.parameters.emit == "changes" and changed):
            assert self.restart.instance is not None  # the one that answered ``step``
            yield KAnonVerdict(
                interest_group=self.group,
                step=step,
                step_start_micros=step_start_micros(step),
                k_anonymous=verdict,
                instance_start_step=self.restart.instance.start_step,
            )

    def _stretch(self, first: int, through: int | None) -> Iterator[KAnonVerdict]:
        """Evaluate the unlatched steps ``first, first + 1, ...`` of the running instance, with no joins, at once.

        The stretch ends at the instance's last step, at the last step with a
        user in the window, or at ``through``; in ``changes`` mode it stops
        at the latch, after which nothing changes until the restart.
        """
        at, instance, last_join = self.parameters.above_threshold, self.restart.instance, self.window.last_join_step
        assert instance is not None and last_join is not None  # a reachable instance, a user in the window
        w = self.parameters.window_steps
        last = min(instance.start_step + w - 1, last_join + w - 1)
        if through is not None:
            last = min(last, through)
        steps = np.arange(first, last + 1, dtype=np.int64)
        counts = self.window.counts_ahead(first, last)
        hit = at.compare(instance, steps, counts, self.source, self._key)
        if self.parameters.emit == "all":
            for index, step in enumerate(steps.tolist()):
                yield from self._record(step, hit is not None and index >= hit, int(counts[index]))
            stop = last
        elif hit is None:
            stop = last
            yield from self._record(last, False, int(counts[-1]))
        else:
            stop = first + hit
            yield from self._record(stop, True, int(counts[hit]))
        self._note_reachable(self.window.advance(stop))

    def next_step(self) -> int | None:
        """The next step that must be evaluated even if no user joins before it; None when the group is idle."""
        if self.last_step is None:
            return None
        following = self.last_step + 1
        if self.window.has_users_at(following) and (self.parameters.emit == "all" or self.reachable):
            return following
        restart = self._restart_step()
        if self.last_verdict or self.window.has_users_at(restart):
            return restart
        return None

    def retire_step(self) -> int | None:
        """For an idle group, the step from which its state can be dropped; None while it is not idle.

        The running instance's threshold noise must be kept until the instance
        ends, so that a group joined again inside the same instance is judged
        against the same k' = k + nu (a fresh nu would be an unaccounted
        second instance).
        """
        if self.next_step() is not None or self.last_step is None:
            return None
        return self._restart_step()

    def run(self, join_steps: Iterable[tuple[int, Collection[Hashable]]], through: int | None = None) -> Iterator[KAnonVerdict]:
        """Process ``(step, distinct users)`` in increasing step order and every step that needs it in between.

        After the last join step, continue up to ``through`` (inclusive), or
        until the group is idle when ``through`` is None.
        """
        for step, users in join_steps:
            yield from self.catch_up(step - 1)
            yield from self.process(step, users)
        yield from self.catch_up(through)

    def catch_up(self, through: int | None) -> Iterator[KAnonVerdict]:
        """Evaluate every step that needs it up to ``through`` (None: until idle), with no new joins."""
        while (step := self.next_step()) is not None and (through is None or step <= through):
            running = self.restart.instance
            assert running is not None and self.last_step is not None  # a next step follows an evaluated one
            if self.reachable and step == self.last_step + 1 and step < running.start_step + self.parameters.window_steps:
                yield from self._stretch(step, through)
            else:
                yield from self.process(step)
