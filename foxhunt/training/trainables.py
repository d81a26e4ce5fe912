"""The models as trainables (training/sweep.py's `Trainable`): one training run from a trial's `--set`
overrides and seed, in the trial's working directory, for `foxhunt tune` (training/tune.py).

Each trains exactly as `foxhunt train` does (training/train.py, training/agents.py), on data the command read
once and Ray ships to every worker (a worker needs no database), with its checkpoints in the working
directory (so a trial started again on another worker resumes from the last one) and its model in a store of
its own there. It reports its metric at each evaluation, with a checkpoint.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from foxhunt.adapters.models.store import LocalModelStore
from foxhunt.config import Config, override
from foxhunt.training.sweep import Overrides


def trained(workdir: Path) -> LocalModelStore:
    """The store a trial's model is in."""
    return LocalModelStore(workdir / "models")


@dataclass(frozen=True)
class ForecasterTrainable:
    """A forecaster's training (`foxhunt train ARCH`); its metric, `validation_loss`, the lowest so far."""

    cfg: Config
    arch: str
    size: str
    device: str
    market: dict[str, Any]  # training/dataset.py's read_market_data: each symbol's columns
    sources: list[Any]
    start_ns: int | None = None
    end_ns: int | None = None
    metric = "validation_loss"
    mode = "min"
    sections = ("train",)  # what its --space may vary

    def evaluations(self, cfg: Config) -> int:
        """The most evaluations a run makes, each a report."""
        return -(-cfg.train.max_steps // cfg.train.eval_every)

    def __call__(self, overrides: Overrides, seed: int, report: Callable[..., None], workdir: Path
                 ) -> dict[str, Any]:
        from foxhunt.training import dataset, train

        cfg = override(self.cfg, overrides)
        request = train.TrainRequest(self.arch, [s.journal for s in self.sources], self.start_ns, self.end_ns, seed,
                                     self.device, self.size, resume=True)
        market = copy.deepcopy(self.market)  # Ray hands a worker read-only arrays; the features' kernels write
        data = dataset.build(market, self.sources, cfg.features, cfg.train)
        lowest = [float("inf")]

        def progress(step: int, last: dict[str, float]) -> None:
            if "validation_loss" in last:  # the trainer has just evaluated and saved its checkpoint
                lowest[0] = min(lowest[0], last["validation_loss"])
                report({"validation_loss": lowest[0], "step": step}, checkpoint=True)

        done = train.train(data, request, cfg.features, cfg.train, trained(workdir), workdir / "checkpoints",
                           progress)
        m = done.manifest
        tested = {f"test_{h}_{k}": v for h, by in m.metrics["test"].items() for k, v in by.items()
                  if k in ("skill_vs_zero", "ic", "hit_rate")}
        return {"validation_loss": m.training["best_validation_loss"], "model": m.model_id,
                "steps": m.training["steps"], "stopped_early": m.training["stopped_early"]} | tested


@dataclass(frozen=True)
class AgentTrainable:
    """A trading agent's training (`foxhunt train rainbow|ppo|iql`); its metric, `held_out_pnl_bp`, the
    held-out range's PnL at the latest evaluation."""

    cfg: Config
    agent: str
    symbol: str
    size: str
    device: str
    journals: tuple[str, ...]
    market: Any  # training/rl/market.py's Market
    transitions: Any  # IQL's: training/rl/history.py's Transitions
    engine: Callable[[], Any]  # bootstrap.agent_engine
    start_ns: int | None = None
    end_ns: int | None = None
    metric = "held_out_pnl_bp"
    mode = "max"
    sections = ("agents",)  # what its --space may vary

    def evaluations(self, cfg: Config) -> int:
        agent = cfg.agents.agent(self.agent, self.size)  # type: ignore[arg-type]
        return -(-agent.steps // agent.eval_every)

    def __call__(self, overrides: Overrides, seed: int, report: Callable[..., None], workdir: Path
                 ) -> dict[str, Any]:
        from foxhunt.training import agents

        cfg = override(self.cfg, overrides)
        request = agents.AgentRequest(self.agent, list(self.journals), self.symbol, self.start_ns, self.end_ns, seed,
                                      self.device, self.size, resume=True)
        latest: dict[str, float] = {}

        def progress(step: int, last: dict[str, float]) -> None:
            if "held_out_pnl_bp" in last:  # a segment's end: evaluated on the held-out range, checkpoint saved
                latest.update(last)
                report({k: v for k, v in last.items() if k.startswith("held_out_")} | {"step": step},
                       checkpoint=True)

        market = copy.deepcopy(self.market)  # Ray hands a worker read-only arrays
        done = agents.train(market, request, cfg, trained(workdir), self.engine(), workdir / "checkpoints",
                            progress, self.transitions)
        m = done.manifest
        compared = {f"{policy}_{k}": v for policy, metrics in m.metrics["held_out"].items()
                    for k, v in metrics.items() if k in ("pnl_bp", "sharpe", "turnover")}
        return {k: v for k, v in latest.items() if k.startswith("held_out_")} | compared | {
            "model": m.model_id, "steps": m.training["steps"]}
