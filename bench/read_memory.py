"""Memory while reading a large journal: stream every event of journal NAME through the read path
(pages decoded into Structs, as replay reads them) and report the peak RSS before and after, and the
rate. Create a large journal first, e.g. `foxhunt ingest synthetic:seed=1,n=10000000 --journal big`.

    .venv/bin/python bench/read_memory.py NAME
"""

from __future__ import annotations

from foxhunt import compiled

compiled.check()  # before any compiled module is imported: a stale one runs as its Python source

import resource
import sys
import time
from contextlib import aclosing

import anyio

from foxhunt import bootstrap, config


def max_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def main(name: str) -> None:
    cfg = config.load(None)
    store = await bootstrap.open_store(cfg, bootstrap.resolve_dsn(cfg))
    before = max_rss_mib()
    started, events, checkpoints = time.perf_counter(), 0, []
    async with aclosing(store.read(name)) as pages:
        async for page in pages:
            events += len(page)
            if events % 1_000_000 < len(page):
                checkpoints.append(f"{events // 1_000_000}M: {max_rss_mib():.0f}")
    seconds = time.perf_counter() - started
    print(f"journal {name}: {events:,} events in {seconds:.1f} s ({events / seconds:,.0f} events/s)")
    print(f"peak RSS before reading {before:.0f} MiB, after {max_rss_mib():.0f} MiB")
    print("peak RSS (MiB) after each million events: " + ", ".join(checkpoints))


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], backend_options={"use_uvloop": True})
