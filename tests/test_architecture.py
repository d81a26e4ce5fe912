"""The layer rules of docs/ARCHITECTURE (shared/design/ARCHITECTURE.md), as a contract checked on the
import graph by import-linter (`[tool.importlinter]` in pyproject.toml): dependencies point down, the core
has no import cycles (TYPE_CHECKING imports included), neither the core nor the messages nor the runtime
import torch, the core imports no I/O or async library, and the configuration imports no adapter.
tests/test_core_purity.py checks what an import graph cannot see (the clock, randomness)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
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
    done = lint(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "foxhunt.core.kernel -> torch" in done.stdout
    assert "foxhunt.config -> foxhunt.adapters.venues.sim" in done.stdout
