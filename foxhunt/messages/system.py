"""System events: runs, venues, timers, operators, trading state, and the kernel's bookkeeping."""

from __future__ import annotations

from foxhunt.messages.base import Derived, Enum, Input


class TradingState(Enum):
    ACTIVE = "ACTIVE"
    REDUCING = "REDUCING"  # only orders that reduce exposure
    HALTED = "HALTED"  # nothing new; cancels still pass


class RunStarted(Input, frozen=True, kw_only=True):
    """First input of every run: what the kernel is seeded and configured with, and where it ran."""

    run_id: int
    seed: int
    config_digest: str
    config: bytes  # the full configuration as canonical JSON, so a replay can rebuild the kernel
    fingerprint: dict[str, str]
    clock: str
    recorded_by: str = "run"  # "run": traded by the daemon; "ingest": market data loaded, nothing derived


class RunStopped(Input, frozen=True, kw_only=True):
    reason: str


class VenueConnected(Input, frozen=True, kw_only=True):
    """The venue's session is up and its working orders reconciled: the kernel may send to it again.
    `cancel_working`: the venue's policy (FIX `cancel_on_reconnect`) asks the kernel to cancel every
    working order now, each a journaled CancelOrder through the pre-trade gate."""

    venue: str
    cancel_working: bool = False


class VenueDisconnected(Input, frozen=True, kw_only=True):
    venue: str
    reason: str


class VenueSessionEvent(Input, frozen=True, kw_only=True):
    """Something the venue's session did, recorded for the audit trail: logon, reconciled, sequence_reset,
    resend_request, reject (session level), logout_received, send_failed."""

    venue: str
    event: str
    detail: str = ""


class VenueMessageIgnored(Input, frozen=True, kw_only=True):
    """A message from a venue that foxhunt could not use (malformed, an order it never sent, a report for
    an order already done), kept with its raw text instead of dropped."""

    venue: str
    reason: str
    raw: str


class VenueMessageRejected(Input, frozen=True, kw_only=True):
    """A message from the venue that could not be used and may have carried money: one the FIX session
    layer refused (foxhunt's quickfix answered it with a Reject(3), so under FIX it counts as processed and
    is never sent again), an execution or status report the adapter could not parse, or an execution of an
    order foxhunt did not send (the venue's `on_foreign_execution` says where trading goes). Kept with its raw
    text and the reason. `msg_type`: the venue's message type (FIX MsgType(35), or the ib_async event).
    `tighten`: where the venue's policy takes trading when it was an execution report (an execution may have
    vanished: `on_rejected_execution`), None when it leaves trading as it is."""

    venue: str
    msg_type: str
    reason: str
    raw: str
    tighten: TradingState | None = None


class TimerFired(Input, frozen=True, kw_only=True):
    name: str


class AdminCommand(Input, frozen=True, kw_only=True):
    """An operator's command; the kernel applies it where it appears in the stream, live and in replay."""

    command: str
    args: list[str] = []
    operator_uid: int = -1
    operator: str = ""
    reason: str = ""


class ConfigReloaded(Input, frozen=True, kw_only=True):
    """The daemon re-read its configuration file (SIGHUP). `risk` is the whole new `[risk]` section as JSON,
    applied by the kernel where this input stands, live and in replay; `changed` names the risk limits it
    changes; `needs_restart` names changed settings that only a restart applies (they were not applied)."""

    source: str
    risk: bytes
    changed: list[str] = []
    needs_restart: list[str] = []


class StrategyStateChanged(Derived, frozen=True, kw_only=True):
    """A strategy paused (it sees no market data or timers and so asks for nothing) or resumed."""

    strategy_id: str
    paused: bool
    cause: str


class JournalDegraded(Input, frozen=True, kw_only=True):
    """The journal stopped taking events (writes failing, or one write stalled past its bound). Trading
    halts: nothing may reach a venue that the journal cannot record. Journaled once the journal is back."""

    reason: str


class JournalRecovered(Input, frozen=True, kw_only=True):
    """The journal takes events again, after an outage of `outage_ns`."""

    outage_ns: int


class ClockHeld(Input, frozen=True, kw_only=True):
    """The system clock stepped back by `step_ns` (NTP, an operator): foxhunt's live clock does not follow
    it, and runs on from where it was at the rate of the monotonic clock until the system clock catches
    up (runtime/clock.py). Recorded once per step; the kernel changes nothing for it."""

    step_ns: int


class FeedGap(Input, frozen=True, kw_only=True):
    """Inputs that a feed could not deliver (skipped bad rows, lost packets), recorded instead of hidden."""

    source: str
    reason: str
    count: int = 1


class TradingStateChanged(Derived, frozen=True, kw_only=True):
    state: TradingState
    previous: TradingState
    cause: str


class InstrumentStateChanged(Derived, frozen=True, kw_only=True):
    """An instrument paused (no new orders) or resumed by a breaker, with the values behind it."""

    symbol: str
    paused: bool
    cause: str


class RiskLimitChanged(Derived, frozen=True, kw_only=True):
    """An operator changed a risk limit; `name` is its path in `[risk]` (e.g. instruments.EURUSD.collar_bps)."""

    name: str
    previous: str
    value: str
    cause: str


class CommandRejected(Derived, frozen=True, kw_only=True):
    """A journaled operator command the kernel could not apply, and why (it changed nothing)."""

    command: str
    reason: str


class MarketDataFlagged(Derived, frozen=True, kw_only=True):
    """Market data that was recorded but not traded on, and why (crossed or locked quote, ...)."""

    symbol: str
    reason: str


class PositionChanged(Derived, frozen=True, kw_only=True):
    """The portfolio after a fill: signed quantity, cost basis and money, all in nanos."""

    symbol: str
    quantity: int
    avg_price: int
    realized_pnl: int
    commissions: int
    cash: int
