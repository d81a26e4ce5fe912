"""The kernel's check of a strategy's request (`kernel.malformed`): the cost it adds to every order a
strategy asks for, on a well-formed SubmitOrder (the common case) and a malformed one.

    .venv/bin/python bench/request_check.py [--repeats 7] [--calls 200000]
"""

from __future__ import annotations

from foxhunt import compiled

compiled.check()  # before any compiled module is imported: a stale one runs as its Python source

import argparse
import statistics
import timeit

from foxhunt.core import kernel
from foxhunt.messages.orders import OrderType, Side, SubmitOrder


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--calls", type=int, default=200_000)
    args = parser.parse_args()
    good = SubmitOrder(ts_event=1, ts_init=1, order_id="s-1-1", strategy_id="s", symbol="EURUSD", side=Side.BUY,
                       order_type=OrderType.LIMIT, quantity=10**14, price=1_100_010_000)
    bad = SubmitOrder(ts_event=1, ts_init=1, order_id="s-1-2", strategy_id="s", symbol="EURUSD", side=Side.BUY,
                      order_type=OrderType.LIMIT, quantity=float("nan"), price=2**63)  # type: ignore[arg-type]
    assert kernel.malformed(good) == "" and kernel.malformed(bad)
    print(f"kernel compiled: {kernel.__file__.endswith('.so')}")
    for label, cmd in (("well-formed SubmitOrder", good), ("malformed SubmitOrder", bad)):
        runs = [timeit.timeit(lambda c=cmd: kernel.malformed(c), number=args.calls) / args.calls * 1e9
                for _ in range(args.repeats)]
        print(f"malformed(), {label}: median {statistics.median(runs):.0f} ns over {args.repeats} runs")


if __name__ == "__main__":
    main()
