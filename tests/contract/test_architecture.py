"""The layer rules of docs/ARCHITECTURE (shared/design/ARCHITECTURE.md), as a contract checked on the
import graph by import-linter (`[tool.importlinter]` in pyproject.toml): dependencies point down, the core
has no import cycles (TYPE_CHECKING imports included), neither the core nor the messages nor the runtime
import torch, the core imports no I/O or async library, adapters never import the core, and the
configuration imports no adapter. tests/unit/test_core_purity.py checks what an import graph cannot see (the
clock, randomness). And importing foxhunt does nothing but define it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT = [str(Path(sys.executable).with_name("lint-imports")), "--no-cache"]


def lint(cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*LINT, str(cwd / "pyproject.toml")], cwd=cwd, env={"PYTHONPATH": str(cwd)},
                          capture_output=True, text=True, timeout=300, check=False)


def test_the_layer_contracts_hold():
    done = lint(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "broken" in done.stdout and " 0 broken" in done.stdout


def test_a_forbidden_import_breaks_them(tmp_path):
    """The contract is not a formality: a copy of the package whose kernel imports torch, and whose
    configuration imports an adapter, is refused, naming both imports."""
    shutil.copytree(ROOT / "foxhunt", tmp_path / "foxhunt", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    kernel = tmp_path / "foxhunt" / "core" / "kernel.py"
    kernel.write_text(kernel.read_text() + "\nimport torch  # noqa\n")
    config = tmp_path / "foxhunt" / "config.py"
    config.write_text(config.read_text() + "\nimport foxhunt.adapters.venues.sim  # noqa\n")
    venue = tmp_path / "foxhunt" / "adapters" / "venues" / "ib" / "venue.py"
    venue.write_text(venue.read_text() + "\nfrom foxhunt.core.orders import Order  # noqa\n")
    done = lint(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "foxhunt.core.kernel -> torch" in done.stdout
    assert "foxhunt.config -> foxhunt.adapters.venues.sim" in done.stdout
    assert "foxhunt.adapters.venues.ib.venue -> foxhunt.core.orders" in done.stdout


def test_importing_foxhunt_does_nothing_but_define_it():
    """No check, no finder, no module beyond the package itself: the compiled modules' check is an entry
    point's first step (foxhunt/__main__.py), not an import's side effect."""
    code = ("import sys; before = set(sys.modules), list(sys.meta_path)\n"
            "import foxhunt\n"
            "print(sorted(set(sys.modules) - before[0]), sys.meta_path == before[1])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert done.stdout.strip() == "['foxhunt'] True", done.stdout + done.stderr


def test_the_daemon_s_commands_load_neither_torch_nor_boto3():
    """`foxhunt run`, `replay` and `admin` start without torch (seconds and hundreds of MB) or boto3: the
    commands that train or read a model store import them when they run."""
    code = "import sys, foxhunt.cli; print(sorted(m for m in ('torch', 'boto3', 'safetensors') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
