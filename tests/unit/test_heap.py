"""foxhunt/heap.py: what a long command holds from its start is frozen inside, back in the collector's
passes after, and the garbage made before is collected first; a training collects its youngest objects
less often."""

import gc
import weakref

from foxhunt.heap import started_heap_frozen


class _Node:
    pass


def test_the_heap_is_frozen_inside_and_back_after_with_the_garbage_before_collected():
    cycle = _Node()
    cycle.me = cycle  # garbage only the collector frees
    gone = weakref.ref(cycle)
    del cycle
    assert gc.get_freeze_count() == 0
    with started_heap_frozen():
        assert gone() is None
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0


def test_young_sets_the_first_generations_threshold_inside_and_gives_it_back():
    before = gc.get_threshold()
    with started_heap_frozen(young=before[0] * 10):
        assert gc.get_threshold() == (before[0] * 10, *before[1:])
    assert gc.get_threshold() == before
    with started_heap_frozen():
        assert gc.get_threshold() == before
