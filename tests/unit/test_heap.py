"""foxhunt/heap.py: what a long command holds from its start is frozen inside, back in the collector's
passes after, and the garbage made before is collected first; a training collects its youngest objects
less often."""

import gc
import weakref

import pytest

from foxhunt import compiled
from foxhunt.adapters.venues.sim import _Working
from foxhunt.core.kernel import Kernel
from foxhunt.core.orders import Order
from foxhunt.core.risk.gate import PreTradeGate
from foxhunt.core.risk.limits import RiskLimits
from foxhunt.core.step import Step
from foxhunt.heap import started_heap_frozen
from foxhunt.messages.orders import OrderType, Side, SubmitOrder


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


def test_what_the_order_path_makes_for_every_order_is_not_tracked_by_the_collector_where_compiled():
    """An Order (the kernel keeps 10,000 of them), a kernel's Step (one for each input that derives anything)
    and the simulated venue's working order hold nothing that can lead back to them: compiled, they are
    acyclic native classes (mypyc_attr), which the collector neither tracks nor counts towards a pass."""
    if not compiled.compiled_in_use():
        pytest.skip("running as Python (FOXHUNT_PURE_PYTHON=1 or not built): these are plain classes, tracked")
    cmd = SubmitOrder(ts_event=1, ts_init=1, order_id="o-1", strategy_id="s", symbol="EURUSD", side=Side.BUY,
                      order_type=OrderType.MARKET, quantity=1_000_000_000)
    order = Order.from_command(cmd)
    order.executions["T1"] = (1_000_000_000, 1_000_000_000, 0)
    made = [order, Step([cmd], [cmd]), _Working(cmd, 0)]
    assert [gc.is_tracked(x) for x in made] == [False, False, False]
    assert gc.is_tracked(Kernel({}, [], PreTradeGate(RiskLimits(), {})))  # the kernel and its parts hold cycles
