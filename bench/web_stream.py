"""The web gateway's event stream, and what the gateway costs the daemon (docs/benchmarks.md, "Web gateway").

1. Stream: a journal written at `--rate` events a second (QuoteTicks through the journal writer, group
   commits as the daemon makes them) while a WebSocket client of `foxhunt web serve` follows it from seq 1:
   the events a second it receives, and the delay from each event's append (its ts_init, stamped just
   before `append`) to its receipt, p50 and p99. Append to receipt is commit to receipt plus the wait for
   the group commit: an upper bound of the delay the issue asks for.
2. The daemon with and without the gateway: `foxhunt run` on a synthetic record as fast as it goes (feed
   clock, ema_cross), alone, then with the gateway and three dashboards' worth of clients (three event
   streams and three status streams following the journal it writes), alternated, `--runs` times each.
   The gateway runs at its systemd unit's priority (nice 10; `--gateway-nice`), the dashboards' clients in
   a process of their own at nice 19: they stand in for browsers on other machines.
3. Tick to wire at a live pace, with and without the gateway and three dashboards: the trading loop (as in
   bench/journal_latency.py, durability before_send, ema_cross) fed `--live-rate` quotes a second on the
   wall clock for `--seconds`, timed from a quote entering the loop to the order it causes reaching the
   venue adapter; p50, p99, p99.9.

    .venv/bin/python bench/web_stream.py [--seconds 10] [--rate 50000] [--runs 3] [--events 300000] [--live-rate 2000]
                                         [--gateway-nice 10] [--parts stream,daemon,live]

Uses FOXHUNT_DSN, or the embedded cluster in FOXHUNT_STATE_DIR (a temporary one when neither is set).
"""

from __future__ import annotations

from foxhunt import compiled

compiled.check()  # before any compiled module is imported: a stale one runs as its Python source

import argparse
import contextlib
import json
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator

import anyio
import httpx
from journal_latency import tick_to_wire  # bench/: the trading loop's tick-to-wire timing, shared
from latency import percentiles
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from foxhunt import bootstrap, config
from foxhunt.adapters.feeds.synthetic import SyntheticFeed
from foxhunt.adapters.journal.postgres import PostgresJournalStore
from foxhunt.messages.base import parse_fixed
from foxhunt.messages.market import QuoteTick
from foxhunt.runtime.clock import WallClock
from foxhunt.web.db import Database
from foxhunt.web.tokens import TokenStore

GATEWAY_NICE = 10  # as scripts/foxhunt-web.service's Nice=
BROWSERS_NICE = 19  # the dashboards' clients stand in for browsers on other machines: they take what is left

META = {"config": b"{}", "config_digest": "bench", "fingerprint": {}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_gateway(env: dict[str, str], port: int, nice: int = GATEWAY_NICE) -> subprocess.Popen:
    """`foxhunt web serve`, by default at the priority its systemd unit gives it (scripts/foxhunt-web.service)."""
    gateway = subprocess.Popen(["nice", "-n", str(nice), sys.executable, "-m", "foxhunt", "web", "serve", "--listen",
                                f"127.0.0.1:{port}"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/journals", timeout=2).status_code == 401:
                return gateway
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline or gateway.poll() is not None:
            raise SystemExit("the gateway did not start")
        time.sleep(0.2)


async def stream(dsn: str, port: int, token: str, seconds: float, rate: int) -> dict[str, float]:
    store = PostgresJournalStore(dsn)
    name = f"bench-web-{uuid.uuid4().hex[:8]}"
    delays: list[int] = []
    received = [0]
    first_receipt = [0.0]
    async with store.writer(name, **META) as writer:
        writer.append(QuoteTick(ts_event=time.time_ns(), ts_init=time.time_ns(), symbol="EURUSD", bid=1, ask=2))
        await writer.flush()

        async def follow() -> None:
            url = f"ws://127.0.0.1:{port}/api/journals/{name}/stream?from_seq=1"
            async with connect(url, additional_headers={"authorization": f"Bearer {token}"}, max_size=2**26) as ws:
                async for frame in ws:
                    now = time.time_ns()
                    events = json.loads(frame)["events"]
                    if not first_receipt[0]:
                        first_receipt[0] = time.perf_counter()
                    received[0] += len(events)
                    delays.extend(now - e["event"]["ts_init"] for e in events)

        async with anyio.create_task_group() as tg:
            tg.start_soon(follow)
            await anyio.sleep(1.0)  # connected and caught up with the first event
            delays.clear()
            received[0] = 0
            started = time.perf_counter()
            sent = 0
            while (elapsed := time.perf_counter() - started) < seconds:
                due = int(elapsed * rate)
                for _ in range(due - sent):
                    now = time.time_ns()
                    writer.append(QuoteTick(ts_event=now, ts_init=now, symbol="EURUSD", bid=1_100_000_000,
                                            ask=1_100_010_000))
                sent = due
                await anyio.sleep(0.001)
            await writer.flush()
            written_for = time.perf_counter() - started
            with anyio.move_on_after(30):
                while received[0] < sent:
                    await anyio.sleep(0.05)
            took = time.perf_counter() - started
            tg.cancel_scope.cancel()
    ms = sorted(d / 1e6 for d in delays)
    return {"written": sent, "written_per_s": sent / written_for, "received": received[0],
            "received_per_s": received[0] / took, "p50_ms": statistics.median(ms),
            "p99_ms": ms[int(len(ms) * 0.99)], "max_ms": ms[-1]}


def run_daemon(env: dict[str, str], events: int, journal: str) -> float:
    done = subprocess.run([sys.executable, "-m", "foxhunt", "run", "--journal", journal, "--feed",
                           f"synthetic:seed=5,n={events}", "--clock", "feed", "--json"],
                          env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)["events_per_second"]


async def dashboards(port: int, token: str, journal: str) -> None:
    """Three dashboards' clients: an event stream and a status stream each, retrying until the journal exists."""
    headers = {"authorization": f"Bearer {token}"}

    async def one(path: str) -> None:
        while True:
            try:
                async with connect(f"ws://127.0.0.1:{port}{path}", additional_headers=headers, max_size=2**26) as ws:
                    async for _ in ws:
                        pass
            except (ConnectionClosed, OSError):
                pass
            await anyio.sleep(0.05)

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(one, f"/api/journals/{journal}/stream?from_seq=1")
            tg.start_soon(one, f"/api/status/stream?journal={journal}")


def browsers(port: int, token: str, journal: str) -> None:
    """`dashboards` in a process of their own at the lowest priority, until terminated: they stand in for
    browsers on other machines, so their own work must not take the daemon's CPU."""
    os.nice(BROWSERS_NICE)
    anyio.run(dashboards, port, token, journal)


@contextlib.contextmanager
def watching(port: int, token: str, journal: str) -> Iterator[None]:
    clients = multiprocessing.get_context("spawn").Process(target=browsers, args=(port, token, journal))
    clients.start()
    try:
        yield
    finally:
        clients.terminate()
        clients.join()


def daemon_side_by_side(env: dict[str, str], port: int, token: str, events: int, runs: int) -> dict[str, object]:
    alone, watched = [], []
    for _ in range(runs):
        alone.append(run_daemon(env, events, f"bench-alone-{uuid.uuid4().hex[:8]}"))
        journal = f"bench-watched-{uuid.uuid4().hex[:8]}"
        with watching(port, token, journal):
            watched.append(run_daemon(env, events, journal))
    return {"alone": alone, "watched": watched, "alone_median": statistics.median(alone),
            "watched_median": statistics.median(watched),
            "ratio": statistics.median(watched) / statistics.median(alone)}


def live_side_by_side(dsn: str, port: int, token: str, seconds: float, rate: int) -> dict[str, dict[str, float]]:
    trading = config.load().trading()
    eurusd = trading.build_instruments()["EURUSD"]
    quotes = list(SyntheticFeed(11, int(rate * seconds), eurusd, parse_fixed("1.1"), WallClock()))
    store = PostgresJournalStore(dsn)
    alone = anyio.run(tick_to_wire, store, trading, quotes, "before_send", rate, backend_options={"use_uvloop": True})
    journal = f"bench-live-watched-{uuid.uuid4().hex[:8]}"
    with watching(port, token, journal):
        watched = anyio.run(tick_to_wire, store, trading, quotes, "before_send", rate, journal,
                            backend_options={"use_uvloop": True})
    return {"alone": percentiles(alone), "watched": percentiles(watched)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rate", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--events", type=int, default=300_000)
    parser.add_argument("--live-rate", type=int, default=2_000)
    parser.add_argument("--gateway-nice", type=int, default=GATEWAY_NICE,
                        help="the gateway's niceness (its systemd unit's Nice=, 10; 0 to compare)")
    parser.add_argument("--parts", default="stream,daemon,live", help="which of the three to run, comma-separated")
    args = parser.parse_args()
    env = dict(os.environ)
    if not env.get("FOXHUNT_DSN") and not env.get("FOXHUNT_STATE_DIR"):
        env["FOXHUNT_STATE_DIR"] = tempfile.mkdtemp(prefix="fh-bench-web-", dir="/tmp")
        os.chmod(env["FOXHUNT_STATE_DIR"], 0o755)  # the cluster may run as another user (as root: foxhunt)
        os.environ["FOXHUNT_STATE_DIR"] = env["FOXHUNT_STATE_DIR"]
    cfg = config.load()
    dsn = bootstrap.resolve_dsn(cfg)
    anyio.run(bootstrap.migrate, dsn)

    async def add_token() -> str:
        db = Database(dsn)
        try:
            return (await TokenStore(db).add("bench", "read"))[1]
        finally:
            await db.aclose()

    token = anyio.run(add_token)
    port = free_port()
    gateway = start_gateway(env, port, args.gateway_nice)
    try:
        print(f"machine: {os.cpu_count()} cores; python {sys.version.split()[0]}")
        parts = set(args.parts.split(","))
        if "stream" in parts:
            result = anyio.run(stream, dsn, port, token, args.seconds, args.rate)
            print(f"stream: wrote {result['written']:,} events at {result['written_per_s']:,.0f}/s; the client"
                  f" received {result['received']:,} at {result['received_per_s']:,.0f}/s; append to receipt p50"
                  f" {result['p50_ms']:.1f} ms, p99 {result['p99_ms']:.1f} ms, max {result['max_ms']:.1f} ms")
        if "daemon" in parts:
            side = daemon_side_by_side(env, port, token, args.events, args.runs)
            print(f"daemon events/s alone {[round(x) for x in side['alone']]} median {side['alone_median']:,.0f};"
                  f" with the gateway and 3 dashboards {[round(x) for x in side['watched']]} median"
                  f" {side['watched_median']:,.0f}; ratio {side['ratio']:.3f}")
        if "live" in parts:
            live = live_side_by_side(dsn, port, token, args.seconds * 2, args.live_rate)
            print(f"tick to wire at {args.live_rate:,} quotes/s, before_send: alone {live['alone']};"
                  f" with the gateway and 3 dashboards {live['watched']}")
    finally:
        gateway.terminate()
        gateway.wait(timeout=30)


if __name__ == "__main__":
    main()
