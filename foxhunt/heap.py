"""What a long-running command holds from its start, kept out of the garbage collector's full passes.

The daemon while it trades (runtime/daemon.py) and an agent's training while it steps its environments
(training/agents.py) hold, from their start, hundreds of thousands of objects the collector tracks (the
imports, torch's among them, the configuration, the kernel, the models, the market) that live as long as
the process. A full pass walks all of them: in the daemon one stopped the event loop for 140 to 240 ms
(docs/benchmarks.md, "Pauses of the garbage collector"; frozen, none ran in minutes of trading, and the
passes left took at most 1.5 ms), and in a training they cost a tenth of an environment step's time
(docs/benchmarks.md, "Trading agents"). Frozen (gc.freeze), they are left out; what is made after the
freeze is collected as before.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def started_heap_frozen() -> Iterator[None]:
    """Inside, what the process held when it entered is out of the collector's full passes; it is back in
    them after. The garbage made before is collected first (one full pass), so that none of it is kept."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
