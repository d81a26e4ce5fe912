"""A flood of order statuses from IB: the cost of each must not grow with how many came before (issue 30).

ib_async formats a trade, its whole log included, for every order status it takes (`orderStatus: {trade}`,
an f-string built whatever the log level), and appends to that log: so N statuses for one order cost time
in N squared. The IB venue keeps the log to its last few entries (`ib/venue.py`, LOG_KEPT). This runs
both, side by side, against the TWS-protocol test server in this process: N statuses for one working
order, and N spread over 100 working orders, then one market order whose fill, behind them all, ends the
timing.

- kept log: the venue as it is;
- growing log (the anchor, the venue before issue 30): LOG_KEPT set so large that nothing is cut.

    .venv/bin/python bench/ib_status_flood.py [--statuses 1000 2000 4000 20000] [--anchor-max 4000]
"""

from __future__ import annotations

from foxhunt import compiled

compiled.check()  # before any compiled module is imported: a stale one runs as its Python source

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from foxhunt.adapters.venues.ib import venue as ib_venue
from foxhunt.messages.orders import OrderAccepted, OrderFilled, OrderType
from tests.integration.test_ib_venue import Harness
from tests.tws_server import TwsServer


async def flood(statuses: int, orders: int) -> float:
    """Seconds from the flood's start to the fill of an order sent behind it."""
    server = TwsServer()
    await server.start()
    h = Harness(server)
    try:
        async with h.running():
            working = [h.submit(order_type=OrderType.LIMIT, price="1.09") for _ in range(orders)]
            await h.until(lambda: all(h.of(oid, OrderAccepted) for oid in working))
            started = time.perf_counter()
            server.flood_status(statuses // orders)
            marker = h.submit()
            await h.until(lambda: h.of(marker, OrderFilled), timeout=600)
            return time.perf_counter() - started
    finally:
        await server.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--statuses", type=int, nargs="+", default=[1000, 2000, 4000, 20000])
    parser.add_argument("--anchor-max", type=int, default=4000, help="largest N run with the growing log")
    args = parser.parse_args()
    kept = ib_venue.LOG_KEPT
    print("statuses  orders  kept log (s)  growing log (s)  ratio growing/kept")
    for n in args.statuses:
        for orders in (1, 100):
            ib_venue.LOG_KEPT = kept
            fast = asyncio.run(flood(n, orders))
            slow = None
            if n <= args.anchor_max:
                ib_venue.LOG_KEPT = 1 << 60
                slow = asyncio.run(flood(n, orders))
            shown = f"{slow:15.2f}  {slow / fast:18.1f}" if slow is not None else f"{'(not run)':>15}"
            print(f"{n:8d}  {orders:6d}  {fast:12.2f}  {shown}", flush=True)
    ib_venue.LOG_KEPT = kept


if __name__ == "__main__":
    main()
