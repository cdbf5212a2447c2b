"""Exact distinct-user counts over a sliding window of hour steps.

The k-anonymity server needs, for one interest group and every step t,
``c_t = S_agg[t - w + 1, t]``: the number of distinct users with at least one
join in the last ``w`` steps (k-anonymity note Sec. 2.1 and Observation 2.2).

The structure keeps, per user in the window, the last step at which the user
joined, and per step the users whose last join was at that step. Adding the
(deduplicated) users of a step costs one dictionary update per user; moving
the window forward drops exactly the users whose last join has left it. So
the work per step is proportional to the new joins plus the expirations,
never to the window length ``w``, and memory holds each user in the window
once.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterable

import numpy as np


class SlidingDistinctCount:
    """Distinct users with a join in steps ``[t - w + 1, t]``, fed in increasing step order."""

    def __init__(self, window_steps: int) -> None:
        if window_steps < 1:
            raise ValueError(f"window_steps must be >= 1, got {window_steps}")
        self.window_steps = window_steps
        self._last_step: dict[Hashable, int] = {}
        # (step, users whose join at that step was their latest when added), steps increasing.
        self._buckets: deque[tuple[int, list[Hashable]]] = deque()
        self._now: int | None = None

    def advance(self, step: int, users: Iterable[Hashable] = ()) -> int:
        """Move the window to end at ``step``, add the users who joined at ``step``, return ``c_step``."""
        if self._now is not None and step < self._now:
            raise ValueError(f"steps must not decrease: {step} after {self._now}")
        self._now = step
        oldest_kept = step - self.window_steps + 1
        buckets, last_step = self._buckets, self._last_step
        while buckets and buckets[0][0] < oldest_kept:
            bucket_step, bucket_users = buckets.popleft()
            for user in bucket_users:
                if last_step.get(user) == bucket_step:
                    del last_step[user]
        added = [user for user in users if last_step.get(user) != step]
        if added:
            for user in added:
                last_step[user] = step
            if buckets and buckets[-1][0] == step:
                buckets[-1][1].extend(added)
            else:
                buckets.append((step, added))
        return len(last_step)

    def counts_ahead(self, first: int, last: int) -> np.ndarray:
        """c_t for steps ``first .. last`` (after the current step) if nobody joins meanwhile; nothing changes.

        c_t = #{users whose last join is >= t - w + 1}: one sort of the
        window's last-join steps and a binary search per step.
        """
        if self._now is not None and first <= self._now:
            raise ValueError(f"counts ahead start after the current step {self._now}, got {first}")
        last_steps = np.sort(np.fromiter(self._last_step.values(), dtype=np.int64, count=len(self._last_step)))
        oldest_kept = np.arange(first, last + 1, dtype=np.int64) - self.window_steps + 1
        return len(last_steps) - np.searchsorted(last_steps, oldest_kept, side="left")

    @property
    def now(self) -> int | None:
        """The step the window ends at (None before the first step)."""
        return self._now

    def latest_joins(self) -> dict[Hashable, int]:
        """Each user in the window with the step of their latest join: all the window's state (for checkpoints)."""
        return dict(self._last_step)

    @classmethod
    def restored(cls, window_steps: int, now: int | None, latest_joins: dict[Hashable, int]) -> SlidingDistinctCount:
        """The window that ``latest_joins`` (from ``latest_joins()``) and ``now`` describe: it counts and moves
        exactly as the one they were taken from."""
        window = cls(window_steps)
        window._now = now
        window._last_step = dict(latest_joins)
        for step in sorted(set(latest_joins.values())):
            window._buckets.append((step, [user for user, last in latest_joins.items() if last == step]))
        return window

    @property
    def count(self) -> int:
        """``c_t`` at the current step."""
        return len(self._last_step)

    @property
    def last_join_step(self) -> int | None:
        """The latest step with a join still in the window (None when the window is empty)."""
        return self._buckets[-1][0] if self._buckets and self._last_step else None

    def has_users_at(self, step: int) -> bool:
        """Whether the window ending at ``step`` (>= the current step) still holds a user, absent new joins."""
        last = self.last_join_step
        return last is not None and last >= step - self.window_steps + 1
