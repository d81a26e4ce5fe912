"""Trainables that misbehave as real trials do, for tests/integration/test_sweep.py: they run in Ray's worker
processes, which import them from here (the repository root is on their path, as the driver's)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Recording:
    """Writes a line per run of each point into `directory` (how many times each point ran); a point whose
    overrides say `x=fail` raises, `x=die` kills its worker the first time it runs, and `x=slow` waits
    until `directory/go` exists."""

    directory: str

    def __call__(self, overrides, seed, report):
        values = dict(o.split("=", 1) for o in overrides)
        x = values["x"].strip('"')
        runs = Path(self.directory) / f"ran-{x}"
        first = not runs.exists()
        with runs.open("a") as f:
            f.write(f"{seed}\n")
        if x == "fail":
            raise ValueError("this point cannot be computed")
        if x == "die" and first:
            os._exit(1)  # the worker process dies, as one killed by the OOM killer would
        while x == "slow" and not (Path(self.directory) / "go").exists():
            time.sleep(0.1)
        report({"partial": 1.0})
        return {"score": float(len(x)), "seed": seed}
