"""AboveThreshold (k-anonymity note Alg. 2) and AboveThresholdWithPeriodicRestart (Alg. 1).

The mechanism is split into frozen parameters (``AboveThreshold``) and small
explicit state records (``AboveThresholdInstance``), so the state of a running
instance can be stored (Beam state, pickled) and resumed on another worker.

Noise draws are keyed: the threshold noise of instance ``AT_s`` of a stream
uses the key ``(*stream_key, "threshold", s)`` and its step noises, one block
of w values, the key ``(*stream_key, "steps", s)``. With a seeded source a draw is a function
of its key only, so any two runs that evaluate the same steps (batch replay,
streaming with timers, a retried bundle) release the same verdicts. With the
secure source the key is ignored and every draw is fresh; each key is drawn
at most once per stream by construction.
"""
from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np

from transforms.core.mechanisms.noise import RandomSource, TruncatedLaplace


@dataclass
class AboveThresholdInstance:
    """The state of one running instance ``AT_s`` of Alg. 2.

    ``threshold_noise`` is nu (k' = k + nu), ``latched`` is Alg. 2's
    AlreadyAbove, ``step_noises[i]`` is nu_{s+i}. nu is drawn at the
    instance's first count that could latch (c >= k - A) and the step noises
    at its first count that can reach k + nu (``reachable``), rather than at
    step s: they are independent of everything before their first use, so
    the outputs have the same distribution, and an instance whose counts
    never come near k draws nothing. The step noises are drawn as one block of w values, each
    used at most once (Alg. 2 draws nu_t only at unlatched steps; the unused
    ones are discarded), so a stretch of steps can be compared at once.
    """

    start_step: int
    threshold_noise: float | None = None
    step_noises: np.ndarray | None = None
    latched: bool = False


@dataclass(frozen=True)
class AboveThreshold:
    """Alg. 2 with threshold ``k``, window ``w`` and noise rho_1, rho_2 = TLap (Sec. 4.1).

    Both noises must be bound(eps_i, delta_i, A_i, 1) (Def. 4.1): supported on
    [-A_i, A_i]. By Thm. 4.2 / Cor. 4.4 one instance is
    (eps_1 + eps_2, (delta_1 + delta_2)(w + 1))-DP (see ``accounting``).
    Draw keys: ``(*stream_key, "threshold", s)`` for nu and
    ``(*stream_key, "steps", s)`` for the block of step noises of ``AT_s``.
    """

    k: int
    window_steps: int
    threshold_noise: TruncatedLaplace
    step_noise: TruncatedLaplace

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError(f"k must be >= 1, got {self.k}")
        if self.window_steps < 1:
            raise ValueError(f"window_steps must be >= 1, got {self.window_steps}")

    @property
    def total_bound(self) -> float:
        """A = A_1 + A_2 of Thm. 4.2: no verdict is wrong by more than A users."""
        return self.threshold_noise.A + self.step_noise.A

    def start(self, start_step: int) -> AboveThresholdInstance:
        """Start ``AT_s`` (its noise is drawn at its first comparison, see ``AboveThresholdInstance``)."""
        return AboveThresholdInstance(start_step=start_step)

    def cannot_reach(self, instance: AboveThresholdInstance, count: int) -> bool:
        """Exact skip: True when ``count + nu_t >= k + nu`` is impossible for every noise the instance can draw.

        Proof. rho_1 is supported on [-A_1, A_1] and rho_2 on [-A_2, A_2], and
        the samplers clip to these intervals. (i) Before nu is drawn: if
        c < k - (A_1 + A_2) then c + nu_t <= c + A_2 < k - A_1 <= k + nu for
        every possible nu and nu_t, so Alg. 2 outputs false whatever they are.
        (ii) Once nu is drawn: floating-point addition is monotone, so
        fl(c + nu_t) <= fl(c + A_2); if fl(c + A_2) < fl(k + nu) then
        fl(c + nu_t) < fl(k + nu). In both cases skipping the comparison changes
        no output, and since the draws are independent it changes the
        distribution of no later output either.
        """
        if instance.threshold_noise is None:
            return count < self.k - self.total_bound
        return count + self.step_noise.A < self.k + instance.threshold_noise

    def reachable(
        self, instance: AboveThresholdInstance, count: int, source: RandomSource, stream_key: tuple[Hashable, ...]
    ) -> bool:
        """Whether ``count`` can latch: draws nu on the instance's first count >= k - A, then applies the sharper
        rule (ii) of ``cannot_reach``. Only a reachable count needs the step noises."""
        if self.cannot_reach(instance, count):
            return False
        if instance.threshold_noise is None:
            key = (*stream_key, "threshold", instance.start_step)
            instance.threshold_noise = self.threshold_noise.sample(source, key=key)
            return not self.cannot_reach(instance, count)
        return True

    def _step_noises(
        self, instance: AboveThresholdInstance, source: RandomSource, stream_key: tuple[Hashable, ...]
    ) -> np.ndarray:
        """The block of step noises of ``instance``, drawn on first use."""
        if instance.step_noises is None:
            instance.step_noises = self.step_noise.sample_keyed_array(
                source, (*stream_key, "steps", instance.start_step), self.window_steps
            )
        return instance.step_noises

    def compare(
        self,
        instance: AboveThresholdInstance,
        steps: np.ndarray,
        counts: np.ndarray,
        source: RandomSource,
        stream_key: tuple[Hashable, ...],
    ) -> int | None:
        """Alg. 2's loop over consecutive unlatched steps of one instance: the index of the first output true.

        ``steps`` are increasing steps of ``instance`` and ``counts`` their c_t.
        Returns None when every output is false; otherwise latches and
        returns the index i of the first true (outputs before i are false,
        from i on true). Nothing is drawn while latched or while every count
        ``cannot_reach``.
        """
        if instance.latched:
            return 0
        if not self.reachable(instance, int(counts.max()), source, stream_key):  # nor can any smaller count
            return None
        noises = self._step_noises(instance, source, stream_key)[steps - instance.start_step]
        assert instance.threshold_noise is not None  # drawn by reachable()
        hits = np.flatnonzero(counts + noises >= self.k + instance.threshold_noise)
        if hits.size == 0:
            return None
        instance.latched = True
        return int(hits[0])

    def step(
        self,
        instance: AboveThresholdInstance,
        step: int,
        count: int,
        source: RandomSource,
        stream_key: tuple[Hashable, ...],
    ) -> bool:
        """One iteration of Alg. 2's loop: the output o_t for count c_t; updates ``instance``."""
        if instance.latched:
            return True
        if not self.reachable(instance, count, source, stream_key):
            return False
        nu_t = self._step_noises(instance, source, stream_key)[step - instance.start_step]
        assert instance.threshold_noise is not None  # drawn by reachable()
        if count + nu_t >= self.k + instance.threshold_noise:
            instance.latched = True
            return True
        return False


@dataclass
class PeriodicRestartState:
    """The state of Alg. 1 for one stream: the instance currently answering (None before the first step)."""

    instance: AboveThresholdInstance | None = None


def instance_start_step(step: int, window_steps: int) -> int:
    """The start s of the instance answering step t: s = floor(t / w) * w.

    Alg. 1 starts AT_t at every t with t mod w == 0, and AT_s answers steps
    s .. s + w - 1 (Alg. 2's loop), so o_t comes from AT_{floor(t/w) w}. (The
    note prints a ceiling there; a ceiling would name an instance that has not
    started yet for every t that is not a multiple of w.)
    """
    return (step // window_steps) * window_steps


@dataclass(frozen=True)
class AboveThresholdWithPeriodicRestart:
    """Alg. 1: a new AboveThreshold instance at every step t with t mod w == 0.

    Steps are hours since the Unix epoch, so every interest group restarts at
    the same hours. By Cor. 3.1 a join influences at most two instances, so the
    stream costs twice one instance's guarantee.
    """

    above_threshold: AboveThreshold

    def instance_for(self, state: PeriodicRestartState, step: int) -> AboveThresholdInstance:
        """The instance answering ``step``, starting it if ``step`` begins a new one (Alg. 1's restart)."""
        start = instance_start_step(step, self.above_threshold.window_steps)
        if state.instance is None or state.instance.start_step != start:
            if state.instance is not None and state.instance.start_step > start:
                raise ValueError(f"step {step} is before the running instance started at {state.instance.start_step}")
            state.instance = self.above_threshold.start(start)
        return state.instance

    def output(
        self,
        state: PeriodicRestartState,
        step: int,
        count: int,
        source: RandomSource,
        stream_key: tuple[Hashable, ...],
    ) -> bool:
        """o_t for count c_t = S_agg[t - w + 1, t]; starts the instance of ``step`` when needed."""
        instance = self.instance_for(state, step)
        return self.above_threshold.step(instance, step, count, source, stream_key)
