"""The journals as the web gateway shows them, read from PostgreSQL only.

A `Follower` reads one journal for everything that follows it (the store's `tail`, which wakes on the
writer's NOTIFY), and keeps its last records with their JSON, so the view and every WebSocket stream of a
journal cost one read and one encoding between them. A `JournalView` feeds the journal's inputs to a
kernel, as `foxhunt replay --verify` does: built from the recorded configuration, or restored from the
newest usable kernel snapshot as a restarting daemon's is (then fed the inputs after it). The kernel is
deterministic, so after input N its positions, orders, PnL, risk usage and trading state are exactly the
daemon's after input N, without asking the daemon anything.
Beside the kernel it keeps what a dashboard draws and the kernel does not: one-second bars of each
symbol's mid price, the last fills, and the models' latency from their journaled scores. All of it is
bounded, however long the journal.

`Journals` holds the views (at most `limit`, the least recently used one dropped first; the live journal
is never dropped) and answers the queries that go straight to the events table: pages of events, the
fills, and who holds a journal's writer lock (a daemon that is running on it).
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Sequence
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import msgspec
import structlog

from foxhunt.adapters.journal.pg_reader import PAGE_ROWS
from foxhunt.adapters.journal.pg_writer import LOCK_CLASS
from foxhunt.config import trading_from_json
from foxhunt.core.kernel import Kernel
from foxhunt.errors import JournalArchived, JournalError, JournalMismatch
from foxhunt.messages import codec
from foxhunt.messages.base import format_fixed
from foxhunt.messages.fixed_point import SCALE
from foxhunt.messages.market import QuoteTick, TradeTick
from foxhunt.messages.orders import OrderFilled, OrderPartiallyFilled
from foxhunt.messages.scores import ModelFailed, ModelScored, PolicyActed
from foxhunt.messages.system import RunStarted
from foxhunt.ports import JournalStore, Record
from foxhunt.runtime.recovery import build_kernel, from_snapshot, recorded_config
from foxhunt.web.db import Database

log = structlog.get_logger("foxhunt.web")

BARS = 2_000  # one-second bars kept per symbol
FILLS = 500
HISTORY = 50_000  # records before the snapshot a view starts from, for the dashboard's bars, fills and models
LATENCIES = 2_000  # the last scores' latencies kept per model, for its percentiles
MAX_PAGE = 1_000
# At the journal's end a follower waits this long before its next read, so that a daemon's many small group
# commits are read as one page, not one query each: the reads' own cost (a query and a sync a page) was
# most of what following a busy journal cost the gateway (bench/web_stream.py). It adds at most this much
# to the delay of the event stream.
LINGER_S = 0.02
WRITER_FRESH_S = 0.2  # how long the answer to who holds a journal's writer lock is shared
KEEP = 20_000  # records a follower keeps in memory for consumers at the journal's end (a few MB)
CATCH_UP_READERS = 4  # database connections for consumers behind what followers keep, all journals together
CATCH_UP_ROWS = 4 * PAGE_ROWS  # what one catch-up read takes before it lets its connection go


@dataclass
class ModelStats:
    parameter_sha256: str = ""
    scores: int = 0
    failures: int = 0
    last_failure: str = ""
    latencies_ns: deque[int] = field(default_factory=lambda: deque(maxlen=LATENCIES))

    def shown(self) -> dict[str, Any]:
        ordered = sorted(self.latencies_ns)

        def pct(p: float) -> float | None:
            return None if not ordered else round(ordered[min(len(ordered) - 1, math.ceil(p * len(ordered)) - 1)] / 1e3, 1)

        return {"parameter_sha256": self.parameter_sha256, "scores": self.scores, "failures": self.failures,
                "last_failure": self.last_failure, "latency_us": {"p50": pct(0.5), "p99": pct(0.99), "max": pct(1.0),
                                                                  "over_last": len(ordered)}}


class Follower:
    """One read of a journal shared by everything that follows it: its view's kernel and every WebSocket
    stream of it. It tails the journal from where the journal ended when it started, and keeps the last
    `KEEP` records it read, each with its JSON (encoded once, whoever sends it). A consumer at the journal's
    end is served from memory; one further behind reads pages of its own (`follow`) until it reaches what
    the follower keeps. Sequence numbers are gap-free, so a record's place in what is kept is arithmetic."""

    def __init__(self, name: str, start_seq: int, readers: anyio.CapacityLimiter | None = None) -> None:
        self.name = name
        # the catch-up reads of consumers behind what is kept, all journals together: each holds a database
        # connection while it reads (a server's connections are shared with the daemon)
        self.readers = readers if readers is not None else anyio.CapacityLimiter(CATCH_UP_READERS)
        self.first_kept = start_seq  # the seq of kept[0], or of the next record while nothing is kept
        self.kept: deque[tuple[Record, str, bytes]] = deque()  # (record, kind, its JSON)
        self.grown = anyio.Event()  # set (and replaced) after each page read
        self.error: str | None = None
        self.users = 0
        self.scope = anyio.CancelScope()

    async def run(self, store: JournalStore) -> None:
        with self.scope:
            try:
                async with aclosing(store.tail(self.name, self.first_kept)) as pages:
                    async for page in pages:
                        self._keep(page)
                        if len(page) < PAGE_ROWS:  # at the journal's end: let a few commits gather
                            await anyio.sleep(LINGER_S)
            except JournalError as e:
                self.error = str(e)
                log.warning("web_follower_failed", journal=self.name, error=self.error)
            finally:
                self.grown.set()

    def _keep(self, page: Sequence[Record]) -> None:
        self.kept.extend((r, kind := type(r.message).__name__, encoded(r, kind)) for r in page)
        while len(self.kept) > KEEP:
            self.kept.popleft()
            self.first_kept += 1
        self.grown.set()
        self.grown = anyio.Event()

    def since(self, seq: int, limit: int = PAGE_ROWS) -> list[tuple[Record, str, bytes]] | None:
        """Up to `limit` kept records from `seq` on ([] when there is none yet), or None when `seq` is before
        what is kept (the consumer must catch up with its own reads); JournalError once the follower failed."""
        if self.error is not None:
            raise JournalError(self.error)
        if seq < self.first_kept:
            return None
        kept, start = self.kept, seq - self.first_kept
        # by index: a deque finds an item from its nearer end, and consumers mostly ask for the newest
        return [kept[i] for i in range(start, min(start + limit, len(kept)))]

    async def follow(self, store: JournalStore, from_seq: int, *, decode_derived: bool = True
                     ) -> AsyncIterator[list[tuple[Record, str, bytes | None]]]:
        """Pages of (record, kind, JSON or None) from `from_seq` on, for ever: read by the consumer itself
        while it is behind what is kept (JSON None: encode it if you need it), then from memory. A read
        behind takes at most CATCH_UP_ROWS at a time, holding one of `readers` only while it reads: a slow
        client holds no connection while it takes its pages, and lagging consumers past the cap wait their
        turn instead of opening more."""
        seq = from_seq
        while True:
            grown = self.grown
            kept = self.since(seq)
            if kept is None:
                limit = min(self.first_kept - seq, CATCH_UP_ROWS)
                async with self.readers:
                    async with aclosing(store.read(self.name, seq, limit, decode_derived=decode_derived)) as pages:
                        chunk = [page async for page in pages]
                for page in chunk:
                    seq = page[-1].seq + 1
                    yield [(r, type(r.message).__name__, None) for r in page]
                continue
            if kept:
                seq = kept[-1][0].seq + 1
                yield kept
            else:
                await grown.wait()


class JournalView:
    """One journal's kernel, following its inputs; `changed` is set after each page it took in."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.kernel: Kernel | None = None
        self.seq = 0  # the last record taken in
        self.inputs = 0
        self.snapshot_seq = 0  # the snapshot the kernel started from (0: none, from the journal's first input)
        self.caught_up_to = 0  # the journal's last seq when the view started: ready once reached
        self.ready = anyio.Event()
        self.changed = anyio.Event()
        self.error: str | None = None
        self.bars: dict[str, deque[list[float]]] = {}  # symbol -> [time_s, open, high, low, close]
        self.fills: deque[dict[str, Any]] = deque(maxlen=FILLS)
        self.models: dict[str, ModelStats] = {}
        self.last_event_ns = 0
        # the seq of each RunStarted the kernel took in -> (inputs, fills, equity) just before it: what each
        # run's summary is made of (a run from one RunStarted to the next, or to now)
        self.run_marks: dict[int, tuple[int, int, int]] = {}

    async def run(self, store: JournalStore, follower: Follower) -> None:
        try:
            self.caught_up_to = follower.first_kept - 1
            await self._from_snapshot(store)
            if self.seq >= self.caught_up_to:
                self.ready.set()
            pages = follower.follow(store, self.seq + 1, decode_derived=False)
            async with aclosing(pages):
                async for page in pages:
                    self.take([record for record, _, _ in page])
                    if self.seq >= self.caught_up_to:
                        self.ready.set()
                    self.changed.set()
                    self.changed = anyio.Event()
        except JournalError as e:
            self.fail(str(e))

    async def _from_snapshot(self, store: JournalStore) -> None:
        """Start from the journal's newest usable snapshot, as a restarting daemon does (runtime/recovery.py),
        not from its first input: a view of a long journal is ready in seconds. What the dashboard draws from
        before it (bars, fills, model latencies) comes from the HISTORY records up to it."""
        if not self.caught_up_to or not await store.snapshots(self.name):
            return
        built_with = trading_from_json((await recorded_config(store, self.name)).config)
        kernel, snapshot, skipped = await from_snapshot(store, self.name, built_with, self.caught_up_to)
        for why in skipped:
            log.warning("web_view_snapshot_skipped", journal=self.name, why=why)
        if kernel is None or snapshot is None:
            return
        self.kernel, self.seq, self.inputs, self.snapshot_seq = kernel, snapshot.seq, snapshot.inputs, snapshot.seq
        first = max(1, snapshot.seq - HISTORY + 1)
        try:
            async with aclosing(store.read(self.name, first, snapshot.seq - first + 1, decode_derived=False)) as pages:
                async for page in pages:
                    for record in page:
                        if record.causation is None and record.message is not None:
                            self._draw(record.seq, record.message)
        except JournalArchived:
            pass  # the records before the snapshot are archived: the dashboard's history starts at it

    def fail(self, error: str) -> None:
        self.error = error
        self.ready.set()
        self.changed.set()
        log.warning("web_view_failed", journal=self.name, error=error)

    def take(self, page: Sequence[Record]) -> None:
        for record in page:
            msg = record.message
            if record.causation is not None or msg is None:
                continue
            if self.kernel is None:
                if not isinstance(msg, RunStarted):
                    raise JournalMismatch(f"journal {self.name!r} does not start with RunStarted")
                self.kernel = build_kernel(trading_from_json(msg.config))
            if type(msg) is RunStarted:
                self.run_marks[record.seq] = self.figures()
            self.kernel.handle(record.seq, msg)
            self.inputs += 1
            self._draw(record.seq, msg)
        if page:
            self.seq = page[-1].seq

    def figures(self) -> tuple[int, int, int]:
        """(inputs, fills, equity) of the kernel now: a run's summary is the change of these over it."""
        if self.kernel is None:
            return self.inputs, 0, 0
        portfolio = self.kernel.portfolio
        return self.inputs, sum(p.fills for p in portfolio.positions.values()), portfolio.equity

    def _draw(self, seq: int, msg: Any) -> None:
        """What the dashboard draws and the kernel does not keep: bars, fills, the models' latencies."""
        self.last_event_ns = msg.ts_event
        kind = type(msg)
        if kind is QuoteTick:
            self._bar(msg.symbol, msg.ts_event, (msg.bid + msg.ask) / (2 * SCALE))
        elif kind is TradeTick:
            self._bar(msg.symbol, msg.ts_event, msg.price / SCALE)
        elif kind is OrderFilled or kind is OrderPartiallyFilled:
            order = self.kernel.orders.by_id.get(msg.order_id) if self.kernel else None
            self.fills.append({"seq": seq, "time_ns": msg.ts_event, "order_id": msg.order_id,
                               "symbol": msg.symbol, "side": order.side.value if order else None,
                               "quantity": format_fixed(msg.last_qty), "price": format_fixed(msg.last_price)})
        elif kind is ModelScored or (kind is PolicyActed and msg.outputs):  # a served agent's decision too
            stats = self.models.setdefault(msg.model_id if kind is ModelScored else msg.policy_id, ModelStats())
            stats.parameter_sha256, stats.scores = msg.parameter_sha256, stats.scores + 1
            stats.latencies_ns.append(msg.latency_ns)
        elif kind is ModelFailed:
            stats = self.models.setdefault(msg.model_id, ModelStats())
            stats.failures += 1
            stats.last_failure = f"{msg.what}: {msg.reason}"

    def _bar(self, symbol: str, ts_ns: int, price: float) -> None:
        bars = self.bars.get(symbol)
        if bars is None:
            bars = self.bars[symbol] = deque(maxlen=BARS)
        second = ts_ns // 1_000_000_000
        if bars and bars[-1][0] == second:
            bar = bars[-1]
            bar[2], bar[3], bar[4] = max(bar[2], price), min(bar[3], price), price
        elif not bars or second > bars[-1][0]:
            bars.append([second, price, price, price, price])

    def state(self) -> dict[str, Any]:
        k = self.kernel
        return {
            "journal": self.name, "seq": self.seq, "inputs": self.inputs, "snapshot_seq": self.snapshot_seq,
            "ready": self.ready.is_set(),
            "caught_up_to": self.caught_up_to, "last_event_ns": self.last_event_ns,
            "trading_state": k.state.value if k else None,
            "open_orders": len(k.orders.open) if k else 0,
            "venues_down": sorted(k.venues_down) if k else [],
            "paused_strategies": sorted(k.paused) if k else [],
        }

    def models_shown(self) -> dict[str, Any]:
        return {model_id: stats.shown() for model_id, stats in sorted(self.models.items())}


class Journals:
    def __init__(self, store: JournalStore, db: Database, task_group: anyio.abc.TaskGroup, limit: int,
                 pinned: str = "") -> None:
        self.store = store
        self.db = db
        self.tg = task_group
        self.limit = limit
        self.pinned = pinned
        self.views: OrderedDict[str, tuple[JournalView, anyio.CancelScope]] = OrderedDict()
        self.followers: dict[str, Follower] = {}
        self.writers: dict[str, tuple[float, str | None]] = {}  # name -> (when asked, the answer)
        self.readers = anyio.CapacityLimiter(CATCH_UP_READERS)  # shared by every follower's consumers

    @asynccontextmanager
    async def following(self, name: str) -> AsyncIterator[Follower]:
        """The journal's one follower, started for the first user and stopped after the last
        (JournalNotFound before anything starts)."""
        follower = self.followers.get(name)
        if follower is None:
            follower = self.followers[name] = Follower(name, (await self.store.info(name)).last_seq + 1,
                                                       self.readers)
            self.tg.start_soon(follower.run, self.store)
        follower.users += 1
        try:
            yield follower
        finally:
            follower.users -= 1
            if follower.users == 0:
                follower.scope.cancel()
                if self.followers.get(name) is follower:
                    del self.followers[name]

    async def view(self, name: str, wait_s: float = 30.0) -> JournalView:
        """The journal's view, started if need be and caught up (JournalNotFound, or the error that stopped
        it); a view still catching up after `wait_s` is returned as it is (its state says how far it got)."""
        if name in self.views:
            self.views.move_to_end(name)
            view = self.views[name][0]
        else:
            await self.store.info(name)  # JournalNotFound before anything starts
            view = JournalView(name)
            scope = anyio.CancelScope()
            self.views[name] = (view, scope)
            self.tg.start_soon(self._follow, view, scope)
            self._evict()
        with anyio.move_on_after(wait_s):
            await view.ready.wait()
        if view.error is not None:
            self.views.pop(name, None)
            raise JournalError(view.error)
        return view

    async def _follow(self, view: JournalView, scope: anyio.CancelScope) -> None:
        with scope:
            try:
                async with self.following(view.name) as follower:
                    await view.run(self.store, follower)
            except JournalError as e:
                view.fail(str(e))

    def _evict(self) -> None:
        while len(self.views) > self.limit:
            name = next((n for n in self.views if n != self.pinned), None)
            if name is None:
                return
            _, scope = self.views.pop(name)
            scope.cancel()

    async def listing(self) -> list[dict[str, Any]]:
        held = dict(await self.db.fetch(
            "SELECT l.objid::bigint, a.application_name FROM pg_locks l JOIN pg_stat_activity a USING (pid)"
            " WHERE l.locktype = 'advisory' AND l.granted AND l.classid = %s", (LOCK_CLASS,), "reading who holds journals"))
        return [{"name": j.name, "created_at": j.created_at, "last_seq": j.last_seq, "config_digest": j.config_digest,
                 "writer": held.get(j.journal_id)} for j in await self.store.list()]

    async def writer(self, name: str) -> str | None:
        """The application that holds the journal's writer lock (a running daemon), or None: one query on
        the gateway's own connection, its answer shared for WRITER_FRESH_S (every status stream asks four
        times a second; the database serves the daemon first)."""
        asked, holder = self.writers.get(name, (-math.inf, None))
        if time.monotonic() - asked < WRITER_FRESH_S:
            return holder
        rows = await self.db.fetch(
            "SELECT a.application_name FROM journals j JOIN pg_locks l ON l.locktype = 'advisory' AND l.granted"
            " AND l.classid = %s AND l.objid::bigint = j.id JOIN pg_stat_activity a ON a.pid = l.pid WHERE j.name = %s",
            (LOCK_CLASS, name), "reading who holds a journal")
        holder = rows[0][0] if rows else None
        self.writers[name] = (time.monotonic(), holder)
        return holder

    async def runs(self, name: str, view: JournalView) -> list[dict[str, Any]]:
        """The journal's runs (each from its RunStarted to the next, or to now), how each started and
        stopped, and what happened in it: inputs, fills and the change of equity, from the view's kernel
        (None for a run before the snapshot the view started from)."""
        info = await self.store.info(name)
        rows = await self.db.fetch("SELECT seq, payload FROM events WHERE journal_id = %s AND kind = ANY(%s)"
                                   " ORDER BY seq", (info.journal_id, ["RunStarted", "RunStopped"]),
                                   f"reading the runs of journal {name!r}")
        runs: list[dict[str, Any]] = []
        for seq, payload in rows:
            msg = codec.decode(payload)
            if isinstance(msg, RunStarted):
                runs.append({"run_id": msg.run_id, "started_seq": seq, "started_ns": msg.ts_event,
                             "recorded_by": msg.recorded_by, "clock": msg.clock, "config_digest": msg.config_digest,
                             "fingerprint": msg.fingerprint, "stopped_seq": None, "stopped_ns": None,
                             "stop_reason": None, "summary": None})
            elif runs:
                runs[-1].update(stopped_seq=seq, stopped_ns=msg.ts_event, stop_reason=msg.reason)
        ends = [run["started_seq"] for run in runs[1:]]
        for run, end in zip(runs, [*ends, None], strict=True):
            start = view.run_marks.get(run["started_seq"])
            finish = view.figures() if end is None else view.run_marks.get(end)
            if start is not None and finish is not None:
                run["summary"] = {"inputs": finish[0] - start[0], "fills": finish[1] - start[1],
                                  "pnl": format_fixed(finish[2] - start[2]), "so_far": end is None}
        return runs

    async def events(self, name: str, from_seq: int, limit: int, kinds: Sequence[str] = (),
                     last: bool = False) -> dict[str, Any]:
        """A page of events from `from_seq` on (or, `last`, the page that ends the journal), with the seq to
        ask for next; `kinds` keeps only those kinds."""
        info = await self.store.info(name)
        limit = min(max(limit, 1), MAX_PAGE)
        where, params = "journal_id = %s AND seq >= %s", [info.journal_id, from_seq]
        if kinds:
            where += " AND kind = ANY(%s)"
            params.append(list(kinds))
        order = "DESC" if last else "ASC"
        rows = await self.db.fetch(f"SELECT seq, causation, payload FROM events WHERE {where} ORDER BY seq {order}"
                                   " LIMIT %s", (*params, limit), f"reading events of journal {name!r}")
        rows.sort()
        # What to ask for next, with no gap and no repeat: after the last row, or, where the query reached
        # the journal's end, after the end it knew of (the rows of other kinds up to there were passed over).
        next_seq = rows[-1][0] + 1 if rows else from_seq
        if last or len(rows) < limit:
            next_seq = max(next_seq, info.last_seq + 1)
        return {"events": [event(seq, causation, codec.decode(payload)) for seq, causation, payload in rows],
                "next_seq": next_seq, "last_seq": info.last_seq}


def event(seq: int, causation: int | None, message: object, kind: str = "") -> dict[str, Any]:
    """One event as the API shows it; msgspec encodes the message Struct itself (no copy into builtins)."""
    return {"seq": seq, "causation": causation, "kind": kind or type(message).__name__, "event": message}


def encoded(record: Record, kind: str) -> bytes:
    """A record as the event streams send it: its `event` as JSON."""
    return msgspec.json.encode(event(record.seq, record.causation, record.message, kind))
