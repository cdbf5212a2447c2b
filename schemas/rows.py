"""Typed rows used inside the pipelines.

NamedTuples with annotated fields: Beam infers a schema for them and encodes
them with a deterministic ``RowCoder``, so they can be used as keys and
compared across runners. Field names and order match the protobuf messages in
``schemas/proto`` and the Avro records in ``schemas/avro``.
"""
from __future__ import annotations

from typing import NamedTuple


class JoinEvent(NamedTuple):
    """Join(u, t) of seed 004 Sec. 2.1: ``user_id`` joined ``interest_group`` at ``event_time_micros``."""

    interest_group: str
    user_id: str
    event_time_micros: int


class KAnonVerdict(NamedTuple):
    """The released verdict o_t of seed 004 Alg. 1 for one interest group and hour step."""

    interest_group: str
    step: int
    step_start_micros: int
    k_anonymous: bool
    instance_start_step: int


class DeadLetter(NamedTuple):
    """An input that could not be used: the raw input (as text), why, and where it came from."""

    raw: str
    reason: str
    source: str
