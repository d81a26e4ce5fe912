"""The Interactive Brokers venue and market data, through ib_async, as the trading loop sees them.

ib_async runs on the daemon's own asyncio loop, so its events arrive on the loop: nothing crosses a
thread. Only its `*Async` methods and non-blocking senders are used (its blocking helpers run an event
loop of their own). `send` hands an order to `IB.placeOrder`, which queues it behind ib_async's
client-side throttle (45 requests a second, under IB's pacing limit of 50 messages a second); the
answers come back as ib_async events, are translated here into foxhunt inputs and published on the bus.

`run` connects, with backoff, and after every (re)connection: qualifies the configured contracts (once),
subscribes market data, reconciles (ib_async's start-up synchronisation fetched open orders and
executions: fills foxhunt missed are recorded, orders the venue no longer works are closed) and only
then publishes `VenueConnected`. Each order carries foxhunt's order id in IB's `orderRef`, so no order
is ever sent again on reconnect. Every execution of a known order is published with its execution id and
IB's cumulative quantity, and the kernel books it once, from its own state: an execution IB reports again
after a reconnect or a restart is recorded as a duplicate (this adapter skips those it has already
published in this process, as an optimisation only). An execution or order status that cannot be read
is journaled as `VenueMessageRejected` with its raw fields, and trading tightens as
`on_rejected_execution` says; so is an execution of an order foxhunt did not send, live or found at
reconciliation, as `on_foreign_execution` says.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

import anyio
import anyio.abc
import structlog
from anyio.streams.memory import MemoryObjectSendStream
from ib_async import IB, Contract, Execution, Fill, Ticker, Trade

from foxhunt.adapters.venues.ib import parsing
from foxhunt.adapters.venues.recent import DoneOrders, RecentSet
from foxhunt.adapters.venues.reconcile import Seen, reconcile
from foxhunt.adapters.venues.remote import RemoteVenue, Reports
from foxhunt.errors import ConfigError
from foxhunt.messages.base import Input, format_fixed
from foxhunt.messages.market import Instrument, QuoteTick, TradeTick
from foxhunt.messages.orders import (
    CancelOrder,
    CommissionReported,
    OrderAccepted,
    OrderCanceled,
    OrderCancelRejected,
    OrderFilled,
    OrderPartiallyFilled,
    OrderRejected,
    OrderReplaced,
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
from foxhunt.ports import OrderViews

log = structlog.get_logger("foxhunt.ib")

LOG_KEPT = 4  # entries of an ib_async Trade's log kept (see `_on_status`)
# The longest message IB may announce: TWS's are a few kilobytes, the largest (contract details, historical
# data) some hundreds. A length prefix beyond it is garbage, and ib_async would wait for it for ever.
MAX_MESSAGE_BYTES = 16 << 20


@dataclass(frozen=True)
class IbContract:
    instrument: Instrument
    sec_type: str  # CASH, STK, FUT
    exchange: str = ""
    expiry: str = ""  # futures: YYYYMM or YYYYMMDD


class IbVenue(RemoteVenue):
    def __init__(
        self, name: str, ib: IB, host: str, port: int, client_id: int, contracts: dict[str, IbContract],
        orders: OrderViews, account: str = "", market_data: tuple[str, ...] = (),
        backoff_max: float = 30.0, connect_timeout: float = 10.0,
        on_rejected_execution: TradingState | None = TradingState.HALTED,
        on_foreign_execution: TradingState | None = TradingState.HALTED, probe_after: float = 30.0,
        probe_timeout: float = 10.0, now: Callable[[], int] = time.time_ns,
    ) -> None:
        self.name, self.ib = name, ib
        self.now = now  # the run's clock (Clock.now): what the venue reports is stamped with
        self.host, self.port, self.client_id = host, port, client_id
        self.contracts = contracts
        self.orders = orders  # the kernel's orders by id, read on the loop between inputs
        self.account = account
        self.market_data = market_data
        self.backoff_max, self.connect_timeout = backoff_max, connect_timeout
        self.on_rejected_execution = on_rejected_execution  # where trading goes when an execution is unusable
        self.on_foreign_execution = on_foreign_execution  # ... when IB executed an order foxhunt did not send
        # liveness: after probe_after seconds without a word from IB, a request must be answered within
        # probe_timeout, else the connection is dropped and made again (and reconciled)
        self.probe_after, self.probe_timeout = probe_after, probe_timeout
        self._heard = time.monotonic()
        self.qualified: dict[str, Contract] = {}
        self.trades: dict[str, Trade] = {}  # foxhunt order id -> ib_async's Trade: working ones, recent done ones
        self.exec_ids = RecentSet()  # executions published in this process: not published again (the kernel books once)
        self.accepted = RecentSet()  # orders IB has acknowledged
        # orders whose last event is published: their Trade is forgotten as the kernel forgets closed orders
        # (whether an order is done is the kernel's to say: `_is_open`)
        self.closed = DoneOrders(self.trades)
        self.ends_published = RecentSet()  # orders whose cancel or reject is published: IB repeats a status
        self.commission_due = RecentSet()  # executions published before their commission report came
        # ... of them, those a reconciliation published: where ib_async holds no Trade for the order (filled
        # before this connection) it takes the commission report into the Fill but emits no event, so each
        # is looked for after every batch of data, until its report is published one way or the other
        self.commission_untold: dict[str, str] = {}  # execution id -> foxhunt order id
        self.replacing: set[str] = set()  # modifications sent, waiting for IB's openOrder that confirms them
        self.reports = Reports()
        self._lost = asyncio.Event()
        self.connected = False
        ib.orderStatusEvent += self._on_status
        ib.openOrderEvent += self._on_open_order
        ib.commissionReportEvent += self._on_commission
        ib.errorEvent += self._on_error
        ib.pendingTickersEvent += self._on_tickers
        ib.disconnectedEvent += self._on_disconnected
        ib.updateEvent += self._on_data
        # ib_async emits no event for a live execution of an order it holds no Trade for (wrapper.execDetails:
        # another client's, a manual one, a ghost): its handler is wrapped, so that none passes in silence
        ib.wrapper.execDetails = self._exec_details_of(ib.wrapper.execDetails)
        # ... and its decoder logs what it cannot read and drops it: each such message is journaled instead
        ib.client.decoder.interpret = self._interpret_of(ib.client.decoder)

    # --- the venue port ------------------------------------------------------------------------------

    def send(self, cmd: SubmitOrder | CancelOrder | ReplaceOrder) -> list[Input]:
        match cmd:
            case SubmitOrder():
                trade = self.ib.placeOrder(self.qualified[cmd.symbol], parsing.order(cmd, self.account))
                self.trades[cmd.order_id] = trade
            case CancelOrder() | ReplaceOrder() if cmd.order_id not in self.trades:
                # an order of an earlier run that IB did not report at reconciliation
                self._emit(OrderCancelRejected(**self._stamps(), order_id=cmd.order_id, symbol=cmd.symbol,
                                               reason="IB did not report this order when foxhunt connected",
                                               replace=type(cmd) is ReplaceOrder))
            case CancelOrder():
                self.ib.cancelOrder(self.trades[cmd.order_id].order)
            case ReplaceOrder():
                trade = self.trades[cmd.order_id]
                if cmd.quantity is not None:
                    trade.order.totalQuantity = float(format_fixed(cmd.quantity))
                if cmd.price is not None:
                    trade.order.lmtPrice = float(format_fixed(cmd.price))
                if cmd.trigger_price is not None:
                    trade.order.auxPrice = float(format_fixed(cmd.trigger_price))
                self.replacing.add(cmd.order_id)
                self.ib.placeOrder(trade.contract, trade.order)  # same orderId: a modification
        return []

    # --- connection ----------------------------------------------------------------------------------

    async def run(
        self, bus: MemoryObjectSendStream[Input], *, task_status: anyio.abc.TaskStatus = anyio.TASK_STATUS_IGNORED
    ) -> None:
        task_status.started()
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self.reports.pump, bus)
                await self._stay_connected()
        finally:
            self.ib.disconnect()

    async def _stay_connected(self) -> None:
        delay = 0.5
        while True:
            try:
                await self.ib.connectAsync(self.host, self.port, clientId=self.client_id, timeout=self.connect_timeout,
                                           account=self.account)
            except (OSError, TimeoutError, ConnectionError) as e:
                self._emit(VenueSessionEvent(**self._stamps(), venue=self.name, event="connect_failed",
                                             detail=f"{type(e).__name__}: {e}; next try in {delay:.1f} s"))
                await anyio.sleep(delay)
                delay = min(delay * 2, self.backoff_max)
                continue
            delay = 0.5
            self._lost.clear()
            self._heard = time.monotonic()
            await self._after_connect()
            await self._watch()
            self.connected = False

    async def _watch(self) -> None:
        """Until the connection is lost: once IB has said nothing for `probe_after` seconds, ask it the time;
        no answer within `probe_timeout` and the connection is dropped (a deaf connection must not pass for
        a live one: orders would go out and their answers never be heard)."""
        while not self._lost.is_set():
            with anyio.move_on_after(max(self._heard + self.probe_after - time.monotonic(), 0.01)):
                await self._lost.wait()
                return
            if time.monotonic() - self._heard < self.probe_after:
                continue
            with anyio.move_on_after(self.probe_timeout) as probe:
                await self.ib.reqCurrentTimeAsync()
            if probe.cancelled_caught and not self._lost.is_set():
                self._drop(f"no answer to a probe within {self.probe_timeout} s, after {self.probe_after} s of silence")
                await self._lost.wait()
                return
            self._heard = time.monotonic()

    def _on_data(self) -> None:
        """After ib_async has taken in what arrived: a message announcing more than MAX_MESSAGE_BYTES is
        garbage that ib_async would wait for without end. Its buffer is its own (`client._data`), read here
        only to see the announced length; an ib_async without it leaves the probe to find a deaf connection."""
        if self.commission_untold:
            self._untold_commissions()
        pending = getattr(self.ib.client, "_data", b"")
        if len(pending) >= 4 and int.from_bytes(pending[:4], "big") > MAX_MESSAGE_BYTES:
            self._drop(f"a message of {int.from_bytes(pending[:4], 'big')} bytes announced "
                       f"(at most {MAX_MESSAGE_BYTES} taken)")

    def _drop(self, reason: str) -> None:
        """Give up a connection that cannot be trusted to deliver: journaled, then disconnected, which
        publishes VenueDisconnected and has `run` connect again and reconcile."""
        log.error("ib_connection_dropped", reason=reason)
        self._emit(VenueSessionEvent(**self._stamps(), venue=self.name, event="connection_dropped", detail=reason))
        self.ib.disconnect()

    async def _after_connect(self) -> None:
        self._emit(VenueSessionEvent(**self._stamps(), venue=self.name, event="logon",
                                     detail=f"server version {self.ib.client.serverVersion()}"))
        await self._qualify()
        for symbol in self.market_data:
            self.ib.reqMktData(self.qualified[symbol])
        self._reconcile()
        self.connected = True
        self._emit(VenueConnected(**self._stamps(), venue=self.name))

    async def _qualify(self) -> None:
        missing = [s for s in self.contracts if s not in self.qualified]
        if not missing:
            return
        wanted = [parsing.contract(c.instrument, c.sec_type, c.exchange, c.expiry)
                  for c in (self.contracts[s] for s in missing)]
        for symbol, result in zip(missing, await self.ib.qualifyContractsAsync(*wanted)):
            if result is None or not getattr(result, "conId", 0):
                c = self.contracts[symbol]
                raise ConfigError(f"ib.contracts.{symbol}: IB does not know it as {c.sec_type} {c.exchange} {c.expiry}"
                                  f"{' (see the error above)' if result is None else ''}".replace("  ", " "))
            self.qualified[symbol] = result

    def _reconcile(self) -> None:
        """After a (re)connection: ib_async has just fetched today's executions and the open orders. Record
        the fills foxhunt missed (found by the order id in orderRef) and close the orders IB canceled."""
        fills: dict[str, list[Fill]] = {}
        known = self.orders()
        self.commission_untold.clear()  # this connection reports every execution of the day again
        for fill in self.ib.fills():
            if fill.execution.orderRef in known:
                fills.setdefault(fill.execution.orderRef, []).append(fill)
            else:
                self._foreign(fill)
        trades = {t.order.orderRef: t for t in self.ib.trades() if t.order.orderRef}
        found = []
        for order_id, order in list(self.orders().items()):
            if not order.is_open:
                continue
            for fill in fills.get(order_id, []):
                self._fill(order_id, fill)
                if fill.execution.execId in self.commission_due:
                    self.commission_untold[fill.execution.execId] = order_id
            trade = trades.get(order_id)
            if trade is not None:
                self.trades[order_id] = trade
                if (trade.orderStatus.status in parsing.CANCELED_STATUSES and self._is_open(order_id)
                        and order_id not in self.ends_published):
                    self.closed.add(order_id)
                    self.ends_published.add(order_id)
                    # executions are booked one by one above, with their ids: IB says only how it ended
                    for report in reconcile(order, Seen("canceled"), self.now(), where="IB"):
                        self._emit(report)
            state = "done" if order_id in self.closed else "working"
            found.append(f"{order_id}: {len(fills.get(order_id, []))} execution(s), {state}")
        self._emit(VenueSessionEvent(**self._stamps(), venue=self.name, event="reconciled",
                                     detail="; ".join(found) or "no working orders"))

    # --- ib_async events (on the loop) ---------------------------------------------------------------

    def _on_status(self, trade: Trade) -> None:
        order_id = self._order_id(trade)
        self._heard = time.monotonic()
        if order_id is not None:
            self._guarded("orderStatus", trade.orderStatus, lambda: self._status(order_id, trade))
        # ib_async formats the whole trade, log included, for every status it takes: kept short, a status costs
        # the same however many came before (20,000 for one order took minutes when the log grew)
        del trade.log[:-LOG_KEPT]

    def _status(self, order_id: str, trade: Trade) -> None:
        status = trade.orderStatus.status
        symbol = self.orders()[order_id].symbol
        last = trade.log[-1] if trade.log else None
        if status in parsing.ACCEPTED_STATUSES and order_id not in self.accepted:
            self.accepted.add(order_id)
            self._emit(OrderAccepted(**self._stamps(), order_id=order_id, symbol=symbol,
                                     venue_order_id=str(trade.order.permId or trade.order.orderId)))
        elif (status in parsing.CANCELED_STATUSES | {"Inactive"} and self._is_open(order_id)
              and order_id not in self.ends_published):
            code = last.errorCode if last is not None and last.status == status else 0
            meaning = parsing.order_error(code, order_id in self.accepted, order_id in self.replacing) if code else ""
            if meaning not in ("", "rejected", "canceled"):
                # ib_async took an error for the order's end; IB did not say so, and the order works on. Its
                # status is put back, so that IB's own next status (a cancel included) reads as a change.
                trade.orderStatus.status = trade.log[-2].status if len(trade.log) > 1 else "PendingSubmit"
                return
            reason = f"IB {code}: {last.message}" if code and last is not None else "canceled at IB"
            self.closed.add(order_id)
            self.ends_published.add(order_id)
            if meaning == "rejected" and order_id not in self.accepted:  # never worked: rejected
                self._emit(OrderRejected(**self._stamps(), order_id=order_id, symbol=symbol, reason=reason))
            else:
                self._emit(OrderCanceled(**self._stamps(), order_id=order_id, symbol=symbol, reason=reason))

    def _on_open_order(self, trade: Trade) -> None:
        """IB's openOrder after a modification carries the order as IB now works it."""
        order_id = self._order_id(trade)
        if order_id is None or order_id not in self.replacing or not self._is_open(order_id):
            return
        self.replacing.discard(order_id)
        o = trade.order
        kind = self.orders()[order_id].order_type.value
        self._emit(OrderReplaced(**self._stamps(), order_id=order_id, symbol=self.orders()[order_id].symbol,
                                 quantity=parsing.fixed(o.totalQuantity),
                                 price=parsing.fixed(o.lmtPrice) if kind == "LIMIT" else None,
                                 trigger_price=parsing.fixed(o.auxPrice) if kind == "STOP" else None))

    def _on_commission(self, trade: Trade, fill: Fill, report) -> None:
        """IB's commission report, which follows each execution: the fill is published now, with it; one
        published before its commission came (a reconciliation's) has it published on its own."""
        self._heard = time.monotonic()
        order_id = self._order_id(trade)
        if order_id is None:
            self._foreign(fill)
        elif fill.execution.execId in self.commission_due:
            self._commission(order_id, fill, report)
        else:
            self._fill(order_id, fill)

    def _commission(self, order_id: str, fill: Fill, report) -> None:
        """The commission of an execution published before it: published on its own, once."""
        self.commission_due.discard(fill.execution.execId)
        self.commission_untold.pop(fill.execution.execId, None)
        self._guarded("commissionReport", report, lambda: self._emit(CommissionReported(
            **self._stamps(), order_id=order_id, symbol=self.orders()[order_id].symbol,
            trade_id=fill.execution.execId, commission=parsing.fixed(report.commission))))

    def _untold_commissions(self) -> None:
        """The commission reports ib_async took in without an event (see `commission_untold`): published as
        `_on_commission` publishes the others."""
        fills = self.ib.wrapper.fills
        for exec_id, order_id in list(self.commission_untold.items()):
            fill = fills.get(exec_id)
            if fill is not None and fill.commissionReport.execId:
                del self.commission_untold[exec_id]
                self._commission(order_id, fill, fill.commissionReport)

    def _fill(self, order_id: str, fill: Fill) -> None:
        execution = fill.execution
        if execution.execId in self.exec_ids:
            return
        self.exec_ids.add(execution.execId)
        if not fill.commissionReport.execId:  # its commission report is still to come
            self.commission_due.add(execution.execId)
        self._guarded("execDetails", execution, lambda: self._emit(self._fill_event(order_id, fill)))

    def _interpret_of(self, decoder) -> Callable[[list[str]], None]:
        """ib_async's `Decoder.interpret`, with every message it cannot read journaled as refused, with its
        raw fields: an order status, an execution, a commission or an open order tightens trading as
        `on_rejected_execution` says (parsing.CARRIES_MONEY), anything else leaves it as it is."""
        def guarded(fields: list[str]) -> None:
            try:
                msg_id = int(fields[0])
                handler = decoder.handlers[msg_id]
            except (ValueError, IndexError, KeyError):
                self._unreadable(fields, "no message ib_async knows")
                return
            why = parsing.unreadable_order_status(fields) if msg_id == 3 else ""
            if why:
                self._unreadable(fields, why, msg_id)
                return
            try:
                handler(fields)
            except Exception as e:  # the decoder's, on fields it cannot read (ib_async's events catch the listeners')
                self._unreadable(fields, f"{type(e).__name__}: {e}", msg_id)

        return guarded

    def _unreadable(self, fields: list[str], why: str, msg_id: int = 0) -> None:
        kind = parsing.message_name(fields)
        raw = "|".join(fields)[:2000]
        reason = f"ib_async cannot read it: {why}"
        log.error("ib_message_rejected", kind=kind, reason=reason, raw=raw)
        self._emit(VenueMessageRejected(**self._stamps(), venue=self.name, msg_type=kind, reason=reason, raw=raw,
                                        tighten=self.on_rejected_execution if msg_id in parsing.CARRIES_MONEY
                                        else None))

    def _exec_details_of(self, handle: Callable[[int, Contract, Execution], None]
                         ) -> Callable[[int, Contract, Execution], None]:
        def exec_details(req_id: int, contract: Contract, execution: Execution) -> None:
            live = req_id not in self.ib.wrapper._futures  # as ib_async tells a live one from an answer
            handle(req_id, contract, execution)
            fill = self.ib.wrapper.fills.get(execution.execId)
            if live and fill is not None and execution.orderRef not in self.orders():
                self._foreign(fill)

        return exec_details

    def _foreign(self, fill: Fill) -> None:
        """An execution IB reports for an order foxhunt did not send (another client's, a manual one, one it
        forgot long ago, a broker's ghost): money moved that the kernel's positions know nothing of. Journaled
        as refused, not booked, and trading tightens as `on_foreign_execution` says."""
        execution = fill.execution
        if execution.execId in self.exec_ids:
            return
        self.exec_ids.add(execution.execId)
        reason = (f"execution {execution.execId} of an order foxhunt did not send (orderRef {execution.orderRef!r},"
                  f" IB order {execution.orderId}): not booked")
        log.error("ib_foreign_execution", reason=reason)
        self._emit(VenueMessageRejected(**self._stamps(), venue=self.name, msg_type="execDetails", reason=reason,
                                        raw=repr(execution)[:2000], tighten=self.on_foreign_execution))

    def _fill_event(self, order_id: str, fill: Fill) -> OrderFilled | OrderPartiallyFilled:
        """An execution of a known order, whatever the kernel believes of the order: the kernel books it
        once (by its execution id), or refuses it, and says so."""
        execution = fill.execution
        order = self.orders()[order_id]
        qty = parsing.fixed(execution.shares)
        cum = parsing.fixed(execution.cumQty)
        # from IB's cumulative quantity: fills emitted just before may not have reached the kernel yet
        leaves = max(order.quantity - cum, 0)
        cls = OrderFilled if leaves == 0 else OrderPartiallyFilled
        commission = parsing.fixed(fill.commissionReport.commission) if fill.commissionReport.execId else 0
        event = cls(**self._stamps(), order_id=order_id, symbol=order.symbol, side=parsing.SIDES[execution.side],
                    trade_id=execution.execId, last_qty=qty, last_price=parsing.fixed(execution.price),
                    leaves_qty=leaves, commission=commission, cum_qty=cum)
        if leaves == 0:
            self.closed.add(order_id)
        return event

    def _guarded(self, kind: str, message: object, handle: Callable[[], None]) -> None:
        """Handle one of IB's execution or order status messages; one that cannot be read is journaled as
        refused with its raw fields (`message`, formatted only then: a status comes often), and trading
        tightens as the policy says (ib_async would swallow the exception and log it only)."""
        try:
            handle()
        except (ValueError, ArithmeticError, KeyError, TypeError, AttributeError) as e:
            raw = repr(message)
            reason = f"foxhunt cannot read it: {type(e).__name__}: {e}"
            log.error("ib_message_rejected", kind=kind, reason=reason, raw=raw[:2000])
            self._emit(VenueMessageRejected(**self._stamps(), venue=self.name, msg_type=kind, reason=reason,
                                            raw=raw[:2000], tighten=self.on_rejected_execution))

    def _on_error(self, req_id: int, code: int, text: str, contract: Contract | None) -> None:
        self._heard = time.monotonic()
        kind = parsing.error_kind(code)
        order_id = self._order_id_of(req_id) if req_id > 0 else None
        if order_id is not None:
            self._order_error(order_id, code, text)
        elif kind == "connection":
            self._emit(VenueSessionEvent(**self._stamps(), venue=self.name, event=f"error_{code}", detail=text))
            if code == parsing.CONNECTION_LOST:
                self.connected = False
                self._emit(VenueDisconnected(**self._stamps(), venue=self.name, reason=f"IB {code}: {text}"))
            elif code in (parsing.RESTORED_DATA_LOST, parsing.RESTORED_DATA_KEPT):
                self._reconcile()
                self.connected = True
                self._emit(VenueConnected(**self._stamps(), venue=self.name))
        elif kind == "warning":
            log.info("ib_warning", code=code, text=text)
        else:
            log.warning("ib_error", code=code, text=text, req_id=req_id)

    def _order_error(self, order_id: str, code: int, text: str) -> None:
        """An error about one of our orders, by what its code means (parsing.order_error). An end (a reject,
        a cancel) arrives as the order's status, handled in `_status`; a refused cancel or modification is a
        cancel reject, and the order goes on; any other error is journaled for the record and changes
        nothing."""
        symbol = self.orders()[order_id].symbol
        meaning = parsing.order_error(code, order_id in self.accepted, order_id in self.replacing)
        if meaning in ("cancel_refused", "modify_refused"):
            self.replacing.discard(order_id)
            self._emit(OrderCancelRejected(**self._stamps(), order_id=order_id, symbol=symbol,
                                           reason=f"IB {code}: {text}", replace=meaning == "modify_refused"))
        elif meaning == "none":
            self._emit(VenueSessionEvent(**self._stamps(), venue=self.name, event=f"order_error_{code}",
                                         detail=f"{order_id}: {text}"))

    def _on_tickers(self, tickers: set[Ticker]) -> None:
        self._heard = time.monotonic()
        now = self.now()
        for ticker in tickers:
            symbol = self._symbol_of(ticker.contract)
            if symbol is None:
                continue
            for tick in ticker.ticks:  # trades printed since the last batch: tick type 4 (68 delayed), last
                if tick.tickType in (4, 68) and tick.price > 0 and tick.size > 0:
                    self._emit(TradeTick(ts_event=now, ts_init=now, symbol=symbol, price=parsing.fixed(tick.price),
                                         size=parsing.fixed(tick.size)))
            if not ticker.hasBidAsk():
                continue
            try:
                quote = QuoteTick(ts_event=now, ts_init=now, symbol=symbol, bid=parsing.fixed(ticker.bid),
                                  ask=parsing.fixed(ticker.ask), bid_size=parsing.fixed(ticker.bidSize or 0),
                                  ask_size=parsing.fixed(ticker.askSize or 0))
            except ValueError as e:
                self._emit(VenueMessageIgnored(ts_event=now, ts_init=now, venue=self.name,
                                               reason=f"unusable quote for {symbol}: {e}", raw=repr(ticker)[:500]))
                continue
            self._emit(quote)

    # ib_async clears a ticker's ticks before each pendingTickersEvent batch, so each trade is seen once

    def _on_disconnected(self) -> None:
        self.connected = False
        self._emit(VenueDisconnected(**self._stamps(), venue=self.name, reason="connection to IB lost"))
        self._lost.set()

    # --- helpers -------------------------------------------------------------------------------------

    def _emit(self, msg: Input) -> None:
        self.reports.emit(msg)  # onto the bus now if it has room, else in order behind what waits

    def _stamps(self) -> dict[str, int]:
        now = self.now()
        return {"ts_event": now, "ts_init": now}

    def _order_id(self, trade: Trade) -> str | None:
        ref = trade.order.orderRef
        if ref and ref in self.orders():
            if ref not in self.closed:
                self.trades.setdefault(ref, trade)
            return ref
        return None

    def _order_id_of(self, ib_order_id: int) -> str | None:
        return next((oid for oid, t in self.trades.items() if t.order.orderId == ib_order_id), None)

    def _is_open(self, order_id: str) -> bool:
        return self.orders()[order_id].is_open

    def _symbol_of(self, contract: Contract) -> str | None:
        return next((s for s, c in self.qualified.items() if c.conId == contract.conId), None)


