"""The report's tracker on a hand-made run (runtime/report.py): round trips from the kernel's position
changes, flips included; acknowledgement latency only on a wall clock; scores against the mid `horizon`
market data events later; a time window; thinning that keeps the curve's shape."""

from __future__ import annotations

import math

import pytest

from foxhunt import config
from foxhunt.messages.base import parse_fixed as d
from foxhunt.messages.market import QuoteTick
from foxhunt.messages.orders import OrderAccepted, OrderType, Side, SubmitOrder
from foxhunt.messages.scores import ModelScored, ModelsLoaded
from foxhunt.messages.system import PositionChanged, RunStarted
from foxhunt.runtime import report, tracking
from foxhunt.runtime.recovery import build_kernel

S = 1_000_000_000


def tracker(clock: str = "feed", **window) -> tuple[report.Tracker, object]:
    trading = config.load(None, env={}).trading()
    kernel = build_kernel(trading)
    t = report.Tracker(kernel, "run", **window)
    t.append(RunStarted(ts_event=0, ts_init=0, run_id=1, seed=1, config_digest="", config=b"", fingerprint={},
                        clock=clock))
    return t, kernel


def quote(ts: int, mid: str) -> QuoteTick:
    m = d(mid)
    return QuoteTick(ts_event=ts, ts_init=ts, symbol="EURUSD", bid=m - 10_000, ask=m + 10_000)


def position(ts: int, qty: int, realized: str, commissions: str = "0") -> PositionChanged:
    return PositionChanged(ts_event=ts, ts_init=ts, symbol="EURUSD", quantity=qty, avg_price=0,
                           realized_pnl=d(realized), commissions=d(commissions), cash=0)


def test_round_trips_from_flat_to_flat_and_a_flip_closes_one_and_opens_the_next():
    t, _ = tracker()
    t.append(quote(1 * S, "1.1"))
    t.append(position(1 * S, d("1000"), "0"), 2)  # open long
    t.append(position(1 * S, d("2000"), "0"), 2)  # add
    t.append(position(1 * S, 0, "5", "1"), 2)  # flat: +5 realised, 1 commission -> 4
    t.append(position(1 * S, -d("1000"), "5", "2"), 2)  # open short
    t.append(position(1 * S, d("1000"), "2", "3"), 2)  # flip: -3 realised, 1 more commission -> -4; long opens
    t.append(position(1 * S, 0, "3", "3"), 2)  # +1
    run = t.finish()
    assert [p for _, _, _, p in run.trips] == [4.0, -4.0, 1.0]


def test_latency_is_measured_on_a_wall_clock_only():
    for clock, expected in (("wall", [2.5]), ("feed", [])):
        t, _ = tracker(clock)
        t.append(QuoteTick(ts_event=10 * S, ts_init=10 * S, symbol="EURUSD", bid=d("1.1"), ask=d("1.2")))
        t.append(SubmitOrder(ts_event=10 * S, ts_init=10 * S, order_id="o1", strategy_id="s", symbol="EURUSD",
                             side=Side.BUY, order_type=OrderType.MARKET, quantity=d("1000")), 2)
        t.append(OrderAccepted(ts_event=10 * S, ts_init=10 * S + 2_500_000, order_id="o1", symbol="EURUSD",
                               venue_order_id="v1"))
        assert t.finish().latencies_ms == expected


def test_scores_meet_the_mid_their_horizon_later():
    t, kernel = tracker()
    t.append(ModelsLoaded(ts_event=0, ts_init=0, device="cpu", fingerprint={}, determinism={}, feature_spec=b"",
                          models=[]))
    mids = ["1.1", "1.2", "1.3", "1.4"]
    for i, mid in enumerate(mids):
        q = quote((i + 1) * S, mid)
        t.append(q)
        kernel.handle(i + 2, q)
        if i == 0:
            t.append(ModelScored(ts_event=q.ts_event, ts_init=q.ts_init, model_id="m", parameter_sha256="",
                                 symbol="EURUSD", as_of=2, input_digest="", horizons=[2], quantiles=[0.1, 0.5, 0.9],
                                 outputs=[-1.0, 0.25, 1.0], latency_ns=1))
    run = t.finish()
    xs, ys = report._score_outcomes(run)
    assert xs == [0.25]  # the median quantile
    assert ys == [pytest.approx(math.log(1.3 / 1.1))]  # two market data events after the score's


def test_a_window_keeps_what_happened_inside_it_and_starts_the_equity_at_zero():
    t, kernel = tracker(start=3 * S, end=5 * S)
    for i in range(1, 8):
        q = quote(i * S, f"1.{i}")
        t.append(q)
        kernel.handle(i + 1, q)
    run = t.finish()
    assert (run.start, run.end, run.events) == (3 * S, 4 * S, 2)
    assert all(v == 0.0 for v in run.equity.get("USD", [0.0]))


def test_thinning_halves_the_samples_and_keeps_the_last(monkeypatch):
    monkeypatch.setattr(tracking, "MAX_SAMPLES", 50)
    t, kernel = tracker()
    for i in range(1, 1001):
        q = quote(i * S, "1.1")
        t.append(q)
        kernel.handle(i + 1, q)
    run = t.finish()
    assert 50 <= len(run.ts) < 100 and run.ts == sorted(run.ts)
    assert len(run.mid["EURUSD"]) == len(run.ts)


def test_a_symbol_and_a_currency_that_come_later_have_series_as_long_as_the_others():
    t, kernel = tracker()
    book = kernel.portfolio
    seq = 1
    for i in range(1, 7):
        seq += 1
        q = quote(i * S, "1.1") if i < 4 else QuoteTick(ts_event=i * S, ts_init=i * S, symbol="USDJPY",
                                                          bid=d("150.0"), ask=d("150.02"))
        t.append(q)
        kernel.handle(seq, q)
        if i == 2:
            book.apply_fill(book.open_position("EURUSD", "USD", 1), Side.BUY, d("1000"), d("1.1"), d("1"))
        if i == 5:
            book.apply_fill(book.open_position("USDJPY", "JPY", 1), Side.SELL, d("10"), d("150.0"), d("20"))
    run = t.finish()
    n = len(run.ts)
    assert n == 6 and sorted(run.equity) == ["JPY", "USD"] and sorted(run.position) == ["EURUSD", "USDJPY"]
    assert all(len(series) == n for group in (run.equity, run.position, run.mid) for series in group.values())
    # a sample is the state after an input: the JPY fill came after the fifth input, so from the fifth sample on
    assert run.equity["JPY"] == [0.0] * 4 + [-20.0, -20.1]  # its commission, then marked at the next quote
    assert run.equity["USD"][1:] == [-1.0] * 5  # the commission from the fill on; marks unchanged
    # USDJPY's series begin (NaN before) at its first quote, the fourth input
    assert all(math.isnan(v) for v in run.mid["USDJPY"][:3] + run.position["USDJPY"][:3])
    assert run.mid["USDJPY"][3:] == [150.01] * 3 and run.position["USDJPY"][3:] == [0.0, -10.0, -10.0]
    assert run.position["EURUSD"] == [0.0] + [1000.0] * 5
    assert run.peak_gross == pytest.approx(1000 * 1.1 + 10 * 150.01)  # at market
