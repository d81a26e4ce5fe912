"""One batch of journal rows into PostgreSQL as a binary COPY, driven straight through libpq.

The journal writer's commit cycle is the floor under every order's durable acknowledgement, and most of
its cycles carry a few dozen rows. psycopg's `cursor.copy()` spends about 0.17 ms of the client's CPU on
such a COPY (its cursor, Copy object, writer and generator layers), more than the server spends
inserting the rows; measured on the developers' 2-core machine, one row: 0.37 ms a COPY through
`cursor.copy()`, 0.31 ms through libpq here, of which 0.16 and 0.09 ms client CPU (docs/benchmarks.md).
So the writer formats the rows itself and drives the protocol with psycopg's public libpq wrapper
(`psycopg.pq`) on the connection it already has: the same COPY, the same transaction, fewer layers.

The format is PostgreSQL's binary COPY format ("COPY", File Formats, in the PostgreSQL manual): a
signature and two zero int32s, then per row an int16 field count and per field an int32 length (-1 for
NULL) and the value in network byte order, then an int16 -1.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence

import anyio
import psycopg
from psycopg import pq

_SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)  # no OIDs, no header extension
_TRAILER = struct.pack(">h", -1)
_NULL = struct.pack(">i", -1)
_KEY = struct.Struct(">hiqiq")  # 8 fields, then journal_id and seq: each a length of 8 and the int8
_TIMES = struct.Struct(">iqiq")  # ts_event and ts_init
_INT8 = struct.Struct(">iq")
_LENGTH = struct.Struct(">i")
_kinds: dict[str, bytes] = {}  # kind -> its field (length and UTF-8 text): a journal has a few dozen kinds


def format_rows(rows: Sequence[tuple], chunk: int = 1000) -> Iterator[bytes]:
    """Rows of (journal_id, seq, kind, ts_event, ts_init, causation, correlation, payload), the columns
    of `events` in that order, as one binary COPY stream in pieces of `chunk` rows: the server inserts
    one piece while the next is formatted."""
    parts = [_SIGNATURE]
    add = parts.append
    for i, (journal_id, seq, kind, ts_event, ts_init, causation, correlation, payload) in enumerate(rows, 1):
        kind_field = _kinds.get(kind)
        if kind_field is None:
            text = kind.encode()
            kind_field = _kinds[kind] = _LENGTH.pack(len(text)) + text
        add(_KEY.pack(8, 8, journal_id, 8, seq))
        add(kind_field)
        add(_TIMES.pack(8, ts_event, 8, ts_init))
        add(_NULL if causation is None else _INT8.pack(8, causation))
        add(_NULL if correlation is None else _INT8.pack(8, correlation))
        add(_LENGTH.pack(len(payload)))
        add(payload)
        if not i % chunk:
            yield b"".join(parts)
            parts.clear()
    add(_TRAILER)
    yield b"".join(parts)


async def copy_in(conn: psycopg.AsyncConnection, statement: bytes, data: Iterable[bytes]) -> None:
    """Run `COPY ... FROM STDIN (FORMAT BINARY)` with the pieces of `data` on an idle autocommit
    connection: durable when this returns. A server error raises its psycopg exception; a broken
    connection raises OperationalError. Cancelled or failed half-way, the connection is left
    mid-protocol: close it."""
    pgconn = conn.pgconn
    fd = pgconn.socket
    pgconn.send_query(statement)
    await _flush(pgconn, fd)
    result = await _result(pgconn, fd)
    if result is None or result.status != pq.ExecStatus.COPY_IN:
        await _drain(pgconn, fd)
        raise _error(result, pgconn, pq.ExecStatus.COPY_IN)
    for piece in data:
        while not pgconn.put_copy_data(piece):  # 0: libpq's buffer is full (a non-blocking connection)
            await _flush(pgconn, fd)
        pgconn.flush()  # send what the socket takes now; the rest goes with the next piece
    while not pgconn.put_copy_end():
        await _flush(pgconn, fd)
    await _flush(pgconn, fd)
    result = await _result(pgconn, fd)
    await _drain(pgconn, fd)
    if result is None or result.status != pq.ExecStatus.COMMAND_OK:
        raise _error(result, pgconn, pq.ExecStatus.COMMAND_OK)


async def _flush(pgconn: pq.abc.PGconn, fd: int) -> None:
    while pgconn.flush():  # 1: more to send once the socket takes it
        await anyio.wait_writable(fd)


async def _result(pgconn: pq.abc.PGconn, fd: int) -> pq.abc.PGresult | None:
    while True:
        pgconn.consume_input()  # OperationalError when the connection is gone
        if not pgconn.is_busy():
            return pgconn.get_result()
        await anyio.wait_readable(fd)


async def _drain(pgconn: pq.abc.PGconn, fd: int) -> None:
    """Read results up to the end of the command, leaving the connection idle."""
    while await _result(pgconn, fd) is not None:
        pass


def _error(result: pq.abc.PGresult | None, pgconn: pq.abc.PGconn, expected: pq.ExecStatus) -> psycopg.Error:
    if result is None:
        return psycopg.OperationalError(f"COPY ended without a result: {pgconn.error_message.decode(errors='replace')}")
    sqlstate = result.error_field(pq.DiagnosticField.SQLSTATE)
    message = (result.error_message.decode(errors="replace").strip()
               or f"COPY: expected {expected.name}, the server answered {pq.ExecStatus(result.status).name}")
    if sqlstate is None:
        return psycopg.OperationalError(message)
    try:
        kind = psycopg.errors.lookup(sqlstate.decode())
    except KeyError:
        kind = psycopg.DatabaseError
    return kind(message)
