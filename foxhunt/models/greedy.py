"""A trained agent's network acting greedily, one observation at a time: what evaluation plays
(training/rl/evaluation.py) and the policy source serves live (adapters/inference/policy.py). Noise is
off (Rainbow's noisy layers act on their means), the action is the most valuable or most likely one, and
`outputs` keeps the float32 values it was chosen from, which the policy source journals with each
decision. A recurrent policy carries its state from one observation to the next; `begin` starts it afresh.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import torch
from torch import nn

from foxhunt.models.iql import ImplicitQ
from foxhunt.models.iqn import QuantileNetwork
from foxhunt.models.recurrent import RecurrentActorCritic


class Greedy(Protocol):
    """`begin()` before an episode (a recurrent state afresh), `act(obs)` for each step: a discrete action's
    index or a continuous action's array; then `outputs`, what it was chosen from."""

    outputs: np.ndarray

    def begin(self) -> None: ...

    def act(self, obs: np.ndarray) -> Any: ...


class GreedyQuantiles:
    """The trained network as evaluation plays it: noise off, the mean over evenly spaced fractions."""

    def __init__(self, net: QuantileNetwork, device: torch.device) -> None:
        self.net, self.device = net, device
        k = net.cfg.act_quantiles
        self.taus = ((torch.arange(k, dtype=torch.float32) + 0.5) / k).to(device).unsqueeze(0)
        self.outputs = np.zeros(0, np.float32)

    def begin(self) -> None:
        pass

    def act(self, obs: np.ndarray) -> int:
        self.net.eval()
        with torch.no_grad():
            x = torch.from_numpy(obs).to(self.device).unsqueeze(0)
            q = self.net.q_values(x, self.taus)
            self.outputs = q.reshape(-1).cpu().numpy()  # the action values the choice was made of
            return int(q.argmax(dim=1).item())


class GreedyRecurrent:
    """The trained policy as evaluation plays it: its most likely action, its state carried along."""

    def __init__(self, net: RecurrentActorCritic, device: torch.device) -> None:
        self.net, self.device = net, device
        self.state = net.initial_state(1, device)
        self.outputs = np.zeros(0, np.float32)

    def begin(self) -> None:
        self.state = self.net.initial_state(1, self.device)

    def act(self, obs: np.ndarray) -> Any:
        self.net.eval()
        with torch.no_grad():
            x = torch.from_numpy(obs).to(self.device).unsqueeze(0)
            out, _, self.state = self.net.step(x, self.state, torch.zeros(1, device=self.device))
            self.outputs = out.reshape(-1).cpu().numpy()  # logits, or the mean of a continuous policy
            action = self.net.greedy(out)
        return action.cpu().numpy().astype(np.float32) if self.net.continuous else int(action.item())


class GreedyImplicitQ:
    """The policy's most likely action."""

    def __init__(self, net: ImplicitQ, device: torch.device) -> None:
        self.net, self.device = net, device
        self.outputs = np.zeros(0, np.float32)

    def begin(self) -> None:
        pass

    def act(self, obs: np.ndarray) -> int:
        self.net.eval()
        with torch.no_grad():
            logits = self.net.logits(torch.from_numpy(obs).to(self.device).unsqueeze(0))
            self.outputs = logits.reshape(-1).cpu().numpy()  # the policy's logits the choice was made of
            return int(logits.argmax(dim=1).item())


def greedy(net: nn.Module, where: torch.device) -> Greedy:
    """The network acting greedily on `where` (moved there)."""
    net = net.to(where)
    if isinstance(net, QuantileNetwork):
        return GreedyQuantiles(net, where)
    return GreedyImplicitQ(net, where) if isinstance(net, ImplicitQ) else GreedyRecurrent(net, where)
