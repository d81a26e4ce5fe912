"""PPO's recurrent actor-critic: observations through a linear layer into an LSTM (as the seed system had)
or a GRU cell, then a policy head and a value head.

The discrete policy is a categorical over the environment's target steps; the continuous one a Gaussian
over the target fraction, its mean from the network and its log standard deviation a free parameter.
The recurrent state is one tensor [B, 2, H] for an LSTM (h and c) or [B, 1, H] for a GRU, so a rollout
stores and restores it as it is; `step` resets it to zeros where an episode starts (`starts`).
Observations are normalised by buffers set from the training data, which travel with the weights.
"""

from __future__ import annotations

import torch
from torch import nn

from foxhunt.models.agent_configs import PpoConfig

LOG_STD_INIT = -0.5


class RecurrentActorCritic(nn.Module):
    def __init__(self, cfg: PpoConfig, observations: int, actions: int, continuous: bool) -> None:
        super().__init__()
        self.cfg, self.observations, self.actions, self.continuous = cfg, observations, actions, continuous
        self.register_buffer("obs_mean", torch.zeros(observations))
        self.register_buffer("obs_scale", torch.ones(observations))
        self.encode = nn.Linear(observations, cfg.hidden)
        self.cell: nn.LSTMCell | nn.GRUCell = (nn.LSTMCell if cfg.cell == "lstm" else nn.GRUCell)(cfg.hidden,
                                                                                                   cfg.hidden)
        self.policy = nn.Linear(cfg.hidden, 1 if continuous else actions)
        self.value = nn.Linear(cfg.hidden, 1)
        nn.init.orthogonal_(self.policy.weight, gain=0.01)  # a near-uniform first policy
        nn.init.zeros_(self.policy.bias)
        if continuous:
            self.log_std = nn.Parameter(torch.full((1,), LOG_STD_INIT))

    @property
    def parts(self) -> int:
        return 2 if self.cfg.cell == "lstm" else 1

    def initial_state(self, batch: int, device: torch.device) -> torch.Tensor:
        return torch.zeros(batch, self.parts, self.cfg.hidden, device=device)

    def step(self, obs: torch.Tensor, state: torch.Tensor, starts: torch.Tensor
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One step of B sequences: (policy output [B, A] or [B, 1], value [B], new state)."""
        h, new = self.advance(obs, state * (1.0 - starts.to(state.dtype)).view(-1, 1, 1))
        return self.policy(h), self.value(h).squeeze(-1), new

    def advance(self, obs: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The cell's output h [B, hidden] and the new state, from `state` as it is (no sequence starts
        here): what `step` computes before its heads, and all an acting policy needs (models/greedy.py)."""
        x = torch.relu(self.encode((obs - self.obs_mean) / self.obs_scale))
        if self.cfg.cell == "lstm":
            h, c = self.cell(x, (state[:, 0], state[:, 1]))
            return h, torch.stack((h, c), dim=1)
        h = self.cell(x, state[:, 0])
        return h, h.unsqueeze(1)

    def distribution(self, out: torch.Tensor) -> torch.distributions.Distribution:
        # validate_args off: the checks read values back to the host, which a CUDA graph cannot capture
        if self.continuous:
            return torch.distributions.Normal(out.squeeze(-1), self.log_std.exp().expand(out.shape[0]),
                                              validate_args=False)
        return torch.distributions.Categorical(logits=out, validate_args=False)

    def greedy(self, out: torch.Tensor) -> torch.Tensor:
        """The policy's most likely action: the mean, or the action of the largest logit."""
        return out.squeeze(-1) if self.continuous else out.argmax(dim=-1)
