"""Where a stateful step's state stands in its topic inputs (``InputPositions``, ``schemas/proto/state.proto``).

The local topic source numbers the elements it sends per input (0, 1, ... in a run) and gives each the offsets
its topic's partitions stand at after its records (``SourcePosition``). A stateful step folds the positions of
the elements it has received: an input's offsets are those after the last element of an unbroken run 0 .. n - 1,
so an element that overtook another on its way waits (``ahead``) until the gap closes. The offsets then name
exactly the records whose every event is in the state, buffered or folded; a job restarted from a snapshot reads
on from there (Flink's checkpoints and Kafka Streams' changelogs keep state and input position together the
same way).
"""
from __future__ import annotations

from collections.abc import Iterable

from schemas.proto import state_pb2

# A partition's place: (the next offset to read, records read there so far, of which dead-lettered)
Place = tuple[int, int, int]


def source_position(input_name: str, sequence: int, places: dict[int, Place]) -> bytes:
    """The ``SourcePosition`` of an input's element number ``sequence``: its partitions' places after it."""
    position = state_pb2.SourcePosition(input=input_name, sequence=sequence)
    for partition, (next_offset, read, dead) in sorted(places.items()):
        position.partitions.add(partition=partition, next_offset=next_offset, read=read, dead=dead)
    return position.SerializeToString()


def _input(positions: state_pb2.InputPositions, name: str) -> state_pb2.InputPositions.Input:
    for entry in positions.inputs:
        if entry.input == name:
            return entry
    return positions.inputs.add(input=name)


def _advance(entry: state_pb2.InputPositions.Input, position: state_pb2.SourcePosition) -> None:
    places = {offset.partition: offset for offset in entry.partitions}
    places.update((offset.partition, offset) for offset in position.partitions)
    kept = [state_pb2.PartitionOffset(partition=p.partition, next_offset=p.next_offset, read=p.read, dead=p.dead)
            for _, p in sorted(places.items())]
    del entry.partitions[:]
    entry.partitions.extend(kept)
    entry.next_sequence = position.sequence + 1


def fold_positions(positions: state_pb2.InputPositions, received: Iterable[state_pb2.SourcePosition]) -> None:
    """Fold the positions of elements a step received into ``positions``: an element already folded (its number
    is behind its input's next) changes nothing, one beyond a gap waits in ``ahead`` until the gap closes."""
    for position in received:
        entry = _input(positions, position.input)
        if position.sequence < entry.next_sequence or any(
                waiting.sequence == position.sequence for waiting in entry.ahead):
            continue
        entry.ahead.append(position)
        waiting = {item.sequence: item for item in entry.ahead}
        while entry.next_sequence in waiting:
            _advance(entry, waiting.pop(entry.next_sequence))
        del entry.ahead[:]
        entry.ahead.extend(waiting[sequence] for sequence in sorted(waiting))


def restarted(positions: state_pb2.InputPositions) -> state_pb2.InputPositions:
    """The positions restored from a snapshot, for a new run: its source numbers its elements from 0 again, and
    what a crashed run received beyond a gap is read again (it was not in the state)."""
    fresh = state_pb2.InputPositions()
    for entry in positions.inputs:
        fresh.inputs.add(input=entry.input, partitions=entry.partitions)
    return fresh


def resume_places(positions: state_pb2.InputPositions) -> dict[str, dict[int, Place]]:
    """Per input and partition, where a restarted job reads on: the next offset after what the state holds, and
    the counts of what the job read before it."""
    return {entry.input: {p.partition: (p.next_offset, p.read, p.dead) for p in entry.partitions}
            for entry in positions.inputs}
