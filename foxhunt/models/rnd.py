"""Random network distillation (Burda, Edwards, Storkey and Klimov 2019, "Exploration by Random Network
Distillation", ICLR): a curiosity bonus for the online agents.

A fixed, randomly initialised network maps an observation to a feature vector; a predictor learns to
give the same vector. Where the predictor errs, the observation is novel: its squared error, divided by a
running standard deviation of the errors, is the intrinsic reward, and `curiosity` times it is added to
the environment's reward. Observations are normalised by the agent's scales, then clipped to [-5, 5] as
the paper does. The running moments are float64 and merged batch by batch in a fixed order, so a seeded
run repeats. The predictor trains on the observations the agent meets, with its own Adam.
"""

from __future__ import annotations

import torch
from torch import nn

CLIP = 5.0


def _mlp(inputs: int, hidden: int, outputs: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(inputs, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, outputs))


class Curiosity(nn.Module):
    def __init__(self, observations: int, hidden: int, features: int) -> None:
        super().__init__()
        self.register_buffer("obs_mean", torch.zeros(observations))
        self.register_buffer("obs_scale", torch.ones(observations))
        self.target = _mlp(observations, hidden, features).requires_grad_(False)
        self.predictor = _mlp(observations, hidden, features)
        # running count, mean and M2 of the errors (Welford), float64: the bonus's scale
        self.register_buffer("moments", torch.zeros(3, dtype=torch.float64))

    def errors(self, obs: torch.Tensor) -> torch.Tensor:
        """The predictor's squared error per observation [B]."""
        x = ((obs - self.obs_mean) / self.obs_scale).clamp(-CLIP, CLIP)
        return (self.predictor(x) - self.target(x)).pow(2).mean(dim=-1)

    @torch.no_grad()
    def bonus(self, obs: torch.Tensor) -> torch.Tensor:
        """The intrinsic reward of each observation [B]: its error over the running standard deviation of
        the errors so far, this batch's included (merged by Chan, Golub and LeVeque's formula)."""
        err = self.errors(obs).double()
        na, mean_a, m2a = self.moments
        nb = float(err.numel())
        mean_b = err.mean()
        m2b = ((err - mean_b) ** 2).sum()
        n = na + nb
        delta = mean_b - mean_a
        self.moments.copy_(torch.stack((n, mean_a + delta * nb / n, m2a + m2b + delta * delta * na * nb / n)))
        std = (self.moments[2] / n).sqrt()
        return (err / std.clamp(min=1e-8)).float()

    def loss(self, obs: torch.Tensor) -> torch.Tensor:
        """What trains the predictor: the mean squared error over a batch of observations."""
        return self.errors(obs).mean()
