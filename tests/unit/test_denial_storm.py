"""An incident leaves a clean record: strategies know the trading state and do not ask in vain, and a
strategy that asks anyway cannot flood the journal (core/risk/repeats.py, core/strategy.py)."""

from __future__ import annotations

import io
import pickle
from decimal import Decimal

from foxhunt.core.kernel import Kernel
from foxhunt.core.risk.gate import PreTradeGate
from foxhunt.core.risk.limits import RiskLimits
from foxhunt.core.strategies import EmaCross, ZScoreReversion
from foxhunt.core.strategies.params import EmaCrossParams, ZScoreParams
from foxhunt.core.strategy import Strategy
from foxhunt.messages.base import parse_fixed as d
from foxhunt.messages.orders import (
    DenialsRepeated,
    OrderAccepted,
    OrderDenied,
    OrderFilled,
    OrderType,
    Side,
    SubmitOrder,
    TimeInForce,
)
from foxhunt.messages.system import (
    AdminCommand,
    JournalDegraded,
    JournalRecovered,
    RunStopped,
    TradingState,
    TradingStateChanged,
)
from foxhunt.runtime import snapshots
from tests.fakes import INSTRUMENTS, Scripted, quote

MS = 1_000_000


def asks_every_quote(quote_, ctx) -> None:
    """A misbehaving strategy: the same market buy on every quote, whatever the state or the last denial."""
    ctx.submit("EURUSD", Side.BUY, d("1000"))


def make(strategy, **limits) -> Kernel:
    return Kernel(INSTRUMENTS, [strategy], PreTradeGate(RiskLimits(**limits), INSTRUMENTS))


def feed(k: Kernel, inputs) -> list[object]:
    """Every input through the kernel, with rising sequence numbers; what was derived, in order."""
    derived = []
    for seq, msg in enumerate(inputs, start=k.seq + 1):
        derived.extend(k.handle(seq, msg).derived)
    return derived


def quotes(start_ms: int, n: int, every_ms: int = 1, bid: str = "1.10000", ask: str = "1.10002") -> list:
    return [quote((start_ms + i * every_ms) * MS, bid, ask) for i in range(n)]


def halt(ts_ms: int) -> AdminCommand:
    return AdminCommand(ts_event=ts_ms * MS, ts_init=ts_ms * MS, command="halt", reason="test")


def kinds(events) -> list[str]:
    return [type(e).__name__ for e in events]


def test_a_strategy_asking_on_every_quote_while_halted_writes_its_first_denial_and_one_summary_per_window():
    strategy = Scripted(asks_every_quote)
    k = make(strategy)
    derived = feed(k, [halt(0), *quotes(1, 25_000)])  # 25 seconds of a quote a millisecond, 10 s windows
    assert strategy.events.count(next(e for e in strategy.events if isinstance(e, OrderDenied))) == 1
    assert sum(isinstance(e, OrderDenied) for e in strategy.events) == 25_000  # it heard of every denial
    journaled = [e for e in derived if not isinstance(e, TradingStateChanged)]
    # a window opens at 1 ms, closes at the first quote at or past 10,001 ms; the next opens there
    assert kinds(journaled) == ["SubmitOrder", "OrderDenied", "DenialsRepeated"] * 2 + ["SubmitOrder", "OrderDenied"]
    first, second = [e for e in journaled if isinstance(e, DenialsRepeated)]
    assert (first.repeats, first.since_ns, first.reason, first.request, first.side) == (
        9_999, 1 * MS, "TRADING_HALTED", "SubmitOrder", "BUY")
    assert first.first_order_id == journaled[0].order_id and first.ts_init == 10_001 * MS
    assert first.last_order_id == f"scripted-{1 + 10_000}-1"  # the quote at 10,000 ms, seq 10,001
    assert second.repeats == 9_999 and second.since_ns == 10_001 * MS
    assert k.repeats.held_back == 2 * 9_999 + 4_999  # the third window is still open
    (stopped,) = k.handle(k.seq + 1, RunStopped(ts_event=25_001 * MS, ts_init=25_001 * MS, reason="end")).derived
    assert isinstance(stopped, DenialsRepeated) and stopped.repeats == 4_999 and not k.repeats.open


def test_each_strategy_symbol_request_side_and_reason_has_a_window_of_its_own():
    def both_sides(quote_, ctx) -> None:
        ctx.submit("EURUSD", Side.BUY, d("1000"))
        ctx.submit("EURUSD", Side.SELL, d("1000"))

    k = make(Scripted(both_sides))
    derived = feed(k, [halt(0), *quotes(1, 3)])
    denied = [(e.order_id, e.reason) for e in derived if isinstance(e, OrderDenied)]
    assert denied == [("scripted-2-1", "TRADING_HALTED"), ("scripted-2-2", "TRADING_HALTED")]
    assert sorted(key[3] for key in k.repeats.open) == ["BUY", "SELL"]
    assert [w.repeats for w in k.repeats.open.values()] == [2, 2]


def test_a_window_of_zero_journals_every_denial():
    k = make(Scripted(asks_every_quote), repeated_denial_window_ms=0)
    derived = feed(k, [halt(0), *quotes(1, 50)])
    assert sum(isinstance(e, OrderDenied) for e in derived) == sum(isinstance(e, SubmitOrder) for e in derived) == 50
    assert not k.repeats.open and k.repeats.held_back == 0


def test_the_window_follows_the_runs_clock_and_a_limit_change_leaves_open_windows_as_they_are():
    k = make(Scripted(asks_every_quote), repeated_denial_window_ms=1000)
    feed(k, [halt(0), *quotes(1, 10)])
    (window,) = k.repeats.open.values()
    assert window.ends_ns == 1_001 * MS
    feed(k, [AdminCommand(ts_event=20 * MS, ts_init=20 * MS, command="limit",
                          args=["set", "repeated_denial_window_ms", "5000"])])
    assert window.ends_ns == 1_001 * MS and k.repeats.window_ns == 5_000 * MS
    derived = feed(k, quotes(1_001, 1))
    assert kinds(derived) == ["DenialsRepeated", "SubmitOrder", "OrderDenied"]
    (window,) = k.repeats.open.values()
    assert window.ends_ns == 6_001 * MS


class AsksEveryQuote(Strategy):
    """`asks_every_quote` as a strategy a snapshot can hold (built from its params, as the reference ones)."""

    strategy_id = "asker"

    def __init__(self, params: object = None) -> None:
        self.params = params

    def on_quote(self, quote_, ctx) -> None:
        asks_every_quote(quote_, ctx)


def test_replay_and_a_snapshot_taken_inside_a_window_derive_the_same_events():
    inputs = [halt(0), *quotes(1, 4_000, every_ms=5)]

    def run(cut: int | None):
        k = make(AsksEveryQuote())
        derived = feed(k, inputs[:cut])
        if cut is not None:  # a snapshot, restored: the windows and their counts come with the kernel
            buffer = io.BytesIO()
            snapshots._Pickler(buffer, protocol=5).dump(k)
            k = pickle.loads(buffer.getvalue())
            assert k.repeats.open
            derived += feed(k, inputs[cut:])
        return derived, k.state_digest()

    whole, digest = run(None)
    assert run(1_234) == (whole, digest)
    assert any(isinstance(e, DenialsRepeated) for e in whole)


def ema(**params) -> EmaCross:
    return EmaCross(EmaCrossParams(fast=2, slow=4, trade_size=Decimal("1000"), **params))


def rising(start_ms: int, n: int) -> list:
    """Quotes a millisecond apart whose mid rises by a pip a millisecond of the run: ema_cross wants to be
    long."""
    out = []
    for ms in range(start_ms, start_ms + n):
        bid = Decimal("1.10000") + Decimal("0.00001") * ms
        out.append(quote(ms * MS, str(bid), str(bid + Decimal("0.00002"))))
    return out


def test_ema_cross_asks_for_nothing_while_halted_and_asks_again_once_trading_is_back():
    k = make(ema())
    derived = feed(k, [halt(0), *rising(1, 5_000)])
    assert not [e for e in derived if isinstance(e, SubmitOrder | OrderDenied)]
    derived = feed(k, [AdminCommand(ts_event=6_000 * MS, ts_init=6_000 * MS, command="resume", reason="t"),
                       *rising(6_001, 2)])
    (submitted,) = [e for e in derived if isinstance(e, SubmitOrder)]
    assert (submitted.side, submitted.quantity, submitted.reduce_only) == (Side.BUY, d("1000"), False)


def fill_all(k: Kernel, order: SubmitOrder, ts_ms: int, price: str = "1.10000") -> list:
    return feed(k, [
        OrderAccepted(ts_event=ts_ms * MS, ts_init=ts_ms * MS, order_id=order.order_id, symbol=order.symbol,
                      venue_order_id="V" + order.order_id),
        OrderFilled(ts_event=ts_ms * MS, ts_init=ts_ms * MS, order_id=order.order_id, symbol=order.symbol,
                    trade_id="T" + order.order_id, side=order.side, last_qty=order.quantity,
                    last_price=d(price), cum_qty=order.quantity, leaves_qty=0, commission=0),
    ])


def test_ema_cross_while_reducing_goes_towards_flat_with_reduce_only_orders_and_never_past_it():
    k = make(ema())
    (buy,) = [e for e in feed(k, rising(1, 6)) if isinstance(e, SubmitOrder)]
    fill_all(k, buy, 10)
    assert k.portfolio.positions["EURUSD"].quantity == d("1000")
    feed(k, [AdminCommand(ts_event=11 * MS, ts_init=11 * MS, command="reduce", reason="t")])
    assert not [e for e in feed(k, rising(12, 50)) if isinstance(e, SubmitOrder)]  # long, wants long: nothing
    falling = [quote((100 + i) * MS, str(Decimal("1.10500") - Decimal("0.00010") * i),
                     str(Decimal("1.10502") - Decimal("0.00010") * i)) for i in range(20)]
    (sell,) = [e for e in feed(k, falling) if isinstance(e, SubmitOrder)]
    assert (sell.side, sell.quantity, sell.reduce_only) == (Side.SELL, d("1000"), True)  # to flat, not short
    fill_all(k, sell, 200)
    more = [quote((300 + i) * MS, str(Decimal("1.09000") - Decimal("0.00010") * i),
                  str(Decimal("1.09002") - Decimal("0.00010") * i)) for i in range(50)]
    assert not [e for e in feed(k, more) if isinstance(e, SubmitOrder)]  # flat, wants short: nothing while reducing


def test_a_denied_order_is_not_asked_for_again_until_something_it_depended_on_changes():
    # a position limit below the strategy's size: denied on the first ask; the same ask would follow on every
    # quote, and is held back until the limit changes (or a second of the run's clock has passed)
    k = make(ema(), max_position_long=Decimal("500"), repeated_denial_window_ms=0)
    derived = feed(k, rising(1, 500))
    denied = [e for e in derived if isinstance(e, OrderDenied)]
    assert [e.reason for e in denied] == ["MAX_POSITION_LONG"]
    derived = feed(k, rising(501, 600))  # past a second since the denial: one more ask, denied again
    assert [e.reason for e in derived if isinstance(e, OrderDenied)] == ["MAX_POSITION_LONG"]
    derived = feed(k, [AdminCommand(ts_event=1_200 * MS, ts_init=1_200 * MS, command="limit",
                                    args=["set", "max_position_long", "5000"]), *rising(1_201, 2)])
    (submitted,) = [e for e in derived if isinstance(e, SubmitOrder)]
    assert submitted.order_id in {e.order_id for e in derived if type(e).__name__ == "OrderSubmitted"}


def zscore() -> ZScoreReversion:
    return ZScoreReversion(ZScoreParams(window=5, entry_z=1.0, exit_z=0.5, trade_size=Decimal("1000"), order_ttl=1000))


def test_zscore_cancels_its_resting_entry_when_trading_turns_reducing_and_does_not_enter_again():
    k = make(zscore())
    flat = quotes(1, 5)
    spike = [quote(10 * MS, "1.10100", "1.10102")]  # far above the mean: a sell at the ask
    (entry,) = [e for e in feed(k, [*flat, *spike]) if isinstance(e, SubmitOrder)]
    assert (entry.side, entry.order_type, entry.reduce_only) == (Side.SELL, OrderType.LIMIT, False)
    feed(k, [OrderAccepted(ts_event=11 * MS, ts_init=11 * MS, order_id=entry.order_id, symbol="EURUSD",
                           venue_order_id="V1")])
    derived = feed(k, [AdminCommand(ts_event=12 * MS, ts_init=12 * MS, command="reduce", reason="t")])
    changed = next(e for e in derived if isinstance(e, TradingStateChanged))
    assert changed.state is TradingState.REDUCING
    (cancel,) = [e for e in derived if type(e).__name__ == "CancelOrder"]
    assert (cancel.order_id, cancel.reason) == (entry.order_id, "trading reducing")
    feed(k, [quote(20 * MS, "1.10000", "1.10002"), quote(21 * MS, "1.10300", "1.10302")])
    assert [o.order_id for o in k.orders.open.values()] == [entry.order_id]  # no new entry while reducing


def test_a_journal_outage_at_a_quote_a_millisecond_writes_a_handful_of_events_besides_market_data():
    """The review's experiment at the kernel: the journal goes away for 30 s of quotes while ema_cross wants
    to trade; what the outage derives is its halt and its end, and nothing else."""
    k = make(ema())
    feed(k, rising(1, 100))
    down = JournalDegraded(ts_event=200 * MS, ts_init=200 * MS, reason="server closed the connection")
    back = JournalRecovered(ts_event=30_200 * MS, ts_init=30_200 * MS, outage_ns=30_000 * MS)
    falling = [quote((201 + i) * MS, str(Decimal("1.20000") - Decimal("0.000001") * i),
                     str(Decimal("1.20002") - Decimal("0.000001") * i)) for i in range(29_999)]
    derived = feed(k, [down, *falling, back])
    assert kinds(derived) == ["TradingStateChanged", "TradingStateChanged"]
    assert [e.state for e in derived] == [TradingState.HALTED, TradingState.ACTIVE]


def test_a_strategy_hears_of_every_change_of_the_trading_state_paused_or_not():
    heard = []

    class Listening(Scripted):
        def on_trading_state(self, change, ctx) -> None:
            heard.append((change.state, ctx.trading_state))

    k = make(Listening())
    k.set_paused("scripted", True)
    feed(k, [halt(1), AdminCommand(ts_event=2 * MS, ts_init=2 * MS, command="reduce", reason="t"),
             AdminCommand(ts_event=3 * MS, ts_init=3 * MS, command="reduce", reason="again: no change")])
    assert heard == [(TradingState.HALTED, TradingState.HALTED), (TradingState.REDUCING, TradingState.REDUCING)]


def test_a_strategys_request_the_window_holds_back_still_names_a_kernel_order():
    k = make(Scripted(asks_every_quote))
    feed(k, [halt(0), *quotes(1, 3)])
    held = k.orders.by_id["scripted-4-1"]  # the third ask: never journaled, denied all the same
    assert held.status.value == "DENIED" and k.orders.denied == 3
    assert TimeInForce.GTC is held.time_in_force


def test_a_denials_memory_ends_when_the_state_position_limits_band_venues_or_a_second_change():
    k = make(ema(), max_position_long=Decimal("500"), repeated_denial_window_ms=0)
    feed(k, rising(1, 50))
    ctx = k.contexts["ema_cross"]
    ask = ("EURUSD", Side.BUY, d("1000"), OrderType.MARKET)
    assert ctx.still_denied(*ask) and not ctx.still_denied("EURUSD", Side.BUY, d("2000"))
    k.gate.bands["EURUSD"] = (d("1.0"), d("1.2"))  # the band breaker moved the instrument's band
    assert not ctx.still_denied(*ask)
    ctx.remember_denial(SubmitOrder(ts_event=0, ts_init=0, order_id="x", strategy_id="ema_cross", symbol="EURUSD",
                                    side=Side.BUY, order_type=OrderType.MARKET, quantity=d("1000")))
    assert ctx.still_denied(*ask)
    k.venues_down.add("SIM")
    assert not ctx.still_denied(*ask)
    k.venues_down.discard("SIM")
    assert ctx.still_denied(*ask)
    derived = feed(k, rising(60, 1_000))  # a second of the run's clock: asked once more, denied once more
    assert [e.reason for e in derived if isinstance(e, OrderDenied)] == ["MAX_POSITION_LONG"]
