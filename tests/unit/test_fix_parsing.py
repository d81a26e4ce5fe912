"""FIX 4.4 parsing: raw messages as a counterparty sends them, in and out of foxhunt's events."""

from __future__ import annotations

import pytest

from foxhunt.adapters.venues.fix import parsing
from foxhunt.adapters.venues.fix.parsing import FixParseError, Working
from foxhunt.messages.base import parse_fixed as d
from foxhunt.messages.orders import (
    CancelOrder,
    OrderAccepted,
    OrderCanceled,
    OrderCancelRejected,
    OrderExpired,
    OrderFilled,
    OrderPartiallyFilled,
    OrderRejected,
    OrderReplaced,
    OrderType,
    ReplaceOrder,
    Side,
    SubmitOrder,
    TimeInForce,
)

TS = 1_733_011_200_123_456_789  # 2024-12-01T00:00:00.123456789Z


def raw(text: str) -> str:
    """Recorded messages are written with | for SOH, as FIX logs show them."""
    return text.replace("|", parsing.SOH)


# as a quickfix acceptor sends them (header and trailer included)
ACCEPTED = raw("8=FIX.4.4|9=150|35=8|34=2|49=EXCH|52=20241201-00:00:00.124|56=FOXHUNT|6=0|11=ema-7-1|14=0|17=E1|"
               "37=X1|39=0|54=1|55=EURUSD|150=0|151=100000|10=123|")
PARTIAL = raw("8=FIX.4.4|9=180|35=8|34=3|49=EXCH|56=FOXHUNT|6=1.10002|11=ema-7-1|12=0.44|14=40000|17=E2|31=1.10002|"
              "32=40000|37=X1|39=1|54=1|55=EURUSD|150=F|151=60000|851=1|10=001|")
FILLED = raw("8=FIX.4.4|35=8|11=ema-7-1|17=E3|31=1.10004|32=60000|37=X1|39=2|54=1|55=EURUSD|150=F|151=0|14=100000|"
             "6=1.100032|10=002|")
CANCELED = raw("8=FIX.4.4|35=8|11=ema-7-1~2|41=ema-7-1|17=E4|37=X1|39=4|54=1|55=EURUSD|150=4|151=0|14=0|6=0|"
               "58=canceled on request|10=003|")
REPLACED = raw("8=FIX.4.4|35=8|11=ema-7-1~1|41=ema-7-1|17=E5|37=X1|38=50000|39=5|44=1.1001|54=1|55=EURUSD|150=5|"
               "151=50000|14=0|6=0|10=004|")
REJECTED = raw("8=FIX.4.4|35=8|11=ema-9-1|17=E6|37=NONE|39=8|54=2|55=XAUUSD|150=8|151=0|14=0|6=0|103=1|"
               "58=no such symbol|10=005|")
EXPIRED = raw("8=FIX.4.4|35=8|11=ema-7-1|17=E7|37=X1|39=C|54=1|55=EURUSD|150=C|151=0|14=0|6=0|10=006|")
PENDING_NEW = raw("8=FIX.4.4|35=8|11=ema-7-1|17=E0|37=X1|39=A|54=1|55=EURUSD|150=A|151=100000|14=0|6=0|10=007|")
CANCEL_REJECT = raw("8=FIX.4.4|35=9|11=ema-7-1~3|41=ema-7-1|37=X1|39=2|434=1|102=0|58=order already filled|10=008|")


def event(text: str):
    parsed = parsing.split(text)
    assert parsed.msg_type == "8"
    return parsing.execution_report(parsed.fields, TS)


def test_execution_reports_become_order_events():
    stamps = {"ts_event": TS, "ts_init": TS, "order_id": "ema-7-1", "symbol": "EURUSD"}
    assert event(ACCEPTED) == OrderAccepted(**stamps, venue_order_id="X1")
    assert event(PARTIAL) == OrderPartiallyFilled(
        **stamps, side=Side.BUY, trade_id="E2", last_qty=d("40000"), last_price=d("1.10002"), leaves_qty=d("60000"),
        commission=d("0.44"), liquidity="MAKER", cum_qty=d("40000"))  # CumQty(14): what the kernel books by
    filled = event(FILLED)
    assert isinstance(filled, OrderFilled) and filled.leaves_qty == 0 and filled.liquidity == "TAKER"
    without = "\x01".join(f for f in FILLED.split("\x01") if not f.startswith("14="))
    assert event(FILLED).cum_qty is not None and event(without).cum_qty is None
    assert event(CANCELED) == OrderCanceled(**stamps, reason="canceled on request")
    assert event(REPLACED) == OrderReplaced(**stamps, quantity=d("50000"), price=d("1.1001"))
    assert event(EXPIRED) == OrderExpired(**stamps)
    assert event(PENDING_NEW) is None


def test_a_reject_carries_the_counterparty_reason_and_code():
    rejected = event(REJECTED)
    assert isinstance(rejected, OrderRejected) and rejected.order_id == "ema-9-1"
    assert rejected.reason == "unknown symbol (103=1): no such symbol"


def test_a_cancel_reject_names_the_order_and_the_reason():
    f = parsing.split(CANCEL_REJECT).fields
    rejected = parsing.cancel_reject(f, TS, {"ema-7-1": "EURUSD"}.get)
    assert rejected == OrderCancelRejected(ts_event=TS, ts_init=TS, order_id="ema-7-1", symbol="EURUSD",
                                           reason="too late to cancel (102=0): order already filled")
    # CxlRejResponseTo(434) says which request was refused: 1 a cancel, 2 a replace
    f = parsing.split(CANCEL_REJECT.replace(raw("|434=1|"), raw("|434=2|"))).fields
    assert parsing.cancel_reject(f, TS, {"ema-7-1": "EURUSD"}.get).replace


@pytest.mark.parametrize(
    "text, error",
    [
        ("8=FIX.4.4|35=8|11=a|150=F|55=EURUSD|54=1|32=1|31=1|151=0|10=1|", "lacks required tag(s) 17"),
        ("8=FIX.4.4|35=8|11=a|150=0|10=1|", "lacks required tag(s) 55"),
        ("8=FIX.4.4|35=8|11=a|150=Z|55=EURUSD|10=1|", "unknown ExecType(150) 'Z'"),
        ("8=FIX.4.4|35=8|11=a|150=F|55=EURUSD|54=1|17=E|32=lots|31=1|151=0|10=1|", "tag 32: not a decimal"),
        ("8=FIX.4.4|35=8|11=a|150=F|55=EURUSD|54=1|17=E|32=1|31=1" + "0" * 308 + "|151=0|10=1|",
         "tag 31: not a decimal foxhunt holds"),  # beyond int64 nanos: refused, never booked
        ("8=FIX.4.4|35=8|11=a|150=F|55=EURUSD|54=9|17=E|32=1|31=1|151=0|10=1|", "Side(54) '9'"),
    ],
)
def test_reports_missing_what_they_need_are_parse_errors_naming_it(text, error):
    with pytest.raises(FixParseError, match=error.replace("(", r"\(").replace(")", r"\)")):
        event(raw(text))


@pytest.mark.parametrize("text, error", [("garbage", "not a tag=value"), ("8=FIX.4.4|9=5|", "no MsgType"),
                                          ("8=FIX.4.4|x=1|35=8|", "not a tag=value")])
def test_garbage_is_a_parse_error(text, error):
    with pytest.raises(FixParseError, match=error):
        parsing.split(raw(text))


def test_outbound_orders_carry_the_fix_enumerations_and_exact_decimals():
    cmd = SubmitOrder(ts_event=TS, ts_init=TS, order_id="ema-7-1", strategy_id="ema", symbol="EURUSD",
                      side=Side.SELL, order_type=OrderType.LIMIT, quantity=d("100000"), price=d("1.10005"),
                      time_in_force=TimeInForce.IOC)
    assert parsing.render(parsing.new_order_single(cmd, account="ACC1")) == (
        "11=ema-7-1|55=EURUSD|54=2|60=20241201-00:00:00.123|38=100000|40=2|59=3|44=1.10005|1=ACC1")
    working = Working("ema-7-1", Side.SELL, d("100000"), OrderType.LIMIT, d("1.10005"), None)
    cancel = CancelOrder(ts_event=TS, ts_init=TS, order_id="ema-7-1", symbol="EURUSD")
    assert parsing.render(parsing.cancel_request(cancel, "ema-7-1~1", working)) == (
        "41=ema-7-1|11=ema-7-1~1|55=EURUSD|54=2|60=20241201-00:00:00.123|38=100000")
    replace = ReplaceOrder(ts_event=TS, ts_init=TS, order_id="ema-7-1", symbol="EURUSD", price=d("1.1"))
    assert parsing.render(parsing.replace_request(replace, "ema-7-1~2", working)) == (
        "41=ema-7-1|11=ema-7-1~2|55=EURUSD|54=2|60=20241201-00:00:00.123|38=100000|40=2|44=1.1")
    assert parsing.render(parsing.status_request("ema-7-1~2", "EURUSD", Side.SELL)) == "11=ema-7-1~2|55=EURUSD|54=2"
    # once the venue has acknowledged the order, its OrderID(37) goes along
    acknowledged = working._replace(venue_order_id="X1")
    assert parsing.render(parsing.cancel_request(cancel, "ema-7-1~1", acknowledged)).startswith(
        "41=ema-7-1|11=ema-7-1~1|37=X1|55=EURUSD|")
    assert parsing.render(parsing.replace_request(replace, "ema-7-1~2", acknowledged)).startswith(
        "41=ema-7-1|11=ema-7-1~2|37=X1|55=EURUSD|")
    assert parsing.render(parsing.status_request("ema-7-1~2", "EURUSD", Side.SELL, "X1")) == (
        "11=ema-7-1~2|37=X1|55=EURUSD|54=2")
    assert parsing.render(parsing.mass_status_request("ms-1")) == "584=ms-1|585=7"  # all orders


def test_refusals_of_our_messages_by_the_session_layer():
    f = parsing.split(raw("8=FIX.4.4|35=3|45=7|371=38|372=D|373=5|58=Value is incorrect|10=1|")).fields
    text = parsing.session_reject_text(f)
    assert text == "value is incorrect (out of range) (373=5): Value is incorrect, tag 38"
    assert isinstance(parsing.refused("D", "a", "EURUSD", text, TS), OrderRejected)
    assert isinstance(parsing.refused("F", "a", "EURUSD", text, TS), OrderCancelRejected)
    assert not parsing.refused("F", "a", "EURUSD", text, TS).replace and parsing.refused("G", "a", "X", text, TS).replace


def test_messages_are_built_from_text_with_length_and_checksum_computed_and_no_delimiter_smuggled_in():
    from foxhunt.adapters.venues.fix.session import _build

    message = _build("D", [(11, "ema-7-1"), (55, "EURUSD"), (54, "1"), (38, "100000"), (40, "1")])
    text = message.toString()
    body = text[text.index("35=") : text.index("\x0110=") + 1]
    assert text.startswith(f"8=FIX.4.4\x019={len(body)}\x01")
    assert text.endswith(f"10={sum(text[: text.index('10=')].encode()) % 256:03d}\x01")
    with pytest.raises(ValueError, match="delimiter"):
        _build("D", [(1, "ACC\x0154=2")])  # an account that would add a second Side
