"""Anchor for the kernel benchmark: NautilusTrader's BacktestEngine on the same quotes, with a strategy
that only subscribes (the configuration behind the 236k ticks/s figure in issue 2).

Runs in its own virtualenv (bench/.venv-nautilus, made by bench/kernel_throughput.py), never in
foxhunt's. Reads the quotes that bench/kernel_throughput.py wrote (CSV: ts,bid,ask,bid_size,ask_size,
in nanos) and prints one JSON line per repeat: {"quotes": n, "seconds": s, "cpu_seconds": c}.
"""

from __future__ import annotations

import csv
import json
import sys
import time

from nautilus_trader.backtest.engine import BacktestEngine, BacktestEngineConfig
from nautilus_trader.config import LoggingConfig, StrategyConfig
from nautilus_trader.model.currencies import USD
from nautilus_trader.model.data import QuoteTick
from nautilus_trader.model.enums import AccountType, OmsType
from nautilus_trader.model.identifiers import TraderId, Venue
from nautilus_trader.model.objects import Money, Price, Quantity
from nautilus_trader.test_kit.providers import TestInstrumentProvider
from nautilus_trader.trading.strategy import Strategy

SCALE = 1_000_000_000


class SubscribeOnly(Strategy):
    def __init__(self, instrument_id) -> None:
        super().__init__(StrategyConfig(strategy_id="SUB-001"))
        self.instrument_id = instrument_id

    def on_start(self) -> None:
        self.subscribe_quote_ticks(self.instrument_id)


def run_once(rows: list[list[int]]) -> dict:
    venue = Venue("SIM")
    engine = BacktestEngine(BacktestEngineConfig(trader_id=TraderId("BENCH-001"),
                                                 logging=LoggingConfig(bypass_logging=True)))
    engine.add_venue(venue=venue, oms_type=OmsType.NETTING, account_type=AccountType.MARGIN,
                     base_currency=USD, starting_balances=[Money(1_000_000, USD)])
    instrument = TestInstrumentProvider.default_fx_ccy("EUR/USD", venue)
    engine.add_instrument(instrument)
    ticks = [
        QuoteTick(instrument_id=instrument.id, bid_price=Price(bid / SCALE, 5), ask_price=Price(ask / SCALE, 5),
                  bid_size=Quantity(bsz // SCALE, 0), ask_size=Quantity(asz // SCALE, 0), ts_event=ts, ts_init=ts)
        for ts, bid, ask, bsz, asz in rows
    ]
    engine.add_data(ticks)
    engine.add_strategy(SubscribeOnly(instrument.id))
    started, cpu = time.perf_counter(), time.process_time()
    engine.run()
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu
    engine.dispose()
    return {"quotes": len(ticks), "seconds": seconds, "cpu_seconds": cpu_seconds}


def main() -> None:
    path = sys.argv[1]
    with open(path, newline="") as f:
        rows = [[int(v) for v in row] for row in csv.reader(f)]
    print(json.dumps(run_once(rows)), flush=True)


if __name__ == "__main__":
    main()
