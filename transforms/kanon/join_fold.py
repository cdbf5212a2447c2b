"""Join rows folded into compact per-group join sets while files are read: the batch k-anonymity path's reading
side (a ``RowFold`` of ``transforms.core.io``), with pyarrow's dictionary encoding; the folded ``GroupJoins``
go to the Beam-free replay in ``mechanisms/batch_replay.py``."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from schemas.rows import JoinEvent
from schemas.time_units import MICROS_PER_HOUR


class GroupJoinsByGroup:
    """Folds join rows into one ``GroupJoins`` per interest group (a ``RowFold`` of ``transforms.core.io``).

    Rows are appended to three columns; ``drain`` turns them into groups
    with vectorised work: the group and user ids are dictionary-encoded
    (pyarrow), one lexicographic sort orders (group, user, step), and the
    (group, user, step) duplicates are dropped there, before any shuffle or
    state. Per join this costs three list appends instead of dictionary
    and set updates, which is what makes the batch path fast.
    """

    flush_rows = 2_000_000  # a drain's columns take about 100 bytes a join

    def __init__(self) -> None:
        self._groups: list[str] = []
        self._users: list[str] = []
        self._times: list[int] = []

    @property
    def pending(self) -> int:
        return len(self._groups)

    def add(self, join: JoinEvent) -> None:
        group, user, event_time_micros = join
        self._groups.append(group)
        self._users.append(user)
        self._times.append(event_time_micros)

    def drain(self) -> list[tuple[str, tuple[list[str], bytes, bytes]]]:
        """(group, ``GroupJoins.to_wire()``) for every group added since the last drain."""
        if not self._groups:
            return []
        group_ids = pa.array(self._groups, pa.string()).dictionary_encode()
        user_ids = pa.array(self._users, pa.string()).dictionary_encode()
        groups = group_ids.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        users = user_ids.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        steps = np.asarray(self._times, dtype=np.int64) // MICROS_PER_HOUR  # hour_step, vectorised
        self._groups, self._users, self._times = [], [], []
        # (group, user, step) in order, duplicates dropped
        order = np.lexsort((steps, users, groups))
        groups, users, steps = groups[order], users[order], steps[order]
        distinct = np.ones(len(order), dtype=bool)
        distinct[1:] = (groups[1:] != groups[:-1]) | (users[1:] != users[:-1]) | (steps[1:] != steps[:-1])
        groups, users, steps = groups[distinct], users[distinct], steps[distinct]
        # group boundaries, and each (group, user) pair numbered from 0 within its group
        new_group = np.ones(len(groups), dtype=bool)
        new_group[1:] = groups[1:] != groups[:-1]
        new_pair = new_group.copy()
        new_pair[1:] |= users[1:] != users[:-1]
        pair_index = np.cumsum(new_pair) - 1
        group_starts = np.flatnonzero(new_group)
        group_sizes = np.diff(np.append(group_starts, len(groups)))
        first_pair = pair_index[group_starts]
        codes = pair_index - np.repeat(first_pair, group_sizes)
        user_names = user_ids.dictionary.to_pylist()
        pair_names = [user_names[i] for i in users[new_pair].tolist()]
        group_names = group_ids.dictionary.to_pylist()
        pair_bounds = np.append(first_pair, len(pair_names)).tolist()
        row_bounds = np.append(group_starts, len(groups)).tolist()
        group_codes = groups[group_starts].tolist()
        steps_bytes, codes_bytes = steps.astype("<i8"), codes.astype("<i8")
        return [
            (
                group_names[group_codes[i]],
                (
                    pair_names[pair_bounds[i] : pair_bounds[i + 1]],
                    steps_bytes[row_bounds[i] : row_bounds[i + 1]].tobytes(),
                    codes_bytes[row_bounds[i] : row_bounds[i + 1]].tobytes(),
                ),
            )
            for i in range(len(group_codes))
        ]
