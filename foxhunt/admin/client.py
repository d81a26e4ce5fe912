"""`foxhunt admin`: the operator's end of the admin socket, as a REPL or for one command (`-c`).

The REPL has line editing and history (readline, history kept in `~/.foxhunt_admin_history`), tab
completion of command names, sub-commands and options from the shared command table, and `help`. Lines
are split like a shell would (`halt --reason "spreads too wide"`). Replies print as readable text, or as
one JSON object per command with `--json`.
"""

from __future__ import annotations

import contextlib
import json
import readline
import shlex
import socket
import sys
from pathlib import Path
from typing import Any

from foxhunt.admin import protocol
from foxhunt.admin.protocol import COMMANDS, REASON_FLAGS, ProtocolError, Reply, Request
from foxhunt.errors import FoxhuntError

HISTORY = Path.home() / ".foxhunt_admin_history"


class AdminUnavailable(FoxhuntError):
    """The daemon's admin socket cannot be reached or broke off."""


class AdminRefused(FoxhuntError):
    """The daemon answered a command with an error."""


class Connection:
    def __init__(self, path: Path, timeout: float = 30.0) -> None:
        self.path = path
        self.timeout = timeout
        self._connect()

    def reopened(self) -> bool:
        """Connect again if the daemon has closed this connection (idle too long, or closed for a newer one
        at its connection limit: admin/server.py); True when it did. Looked at before a request is sent,
        so a command is never sent twice."""
        self.sock.setblocking(False)  # a socket with a timeout would wait for something to read first
        try:
            if self.sock.recv(1, socket.MSG_PEEK) != b"":
                return False  # something unasked for is waiting: leave it to the next read
        except BlockingIOError:
            return False  # open, nothing to read: as it should be between requests
        except OSError:
            pass
        finally:
            self.sock.settimeout(self.timeout)
        self.sock.close()
        self._connect()
        return True

    def _connect(self) -> None:
        path = self.path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        try:
            self.sock.connect(str(path))
        except FileNotFoundError:
            raise AdminUnavailable(f"no admin socket at {path}: is the daemon running? (--socket to point elsewhere)") from None
        except PermissionError:
            raise AdminUnavailable(f"permission denied on {path}: your user is not allowed to use it") from None
        except OSError as e:
            raise AdminUnavailable(f"cannot connect to {path}: {e.strerror}") from None

    def ask(self, argv: list[str], operator: str = "") -> Reply:
        """One command's reply; `operator`: the person a gateway acts for (protocol.Request)."""
        try:
            try:
                self.sock.sendall(protocol.frame(Request(argv=argv, operator=operator)))
            except (BrokenPipeError, ConnectionResetError):
                pass  # the daemon answered (a refusal) and closed before it read the request: its answer counts
            header = self._exactly(protocol.HEADER.size)
            return protocol.decode_reply(self._exactly(protocol.frame_length(header)))
        except ProtocolError as e:
            raise AdminUnavailable(str(e)) from None
        except TimeoutError:
            raise AdminUnavailable(f"no answer from {self.path} within {self.sock.gettimeout()} s") from None
        except OSError as e:
            raise AdminUnavailable(f"connection to {self.path} failed: {e.strerror or e}") from None

    def _exactly(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise AdminUnavailable(f"the daemon closed the admin connection ({self.path})")
            data += chunk
        return data

    def close(self) -> None:
        self.sock.close()


def run_one(path: Path, line: str, as_json: bool) -> int:
    """`foxhunt admin -c LINE`: 0 when the daemon accepted it; AdminRefused (exit 2) when it did not."""
    try:
        argv = shlex.split(line)
    except ValueError as e:
        raise AdminRefused(f"cannot split {line!r}: {e}") from None
    conn = Connection(path)
    try:
        reply = conn.ask(argv)
    finally:
        conn.close()
    if reply.ok or as_json:
        _print(reply, as_json)
    if not reply.ok:
        raise AdminRefused(reply.error)
    return 0


def repl(path: Path, as_json: bool) -> int:
    conn = Connection(path)
    _setup_readline()
    print(f"foxhunt admin on {path}; 'help' lists the commands, Ctrl-D leaves.")
    try:
        while True:
            try:
                line = input("foxhunt> ").strip()
            except EOFError:
                print()
                return 0
            except KeyboardInterrupt:
                print()
                continue
            if not line:
                continue
            if line in ("exit", "quit"):
                return 0
            try:
                argv = shlex.split(line)
            except ValueError as e:
                print(f"error: {e}", file=sys.stderr)
                continue
            if conn.reopened():
                print("(connected again: the daemon had closed the idle connection)", file=sys.stderr)
            _print(conn.ask(argv), as_json)
    finally:
        conn.close()
        with contextlib.suppress(OSError):
            readline.write_history_file(HISTORY)


# --- completion ----------------------------------------------------------------------------------


def complete(text: str, words_before: list[str]) -> list[str]:
    """Candidates for the word being typed, given the words before it."""
    if not words_before:
        return sorted(name for name in COMMANDS if name.startswith(text))
    spec = COMMANDS.get(words_before[0])
    if spec is None:
        return []
    if words_before[0] == "help" and len(words_before) == 1:
        return sorted(name for name in COMMANDS if name.startswith(text))
    candidates: list[str] = []
    if len(words_before) == 1 and spec.choices:
        candidates += spec.choices
    candidates += [*spec.flags, *spec.options]
    if spec.changes_state:
        candidates.append(REASON_FLAGS[0])
    return sorted(c for c in candidates if c.startswith(text))


def _setup_readline() -> None:
    with contextlib.suppress(OSError):
        readline.read_history_file(HISTORY)
    readline.set_history_length(1000)
    readline.parse_and_bind("tab: complete")
    matches: list[str] = []

    def completer(text: str, state: int) -> str | None:
        if state == 0:
            before = readline.get_line_buffer()[: readline.get_begidx()]
            try:
                words = shlex.split(before)
            except ValueError:
                words = before.split()
            matches[:] = complete(text, words)
        return matches[state] if state < len(matches) else None

    readline.set_completer(completer)


# --- output --------------------------------------------------------------------------------------


def _print(reply: Reply, as_json: bool) -> None:
    if as_json:
        print(json.dumps({"ok": reply.ok, "result": reply.result, "error": reply.error or None}, sort_keys=True))
    elif not reply.ok:
        print(f"error: {printable(reply.error)}", file=sys.stderr)
    else:
        print(render(reply.result))


def printable(text: str, newlines: bool = False) -> str:
    """`text` with every control and format character written as an escape (\\x1b, \\u202e), line breaks too
    unless `newlines`: what the daemon answers holds a journal's text (symbols, reasons, operators' names),
    which must not move the cursor, retitle the terminal, reorder what is shown (Unicode's bidirectional
    overrides) or start a line that looks like another field."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or (newlines and c == "\n") else c.encode("unicode_escape").decode("ascii")
                   for c in text)


def render(value: Any, indent: int = 0) -> str:
    """Readable text: a list of flat records as a table, a dict as aligned key: value lines; every string in
    it `printable`."""
    pad = " " * indent
    if isinstance(value, str):
        return printable(value, newlines=True)  # a whole answer in words (help)
    if isinstance(value, list):
        if not value:
            return pad + "(none)"
        if all(isinstance(v, dict) for v in value):
            return _table(value, pad)
        return "\n".join(render(v, indent) for v in value)
    if isinstance(value, dict):
        width = max((len(printable(str(k))) for k in value), default=0)
        lines = []
        for key, v in value.items():
            if isinstance(v, (dict, list)) and v:
                lines.append(f"{pad}{printable(str(key))}:")
                lines.append(render(v, indent + 2))
            else:
                lines.append(f"{pad}{printable(str(key)):<{width}}  {printable(str(v))}")
        return "\n".join(lines)
    return pad + printable(str(value))


def _table(rows: list[dict[str, Any]], pad: str) -> str:
    keys = list(dict.fromkeys(k for row in rows for k in row))
    columns = [printable(str(k)) for k in keys]
    cells = [[_cell(row.get(k, "")) for k in keys] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    lines = [pad + "  ".join(c.ljust(w) for c, w in zip(columns, widths))]
    lines += [pad + "  ".join(v.ljust(w) for v, w in zip(r, widths)) for r in cells]
    return "\n".join(line.rstrip() for line in lines)



def _cell(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))  # escapes what is not ASCII itself
    return printable(str(value))
