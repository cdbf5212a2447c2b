"""Audit cases of the k-anonymity server ("Differentially Private Algorithms for k-Anonymity Server"): the
truncated Laplace noise TLap (Sec. 4.1), one AboveThreshold instance (Alg. 2, Cor. 4.4) and the stream of
instances restarted every w steps (Alg. 1, Cor. 3.1).

Neighbours differ by one user's join (Def. 2.1), which adds 1 to the w window counts after it. The cases use
the note's k = 50 and a per-draw TLap(eps, delta) with a short window (w = 4 steps, so that a run is cheap; w
enters the claims only through delta). Each run is a call of the code the pipelines run: ``TruncatedLaplace
.sample_keyed_array`` (the step noises' sampler), ``AboveThreshold.compare`` (the batch path's instance
evaluation) and ``batch_group_verdicts`` (the batch pipeline's per-group replay), with the secure source.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from audit.case import AuditCase, D
from transforms.core.mechanisms.noise import RandomSource, TruncatedLaplace
from transforms.kanon.mechanisms.above_threshold import AboveThreshold, AboveThresholdWithPeriodicRestart
from transforms.kanon.mechanisms.accounting import DrawParameters, instance_guarantee, stream_guarantee
from transforms.kanon.mechanisms.batch_replay import GroupJoins, batch_group_verdicts
from transforms.kanon.mechanisms.group_replay import KAnonParameters

K = 50
WINDOW_STEPS = 4
DRAW = DrawParameters(Fraction(3, 4), Fraction(1, 10**7))  # the note's eps = 3 for the stream: 3 / 4 per draw


def make_above_threshold(draw: DrawParameters = DRAW, k: int = K, window_steps: int = WINDOW_STEPS) -> AboveThreshold:
    """Alg. 2 as the pipelines build it: both noises TLap(eps, delta) of one draw."""
    return AboveThreshold(k=k, window_steps=window_steps, threshold_noise=draw.noise(), step_noise=draw.noise())


def make_tlap_case(draw: DrawParameters = DRAW, noise: TruncatedLaplace | None = None) -> AuditCase:
    """One TLap draw added to a count of 0 (D') or 1 (D): the noise of every comparison of Alg. 2. ``noise`` is
    the sampler (``draw.noise()``; a test passes a broken one)."""
    noise = draw.noise() if noise is None else noise

    def sample(side: str, n: int, source: RandomSource) -> np.ndarray:
        return (1 if side == D else 0) + noise.sample_keyed_array(source, ("audit", "tlap"), n)

    return AuditCase(
        name=f"kanon.tlap@eps={float(draw.epsilon):g}", mechanism="k-anonymity: truncated Laplace TLap",
        neighbours="a count of 1 or 0 (one user's join)", statistic="the noisy count",
        claimed_epsilon=float(draw.epsilon), claimed_delta=float(draw.delta),
        basis="k-anonymity note Sec. 4.1 (TLap(eps, delta) is bound(eps, delta, A, 1))", sample=sample,
        samples=2_000_000, quick_samples=100_000,
        tight="tight: inside the support the density ratio is e^eps, so a threshold event reaches it; the "
              "truncated tails carry at most delta",
    )


def _first_true(at: AboveThreshold, counts: np.ndarray, n: int, source: RandomSource) -> np.ndarray:
    """The index of the first true output of n fresh instances on ``counts`` (w when none)."""
    steps = np.arange(len(counts))
    out = np.empty(n)
    for run in range(n):
        hit = at.compare(at.start(0), steps, counts, source, ("audit", run))
        out[run] = at.window_steps if hit is None else hit
    return out


def make_instance_case(at: AboveThreshold | None = None, draw: DrawParameters = DRAW, below_k: int = 1) -> AuditCase:
    """One AboveThreshold instance over its w steps, with window counts k - ``below_k`` at every step (D') or
    one more (D: a user who joined at the instance's first step)."""
    at = make_above_threshold(draw) if at is None else at
    base = np.full(at.window_steps, at.k - below_k, dtype=np.int64)
    claim = instance_guarantee(draw, at.window_steps)

    def sample(side: str, n: int, source: RandomSource) -> np.ndarray:
        return _first_true(at, base + (1 if side == D else 0), n, source)

    return AuditCase(
        name=f"kanon.above_threshold@eps={float(draw.epsilon):g}", mechanism="k-anonymity: one AboveThreshold instance",
        neighbours=f"window counts k - {below_k} at each of the w = {at.window_steps} steps, or one more",
        statistic="the step of the first true verdict (w: none)", claimed_epsilon=float(claim.epsilon),
        claimed_delta=float(claim.delta), basis="k-anonymity note Alg. 2, Cor. 4.4", sample=sample,
        samples=200_000, quick_samples=20_000,
        tight="loose by design: Cor. 4.4 charges eps for the threshold noise and eps for the step noises, but a "
              "join raises every count (monotone queries), and then the loss stays near eps (Lyu, Su and Li 2017, "
              "Sec. 4: monotone queries)",
    )


def _stream_history(parameters: KAnonParameters, joins: GroupJoins, n: int, source: RandomSource) -> np.ndarray:
    """The verdict history of n fresh runs of the group, as one integer per run: bit t is o_t."""
    out = np.empty(n)
    for run in range(n):
        code = 0
        for verdict in batch_group_verdicts(f"audit-{run}", joins, parameters, source):
            code |= int(verdict.k_anonymous) << verdict.step
        out[run] = code
    return out


def make_stream_case(at: AboveThreshold | None = None, draw: DrawParameters = DRAW, below_k: int = 1) -> AuditCase:
    """Alg. 1 over two instances (steps 0 to 2w - 1): k - ``below_k`` users join at the start of each (D'), and on D one
    more user joins at every step from w / 2 on, so that user counts in both instances (the worst case of Cor.
    3.1), once per window however often they join (Def. 2.1: neighbours differ by all of one user's joins)."""
    at = make_above_threshold(draw) if at is None else at
    w = at.window_steps
    parameters = KAnonParameters(AboveThresholdWithPeriodicRestart(at), emit="all")
    regulars = [(step, [f"u{user}" for user in range(at.k - below_k)]) for step in (0, w)]  # in every window
    audited = [(step, ["audited"]) for step in range(w // 2, 2 * w)]
    joins = {D: GroupJoins.from_step_users([*regulars, *audited]), "D'": GroupJoins.from_step_users(regulars)}
    claim = stream_guarantee(draw, w)

    def sample(side: str, n: int, source: RandomSource) -> np.ndarray:
        return _stream_history(parameters, joins[side], n, source)

    return AuditCase(
        name=f"kanon.stream@eps={float(draw.epsilon):g}", mechanism="k-anonymity: the restarted stream",
        neighbours=f"k - {below_k} users joining at the start of each of two instances, plus or minus one user joining "
                   "at every step from the middle of the first",
        statistic="the verdicts of the 2w steps, as bits", claimed_epsilon=float(claim.epsilon),
        claimed_delta=float(claim.delta), basis="k-anonymity note Alg. 1, Cor. 3.1 with Cor. 4.4", sample=sample,
        samples=100_000, quick_samples=4_000,
        tight="loose by design: Cor. 3.1 doubles the instance's loose bound; a join touches the second half of "
              "one instance and the first half of the next",
    )
