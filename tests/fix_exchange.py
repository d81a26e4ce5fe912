"""A small exchange behind a real quickfix acceptor, for the FIX tests. Run as a subprocess:

    python tests/fix_exchange.py SETTINGS_FILE [--rest-limits] [--no-mass-status] [--credentials USER:PASSWORD]

It runs until its stdin closes. With --credentials a Logon must carry that Username(553) and Password(554).

Matching, per NewOrderSingle:
- a symbol other than EURUSD, GBPUSD, USDJPY is rejected (OrdRejReason 1, with text);
- a market order is accepted and filled at once at 1.10000 (1.1 per unit in the instrument's currency);
- a limit order is accepted and rests; above 150,000 units half of it fills at once at its limit price;
- account (tag 1) DROP: the order is accepted, then the exchange drops the connection, fills the order
  while foxhunt is away, and takes the next logon (to test reconciliation); DROP_REST: the same, but the
  order goes on resting; DROP_EXPIRE: the same, but the order expires while foxhunt is away; DROP_ON_REPLACE: the order rests, and the exchange takes its first replace but
  drops the connection instead of answering it; DUPLICATE_ACK: the order is acknowledged twice;
  OVERFILL: the order is acknowledged, then reported filled three times over (LastQty and CumQty), and
  goes on resting, so a cancel of it is confirmed; BAD_FILL: the order is acknowledged and fills, but the
  execution report carries LastQty(32)=abc; BAD_EXEC_TYPE: the same with an ExecType(150) FIX 4.4 does not
  define; SILENT_ACK: the order rests without an acknowledgement (its status says New);
- account SESSION_REJECT or BUSINESS_REJECT: the order is refused with a session-level Reject(3) or a
  BusinessMessageReject(j) that names it only by our MsgSeqNum (RefSeqNum 45).
OrderCancelRequest cancels a resting order (or answers OrderCancelReject, unknown order / too late);
OrderCancelReplaceRequest changes quantity and price; both must name the order by its latest ClOrdID
(OrigClOrdID), else they are refused as unknown; OrderStatusRequest answers ExecType I, for any of the
order's ClOrdIDs;
OrderMassStatusRequest answers ExecType I for every working order (the last with LastRptRequested=Y),
or one report naming no order when none is working; with --no-mass-status it refuses it with a
BusinessMessageReject (unsupported message type), as a counterparty without it does.
"""

from __future__ import annotations

import itertools
import sys
import threading
from decimal import Decimal

import quickfix as fix

SYMBOLS = {"EURUSD", "GBPUSD", "USDJPY"}
SOH = "\x01"


class Order:
    def __init__(self, cl_ord_id: str, symbol: str, side: str, qty: Decimal, ord_type: str, price: Decimal | None):
        self.cl_ord_id = cl_ord_id
        self.symbol, self.side, self.qty, self.ord_type, self.price = symbol, side, qty, ord_type, price
        self.cum = Decimal(0)
        self.avg = Decimal(0)
        self.status = "0"
        self.order_id = ""
        self.account = ""


class Exchange(fix.Application):
    def __init__(self, rest_limits: bool = False, mass_status: bool = True,
                 credentials: tuple[str, str] | None = None) -> None:
        super().__init__()
        self.credentials = credentials
        self.rest_limits = rest_limits  # every limit order rests, whatever its size
        self.answers_mass_status = mass_status  # else it refuses OrderMassStatusRequest
        self.orders: dict[str, Order] = {}  # by the ClOrdID the order is known by now
        self.ids = itertools.count(1)
        self.session = None
        self.pending_drop: Order | None = None

    def onCreate(self, sid):  # noqa: N802
        self.session = sid

    def onLogon(self, sid):  # noqa: N802
        self.session = sid

    def onLogout(self, sid):  # noqa: N802
        if self.pending_drop is not None:  # filled (or expired) while the client was away
            o, self.pending_drop = self.pending_drop, None
            if o.account == "DROP_EXPIRE":
                o.status = "C"
            else:
                self._trade(o, o.qty - o.cum, o.price or Decimal("1.1"), send=False)

    def toAdmin(self, m, sid):  # noqa: N802
        pass

    def fromAdmin(self, m, sid):  # noqa: N802
        f = dict(p.split("=", 1) for p in m.toString().rstrip(SOH).split(SOH))
        if self.credentials and f["35"] == "A" and (f.get("553"), f.get("554")) != self.credentials:
            raise fix.RejectLogon("bad username or password")  # quickfix answers with a Logout of this text

    def toApp(self, m, sid):  # noqa: N802
        pass

    def fromApp(self, m, sid):  # noqa: N802
        f = dict(p.split("=", 1) for p in m.toString().rstrip(SOH).split(SOH))
        try:
            {"D": self.new_order, "F": self.cancel, "G": self.replace, "H": self.status,
             "AF": self.mass_status}[f["35"]](f)
        except Exception as e:  # noqa: BLE001 - the exchange must keep running for the test
            print(f"exchange: {type(e).__name__}: {e}", file=sys.stderr, flush=True)

    # --- matching ------------------------------------------------------------------------------------

    def new_order(self, f: dict[str, str]) -> None:
        if f.get("1") == "SESSION_REJECT":
            self.send("3", {"45": f["34"], "371": "1", "372": "D", "373": "5", "58": "account not permitted"})
            return
        if f.get("1") == "BUSINESS_REJECT":
            self.send("j", {"45": f["34"], "372": "D", "380": "4", "58": "trading halted"})
            return
        price = Decimal(f["44"]) if "44" in f else None
        o = Order(f["11"], f["55"], f["54"], Decimal(f["38"]), f["40"], price)
        o.account = f.get("1", "")
        if o.symbol not in SYMBOLS:
            o.status = "8"
            self.report(o, "8", text="no such symbol", extra={"103": "1"})
            return
        o.order_id = f"X{next(self.ids)}"
        self.orders[o.cl_ord_id] = o
        if o.account == "SILENT_ACK":  # a counterparty's mistake: the acknowledgement never sent
            return
        self.report(o, "0")
        if o.account == "OVERFILL":  # the venue says it traded three times the order, and it goes on resting
            three = o.qty * 3
            self.report(o, "F", last=(three, o.price or Decimal("1.1")), extra={"14": _d(three), "151": "0"})
            return
        if o.account in ("BAD_FILL", "BAD_EXEC_TYPE"):  # it fills, and the report of it is malformed
            self._trade(o, o.qty, o.price or Decimal("1.1"), send=False)
            bad = {"32": "abc"} if o.account == "BAD_FILL" else {"150": "Z", "32": _d(o.qty)}
            self.report(o, "F", last=(o.qty, o.price or Decimal("1.1")), extra=bad)
            return
        if o.account == "DUPLICATE_ACK":  # a counterparty's mistake: the order acknowledged twice
            self.report(o, "0")
        if f.get("1") in ("DROP", "DROP_REST", "DROP_EXPIRE"):
            if f["1"] != "DROP_REST":
                self.pending_drop = o
            self._drop()
        elif o.ord_type == "1":
            self._trade(o, o.qty, Decimal("1.1"))
        elif o.qty > 150_000 and not self.rest_limits:
            self._trade(o, o.qty / 2, o.price)

    def cancel(self, f: dict[str, str]) -> None:
        o = self.orders.get(f["41"])
        if o is None or o.status in ("2", "4", "8"):
            reason = "1" if o is None else "0"
            self.send("9", {"11": f["11"], "41": f["41"], "37": o.order_id if o else "NONE", "39": o.status if o else "8",
                            "434": "1", "102": reason, "58": "unknown order" if o is None else "too late to cancel"})
            return
        if self._stale(f, o, "1"):
            return
        o.status = "4"
        self.orders[f["11"]] = o
        o.cl_ord_id = f["11"]
        self.report(o, "4", orig=f["41"], text="canceled on request")

    def replace(self, f: dict[str, str]) -> None:
        o = self.orders.get(f["41"])
        if o is None or o.status not in ("0", "1"):
            self.send("9", {"11": f["11"], "41": f["41"], "37": "NONE", "39": "8", "434": "2", "102": "1",
                            "58": "unknown order"})
            return
        if self._stale(f, o, "2"):
            return
        o.qty = Decimal(f["38"])
        o.price = Decimal(f["44"]) if "44" in f else o.price
        o.cl_ord_id = f["11"]
        self.orders[f["11"]] = o
        if o.account == "DROP_ON_REPLACE":  # replaced, and the answer lost with the connection
            o.account = ""
            self._drop()
            return
        self.report(o, "5", orig=f["41"])

    def _drop(self) -> None:
        threading.Timer(0.2, lambda: fix.Session.lookupSession(self.session).disconnect()).start()

    def _stale(self, f: dict[str, str], o: Order, response_to: str) -> bool:
        """A cancel or replace must name the order by its latest ClOrdID (FIX 4.4, OrigClOrdID(41)): one
        that names it by an earlier one is refused, as unknown."""
        if f["41"] == o.cl_ord_id:
            return False
        self.send("9", {"11": f["11"], "41": f["41"], "37": o.order_id, "39": o.status, "434": response_to,
                        "102": "1", "58": f"OrigClOrdID {f['41']} is not the order's latest ClOrdID"})
        return True

    def status(self, f: dict[str, str]) -> None:
        o = self.orders.get(f["11"])
        if o is None:
            self.send("8", {"11": f["11"], "17": f"S{next(self.ids)}", "37": "NONE", "39": "8", "150": "I",
                            "55": f["55"], "54": f["54"], "151": "0", "14": "0", "6": "0", "58": "unknown order"})
            return
        self.report(o, "I")

    def mass_status(self, f: dict[str, str]) -> None:
        if not self.answers_mass_status:
            self.send("j", {"45": f["34"], "372": "AF", "379": f["584"], "380": "3",
                            "58": "OrderMassStatusRequest not supported"})
            return
        working = list({id(o): o for o in self.orders.values() if o.status in ("0", "1")}.values())
        if not working:
            self.send("8", {"584": f["584"], "911": "0", "912": "Y", "11": "NONE", "17": f"S{next(self.ids)}",
                            "37": "NONE", "39": "8", "150": "I", "55": "EURUSD", "54": "1", "151": "0", "14": "0",
                            "6": "0"})
        for i, o in enumerate(working, 1):
            last = "Y" if i == len(working) else "N"
            self.report(o, "I", extra={"584": f["584"], "911": str(len(working)), "912": last})

    def _trade(self, o: Order, qty: Decimal, price: Decimal, send: bool = True) -> None:
        o.avg = (o.avg * o.cum + price * qty) / (o.cum + qty)
        o.cum += qty
        o.status = "2" if o.cum >= o.qty else "1"
        if send:
            self.report(o, "F", last=(qty, price))

    # --- messages ------------------------------------------------------------------------------------

    def report(self, o: Order, exec_type: str, orig: str | None = None, text: str = "",
               last: tuple[Decimal, Decimal] | None = None, extra: dict[str, str] | None = None) -> None:
        f = {"37": o.order_id or "NONE", "11": o.cl_ord_id, "17": f"E{next(self.ids)}", "150": exec_type,
             "39": o.status, "55": o.symbol, "54": o.side, "38": _d(o.qty),
             "151": _d(o.qty - o.cum if o.status in ("0", "1") else Decimal(0)), "14": _d(o.cum), "6": _d(o.avg)}
        if o.price is not None:
            f["44"] = _d(o.price)
        if orig:
            f["41"] = orig
        if text:
            f["58"] = text
        if last:
            f.update({"32": _d(last[0]), "31": _d(last[1]), "12": _d(last[0] * last[1] * Decimal("0.00002"))})
        f.update(extra or {})
        self.send("8", f)

    def send(self, msg_type: str, fields: dict[str, str]) -> None:
        m = fix.Message()
        m.getHeader().setField(fix.BeginString("FIX.4.4"))
        m.getHeader().setField(fix.MsgType(msg_type))
        for tag, value in fields.items():
            m.setField(int(tag), value)
        fix.Session.sendToTarget(m, self.session)


def _d(x: Decimal) -> str:
    return format(x.normalize(), "f")


def main() -> None:
    settings = fix.SessionSettings(sys.argv[1])
    args = sys.argv[2:]
    credentials = args[args.index("--credentials") + 1].split(":", 1) if "--credentials" in args else None
    app = Exchange(rest_limits="--rest-limits" in args, mass_status="--no-mass-status" not in args,
                   credentials=tuple(credentials) if credentials else None)
    acceptor = fix.SocketAcceptor(app, fix.FileStoreFactory(settings), settings, fix.FileLogFactory(settings))
    acceptor.start()
    print("exchange: listening", flush=True)
    try:
        sys.stdin.read()  # runs until the test closes our stdin (or kills us)
    finally:
        acceptor.stop()


if __name__ == "__main__":
    main()
