"""An experiment for issue 22's sequence-model latency: the scorer's own CUDA graph around the model
compiled by Inductor without its CUDA graphs (`torch.compile(mode="default")`, whose fused kernels the
scorer's graph then captures), against the scorer's graph of the eager model, batch 1, a window of 64
rows, production presets, determinism on. Prints p50/p99/p99.9 of `Scorer.score` (copies included),
whether the compiled forecasts equal eager's bit for bit, and a digest of the compiled forecasts on fixed
inputs (run it twice: two processes must print the same digest for the path to be deterministic).

    python bench/compiled_graph.py [--archs attention,tft,mamba2] [--calls 5000]      (on the H200)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time

import numpy as np
import torch

from foxhunt.adapters.inference.scorer import Scorer
from foxhunt.core.features import FeatureSpec
from foxhunt.models.configs import Shape, TrainConfig
from foxhunt.models.determinism import make_deterministic
from foxhunt.models.forecaster import build


class CompiledPredict(torch.nn.Module):
    """The model, its `predict` compiled (the scorer calls `predict` and captures what it launches)."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model
        self.fn = torch.compile(model.predict, mode="default", dynamic=False, fullgraph=False)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(x)


def timed(scorer: Scorer, inputs: np.ndarray, calls: int) -> dict[str, float]:
    ns = []
    for i in range(calls):
        t = time.perf_counter_ns()
        scorer.score(inputs[i % len(inputs)])
        ns.append(time.perf_counter_ns() - t)
    a = np.array(ns[calls // 10 :], dtype=np.float64) / 1e3
    return {f"p{p}": round(float(np.percentile(a, p)), 1) for p in (50, 99, 99.9)}


def setting() -> tuple[torch.device, FeatureSpec, Shape, np.ndarray]:
    """Determinism on, the GPU, the features, a window of 64 rows, and 256 fixed random windows."""
    make_deterministic(4)
    spec = FeatureSpec()
    shape = Shape(window=64, features=spec.width, horizons=(1, 4, 16), quantiles=(0.1, 0.5, 0.9))
    return (torch.device("cuda"), spec, shape,
            np.random.default_rng(0).normal(size=(256, 1, 64, spec.width)).astype(np.float32))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--archs", default="attention,tft,mamba2")
    p.add_argument("--calls", type=int, default=5000)
    args = p.parse_args()
    device, spec, shape, inputs = setting()
    for arch in args.archs.split(","):
        cfg = TrainConfig().model(arch, "production")
        eager = Scorer(build(arch, cfg, shape, seed=1), 64, spec.width, device, batch=1)
        out: dict[str, object] = {"graph_of_eager": timed(eager, inputs, args.calls)}
        try:
            started = time.perf_counter()
            model = build(arch, cfg, shape, seed=1).to(device).eval()
            compiled = Scorer(CompiledPredict(model), 64, spec.width, device, batch=1)
            out["compile_s"] = round(time.perf_counter() - started, 1)
            out["graph_of_compiled"] = timed(compiled, inputs, args.calls)
            a = np.stack([eager.score(x) for x in inputs[:64]])
            b = np.stack([compiled.score(x) for x in inputs[:64]])
            out["bitwise_equal_to_eager"] = bool(np.array_equal(a, b))
            out["largest_abs_diff"] = float(np.max(np.abs(a - b)))
            out["compiled_digest"] = hashlib.sha256(b.tobytes()).hexdigest()[:16]
        except Exception as e:  # noqa: BLE001 - reported
            out["compiled"] = f"{type(e).__name__}: {str(e)[:300]}"
        print(arch, json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
