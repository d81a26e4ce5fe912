"""Offline implicit Q-learning from journaled trading (history.py for the transitions, models/iql.py for
the networks and the objective): batches drawn uniformly from a seeded generator, one Adam step on the
sum of the three losses (their parameters are disjoint), the target Qs following by Polyak averaging;
every `eval_every` gradient steps the policy plays the held-out range in the environment, greedily,
against the baselines; checkpoints and resume as the online agents' (segments.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from foxhunt.errors import DataError
from foxhunt.models.agent_configs import IqlConfig
from foxhunt.models.determinism import seeded
from foxhunt.models.greedy import GreedyImplicitQ
from foxhunt.models.iql import ImplicitQ
from foxhunt.training.rl.environment import TradingEnv
from foxhunt.training.rl.evaluation import Policy
from foxhunt.training.rl.graphed import Step, adam
from foxhunt.training.rl.history import Transitions
from foxhunt.training.rl.segments import Progress, Segmented

PROGRESS_EVERY = 250  # gradient steps between the progress bar's updates


class IqlTrainer(Segmented):
    def __init__(self, data: Transitions, cfg: IqlConfig, seed: int, device: torch.device,
                 scale: tuple[np.ndarray, np.ndarray], *, evaluation: TradingEnv, **segments: Any) -> None:
        super().__init__(cfg.steps, cfg.eval_every, evaluation=evaluation, seed=seed, **segments)
        if len(data) < cfg.batch_size:
            raise DataError(f"{data.source}: {len(data)} transitions, fewer than a batch ({cfg.batch_size}): give"
                            " IQL more journals of trading, or lower agents.iql.batch_size")
        self.cfg, self.device = cfg, device
        actions = evaluation.core.cfg.actions
        self.net = seeded(seed, lambda: ImplicitQ(cfg, data.obs.shape[1], actions))
        self.net.obs_mean.copy_(torch.from_numpy(scale[0]))
        self.net.obs_scale.copy_(torch.from_numpy(scale[1]))
        self.net.to(device)
        to = lambda a: torch.from_numpy(a).to(device)
        discount = np.full(len(data), cfg.gamma, dtype=np.float32)
        self.data = {"obs": to(data.obs), "action": to(data.action), "reward": to(data.reward),
                     "next_obs": to(data.next_obs), "discount": to(discount)}
        self.batch = {k: v[: cfg.batch_size].clone() for k, v in self.data.items()}
        self.stats = torch.zeros(3, device=device)
        self.optimizer = adam(self.net, device, lr=cfg.learning_rate)
        self.sampling = torch.Generator().manual_seed(seed)
        self.learn = Step(self._update, [self.net], self.optimizer, graph=cfg.graph and device.type == "cuda")

    @property
    def model(self) -> ImplicitQ:
        return self.net

    def policy(self) -> Policy:
        return GreedyImplicitQ(self.net, self.device)

    def train_segment(self, steps: int, seed: int, progress: Progress | None) -> dict[str, float]:
        n = self.data["action"].numel()
        totals = torch.zeros(3, device=self.device)
        self.net.train()
        for _ in range(steps):
            index = torch.randint(n, (self.cfg.batch_size,), generator=self.sampling).to(self.device)
            for name, whole in self.data.items():
                self.batch[name].copy_(whole.index_select(0, index))
            self.learn()
            self.net.follow()
            totals += self.stats
            self.steps += 1
            if progress is not None and self.steps % PROGRESS_EVERY == 0:
                progress(self.steps, {"loss": float(self.stats.sum().item())})
        return dict(zip(("value_loss", "q_loss", "policy_loss"), (totals / steps).tolist(), strict=True))

    def _update(self) -> None:
        b = self.batch
        value_loss, q_loss, policy_loss = self.net.losses(b["obs"], b["action"], b["reward"], b["next_obs"],
                                                          b["discount"])
        self.optimizer.zero_grad(set_to_none=True)
        (value_loss + q_loss + policy_loss).backward()
        torch.nn.utils.clip_grad_norm_(self.net.parameters(), self.cfg.grad_clip)
        self.optimizer.step()
        self.stats.copy_(torch.stack((value_loss, q_loss, policy_loss)).detach())

    def state(self) -> dict[str, Any]:
        return {"net": self.net.state_dict(), "optimizer": self.optimizer.state_dict(),
                "sampling": self.sampling.get_state()}

    def restore(self, state: dict[str, Any]) -> None:
        self.net.load_state_dict(state["net"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.sampling.set_state(state["sampling"])
