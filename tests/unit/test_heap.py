"""foxhunt/heap.py: what a long command holds from its start is frozen inside, back in the collector's
passes after, and the garbage made before is collected first."""

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
