"""A model in the live loop (issue 22): tick to order, and the daemon's throughput with the ensemble strategy.

tick-to-order: the paper daemon (`run_daemon`, the memory journal: no database on the GPU machine, so the
commit wait of `before_send` is left out and only foxhunt's own path is measured) on the wall clock, a
synthetic feed paced at --rate quotes a second, the ensemble strategy on one model of --arch (production
preset unless --size, a window of --window rows; its seed's weights, which latency does not depend on),
served by the scoring source on --device (its inputs standardised on the feed's rows as training does,
its head's bias and output scale set so that its forecasts over the feed have a mean of zero and a spread
of about a basis point: the forecast's sign follows the window and the target moves often). Measured per input, from the journal and a venue that notes the
time each order reaches it:
- score: the model call, copies included (ModelScored.latency_ns);
- tick to score: the feed's stamp of the quote (its ts_init) to the score's (taken onto the bus);
- tick to order: the feed's stamp of the quote to the SubmitOrder reaching the venue adapter, through the
  kernel, the strategy and the pre-trade gate (orders on scores whose target moved: the strategy's steps
  are fine, --levels, so most scores move it).

throughput (--throughput): the same daemon on the feed's clock, the quotes as fast as it takes them, with
the ensemble strategy (scored on the CPU) against ema_cross, in alternating rounds: market data inputs a
second, and how many of them were scored (a window scored is the newest of its symbol: while the loop is
busy the scores thin out, and on the CPU path a model call also waits for the interpreter's lock, which
the busy loop holds; at a paced, live rate the tick-to-order run shows the share scored).

    python bench/scoring_loop.py --device cuda --arch mlp [--quotes 20000 --rate 2000] [--compile | --fuse]  (the H200)
    .venv/bin/python bench/scoring_loop.py --device cpu --arch mlp --size tiny --throughput   (here)
"""

from __future__ import annotations

from foxhunt import compiled

compiled.check()  # before any compiled module is imported: a stale one runs as its Python source

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from contextlib import aclosing
from pathlib import Path

import anyio
import msgspec
import numpy as np
import torch
from latency import percentiles  # bench/latency.py

from foxhunt import bootstrap, config
from foxhunt.adapters.feeds.synthetic import SyntheticFeed
from foxhunt.adapters.journal.memory import MemoryJournalStore
from foxhunt.adapters.models.store import LocalModelStore
from foxhunt.adapters.systemd import Notifier
from foxhunt.core.features import Columns, batch
from foxhunt.messages.base import parse_fixed
from foxhunt.messages.market import QuoteTick
from foxhunt.messages.orders import SubmitOrder
from foxhunt.messages.scores import ModelScored, PolicyActed
from foxhunt.models.artifact import FeatureSetRef, Manifest, model_id, pack
from foxhunt.models.configs import Shape, TrainConfig
from foxhunt.models.forecaster import build, parameter_hash
from foxhunt.runtime.clock import EventClock, WallClock
from foxhunt.runtime.daemon import Operations, RunRequest, run_daemon

SCORES = (ModelScored, PolicyActed)  # a model's score, or a served agent's decision


def stored_model(root: Path, arch: str, size: str, window: int) -> tuple[LocalModelStore, str]:
    spec = config.Config().features
    shape = Shape(window=window, features=spec.width, horizons=(1, 4, 16), quantiles=(0.1, 0.5, 0.9))
    cfg = TrainConfig().model(arch, size)  # type: ignore[arg-type]
    model = build(arch, cfg, shape, seed=1)
    # scaled as training scales (features standardised on the feed's own rows, forecasts in basis points),
    # and centred on zero, so that the forecast's sign follows the window and the target moves often
    quotes = list(SyntheticFeed(5, 5000, config.Config().trading().build_instruments()["EURUSD"],
                                parse_fixed("1.1"), EventClock()))
    rows = batch(spec, Columns.of(quotes))[0][100:]
    with torch.no_grad():
        model.x_mean.copy_(torch.from_numpy(rows.mean(axis=0)))
        model.x_scale.copy_(torch.from_numpy(rows.std(axis=0) + 1e-9))
        model.eval()
        ends = np.arange(window, len(rows), 37)
        samples = torch.from_numpy(rows[ends[:, None] + np.arange(-window, 0)].astype(np.float32))
        out = model(samples)  # [samples, horizons, quantiles], before y_scale
        mean = out.mean(dim=0)
        bias = [p for name, p in model.named_parameters() if "head" in name and name.endswith("bias")][-1]
        bias -= mean.reshape(-1) if bias.numel() == mean.numel() else mean[0]  # (a head shared by the horizons:
        # centred on the first, which the strategy trades on)
        model.y_scale.copy_(1e-4 / out.std(dim=0).mean(dim=-1).clamp_min(1e-12))  # a spread of about 1 bp
    sha = parameter_hash(model)
    manifest = Manifest(model_id=model_id(arch, sha), arch=arch, size=size, config=msgspec.to_builtins(cfg),
                        shape=shape, seed=1, parameter_sha256=sha,
                        feature_set=FeatureSetRef(name=spec.name, version=spec.version, digest=spec.digest(),
                                                  spec=msgspec.to_builtins(spec)))
    store = LocalModelStore(root)
    store.put(manifest.model_id, pack(model, manifest))
    return store, manifest.model_id


def cfg_for(store: LocalModelStore, strategy: str, models: list[str], device: str, levels: int,
            compile: bool = False, fuse: bool = False) -> config.Config:
    env = {"FOXHUNT_STRATEGY__NAME": strategy, "FOXHUNT_MODELS__STORE": str(store.root),
           "FOXHUNT_SCORING__DEVICE": device, "FOXHUNT_SCORING__BATCH": "1", "FOXHUNT_SCORING__DEADLINE_MS": "5000",
           "FOXHUNT_SCORING__COMPILE": "true" if compile else "false", "FOXHUNT_SCORING__FUSE": "true" if fuse else "false",
           "FOXHUNT_SCORING__LOAD_DEADLINE_S": "600"}
    if strategy == "agent":  # models: the stored agent the strategy follows, served by the policy source
        env |= {"FOXHUNT_STRATEGY__AGENT__POLICY": models[0], "FOXHUNT_RISK__MAX_ORDERS_PER_WINDOW": "100000",
                "FOXHUNT_RISK__MAX_MESSAGES_PER_SECOND": "100000"}
    if strategy == "ensemble":
        env |= {"FOXHUNT_STRATEGY__ENSEMBLE__MODELS": json.dumps(models), "FOXHUNT_STRATEGY__ENSEMBLE__ENTRY_BPS": "0",
                "FOXHUNT_STRATEGY__ENSEMBLE__FULL_BPS": "1e-3", "FOXHUNT_STRATEGY__ENSEMBLE__LEVELS": str(levels),
                "FOXHUNT_RISK__MAX_ORDERS_PER_WINDOW": "100000", "FOXHUNT_RISK__MAX_MESSAGES_PER_SECOND": "100000"}
    return config.load(None, env=env)


class Timed:
    """The simulated venue, noting when each order reaches it."""

    def __init__(self, venue) -> None:
        self.venue = venue
        self.sent: dict[str, int] = {}

    def __getattr__(self, name: str):
        return getattr(self.venue, name)

    def send(self, cmd):
        if type(cmd) is SubmitOrder:
            self.sent[cmd.order_id] = time.time_ns()
        return self.venue.send(cmd)


async def run(cfg: config.Config, feed, clock, rate: float | None) -> tuple[dict, list, dict[str, int]]:
    store = MemoryJournalStore()
    venues: list[Timed] = []

    def venue(kernel, trading, clock):
        venues.append(Timed(bootstrap.simulated_venue(kernel, trading, clock)))
        return venues[-1]

    ops = Operations(venue=venue, notifier=Notifier({}), scoring=bootstrap.scoring(cfg))
    summary = await run_daemon(store, cfg, RunRequest("j", feed, clock, feed_rate=rate), {"bench": "1"}, ops)
    async with aclosing(store.read("j")) as pages:
        records = [r async for page in pages for r in page]
    return summary, records, venues[0].sent


def tick_to_order(args, store: LocalModelStore, mid: str) -> dict:
    cfg = cfg_for(store, strategy_of(args), [mid], args.device, args.levels, args.compile, args.fuse)
    clock = WallClock()
    feed = SyntheticFeed(5, args.quotes, cfg.trading().build_instruments()["EURUSD"], parse_fixed("1.1"), clock)
    summary, records, sent = anyio.run(run, cfg, feed, clock, args.rate, backend_options={"use_uvloop": True})
    by_seq = {r.seq: r.message for r in records}
    score_ns, tick_score, tick_order = [], [], []
    for r in records:
        msg = r.message
        if type(msg) in SCORES:
            score_ns.append(msg.latency_ns)
            tick_score.append(msg.ts_init - by_seq[msg.as_of].ts_init)
        elif type(msg) is SubmitOrder and msg.order_id in sent:
            cause = by_seq[r.causation]
            if type(cause) in SCORES:
                tick_order.append(sent[msg.order_id] - by_seq[cause.as_of].ts_init)
    quotes = sum(1 for r in records if type(r.message) is QuoteTick)
    return {"score_call": percentiles(score_ns), "tick_to_score": percentiles(tick_score),
            "tick_to_order": percentiles(tick_order), "quotes": quotes, "scores": len(score_ns),
            "orders": summary["orders"], "trading_state": summary["trading_state"]}


def throughput(args, store: LocalModelStore, mid: str) -> dict:
    served = strategy_of(args)
    out: dict[str, list[float]] = {"ema_cross": [], served: []}
    scored: list[float] = []
    for _ in range(args.repeats):
        for strategy in ("ema_cross", served):
            cfg = cfg_for(store, strategy, [mid], "cpu", args.levels)
            clock = EventClock()
            feed = list(SyntheticFeed(5, args.quotes, cfg.trading().build_instruments()["EURUSD"], parse_fixed("1.1"),
                                      clock))
            started = time.perf_counter()
            _, records, _ = anyio.run(run, cfg, feed, clock, None, backend_options={"use_uvloop": True})
            seconds = time.perf_counter() - started
            out[strategy].append(args.quotes / seconds)
            if strategy == served:
                scored.append(sum(1 for r in records if type(r.message) in SCORES))
    med = {k: round(statistics.median(v)) for k, v in out.items()}
    return {"quotes_per_s": med, "rounds": out, f"{served}_over_ema_cross": round(med[served] / med["ema_cross"], 3),
            "scores": scored, "share_of_quotes_scored": round(statistics.median(scored) / args.quotes, 4)}


def strategy_of(args) -> str:
    return "agent" if args.agent else "ensemble"


def stored_agent(root: Path, arch: str, size: str) -> tuple[LocalModelStore, str]:
    """An agent at the preset `size`, its seed's weights (latency does not depend on their values), trained
    on no data: its observations standardised on the feed's feature rows, so that what it sees moves its
    choice and its target changes often."""
    from safetensors.torch import load as load_tensors
    from safetensors.torch import save as save_tensors

    from foxhunt.models.agent_configs import EXTRA
    from foxhunt.models.artifact import MANIFEST, WEIGHTS

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/stored.py: a stored agent's files
    from tests.stored import agent_files

    _, files = agent_files(arch, size=size)
    spec = config.Config().features
    quotes = list(SyntheticFeed(5, 5000, config.Config().trading().build_instruments()["EURUSD"],
                                parse_fixed("1.1"), EventClock()))
    rows = batch(spec, Columns.of(quotes))[0][100:]
    tensors = load_tensors(files[WEIGHTS])
    mean = np.concatenate([rows.mean(axis=0), np.zeros(EXTRA)]).astype(np.float32)
    scale = np.concatenate([rows.std(axis=0) + 1e-9, np.ones(EXTRA)]).astype(np.float32)
    for name in tensors:
        if name.endswith("obs_mean"):
            tensors[name] = torch.from_numpy(mean)
        elif name.endswith("obs_scale"):
            tensors[name] = torch.from_numpy(scale)
    holder = torch.nn.Module()  # parameter_hash reads a state dict: these tensors, by their names
    holder.state_dict = lambda: tensors  # type: ignore[method-assign]
    sha = parameter_hash(holder)
    manifest = msgspec.json.decode(files[MANIFEST]) | {"model_id": model_id(arch, sha), "parameter_sha256": sha}
    store = LocalModelStore(root)
    store.put(manifest["model_id"], {WEIGHTS: save_tensors(tensors), MANIFEST: msgspec.json.encode(manifest)})
    return store, manifest["model_id"]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda")
    p.add_argument("--arch", default="mlp")
    p.add_argument("--size", default="production")
    p.add_argument("--window", type=int, default=64)
    p.add_argument("--quotes", type=int, default=20_000)
    p.add_argument("--rate", type=float, default=2_000.0)
    p.add_argument("--levels", type=int, default=1_000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--throughput", action="store_true", help="the throughput rounds instead of tick to order")
    p.add_argument("--compile", action="store_true", help="[scoring] compile: the forward fused inside the graph")
    p.add_argument("--fuse", action="store_true", help="[scoring] fuse: foxhunt's Triton kernels inside the graph")
    p.add_argument("--agent", choices=["rainbow", "ppo", "iql"], help="the strategy agent on a served agent of this"
                   " kind, instead of the ensemble strategy on a model of --arch")
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store, mid = (stored_agent(Path(tmp), args.agent, args.size) if args.agent else
                      stored_model(Path(tmp), args.arch, args.size, args.window))
        result = throughput(args, store, mid) if args.throughput else tick_to_order(args, store, mid)
    arch = args.agent or args.arch
    result |= {"arch": arch, "size": args.size, "window": 1 if args.agent else args.window, "compile": args.compile,
               "fuse": args.fuse, "device": "cpu" if args.throughput else args.device}
    print(json.dumps(result))
    Path(args.out).mkdir(parents=True, exist_ok=True)
    name = (f"{strategy_of(args)}_throughput" if args.throughput else
            f"tick_to_order_{arch}{'_compiled' if args.compile else ''}{'_fused' if args.fuse else ''}")
    (Path(args.out) / f"{name}.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
