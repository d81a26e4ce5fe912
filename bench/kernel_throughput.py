"""Kernel throughput in memory: quotes per second through strategy, pre-trade gate and simulated venue.

Anchor (issue 2): NautilusTrader's BacktestEngine with a strategy that only subscribes, on the same
quotes, in its own virtualenv (bench/.venv-nautilus, created on first use with `pip install
nautilus_trader`). The two run interleaved, `--repeats` times each, and the medians and their ratio are
printed, so machine noise hits both alike.

    .venv/bin/python bench/kernel_throughput.py [--quotes 200000] [--repeats 5] [--no-anchor]

foxhunt is measured with each reference strategy (ema_cross trades on about one quote in thirty, zscore
far less) and with no strategy at all (what the anchor's subscribe-only strategy does), always through
`TradingLoop`, the loop that backtests run, with a journal that keeps nothing.
"""

from __future__ import annotations

from foxhunt import compiled

compiled.check()  # before any compiled module is imported: a stale one runs as its Python source

import argparse
import csv
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import msgspec

from foxhunt import config
from foxhunt.adapters.feeds.synthetic import SyntheticFeed
from foxhunt.adapters.journal.discard import DiscardingJournal
from foxhunt.adapters.venues.sim import SimVenue
from foxhunt.core.kernel import Kernel
from foxhunt.core.risk.gate import PreTradeGate
from foxhunt.messages.base import parse_fixed
from foxhunt.runtime.clock import EventClock
from foxhunt.runtime.loop import TradingLoop
from foxhunt.runtime.replay import build_kernel

HERE = Path(__file__).resolve().parent
NAUTILUS_VENV = HERE / ".venv-nautilus"


def nautilus_python() -> Path:
    python = NAUTILUS_VENV / "bin" / "python"
    if not python.exists():
        print("creating bench/.venv-nautilus (pip install nautilus_trader)...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(NAUTILUS_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "nautilus_trader"], check=True)
    return python


async def run_foxhunt(kernel: Kernel, venue_config, quotes) -> tuple[float, float]:
    """Seconds the quotes took through the loop: wall clock and process CPU time."""
    venue = SimVenue(kernel.instruments, venue_config, EventClock())
    loop = TradingLoop(kernel, venue, DiscardingJournal())
    take = loop.take_nowait  # what a backtest calls for each input
    started, cpu = time.perf_counter(), time.process_time()
    for quote in quotes:
        rest = take(quote)
        if rest is not None:
            await rest
    return time.perf_counter() - started, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quotes", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-anchor", action="store_true")
    parser.add_argument("-v", action="store_true", help="print every repeat")
    args = parser.parse_args()

    trading = config.load(None, env={}).trading()
    instruments = trading.build_instruments()
    quotes = list(SyntheticFeed(7, args.quotes, instruments["EURUSD"], parse_fixed("1.10000"), EventClock()))
    data = Path(tempfile.mkdtemp()) / "quotes.csv"
    with data.open("w", newline="") as f:
        csv.writer(f).writerows((q.ts_event, q.bid, q.ask, q.bid_size, q.ask_size) for q in quotes)
    python = None if args.no_anchor else nautilus_python()

    zscore = msgspec.structs.replace(trading, strategy=msgspec.structs.replace(trading.strategy, name="zscore"))
    names = ("foxhunt ema_cross", "foxhunt zscore", "foxhunt no strategy", "nautilus subscribe-only")
    results: dict[str, list[float]] = {name: [] for name in names}  # wall-clock seconds
    cpu: dict[str, list[float]] = {name: [] for name in names}  # process CPU seconds (no hypervisor steal)
    orders = {}
    for _ in range(args.repeats):
        for name, cfg in (("ema_cross", trading), ("zscore", zscore)):
            kernel = build_kernel(cfg)
            wall, seconds = anyio.run(run_foxhunt, kernel, trading.venue, quotes)
            results[f"foxhunt {name}"].append(wall)
            cpu[f"foxhunt {name}"].append(seconds)
            orders[name] = kernel.orders.count
        bare = Kernel(instruments, [], PreTradeGate(trading.risk, instruments))
        wall, seconds = anyio.run(run_foxhunt, bare, trading.venue, quotes)
        results["foxhunt no strategy"].append(wall)
        cpu["foxhunt no strategy"].append(seconds)
        if python is not None:
            out = subprocess.run([str(python), str(HERE / "nautilus_anchor.py"), str(data)], check=True,
                                 capture_output=True, text=True).stdout
            run = json.loads(out.splitlines()[-1])
            results["nautilus subscribe-only"].append(run["seconds"])
            cpu["nautilus subscribe-only"].append(run["cpu_seconds"])

    print(f"{len(quotes)} quotes, {args.repeats} repeats, medians (orders sent: {orders}; "
          f"foxhunt's hot path {'compiled' if compiled.compiled_in_use() else 'as Python'}):")
    for label, times in (("wall clock", results), ("process CPU time", cpu)):
        rates = {name: len(quotes) / statistics.median(t) for name, t in times.items() if t}
        if "-v" in sys.argv:
            print(f"  {label}, each repeat:", {name: [round(len(quotes) / s) for s in t] for name, t in times.items()})
        print(f"  by {label}:")
        for name, rate in rates.items():
            print(f"    {name:26s} {rate:12,.0f} quotes/s")
        if "nautilus subscribe-only" in rates:
            anchor = rates["nautilus subscribe-only"]
            for name in ("foxhunt ema_cross", "foxhunt zscore", "foxhunt no strategy"):
                print(f"    ratio {name} / nautilus: {rates[name] / anchor:.2f}x")


if __name__ == "__main__":
    main()
