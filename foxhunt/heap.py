"""What a long-running command holds from its start, kept out of the garbage collector's full passes.

The daemon while it trades (runtime/daemon.py) and an agent's training while it steps its environments
(training/agents.py) hold, from their start, hundreds of thousands of objects the collector tracks (the
imports, torch's among them, the configuration, the kernel, the models, the market) that live as long as
the process. A full pass walks all of them: in the daemon one stopped the event loop for 140 to 240 ms
(docs/benchmarks.md, "Pauses of the garbage collector"; frozen, none ran in minutes of trading, and the
passes left took at most 1.5 ms), and in a training they cost a tenth of an environment step's time
(docs/benchmarks.md, "Trading agents"). Frozen (gc.freeze), they are left out; what is made after the
freeze is collected as before.

A training also collects its youngest objects less often (`young`): an environment step makes dozens of
objects the collector tracks (an order, its events' lists), nearly all of them dead within the step, and
at the interpreter's threshold of 700 the collector ran every few dozen steps for about 3% of a step's time
(docs/benchmarks.md, "Session 35"). The daemon keeps the threshold: a larger one makes each pass longer,
and its passes stop the event loop.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

YOUNG_WHILE_TRAINING = 20_000  # the training's `young`: a pass every few hundred environment steps


@contextlib.contextmanager
def started_heap_frozen(young: int | None = None) -> Iterator[None]:
    """Inside, what the process held when it entered is out of the collector's full passes; it is back in
    them after. The garbage made before is collected first (one full pass), so that none of it is kept.
    `young`: the allocations between two passes over the youngest generation while inside (None: the
    interpreter's threshold, unchanged)."""
    thresholds = gc.get_threshold()
    gc.collect()
    gc.freeze()
    if young is not None:
        gc.set_threshold(young, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()
