"""What OpenTelemetry costs the hot path (issue 5: at most a few percent).

The trading loop over synthetic quotes with each reference strategy (ema_cross orders on about one
quote in thirty, zscore far less often), without telemetry, with every order traced and timed, and with the
default bound of 20 traced orders a second (counters always count every order). Spans go through the BatchSpanProcessor to an
exporter that drops them, metrics to an in-memory reader, so the instrumentation is measured, not an
exporter's I/O. Variants interleaved `--repeats` times; medians, ratios and the cost per order. Also the
writer-side cost per committed event (counting kinds per batch).

    .venv/bin/python bench/telemetry_overhead.py [--quotes 200000] [--repeats 7]
"""

from __future__ import annotations

from foxhunt import compiled

compiled.check()  # before any compiled module is imported: a stale one runs as its Python source

import argparse
import statistics
import time

import anyio
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from foxhunt import config
from foxhunt.adapters.feeds.synthetic import SyntheticFeed
from foxhunt.adapters.journal.discard import DiscardingJournal
from foxhunt.adapters.venues.sim import SimVenue
from foxhunt.messages.base import parse_fixed
from foxhunt.observability.telemetry import Telemetry
from foxhunt.runtime.clock import EventClock
from foxhunt.runtime.loop import TradingLoop
from foxhunt.runtime.replay import build_kernel


class Discard(SpanExporter):
    """Takes finished spans and drops them: what the SDK does is measured, not an exporter's I/O."""

    def export(self, spans):
        return SpanExportResult.SUCCESS


def telemetry(traces_per_second: float) -> Telemetry:
    return Telemetry(Resource.create({"service.name": "bench"}), Discard(), InMemoryMetricReader(), traces_per_second)


async def run(quotes, strategy: str, traces_per_second: float | None) -> tuple[float, int]:
    trading = config.load(None, env={"FOXHUNT_STRATEGY__NAME": strategy}).trading()
    kernel = build_kernel(trading)
    loop = TradingLoop(kernel, SimVenue(kernel.instruments, trading.venue, EventClock()), DiscardingJournal())
    tel = None
    if traces_per_second is not None:
        tel = loop.observer = telemetry(traces_per_second)
    market = loop.market
    # CPU time of the whole process (the span processor's thread included), not wall time: on a shared
    # machine, time the hypervisor steals would otherwise drown a few percent
    started = time.process_time()
    for quote in quotes:
        await market(quote)
    if tel is not None:
        tel.shutdown()  # exports what is left: its cost counts
    return time.process_time() - started, kernel.orders.count


def commit_hook_ns_per_event(events: int = 1_000_000) -> float:
    tel = telemetry(1)
    kinds = ["QuoteTick"] * 9_990 + ["SubmitOrder", "OrderSubmitted"] * 5
    rows = [(1, i, kind) for i, kind in enumerate(kinds)]
    started = time.perf_counter()
    for _ in range(events // len(rows)):
        tel.on_commit([row[2] for row in rows], 0.001)  # what the writer hands over per batch
    seconds = time.perf_counter() - started
    tel.shutdown()
    return seconds / events * 1e9


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quotes", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    instrument = config.load(None, env={}).trading().build_instruments()["EURUSD"]
    quotes = list(SyntheticFeed(7, args.quotes, instrument, parse_fixed("1.1"), EventClock()))
    print(f"quotes={args.quotes} repeats={args.repeats}; medians, quotes per CPU second")
    for strategy in ("ema_cross", "zscore"):
        anyio.run(run, quotes[:20_000], strategy, 1)  # warm up: numba, caches
        variants: dict[str, list[float]] = {"off": [], "every order": [], "20 per second": []}
        orders = 0
        for _ in range(args.repeats):  # interleaved: noise hits every variant alike
            for name, limit in (("off", None), ("every order", float("inf")), ("20 per second", 20.0)):
                seconds, orders = anyio.run(run, quotes, strategy, limit)
                variants[name].append(args.quotes / seconds)
        base = statistics.median(variants["off"])
        print(f"{strategy}: {orders} orders, one per {args.quotes // max(orders, 1)} quotes")
        for name, rates in variants.items():
            rate = statistics.median(rates)
            per_order = (1 / rate - 1 / base) * args.quotes / max(orders, 1) * 1e6
            print(f"  {name:<16} {rate:>10,.0f}  cost {(1 - rate / base) * 100:5.1f}%  {per_order:6.1f} us per order")
    print(f"writer side: {commit_hook_ns_per_event():.0f} ns per committed event")


if __name__ == "__main__":
    main()
