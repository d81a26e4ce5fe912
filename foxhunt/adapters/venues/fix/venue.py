"""The FIX venue as the trading loop sees it: commands out, reports back in as journal inputs.

Everything here runs on the event loop. `send` translates a command and hands it to the engine, which
sends it at once or, held back by the message rate limit, from its sender thread; it returns no
reports, because a real venue answers later: each delivery of the engine is turned into inputs as it
reaches the loop and published to the bus (`Reports`), where they are journaled and handled like any
other input.

Session events are inputs too: a logon, a logout or a lost connection, sequence resets, resend requests
and session-level rejects. After a disconnect the kernel holds new orders for the venue (it is down)
and records its working orders as uncertain; after a logon foxhunt first asks the status of every order
it believes working (OrderStatusRequest, or one OrderMassStatusRequest where the counterparty supports
it, then one request for each working order its answer leaves out; if the counterparty rejects it, one
request per order from then on) and records what the venue says (fills it missed, cancels, rejects, a
replace whose answer was lost), and only then announces the venue connected, so trading resumes on
reconciled state. Optionally (cancel_on_reconnect) that announcement asks the kernel to cancel every
working order, which it does as journaled commands like any other.

Every report of one of foxhunt's orders is published, repeats and late ones included: the kernel, not
this adapter, decides what a report changes (it books an execution once, by its id, and refuses what the
order's lifecycle does not allow), so the adapter takes an order for done only when the kernel does. An
order the venue has not acknowledged within `ack_timeout` is asked about (OrderStatusRequest).

Messages that do not fit (garbage, an order id foxhunt never sent, an unexpected message type) are
recorded as `VenueMessageIgnored` with the raw text, never raised; so is a failure in foxhunt's own
handling of one message, which is logged with the traceback. An execution report foxhunt cannot read, or
that quickfix's session layer refused (a field of the wrong format, an ExecType the dictionary does not
know: quickfix answers it with a Reject(3), and under FIX it is then never sent again), is recorded as
`VenueMessageRejected` with its raw text from quickfix's message log, and trading tightens as
`on_rejected_execution` says: an execution may have vanished. quickfix itself drops messages with a bad
checksum or length before they reach us (and logs them in its file log); the gap they leave is resent.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping

import anyio
import anyio.abc
import structlog
from anyio.streams.memory import MemoryObjectSendStream

from foxhunt.adapters.venues.fix import parsing
from foxhunt.adapters.venues.fix.parsing import FixParseError, Working
from foxhunt.adapters.venues.fix.session import REDACT_TAIL, FixEngine, Inbound
from foxhunt.adapters.venues.recent import RecentSet
from foxhunt.adapters.venues.reconcile import reconcile
from foxhunt.adapters.venues.remote import RemoteVenue, Reports
from foxhunt.messages.base import Input
from foxhunt.messages.orders import (
    CLOSED_KEPT,
    CancelOrder,
    OrderCanceled,
    OrderExpired,
    OrderFilled,
    OrderRejected,
    ReplaceOrder,
    SubmitOrder,
)
from foxhunt.messages.system import (
    TradingState,
    VenueConnected,
    VenueDisconnected,
    VenueMessageIgnored,
    VenueMessageRejected,
    VenueSessionEvent,
)
from foxhunt.ports import OrderView, OrderViews

log = structlog.get_logger("foxhunt.fix")

TERMINAL = (OrderFilled, OrderCanceled, OrderRejected, OrderExpired)
# what foxhunt's own session messages are journaled as (session.py, _JOURNALED_ADMIN)
SENT_ADMIN = {"2": "resend_request_sent", "4": "sequence_reset_sent", "5": "logout_sent"}


class FixVenue(RemoteVenue):
    def __init__(
        self, name: str, engine: FixEngine, orders: OrderViews, account: str = "",
        reconcile_timeout: float = 10.0, cancel_on_reconnect: bool = False, mass_status: bool = False,
        ack_timeout: float = 10.0, on_rejected_execution: TradingState | None = TradingState.HALTED,
        now: Callable[[], int] = time.time_ns,
    ) -> None:
        self.name = name
        self.now = now  # the run's clock (Clock.now): what the venue reports is stamped with
        self.engine = engine
        self.orders = orders  # the kernel's orders by id, read on the loop between inputs
        self.account = account
        self.reconcile_timeout = reconcile_timeout
        self.cancel_on_reconnect = cancel_on_reconnect
        self.mass_status = mass_status  # reconcile with one OrderMassStatusRequest rather than one request each
        self.ack_timeout = ack_timeout  # an order unacknowledged this long is asked about
        self.on_rejected_execution = on_rejected_execution  # where trading goes when an execution is unusable
        self._unacknowledged: dict[str, float] = {}  # orders sent and not yet acknowledged: when (monotonic)
        self._mass_status_id: str | None = None  # the MassStatusReqID(584) whose reports are awaited
        self.cl_ord_ids: dict[str, str] = {}  # order id -> the ClOrdID the venue knows it by now
        self._requests = 0
        self.reports = Reports()
        self._reconciling: set[str] | None = None  # orders whose status is awaited before trading resumes
        self.connected = False  # logged on and reconciled: trading
        self._logged_on = False
        # orders whose final report has been published: the ClOrdID each is known by is forgotten as the
        # kernel forgets closed orders, so memory stays flat (what a report changes is the kernel's to say)
        self.ended = RecentSet(CLOSED_KEPT, forget=lambda order_id: self.cl_ord_ids.pop(order_id, None))

    # --- the venue port ------------------------------------------------------------------------------

    def send(self, cmd: SubmitOrder | CancelOrder | ReplaceOrder) -> list[Input]:
        match cmd:
            case SubmitOrder():
                self.cl_ord_ids[cmd.order_id] = cmd.order_id
                self.engine.send("D", parsing.new_order_single(cmd, self.account))
                self._unacknowledged[cmd.order_id] = time.monotonic()  # watched by _watch_acknowledgements
            case CancelOrder():
                working = self._working(cmd.order_id)
                self.engine.send("F", parsing.cancel_request(cmd, self._next_id(cmd.order_id), working))
            case ReplaceOrder():
                working = self._working(cmd.order_id)
                self.engine.send("G", parsing.replace_request(cmd, self._next_id(cmd.order_id), working))
        return []

    # --- inbound -----------------------------------------------------------------------------------------

    async def run(
        self, bus: MemoryObjectSendStream[Input], *,
        task_status: anyio.abc.TaskStatus = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Start the engine, then publish on `bus` what it delivers until cancelled; stop the engine on the
        way out (from a worker thread: it logs out, which blocks)."""
        self.engine.start(self._receive)
        task_status.started()
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._watch_acknowledgements)
                await self.reports.pump(bus)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self.engine.stop)

    def _receive(self, item: Inbound) -> None:
        """One delivery from the engine, on the event loop: its inputs go to the bus in this same callback."""
        for msg in self._translate(item):
            self.reports.emit(msg)

    def _translate(self, item: Inbound) -> list[Input]:
        kind, text = item
        ts = self.now()
        try:
            match kind:
                case "logon":
                    self.engine.redact_secrets(REDACT_TAIL)  # our Logon is in quickfix's log and store by now
                    return self._on_logon(ts)
                case "logout":
                    self.engine.redact_secrets(REDACT_TAIL)  # also after a logon attempt that failed
                    was_logged_on, self._logged_on = self._logged_on, False
                    self.connected, self._reconciling = False, None
                    if not was_logged_on:  # a logon attempt that failed (quickfix retries every ReconnectInterval):
                        return []  # the venue is already down, and a refusal's reason came as logout_received
                    return [VenueDisconnected(ts_event=ts, ts_init=ts, venue=self.name, reason=f"logout of {text}")]
                case "send_failed":
                    return [self._session(ts, event="send_failed", detail=text)]
                case "not_resent":
                    return [self._session(ts, event="resend_suppressed",
                                              detail=text.replace(parsing.SOH, "|"))]
                case "admin":
                    return self._admin(parsing.split(text), ts)
                case "sent_admin":
                    return self._sent_admin(parsing.split(text), ts)
                case "app":
                    return self._app(parsing.split(text), ts, text)
            raise FixParseError(f"unknown delivery {kind!r}")
        except FixParseError as e:
            if kind == "app" and f"{parsing.SOH}35=8{parsing.SOH}" in text:  # an execution foxhunt cannot read
                return [self._rejected(ts, "8", f"foxhunt cannot read it: {e}", text)]
            return [self._ignored(ts, str(e), text)]
        except Exception as e:  # noqa: BLE001 - one message foxhunt fails on must not end the session
            log.exception("fix_handling_failed", kind=kind, raw=text.replace(parsing.SOH, "|"))
            return [self._ignored(ts, f"foxhunt failed to handle it: {type(e).__name__}: {e}", text)]

    def _session(self, ts: int, event: str, detail: str = "") -> Input:
        return VenueSessionEvent(ts_event=ts, ts_init=ts, venue=self.name, event=event, detail=detail)

    def _rejected(self, ts: int, msg_type: str, reason: str, raw: str) -> Input:
        """A message of the venue's that may have carried an execution and could not be used."""
        execution = msg_type == "8"
        log.error("fix_message_rejected", msg_type=msg_type, reason=reason, raw=raw.replace(parsing.SOH, "|"),
                  trading=(self.on_rejected_execution.value if execution and self.on_rejected_execution
                           else "unchanged"))
        return VenueMessageRejected(ts_event=ts, ts_init=ts, venue=self.name, msg_type=msg_type, reason=reason,
                                    raw=raw.replace(parsing.SOH, "|"),
                                    tighten=self.on_rejected_execution if execution else None)

    def _ignored(self, ts: int, reason: str, raw: str) -> Input:
        log.warning("fix_message_ignored", reason=reason, raw=raw.replace(parsing.SOH, "|"))
        return VenueMessageIgnored(ts_event=ts, ts_init=ts, venue=self.name, reason=reason,
                                   raw=raw.replace(parsing.SOH, "|"))

    # --- session -------------------------------------------------------------------------------------

    def _on_logon(self, ts: int) -> list[Input]:
        self._logged_on = True
        out: list[Input] = [self._session(ts, event="logon", detail="")]
        working = {oid: o for oid, o in self.orders().items() if o.is_open}
        if not working:
            self.connected = True
            return [*out, self._connected(ts)]
        if self.mass_status:
            self._mass_status_id = self._next_id("mass-status")
            self.engine.send("AF", parsing.mass_status_request(self._mass_status_id))
        else:
            self._ask_status(working)
        self._reconciling = waiting = set(working)
        asyncio.get_running_loop().call_later(self.reconcile_timeout, self._reconcile_deadline, waiting)
        return out

    def _ask_status(self, orders: Mapping[str, OrderView]) -> None:
        for order_id, order in orders.items():
            self.engine.send("H", parsing.status_request(self.cl_ord_ids.get(order_id, order_id),
                                                         order.symbol, order.side, order.venue_order_id))

    def _mass_status(self, order: OrderView | None, f: dict[int, str], ts: int, raw: str) -> list[Input]:
        """One report of the answer to our OrderMassStatusRequest. After the last, the working orders it
        did not list (a counterparty lists what it has working) are asked about one by one."""
        if f[parsing.MASS_STATUS_REQ_ID] != self._mass_status_id:
            return [self._ignored(ts, f"mass status report for another request {f[parsing.MASS_STATUS_REQ_ID]!r}",
                                  raw)]
        out: list[Input] = []
        if order is not None:
            out += self._status(order, f, ts)
        elif f.get(parsing.CL_ORD_ID, "NONE") != "NONE":  # "NONE": the counterparty has no orders at all
            out.append(self._ignored(ts, f"mass status reports an order foxhunt never sent: "
                                         f"ClOrdID {f.get(parsing.CL_ORD_ID)!r}", raw))
        if f.get(parsing.LAST_RPT_REQUESTED) == "Y":
            self._mass_status_id = None
            self._ask_waiting()
        return out

    def _ask_waiting(self) -> None:
        """Ask the status of each order reconciliation still waits for."""
        if self._reconciling:
            orders = self.orders()
            self._ask_status({oid: orders[oid] for oid in sorted(self._reconciling) if oid in orders})

    def _mass_status_refused(self, f: dict[int, str], ts: int, why: str) -> list[Input]:
        """A reject of our OrderMassStatusRequest: the counterparty does not support it, so the orders being
        reconciled are asked about one by one, now and at every later logon."""
        if self._mass_status_id is None or self._ref_msg_type(f) != "AF":
            return []
        self._mass_status_id, self.mass_status = None, False
        self._ask_waiting()
        return [self._session(ts, event="mass_status_refused",
                              detail=f"{why}; reconciling with an OrderStatusRequest per working order from now on")]

    def _ref_msg_type(self, f: dict[int, str]) -> str | None:
        """The MsgType of our message that a Reject(3) or BusinessMessageReject(j) refers to: its
        RefMsgType(372), else that of the message we sent with its RefSeqNum(45)."""
        if f.get(parsing.REF_MSG_TYPE):
            return f[parsing.REF_MSG_TYPE]
        sent = self._referred(f)
        return sent.get(parsing.MSG_TYPE) if sent is not None else None

    def _referred(self, f: dict[int, str]) -> dict[int, str] | None:
        """The fields of our message that a reject names by its RefSeqNum(45), if still remembered."""
        seq = f.get(parsing.REF_SEQ_NUM, "")
        return self.engine.sent_message(seq) if seq.isdigit() else None

    def _reconciled(self, ts: int, detail: str) -> list[Input]:
        self._reconciling = None
        self.connected = True
        return [self._session(ts, event="reconciled", detail=detail), self._connected(ts)]

    def _connected(self, ts: int) -> VenueConnected:
        # with cancel_on_reconnect the kernel cancels the working orders, each cancel journaled first
        return VenueConnected(ts_event=ts, ts_init=ts, venue=self.name, cancel_working=self.cancel_on_reconnect)

    def _reconcile_deadline(self, waiting: set[str]) -> None:
        """`reconcile_timeout` after a logon: if that logon's reconciliation still waits, trading resumes."""
        if self._reconciling is not waiting:  # done, or the session went down and came up again since
            return
        ts = self.now()
        for msg in self._reconciled(ts, f"no status from the venue for {', '.join(sorted(waiting))} within "
                                        f"{self.reconcile_timeout} s: kept as they were"):
            self.reports.emit(msg)

    async def _watch_acknowledgements(self) -> None:
        """Until cancelled: an order the venue has not acknowledged (nor answered otherwise) `ack_timeout`
        after it was sent is asked about. One sweep every half of it, rather than a timer per order on the
        order's way out. Reconciliation asks anyway after a logon, so only a session that is up asks here."""
        while True:
            await anyio.sleep(self.ack_timeout / 2)
            now, orders = time.monotonic(), self.orders()
            for order_id, sent in list(self._unacknowledged.items()):
                order = orders.get(order_id)
                if order is not None and order.unacknowledged and now - sent < self.ack_timeout:
                    continue  # still in time
                del self._unacknowledged[order_id]
                if order is not None and order.unacknowledged and self.connected:
                    self.reports.emit(self._session(self.now(), event="status_requested",
                                                    detail=f"no acknowledgement of {order_id} within "
                                                           f"{self.ack_timeout} s"))
                    self._ask_status({order_id: order})

    def _admin(self, parsed: parsing.Parsed, ts: int) -> list[Input]:
        f = parsed.fields
        match parsed.msg_type:
            case "3":  # session-level Reject of one of our messages
                text = parsing.session_reject_text(f)
                out = [self._session(ts, event="reject", detail=text)]
                why = f"session reject: {text}"
                return out + (self._mass_status_refused(f, ts, why) or self._refused(f, ts, why))
            case "4":
                detail = f"NewSeqNo={f.get(36, '?')} GapFill={f.get(123, 'N')}"
                return [self._session(ts, event="sequence_reset", detail=detail)]
            case "2":
                detail = f"BeginSeqNo={f.get(7, '?')} EndSeqNo={f.get(16, '?')}"
                return [self._session(ts, event="resend_request", detail=detail)]
            case "5":
                return [self._session(ts, event="logout_received",
                                          detail=f.get(parsing.TEXT, ""))]
        return []  # heartbeats, test requests, logons: the engine's business

    def _sent_admin(self, parsed: parsing.Parsed, ts: int) -> list[Input]:
        """A session message foxhunt's quickfix sent: a resend request, a sequence reset or a logout (with
        its reason) is a session event; a Reject(3) of one of the counterparty's messages is that message,
        refused, with its raw text from the message log."""
        f = parsed.fields
        if parsed.msg_type != "3":
            detail = {"2": f"BeginSeqNo={f.get(7, '?')} EndSeqNo={f.get(16, '?')}",
                      "4": f"NewSeqNo={f.get(36, '?')} GapFill={f.get(123, 'N')}",
                      "5": f.get(parsing.TEXT, "")}[parsed.msg_type]
            return [self._session(ts, event=SENT_ADMIN[parsed.msg_type], detail=detail)]
        seq = f.get(parsing.REF_SEQ_NUM) or "?"
        raw = self.engine.received_message(seq) if seq.isdigit() else None
        reason = f"refused by foxhunt's session layer: {parsing.session_reject_text(f)} (MsgSeqNum {seq})"
        if raw is None:
            raw, reason = "", f"{reason}; its text is not in the last part of quickfix's message log"
        return [self._rejected(ts, f.get(parsing.REF_MSG_TYPE, "?"), reason, raw)]

    def _refused(self, f: dict[int, str], ts: int, reason: str) -> list[Input]:
        sent = self._referred(f)
        msg_type = sent.get(parsing.MSG_TYPE) if sent is not None else None
        if msg_type not in ("D", "F", "G"):
            return []
        order = self.orders().get(parsing.order_id_of(sent.get(parsing.CL_ORD_ID, "")))
        if order is None or not order.is_open:
            return []
        event = parsing.refused(msg_type, order.order_id, order.symbol, reason, ts)
        if isinstance(event, TERMINAL):
            self.ended.add(order.order_id)
        return [event]

    # --- application messages ------------------------------------------------------------------------

    def _app(self, parsed: parsing.Parsed, ts: int, raw: str) -> list[Input]:
        f = parsed.fields
        match parsed.msg_type:
            case "8":
                order = self.orders().get(parsing.order_id_of(f.get(parsing.CL_ORD_ID, "")))
                if f.get(parsing.EXEC_TYPE) == "I" and parsing.MASS_STATUS_REQ_ID in f:
                    return self._mass_status(order, f, ts, raw)
                if order is None:
                    return [self._ignored(ts, f"execution report for an order foxhunt never sent (or forgot, long"
                                              f" closed): ClOrdID {f.get(parsing.CL_ORD_ID)!r}", raw)]
                if f.get(parsing.EXEC_TYPE) == "I":
                    return self._status(order, f, ts)
                event = parsing.execution_report(f, ts)
                if event is None:
                    return []
                if f.get(parsing.EXEC_TYPE) == "5":
                    self.cl_ord_ids[order.order_id] = f[parsing.CL_ORD_ID]
                if isinstance(event, TERMINAL):
                    self.ended.add(order.order_id)
                return [event]  # a repeat or a late report too: the kernel records what it changes, if anything
            case "9":
                orders = self.orders()
                event = parsing.cancel_reject(f, ts, lambda oid: o.symbol if (o := orders.get(oid)) else None)
                if event.order_id not in orders:
                    return [self._ignored(ts, f"cancel reject for an order foxhunt never sent (or forgot, long"
                                              f" closed): {event.order_id}", raw)]
                return [event]
            case "j":
                why = f"business reject: {parsing.business_reject_text(f)}"
                return (self._mass_status_refused(f, ts, why) or self._refused(f, ts, why)
                        or [self._ignored(ts, why, raw)])
        return [self._ignored(ts, f"unexpected message type {parsed.msg_type!r}", raw)]

    def _status(self, order: OrderView, f: dict[int, str], ts: int) -> list[Input]:
        """An order status (ExecType I), asked for while reconciling or for an order left unacknowledged:
        what the venue did that foxhunt missed (reconcile.py). Its ClOrdID is the one the venue knows the
        order by now, which a restarted foxhunt has no other way to learn: a cancel or replace must name it
        (OrigClOrdID). Reports of the order still on their way to the kernel may cover some of it: the
        kernel books what is new (a missed fill carries no execution id, and the kernel books it by CumQty)."""
        if f.get(parsing.CL_ORD_ID):
            self.cl_ord_ids[order.order_id] = f[parsing.CL_ORD_ID]
        out = reconcile(order, parsing.order_status(f), ts)
        if any(isinstance(e, TERMINAL) for e in out):
            self.ended.add(order.order_id)
        waiting = self._reconciling
        if waiting is not None:
            waiting.discard(order.order_id)
            if not waiting:
                out += self._reconciled(ts, "every working order's status received")
        return out

    # --- helpers ---------------------------------------------------------------------------------------

    def _next_id(self, order_id: str) -> str:
        # a ClOrdID (or MassStatusReqID) unique across restarts too (a venue refuses one it has seen);
        # never journaled, so the clock in it does not touch replay
        self._requests += 1
        return f"{order_id}~{time.time_ns() // 1000:x}{self._requests}"

    def _working(self, order_id: str) -> Working:
        o = self.orders()[order_id]
        return Working(self.cl_ord_ids.get(order_id, order_id), o.side, o.quantity, o.order_type, o.price,
                       o.trigger_price, o.venue_order_id)
