"""Configuration: frozen Structs loaded from TOML, with environment overrides and exact errors.

Sources, later ones winning, each merged into the one before (sections merge, values replace): the
built-in defaults, the TOML file (`--config`), environment variables, and `--set key.path=value` (replay
only). Instruments in a file are added to the built-in ones. `FOXHUNT_DSN` and `FOXHUNT_STATE_DIR` set `journal.dsn` and
`state.dir`; any other setting is `FOXHUNT_<SECTION>__<KEY>`, sections and keys joined by double
underscores (`FOXHUNT_STRATEGY__EMA_CROSS__FAST=5`). Override values are read as TOML values when they
parse as one (numbers, booleans, quoted strings) and as plain strings otherwise.

An unknown key or a wrong type is a `ConfigError` naming the key path and the source it came from.
"""

from __future__ import annotations

import hashlib
import os
import tomllib
from collections.abc import Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

import msgspec

from foxhunt.core.features import FeatureSpec
from foxhunt.core.risk.limits import RiskLimits
from foxhunt.core.strategies import StrategyParams
from foxhunt.errors import ConfigError
from foxhunt.messages.base import nanos
from foxhunt.messages.market import Instrument
from foxhunt.models.agent_configs import AgentsConfig
from foxhunt.models.configs import TrainConfig


class _Section(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    pass


class JournalConfig(_Section, frozen=True, kw_only=True):
    dsn: str = ""
    durability: Literal["before_send", "async"] = "before_send"
    batch_max: int = 10_000
    queue_max: int = 100_000
    stall_after: float = 1.0
    write_timeout: float = 30.0
    reconnect_backoff_max: float = 5.0
    partition_span: int = 50_000_000  # events per partition range; a journal keeps the span it was created with
    snapshot_after: int = 100_000  # inputs since the last kernel snapshot for a start or stop to save one; 0: never

    def __post_init__(self) -> None:
        if self.partition_span < 1:
            raise ValueError(f"partition_span must be positive, got {self.partition_span}")
        if self.snapshot_after < 0:
            raise ValueError(f"snapshot_after must be 0 (never) or positive, got {self.snapshot_after}")
        if not 0 < self.batch_max <= self.queue_max:
            raise ValueError(f"needs 0 < batch_max <= queue_max, got {self.batch_max} and {self.queue_max}")
        if not 0 < self.stall_after < self.write_timeout or self.reconnect_backoff_max <= 0:
            raise ValueError("needs 0 < stall_after < write_timeout and reconnect_backoff_max > 0")


class StateConfig(_Section, frozen=True, kw_only=True):
    dir: str = ""
    numba_cache_dir: str = ""


class RunConfig(_Section, frozen=True, kw_only=True):
    seed: int = 7
    feed: str = "synthetic:seed=7,n=100000"
    wire_log: str = ""
    on_stop: Literal["cancel", "leave"] = "cancel"  # working orders when the daemon stops on purpose
    venue: Literal["sim", "fix", "ib"] = "sim"  # where orders go: the simulated venue, [fix] or [ib]


class FixConfig(_Section, frozen=True, kw_only=True):
    sender_comp_id: str = "FOXHUNT"
    target_comp_id: str = "EXCHANGE"
    host: str = "127.0.0.1"
    port: int = 0
    heartbeat_s: int = 30
    reconnect_s: int = 5
    reset_on_logon: bool = False
    account: str = ""  # Account(1) on every order, when set
    max_messages_per_second: float = 50.0  # toward the counterparty; 0: no limit
    reconcile_timeout_s: float = 10.0  # after a logon, how long to wait for order statuses
    # after a logon, how working orders are reconciled: one OrderStatusRequest each, or one
    # OrderMassStatusRequest (where the counterparty supports it) and a status request for any it leaves out
    reconcile_with: Literal["order_status", "mass_status"] = "order_status"
    cancel_on_reconnect: bool = False  # after reconciling, cancel every working order
    ack_timeout_s: float = 10.0  # an order the counterparty has not acknowledged this long is asked about
    # where trading goes when an execution report cannot be used (refused by the session layer, unreadable):
    # an execution may have vanished, and only an operator can reconcile the positions
    on_rejected_execution: Literal["halt", "reduce"] = "halt"
    data_dictionary: str = ""  # FIX44.xml to validate with; empty: the one the quickfix package ships
    username: str = ""  # Username(553) on Logon, when set
    # the environment variable that holds Password(554) for Logon: a secret stays out of the config file
    # (and so out of logs of it); "" for none
    password_env: str = ""
    # more fields for Logon, by tag (a counterparty's own, say its cancel-on-disconnect flag)
    logon_fields: dict[str, str] = {}

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535 or self.heartbeat_s <= 0 or self.reconnect_s <= 0:
            raise ValueError("needs 0 <= port <= 65535, heartbeat_s > 0 and reconnect_s > 0")
        if self.max_messages_per_second < 0 or self.reconcile_timeout_s <= 0 or self.ack_timeout_s <= 0:
            raise ValueError("needs max_messages_per_second >= 0, reconcile_timeout_s > 0 and ack_timeout_s > 0")
        for tag, value in self.logon_fields.items():
            if not tag.isdigit() or int(tag) == 0:
                raise ValueError(f"logon_fields: {tag!r} is not a FIX tag number")
            if int(tag) in (553, 554):
                raise ValueError(f"logon_fields: tag {tag} is set by username and password_env")
            if not value or "\x01" in value:
                raise ValueError(f"logon_fields: tag {tag}: a value must be non-empty and hold no SOH")

    def logon(self, environ: Mapping[str, str]) -> list[tuple[int, str]]:
        """The fields foxhunt adds to its Logon(A): Username, Password (read from `environ` now) and the
        others configured, in that order."""
        out = [(553, self.username)] if self.username else []
        if self.password_env:
            password = environ.get(self.password_env)
            if not password:
                raise ValueError(f"password_env: the environment variable {self.password_env} is not set")
            out.append((554, password))
        return out + [(int(tag), value) for tag, value in self.logon_fields.items()]


class AdminConfig(_Section, frozen=True, kw_only=True):
    enabled: bool = True
    socket: str = ""  # default: admin.sock in systemd's RUNTIME_DIRECTORY, else in the state directory
    group: str = ""  # "": socket mode 0600; a group: mode 0660, owned by that group
    allowed_users: list[str] = []  # with allowed_groups: who may connect; both empty: the daemon's own user
    allowed_groups: list[str] = []
    # Unix users (the web gateway's) that may name the person they act for: the daemon journals that name as
    # the command's operator, with the gateway's uid. Empty: nobody may.
    gateway_users: list[str] = []
    max_connections: int = 8
    idle_timeout: float = 3600.0  # seconds an admin connection may sit silent

    def __post_init__(self) -> None:
        if self.max_connections <= 0 or self.idle_timeout <= 0:
            raise ValueError("needs max_connections > 0 and idle_timeout > 0")


class WebConfig(_Section, frozen=True, kw_only=True):
    """`foxhunt web`: the gateway process (foxhunt/web/); docs/web.md."""

    listen: str = "127.0.0.1:8787"  # HOST:PORT; anything but loopback belongs behind a TLS reverse proxy
    journal: str = ""  # the live daemon's journal: the dashboard's and /api/status's; "" for none
    admin_socket: str = ""  # the daemon's admin socket; "" for the one `foxhunt run` with this config makes
    secure_cookies: bool = False  # true behind a TLS proxy: the session cookie then travels over HTTPS only
    session_hours: float = 8.0
    login_attempts: int = 5  # failed logins a client may make in login_window seconds
    login_window: float = 60.0
    views: int = 8  # journals the gateway follows at once (least recently used dropped)
    forwarded_allow_ips: list[str] = []  # proxies whose X-Forwarded-For names the client (login limit, logs)
    # the Host headers served (HOST or HOST:PORT, as the browser's address bar has it); [] for the listen
    # address's own when it is loopback (127.0.0.1, localhost and [::1] at its port), anything otherwise: a
    # page of another site, whose name an attacker points at 127.0.0.1 (DNS rebinding), is refused
    allowed_hosts: list[str] = []

    def hosts(self) -> frozenset[str] | None:
        """The Host headers served, lower-case; None for any."""
        if self.allowed_hosts:
            return frozenset(h.lower() for h in self.allowed_hosts)
        host, port = self.address()
        if host in ("127.0.0.1", "localhost", "::1") or host.startswith("127."):
            return frozenset(f"{h}:{port}" for h in ("127.0.0.1", "localhost", "[::1]", host))
        return None

    def __post_init__(self) -> None:
        host, sep, port = self.listen.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"listen: HOST:PORT, got {self.listen!r}")
        if self.session_hours <= 0 or self.login_attempts <= 0 or self.login_window <= 0 or self.views <= 0:
            raise ValueError("needs session_hours, login_attempts, login_window and views > 0")

    def address(self) -> tuple[str, int]:
        host, _, port = self.listen.rpartition(":")
        return host.strip("[]"), int(port)


class IbContractConfig(_Section, frozen=True, kw_only=True):
    sec_type: Literal["CASH", "STK", "FUT"]
    exchange: str = ""  # default: IDEALPRO for CASH, SMART for STK; required for FUT
    expiry: str = ""  # FUT: YYYYMM or YYYYMMDD


class IbConfig(_Section, frozen=True, kw_only=True):
    host: str = "127.0.0.1"
    port: int = 0  # TWS paper 7497, live 7496; IB Gateway paper 4002, live 4001
    client_id: int = 1
    account: str = ""  # sent with every order, when set
    connect_timeout: float = 10.0
    backoff_max: float = 30.0  # longest wait between connection attempts
    # how IB knows each instrument; an instrument of six letters not listed here is a currency pair (CASH)
    contracts: dict[str, IbContractConfig] = {}
    market_data: list[str] = []  # instruments whose quotes come from IB (top of book), journaled as inputs
    # where trading goes when an execution or order status from IB cannot be used (see [fix])
    on_rejected_execution: Literal["halt", "reduce"] = "halt"
    # where trading goes when IB reports an execution of an order foxhunt did not send (money moved in the
    # account that the kernel's positions and risk know nothing of); "record": journaled, trading goes on
    # (an account an operator also trades in by hand)
    on_foreign_execution: Literal["halt", "reduce", "record"] = "halt"
    # after this many seconds without a word from IB, a request must be answered within probe_timeout_s,
    # else the connection is dropped, journaled, made again and reconciled
    probe_after_s: float = 30.0
    probe_timeout_s: float = 10.0

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535 or self.connect_timeout <= 0 or self.backoff_max <= 0:
            raise ValueError("needs 0 <= port <= 65535, connect_timeout > 0 and backoff_max > 0")
        if self.probe_after_s <= 0 or self.probe_timeout_s <= 0:
            raise ValueError("needs probe_after_s > 0 and probe_timeout_s > 0")
        for symbol, c in self.contracts.items():
            if c.sec_type == "FUT" and not (c.exchange and c.expiry):
                raise ValueError(f"contracts.{symbol}: a future needs exchange and expiry")


class TelemetryConfig(_Section, frozen=True, kw_only=True):
    # none: instrumentation off; console: spans and metrics printed to stderr; otlp: exported to
    # OTEL_EXPORTER_OTLP_ENDPOINT. Default: otlp when that variable is set, else none.
    exporter: Literal["", "none", "console", "otlp"] = ""
    metrics_interval: float = 10.0  # seconds between metric exports
    traces_per_second: float = 20.0  # orders traced and timed per second, at most (counters count them all)

    def __post_init__(self) -> None:
        if self.metrics_interval <= 0 or self.traces_per_second < 0:
            raise ValueError("needs metrics_interval > 0 and traces_per_second >= 0")


class ModelsConfig(_Section, frozen=True, kw_only=True):
    """[models]: where trained models are kept (adapters/models/store.py)."""

    store: str = ""  # a directory, or s3://bucket/prefix; "": models/ in the state directory
    s3_endpoint_url: str = ""  # an S3-compatible server's address (MinIO, Ceph); "": AWS
    s3_region: str = ""


class ScoringConfig(_Section, frozen=True, kw_only=True):
    """[scoring]: how the scoring source serves the models the strategy reads (runtime/scoring.py). Not
    journaled with the kernel's configuration: where a score was computed changes its bytes, never what the
    kernel does with a score; ModelsLoaded records the device and its fingerprint."""

    device: str = "auto"  # "auto": the GPU where torch sees one, else the CPU; or "cpu", "cuda", "cuda:N"
    batch: int = 4  # rows per model call, padded: the symbols whose windows are ready score together
    graph: bool = True  # on a GPU, replay each model as a CUDA graph
    compile: bool = False  # on a GPU, fuse each model's forward with torch.compile inside that graph
    fuse: bool = False  # on a GPU, serve in foxhunt's Triton kernels the models that have them (attention,
    # mamba2, tft, and the Rainbow agent)
    threads: int = 1  # torch's CPU threads (a fixed number: a reduction's order may follow it)
    deadline_ms: float = 250.0  # a call that takes longer is a ModelFailed, and trading goes to REDUCING
    load_deadline_s: float = 120.0  # loading a model (graph capture and warm-up included)
    keep: int = 4096  # rows kept per symbol, so a replay can rebuild a window that many rows later

    def __post_init__(self) -> None:
        if self.batch < 1 or self.threads < 1 or self.keep < 1:
            raise ValueError("batch, threads and keep must be positive")
        if not self.deadline_ms > 0 or not self.load_deadline_s > 0:
            raise ValueError("deadline_ms and load_deadline_s must be positive")


class SimVenueConfig(_Section, frozen=True, kw_only=True):
    """[venue]: the simulated venue (adapters/venues/sim.py), for paper trading and backtests."""

    name: str = "SIM"
    latency_ns: int = 0
    fee_bps: Decimal = Decimal("0.2")


class InstrumentConfig(_Section, frozen=True, kw_only=True):
    tick_size: Decimal
    lot_size: Decimal
    currency: str
    multiplier: int = 1
    # the grid executions are priced on, where finer than tick_size: US equities trade at sub-penny prices
    # (mid-point and price-improved executions) that Reg NMS Rule 612 forbids only in orders and quotes
    execution_tick: Decimal | None = None


DEFAULT_INSTRUMENTS = {
    "EURUSD": InstrumentConfig(tick_size=Decimal("0.00001"), lot_size=Decimal("1000"), currency="USD"),
    "GBPUSD": InstrumentConfig(tick_size=Decimal("0.00001"), lot_size=Decimal("1000"), currency="USD"),
    "USDJPY": InstrumentConfig(tick_size=Decimal("0.001"), lot_size=Decimal("1000"), currency="JPY"),
}


class TradingConfig(_Section, frozen=True, kw_only=True):
    """The part of the configuration that decides what the kernel does: journaled with every run,
    digested, and what replay rebuilds the kernel from. Never holds secrets."""

    seed: int
    instruments: dict[str, InstrumentConfig]
    strategy: StrategyParams
    risk: RiskLimits
    venue: SimVenueConfig

    def digest(self) -> str:
        return hashlib.sha256(self.to_json()).hexdigest()[:16]

    def to_json(self) -> bytes:
        return msgspec.json.encode(self)

    def build_instruments(self) -> dict[str, Instrument]:
        out = {}
        for symbol, ic in sorted(self.instruments.items()):
            try:
                inst = Instrument(
                    symbol=symbol, tick_size=nanos(ic.tick_size), lot_size=nanos(ic.lot_size),
                    currency=ic.currency, multiplier=ic.multiplier,
                    execution_tick=nanos(ic.execution_tick) if ic.execution_tick is not None else 0,
                )
            except ValueError as e:
                raise ConfigError(f"instruments.{symbol}: {e}") from e
            if inst.tick_size <= 0 or inst.lot_size <= 0 or inst.multiplier < 1:
                raise ConfigError(f"instruments.{symbol}: tick_size and lot_size must be positive, multiplier at"
                                  f" least 1 (got {ic.tick_size}, {ic.lot_size}, {ic.multiplier})")
            if ic.execution_tick is not None and (inst.execution_tick <= 0 or inst.tick_size % inst.execution_tick):
                raise ConfigError(f"instruments.{symbol}.execution_tick: {ic.execution_tick} must be positive and"
                                  f" divide tick_size {ic.tick_size} (a price on the tick is a price executions take)")
            out[symbol] = inst
        return out


class Config(_Section, frozen=True, kw_only=True):
    journal: JournalConfig = JournalConfig()
    state: StateConfig = StateConfig()
    run: RunConfig = RunConfig()
    admin: AdminConfig = AdminConfig()
    fix: FixConfig = FixConfig()
    ib: IbConfig = IbConfig()
    telemetry: TelemetryConfig = TelemetryConfig()
    web: WebConfig = WebConfig()
    instruments: dict[str, InstrumentConfig] = msgspec.field(default_factory=lambda: dict(DEFAULT_INSTRUMENTS))
    strategy: StrategyParams = StrategyParams()
    risk: RiskLimits = RiskLimits()
    venue: SimVenueConfig = SimVenueConfig()
    features: FeatureSpec = FeatureSpec()  # what models read (core/features/spec.py)
    train: TrainConfig = TrainConfig()  # how `foxhunt train` trains them (models/configs.py)
    models: ModelsConfig = ModelsConfig()
    scoring: ScoringConfig = ScoringConfig()
    agents: AgentsConfig = AgentsConfig()  # the trading environment and the agents trained in it

    def trading(self) -> TradingConfig:
        return TradingConfig(
            seed=self.run.seed, instruments=self.instruments, strategy=self.strategy, risk=self.risk,
            venue=self.venue,
        )


ENV_ALIASES = {"FOXHUNT_DSN": ("journal", "dsn"), "FOXHUNT_STATE_DIR": ("state", "dir")}


def load(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> Config:
    """Defaults, then the file, then the environment; each stage validated, errors naming their source."""
    env = os.environ if env is None else env
    raw: dict[str, Any] = msgspec.to_builtins(Config())
    if path is not None:
        from_file = read_toml(Path(path))
        convert(from_file, Config, str(path))
        merge(raw, from_file)
    overrides = env_overrides(env)
    for source, keys, value in overrides:
        set_path(raw, keys, value, source, any_case=True, text=env[source])
    where = str(path) if path else "defaults"
    if overrides:
        where += " with " + ", ".join(source for source, _, _ in overrides)
    return convert(raw, Config, where)


def read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except OSError as e:
        raise ConfigError(f"cannot read config file {path}: {e.strerror}") from e
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: invalid TOML: {e}") from e


def env_overrides(env: Mapping[str, str]) -> list[tuple[str, list[str], Any]]:
    found = []
    for name in sorted(env):
        if name in ENV_ALIASES:
            found.append((name, list(ENV_ALIASES[name]), env[name]))
        elif name.startswith("FOXHUNT_") and "__" in name:
            keys = name[len("FOXHUNT_"):].split("__")
            found.append((name, keys, parse_value(env[name])))
    return found


def apply_sets(raw: dict[str, Any], assignments: list[str]) -> dict[str, Any]:
    """Apply `--set a.b.c=value` assignments to a plain dict."""
    for item in assignments:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item!r}: expected key.path=value")
        set_path(raw, key.strip().split("."), parse_value(value), f"--set {item}", text=value)
    return raw


def override(cfg: Config, assignments: Sequence[str]) -> Config:
    """`cfg` with `--set a.b.c=value` assignments over it, checked as a whole like a file (a key that is no
    setting, or a value of the wrong type, is a ConfigError naming it)."""
    if not assignments:
        return cfg
    raw = apply_sets(msgspec.to_builtins(cfg), list(assignments))
    return convert(raw, Config, "--set " + " ".join(assignments))


def merge(base: dict[str, Any], update: dict[str, Any]) -> None:
    """Deep-merge `update` into `base`: sections merge, values replace."""
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merge(base[key], value)
        else:
            base[key] = value


def set_path(
    raw: dict[str, Any], keys: list[str], value: Any, source: str, any_case: bool = False, text: str | None = None
) -> None:
    """Set raw[k1][k2]... = value. Environment names are upper case, so `any_case` matches existing keys
    (instrument symbols among them) regardless of case; a new key is lower case like every setting, except
    under `instruments`, whose keys are symbols and keep the case they were given in. `text`: the value as
    written (an environment variable, a --set), kept as it is where the setting holds text (a CompID of
    digits is still a name)."""
    node = raw
    for i, key in enumerate(keys):
        if any_case:
            parent = keys[i - 1].lower() if i else ""
            fallback = key if parent == "instruments" else key.lower()
            key = next((k for k in node if k.lower() == key.lower()), fallback)
        if i == len(keys) - 1:
            keep_text = text is not None and isinstance(node.get(key), str) and not isinstance(value, str)
            node[key] = text if keep_text else value
            return
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            raise ConfigError(f"{source}: {'.'.join(keys)} goes through {key!r}, which is not a section")
        node = child


def parse_value(text: str) -> Any:
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def convert(raw: dict[str, Any], cls: type, where: str):
    """`raw` as `cls`, strictly: a setting of the wrong type is an error naming it, never converted (a
    string where a number belongs, 1 where a boolean does); a decimal may be written as a string, an
    integer or a float, and an integer where a float belongs."""
    try:
        return msgspec.convert(raw, cls, strict=True)
    except msgspec.ValidationError as e:
        message, _, path = str(e).partition(" - at `$")
        key = path.rstrip("`").lstrip(".").replace("[...]", ".*").replace("[", ".").replace("]", "")
        raise ConfigError(f"{where}: {key + ': ' if key else ''}{message}") from e


def declare_instruments(cfg: Config, specs: Sequence[str], file: str | Path | None = None) -> Config:
    """`cfg` with instruments declared outside its file, for data whose instruments it does not list: in a
    small TOML file of `[SYMBOL]` tables (`--instruments FILE`), then on the command line (`--instrument
    SYMBOL:tick_size=0.01,lot_size=0.001,currency=USD[,multiplier=N][,execution_tick=X]`), each replacing a
    configured instrument of its symbol. A missing or unknown key is an error naming it and where."""
    declared: dict[str, InstrumentConfig] = {}
    if file is not None:
        for symbol, table in read_toml(Path(file)).items():
            if not isinstance(table, dict):
                raise ConfigError(f"{file}: {symbol}: expected a table [{symbol}] of tick_size, lot_size, currency")
            declared[symbol] = _instrument(table, f"{file}: [{symbol}]")
    for spec in specs:
        symbol, sep, rest = spec.partition(":")
        where = f"--instrument {spec}"
        if not sep or not symbol.strip():
            raise ConfigError(f"{where}: expected SYMBOL:tick_size=...,lot_size=...,currency=...")
        table: dict[str, Any] = {}
        for part in filter(None, rest.split(",")):
            key, eq, value = part.partition("=")
            if not eq:
                raise ConfigError(f"{where}: {part!r} is not key=value")
            key, value = key.strip(), value.strip()
            table[key] = _toml_value(value) if key == "multiplier" else value  # decimals kept as written
        declared[symbol.strip()] = _instrument(table, where)
    if not declared:
        return cfg
    built = msgspec.structs.replace(cfg, instruments={**cfg.instruments, **declared})
    built.trading().build_instruments()  # a tick that is not positive, an execution tick that does not divide it
    return built


def write_trading(trading: TradingConfig, path: Path) -> None:
    """`trading` as a configuration file the daemon loads with --config (`[run] seed`, `[instruments]`,
    `[strategy]`, `[risk]`, `[venue]`): a sweep's best point. Settings left unset (None) are left out."""
    import tomli_w

    def present(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: present(v) for k, v in value.items() if v is not None}
        if isinstance(value, (list, tuple)):
            return [present(v) for v in value]
        return value

    raw = present(msgspec.to_builtins(trading))
    document = {"run": {"seed": raw.pop("seed")}, **raw}
    try:
        path.write_text(tomli_w.dumps(document))
    except OSError as e:
        raise ConfigError(f"cannot write {path}: {e.strerror}") from e


def _instrument(table: dict[str, Any], where: str) -> InstrumentConfig:
    needed = [k for k in ("tick_size", "lot_size", "currency") if k not in table]
    if needed:
        raise ConfigError(f"{where}: missing {', '.join(needed)} (an instrument needs tick_size, lot_size and"
                          " currency)")
    return convert(table, InstrumentConfig, where)


def _toml_value(text: str) -> Any:
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def trading_from_json(data: bytes, sets: list[str] | None = None) -> TradingConfig:
    """Rebuild a recorded TradingConfig, optionally with `--set` what-if overrides."""
    raw = msgspec.json.decode(data)
    if sets:
        apply_sets(raw, sets)
    return convert(raw, TradingConfig, "recorded config" + (" with --set" if sets else ""))


RELOADABLE = ("risk",)  # sections a running daemon applies on SIGHUP; any other change needs a restart
FIXED_FOR_A_JOURNAL = ("instruments", "strategy", "venue")  # what a journal's kernel is built with, for good


def changes(old: Config, new: Config) -> tuple[list[str], list[str]]:
    """What differs between two configurations, as dotted key paths: (risk limits, which a reload applies,
    named without the `risk.` prefix; everything else, which only a restart applies)."""
    differ = _differences(_flatten(msgspec.to_builtins(old)), _flatten(msgspec.to_builtins(new)))
    reloadable = [k.split(".", 1)[1] for k in differ if k.split(".", 1)[0] in RELOADABLE]
    return reloadable, [k for k in differ if k.split(".", 1)[0] not in RELOADABLE]


def fixed_changes(recorded: TradingConfig, current: TradingConfig) -> list[str]:
    """Settings a journal was started with that differ now, among those its kernel cannot change."""
    differ = _differences(_flatten(msgspec.to_builtins(recorded)), _flatten(msgspec.to_builtins(current)))
    return [k for k in differ if k.split(".", 1)[0] in FIXED_FOR_A_JOURNAL]


def apply_risk_changes(current: RiskLimits, old: RiskLimits, new: RiskLimits) -> tuple[RiskLimits, list[str]]:
    """`current` (the running limits, operators' changes included) with the limits that differ between
    two versions of the file set to the new file's values; and the paths of those limits. Limits the file
    did not change keep their running value, so a reload never undoes an operator's `limit set`."""
    before, after = _flatten(msgspec.to_builtins(old)), _flatten(msgspec.to_builtins(new))
    paths = _differences(before, after)
    raw = msgspec.to_builtins(current)
    for path in paths:
        keys = path.split(".")
        if path in after:
            set_path(raw, keys, after[path], "configuration file")
        elif path in before:  # the file dropped it: back to the built-in default
            node = raw
            for key in keys[:-1]:
                node = node.get(key, {})
            node.pop(keys[-1], None)
    return convert(raw, RiskLimits, "reloaded [risk]"), paths


def _differences(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Dotted paths whose values differ between two flattened configurations."""
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def _flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(node, dict):
        return {prefix: node}
    out: dict[str, Any] = {}
    for key, value in node.items():
        out.update(_flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return out
