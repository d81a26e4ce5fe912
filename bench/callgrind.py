"""The instructions one process executes, counted by valgrind's callgrind: what kernel_instructions.py and
env_instructions.py compare commits by, since the count does not move with the machine's load."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile


def require_valgrind() -> None:
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")


def count(script: str, *args: str) -> int:
    """The instructions `python script args...` executes under callgrind (string hashes seeded alike)."""
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/out", sys.executable, script, *args],
            capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"}, check=True,
        )
    match = re.search(r"Collected : (\d+)", proc.stderr)
    if match is None:
        raise SystemExit(f"no instruction count in valgrind's output:\n{proc.stderr[-2000:]}")
    return int(match.group(1))
