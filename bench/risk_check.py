"""The whole pre-trade check for one order, all controls enabled, a book of 50 instruments with open
positions, called the way the kernel calls it (`PreTradeGate.check_submit(cmd, kernel)`). Also: historical
VaR over 1,000 returns.

    .venv/bin/python bench/risk_check.py [--orders 100000]
"""

from __future__ import annotations

from foxhunt import compiled

compiled.check()  # before any compiled module is imported: a stale one runs as its Python source

import argparse
import statistics
import time
from decimal import Decimal

import numpy as np

from foxhunt import risk
from foxhunt.core.kernel import Kernel
from foxhunt.core.risk.gate import PreTradeGate
from foxhunt.core.risk.limits import RiskLimits
from foxhunt.messages.base import parse_fixed
from foxhunt.messages.market import Instrument, QuoteTick
from foxhunt.messages.orders import OrderType, Side, SubmitOrder

D = parse_fixed


def build(var_gate: bool) -> tuple[Kernel, list[SubmitOrder]]:
    instruments = {f"SYM{i:02d}": Instrument(symbol=f"SYM{i:02d}", tick_size=D("0.01"), lot_size=D("1"), currency="USD")
                   for i in range(50)}
    limits = RiskLimits(
        max_order_qty=Decimal(10_000), min_order_qty=Decimal(1), max_order_notional=Decimal(1_000_000), collar_bps=500,
        collar_ticks=1000, max_position_long=Decimal(100_000), max_position_short=Decimal(100_000), max_open_orders=50,
        max_open_qty=Decimal(200_000), reference_max_age_ms=3_600_000, max_gross_exposure=Decimal(10**9),
        max_net_exposure=Decimal(10**9), credit_limit=Decimal(2 * 10**9),
        # throttles and the duplicate check on, sized so that the benchmark's order flow passes them
        max_orders_per_window=10_000, max_messages_per_second=10_000, duplicate_window_ms=500,
        max_var=Decimal(10**9) if var_gate else None, max_expected_shortfall=Decimal(10**9) if var_gate else None,
        var_window=250, var_sample_ms=1,
    )
    kernel = Kernel(instruments, [], PreTradeGate(limits, instruments))
    for seq, symbol in enumerate(instruments, 1):
        kernel.handle(seq, QuoteTick(ts_event=seq, ts_init=seq, symbol=symbol, bid=D("99.99"), ask=D("100.01")))
    if var_gate:  # 250 return scenarios for every instrument
        rng = np.random.default_rng(1)
        for step in range(1, 252):
            for i, symbol in enumerate(instruments):
                mid = 100 * (1 + rng.normal(0, 0.01))
                kernel.gate.on_mark(symbol, D(f"{mid:.2f}"), 1_000_000 * step + i)
    for symbol in instruments:
        pos = kernel.portfolio.open_position(symbol, "USD", 1)
        kernel.portfolio.apply_fill(pos, Side.BUY, D("100"), D("100"), 0)
        kernel.gate.on_position(symbol, pos.quantity)
    orders = [SubmitOrder(ts_event=100, ts_init=100, order_id=f"o{i}", strategy_id="b", symbol=f"SYM{i % 50:02d}",
                          side=Side.BUY if i % 2 else Side.SELL, order_type=OrderType.LIMIT, quantity=D(str(1 + i)),
                          price=D("100.05")) for i in range(1000)]
    return kernel, orders


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--orders", type=int, default=100_000)
    args = parser.parse_args()
    clock = time.perf_counter_ns
    for var_gate in (False, True):
        kernel, orders = build(var_gate)
        check = kernel.gate.check_submit
        samples = []
        for i in range(args.orders):
            kernel.ts_event = kernel.now_ns = 10**9 + i * 1_000_000  # orders a millisecond apart
            started = clock()
            denial = check(orders[i % 1000], kernel)
            samples.append(clock() - started)
            assert denial is None, denial  # every control runs to the end
        samples.sort()
        p50, p99 = samples[len(samples) // 2] / 1000, samples[int(len(samples) * 0.99)] / 1000
        label = "with the VaR/ES gate (250 scenarios)" if var_gate else "without the VaR/ES gate"
        print(f"pre-trade check, 50 instruments, all controls {label}: p50 {p50:.2f} us  p99 {p99:.2f} us")
    returns = np.random.default_rng(7).normal(0, 0.01, 1000)
    risk.var_historical(returns, 0.99)
    timings = []
    for _ in range(2000):
        started = clock()
        risk.var_historical(returns, 0.99)
        timings.append(clock() - started)
    print(f"historical VaR over 1,000 returns: median {statistics.median(timings) / 1000:.2f} us")


if __name__ == "__main__":
    main()
