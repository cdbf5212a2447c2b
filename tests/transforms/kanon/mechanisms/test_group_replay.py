"""One group's verdict stream: the skipping replay against a naive step-by-step Alg. 1."""
from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.rows import JoinEvent
from schemas.time_units import MICROS_PER_HOUR
from tests.support.naive_kanon import naive_changes, naive_verdicts
from tests.support.sources import ConstantSource
from transforms.core.mechanisms.noise import SeededSource, TruncatedLaplace
from transforms.kanon.join_fold import GroupJoinsByGroup
from transforms.kanon.mechanisms.above_threshold import AboveThreshold, AboveThresholdWithPeriodicRestart
from transforms.kanon.mechanisms.batch_replay import GroupJoins, batch_group_verdicts, merge_group_joins, window_counts
from transforms.kanon.mechanisms.group_replay import GroupVerdicts, KAnonParameters

NOISE = TruncatedLaplace(epsilon=2.0, delta=0.1)  # A = 1.75, so 2A = 3.49 < k


def parameters(k: int, w: int, emit: str = "changes") -> KAnonParameters:
    at = AboveThreshold(k=k, window_steps=w, threshold_noise=NOISE, step_noise=NOISE)
    return KAnonParameters(mechanism=AboveThresholdWithPeriodicRestart(at), emit=emit)


@settings(max_examples=200, deadline=None)
@given(
    w=st.integers(2, 9),
    k=st.integers(4, 7),
    seed=st.integers(0, 10_000),
    joins=st.dictionaries(st.integers(0, 40), st.sets(st.integers(0, 12), min_size=1, max_size=8), min_size=1, max_size=25),
)
def test_skipping_replay_equals_naive_algorithm_1(w, k, seed, joins):
    source = SeededSource(seed)
    horizon = max(joins) + 2 * w + 1
    naive = naive_verdicts(joins, k, w, NOISE, source, "g", horizon)
    # changes: a record exactly where o_t differs from o_{t-1} (starting from false)
    replay = GroupVerdicts("g", parameters(k, w, "changes"), source)
    got = [(v.step, v.k_anonymous) for v in replay.run(sorted(joins.items()))]
    assert got == naive_changes(naive)
    assert replay.next_step() is None
    # all: o_t at every step whose window holds a user
    replay = GroupVerdicts("g", parameters(k, w, "all"), source)
    got_all = [(v.step, v.k_anonymous) for v in replay.run(sorted(joins.items()))]
    assert got_all == [(t, verdict) for t, (verdict, count) in sorted(naive.items()) if count > 0]


def test_hand_built_sequence_without_noise():
    """k = 5, w = 4, no noise: o_t = [c_t >= 5] until the latch, true until the restart."""
    joins = {
        0: {"a", "b", "c"},
        1: {"d"},
        2: {"e"},        # c_2 = 5: latch
        5: {"a"},        # restart at 4 with c_4 = 3 (d, e and nobody new): false
        9: set("fghij"),  # c_9 = 5 (a's join at 5 left the window [6, 9]): latch
    }                     # restart at 12: f..j still in [9, 12], latch again (no change); restart at 16: empty
    source = ConstantSource()
    replay = GroupVerdicts("g", parameters(5, 4, "changes"), source)
    got = [(v.step, v.k_anonymous, v.instance_start_step) for v in replay.run(sorted(joins.items()))]
    assert got == [(2, True, 0), (4, False, 4), (9, True, 8), (16, False, 16)]
    again = GroupVerdicts("h", parameters(5, 4), source).run(sorted(joins.items()))
    assert all(v.step_start_micros == v.step * MICROS_PER_HOUR for v in again)
    replay_all = GroupVerdicts("g", parameters(5, 4, "all"), ConstantSource())
    got_all = [(v.step, v.k_anonymous) for v in replay_all.run(sorted(joins.items()))]
    assert got_all == [
        (0, False), (1, False), (2, True), (3, True),
        (4, False), (5, False), (6, False), (7, False), (8, False),
        (9, True), (10, True), (11, True), (12, True),
    ]


def test_quiet_far_below_k_group_is_evaluated_only_at_join_steps_and_restarts():
    source = ConstantSource()
    replay = GroupVerdicts("g", parameters(20, 10), source)
    assert list(replay.run([(3, {"a"}), (7, {"b"})])) == []
    # Steps 3 and 7 (joins) and 10 (restart, b still in the window); idle after that; never near k: no draw.
    assert source.keys == []
    assert replay.last_step == 10 and replay.next_step() is None
    assert replay.retire_step() == 20


def test_state_pickles_and_resumes_identically():
    joins = sorted({0: {1, 2, 3, 4}, 1: {5, 6}, 3: {7}, 12: {1, 2, 3, 4, 5, 6}}.items())
    whole = list(GroupVerdicts("g", parameters(5, 6), SeededSource(3)).run(joins))
    first = GroupVerdicts("g", parameters(5, 6), SeededSource(3))
    part = list(first.run(joins[:2], through=4))
    resumed = pickle.loads(pickle.dumps(first))
    part += list(resumed.run(joins[2:]))
    assert part == whole


def test_k_must_exceed_the_noise_bound():
    with pytest.raises(ValueError, match="must exceed the noise bound"):
        parameters(3, 4)
    with pytest.raises(ValueError):
        parameters(5, 4, "sometimes")


@settings(max_examples=300, deadline=None)
@given(
    w=st.integers(1, 9),
    k=st.integers(4, 7),
    seed=st.integers(0, 10_000),
    emit=st.sampled_from(["changes", "all"]),
    joins=st.dictionaries(st.integers(0, 40), st.sets(st.integers(0, 12), min_size=1, max_size=8), min_size=1, max_size=25),
)
def test_vectorised_batch_replay_equals_the_stateful_replay_and_algorithm_1(w, k, seed, emit, joins):
    source = SeededSource(seed)
    steps = sorted(joins.items())
    stateful = list(GroupVerdicts("g", parameters(k, w, emit), source).run(steps))
    assert batch_group_verdicts("g", GroupJoins.from_step_users(steps), parameters(k, w, emit), source) == stateful
    naive = naive_verdicts(joins, k, w, NOISE, source, "g", max(joins) + 2 * w + 1)
    if emit == "changes":
        assert [(v.step, v.k_anonymous) for v in stateful] == naive_changes(naive)


@settings(max_examples=200, deadline=None)
@given(
    w=st.integers(1, 12),
    joins=st.dictionaries(st.integers(0, 60), st.sets(st.integers(0, 15), min_size=1, max_size=6), min_size=1, max_size=30),
)
def test_vectorised_window_counts_equal_brute_force(w, joins):
    first, counts = window_counts(GroupJoins.from_step_users(sorted(joins.items())), w)
    assert first == min(joins)
    for i, count in enumerate(counts.tolist()):
        t = first + i
        assert count == len({u for s, users in joins.items() if t - w + 1 <= s <= t for u in users})
    assert len(counts) == max(joins) + w - first  # up to the last step with a user in the window


def test_merging_partial_aggregates_matches_user_ids_and_drops_duplicates():
    first = GroupJoins.from_step_users([(3, {"a", "b"}), (5, {"a"})])
    second = GroupJoins.from_step_users([(5, {"a", "c"}), (9, {"b"})])
    merged = merge_group_joins([first, second])
    pairs = sorted((int(s), merged.users[c]) for s, c in zip(merged.steps, merged.codes, strict=True))
    assert pairs == [(3, "a"), (3, "b"), (5, "a"), (5, "c"), (9, "b")]
    assert merged.distinct_users == 3


@settings(max_examples=100, deadline=None)
@given(joins=st.lists(st.tuples(st.sampled_from("abcd"), st.integers(0, 6), st.integers(0, 30)), min_size=1, max_size=60))
def test_columnar_fold_gives_each_groups_distinct_step_user_pairs(joins):
    fold = GroupJoinsByGroup()
    for group, user, step in joins:
        fold.add(JoinEvent(group, f"u{user}", step * MICROS_PER_HOUR + 7))
    assert fold.pending == len(joins)
    drained = {group: GroupJoins.from_wire(wire) for group, wire in fold.drain()}
    assert fold.pending == 0
    for group in {g for g, _, _ in joins}:
        got = drained.pop(group)
        pairs = [(int(s), got.users[c]) for s, c in zip(got.steps, got.codes, strict=True)]
        assert sorted(pairs) == sorted(set(pairs)) == sorted({(s, f"u{u}") for g, u, s in joins if g == group})
        assert len(set(got.users)) == got.distinct_users
    assert drained == {}
