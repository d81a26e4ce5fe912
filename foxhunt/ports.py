"""Small interfaces between the runtime and the adapters that implement them."""

from __future__ import annotations

import abc
import hashlib
from collections.abc import AsyncGenerator, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, NamedTuple, Protocol

import msgspec
import numpy as np
from anyio.streams.memory import MemoryObjectSendStream

from foxhunt.messages.base import Input, Message
from foxhunt.messages.market import MarketData
from foxhunt.messages.orders import CancelOrder, OrderType, ReplaceOrder, Side, SubmitOrder
from foxhunt.messages.scores import LoadedModel
from foxhunt.models.agent_configs import EnvConfig

PAGE_SIZE = 10_000


class Record(msgspec.Struct, frozen=True, gc=False):
    """One journaled message. `causation` is the sequence number of the input that derived it, or
    None for an input. `payload` is the message exactly as stored (what `--verify` compares).
    `message` is None for a derived event read with `decode_derived=False`.
    (A Struct, not a NamedTuple: replay builds millions of these, and a Struct builds five times faster.)"""

    seq: int
    causation: int | None
    message: Message | None
    payload: bytes


Page = list[Record]  # what a journal read yields: records in sequence order, at most PAGE_SIZE


class JournalInfo(NamedTuple):
    name: str
    journal_id: int
    created_at: str
    config_digest: str
    events: int
    last_seq: int


class Snapshot(NamedTuple):
    """The kernel's whole state after the input at `seq` (runtime/snapshots.py), as a journal store keeps it."""

    seq: int
    inputs: int  # how many inputs the state has taken
    kernel: str  # the kernel's BEHAVIOUR
    code: str  # snapshots.code_digest() of the code that took it
    config: bytes  # the trading configuration the kernel was built with, as journaled (JSON)
    state_digest: str
    sha256: str  # of `state`
    state: bytes
    taken_at: str = ""


class JournalWriter(abc.ABC):
    """The single writer of one journal. Sequence numbers are assigned at append, gap-free.

    `append` only numbers and queues, so it is synchronous and cheap; the caller owns back-pressure:
    before appending an input it checks `backlogged` and, if set, awaits `relieve()`.
    """

    name: str
    backlogged: bool = False

    @property
    @abc.abstractmethod
    def last_seq(self) -> int:
        """The sequence number of the last appended message (0 for an empty journal)."""

    @property
    def committed_seq(self) -> int:
        """The sequence number up to which everything is durable; writers that queue override it."""
        return self.last_seq

    @abc.abstractmethod
    def append(self, message: Message, causation: int | None = None) -> int:
        """Queue a message and return its sequence number."""

    async def relieve(self) -> None:
        """Let the writer take what is queued; wait while the queue is full."""

    def watch_health(self, hook: Callable[[str | None, int], None]) -> None:
        """Have `hook(reason, 0)` called when the journal stops taking events (writes failing or stalled),
        and `hook(None, outage_ns)` once it takes them again. A journal that cannot fail never calls it."""

    def watch_commits(self, hook: Callable[[list[str], float], None]) -> None:
        """Have `hook(kinds, seconds)` called after each durable write: the kinds of the events it held
        and how long it took (for metrics). A journal that writes nothing never calls it."""

    @abc.abstractmethod
    async def flush(self) -> None:
        """Return once everything appended so far is durable."""


class JournalStore(abc.ABC):
    """A database of journals."""

    @abc.abstractmethod
    def writer(
        self, name: str, *, config: bytes, config_digest: str, fingerprint: dict[str, str]
    ) -> AbstractAsyncContextManager[JournalWriter]:
        """Create the journal if needed and hold it exclusively; raise JournalLocked if held.
        Leaving the context flushes everything appended."""

    @abc.abstractmethod
    async def info(self, name: str) -> JournalInfo:
        """Raise JournalNotFound if there is no such journal."""

    @abc.abstractmethod
    async def list(self) -> list[JournalInfo]: ...

    @abc.abstractmethod
    def read(
        self, name: str, from_seq: int = 1, limit: int | None = None, *, decode_derived: bool = True
    ) -> AsyncGenerator[Page, None]:
        """Records in sequence order, in pages of at most PAGE_SIZE: memory stays flat however long the
        journal is, and the consumer's per-record loop stays synchronous. Replay, which compares derived
        events as bytes or skips them, reads with decode_derived=False."""

    @abc.abstractmethod
    def tail(self, name: str, from_seq: int = 1, *, decode_derived: bool = True) -> AsyncGenerator[Page, None]:
        """Like read, but waits for new records instead of ending."""

    @abc.abstractmethod
    async def snapshots(self, name: str) -> list[Snapshot]:
        """The journal's kernel snapshots, newest first; JournalNotFound if there is no such journal."""

    @abc.abstractmethod
    async def save_snapshot(self, name: str, snapshot: Snapshot, keep: int) -> None:
        """Store a snapshot (replacing one at the same seq) and drop all but the `keep` newest."""

    async def aclose(self) -> None:
        pass


class Clock(Protocol):
    def now(self) -> int:
        """Nanoseconds since the Unix epoch."""
        ...

    def stamp(self, ts_event: int) -> int:
        """`ts_init` for an input that happened at `ts_event`, as a source takes it in."""
        ...


class OrderView(Protocol):
    """One of the kernel's orders as a venue adapter reads it (on the loop, between inputs), to reconcile,
    to cancel or replace it: read, never changed. The kernel's `core.orders.Order` is one; adapters see
    only this, and read the kernel's orders by id through the function they are given."""

    @property
    def order_id(self) -> str: ...
    @property
    def symbol(self) -> str: ...
    @property
    def side(self) -> Side: ...
    @property
    def order_type(self) -> OrderType: ...
    @property
    def quantity(self) -> int: ...
    @property
    def price(self) -> int | None: ...
    @property
    def trigger_price(self) -> int | None: ...
    @property
    def filled_qty(self) -> int: ...
    @property
    def venue_order_id(self) -> str: ...
    @property
    def is_open(self) -> bool: ...
    @property
    def unacknowledged(self) -> bool: ...  # sent, and not yet acknowledged by the venue (nor answered)


# the kernel's orders by id: the open ones and the CLOSED_KEPT (messages/orders.py) most recently closed
OrderViews = Callable[[], Mapping[str, OrderView]]


class Venue(Protocol):
    """Where approved commands go. `send` and `on_market` return the reports known at once (a simulated
    venue's); a real venue's reports arrive later, and `run` publishes them on the bus until cancelled.

    A venue that holds a resource of its own (a file) is also a context manager: the run enters it and
    closes it when it ends.

    A venue publishes every report of a known order, repeats and late ones included, each fill with the
    venue's execution id (`trade_id`, "" where it has none) and cumulative quantity (`cum_qty`): the kernel
    books each execution once and refuses what an order's lifecycle does not allow, so a venue takes an
    order for done only when the kernel does. A message that could not be used and may have carried an
    execution is published as `VenueMessageRejected` with its raw text, never only logged."""

    name: str
    keeps_orders: bool  # whether working orders outlive a restart of foxhunt (a real venue's do)

    def connect(self) -> list[Input]: ...

    def send(self, cmd: SubmitOrder | CancelOrder | ReplaceOrder) -> list[Input]: ...

    def on_market(self, msg: MarketData) -> list[Input]: ...

    async def run(self, bus: MemoryObjectSendStream[Input], *, task_status: Any = ...) -> None: ...


class Notifier(Protocol):
    """Who supervises the daemon (systemd's sd_notify protocol, adapters/systemd.py): told when it is
    ready and when it stops, and sent a heartbeat at the interval it asks for (none where nobody asks)."""

    def ready(self, status: str) -> None: ...

    def stopping(self, status: str) -> None: ...

    def heartbeat_due(self, now: float | None = None) -> bool: ...

    def heartbeat(self, status: str) -> None: ...

    def seconds_to_heartbeat(self) -> float: ...

    def close(self) -> None: ...  # the run is over: what it holds is released


class ModelStore(abc.ABC):
    """Trained models by id (models/artifact.py): each a few named files, a manifest among them.

    - `put` is all or nothing: a model is listed and can be read only once all its files are stored, so an
      upload broken half way leaves no model (and may be repeated). Putting an id that is stored already
      changes nothing and returns False (an id names its weights' hash: they are the same weights).
    - `get` returns every file of the model; ModelError naming the id and the store if there is none.
    - `ids` lists the stored models, sorted; `remove` deletes one (ModelError if there is none).
    Failures of the storage itself (a directory that cannot be written, a bucket that cannot be reached)
    are ModelErrors that name the store."""

    location: str  # where, for messages: a directory or s3://bucket/prefix

    @abc.abstractmethod
    def put(self, model_id: str, files: Mapping[str, bytes]) -> bool: ...

    @abc.abstractmethod
    def get(self, model_id: str) -> dict[str, bytes]: ...

    @abc.abstractmethod
    def ids(self) -> list[str]: ...

    @abc.abstractmethod
    def remove(self, model_id: str) -> None: ...


class ModelRunner(abc.ABC):
    """Models from a store, served on one device at fixed batch shapes (adapters/inference/runner.py).

    - `prepare()` applies the determinism settings (models/determinism.py) before any CUDA work, and
      returns the device's name, the environment fingerprint and the switches, for ModelsLoaded.
    - `load(model_id, feature_digest, like)` reads the model from the store, checks that its parameters
      hash to its manifest's and that it was trained on the feature set `feature_digest`, builds it for the
      device and describes it. On CUDA it captures its graph and warms it up, with the forward in the form
      that `like`, a journal's LoadedModel of it, records (so verify recomputes as the run served), else in
      the form the runner is configured to serve: eager, fused by torch.compile (`compiled`) or in
      foxhunt's Triton kernels (`fused`). Loading an id again loads it afresh
      (a model fixed in the store). A model that cannot be loaded is a ModelError (what="load") naming it
      and why; nothing is left loaded of it.
    - `score(model_id, windows)`: float32 [n, window, features] windows, 1 <= n <= the model's batch, to
      float32 [n, horizons, quantiles] forecasts. A row's forecast depends on that row alone, never on how
      many rows came with it or what they held. A failure is a ModelError: what="out_of_memory" when the
      device ran out of memory, what="error" for anything else the model raised.
    - `input_digest(window)`: the SHA-256 of a window's exact float32 bytes.
    Every call blocks; the scoring service (runtime/scoring.py) makes them from one worker thread at a
    time, so the event loop never waits on a device."""

    device: str

    @abc.abstractmethod
    def prepare(self) -> tuple[dict[str, str], dict[str, str]]: ...

    @abc.abstractmethod
    def load(self, model_id: str, feature_digest: str, like: LoadedModel | None = None) -> LoadedModel: ...

    @abc.abstractmethod
    def score(self, model_id: str, windows: np.ndarray) -> np.ndarray: ...

    @staticmethod
    def input_digest(window: np.ndarray) -> str:
        return hashlib.sha256(np.ascontiguousarray(window, dtype=np.float32).tobytes()).hexdigest()


class PolicyRunner(abc.ABC):
    """A trading agent from a model store, served on one device (adapters/inference/policy.py).

    - `prepare()` as ModelRunner's: the determinism settings before any CUDA work; (fingerprint, switches).
    - `load(policy_id, feature_digest, like=None)` reads the agent, checks that its parameters hash to its
      manifest's and that it was trained on the feature set `feature_digest`, builds it for the device
      (served as `like`, a journal's LoadedModel of it, was: fused or not, where given), and returns how
      it is served (a LoadedModel: its arch, window 1, `features` its observation's width, no horizons or
      quantiles, the `symbol` it trades) with the environment it was trained in (EnvConfig: its actions,
      decision_every, warmup). Its state starts afresh. A ModelError (what="load") where it cannot be
      loaded, naming it and why; loading again loads it afresh.
    - `act(observation)`: a float32 [width] observation to (action, outputs): the action as a number (a
      discrete action's index, or the continuous value before clipping) and the float32 values it was
      chosen from (action values, logits, or a continuous policy's mean). A recurrent policy carries its
      state from one call to the next, so the calls must come in the order of the observations; the same
      observations in the same order give the same bytes. A failure is a ModelError, as for `score`.
    Every call blocks; the policy source (runtime/policies.py) makes them from one worker thread."""

    device: str

    @abc.abstractmethod
    def prepare(self) -> tuple[dict[str, str], dict[str, str]]: ...

    @abc.abstractmethod
    def load(self, policy_id: str, feature_digest: str,
             like: LoadedModel | None = None) -> tuple[LoadedModel, EnvConfig]: ...

    @abc.abstractmethod
    def act(self, observation: np.ndarray) -> tuple[float, np.ndarray]: ...

    input_digest = staticmethod(ModelRunner.input_digest)  # the observation's, as a window's
