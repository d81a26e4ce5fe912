"""A served agent's decision at batch 1 (issue 22's target for single-step recurrent models and MLPs: p99
at most 100 µs, copies included): one `TorchPolicyRunner.act` call (adapters/inference/policy.py) from a
numpy observation to the action and its outputs, the copies to and from the device and the wait included,
p50, p99 and p99.9 over --calls calls, for each kind of agent at the production preset (Rainbow-IQN 512 x 3
with 32 fractions to act, PPO's LSTM of 256 stepped once a decision, IQL 512 x 3), two ways side by side
in alternating blocks on a GPU: the runner's CUDA graph, and the same runner eager. Each way acts on the
same sequence of observations from a fresh load, and the bench checks that the graph's actions and outputs
are the eager ones' bit for bit (PPO's state carried through both). Determinism on. The weights are the
seed's initial ones: latency does not depend on their values. `--ways` adds others:

- fused: `[scoring] fuse`'s graph, for the agents foxhunt has Triton kernels for (Rainbow-IQN:
  adapters/inference/fused/rainbow.py), its outputs' largest difference from eager's reported (not
  eager's bits);
- compiled: `torch.compile(mode="reduce-overhead")` of the eager policy's forward (which captures CUDA
  graphs of its own) behind eager's copies, compiled before timing, its largest difference reported. In
  a process apart from the graphs (`--ways eager,compiled`): torch 2.11's compiled graphs crashed beside
  the runner's own in one process, as the forecasters' did (bench/inference_latency.py).

    python bench/policy_latency.py --device cuda [--calls 10000] [--ways graph,eager,fused] [--out DIR]  (H200)
    python bench/policy_latency.py --device cuda --ways eager,compiled
    python bench/policy_latency.py --device cpu --calls 2000                       (here)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from latency import percentiles  # bench/latency.py

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/stored.py: a stored agent's files

from foxhunt.adapters.inference.policy import TorchPolicyRunner
from foxhunt.adapters.models.store import LocalModelStore
from foxhunt.models.agent_configs import EXTRA
from tests.stored import SPEC, agent_files


def serve(runner: TorchPolicyRunner, mid: str, compiled: bool) -> None:
    """A fresh load of the agent `mid`; with `compiled`, its eager policy's forward compiled."""
    runner.load(mid, SPEC.digest())
    if compiled:
        _, policy = runner.served
        policy.forward = torch.compile(policy.forward, mode="reduce-overhead")


FORMS = {"graph": (True, False), "eager": (False, False), "fused": (True, True), "compiled": (False, False)}
KINDS = {"rainbow": ("rainbow", False), "ppo": ("ppo", False), "ppo-continuous": ("ppo", True), "iql": ("iql", False)}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda")
    p.add_argument("--size", default="production")
    p.add_argument("--calls", type=int, default=10_000)
    p.add_argument("--block", type=int, default=500)
    p.add_argument("--kinds", default=",".join(KINDS))
    p.add_argument("--ways", default="graph,eager", help="of graph, eager, fused, compiled (module docstring)")
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    args = p.parse_args()
    obs = np.random.default_rng(0).normal(size=(args.block, SPEC.width + EXTRA)).astype(np.float32)
    report: dict = {"size": args.size, "device": args.device}
    with tempfile.TemporaryDirectory() as tmp:
        store = LocalModelStore(Path(tmp))
        for name in args.kinds.split(","):
            arch, continuous = KINDS[name]
            mid, files = agent_files(arch, continuous=continuous, size=args.size)
            store.put(mid, files)
            forms = {way: FORMS[way] for way in args.ways.split(",")} if args.device.startswith("cuda") else {
                "eager": FORMS["eager"]}
            ways = {}
            for way, (graph, fuse) in forms.items():
                runner = TorchPolicyRunner(store, args.device, threads=1, graph=graph, fuse=fuse)
                report["environment"], _ = runner.prepare()
                if runner.load(mid, SPEC.digest())[0].fused or not fuse:
                    ways[way] = runner
            played, outputs = {}, {}
            for way, runner in ways.items():  # the same sequence from a fresh load: the same bytes?
                started = time.perf_counter()
                serve(runner, mid, compiled=way == "compiled")
                acts = [runner.act(x) for x in obs[:64]]
                played[way] = b"".join(np.float64(a).tobytes() + o.tobytes() for a, o in acts)
                outputs[way] = np.stack([o for _, o in acts])
                if way == "compiled":  # the first calls compiled it
                    report.setdefault(name, {})["compile_seconds"] = round(time.perf_counter() - started, 1)
            took: dict[str, list[int]] = {way: [] for way in ways}
            clock = time.perf_counter_ns
            while len(took[next(iter(ways))]) < args.calls:
                for way, runner in ways.items():
                    act = runner.act
                    for i in range(args.block):
                        t0 = clock()
                        act(obs[i])
                        took[way].append(clock() - t0)
            out = report.setdefault(name, {}) | {way: percentiles(ns) for way, ns in took.items()}
            if "graph" in ways and "eager" in ways:
                out["graph_equals_eager_bitwise"] = played["graph"] == played["eager"]
            for way in ("fused", "compiled"):
                if way in ways and "eager" in ways:
                    out[f"{way}_largest_difference_from_eager"] = float(np.abs(outputs[way] - outputs["eager"]).max())
            if "eager" in ways:
                for way in ways.keys() - {"eager"}:
                    out[f"eager_over_{way}_p50"] = round(out["eager"]["p50_us"] / out[way]["p50_us"], 2)
            report[name] = out
            print(name, json.dumps(out), flush=True)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "policy_latency.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
