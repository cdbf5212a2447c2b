"""AboveThreshold (seed 004 Alg. 2) and AboveThresholdWithPeriodicRestart (Alg. 1).

The mechanism is split into frozen parameters (``AboveThreshold``) and small
explicit state records (``AboveThresholdInstance``), so the state of a running
instance can be stored (Beam state, pickled) and resumed on another worker.

Noise draws are keyed: the threshold noise of instance ``AT_s`` of a stream
uses the key ``(*stream_key, "threshold", s)`` and the step noise at step ``t``
uses ``(*stream_key, "step", t)``. With a seeded source a draw is a function
of its key only, so any two runs that evaluate the same steps (batch replay,
streaming with timers, a retried bundle) release the same verdicts. With the
secure source the key is ignored and every draw is fresh; each key is drawn
at most once per stream by construction.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable

from transforms.mechanisms.noise import RandomSource, TruncatedLaplace


@dataclass
class AboveThresholdInstance:
    """The state of one running instance ``AT_s`` of Alg. 2.

    ``threshold_noise`` is nu, drawn from rho_1 when the instance starts
    (k' = k + nu); ``latched`` is Alg. 2's AlreadyAbove.
    """

    start_step: int
    threshold_noise: float
    latched: bool = False


@dataclass(frozen=True)
class AboveThreshold:
    """Alg. 2 with threshold ``k``, window ``w`` and noise rho_1, rho_2 = TLap (Sec. 4.1).

    Both noises must be bound(eps_i, delta_i, A_i, 1) (Def. 4.1): supported on
    [-A_i, A_i]. By Thm. 4.2 / Cor. 4.4 one instance is
    (eps_1 + eps_2, (delta_1 + delta_2)(w + 1))-DP (see ``accounting``).
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

    def start(self, start_step: int, source: RandomSource, stream_key: tuple[Hashable, ...]) -> AboveThresholdInstance:
        """Start ``AT_s``: sample nu from rho_1 (first line of Alg. 2)."""
        nu = self.threshold_noise.sample(source, key=(*stream_key, "threshold", start_step))
        return AboveThresholdInstance(start_step=start_step, threshold_noise=nu)

    def cannot_reach(self, instance: AboveThresholdInstance, count: int) -> bool:
        """Exact skip: True when ``count + nu_t >= k + nu`` is impossible for every nu_t rho_2 can draw.

        Proof. rho_2 is supported on [-A_2, A_2] and the sampler clips to it,
        so nu_t <= A_2. Floating-point addition is monotone, hence
        fl(c + nu_t) <= fl(c + A_2). If fl(c + A_2) < fl(k + nu) then
        fl(c + nu_t) < fl(k + nu) and Alg. 2 outputs false whatever nu_t is,
        so skipping the draw changes no output, and since the draws are
        independent it changes the distribution of no later output either.
        In particular, as nu >= -A_1, every count c_t < k - (A_1 + A_2) is
        skipped (the rule stated in the issue and checked by the tests).
        """
        return count + self.step_noise.A < self.k + instance.threshold_noise

    def step(
        self,
        instance: AboveThresholdInstance,
        step: int,
        count: int,
        source: RandomSource,
        stream_key: tuple[Hashable, ...],
    ) -> bool:
        """One iteration of Alg. 2's loop: the output o_t for count c_t; updates ``instance``.

        No draw while latched (Alg. 2 outputs true without sampling) and none
        when ``cannot_reach`` (exact skip).
        """
        if instance.latched:
            return True
        if self.cannot_reach(instance, count):
            return False
        nu_t = self.step_noise.sample(source, key=(*stream_key, "step", step))
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

    def output(
        self,
        state: PeriodicRestartState,
        step: int,
        count: int,
        source: RandomSource,
        stream_key: tuple[Hashable, ...],
    ) -> bool:
        """o_t for count c_t = S_agg[t - w + 1, t]; starts the instance of ``step`` when needed."""
        start = instance_start_step(step, self.above_threshold.window_steps)
        if state.instance is None or state.instance.start_step != start:
            if state.instance is not None and state.instance.start_step > start:
                raise ValueError(f"step {step} is before the running instance started at {state.instance.start_step}")
            state.instance = self.above_threshold.start(start, source, stream_key)
        return self.above_threshold.step(state.instance, step, count, source, stream_key)
