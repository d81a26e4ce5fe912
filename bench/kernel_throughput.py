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
from foxhunt.adapters.venue_sim import SimVenue
from foxhunt.core.kernel import Kernel
from foxhunt.core.risk import PreTradeRisk
from foxhunt.messages.base import parse_fixed
from foxhunt.runtime.clock import EventClock
from foxhunt.runtime.loop import DiscardingJournal, TradingLoop
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


async def run_foxhunt(kernel: Kernel, venue_config, quotes) -> float:
    venue = SimVenue(kernel.instruments, venue_config, EventClock())
    loop = TradingLoop(kernel, venue, DiscardingJournal())
    market = loop.market
    started = time.perf_counter()
    for quote in quotes:
        await market(quote)
    return time.perf_counter() - started


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
    results: dict[str, list[float]] = {
        "foxhunt ema_cross": [], "foxhunt zscore": [], "foxhunt no strategy": [], "nautilus subscribe-only": []
    }
    orders = {}
    for _ in range(args.repeats):
        for name, cfg in (("ema_cross", trading), ("zscore", zscore)):
            kernel = build_kernel(cfg)
            results[f"foxhunt {name}"].append(anyio.run(run_foxhunt, kernel, trading.venue, quotes))
            orders[name] = len(kernel.orders.by_id)
        bare = Kernel(instruments, [], PreTradeRisk(trading.risk, instruments))
        results["foxhunt no strategy"].append(anyio.run(run_foxhunt, bare, trading.venue, quotes))
        if python is not None:
            out = subprocess.run([str(python), str(HERE / "nautilus_anchor.py"), str(data)], check=True,
                                 capture_output=True, text=True).stdout
            results["nautilus subscribe-only"].append(json.loads(out.splitlines()[-1])["seconds"])

    rates = {name: len(quotes) / statistics.median(times) for name, times in results.items() if times}
    if "-v" in sys.argv:
        print({name: [round(len(quotes) / t) for t in times] for name, times in results.items()})
    print(f"{len(quotes)} quotes, {args.repeats} repeats, medians (orders sent: {orders}):")
    for name, rate in rates.items():
        print(f"  {name:26s} {rate:12,.0f} quotes/s")
    if "nautilus subscribe-only" in rates:
        anchor = rates["nautilus subscribe-only"]
        for name in ("foxhunt ema_cross", "foxhunt zscore", "foxhunt no strategy"):
            print(f"  ratio {name} / nautilus: {rates[name] / anchor:.2f}x")


if __name__ == "__main__":
    main()
