"""The core must stay pure: no I/O or async libraries, no wall clock, no unseeded randomness."""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

import foxhunt.core

CORE = Path(foxhunt.core.__file__).parent
FORBIDDEN_MODULES = ["anyio", "asyncio", "psycopg", "torch", "quickfix", "ib_async", "ib_insync", "uvloop",
                     "structlog", "socket", "subprocess"]
FORBIDDEN_CALLS = {("time", "time"), ("time", "time_ns"), ("time", "monotonic"), ("time", "perf_counter"),
                   ("datetime", "now"), ("datetime", "utcnow"), ("uuid", "uuid4"), ("os", "urandom")}


def test_importing_every_core_module_pulls_in_no_io_or_async_library():
    modules = [m.name for m in pkgutil.walk_packages([str(CORE)], "foxhunt.core.")]
    assert "foxhunt.core.kernel" in modules
    # What the allowed libraries (numpy, numba, msgspec) load for themselves is theirs; what core adds is ours.
    code = (
        "import sys\n"
        "import msgspec, numba, numpy\n"
        "allowed = set(sys.modules)\n"
        f"for m in {modules!r}: __import__(m)\n"
        f"bad = sorted(m for m in {FORBIDDEN_MODULES!r} if m in sys.modules and m not in allowed)\n"
        "print(','.join(bad))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "", f"core imports pulled in: {done.stdout.strip()}"


def test_core_source_never_reads_the_clock_or_draws_unseeded_randomness():
    offences = []
    for path in CORE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                if (node.value.id, node.attr) in FORBIDDEN_CALLS:
                    offences.append(f"{path.name}:{node.lineno} {node.value.id}.{node.attr}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                # module-level random.* draws from the unseeded global generator
                if isinstance(node.func.value, ast.Name) and node.func.value.id == "random" and node.func.attr != "Random":
                    offences.append(f"{path.name}:{node.lineno} random.{node.func.attr}")
    assert offences == []


def test_core_source_imports_no_io_or_async_library_itself():
    offences = []
    for path in CORE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            offences += [f"{path.name}:{node.lineno} {n}" for n in names if n.split(".")[0] in FORBIDDEN_MODULES]
    assert offences == []
