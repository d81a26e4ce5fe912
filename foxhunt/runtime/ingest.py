"""Bulk loading of market data into a journal: `foxhunt ingest FILE --journal NAME`.

The rows of a feed go into the journal as inputs, through the same writer as live trading (numbered,
group-committed by binary COPY), between a `RunStarted` marked `recorded_by="ingest"` and a `RunStopped`.
Nothing is derived: an ingested journal is market data to backtest on (`foxhunt replay NAME`), so
`--verify` refuses it, and the daemon will not trade on it. Several files may be ingested into one
journal, one after the other.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from foxhunt.config import Config
from foxhunt.errors import JournalMismatch
from foxhunt.messages.base import Input
from foxhunt.messages.system import FeedGap, RunStarted, RunStopped
from foxhunt.ports import JournalStore
from foxhunt.runtime.recovery import recorded_config

PROGRESS_EVERY = 16_384  # rows between two calls of `progress`


async def ingest(
    store: JournalStore, cfg: Config, journal_name: str, feed: Iterable[Input], fingerprint: dict[str, str],
    progress: Callable[[int], None] | None = None,
) -> dict[str, object]:
    """`progress(rows)` is called every PROGRESS_EVERY rows and at the end."""
    trading = cfg.trading()
    started = time.perf_counter()
    rows = gaps = 0
    async with store.writer(
        journal_name, config=trading.to_json(), config_digest=trading.digest(), fingerprint=fingerprint
    ) as journal:
        if journal.last_seq and (await recorded_config(store, journal_name)).recorded_by != "ingest":
            raise JournalMismatch(f"journal {journal_name!r} was traded on; ingest market data into a new journal")
        journal.append(
            RunStarted(
                ts_event=0, ts_init=0, run_id=journal.last_seq + 1, seed=trading.seed,
                config_digest=trading.digest(), config=trading.to_json(), fingerprint=fingerprint, clock="feed",
                recorded_by="ingest",
            )
        )
        last_ts = 0
        append = journal.append
        for msg in feed:
            if journal.backlogged:
                await journal.relieve()
            append(msg)
            rows += 1
            gaps += type(msg) is FeedGap
            last_ts = msg.ts_init
            if progress is not None and not rows % PROGRESS_EVERY:
                progress(rows)
        append(RunStopped(ts_event=last_ts, ts_init=last_ts, reason="ingest complete"))
        await journal.flush()
        last_seq = journal.last_seq
    if progress is not None:
        progress(rows)
    seconds = time.perf_counter() - started
    return {
        "journal": journal_name, "mode": "ingest", "rows": rows, "gaps": gaps, "last_seq": last_seq,
        "seconds": round(seconds, 3), "rows_per_second": round(rows / seconds) if seconds > 0 else None,
    }
