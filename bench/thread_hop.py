"""A round trip from the event loop to a worker thread and back, empty call, the two ways the scoring
source could make its calls (runtime/scoring.py, Worker): `anyio.to_thread.run_sync` with a limiter of one
and a deadline, and one thread of its own answering through `call_soon_threadsafe`. p50 and p99 over
--calls calls each, on uvloop.

    .venv/bin/python bench/thread_hop.py [--calls 2000]
"""

from __future__ import annotations

import argparse
import json
import time

import anyio
from latency import percentiles  # bench/latency.py

from foxhunt.runtime.scoring import Worker


async def main(calls: int) -> None:
    clock = time.perf_counter_ns
    limiter = anyio.CapacityLimiter(1)
    anyio_ns, own_ns = [], []
    with Worker() as worker:
        for _ in range(calls):
            t = clock()
            with anyio.fail_after(1):
                await anyio.to_thread.run_sync(lambda: None, limiter=limiter, abandon_on_cancel=True)
            anyio_ns.append(clock() - t)
            t = clock()
            await worker.call(lambda: None, 1.0)
            own_ns.append(clock() - t)
    print(json.dumps({"anyio.to_thread": percentiles(anyio_ns), "Worker": percentiles(own_ns), "calls": calls}))


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--calls", type=int, default=2000)
    anyio.run(main, p.parse_args().calls, backend_options={"use_uvloop": True})
