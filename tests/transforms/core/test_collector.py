"""``transforms.core.collector``: a streaming run's garbage collector settings, and their undoing."""
import gc

from transforms.core.collector import STREAMING_THRESHOLDS, streaming_collector


def test_streaming_collector_freezes_what_is_alive_and_restores_the_collector_after():
    before = gc.get_threshold()
    alive = [[index] for index in range(1_000)]  # containers alive when the run starts
    with streaming_collector():
        assert gc.get_threshold() == STREAMING_THRESHOLDS
        walked = {id(item) for item in gc.get_objects()}  # what a collection may walk: no frozen object
        assert gc.get_freeze_count() >= len(alive) and not walked & {id(item) for item in alive}
        made_during = [[index] for index in range(1_000)]  # fewer than the threshold: no collection yet
        young = {id(item) for item in gc.get_objects(generation=0)}
        assert {id(item) for item in made_during} <= young  # what the run makes is collected as usual
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0 and id(alive[0]) in {id(item) for item in gc.get_objects()}


def test_streaming_collector_restores_the_collector_when_the_run_fails():
    before = gc.get_threshold()
    try:
        with streaming_collector():
            raise RuntimeError("the run failed")
    except RuntimeError:
        pass
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
