"""The modules compiled to C by mypyc, and the check that only ever runs them when they match their source.

Every quote of a backtest runs through the kernel (and what it returns, its step), the reference strategies,
the clock and the simulated venue (and the report's tracker, where the backtest is reported on or is a
sweep's point), every order through a strategy's context and the pre-trade gate, every step of an agent's
trading environment through its episode and the agent strategy, every FIX message in or out through the
FIX venue's parsing (foxhunt's own share of an order's round trip), and every row of `foxhunt ingest`
through a CSV feed, the fixed-point parser and the COPY formatting, so those modules are compiled by mypyc
(from the same .py files, through their type annotations) when foxhunt is installed; see `setup.py`. The
Python source stays the reference: it is what a reader follows, what a compiled module is built from, and
what runs when there is no compiled module. Both derive the same bytes (tests/integration/test_compiled.py).

A compiled module sits beside its source (`kernel.cpython-311-x86_64-linux-gnu.so` next to `kernel.py`)
and Python imports it in preference. After an edit to the source it would silently run the old code, so
the build records the digest of every source it compiled, and `check()` (run by `import foxhunt`,
before any of these modules is imported) compares them: when one source differs, all of these modules
run as Python, with a warning naming the file, until `scripts/setup` compiles them again.
`FOXHUNT_PURE_PYTHON=1` runs them as Python whatever the build did.

Two rules for a compiled module, so that compiling never changes a result:
- It defines no msgspec Structs (mypyc drops class keywords such as `frozen=True`); their configuration
  Structs live beside them in modules that stay Python.
- Its true divisions have a float on one side. mypyc divides two ints with `/` by converting each to a
  double first, which for an operand beyond 2**53 (9 million units in nanos) can differ in the last bit
  from Python's correctly rounded quotient; nanos become floats through `fixed_point.ratio`, which
  divides as Python does (the pre-trade gate's exposures and values), and the rest of the risk engine,
  which divides nanos by nanos, stays Python.
tests/integration/test_compiled.py checks both.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import json
import os
import sys
from pathlib import Path

MODULES = (
    "foxhunt.core.kernel",
    "foxhunt.core.orders",
    "foxhunt.core.portfolio",
    "foxhunt.core.strategies.ema_cross",
    "foxhunt.core.strategies.zscore",
    "foxhunt.adapters.venues.sim",
    "foxhunt.adapters.venues.fix.parsing",
    "foxhunt.adapters.feeds.csv_feed",
    "foxhunt.adapters.journal.pg_copy",
    "foxhunt.messages.fixed_point",
    "foxhunt.runtime.loop",
    "foxhunt.runtime.tracking",
    "foxhunt.core.risk.gate",
    "foxhunt.core.strategies.agent",
    "foxhunt.core.context",
    "foxhunt.runtime.clock",
    "foxhunt.core.step",
    "foxhunt.training.rl.episode",
)

ROOT = Path(__file__).resolve().parent.parent  # where the `foxhunt` package lies
RECORD = Path(__file__).with_name("compiled_sources.json")  # written by setup.py: module -> source digest


def source_path(module: str) -> Path:
    return ROOT.joinpath(*module.split(".")).with_suffix(".py")


def source_digest(module: str) -> str:
    return hashlib.sha256(source_path(module).read_bytes()).hexdigest()


def write_record() -> None:
    """Record the sources just compiled (setup.py calls it once the extensions are built), and remove what
    an earlier build compiled of a module no longer listed, which would otherwise go on being imported."""
    _remove_extensions(set(_recorded()) - set(MODULES))
    RECORD.write_text(json.dumps({m: source_digest(m) for m in MODULES}, indent=1) + "\n")


def remove_compiled() -> None:
    """Remove every compiled module and the record (setup.py, when told not to compile): what is installed
    without compiling runs as Python, whatever an earlier build left."""
    _remove_extensions(set(_recorded()) | set(MODULES))
    RECORD.unlink(missing_ok=True)


def _recorded() -> dict[str, str]:
    return json.loads(RECORD.read_text()) if RECORD.exists() else {}


def _remove_extensions(modules: set[str]) -> None:
    for module in modules:
        extension = extension_path(module)
        if extension is not None:
            extension.unlink()


def extension_path(module: str) -> Path | None:
    """The compiled module beside the source, if there is one."""
    source = source_path(module)
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = source.with_name(source.stem + suffix)
        if path.exists():
            return path
    return None


def stale_sources() -> list[str]:
    """The sources of compiled modules that differ from what was compiled (all of them with no record)."""
    recorded = _recorded()
    return [str(source_path(m).relative_to(ROOT)) for m in MODULES
            if extension_path(m) is not None and recorded.get(m) != source_digest(m)]


def up_to_date() -> bool:
    """Every module compiled, from its current source (scripts/setup compiles again when not)."""
    return all(extension_path(m) is not None for m in MODULES) and not stale_sources()


def compiled_in_use() -> bool:
    """Whether the modules imported are the compiled ones (for tests and benchmarks to say what ran)."""
    return all(importlib.import_module(m).__file__.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))
               for m in MODULES)


class _SourceFirst:
    """A finder that imports these modules from their .py files even where a compiled one lies beside."""

    def find_spec(self, name: str, path: object = None, target: object = None):
        if name in MODULES:
            return importlib.util.spec_from_file_location(name, source_path(name))
        return None


def check() -> None:
    pure = os.environ.get("FOXHUNT_PURE_PYTHON") == "1"
    if not pure:
        stale = stale_sources()
        if stale:
            print(f"foxhunt: {', '.join(stale)} changed since it was compiled: running the compiled modules as "
                  "Python (run scripts/setup to compile them again)", file=sys.stderr)
            pure = True
    if pure and not any(isinstance(f, _SourceFirst) for f in sys.meta_path):
        sys.meta_path.insert(0, _SourceFirst())
