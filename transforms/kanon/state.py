"""The streaming k-anonymity job's per-group state as an explicit record (``KAnonGroupState``,
``transforms.core.state``): a group's sliding window of distinct users, its running AboveThreshold instance
with the noises already drawn, and its last verdict.

Privacy: a restored instance keeps its noisy threshold k' = k + nu and its step noises, so verdicts already
published are never recomputed with fresh noise (a second draw over the same joins would be an unaccounted
second instance, k-anonymity note Cor. 3.1). The parameters and the random source are the job's, not the state's.
"""
from __future__ import annotations

from typing import cast

import numpy as np

from schemas.proto import state_pb2
from transforms.core.mechanisms.noise import RandomSource
from transforms.core.mechanisms.sliding_distinct import SlidingDistinctCount
from transforms.core.state import StateCodec
from transforms.kanon.mechanisms.above_threshold import AboveThresholdInstance
from transforms.kanon.mechanisms.group_replay import GroupVerdicts, KAnonParameters


def _to_message(replay: GroupVerdicts, message: state_pb2.KAnonGroupState) -> None:
    message.group = replay.group
    latest = sorted(replay.window.latest_joins().items())  # sorted: the same state gives the same bytes
    # the replay takes any hashable user; the streaming job's are user ids, the record's strings (protobuf refuses
    # anything else)
    message.window_users.extend(cast(str, user) for user, _ in latest)
    message.window_last_steps.extend(step for _, step in latest)
    if replay.window.now is not None:
        message.window_now = replay.window.now
    instance = replay.restart.instance
    if instance is not None:
        record = message.instance
        record.start_step = instance.start_step
        record.latched = instance.latched
        if instance.threshold_noise is not None:
            record.threshold_noise = instance.threshold_noise
        if instance.step_noises is not None:
            record.has_step_noises = True
            record.step_noises.extend(instance.step_noises.tolist())
    if replay.last_step is not None:
        message.last_step = replay.last_step
    message.last_verdict = replay.last_verdict
    message.reachable = replay.reachable


def _from_message(message: state_pb2.KAnonGroupState, parameters: KAnonParameters, source: RandomSource) -> GroupVerdicts:
    replay = GroupVerdicts(message.group, parameters, source)
    replay.window = SlidingDistinctCount.restored(
        parameters.window_steps,
        message.window_now if message.HasField("window_now") else None,
        dict(zip(message.window_users, message.window_last_steps, strict=True)),
    )
    if message.HasField("instance"):
        record = message.instance
        replay.restart.instance = AboveThresholdInstance(
            start_step=record.start_step,
            threshold_noise=record.threshold_noise if record.HasField("threshold_noise") else None,
            step_noises=np.array(record.step_noises, dtype=np.float64) if record.has_step_noises else None,
            latched=record.latched,
        )
    replay.last_step = message.last_step if message.HasField("last_step") else None
    replay.last_verdict = message.last_verdict
    replay.reachable = message.reachable
    return replay


def group_state_codec(parameters: KAnonParameters, source: RandomSource) -> StateCodec:
    """The codec of a group's ``GroupVerdicts``, restored with the job's ``parameters`` and ``source``."""
    return StateCodec(
        state_pb2.KAnonGroupState, _to_message, lambda message: _from_message(message, parameters, source)
    )
