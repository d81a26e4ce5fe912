"""Implicit Q-learning's networks (Kostrikov, Nair and Levine 2022, "Offline Reinforcement Learning with
Implicit Q-Learning", ICLR), for the discrete target steps of the trading environment: twin Q networks
(and their slowly following copies), a state value network, and the policy, each a small MLP behind the
observation normalisation the other agents use. `losses` is the whole of IQL's objective, computed
densely (the taken action's values by a one-hot product)."""

from __future__ import annotations

import torch
from torch import nn

from foxhunt.models.agent_configs import IqlConfig
from foxhunt.models.iqn import pick


def _mlp(inputs: int, hidden: int, layers: int, outputs: int) -> nn.Sequential:
    parts: list[nn.Module] = []
    width = inputs
    for _ in range(layers):
        parts += [nn.Linear(width, hidden), nn.ReLU()]
        width = hidden
    return nn.Sequential(*parts, nn.Linear(width, outputs))


class ImplicitQ(nn.Module):
    def __init__(self, cfg: IqlConfig, observations: int, actions: int) -> None:
        super().__init__()
        self.cfg, self.observations, self.actions = cfg, observations, actions
        self.register_buffer("obs_mean", torch.zeros(observations))
        self.register_buffer("obs_scale", torch.ones(observations))
        self.q1, self.q2 = (_mlp(observations, cfg.hidden, cfg.layers, actions) for _ in range(2))
        self.q1_target, self.q2_target = (_mlp(observations, cfg.hidden, cfg.layers, actions) for _ in range(2))
        self.q1_target.load_state_dict(self.q1.state_dict())
        self.q2_target.load_state_dict(self.q2.state_dict())
        for p in (*self.q1_target.parameters(), *self.q2_target.parameters()):
            p.requires_grad_(False)
        self.value = _mlp(observations, cfg.hidden, cfg.layers, 1)
        self.policy = _mlp(observations, cfg.hidden, cfg.layers, actions)

    def _x(self, obs: torch.Tensor) -> torch.Tensor:
        return (obs - self.obs_mean) / self.obs_scale

    def logits(self, obs: torch.Tensor) -> torch.Tensor:
        return self.policy(self._x(obs))

    def losses(self, obs: torch.Tensor, action: torch.Tensor, reward: torch.Tensor, next_obs: torch.Tensor,
               discount: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(value loss, Q loss, policy loss): the value regresses the target Qs' minimum at the taken action
        by the expectile `expectile` (eq. 5); the Qs regress r + discount V(s') (eq. 6); the policy is
        advantage-weighted regression on the taken actions, weights exp(temperature * (Q - V)) capped at
        WEIGHT_MAX (eq. 7)."""
        cfg = self.cfg
        x, x_next = self._x(obs), self._x(next_obs)
        with torch.no_grad():
            target_q = torch.minimum(pick(self.q1_target(x).unsqueeze(1), action, self.actions),
                                     pick(self.q2_target(x).unsqueeze(1), action, self.actions)).squeeze(1)
            next_v = self.value(x_next).squeeze(-1)
        v = self.value(x).squeeze(-1)
        u = target_q - v
        value_loss = ((cfg.expectile - (u < 0).to(u.dtype)).abs() * u * u).mean()
        q_target = reward + discount * next_v
        q1 = pick(self.q1(x).unsqueeze(1), action, self.actions).squeeze(1)
        q2 = pick(self.q2(x).unsqueeze(1), action, self.actions).squeeze(1)
        q_loss = ((q1 - q_target) ** 2).mean() + ((q2 - q_target) ** 2).mean()
        weight = torch.exp(cfg.temperature * (target_q - v.detach())).clamp(max=WEIGHT_MAX)
        log_prob = pick(torch.log_softmax(self.policy(x), dim=-1).unsqueeze(1), action, self.actions).squeeze(1)
        policy_loss = -(weight * log_prob).mean()
        return value_loss, q_loss, policy_loss

    @torch.no_grad()
    def follow(self) -> None:
        """The target Qs move `polyak` of the way to the Qs (after each update)."""
        for target, online in ((self.q1_target, self.q1), (self.q2_target, self.q2)):
            for t, o in zip(target.parameters(), online.parameters(), strict=True):
                t.lerp_(o, self.cfg.polyak)


WEIGHT_MAX = 100.0  # the paper's cap on the advantage weights
