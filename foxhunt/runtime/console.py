"""What the admin socket reaches inside the daemon: queries read state, commands become journal inputs.

Queries run on the event loop between two inputs, so they see the kernel between steps, never in the
middle of one. A command that changes state is turned into an `AdminCommand` carrying the operator's uid
and user name and the reason, and handed to the trading loop's urgent lane: the loop journals it, the
kernel applies it, and the reply (sent once the journal has committed it) lists what it derived. Replay
meets the same input at the same sequence number and does the same.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from typing import Any

import msgspec

from foxhunt.admin.protocol import Parsed, UsageError
from foxhunt.admin.server import Peer
from foxhunt.config import Config
from foxhunt.messages.base import Derived
from foxhunt.messages.system import AdminCommand
from foxhunt.ports import Clock, JournalStore
from foxhunt.runtime import views
from foxhunt.runtime.loop import TradingLoop
from foxhunt.runtime.scoring import ModelSource

Submit = Callable[[AdminCommand], Awaitable[tuple[int, list[Derived]]]]


class Rates:
    """Inputs and derived events per second over about the last minute, from samples the loop takes."""

    def __init__(self, keep: int = 64) -> None:
        self.samples: deque[tuple[float, int, int]] = deque(maxlen=keep)

    def sample(self, inputs: int, derived: int, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        if self.samples and now - self.samples[-1][0] < 1.0:
            return
        self.samples.append((now, inputs, derived))
        while len(self.samples) > 2 and now - self.samples[1][0] >= 60.0:
            self.samples.popleft()

    def per_second(self, inputs: int, derived: int) -> dict[str, float]:
        if not self.samples:
            return {"inputs": 0.0, "derived": 0.0, "window_s": 0.0}
        t0, i0, d0 = self.samples[0]
        span = time.monotonic() - t0
        if span <= 0:
            return {"inputs": 0.0, "derived": 0.0, "window_s": 0.0}
        return {"inputs": round((inputs - i0) / span, 1), "derived": round((derived - d0) / span, 1),
                "window_s": round(span, 1)}


class Console:
    def __init__(
        self, loop: TradingLoop, store: JournalStore, journal: str, cfg: Config, clock: Clock, submit: Submit,
        venue: str, scoring: ModelSource | None = None,
    ) -> None:
        self.loop = loop
        self.store = store
        self.journal = journal
        self.cfg = cfg
        self.clock = clock
        self.submit = submit
        self.venue = venue
        self.scoring = scoring
        self.started = time.monotonic()
        self.rates = Rates()

    async def __call__(self, parsed: Parsed, peer: Peer) -> Any:
        match parsed.command:
            case "status":
                return self.status()
            case "positions":
                return self.positions()
            case "orders":
                return self.orders("--open" in parsed.flags, _count(parsed.options.get("-n", "50"), "orders"))
            case "pnl":
                return self.pnl()
            case "risk":
                return self.risk()
            case "journal":
                return await self.journal_tail(_count(parsed.options.get("-n", "10"), "journal tail"))
            case "config":
                return self.config()
            case "models":
                return self.models()
        return await self.command(parsed, peer)

    # --- queries ---------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        loop, kernel = self.loop, self.loop.kernel
        journal = loop.journal
        return {
            "uptime_s": round(time.monotonic() - self.started, 1),
            "journal": self.journal,
            "last_seq": journal.last_seq,
            "committed_seq": journal.committed_seq,
            "lag": journal.last_seq - journal.committed_seq,
            "durability": "before_send" if loop.before_send else "async",
            "inputs": loop.inputs,
            "derived": loop.derived,
            "rates_per_s": self.rates.per_second(loop.inputs, loop.derived),
            "venues": {self.venue: "down" if self.venue in kernel.venues_down else "connected"},
            "trading_state": kernel.state.value,
            "open_orders": len(kernel.orders.open),
            "paused_strategies": sorted(kernel.paused),
            **views.held_back(kernel),
            **({} if self.scoring is None else {"models_failed": sorted(self.scoring.failed)}),
        }

    def summary_line(self) -> str:
        """The one-line STATUS= for systemd."""
        k, j = self.loop.kernel, self.loop.journal
        failed = f" models_failed={len(self.scoring.failed)}" if self.scoring is not None and self.scoring.failed else ""
        return (f"{k.state.value} journal={self.journal} seq={j.last_seq} lag={j.last_seq - j.committed_seq} "
                f"inputs={self.loop.inputs} open_orders={len(k.orders.open)} denials_held_back={k.repeats.held_back}"
                f"{failed}")

    def positions(self) -> list[dict[str, Any]]:
        return views.positions(self.loop.kernel)

    def orders(self, only_open: bool, count: int) -> list[dict[str, Any]]:
        return views.orders(self.loop.kernel, only_open, count)

    def pnl(self) -> dict[str, Any]:
        return views.pnl(self.loop.kernel)

    def risk(self) -> dict[str, Any]:
        return views.risk(self.loop.kernel)

    async def journal_tail(self, count: int) -> list[dict[str, Any]]:
        last = self.loop.journal.committed_seq
        out: list[dict[str, Any]] = []
        async with aclosing(self.store.read(self.journal, max(1, last - count + 1), count)) as pages:
            async for page in pages:
                out.extend(
                    {"seq": r.seq, "causation": r.causation, "kind": type(r.message).__name__,
                     "event": msgspec.to_builtins(r.message)}
                    for r in page
                )
        return out

    def config(self) -> dict[str, Any]:
        raw = msgspec.to_builtins(self.cfg)
        if raw["journal"]["dsn"]:
            raw["journal"]["dsn"] = _redact(raw["journal"]["dsn"])
        return raw

    def models(self) -> dict[str, Any]:
        if self.scoring is None:
            return {"scoring": "off: the strategy reads no model scores", "strategy": self.cfg.strategy.name}
        return self.scoring.status()

    # --- commands --------------------------------------------------------------------------------

    async def command(self, parsed: Parsed, peer: Peer) -> dict[str, Any]:
        now = self.clock.now()
        cmd = AdminCommand(
            ts_event=now, ts_init=now, command=parsed.command, args=parsed.args, operator_uid=peer.uid,
            operator=peer.user, reason=parsed.reason,
        )
        seq, derived = await self.submit(cmd)
        if parsed.command == "resume" and self.scoring is not None:  # once fixed, failed models are loaded again
            self.scoring.request_reload()
        return {
            "seq": seq,
            "trading_state": self.loop.kernel.state.value,
            "derived": [{"kind": type(e).__name__, "event": msgspec.to_builtins(e)} for e in derived],
        }


def _count(text: str, command: str) -> int:
    if not text.isdigit() or not 0 < int(text) <= 200:
        raise UsageError(f"{command}: -n takes a whole number from 1 to 200, got {text!r}")
    return int(text)


def _redact(dsn: str) -> str:
    """Hide a password in a DSN, in URL (user:pw@) or key=value (password=...) form."""
    if "://" in dsn and "@" in dsn:
        scheme, rest = dsn.split("://", 1)
        creds, _, host = rest.rpartition("@")
        return f"{scheme}://{creds.split(':', 1)[0]}:***@{host}" if ":" in creds else dsn
    return " ".join("password=***" if part.startswith("password=") else part for part in dsn.split())
