"""One order's round trip through the trading loop, in memory: microseconds per order (issue 2).

A strategy that flips its position on every quote (a market IOC order each time, filled at once by the
simulated venue), so each quote carries one whole order: the command, the pre-trade check, the verdict,
the venue's acknowledgement and fill, the position event. Run the same way as kernel_throughput.py
(`TradingLoop`, a journal that keeps nothing); the time per quote here is the cost of an order plus the
quote's own (about 1 us, see kernel_throughput.py's no-strategy run).

    .venv/bin/python bench/order_round_trip.py [--orders 20000] [--repeats 5]
"""

from __future__ import annotations

from foxhunt import compiled

compiled.check()  # before any compiled module is imported: a stale one runs as its Python source

import argparse
import statistics

import anyio
from kernel_throughput import run_foxhunt  # the same loop, venue and journal as the throughput benchmark

from foxhunt import config
from foxhunt.adapters.feeds.synthetic import SyntheticFeed
from foxhunt.core.kernel import Kernel
from foxhunt.core.risk.gate import PreTradeGate
from foxhunt.core.strategy import Strategy, StrategyContext
from foxhunt.messages.base import parse_fixed
from foxhunt.messages.market import QuoteTick
from foxhunt.messages.orders import OrderType, Side, TimeInForce
from foxhunt.runtime.clock import EventClock

SIZE = parse_fixed("100000")


class Flip(Strategy):
    strategy_id = "flip"

    def on_quote(self, quote: QuoteTick, ctx: StrategyContext) -> None:
        position = ctx.position(quote.symbol)
        delta = (SIZE if position <= 0 else -SIZE) - position
        ctx.submit(quote.symbol, Side.BUY if delta > 0 else Side.SELL, abs(delta), OrderType.MARKET,
                   time_in_force=TimeInForce.IOC)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--orders", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    trading = config.load(None, env={}).trading()
    instruments = trading.build_instruments()
    quotes = list(SyntheticFeed(7, args.orders, instruments["EURUSD"], parse_fixed("1.10000"), EventClock()))
    per_order = []
    for _ in range(args.repeats):
        kernel = Kernel(instruments, [Flip()], PreTradeGate(trading.risk, instruments))
        seconds, _ = anyio.run(run_foxhunt, kernel, trading.venue, quotes)
        if kernel.orders.count != len(quotes):
            raise SystemExit(f"expected an order per quote, got {kernel.orders.count} for {len(quotes)}")
        per_order.append(seconds / len(quotes) * 1e6)
    print(f"{len(quotes)} orders, {args.repeats} repeats: median {statistics.median(per_order):.2f} us per quote "
          f"with its order (each: {', '.join(f'{t:.2f}' for t in per_order)})")


if __name__ == "__main__":
    main()
