"""The curiosity bonus of an online agent's training (models/rnd.py): built from the run's seed, it scores
the observations each step reaches and learns them, one Adam step per step of the environments."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from foxhunt.models.determinism import seeded
from foxhunt.models.rnd import Curiosity

FEATURES = 32  # the random network's output width (the paper's embedding)
SEED_OFFSET = 1_000_003  # its weights come from the run's seed plus this, apart from the agent's own


class CuriosityBonus:
    def __init__(self, observations: int, hidden: int, scale: tuple[np.ndarray, np.ndarray], learning_rate: float,
                 seed: int, device: torch.device) -> None:
        self.net = seeded(seed + SEED_OFFSET, lambda: Curiosity(observations, hidden, FEATURES))
        self.net.obs_mean.copy_(torch.from_numpy(scale[0]))
        self.net.obs_scale.copy_(torch.from_numpy(scale[1]))
        self.net.to(device)
        self.device = device
        self.optimizer = torch.optim.Adam(self.net.predictor.parameters(), lr=learning_rate)

    def __call__(self, next_obs: np.ndarray) -> np.ndarray:
        """The bonus of each observation the environments reached (float32 [n]); the predictor then learns
        them."""
        obs = torch.from_numpy(next_obs).to(self.device)
        bonus = self.net.bonus(obs)
        with torch.enable_grad():  # PPO acts under no_grad
            loss = self.net.loss(obs)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
        self.optimizer.step()
        return bonus.cpu().numpy()

    def state(self) -> dict[str, Any]:
        return {"net": self.net.state_dict(), "optimizer": self.optimizer.state_dict()}

    def restore(self, state: dict[str, Any]) -> None:
        self.net.load_state_dict(state["net"])
        self.optimizer.load_state_dict(state["optimizer"])
