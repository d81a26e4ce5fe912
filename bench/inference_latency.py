"""Scoring latency at batch 1 (issue 22's speed targets, measured ahead of its scoring source): one call
of `Scorer.score` from a numpy window to a numpy forecast, host-to-device and device-to-host copies and
the wait included, p50, p99 and p99.9 over --calls calls, for every model at the production preset with
a window of 64 rows, three ways side by side in alternating blocks:

- graph: the scorer's CUDA graph, replayed (adapters/inference/scorer.py);
- eager: the same scorer, the same copies, the model called eagerly;
- compiled: the same copies around `torch.compile(model.predict, mode="reduce-overhead")` (which captures
  CUDA graphs of its own), compiled before timing;
- inductor: `[scoring] compile = true`, the scorer's graph of the forward fused by torch.compile;
- fused: `[scoring] fuse = true`, the scorer's graph of foxhunt's Triton kernels
  (adapters/inference/fused/), for the models that have them (attention, mamba2, tft).

Determinism is on (make_deterministic) for all three. The weights are the seed's initial ones: latency
does not depend on their values.

    python bench/inference_latency.py --device cuda [--calls 10000] [--out DIR]      (on the H200)
    python bench/inference_latency.py --device cuda --archs tft --ways compiled      (one way alone)
    python bench/inference_latency.py --device cpu --size tiny --calls 500           (a dry run here)

`--ways` picks which of them run (each process captures its own graphs: torch 2.11's compiled graphs
of the TFT and Mamba2 crashed beside the scorer's own in one process, so those run in a process apart).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import torch
from latency import percentiles  # bench/latency.py

from foxhunt.adapters.inference.scorer import Scorer
from foxhunt.core.features import FeatureSpec
from foxhunt.models.configs import ARCHITECTURES, Shape, TrainConfig
from foxhunt.models.determinism import fingerprint, make_deterministic
from foxhunt.models.forecaster import build


class Compiled:
    """torch.compile(mode="reduce-overhead") of the model, behind the scorer's copies."""

    def __init__(self, scorer: Scorer) -> None:
        self.s = scorer
        self.fn = torch.compile(scorer.model.predict, mode="reduce-overhead")
        for _ in range(5):
            self.score(np.zeros((1, scorer.window, scorer.features), dtype=np.float32))

    def score(self, windows: np.ndarray) -> np.ndarray:
        s = self.s
        s.in_view[:1] = windows
        s.static_in.copy_(s.host_in, non_blocking=True)
        with torch.no_grad():
            out = self.fn(s.static_in)
        s.host_out.copy_(out, non_blocking=True)
        torch.cuda.synchronize()
        return s.host_out.numpy()[:1].copy()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda")
    p.add_argument("--size", default="production")
    p.add_argument("--window", type=int, default=64)
    p.add_argument("--calls", type=int, default=10_000)
    p.add_argument("--block", type=int, default=500)
    p.add_argument("--archs", default=",".join(ARCHITECTURES))
    p.add_argument("--ways", default="graph,eager,compiled",
                   help="which of graph, eager, compiled, inductor, fused to time")
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    args = p.parse_args()
    make_deterministic(4)
    device = torch.device(args.device)
    spec = FeatureSpec()
    shape = Shape(window=args.window, features=spec.width, horizons=(1, 4, 16), quantiles=(0.1, 0.5, 0.9))
    rng = np.random.default_rng(0)
    inputs = rng.normal(size=(args.block, 1, args.window, spec.width)).astype(np.float32)
    report = {"environment": fingerprint(device), "size": args.size, "window": args.window, "batch": 1}
    for arch in args.archs.split(","):
        wanted = args.ways.split(",") if device.type == "cuda" else ["cpu"]
        ways = {}
        if "graph" in wanted or "cpu" in wanted:
            ways[wanted[0] if wanted[0] == "cpu" else "graph"] = Scorer(
                build(arch, TrainConfig().model(arch, args.size), shape, seed=1), args.window, spec.width, device,
                batch=1)
        if device.type == "cuda":
            if "eager" in wanted:
                ways["eager"] = Scorer(build(arch, TrainConfig().model(arch, args.size), shape, seed=1), args.window,
                                       spec.width, device, batch=1, graph=False)
            for name, form in (("inductor", {"compile": True}), ("fused", {"fuse": True})):
                if name in wanted:
                    served = Scorer(build(arch, TrainConfig().model(arch, args.size), shape, seed=1), args.window,
                                    spec.width, device, batch=1, **form)
                    if served.compiled or served.fused:
                        ways[name] = served
                    else:
                        report.setdefault(arch, {})[name] = served.unfused
            if "compiled" in wanted:
                started = time.perf_counter()
                try:
                    ways["compiled"] = Compiled(Scorer(build(arch, TrainConfig().model(arch, args.size), shape,
                                                             seed=1), args.window, spec.width, device, 1, graph=False))
                    report.setdefault(arch, {})["compile_seconds"] = round(time.perf_counter() - started, 1)
                except Exception as e:  # noqa: BLE001 - reported, the other ways still run
                    report.setdefault(arch, {})["compiled"] = f"{type(e).__name__}: {str(e)[:300]}"
        if not ways:
            continue
        base = next(iter(ways))
        first = {name: way.score(inputs[0]) for name, way in ways.items()}
        same = {name: bool(np.array_equal(out, first[base])) for name, out in first.items()}
        took: dict[str, list[int]] = {name: [] for name in ways}
        clock = time.perf_counter_ns
        while len(took[base]) < args.calls:
            for name, way in ways.items():
                score = way.score
                for i in range(args.block):
                    t0 = clock()
                    score(inputs[i])
                    took[name].append(clock() - t0)
        out = report.setdefault(arch, {})
        out |= {name: percentiles(ns) for name, ns in took.items()}
        out[f"bitwise_equal_to_{base}"] = same
        for name in took:
            if name != base:
                out[f"{name}_over_{base}_p50"] = round(out[name]["p50_us"] / out[base]["p50_us"], 2)
        print(arch, json.dumps(out), flush=True)
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "inference_latency.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
