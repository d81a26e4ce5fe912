"""Kernel snapshots: the kernel's whole state after one input, so that start-up feeds only the inputs after
it, however long the journal, and a journal whose old ranges are archived can still start.

A snapshot is a cache of the journal, never a source of truth: it is derived from the journal's inputs
alone, any snapshot may be deleted, and one is used only where it is certain to equal what feeding the
journal through a fresh kernel would rebuild. `unusable` says why one is not:
- another kernel behaviour, or other code (`code_digest`: foxhunt's core, messages and configuration
  sources, whether they run compiled, and the versions of Python, numpy and msgspec);
- another trading configuration than the one the kernel is built with now;
- bytes that are not what was stored (SHA-256), or a restored state whose digest is not the recorded one.
Start-up then tries the next older snapshot, and in the end the whole journal.

The state is the kernel, pickled. Pickle keeps what is shared shared (an order both in the book and among
the open ones, a strategy's context and the kernel's positions, the risk engine's views into its one
array) and needs no code per field, so a field added to the kernel is in the next snapshot without a
line here. Two kinds of object need help, both given here rather than in the core's classes:
- classes compiled by mypyc can be created only through their `__init__`, so they are pickled as a call
  of the class with the arguments below (`_ARGUMENTS`, or every field of a dataclass), their attributes
  set afterwards;
- the risk engine's compiled check and views are made again when it is unpickled (core/risk/gate.py).
Pickle runs code that the data names, so a snapshot is read only from the journal's own database: whoever
can write there can forge orders into the journal as well.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import io
import pickle
import sys
import time
from pathlib import Path

import msgspec
import numpy
import structlog

from foxhunt import compiled
from foxhunt.config import TradingConfig
from foxhunt.core.context import StrategyContext
from foxhunt.core.kernel import BEHAVIOUR, Kernel
from foxhunt.core.risk.gate import PreTradeGate
from foxhunt.core.strategies.zscore import _Stats
from foxhunt.core.strategy import Strategy
from foxhunt.errors import JournalError
from foxhunt.ports import JournalStore, Snapshot

log = structlog.get_logger("foxhunt.snapshots")

FORMAT = 1  # raised when what a snapshot holds changes in a way code_digest does not see
KEEP = 3  # snapshots kept per journal: the newest, and older ones in case it cannot be used

_PACKAGE = Path(__file__).resolve().parents[1]
_SOURCES = ("core", "messages", "config.py")


@functools.cache
def code_digest() -> str:
    """What a pickled kernel depends on: the sources of every class it holds, whether they run compiled,
    and the libraries whose objects it holds."""
    versions = f"format {FORMAT} python {sys.version} numpy {numpy.__version__} msgspec {msgspec.__version__}"
    h = hashlib.sha256(versions.encode())
    for top in _SOURCES:
        root = _PACKAGE / top
        for path in sorted(root.rglob("*.py")) if root.is_dir() else [root]:
            h.update(str(path.relative_to(_PACKAGE)).encode() + b"\0" + path.read_bytes())
    h.update(f"compiled {compiled.compiled_in_use()}".encode())  # all compiled or none (foxhunt/compiled.py)
    return h.hexdigest()[:16]


# what each compiled class with a required argument is created with; its attributes are set afterwards
_ARGUMENTS = {
    Kernel: lambda k: (k.instruments, k.strategies, k.gate),
    PreTradeGate: lambda g: (g.limits, g.instruments),
    _Stats: lambda s: (s.values.maxlen,),
    StrategyContext: lambda c: (c._kernel, c.strategy_id),
}


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj):
        cls = type(obj)
        arguments = _ARGUMENTS.get(cls) or (_strategy_arguments if isinstance(obj, Strategy) else None)
        if arguments is not None:
            return cls, arguments(obj), obj.__getstate__()
        if dataclasses.is_dataclass(cls) and cls.__module__.startswith("foxhunt.core."):
            return cls, tuple(getattr(obj, f.name) for f in dataclasses.fields(cls))
        return NotImplemented


def _strategy_arguments(strategy: Strategy) -> tuple:
    return (strategy.params,)  # type: ignore[attr-defined]  # every strategy is built from its params


def take(kernel: Kernel, seq: int, inputs: int, built_with: TradingConfig) -> Snapshot:
    """The kernel's state after the input at `seq` (taken between inputs, never inside one)."""
    buf = io.BytesIO()
    _Pickler(buf, protocol=5).dump(kernel)
    state = buf.getvalue()
    return Snapshot(
        seq=seq, inputs=inputs, kernel=str(BEHAVIOUR), code=code_digest(), config=built_with.to_json(),
        state_digest=kernel.state_digest(), sha256=hashlib.sha256(state).hexdigest(), state=state,
    )


async def save_snapshot(
    store: JournalStore, name: str, kernel: Kernel, seq: int, inputs: int, built_with: TradingConfig
) -> Snapshot | None:
    """Take and store a snapshot; a failure is logged and otherwise ignored, as a snapshot only saves time."""
    started = time.perf_counter()
    try:
        snapshot = take(kernel, seq, inputs, built_with)
        await store.save_snapshot(name, snapshot, KEEP)
    except (JournalError, pickle.PicklingError, TypeError) as e:
        log.warning("snapshot_failed", journal=name, seq=seq, error=str(e))
        return None
    log.info("snapshot_saved", journal=name, seq=seq, inputs=inputs, bytes=len(snapshot.state),
             seconds=round(time.perf_counter() - started, 3))
    return snapshot


def unusable(snapshot: Snapshot, built_with: TradingConfig) -> str | None:
    """Why the snapshot cannot stand in for feeding the journal into a kernel built with `built_with`; None
    when it can (its bytes are checked by `restore`)."""
    if snapshot.kernel != str(BEHAVIOUR):
        return f"taken by kernel behaviour {snapshot.kernel}, this foxhunt's is {BEHAVIOUR}"
    if snapshot.code != code_digest():
        return f"taken by other code (digest {snapshot.code}, this foxhunt's {code_digest()})"
    if snapshot.config != built_with.to_json():
        return "taken with another trading configuration than the journal's kernel is built with"
    return None


class SnapshotDamaged(Exception):
    """A stored snapshot that does not restore to the state it recorded; the message says what is wrong,
    the caller names the snapshot."""


def restore(snapshot: Snapshot) -> Kernel:
    if hashlib.sha256(snapshot.state).hexdigest() != snapshot.sha256:
        raise SnapshotDamaged("its bytes do not match their SHA-256")
    try:
        kernel = pickle.loads(snapshot.state)
    except Exception as e:  # whatever a damaged pickle raises
        raise SnapshotDamaged(f"it does not unpickle: {e!r}") from e
    if type(kernel) is not Kernel or kernel.state_digest() != snapshot.state_digest:
        raise SnapshotDamaged("it restores another state than it recorded")
    if kernel.seq > snapshot.seq:  # a row moved to an earlier seq: restored there, inputs would be fed twice
        raise SnapshotDamaged(f"it holds the kernel as it was after seq {kernel.seq}")
    return kernel
