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


def choose(outputs: np.ndarray, continuous: bool) -> Any:
    """The action of a policy's float32 outputs: the first of the largest (torch's argmax picks the same),
    or a continuous policy's mean itself."""
    return outputs.copy() if continuous else int(np.argmax(outputs))


class Acting:
    """What the three networks share: `forward(x)`, device tensors [1, width] to the outputs [1, n], in place
    on the policy's own state where it has one (so that a CUDA graph can capture it: adapters/inference/
    policy.py), and `act`, eagerly from a numpy observation."""

    continuous = False

    def __init__(self, net: nn.Module, device: torch.device) -> None:
        self.net, self.device = net, device
        self.outputs = np.zeros(0, np.float32)

    def begin(self) -> None:
        pass

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def act(self, obs: np.ndarray) -> Any:
        self.net.eval()  # evaluation between training segments shares the trained network
        with torch.no_grad():
            out = self.forward(torch.from_numpy(obs).to(self.device).unsqueeze(0))
        self.outputs = out.reshape(-1).cpu().numpy()
        return choose(self.outputs, self.continuous)


class GreedyQuantiles(Acting):
    """Rainbow-IQN: noise off, each action's mean return over evenly spaced fractions, the largest. The
    fractions' embedding is the same for every observation: made at `begin` (each episode, and before a
    CUDA graph's capture), not in every step's forward; the same bytes as q_values (tests/ml/test_agents.py)."""

    def __init__(self, net: QuantileNetwork, device: torch.device) -> None:
        super().__init__(net, device)
        k = net.cfg.act_quantiles
        self.taus = ((torch.arange(k, dtype=torch.float32) + 0.5) / k).to(device).unsqueeze(0)
        self.phi = torch.zeros(1, k, net.cfg.hidden, device=device)
        self.begin()

    def begin(self) -> None:
        with torch.no_grad():
            self.phi.copy_(self.net.embedding(self.taus))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net.returns(x, self.phi).mean(dim=1)


class GreedyRecurrent(Acting):
    """PPO's recurrent policy: the most likely action (a continuous policy's mean), its state carried along.
    The policy head alone: the value head and the sequence starts' mask are training's (the mask is 1 here,
    and x * 1.0 is x), kernels the served graph need not run."""

    def __init__(self, net: RecurrentActorCritic, device: torch.device) -> None:
        super().__init__(net, device)
        self.continuous = net.continuous
        self.state = net.initial_state(1, device)

    def begin(self) -> None:
        self.state.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, new = self.net.advance(x, self.state)
        self.state.copy_(new)
        return self.net.policy(h)


class GreedyImplicitQ(Acting):
    """IQL's policy: the action of the largest logit."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net.logits(x)


def greedy(net: nn.Module, where: torch.device) -> Acting:
    """The network acting greedily on `where` (moved there)."""
    net = net.to(where).eval()
    if isinstance(net, QuantileNetwork):
        return GreedyQuantiles(net, where)
    return GreedyImplicitQ(net, where) if isinstance(net, ImplicitQ) else GreedyRecurrent(net, where)
