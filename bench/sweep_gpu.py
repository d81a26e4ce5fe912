"""A sweep's points on a GPU through Ray (`--gpus-per-trial`), on a machine with one: half a GPU a point (two
points at a time on the one GPU) against a whole GPU a point (one at a time), in one run (half, whole, half
again, after a warm-up that starts both workers and their CUDA).

Each point is a forecaster's training as `foxhunt tune` runs it (trainables.ForecasterTrainable, device cuda),
through training/sweep.py's Ray tasks with 2 workers; the points are learning rates. Its market data are a
synthetic feed's quotes read through a journal store in memory (this machine may have no PostgreSQL: a
ForecasterTrainable's workers need no database). Checked: every point ran on a GPU that Ray gave it (its
CUDA_VISIBLE_DEVICES), the two ways trained the same models bit for bit (the model id is the hash of the
weights: a point's training does not depend on what shares the GPU with it), and a point asking for 2 GPUs
is refused at once. Reported: each way's seconds, points a minute and how many points ran at once.

    python bench/sweep_gpu.py [--points 4] [--size tiny] [--steps 400]

(`--device cpu` runs the same on a machine without a GPU, the shares then of a CPU: a try of this script,
not a measurement.)
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from foxhunt.adapters.feeds.synthetic import SyntheticFeed
from foxhunt.adapters.journal.memory import MemoryJournalStore
from foxhunt.config import Config, override
from foxhunt.errors import ConfigError
from foxhunt.runtime.clock import EventClock
from foxhunt.training import dataset, sweep, trainables


@dataclass(frozen=True)
class OnTheGpu:
    """The forecaster's training, with where and when it ran."""

    inner: trainables.ForecasterTrainable

    def __call__(self, overrides, seed, report, workdir) -> dict[str, Any]:
        import torch

        started = time.time()
        metrics = self.inner(overrides, seed, report, workdir)
        gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"
        return metrics | {"visible": os.environ.get("CUDA_VISIBLE_DEVICES", ""), "gpu": gpu, "started": started,
                          "ended": time.time()}


async def market(cfg: Config, quotes: int) -> tuple[dict, list]:
    store = MemoryJournalStore()
    feed = SyntheticFeed.from_options({"seed": "5", "n": str(quotes), "reversion": "0.01"}, cfg.trading().build_instruments(),
                                      EventClock())
    async with store.writer("gpu-sweep", config=b"{}", config_digest="-", fingerprint={}) as w:
        for quote in feed:
            w.append(quote)
    return await dataset.read_market_data(store, ["gpu-sweep"])


def overlapping(outcomes: list[sweep.Outcome]) -> int:
    """The most points that ran at the same time."""
    edges = sorted([(o.metrics["started"], 1) for o in outcomes] + [(o.metrics["ended"], -1) for o in outcomes])
    most = running = 0
    for _, step in edges:
        running += step
        most = max(most, running)
    return most


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--points", type=int, default=4)
    parser.add_argument("--size", default="tiny")
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--quotes", type=int, default=60_000)
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    args = parser.parse_args()
    cfg = override(Config(), [f"train.max_steps={args.steps}", f"train.eval_every={max(1, args.steps // 4)}"])
    data, sources = anyio.run(market, cfg, args.quotes)
    trainable = OnTheGpu(trainables.ForecasterTrainable(cfg, "mlp", args.size, args.device, data, sources))
    gpu = args.device == "cuda"
    share_of = "gpus_per_trial" if gpu else "cpus_per_trial"  # what a point's share is of
    rates = [f"{1e-3 * (1 + i) / args.points:.6g}" for i in range(args.points)]
    points = sweep.grid([f"train.learning_rate={','.join(rates)}"])
    directory = Path(tempfile.mkdtemp())
    sweep.start_ray(2)
    try:
        sweep.start_ray(2, gpus_per_trial=2.0)
        raise SystemExit("a point asking for 2 GPUs was not refused")
    except ConfigError as e:
        print(f"2 GPUs a point, refused at once: {e}")
    sweep.run(trainable, points[:2], 11, directory, "warm-up", 2, **{share_of: 0.5})  # both workers and their CUDA up
    models: list[list[str]] = []
    for share in (0.5, 1.0, 0.5):
        started = time.perf_counter()
        outcomes = sweep.run(trainable, points, 11, directory, f"run-{len(models)}", 2, **{share_of: share})
        took = time.perf_counter() - started
        failed = [o.error for o in outcomes if o.error]
        assert not failed, failed
        assert not gpu or all(o.metrics["visible"] for o in outcomes), "a point ran without a GPU from Ray"
        models.append([o.metrics["model"] for o in outcomes])
        print(f"{share:g} {'GPU' if gpu else 'CPU'} a point: {took:6.1f} s for {len(points)} points,"
              f" {60 * len(points) / took:5.1f} points/min, at most {overlapping(outcomes)} at once, on {outcomes[0].metrics['gpu']}"
              f" (CUDA_VISIBLE_DEVICES {sorted({o.metrics['visible'] for o in outcomes})})")
    same = all(m == models[0] for m in models)
    print(f"the same models in the three runs, bit for bit: {same} ({models[0][0]}, ...)")
    assert same


if __name__ == "__main__":
    main()
