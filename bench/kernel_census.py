"""Where a sequence model's call at batch 1 goes on the GPU (issue 22): the kernels of one scorer call, how
long each runs, and how much of the graph replay the GPU spends idle between them.

For each model (production preset, window 64, batch 1, determinism on) and form (the scorer's CUDA graph
of the eager model, adapters/inference/scorer.py; the same kernels launched one by one; with `--compile`
the graph of the model compiled by Inductor, as `[scoring] compile = true` serves it; with `--fuse` the
graph of foxhunt's Triton kernels of it, as `[scoring] fuse = true` does), `--calls` scorer calls run
under torch.profiler (CUPTI records each kernel, those a graph launches too). Per call it prints: the
kernels and copies, the sum of their durations (the GPU's work), the span from the first one's start to
the last one's end, the span's idle share (the gaps between dependent kernels), and the kernels that
take the most time, grouped by name; with `--sequence` every kernel of the call in order, with the gap
before it. Against the scorer's latency (bench/inference_latency.py): the work is what fusing arithmetic
can save, the gaps what fewer kernels can save, and the rest of the latency (launch, the copies' set-up,
the wait) is the host's.

    python bench/kernel_census.py [--archs attention,tft,mamba2] [--compile] [--fuse] [--sequence]
        [--calls 20]  (the H200)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from foxhunt.adapters.inference.scorer import Scorer
from foxhunt.core.features import FeatureSpec
from foxhunt.models.configs import Shape, TrainConfig
from foxhunt.models.determinism import fingerprint, make_deterministic
from foxhunt.models.forecaster import build


def census(scorer: Scorer, calls: int, top: int, sequenced: bool = False) -> dict:
    """The graph's kernels over `calls` replays, split into calls at the host-to-device copy each begins
    with; with `sequenced` also the call's kernels one by one (sequence)."""
    window = np.random.default_rng(0).normal(size=(1, scorer.window, scorer.features)).astype(np.float32)
    for _ in range(20):
        scorer.score(window)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            scorer.score(window)
    gpu = sorted((e for e in prof.events() if e.device_type == DeviceType.CUDA),
                 key=lambda e: e.time_range.start)
    per_call: list[list] = []
    for e in gpu:
        if "HtoD" in e.name or not per_call:  # each call starts with the window's copy to the device
            per_call.append([])
        per_call[-1].append(e)
    per_call = [c for c in per_call if len(c) > 2]
    if not per_call:
        return {"error": "the profiler recorded no kernels of the graph (CUPTI without graph kernel records?)"}
    work = [sum(e.time_range.elapsed_us() for e in c) for c in per_call]
    span = [c[-1].time_range.end - c[0].time_range.start for c in per_call]
    by_name: dict[str, list[float]] = defaultdict(list)
    for c in per_call:
        for e in c:
            by_name[e.name].append(e.time_range.elapsed_us())
    n = len(per_call)
    heaviest = sorted(by_name.items(), key=lambda kv: -sum(kv[1]))[:top]
    return {
        "calls_profiled": n,
        "kernels_and_copies_per_call": statistics.median(len(c) for c in per_call),
        "gpu_work_us_p50": round(statistics.median(work), 1),
        "span_us_p50": round(statistics.median(span), 1),
        "idle_share_of_span": round(1 - statistics.median(work) / statistics.median(span), 3),
        "heaviest": [{"name": name[:90], "per_call": round(len(d) / n, 1), "us_per_call": round(sum(d) / n, 1),
                      "us_each_p50": round(statistics.median(d), 2)} for name, d in heaviest],
        "sequence": sequence(per_call) if sequenced else None,
    }


def sequence(per_call: list[list]) -> list[list]:
    """A call's kernels and copies in launch order, each [name, its duration, the gap before it] in µs, the
    medians over the calls with the commonest count of them (a graph replays the same ones each call)."""
    count = statistics.mode(len(c) for c in per_call)
    calls = [c for c in per_call if len(c) == count]
    return [[calls[0][i].name[:60], round(statistics.median(c[i].time_range.elapsed_us() for c in calls), 2),
             round(statistics.median(c[i].time_range.start - c[i - 1].time_range.end for c in calls), 2) if i else 0.0]
            for i in range(count)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--archs", default="attention,tft,mamba2")
    p.add_argument("--compile", action="store_true", help="also the Inductor-compiled form")
    p.add_argument("--fuse", action="store_true", help="also foxhunt's Triton kernels, for the models that have them")
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--top", type=int, default=8)
    p.add_argument("--sequence", action="store_true",
                   help="also each kernel of a call, in order, with the gap before it")
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("kernel_census.py profiles CUDA graphs: it needs a GPU")
    make_deterministic(4)
    device = torch.device("cuda")
    spec = FeatureSpec()
    shape = Shape(window=64, features=spec.width, horizons=(1, 4, 16), quantiles=(0.1, 0.5, 0.9))
    report: dict = {"environment": fingerprint(device)}
    for arch in args.archs.split(","):
        forms = [("graph", True, None), ("launched one by one", False, None)]
        forms += [("compiled, graph", True, {"compile": True})] if args.compile else []
        forms += [("fused, graph", True, {"fuse": True})] if args.fuse and arch != "mlp" else []
        for form, graph, served in forms:
            model = build(arch, TrainConfig().model(arch, "production"), shape, seed=1)
            scorer = Scorer(model, 64, spec.width, device, batch=1, graph=graph, **(served or {}))
            result = census(scorer, args.calls, args.top, args.sequence)
            report[f"{arch}, {form}"] = result
            print(f"{arch}, {form}:", json.dumps(result), flush=True)
            del scorer, model
            torch.cuda.empty_cache()
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "kernel_census.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
