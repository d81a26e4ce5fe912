"""What both agents' training loops share: training in segments of `eval_every` environment steps, an
evaluation on the held-out market and a checkpoint after each, and a resume from the last checkpoint that
ends with the weights an uninterrupted run would have had.

Every segment starts fresh episodes in all its environments, seeded from the run's seed and the segment's
number, so a checkpoint holds no half-played episode (no kernel state): the weights, the optimiser, the
generators, the counters and whatever the agent keeps between segments (Rainbow's replay memory).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch import nn

from foxhunt.training.rl.environment import TradingEnv
from foxhunt.training.rl.evaluation import Policy, play

Progress = Callable[[int, dict[str, float]], None]


class Outcome(NamedTuple):
    model: nn.Module  # the final weights, on the CPU
    steps: int
    resumed_from: int  # the environment step a checkpoint resumed at (0: none)
    history: list[dict[str, float]]  # per segment: the step, the training losses, the held-out metrics


class Segmented:
    """A training run in segments. Subclasses define `train_segment`, `policy`, `state` and `restore`."""

    def __init__(self, total_steps: int, eval_every: int, evaluation: TradingEnv, eval_episodes: int,
                 seed: int, checkpoint: Path | None) -> None:
        self.total_steps, self.eval_every, self.seed, self.checkpoint = total_steps, eval_every, seed, checkpoint
        self.evaluation, self.eval_episodes = evaluation, eval_episodes
        self.steps = 0
        self.segment = 0
        self.history: list[dict[str, float]] = []

    def train_segment(self, steps: int, seed: int, progress: Progress | None) -> dict[str, float]:
        """Train `steps` environment steps in fresh episodes seeded by `seed`, telling `progress` now and then
        (the environment steps so far, the latest losses); return the segment's mean losses."""
        raise NotImplementedError

    def policy(self) -> Policy:
        """The trained policy as evaluation plays it: deterministic (greedy, no noise)."""
        raise NotImplementedError

    def state(self) -> dict[str, Any]:
        raise NotImplementedError

    def restore(self, state: dict[str, Any]) -> None:
        raise NotImplementedError

    @property
    def model(self) -> nn.Module:
        raise NotImplementedError

    def run(self, progress: Progress | None = None, resume: bool = False) -> Outcome:
        resumed_from = self._resume() if resume else 0
        while self.steps < self.total_steps:
            steps = min(self.eval_every, self.total_steps - self.steps)
            losses = self.train_segment(steps, (self.seed * 1_000_003 + self.segment) % 2**31, progress)
            self.segment += 1
            held_out = play(self.evaluation, self.policy(), self.eval_episodes)
            scores = {f"held_out_{k}": v for k, v in held_out.items()}
            self.history.append({"step": float(self.steps), **losses, **scores})
            self._save()
            if progress is not None:
                progress(self.steps, self.history[-1])
        return Outcome(self.model.to("cpu"), self.steps, resumed_from, self.history)

    def _save(self) -> None:
        if self.checkpoint is None:
            return
        self.checkpoint.parent.mkdir(parents=True, exist_ok=True)
        partial = self.checkpoint.with_suffix(".partial")
        torch.save({"steps": self.steps, "segment": self.segment, "history": self.history, **self.state()}, partial)
        os.replace(partial, self.checkpoint)  # a crash leaves the last whole checkpoint

    def _resume(self) -> int:
        if self.checkpoint is None or not self.checkpoint.exists():
            return 0
        state = torch.load(self.checkpoint, map_location="cpu", weights_only=True)
        self.steps, self.segment, self.history = state["steps"], state["segment"], state["history"]
        self.restore(state)
        return self.steps
