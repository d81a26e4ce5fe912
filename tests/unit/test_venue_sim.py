"""The simulated venue's matching rules (see the docstring of foxhunt.adapters.venues.sim)."""

from __future__ import annotations

from decimal import Decimal

from foxhunt.adapters.venues.sim import DAY_NS, SimVenue
from foxhunt.config import SimVenueConfig
from foxhunt.messages.base import parse_fixed as d
from foxhunt.messages.market import Bar, PriceType
from foxhunt.messages.orders import (
    CancelOrder,
    OrderCancelRejected,
    OrderType,
    ReplaceOrder,
    Side,
    SubmitOrder,
    TimeInForce,
)
from tests.fakes import INSTRUMENTS, Clock, quote


def venue(latency_ns: int = 0, fee_bps: str = "0") -> SimVenue:
    return SimVenue(INSTRUMENTS, SimVenueConfig(latency_ns=latency_ns, fee_bps=Decimal(fee_bps)), Clock())


def order(oid="o1", side=Side.BUY, qty="100000", kind=OrderType.MARKET, price=None, trigger=None,
          tif=TimeInForce.GTC, ts=0):
    return SubmitOrder(ts_event=ts, ts_init=ts, order_id=oid, strategy_id="s", symbol="EURUSD", side=side,
                       order_type=kind, quantity=d(qty), price=d(price) if price else None,
                       trigger_price=d(trigger) if trigger else None, time_in_force=tif)


def kinds(reports) -> list[str]:
    return [type(r).__name__ for r in reports]


def test_market_buy_fills_at_the_ask_with_commission():
    v = venue(fee_bps="0.2")
    v.on_market(quote(1, "1.10000", "1.10020"))
    reports = v.send(order())
    assert kinds(reports) == ["OrderAccepted", "OrderFilled"]
    fill = reports[1]
    assert fill.last_price == d("1.1002") and fill.last_qty == d("100000") and fill.leaves_qty == 0
    assert fill.commission == d("2.2004")  # 110020 * 0.2 / 10000


def test_market_order_without_any_quote_is_rejected():
    assert kinds(venue().send(order())) == ["OrderRejected"]


def test_limit_rests_until_the_touch_reaches_it_and_fills_at_its_price_or_better():
    v = venue()
    v.on_market(quote(1, "1.1", "1.1002"))
    assert kinds(v.send(order(kind=OrderType.LIMIT, price="1.09990"))) == ["OrderAccepted"]
    assert v.on_market(quote(2, "1.0999", "1.1001")) == []
    (fill,) = v.on_market(quote(3, "1.0997", "1.0998"))
    assert fill.last_price == d("1.0998")


def test_quoted_size_limits_fills_and_partial_fills_follow():
    v = venue()
    v.on_market(quote(1, "1.1", "1.1002", ask_size="60000"))
    reports = v.send(order(qty="100000"))
    assert kinds(reports) == ["OrderAccepted", "OrderPartiallyFilled"]
    assert reports[1].last_qty == d("60000") and reports[1].leaves_qty == d("40000")
    (rest,) = v.on_market(quote(2, "1.1", "1.1003", ask_size="500000"))
    assert type(rest).__name__ == "OrderFilled" and rest.last_price == d("1.1003")


def test_ioc_cancels_the_remainder_and_fok_fills_all_or_nothing():
    v = venue()
    v.on_market(quote(1, "1.1", "1.1002", ask_size="60000"))
    assert kinds(v.send(order("a", tif=TimeInForce.IOC))) == ["OrderAccepted", "OrderPartiallyFilled", "OrderCanceled"]
    v.on_market(quote(2, "1.1", "1.1002", ask_size="60000"))
    assert kinds(v.send(order("b", tif=TimeInForce.FOK))) == ["OrderAccepted", "OrderCanceled"]


def test_stop_triggers_when_the_touch_reaches_it():
    v = venue()
    v.on_market(quote(1, "1.1", "1.1002"))
    assert kinds(v.send(order(kind=OrderType.STOP, trigger="1.10050"))) == ["OrderAccepted"]
    assert v.on_market(quote(2, "1.1002", "1.1004")) == []
    (fill,) = v.on_market(quote(3, "1.1005", "1.1007"))
    assert fill.last_price == d("1.1007")


def test_cancel_and_replace_of_a_working_order_and_of_an_unknown_one():
    v = venue()
    v.on_market(quote(1, "1.1", "1.1002"))
    v.send(order(kind=OrderType.LIMIT, price="1.09"))
    replace = ReplaceOrder(ts_event=2, ts_init=2, order_id="o1", symbol="EURUSD", price=d("1.095"))
    (replaced,) = v.send(replace)
    assert replaced.price == d("1.095") and replaced.quantity == d("100000")
    cancel = CancelOrder(ts_event=3, ts_init=3, order_id="o1", symbol="EURUSD")
    assert kinds(v.send(cancel)) == ["OrderCanceled"]
    (refused,) = v.send(cancel)
    assert type(refused) is OrderCancelRejected and not refused.replace
    (refused,) = v.send(replace)
    assert type(refused) is OrderCancelRejected and refused.replace


def test_invalid_orders_are_rejected_with_a_reason():
    v = venue()
    v.on_market(quote(1, "1.1", "1.1002"))
    cases = {
        "INVALID_QUANTITY": order(qty="1500"),
        "INVALID_PRICE": order(kind=OrderType.LIMIT, price="1.100005"),
        "MISSING_PRICE": order(kind=OrderType.LIMIT),
    }
    for reason, cmd in cases.items():
        (rejected,) = v.send(cmd)
        assert rejected.reason.startswith(reason)


def test_latency_delays_commands_in_market_time_and_they_meet_the_old_book():
    v = venue(latency_ns=100)
    v.on_market(quote(1000, "1.1", "1.1002"))
    assert v.send(order(ts=1000)) == []
    assert v.on_market(quote(1050, "1.2", "1.2002")) == []
    reports = v.on_market(quote(1200, "1.3", "1.3002"))
    assert kinds(reports) == ["OrderAccepted", "OrderFilled"]
    assert reports[1].last_price == d("1.2002") and reports[1].ts_event == 1100


def test_day_orders_expire_on_the_next_utc_day_and_gtc_do_not():
    v = venue()
    v.on_market(quote(1, "1.1", "1.1002"))
    v.send(order("day", kind=OrderType.LIMIT, price="1.0", tif=TimeInForce.DAY))
    v.send(order("gtc", kind=OrderType.LIMIT, price="1.0", tif=TimeInForce.GTC))
    (expired,) = v.on_market(quote(DAY_NS + 5, "1.1", "1.1002"))
    assert type(expired).__name__ == "OrderExpired" and expired.order_id == "day"
    assert list(v.working) == ["gtc"]


def test_bars_move_their_side_of_the_book():
    v = venue()
    bar = Bar(ts_event=60, ts_init=60, symbol="EURUSD", price_type=PriceType.BID, interval_ns=60,
              open=d("1.1"), high=d("1.2"), low=d("1.0"), close=d("1.15"))
    v.on_market(bar)
    assert kinds(v.send(order())) == ["OrderAccepted", "OrderFilled"]  # ask unknown: takes the bid side
