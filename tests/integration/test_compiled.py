"""The hot path compiled by mypyc (foxhunt/compiled.py) derives exactly the bytes its Python source does,
and a compiled module is never used once its source has changed."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from foxhunt import compiled

ROOT = Path(__file__).resolve().parents[2]

# Every journaled message (encoded) and its causation, and the kernel's state digest at the end, for
# the reference strategies and for one that sends every order type and cancels, with and without venue
# latency; run in a subprocess, compiled or as Python.
RUNS = r"""
import hashlib, json, sys
import anyio, msgspec
from foxhunt import compiled
compiled.check()  # what an entry point does first: FOXHUNT_PURE_PYTHON=1 runs the sources
from foxhunt import config
from foxhunt.adapters.feeds.synthetic import SyntheticFeed
from foxhunt.adapters.journal.discard import DiscardingJournal
from foxhunt.adapters.venues.sim import SimVenue
from foxhunt.core.kernel import Kernel
from foxhunt.core.risk.gate import PreTradeGate
from foxhunt.core.strategy import Strategy
from foxhunt.messages import codec
from foxhunt.messages.base import parse_fixed
from foxhunt.messages.orders import OrderType, Side, TimeInForce
from foxhunt.runtime.clock import EventClock
from foxhunt.runtime.loop import TradingLoop
from foxhunt.runtime.recovery import build_kernel
from foxhunt.runtime.report import TrackingJournal
from foxhunt.runtime.tracking import Tracker


def plain(x):  # a Run's fields as comparable data, floats by their bits
    if isinstance(x, dict):
        return {k: plain(v) for k, v in sorted(x.items())}
    if isinstance(x, (list, tuple)) or hasattr(x, "typecode"):
        return [plain(v) for v in x]
    return x.hex() if isinstance(x, float) else x


class Hashing(DiscardingJournal):
    def __init__(self):
        super().__init__()
        self.sha = hashlib.sha256()

    def append(self, message, causation=None):
        self.sha.update(codec.encode(message) + repr(causation).encode())
        return super().append(message, causation)


class EveryKind(Strategy):
    strategy_id = "every_kind"
    KINDS = [(OrderType.LIMIT, TimeInForce.GTC), (OrderType.STOP, TimeInForce.DAY), (OrderType.MARKET, TimeInForce.FOK),
             (OrderType.LIMIT, TimeInForce.IOC), (OrderType.MARKET, TimeInForce.IOC)]

    def __init__(self):
        self.n = 0

    def on_quote(self, q, ctx):
        self.n += 1
        if self.n % 5:
            return
        for order in ctx.open_orders(q.symbol)[:-2]:
            ctx.cancel(order.order_id, "old")
        kind, tif = self.KINDS[self.n // 5 % len(self.KINDS)]
        side = Side.BUY if ctx.position(q.symbol) <= 0 else Side.SELL
        away = (q.ask - q.bid) * (1 if (self.n // 25) % 2 else -1)
        price = (q.bid - away if side is Side.BUY else q.ask + away) if kind is OrderType.LIMIT else None
        trigger = q.ask + abs(away) if kind is OrderType.STOP and side is Side.BUY else (
            q.bid - abs(away) if kind is OrderType.STOP else None)
        ctx.submit(q.symbol, side, parse_fixed("50000"), kind, price=price, trigger_price=trigger, time_in_force=tif)


def run(strategy, latency_ns, quotes=20_000):
    trading = config.load(None, env={}).trading()
    instruments = trading.build_instruments()
    if strategy == "every_kind":
        kernel = Kernel(instruments, [EveryKind()], PreTradeGate(trading.risk, instruments))
    else:
        params = msgspec.structs.replace(trading.strategy, name=strategy)
        kernel = build_kernel(msgspec.structs.replace(trading, strategy=params))
    venue = SimVenue(instruments, msgspec.structs.replace(trading.venue, latency_ns=latency_ns), EventClock())
    journal = Hashing()
    tracker = Tracker(kernel, strategy)  # the report's, as a backtest that is reported on has it
    feed = SyntheticFeed(7, quotes, instruments["EURUSD"], parse_fixed("1.10000"), EventClock())

    async def go():
        loop = TradingLoop(kernel, venue, TrackingJournal(journal, tracker))
        for q in feed:
            await loop.take(q)

    anyio.run(go)
    report = tracker.finish()
    tracked = hashlib.sha256(repr(plain({f: getattr(report, f) for f in report.__dataclass_fields__})).encode())
    return [journal.last_seq, journal.sha.hexdigest(), kernel.state_digest(), tracked.hexdigest()]


# An agent's trading environment on a random policy (an order on most steps): its episode's records, its
# rewards' bits, the kernel's state. A trade size of 20 million units takes the gate's values and exposures
# beyond 2**53 nanos, where mypyc's division of two ints would round (fixed_point.ratio).
def agent_run(trade_size, steps=4_000):
    import numpy as np
    from foxhunt import bootstrap
    from foxhunt.models.agent_configs import EnvConfig
    from foxhunt.training.rl.environment import TradingEnv
    from foxhunt.training.rl.market import Market
    cfg = config.load(None, env={})
    agent = msgspec.convert({"name": "agent", "agent": {"trade_size": trade_size}}, type(cfg.strategy))
    trading = msgspec.structs.replace(cfg, strategy=agent).trading()
    feed = SyntheticFeed(3, 6_000, trading.build_instruments()["EURUSD"], parse_fixed("1.1"), EventClock(), None,
                         0.05, 20)
    env = TradingEnv(Market.of("EURUSD", list(feed), cfg.features, "synthetic"), trading, bootstrap.agent_engine(),
                     EnvConfig(episode_steps=100_000), record=True)
    env.reset(seed=1)
    rewards = hashlib.sha256()
    for a in np.random.default_rng(0).integers(0, 5, size=steps).tolist():
        rewards.update(float(env.step(a)[1]).hex().encode())
    records = hashlib.sha256()
    for message, cause in env.episode.records:
        records.update(codec.encode(message) + repr(cause).encode())
    kernel = env.episode.kernel
    return [len(env.episode.records), records.hexdigest(), kernel.state_digest(), rewards.hexdigest(),
            kernel.orders.denied]


runs = {f"{s}/{lat}": run(s, lat) for s, lat in [("ema_cross", 0), ("zscore", 5_000_000), ("every_kind", 0),
                                                  ("every_kind", 3_000_000)]}
runs |= {f"agent/{size}": agent_run(size) for size in ("100000", "20000000")}
print(json.dumps({"compiled": compiled.compiled_in_use(), "runs": runs}))
"""


def _runs(pure: bool) -> dict:
    env = {**os.environ, "FOXHUNT_PURE_PYTHON": "1" if pure else "0"}
    proc = subprocess.run([sys.executable, "-c", RUNS], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _compiling() -> bool:
    return os.environ.get("FOXHUNT_COMPILE", "1") != "0"


def test_the_hot_path_runs_compiled_after_setup():
    if not _compiling():
        pytest.skip("FOXHUNT_COMPILE=0: installed without compiling")
    assert compiled.up_to_date(), f"stale or missing: {compiled.stale_sources()}; run scripts/setup"
    assert compiled.compiled_in_use()


def test_compiled_and_python_derive_the_same_bytes_and_state():
    as_python, as_compiled = _runs(pure=True), _runs(pure=False)
    assert as_python["compiled"] is False
    assert as_compiled["compiled"] is _compiling()
    assert as_compiled["runs"] == as_python["runs"]
    seqs = {name: run[0] for name, run in as_python["runs"].items()}
    assert all(seq > 20_000 for name, seq in seqs.items() if "agent" not in name), seqs  # every run traded
    agents = {name: run for name, run in as_python["runs"].items() if "agent" in name}
    assert all(run[0] > 4_000 * 4 for run in agents.values()), agents  # an order on most of 4,000 steps


def test_the_parsing_tests_pass_as_python_too():
    """This suite runs the compiled FIX parsing, CSV feeds and fixed-point text; their pinned results must
    hold for the Python source too."""
    env = {**os.environ, "FOXHUNT_PURE_PYTHON": "1"}
    suites = ["tests/unit/test_fix_parsing.py", "tests/unit/test_feeds.py", "tests/unit/test_messages.py"]
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *suites],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert " passed" in proc.stdout


def test_a_source_changed_since_it_was_compiled_is_named_and_run_as_python(tmp_path, monkeypatch):
    if not compiled.up_to_date():
        pytest.skip("nothing compiled to be stale")
    record = json.loads(compiled.RECORD.read_text())
    record["foxhunt.core.kernel"] = "0" * 64  # as if kernel.py had been edited after the build
    monkeypatch.setattr(compiled, "RECORD", tmp_path / "compiled_sources.json")
    compiled.RECORD.write_text(json.dumps(record))
    assert compiled.stale_sources() == ["foxhunt/core/kernel.py"]
    assert not compiled.up_to_date()
    compiled.RECORD.unlink()  # no record at all: no compiled module is vouched for
    assert compiled.stale_sources() == [str(compiled.source_path(m).relative_to(ROOT)) for m in compiled.MODULES]
    spec = compiled._SourceFirst().find_spec("foxhunt.core.kernel")
    assert spec is not None and spec.origin == str(compiled.source_path("foxhunt.core.kernel"))
    assert compiled._SourceFirst().find_spec("foxhunt.core.risk") is None  # not compiled: the usual import


def test_a_build_removes_what_an_earlier_one_compiled_of_a_module_no_longer_listed(tmp_path, monkeypatch):
    import importlib.machinery

    (tmp_path / "pkg").mkdir()
    for name in ("kept", "dropped"):
        (tmp_path / "pkg" / f"{name}.py").write_text(f"NAME = {name!r}\n")
        (tmp_path / "pkg" / f"{name}{importlib.machinery.EXTENSION_SUFFIXES[0]}").write_bytes(b"")
    monkeypatch.setattr(compiled, "ROOT", tmp_path)
    monkeypatch.setattr(compiled, "RECORD", tmp_path / "record.json")
    monkeypatch.setattr(compiled, "MODULES", ("pkg.dropped", "pkg.kept"))
    compiled.write_record()
    monkeypatch.setattr(compiled, "MODULES", ("pkg.kept",))  # the next build compiles one module less
    compiled.write_record()
    assert compiled.extension_path("pkg.dropped") is None  # its compiled file is gone, its source stays
    assert (tmp_path / "pkg" / "dropped.py").exists() and compiled.extension_path("pkg.kept") is not None
    assert json.loads(compiled.RECORD.read_text()) == {"pkg.kept": compiled.source_digest("pkg.kept")}


def test_installing_without_compiling_removes_what_an_earlier_build_compiled(tmp_path, monkeypatch):
    import importlib.machinery

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text("NAME = 'mod'\n")
    (tmp_path / "pkg" / f"mod{importlib.machinery.EXTENSION_SUFFIXES[0]}").write_bytes(b"")
    monkeypatch.setattr(compiled, "ROOT", tmp_path)
    monkeypatch.setattr(compiled, "RECORD", tmp_path / "record.json")
    monkeypatch.setattr(compiled, "MODULES", ("pkg.mod",))
    compiled.write_record()
    assert compiled.up_to_date()
    compiled.remove_compiled()
    assert compiled.extension_path("pkg.mod") is None and not compiled.RECORD.exists()
    assert (tmp_path / "pkg" / "mod.py").exists() and compiled.stale_sources() == []


def test_a_stale_build_warns_and_runs_python(tmp_path):
    """The same, end to end: a process that finds a stale record warns, names the file, and runs Python."""
    if not compiled.up_to_date():
        pytest.skip("nothing compiled to be stale")
    script = (
        "import json, foxhunt.compiled as c, pathlib, sys\n"
        f"c.RECORD = pathlib.Path({str(tmp_path / 'record.json')!r})\n"
        "c.RECORD.write_text(json.dumps({m: c.source_digest(m) for m in c.MODULES} | {'foxhunt.core.orders': 'x'}))\n"
        "sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, c._SourceFirst)]\n"
        "c.check()\n"
        "import foxhunt.core.orders as o\n"
        "print(o.__file__)\n"
    )
    env = {**os.environ, "FOXHUNT_PURE_PYTHON": "0"}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("foxhunt/core/orders.py")
    assert "foxhunt/core/orders.py changed since it was compiled" in proc.stderr


def test_every_true_division_in_a_compiled_module_has_a_float_on_one_side():
    """mypyc divides int by int through two doubles, which Python does not (foxhunt/compiled.py): each `/`
    in a compiled module has a float literal or float() on one side, or says on its line that it divides
    floats."""
    for module in compiled.MODULES:
        source = compiled.source_path(module).read_text()
        lines = source.splitlines()
        for node in ast.walk(ast.parse(source)):
            if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)):
                continue
            sides = (node.left, node.right)
            floats = any(isinstance(s, ast.Constant) and isinstance(s.value, float) for s in sides) or any(
                isinstance(s, ast.Call) and isinstance(s.func, ast.Name) and s.func.id == "float" for s in sides)
            assert floats or "float division" in lines[node.lineno - 1], f"{module}:{node.lineno}: {ast.unparse(node)}"


def test_no_compiled_module_defines_a_msgspec_struct():
    """mypyc drops class keywords, so a Struct defined in a compiled module would lose frozen=True and the like."""
    for module in compiled.MODULES:
        tree = ast.parse(compiled.source_path(module).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b) for b in node.bases]
                assert not any("Struct" in b for b in bases), f"{module} defines Struct {node.name}"
