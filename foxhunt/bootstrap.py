"""The composition root: the only place that reads the environment and builds adapters."""

from __future__ import annotations

import os
import platform
from collections.abc import Callable, Iterable, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import msgspec
import structlog

import foxhunt
from foxhunt import config
from foxhunt.adapters.feeds import FILE_KINDS, file_spec, is_live, open_feed
from foxhunt.adapters.journal import pg_partitions as partitions
from foxhunt.adapters.journal.discard import DiscardingJournal
from foxhunt.adapters.journal.memory import MemoryJournalStore
from foxhunt.adapters.journal.pg import migrate
from foxhunt.adapters.journal.pg_embedded import EmbeddedCluster
from foxhunt.adapters.journal.pg_writer import WriterPolicy
from foxhunt.adapters.journal.postgres import PostgresJournalStore
from foxhunt.adapters.models.store import LocalModelStore, S3ModelStore
from foxhunt.adapters.systemd import Notifier
from foxhunt.adapters.venues.sim import SimVenue
from foxhunt.adapters.venues.wire_log import WireLoggedVenue
from foxhunt.admin.server import Access, ServerPolicy, user_ids
from foxhunt.config import Config, TradingConfig
from foxhunt.core.kernel import BEHAVIOUR, Kernel
from foxhunt.errors import ConfigError, InputError, JournalArchived, JournalError, JournalMismatch
from foxhunt.messages.base import Input, nanos
from foxhunt.messages.system import TradingState
from foxhunt.ports import Clock, JournalStore, JournalWriter, ModelRunner, ModelStore, PolicyRunner, Snapshot, Venue
from foxhunt.runtime import replay, snapshots
from foxhunt.runtime.clock import EventClock, WallClock
from foxhunt.runtime.daemon import Operations, RunRequest, StartupSignals
from foxhunt.runtime.policies import PolicyCheck, PolicyService, Redecide
from foxhunt.runtime.reconfigure import kernel_config
from foxhunt.runtime.recovery import Recovery, VenueFactory, snapshot
from foxhunt.runtime.scoring import ModelSource, Rescore, ScoreCheck, ScoringService

if TYPE_CHECKING:
    from foxhunt.observability.telemetry import Telemetry
    from foxhunt.training.rl.episode import Engine

log = structlog.get_logger("foxhunt.bootstrap")

# sun_path of struct sockaddr_un holds 108 bytes with the terminating NUL (unix(7))
MAX_SOCKET_PATH = 107
# a venue's `on_rejected_execution` (and `on_foreign_execution`): where trading goes when an execution report
# cannot be used (or is of an order foxhunt did not send); "record": nowhere
TIGHTEN = {"halt": TradingState.HALTED, "reduce": TradingState.REDUCING, "record": None}


def state_dir(cfg: Config) -> Path:
    """`[state] dir` / FOXHUNT_STATE_DIR, else systemd's STATE_DIRECTORY, else a per-user default."""
    if cfg.state.dir:
        return Path(cfg.state.dir)
    if systemd := os.environ.get("STATE_DIRECTORY"):
        return Path(systemd.split(":")[0])
    if os.geteuid() == 0:
        return Path("/var/lib/foxhunt")
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "foxhunt"


def model_store(cfg: Config, location: str | None = None) -> ModelStore:
    """`location` (`--out`, `--store`), else `[models] store`, else models/ in the state directory; an
    s3:// location is a bucket (S3, or the server at `[models] s3_endpoint_url`)."""
    where = location or cfg.models.store or str(state_dir(cfg) / "models")
    if where.startswith("s3://"):
        return S3ModelStore(where, cfg.models.s3_endpoint_url, cfg.models.s3_region)
    return LocalModelStore(Path(where))


def checkpoint_dir(cfg: Config) -> Path:
    """Where training runs keep their checkpoints: checkpoints/ in the state directory."""
    return state_dir(cfg) / "checkpoints"


def configure_numba(cfg: Config) -> Path:
    """Where numba caches compiled kernels, set before any is compiled: `[state] numba_cache_dir`, else
    systemd's CACHE_DIRECTORY (the unit's CacheDirectory=), else the state directory. The default beside
    the source files is unwritable in a hardened install (ProtectSystem=strict)."""
    import numba

    if cfg.state.numba_cache_dir:
        path = Path(cfg.state.numba_cache_dir)
    elif systemd := os.environ.get("CACHE_DIRECTORY"):
        path = Path(systemd.split(":")[0]) / "numba"
    else:
        path = state_dir(cfg) / "numba-cache"
    numba.config.CACHE_DIR = str(path)
    return path


def admin_socket(cfg: Config) -> Path:
    """`[admin] socket`, else admin.sock in systemd's RUNTIME_DIRECTORY, else in the state directory."""
    if cfg.admin.socket:
        path = Path(cfg.admin.socket)
    elif runtime := os.environ.get("RUNTIME_DIRECTORY"):
        path = Path(runtime.split(":")[0]) / "admin.sock"
    else:
        path = state_dir(cfg) / "admin.sock"
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        raise ConfigError(f"admin.socket: {path} is longer than the {MAX_SOCKET_PATH} bytes a Unix socket path may have")
    return path


def fix_venue(cfg: Config) -> VenueFactory:
    """The FIX 4.4 venue of `[fix]`: its quickfix settings file written under the state directory, beside
    the message store (sequence numbers across restarts) and the message log. quickfix is imported here,
    only when a FIX venue is configured; it is an optional extra, built from source (pyproject.toml)."""
    try:
        import quickfix  # noqa: F401
    except ImportError:
        raise ConfigError(
            "[run] venue = \"fix\" needs the FIX engine quickfix, which paper trading does not install: "
            "pip install 'foxhunt[fix]' (scripts/setup fix)"
        ) from None
    from foxhunt.adapters.venues.fix.session import FixEngine, bundled_fix44, settings_text
    from foxhunt.adapters.venues.fix.venue import FixVenue

    f = cfg.fix
    if not f.port:
        raise ConfigError("[run] venue = \"fix\" needs fix.port (and fix.host) of the counterparty")
    dictionary = Path(f.data_dictionary) if f.data_dictionary else bundled_fix44()
    if not dictionary.is_file():
        raise ConfigError(f"fix.data_dictionary: no such file {dictionary}")
    try:
        logon = f.logon(os.environ)
    except ValueError as e:
        raise ConfigError(f"fix.{e}") from e
    # quickfix's message log and store hold every message as sent; the Logon's password is overwritten there
    # (adapters/venues/fix/session.py, `redact`), and the directory is the daemon's user's only all the same
    base = state_dir(cfg) / "fix"
    base.mkdir(mode=0o700, parents=True, exist_ok=True)
    base.chmod(0o700)
    settings = base / f"{f.sender_comp_id}-{f.target_comp_id}.cfg"
    settings.write_text(settings_text(
        sender=f.sender_comp_id, target=f.target_comp_id, host=f.host, port=f.port, heartbeat_s=f.heartbeat_s,
        reconnect_s=f.reconnect_s, reset_on_logon=f.reset_on_logon, store_dir=base / "store", log_dir=base / "log",
        data_dictionary=dictionary,
    ))

    def build(kernel: Kernel, trading: TradingConfig, clock: Clock) -> Venue:
        engine = FixEngine(settings, f.sender_comp_id, f.target_comp_id, f.max_messages_per_second, logon)
        return FixVenue(f"FIX:{f.target_comp_id}", engine, lambda: kernel.orders.by_id, account=f.account,
                        reconcile_timeout=f.reconcile_timeout_s, cancel_on_reconnect=f.cancel_on_reconnect,
                        mass_status=f.reconcile_with == "mass_status", ack_timeout=f.ack_timeout_s,
                        on_rejected_execution=TIGHTEN[f.on_rejected_execution], now=clock.now)

    return build


def ib_venue(cfg: Config) -> VenueFactory:
    """The Interactive Brokers venue of `[ib]`, through ib_async (imported here, only when configured)."""
    from ib_async import IB

    from foxhunt.adapters.venues.ib.venue import IbContract, IbVenue

    c = cfg.ib
    if not c.port:
        raise ConfigError("[run] venue = \"ib\" needs ib.port (and ib.host) of TWS or IB Gateway")
    if unknown := sorted(set(c.market_data) - set(cfg.instruments)):
        raise ConfigError(f"ib.market_data: not configured instruments: {', '.join(unknown)}")

    def contracts(instruments: dict) -> dict[str, IbContract]:
        out = {}
        for symbol, inst in instruments.items():
            spec = c.contracts.get(symbol)
            if spec is None and not (len(symbol) == 6 and symbol.isalpha()):
                raise ConfigError(f"ib.contracts.{symbol}: how IB knows this instrument is not configured"
                                  " (sec_type STK, FUT or CASH)")
            out[symbol] = IbContract(inst, "CASH") if spec is None else IbContract(inst, spec.sec_type, spec.exchange,
                                                                                   spec.expiry)
        return out

    def build(kernel: Kernel, trading: TradingConfig, clock: Clock) -> Venue:
        return IbVenue(f"IB:{c.host}:{c.port}", IB(), c.host, c.port, c.client_id, contracts(kernel.instruments),
                       lambda: kernel.orders.by_id, account=c.account, market_data=tuple(c.market_data),
                       backoff_max=c.backoff_max, connect_timeout=c.connect_timeout,
                       on_rejected_execution=TIGHTEN[c.on_rejected_execution],
                       on_foreign_execution=TIGHTEN[c.on_foreign_execution], probe_after=c.probe_after_s,
                       probe_timeout=c.probe_timeout_s, now=clock.now)

    return build


def operations(cfg: Config, journal: str, config_path: str | None = None) -> Operations:
    """The venue, systemd's notify socket (from the environment), the admin socket, telemetry, and how to
    read the configuration again on SIGHUP (`config_path` and the environment, as at start-up)."""
    admin = None
    if cfg.admin.enabled:
        a = cfg.admin
        admin = ServerPolicy(
            path=admin_socket(cfg), group=a.group, access=Access.resolve(a.allowed_users, a.allowed_groups),
            max_connections=a.max_connections, idle_timeout=a.idle_timeout,
            gateways=user_ids(a.gateway_users, "admin.gateway_users"),
        )
    exporter = cfg.telemetry.exporter or ("otlp" if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") else "none")
    tel = None
    if exporter != "none":
        from foxhunt.observability import telemetry

        t = cfg.telemetry
        tel = telemetry.build(exporter, t.metrics_interval, "foxhunt", journal, t.traces_per_second)
    venue = {"sim": lambda _: simulated_venue, "fix": fix_venue, "ib": ib_venue}[cfg.run.venue](cfg)
    if cfg.run.wire_log:
        venue = wire_logged(venue, Path(cfg.run.wire_log))
    return Operations(venue=venue, notifier=Notifier(), admin=admin, telemetry=tel,
                      reread_config=lambda: config.load(config_path),
                      config_source=config_path or "(defaults and environment)", scoring=scoring(cfg))


def scoring(cfg: Config) -> Callable[[TradingConfig, Clock, Kernel], ModelSource | None]:
    """The source of model inputs of a journal's strategy, on the device `[scoring]` names: the scoring source
    for the models it names, the policy source for the stored agent the strategy `agent` follows (its
    `policy`); None for a strategy that reads neither. torch is imported here, for such a strategy only: the
    other commands and strategies start without it."""

    def build(trading: TradingConfig, clock: Clock, kernel: Kernel) -> ModelSource | None:
        strategy = trading.strategy
        if strategy.name == "agent" and strategy.agent.policy:
            return PolicyService(policy_runner(cfg), strategy.agent.policy, cfg.features, cfg.scoring, clock, kernel,
                                 nanos(strategy.agent.trade_size))
        if not strategy.models:
            return None
        return ScoringService(model_runner(cfg), strategy.models, cfg.features, cfg.scoring, clock)

    return build


def model_runner(cfg: Config, store: str | None = None) -> ModelRunner:
    """The torch runner over the model store (`store`, else `[models] store`), on `[scoring]`'s device."""
    from foxhunt.adapters.inference.runner import TorchRunner  # torch, for the commands that use models

    s = cfg.scoring
    return TorchRunner(model_store(cfg, store), s.device, s.batch, s.graph, s.threads, s.compile, s.fuse)


def policy_runner(cfg: Config) -> PolicyRunner:
    """The torch runner of a stored trading agent, from `[models] store`, on `[scoring]`'s device."""
    from foxhunt.adapters.inference.policy import TorchPolicyRunner  # torch, as model_runner

    return TorchPolicyRunner(model_store(cfg), cfg.scoring.device, cfg.scoring.threads, cfg.scoring.graph,
                             cfg.scoring.fuse)


def run_request(cfg: Config, journal: str, feed_spec: str | None, clock_name: str | None, on_bad_row: str,
                max_events: int | None, duration: float | None, startup_signals: StartupSignals) -> RunRequest:
    """What `foxhunt run` asks of the daemon: the feed its spec names (`[run] feed` without one), on the
    clock the run is stamped with: the feed's own time for a record, the wall clock for a live feed (none, or
    synthetic with a rate), unless `clock_name` says."""
    spec = feed_spec or cfg.run.feed
    live = is_live(spec)
    if clock_name == "wall" and not live:
        # the strategies see the record's time, the throttles measure in real time: a record read at
        # thousands of quotes a second asks for orders far faster than any throttle lets through
        log.warning("wall_clock_on_a_record", feed=spec, detail="the order throttles measure on the wall clock:"
                    " a record read as fast as it can be meets them")
    clock = WallClock() if (clock_name or ("wall" if live else "feed")) == "wall" else EventClock()
    feed = open_feed(spec, cfg.trading().build_instruments(), clock, on_bad_row)
    return RunRequest(journal, feed, clock, max_events, duration, feed_rate=getattr(feed, "rate", None),
                      startup_signals=startup_signals)


def ingest_feed(cfg: Config, file: str, on_bad_row: str) -> Iterable[Input]:
    """What `foxhunt ingest FILE` loads: a data file (CSV, Parquet or Arrow, by its extension) or a feed
    spec, on the feed's own time."""
    spec = file if file.partition(":")[0] in ("synthetic", *FILE_KINDS) or file == "none" else file_spec(file)
    feed = open_feed(spec, cfg.trading().build_instruments(), EventClock(), on_bad_row)
    if feed is None:
        raise InputError("ingest needs a feed to load: a data file or a synthetic:... spec, not none")
    return feed


def paper_operations(telemetry: Telemetry | None = None) -> Operations:
    """The simulated venue and no supervisor: a run inside a test or a benchmark."""
    return Operations(venue=simulated_venue, notifier=Notifier({}), telemetry=telemetry)


def simulated_venue(kernel: Kernel, trading: TradingConfig, clock: Clock) -> Venue:
    return SimVenue(kernel.instruments, trading.venue, clock)


def agent_engine() -> Engine:
    """How the trading environment builds an episode: the kernel, the simulated venue and the event clock a
    backtest builds, and this machine's fingerprint (training/rl/episode.py). gymnasium is imported here, by the
    commands that train agents, not by every start."""
    from foxhunt.runtime.recovery import build_kernel
    from foxhunt.training.rl.episode import Engine

    return Engine(build_kernel, simulated_venue, EventClock, fingerprint())


def wire_logged(venue: VenueFactory, path: Path) -> VenueFactory:
    """`[run] wire_log`: every command and report of the venue also written to `path`, as it passes."""
    return lambda kernel, trading, clock: WireLoggedVenue(venue(kernel, trading, clock), path)


async def backtest(store: JournalStore, name: str, trading: TradingConfig, rescore_with: Config | None = None, *,
                   track: Callable[[Kernel, JournalWriter], JournalWriter] | None = None,
                   progress: Callable[[int], None] | None = None) -> dict[str, object]:
    """`foxhunt replay` without --verify: the journal's outside inputs through the simulated venue, with the
    journal's model scores and agents' decisions, or (`rescore_with`, --rescore) scores computed again by the
    models the strategy names, or decisions made again by the agent the strategy `agent` follows, from that
    configuration's model store and on its scoring device."""
    rescore: replay.Recompute | None = None
    agent = trading.strategy.agent
    if rescore_with is not None and trading.strategy.name == "agent" and agent.policy:
        rescore = Redecide(policy_runner(rescore_with), agent.policy, rescore_with.features, rescore_with.scoring.keep,
                           nanos(agent.trade_size))
    elif rescore_with is not None:
        rescore = Rescore(model_runner(rescore_with), trading.strategy.models, rescore_with.scoring.keep,
                          rescore_with.features)
    return await replay.backtest(store, name, trading, simulated_venue, DiscardingJournal(), rescore, track, progress)


async def verify(store: JournalStore, name: str, trading: TradingConfig, cfg: Config,
                 progress: Callable[[int], None] | None = None) -> dict[str, object]:
    """`foxhunt replay --verify`: every derived event, and every model score and served agent's decision
    recomputed by the store's model on `[scoring]`'s device (a runner is built at the journal's first
    ModelsLoaded: a journal without scores needs no torch)."""
    policies = PolicyCheck(lambda: policy_runner(cfg), cfg.scoring.keep)
    return await replay.verify(store, name, trading, ScoreCheck(lambda: model_runner(cfg), cfg.scoring.keep, policies),
                               progress)


@dataclass(frozen=True)
class BacktestTrainable:
    """A sweep's point (training/sweep.py): a replay backtest of each journal with the point's overrides
    after the sweep's own `sets`, on the journals' inputs copied into memory once per worker process (a
    sweep reads each journal from PostgreSQL once a worker, not once a point). Its metrics: the PnL summed
    over the journals (each in its own currency), orders, fills, denials, the largest drawdown, the
    report's Sharpe, Sortino and maximum drawdown of the first journal's run (runtime/performance.py), and
    each journal's PnL and state digest (`pnl.NAME`, `state_digest.NAME`), which equal those of `foxhunt
    replay NAME --set ...` (with `rescore`, of `foxhunt replay NAME --rescore --set ...`: the scores or an
    agent's decisions made again by the models the point's configuration names, so that a sweep can put
    models or agents side by side)."""

    cfg: Config
    dsn: str
    journals: tuple[str, ...]
    sets: tuple[str, ...] = ()
    rescore: bool = False

    def __call__(self, overrides: tuple[str, ...], seed: int, report: Callable[..., None], workdir: Path
                 ) -> dict[str, object]:
        return anyio.run(self._run, overrides)

    async def _run(self, overrides: tuple[str, ...]) -> dict[str, object]:
        from foxhunt.runtime import report as reports
        from foxhunt.runtime.recovery import trading_config

        store = await _in_memory(self.cfg, self.dsn, self.journals)
        metrics: dict[str, object] = {"pnl": 0.0, "orders": 0, "fills": 0, "denied": 0, "max_drawdown": 0.0}
        for i, name in enumerate(self.journals):
            trading = await trading_config(store, name, [*self.sets, *overrides], None)
            trackers: list[reports.Tracker] = []

            def track(kernel: Kernel, journal: JournalWriter, name: str = name,
                      trackers: list[reports.Tracker] = trackers) -> JournalWriter:
                trackers.append(reports.Tracker(kernel, name))
                return reports.TrackingJournal(journal, trackers[-1])

            summary = await backtest(store, name, trading, self.cfg if self.rescore else None,
                                     track=track if i == 0 else None)
            pnl = sum(float(v) for v in summary["pnl"].values())  # type: ignore[union-attr]
            metrics["pnl"] = float(metrics["pnl"]) + pnl  # type: ignore[arg-type]
            for key in ("orders", "fills", "denied"):
                metrics[key] = int(metrics[key]) + int(summary[key])  # type: ignore[call-overload]
            metrics["max_drawdown"] = max(float(metrics["max_drawdown"]), float(summary["max_drawdown"]))  # type: ignore[arg-type]
            metrics[f"pnl.{name}"] = pnl
            metrics[f"state_digest.{name}"] = summary["state_digest"]
            if trackers:
                figures = reports.measure(trackers[0].finish(), None, trading)
                for key in ("sharpe", "sortino", "total_return", "max_drawdown"):
                    metrics["drawdown" if key == "max_drawdown" else key] = figures.metrics[key]
        return metrics


_IN_MEMORY: dict[tuple[str, str, int], MemoryJournalStore] = {}  # (DSN, journal, last seq) -> its inputs


async def _in_memory(cfg: Config, dsn: str, names: Sequence[str]) -> MemoryJournalStore:
    """The journals' inputs (what a backtest reads) in one memory store, read from PostgreSQL the first
    time this process needs them, and again only if a journal grew."""
    pg = None
    memory = MemoryJournalStore()
    for name in names:
        if pg is None:
            pg = await open_store(cfg, dsn)
        info = await pg.info(name)
        cached = _IN_MEMORY.get((dsn, name, info.last_seq))
        if cached is None:
            cached = MemoryJournalStore()
            async with cached.writer(name, config=b"{}", config_digest=info.config_digest, fingerprint={}) as w:
                async with aclosing(pg.read(name, decode_derived=False)) as pages:
                    async for page in pages:
                        for record in page:
                            if record.causation is None:
                                w.append_input(record)
            _IN_MEMORY[(dsn, name, info.last_seq)] = cached
        memory.adopt(cached, name)
    return memory


def embedded_cluster(cfg: Config) -> EmbeddedCluster:
    return EmbeddedCluster(state_dir(cfg))


def resolve_dsn(cfg: Config) -> str:
    """The configured DSN, or the embedded cluster's, started on demand."""
    return cfg.journal.dsn or embedded_cluster(cfg).start()


def archive_journal(cfg: Config, name: str, through_seq: int, directory: Path,
                    progress: Callable[[int, int], None] | None = None) -> list[partitions.Archive]:
    """`foxhunt journal archive`: the journal's whole old ranges out of the database (docs/journal.md). A
    traded journal keeps what its next start-up needs: nothing after its newest usable snapshot goes."""
    dsn = resolve_dsn(cfg)
    through_seq = anyio.run(_archivable_through, cfg, dsn, name, through_seq)
    return partitions.archive(dsn, name, through_seq, directory, progress)


async def _archivable_through(cfg: Config, dsn: str, name: str, through_seq: int) -> int:
    store = await open_store(cfg, dsn)
    try:
        built_with = await kernel_config(store, name)
    except (JournalMismatch, JournalArchived):  # no kernel to start again: ingested data, or no run at all
        return through_seq
    usable = [s.seq for s in await store.snapshots(name) if snapshots.unusable(s, built_with) is None]
    if not usable:
        raise JournalError(
            f"journal {name!r} is traded, and its start-up would need the events archived: take a snapshot"
            f" first (`foxhunt journal snapshot {name}`), then archive through it"
        )
    if usable[0] < through_seq:
        log.warning("archive_kept_after_snapshot", journal=name, asked_through=through_seq, through=usable[0],
                    why="start-up needs the events after the newest usable snapshot")
    return min(through_seq, usable[0])


def snapshot_journal(cfg: Config, name: str, progress: Callable[[int, int], None] | None = None
                     ) -> tuple[Snapshot, Recovery]:
    """`foxhunt journal snapshot`: the journal's kernel after its last committed input, stored for start-up;
    `progress` hears (sequence number reached, the journal's last)."""

    async def go():
        store = await open_store(cfg, resolve_dsn(cfg))
        last = (await store.info(name)).last_seq
        return await snapshot(store, name, await kernel_config(store, name),
                              None if progress is None else lambda seq: progress(seq, last))

    return anyio.run(go)


def restore_journal(cfg: Config, name: str, progress: Callable[[int, int], None] | None = None
                    ) -> list[partitions.Archive]:
    """`foxhunt journal restore`: the journal's archived ranges back into the database."""
    dsn = resolve_dsn(cfg)
    anyio.run(migrate, dsn)
    return partitions.restore(dsn, name, progress)


def web_gateway(cfg: Config, dsn: str, store: PostgresJournalStore):
    """`foxhunt web serve`: the gateway's shared parts (foxhunt/web/app.py), on the journal database."""
    from foxhunt.web.app import Gateway
    from foxhunt.web.db import Database
    from foxhunt.web.reports import Reports

    socket = Path(cfg.web.admin_socket) if cfg.web.admin_socket else admin_socket(cfg)
    reports = Reports(lambda: PostgresJournalStore(dsn, store.policy))
    return Gateway(store, Database(dsn), cfg.web, socket, reports)


async def open_store(cfg: Config, dsn: str) -> PostgresJournalStore:
    await migrate(dsn)
    j = cfg.journal
    policy = WriterPolicy(
        batch_max=j.batch_max, queue_max=j.queue_max, stall_after=j.stall_after, write_timeout=j.write_timeout,
        backoff_max=j.reconnect_backoff_max, partition_span=j.partition_span,
    )
    return PostgresJournalStore(dsn, policy)


def fingerprint() -> dict[str, str]:
    """Where a run happened; journaled with every RunStarted. Stable across runs on one machine."""
    return {
        "foxhunt": foxhunt.__version__,
        "kernel": str(BEHAVIOUR),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "machine": platform.machine(),
        "system": platform.system(),
        "msgspec": msgspec.__version__,
    }
