"""Trainables that misbehave as real trials do, for tests/integration/test_sweep.py: they run in Ray's worker
processes, which import them from here (the repository root is on their path, as the driver's)."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Recording:
    """Writes a line per run of each point into `directory` (how many times each point ran); a point whose
    overrides say `x=fail` raises, `x=die` kills its worker the first time it runs, and `x=slow` waits
    until `directory/go` exists."""

    directory: str

    def __call__(self, overrides, seed, report, workdir):
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
        # how Ray started this worker: its raylet's connection retry (inherited), the modules it imported first, and
        # the size of the object store it maps
        retry_ms = os.environ.get("RAY_raylet_client_connect_timeout_milliseconds")
        preload = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--worker-preload-modules=")]
        import ray

        store = ray.cluster_resources()["object_store_memory"] / 2**20
        return {"score": float(len(x)), "seed": seed, "worker": f"{retry_ms} ms {','.join(preload)} {store:g} MiB"}


@dataclass(frozen=True)
class DiesOnce:
    """A trainable whose worker dies right after its first report with a checkpoint, once in all (the file
    `died` in `directory` remembers); a run that starts with a checkpoint in its working directory leaves the
    file `resumed` there."""

    inner: Any
    directory: str

    def __call__(self, overrides, seed, report, workdir):
        died, resumed = Path(self.directory) / "died", Path(self.directory) / "resumed"
        if died.exists() and any((Path(workdir) / "checkpoints").glob("*.pt")):
            resumed.write_text("")

        def reporting(metrics, checkpoint=False):
            report(metrics, checkpoint=checkpoint)
            if checkpoint and not died.exists():
                died.write_text("")
                os._exit(1)  # the worker process dies, as one killed by the OOM killer would

        return self.inner(overrides, seed, reporting, workdir)
