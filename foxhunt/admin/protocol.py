"""The admin protocol: frames, requests and replies, and the table of commands both ends share.

On the wire a frame is a 4-byte big-endian length and that many bytes of JSON. A request carries the
command line already split into words (`["limit", "set", "collar_bps", "300", "--reason", "wide"]`); the
daemon parses and validates it against `COMMANDS` and answers with one reply frame. JSON, decoded by
msgspec into typed Structs: no eval, no pickles, and a frame larger than `MAX_FRAME` is refused before
it is read.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from typing import Any

import msgspec

MAX_FRAME = 64 * 1024
HEADER = struct.Struct(">I")


class Request(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    argv: list[str]
    # The person a gateway acts for (the web gateway's `web:alice`): honoured only from a user the daemon
    # lists in admin.gateway_users, and journaled as the command's operator with the gateway's uid.
    operator: str = ""


OPERATOR_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,63}")


def check_operator(name: str) -> str:
    """An operator a gateway names: letters, digits and . _ : @ -, at most 64; UsageError otherwise."""
    if not OPERATOR_NAME.fullmatch(name):
        raise UsageError(f"operator name {name[:80]!r} is not allowed: use letters, digits and . _ : @ - (at most 64)")
    return name


class Reply(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    ok: bool
    result: Any = None
    error: str = ""


class ProtocolError(Exception):
    """A frame or request that breaks the protocol: answered with an error, never a crash."""


class UsageError(Exception):
    """A well-formed request for a command that does not exist or with the wrong arguments."""


@dataclass(frozen=True)
class Spec:
    usage: str
    help: str
    positional: tuple[int, int | None] = (0, 0)  # how many positional words: (min, max or None for any)
    flags: tuple[str, ...] = ()  # flags taking no value, e.g. --open
    options: tuple[str, ...] = ()  # flags taking one value, e.g. -n
    changes_state: bool = False  # journaled as an AdminCommand, needs --reason
    choices: tuple[str, ...] = ()  # allowed first positional word, when it is a sub-command


COMMANDS: dict[str, Spec] = {
    "status": Spec("status", "uptime, journal position and lag, event rates, venue sessions, trading state, denials held back"),
    "positions": Spec("positions", "open positions with average price, mark and PnL"),
    "orders": Spec("orders [--open] [-n N]", "the last N orders (default 50); --open: only working ones",
                   flags=("--open",), options=("-n",)),
    "pnl": Spec("pnl", "realised and unrealised PnL, commissions, equity, peak and drawdown"),
    "risk": Spec("risk", "trading state, limits and their usage, breakers, paused instruments and strategies"),
    "journal": Spec("journal tail [-n N]", "the last N committed events (default 10)", (1, 1), options=("-n",),
                    choices=("tail",)),
    "config": Spec("config", "the configuration the daemon runs with (secrets redacted)"),
    "models": Spec("models", "the models the scoring source serves: device, parameter hashes, how each runs (graph;"
                   " eager, compiled or fused), latency percentiles, failures (resume loads failed models again)"),
    "halt": Spec("halt --reason TEXT", "stop all new orders; cancels still pass", changes_state=True),
    "reduce": Spec("reduce --reason TEXT", "allow only orders that reduce exposure", changes_state=True),
    "resume": Spec("resume --reason TEXT", "back to ACTIVE; re-arms tripped breakers and loads failed models again",
                   changes_state=True),
    "kill": Spec("kill --reason TEXT", "cancel every working order and halt", changes_state=True),
    "flatten": Spec("flatten [SYMBOL] --reason TEXT", "cancel working orders and close the position (all without"
                    " a symbol) with reduce-only market orders", (0, 1), changes_state=True),
    "cancel": Spec("cancel ORDER...|all --reason TEXT", "cancel working orders by id, or all", (1, None),
                   changes_state=True),
    "limit": Spec("limit set NAME VALUE --reason TEXT", "change a risk limit by its path in [risk], e.g. "
                  "instruments.EURUSD.max_order_qty; VALUE off turns it off", (3, 3), changes_state=True,
                  choices=("set",)),
    "strategy": Spec("strategy pause|resume NAME --reason TEXT", "stop or restart a strategy's decisions", (2, 2),
                     changes_state=True, choices=("pause", "resume")),
    "help": Spec("help [COMMAND]", "list the commands, or explain one", (0, 1)),
}
REASON_FLAGS = ("--reason", "-r")


@dataclass(frozen=True)
class Parsed:
    command: str
    args: list[str]
    flags: frozenset[str]
    options: dict[str, str]
    reason: str


def parse(argv: list[str]) -> Parsed:
    """Validate a request's words against the command table; UsageError names what is wrong."""
    if not argv:
        raise UsageError("empty command; try 'help'")
    name, words = argv[0], argv[1:]
    spec = COMMANDS.get(name)
    if spec is None:
        raise UsageError(f"unknown command {name!r}; try 'help'")
    args: list[str] = []
    flags: set[str] = set()
    options: dict[str, str] = {}
    reason = ""
    i = 0
    while i < len(words):
        word = words[i]
        if word in REASON_FLAGS or word in spec.options:
            if i + 1 >= len(words):
                raise UsageError(f"{name}: {word} needs a value; usage: {spec.usage}")
            if word in REASON_FLAGS:
                reason = words[i + 1]
            else:
                options[word] = words[i + 1]
            i += 2
            continue
        if word in spec.flags:
            flags.add(word)
        elif word.startswith("-") and len(word) > 1:
            raise UsageError(f"{name}: unknown option {word!r}; usage: {spec.usage}")
        else:
            args.append(word)
        i += 1
    low, high = spec.positional
    if len(args) < low or (high is not None and len(args) > high):
        raise UsageError(f"{name}: wrong number of arguments; usage: {spec.usage}")
    if spec.choices and args[0] not in spec.choices:
        raise UsageError(f"{name}: {args[0]!r} is not one of {', '.join(spec.choices)}; usage: {spec.usage}")
    if spec.changes_state and not reason.strip():
        raise UsageError(f"{name} changes the daemon's state and needs --reason TEXT; usage: {spec.usage}")
    if reason and not spec.changes_state:
        raise UsageError(f"{name}: --reason is only for commands that change state")
    return Parsed(name, args, frozenset(flags), options, reason.strip())


def help_text(command: str | None = None) -> str:
    if command is None:
        width = max(len(spec.usage) for spec in COMMANDS.values())
        return "\n".join(f"{spec.usage:<{width}}  {spec.help}" for spec in COMMANDS.values())
    spec = COMMANDS.get(command)
    if spec is None:
        raise UsageError(f"help: no command {command!r}")
    return f"{spec.usage}\n  {spec.help}" + ("\n  journaled with your user name and the reason" if spec.changes_state else "")


# --- frames --------------------------------------------------------------------------------------

_request_decoder = msgspec.json.Decoder(Request)
_reply_decoder = msgspec.json.Decoder(Reply)
_encoder = msgspec.json.Encoder()


def frame(message: Request | Reply) -> bytes:
    body = _encoder.encode(message)
    if len(body) > MAX_FRAME:
        raise ProtocolError(f"frame of {len(body)} bytes exceeds the limit of {MAX_FRAME}")
    return HEADER.pack(len(body)) + body


def frame_length(header: bytes) -> int:
    (length,) = HEADER.unpack(header)
    if length > MAX_FRAME:
        raise ProtocolError(f"frame of {length} bytes announced, the limit is {MAX_FRAME}")
    return length


def decode_request(body: bytes) -> Request:
    try:
        return _request_decoder.decode(body)
    except msgspec.DecodeError as e:
        raise ProtocolError(f"bad request: {e}") from None


def decode_reply(body: bytes) -> Reply:
    try:
        return _reply_decoder.decode(body)
    except msgspec.DecodeError as e:
        raise ProtocolError(f"bad reply: {e}") from None
