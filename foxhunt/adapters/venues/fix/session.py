"""The quickfix side of the FIX venue: settings, the engine, its callbacks, and the sender thread.

quickfix calls `Application` methods on its own C++ thread, a message is valid only during the call, and
a Python exception escaping a callback ends the process. So every callback copies the raw message as a
string, hands it to the event loop through `call_soon_threadsafe` (our own outgoing orders are only
kept, for matching a session reject to its order; of our own session messages, the few the journal keeps
are handed over too: resend requests, sequence resets, logouts and rejects), and catches everything,
logging it with the raw message; on the loop, the venue's `receive` turns each delivery into inputs in that
same callback.

Sending (`Session.sendToTarget`: quickfix writes its message store, unsynced, and hands the bytes to its
non-blocking socket, the GIL released) happens on the event loop when the message rate allows it and
nothing waits ahead, which costs the loop tens of microseconds and saves the order a thread hand-off; a
message the rate limit holds back goes to a sender thread of our own that waits it out, and everything
after it queues behind it, in order: the event loop never waits for the wire or the limit. `stop()`
stops the engine and the sender before the loop closes.
"""

from __future__ import annotations

import asyncio
import queue
import re
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path

import quickfix as fix
import structlog

from foxhunt.adapters.venues.fix import parsing

log = structlog.get_logger("foxhunt.fix")

# what the engine's thread hands over: (what happened, raw message or session text); the venue stamps it
# with the run's clock when it reaches the loop
Inbound = tuple[str, str]
RECEIVED_LOOKBACK = 1 << 20  # bytes of quickfix's message log searched for a message its session layer refused
SENT_REMEMBERED = 100_000  # our last messages kept to match a session reject's RefSeqNum(45) to an order
# The GIL switch interval from the first engine's start on (CPython's default is 5 ms). quickfix's thread needs the
# GIL for every callback, and a thread waiting for it asks the holder to let go only once a whole
# interval passes with no thread taking it; a busy event loop takes it again after each wait for I/O,
# which restarts that clock. So with the default, callbacks starved for seconds while a uvloop loop did
# Python work in stretches of 2 ms (measured: an order's acknowledgement 0.72 s at p50, 2.9 s at p90;
# with this interval 2.3 ms and 3.0 ms; docs/benchmarks.md, FIX).
GIL_SWITCH_S = 0.0005
_POSS_DUP = f"{parsing.SOH}43=Y{parsing.SOH}"  # PossDupFlag(43)=Y: quickfix is resending it
# what foxhunt's own session layer sends that the journal keeps: a ResendRequest(2), a SequenceReset(4), a
# Logout(5) with its reason (a logon quickfix refused, a sequence number too low), and a Reject(3) of a
# counterparty's message, which under FIX counts as processed and is never sent again (FixVenue._sent_admin)
_JOURNALED_ADMIN = frozenset({"2", "3", "4", "5"})
_ORDER_TYPES = tuple(f"{parsing.SOH}35={t}{parsing.SOH}" for t in "DFG")  # NewOrderSingle, cancel, replace
# Password(554) and NewPassword(925): the secrets a Logon carries. quickfix writes every message it sends,
# our Logon included, to its message log and its message store, and has no setting that leaves a field out;
# a log of our own (a Python quickfix.Log) would cost a call into Python for every message. So foxhunt
# overwrites their values with asterisks, in place (the files keep their length, quickfix keeps appending),
# once per logon, in the end of each file, as soon as the event loop hears that the counterparty answered
# it or the attempt ended (FixVenue._translate); and in every file of the session's log and store when the
# engine starts (what a killed process left) and stops. Nothing per message.
_SECRET = re.compile(rb"\x01(?:554|925)=([^\x01\n]*)")
REDACT_TAIL = 1 << 20  # bytes at the end of each file searched at a logon: the Logon was written last
_CHUNK = 8 << 20  # read at a time, each chunk overlapping the one before by more than any field's length
_OVERLAP = 4096


def settings_text(*, sender: str, target: str, host: str, port: int, heartbeat_s: int, reconnect_s: int,
                  reset_on_logon: bool, store_dir: Path, log_dir: Path, data_dictionary: Path) -> str:
    """A quickfix initiator settings file for one FIX 4.4 session. The file store keeps sequence numbers
    and sent messages across restarts, so a restart continues the sequence and can answer resends."""
    return "\n".join([
        "[DEFAULT]",
        "ConnectionType=initiator",
        f"FileStorePath={store_dir}",
        f"FileLogPath={log_dir}",
        "NonStopSession=Y",
        f"HeartBtInt={heartbeat_s}",
        f"ReconnectInterval={reconnect_s}",
        "UseDataDictionary=Y",
        f"DataDictionary={data_dictionary}",
        "ValidateUserDefinedFields=N",
        "AllowUnknownMsgFields=Y",
        f"ResetOnLogon={'Y' if reset_on_logon else 'N'}",
        "PersistMessages=Y",
        "SocketNodelay=Y",  # no Nagle: an order goes out at once, not with the next packet
        "",
        "[SESSION]",
        "BeginString=FIX.4.4",
        f"SenderCompID={sender}",
        f"TargetCompID={target}",
        f"SocketConnectHost={host}",
        f"SocketConnectPort={port}",
        "",
    ])


def redact(path: Path, tail_bytes: int | None = None) -> int:
    """Overwrite every Password(554) and NewPassword(925) value in `path` (its last `tail_bytes`, or all of
    it) with asterisks of the same length, in place; return how many it overwrote."""
    done = 0
    with path.open("r+b") as f:
        size = f.seek(0, 2)
        at = 0 if tail_bytes is None else max(0, size - tail_bytes)
        while True:
            f.seek(at)
            chunk = f.read(min(_CHUNK, size - at))
            last = at + len(chunk) >= size
            for found in _SECRET.finditer(chunk):
                start, end = found.span(1)
                if end == len(chunk) and not last:
                    continue  # cut by the chunk's end: the next chunk holds it whole
                if chunk[start:end].strip(b"*"):  # at the file's end too: a line a killed process left half written
                    f.seek(at + start)
                    f.write(b"*" * (end - start))
                    done += 1
            if last:
                return done
            at += len(chunk) - _OVERLAP


def bundled_fix44() -> Path:
    """The FIX 4.4 data dictionary that the quickfix package installs beside the interpreter."""
    import sys

    return Path(sys.prefix) / "share" / "quickfix" / "FIX44.xml"


class _Application(fix.Application):
    """Runs on quickfix's thread: copy, catch, hand off. Nothing else."""

    def __init__(self, deliver: Callable[[Inbound], None], sent: deque[str], logon: Sequence[tuple[int, str]]) -> None:
        super().__init__()
        self.deliver = deliver
        self.sent = sent
        self.logon = logon

    def _hand(self, kind: str, text: str) -> None:
        try:
            self.deliver((kind, text))
        except BaseException:  # noqa: BLE001 - escaping here would end the process (see module docstring)
            log.exception("fix_handoff_failed", kind=kind, raw=text.replace(parsing.SOH, "|"))

    def onCreate(self, session_id) -> None:  # noqa: N802 - quickfix's names
        pass

    def onLogon(self, session_id) -> None:  # noqa: N802
        self._hand("logon", _text(session_id))

    def onLogout(self, session_id) -> None:  # noqa: N802
        self._hand("logout", _text(session_id))

    def toAdmin(self, message, session_id) -> None:  # noqa: N802
        try:
            msg_type = message.getHeader().getField(parsing.MSG_TYPE)
            if msg_type == "A":  # our Logon: credentials and the like
                for tag, value in self.logon:
                    message.setField(tag, value)
            elif msg_type in _JOURNALED_ADMIN:  # rare, and each says something the journal must keep
                self._hand("sent_admin", _raw(message))
        except BaseException:  # noqa: BLE001 - a callback must not raise; the counterparty will refuse the logon
            log.exception("fix_to_admin_failed")

    def fromAdmin(self, message, session_id) -> None:  # noqa: N802
        self._hand("admin", _raw(message))

    def toApp(self, message, session_id) -> None:  # noqa: N802
        raw = _raw(message)
        if _POSS_DUP in raw and any(t in raw for t in _ORDER_TYPES):
            # the counterparty asked for a resend: an order or cancel replayed late could trade twice or on
            # stale terms, so it is not sent again (quickfix sends a gap fill instead); the status of every
            # working order is reconciled at logon
            self._hand("not_resent", raw)
            raise fix.DoNotSend()  # the one exception quickfix expects from toApp
        # kept, not handed to the loop: only a session reject needs it (FixEngine.sent_message), and the
        # hand-off would wake the loop once per order while the order is on the wire
        self.sent.append(raw)  # deque.append: atomic, whichever thread sends

    def fromApp(self, message, session_id) -> None:  # noqa: N802
        self._hand("app", _raw(message))


def _build(msg_type: str, body: list[tuple[int, str]]) -> fix.Message:
    """A quickfix Message of this type and body, parsed from text in one call: setting its fields one by
    one cost three times as much (30 against 9 us). quickfix fills the header and computes BodyLength and
    CheckSum when it sends. A value holding the FIX delimiter would split into other fields: refused."""
    soh = parsing.SOH
    fields = "".join([f"{tag}={value}{soh}" for tag, value in body])
    if fields.count(soh) != len(body):
        raise ValueError(f"a field value holds the FIX delimiter: {body!r}")
    return fix.Message(f"8=FIX.4.4{soh}9=0{soh}35={msg_type}{soh}{fields}10=000{soh}", False)


def _raw(message) -> str:
    try:
        return message.toString()
    except BaseException as e:  # noqa: BLE001 - a callback must not raise
        return f"<unreadable message: {e}>"


def _text(session_id) -> str:
    try:
        return session_id.toString()
    except BaseException as e:  # noqa: BLE001
        return f"<session: {e}>"


class FixEngine:
    """One initiator session: started and stopped from the event loop, delivering to `receive` on it."""

    def __init__(self, settings_path: Path, sender: str, target: str, max_per_second: float,
                 logon: Sequence[tuple[int, str]] = ()) -> None:
        """`logon`: fields added to every Logon(A) foxhunt sends (Username, Password, a counterparty's own)."""
        self.settings_path = settings_path
        self.logon = logon
        self.session_id = fix.SessionID("FIX.4.4", sender, target)
        self.target = target
        self.log_dir: Path | None = None  # quickfix's FileLogPath, read from the settings at start()
        self.store_dir: Path | None = None  # its FileStorePath
        self.max_per_second = max_per_second
        self.sent: deque[str] = deque(maxlen=SENT_REMEMBERED)  # raw, oldest first
        self._receive: Callable[[Inbound], None] | None = None
        self._outbox: queue.SimpleQueue[tuple[str, list[tuple[int, str]]] | None] = queue.SimpleQueue()
        self._initiator = None
        self._sender: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        # the message rate limit, shared by the loop and the sender thread: the earliest time the next
        # message may go, and how many messages wait in the sender's queue
        self._pace = threading.Lock()
        self._interval = 1.0 / max_per_second if max_per_second > 0 else 0.0
        self._next_at = 0.0
        self._queued = 0

    def start(self, receive: Callable[[Inbound], None]) -> None:
        """Start the engine; every delivery is passed to `receive`, on this event loop, in order."""
        self._loop = asyncio.get_running_loop()
        self._receive = receive
        # for the rest of the process (another engine may be running): it costs nothing while no other
        # thread wants the GIL, since the interval only paces a thread that waits for it
        sys.setswitchinterval(min(sys.getswitchinterval(), GIL_SWITCH_S))
        settings = fix.SessionSettings(str(self.settings_path))
        lines = self.settings_path.read_text().splitlines()
        self.log_dir = next((Path(line.split("=", 1)[1]) for line in lines if line.startswith("FileLogPath=")), None)
        self.store_dir = next((Path(line.split("=", 1)[1]) for line in lines if line.startswith("FileStorePath=")),
                              None)
        self.redact_secrets()  # what a killed process left
        self._app = _Application(self._deliver, self.sent, self.logon)
        self._initiator = fix.SocketInitiator(self._app, fix.FileStoreFactory(settings), settings,
                                              fix.FileLogFactory(settings))
        self._sender = threading.Thread(target=self._send_loop, name="fix-sender", daemon=True)
        self._sender.start()
        self._initiator.start()

    def stop(self) -> None:
        """Blocking (the engine logs out): call it from a worker thread."""
        self._outbox.put(None)
        if self._sender is not None:
            self._sender.join(timeout=10)
        if self._initiator is not None:
            self._initiator.stop()
            self._initiator = None
            self.redact_secrets()

    def redact_secrets(self, tail_bytes: int | None = None) -> int:
        """Overwrite the Logon's secrets in every file of the session's message log and store (see `redact`);
        `tail_bytes`: only in the end of each, where a Logon just sent was written."""
        files = [p for d in (self.log_dir, self.store_dir) if d is not None and d.is_dir()
                 for p in sorted(d.iterdir()) if p.is_file()]
        return sum(redact(p, tail_bytes) for p in files)

    def send(self, msg_type: str, body: list[tuple[int, str]]) -> None:
        """Send now if the rate limit allows and nothing is queued ahead; else queue for the sender thread."""
        with self._pace:
            now = time.monotonic()
            inline = self._queued == 0 and now >= self._next_at
            if inline:
                self._next_at = now + self._interval
            else:
                self._queued += 1
        if inline:
            self._transmit(msg_type, body)
        else:
            self._outbox.put((msg_type, body))

    def sent_message(self, seq_num: str) -> dict[int, str] | None:
        """The fields of our last message with this MsgSeqNum(34), if it is among the last SENT_REMEMBERED."""
        needle = f"{parsing.SOH}{parsing.SEQ_NUM}={seq_num}{parsing.SOH}"
        for raw in reversed(list(self.sent)):  # a copy, taken under the GIL: quickfix's thread may append
            if needle in raw:
                return parsing.split(raw).fields
        return None

    def received_message(self, seq_num: str, tail_bytes: int = RECEIVED_LOOKBACK) -> str | None:
        """The raw text of the counterparty's last message with this MsgSeqNum(34) in quickfix's message log,
        searched in its last `tail_bytes`: the log is the one place quickfix keeps a message that its session
        layer refused before any callback saw it. None when it is not there."""
        needles = (f"{parsing.SOH}{parsing.SEQ_NUM}={seq_num}{parsing.SOH}", f"{parsing.SOH}49={self.target}{parsing.SOH}")
        for path in sorted(self.log_dir.glob("*.messages.current.log")) if self.log_dir else ():
            with path.open("rb") as f:
                f.seek(max(0, f.seek(0, 2) - tail_bytes))
                lines = f.read().decode("utf-8", "replace").splitlines()
            for line in reversed(lines):
                if all(n in line for n in needles):
                    return line.split(" : ", 1)[-1]
        return None

    def _deliver(self, item: Inbound) -> None:  # on quickfix's thread
        loop, receive = self._loop, self._receive
        if loop is not None and receive is not None and not loop.is_closed():
            loop.call_soon_threadsafe(receive, item)

    def _send_loop(self) -> None:
        while True:
            item = self._outbox.get()
            if item is None:
                return
            with self._pace:
                delay = self._next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)  # the counterparty's rate limit: this thread waits, the loop does not
            with self._pace:
                self._next_at = max(self._next_at, time.monotonic()) + self._interval
            self._transmit(*item)
            with self._pace:
                self._queued -= 1

    def _transmit(self, msg_type: str, body: list[tuple[int, str]]) -> None:
        try:
            fix.Session.sendToTarget(_build(msg_type, body), self.session_id)
        except BaseException as e:  # noqa: BLE001 - a send that fails is reported, and sending goes on
            self._deliver(("send_failed", f"{type(e).__name__}: {e}: 35={msg_type} {body!r}"))
