"""The training loop: AdamW on the mean pinball loss of every horizon and quantile, in steps of one
shuffled batch of the train range; an evaluation on the validation range every `eval_every` steps keeps
the best weights and stops after `patience` evaluations without improvement; a checkpoint after every
evaluation lets an interrupted run resume and end with the weights it would have had uninterrupted.

Everything that decides the weights is seeded and in the checkpoint: the initial weights (from the seed
alone, models/forecaster.py), the order of the batches (a generator of its own), the dropout masks (torch's
generators, CPU and CUDA), the position in the epoch and the optimiser's state.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import msgspec
import numpy as np
import torch

from foxhunt.errors import ModelError
from foxhunt.models.configs import Shape, TrainConfig
from foxhunt.models.forecaster import Forecaster, build
from foxhunt.training.dataset import Dataset


def pinball_loss(pred: torch.Tensor, y: torch.Tensor, quantiles: torch.Tensor) -> torch.Tensor:
    """Mean pinball loss; pred [B, H, Q], y [B, H], quantiles [Q]."""
    diff = y.unsqueeze(-1) - pred
    return torch.maximum(quantiles * diff, (quantiles - 1.0) * diff).mean()


class Outcome(NamedTuple):
    model: Forecaster  # with the best validation weights, on the CPU
    steps: int
    best_step: int
    best_loss: float
    stopped_early: bool
    resumed_from: int  # the step a checkpoint resumed at (0: none)
    history: list[dict[str, float]]


class Trainer:
    """One training run. `checkpoint` is the file it saves to after each evaluation and resumes from."""

    def __init__(self, data: Dataset, arch: str, model_cfg: msgspec.Struct, cfg: TrainConfig, seed: int,
                 device: torch.device, checkpoint: Path | None = None) -> None:
        if data.splits is None:
            raise ValueError("training needs a data set built with its splits")
        self.data, self.cfg, self.seed, self.device, self.checkpoint = data, cfg, seed, device, checkpoint
        shape = Shape(window=cfg.window, features=data.rows.shape[1], horizons=cfg.horizons, quantiles=cfg.quantiles)
        self.model = build(arch, model_cfg, shape, seed)
        self._normalise()
        self.model.to(device)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=cfg.learning_rate,
                                           weight_decay=cfg.weight_decay)
        self.quantiles = torch.tensor(cfg.quantiles, dtype=torch.float32, device=device)
        self.batches = torch.Generator().manual_seed(seed)
        torch.manual_seed(seed)  # dropout's generators, CPU and CUDA
        self.step = 0
        self.order = torch.empty(0, dtype=torch.int64)
        self.position = 0
        self.best_loss = float("inf")
        self.best_step = 0
        self.best_state: dict[str, torch.Tensor] = {}
        self.bad_evaluations = 0
        self.history: list[dict[str, float]] = []

    def _normalise(self) -> None:
        """Scales from the train range only: the features' mean and standard deviation at the samples'
        rows, each horizon's label standard deviation (1 where a value never varies)."""
        ends = self.data.splits.train
        x = self.data.rows[ends].astype(np.float64)
        y = self.data.labels[ends].astype(np.float64)
        x_scale = x.std(axis=0)
        y_scale = y.std(axis=0)
        self.model.x_mean.copy_(torch.from_numpy(x.mean(axis=0)))
        self.model.x_scale.copy_(torch.from_numpy(np.where(x_scale > 0, x_scale, 1.0)))
        self.model.y_scale.copy_(torch.from_numpy(np.where(y_scale > 0, y_scale, 1.0)))

    def _batch(self, ends: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.from_numpy(self.data.windows(ends)).to(self.device)
        y = torch.from_numpy(self.data.labels[ends]).to(self.device) / self.model.y_scale
        return x, y

    def _next_batch(self) -> np.ndarray:
        train = self.data.splits.train
        size = min(self.cfg.batch_size, train.size)
        if self.position + size > self.order.numel():
            self.order = torch.randperm(train.size, generator=self.batches)
            self.position = 0
        picked = self.order[self.position : self.position + size].numpy()
        self.position += size
        return train[picked]

    def validation_loss(self) -> float:
        self.model.eval()
        total, ends = 0.0, self.data.splits.validation
        with torch.no_grad():
            for start in range(0, ends.size, self.cfg.batch_size):
                chunk = ends[start : start + self.cfg.batch_size]
                x, y = self._batch(chunk)
                total += pinball_loss(self.model(x), y, self.quantiles).item() * chunk.size
        self.model.train()
        return total / ends.size

    def run(self, progress: Callable[[int, dict[str, float]], None] | None = None,
            resume: bool = False) -> Outcome:
        resumed_from = self._resume() if resume else 0
        self.model.train()
        stopped_early = self.bad_evaluations >= self.cfg.patience  # a resumed run that had stopped stays stopped
        while not stopped_early and self.step < self.cfg.max_steps:
            x, y = self._batch(self._next_batch())
            loss = pinball_loss(self.model(x), y, self.quantiles)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
            self.optimizer.step()
            self.step += 1
            evaluate = self.step % self.cfg.eval_every == 0 or self.step == self.cfg.max_steps
            if not evaluate and progress is None:
                continue  # reading the loss back waits for the device: only where it is shown or recorded
            last = {"step": self.step, "loss": loss.detach().item()}
            if evaluate:
                stopped_early = self._evaluate(last)
                self._save()
            if progress is not None:
                progress(self.step, last)
            if stopped_early:
                break
        if not self.best_state:  # no evaluation gave a finite loss: the weights are not a model
            raise ModelError(
                f"training diverged: the validation loss was never finite (last: {self.history[-1]}); nothing"
                " is stored: lower [train] learning_rate or grad_clip"
            )
        self.model.load_state_dict(self.best_state)
        return Outcome(self.model.to("cpu"), self.step, self.best_step, self.best_loss, stopped_early,
                       resumed_from, self.history)

    def _evaluate(self, last: dict[str, float]) -> bool:
        """Record the validation loss; keep the best weights; True when it is time to stop."""
        val = self.validation_loss()
        last["validation_loss"] = val
        self.history.append(dict(last))
        if val < self.best_loss:
            self.best_loss, self.best_step, self.bad_evaluations = val, self.step, 0
            self.best_state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        else:
            self.bad_evaluations += 1
        return self.bad_evaluations >= self.cfg.patience

    # --- checkpoints -------------------------------------------------------------------------------------

    def _state(self) -> dict[str, Any]:
        state = {
            "step": self.step, "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
            "batches": self.batches.get_state(), "cpu_rng": torch.get_rng_state(),
            "order": self.order, "position": self.position, "best_loss": self.best_loss,
            "best_step": self.best_step, "best_state": self.best_state, "bad_evaluations": self.bad_evaluations,
            "history": self.history,
        }
        if self.device.type == "cuda":
            state["cuda_rng"] = torch.cuda.get_rng_state(self.device)
        return state

    def _save(self) -> None:
        if self.checkpoint is None:
            return
        self.checkpoint.parent.mkdir(parents=True, exist_ok=True)
        partial = self.checkpoint.with_suffix(".partial")
        torch.save(self._state(), partial)
        os.replace(partial, self.checkpoint)  # a crash leaves the last whole checkpoint

    def _resume(self) -> int:
        if self.checkpoint is None or not self.checkpoint.exists():
            return 0
        # onto the CPU: generator states must be CPU byte tensors; the model and the optimiser copy theirs over
        state = torch.load(self.checkpoint, map_location="cpu", weights_only=True)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.batches.set_state(state["batches"])
        torch.set_rng_state(state["cpu_rng"])
        if "cuda_rng" in state:
            torch.cuda.set_rng_state(state["cuda_rng"], self.device)
        self.step, self.order, self.position = state["step"], state["order"], state["position"]
        self.best_loss, self.best_step = state["best_loss"], state["best_step"]
        self.best_state = copy.copy(state["best_state"])
        self.bad_evaluations, self.history = state["bad_evaluations"], state["history"]
        return self.step


def predict(model: Forecaster, data: Dataset, ends: np.ndarray, device: torch.device, batch: int = 1024) -> np.ndarray:
    """Forecasts in log returns [len(ends), horizons, quantiles], in order."""
    model.eval()
    out = []
    with torch.no_grad():
        for start in range(0, ends.size, batch):
            x = torch.from_numpy(data.windows(ends[start : start + batch])).to(device)
            out.append(model.predict(x).to("cpu").numpy())
    return np.concatenate(out) if out else np.zeros((0, len(model.shape.horizons), len(model.shape.quantiles)))
