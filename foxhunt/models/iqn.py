"""Rainbow's network with an implicit quantile head: the return distribution of each action at sampled
fractions tau, through dueling streams of noisy linear layers.

- Noisy linear layers with factorised Gaussian noise (Fortunato et al. 2018, "Noisy Networks for
  Exploration", ICLR, section 3.2): w = mu_w + sigma_w * f(eps_out) f(eps_in)^T, f(x) = sign(x) sqrt(|x|),
  mu drawn from U(-1/sqrt(p), 1/sqrt(p)) and sigma set to sigma0 / sqrt(p) for p inputs. The noise is
  drawn from a generator the caller passes (`resample`), so training is seeded and a checkpoint holds it;
  in eval mode the layers use their means only.
- The implicit quantile network (Dabney, Ostrovski, Silver and Munos 2018, ICML, eq. 4): a fraction tau is
  embedded as ReLU(sum_i cos(pi i tau) w_i + b), i = 0..n-1, and multiplies the state's features element
  by element.
- Dueling streams (Wang et al. 2016, ICML, eq. 9): Z(s, tau, a) = V(s, tau) + A(s, tau, a) - mean_a A(s, tau, a).
Observations are normalised by buffers set from the training data (`obs_mean`, `obs_scale`), which travel
with the weights and count in their hash.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from foxhunt.models.agent_configs import RainbowConfig


class NoisyLinear(nn.Module):
    def __init__(self, inputs: int, outputs: int, sigma0: float) -> None:
        super().__init__()
        bound = 1.0 / math.sqrt(inputs)
        self.weight_mu = nn.Parameter(torch.empty(outputs, inputs).uniform_(-bound, bound))
        self.weight_sigma = nn.Parameter(torch.full((outputs, inputs), sigma0 * bound))
        self.bias_mu = nn.Parameter(torch.empty(outputs).uniform_(-bound, bound))
        self.bias_sigma = nn.Parameter(torch.full((outputs,), sigma0 * bound))
        self.register_buffer("eps_in", torch.zeros(inputs), persistent=False)
        self.register_buffer("eps_out", torch.zeros(outputs), persistent=False)

    def resample(self, generator: torch.Generator) -> None:
        f = lambda x: x.sign() * x.abs().sqrt()  # the paper's f
        device = self.eps_in.device
        self.eps_in.copy_(f(torch.randn(self.eps_in.shape, generator=generator, device=device)))
        self.eps_out.copy_(f(torch.randn(self.eps_out.shape, generator=generator, device=device)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return nn.functional.linear(x, self.weight_mu, self.bias_mu)
        weight = self.weight_mu + self.weight_sigma * torch.outer(self.eps_out, self.eps_in)
        return nn.functional.linear(x, weight, self.bias_mu + self.bias_sigma * self.eps_out)


class QuantileNetwork(nn.Module):
    """`forward(obs [B, O], taus [B, N])` -> Z [B, N, actions]: the return at each fraction, per action."""

    def __init__(self, cfg: RainbowConfig, observations: int, actions: int) -> None:
        super().__init__()
        self.cfg, self.observations, self.actions = cfg, observations, actions
        self.register_buffer("obs_mean", torch.zeros(observations))
        self.register_buffer("obs_scale", torch.ones(observations))
        layers: list[nn.Module] = []
        width = observations
        for _ in range(cfg.layers - 1):
            layers += [nn.Linear(width, cfg.hidden), nn.ReLU()]
            width = cfg.hidden
        self.torso = nn.Sequential(*layers, nn.Linear(width, cfg.hidden), nn.ReLU())
        self.register_buffer("frequencies", torch.arange(cfg.embedding, dtype=torch.float32) * math.pi)
        self.embed = nn.Linear(cfg.embedding, cfg.hidden)
        self.value = nn.Sequential(NoisyLinear(cfg.hidden, cfg.hidden, cfg.sigma0), nn.ReLU(),
                                   NoisyLinear(cfg.hidden, 1, cfg.sigma0))
        self.advantage = nn.Sequential(NoisyLinear(cfg.hidden, cfg.hidden, cfg.sigma0), nn.ReLU(),
                                       NoisyLinear(cfg.hidden, actions, cfg.sigma0))

    def resample(self, generator: torch.Generator) -> None:
        """New noise for every noisy layer (for acting, and before each update)."""
        for m in self.modules():
            if isinstance(m, NoisyLinear):
                m.resample(generator)

    def forward(self, obs: torch.Tensor, taus: torch.Tensor) -> torch.Tensor:
        return self.returns(obs, self.embedding(taus))

    def embedding(self, taus: torch.Tensor) -> torch.Tensor:
        """The fractions' cosine embedding phi [B, N, H] (Dabney et al. 2018, eq. 4), which depends on
        the fractions alone: an acting policy's, evenly spaced, is made once (models/greedy.py)."""
        return torch.relu(self.embed(torch.cos(taus.unsqueeze(-1) * self.frequencies)))

    def returns(self, obs: torch.Tensor, phi: torch.Tensor) -> torch.Tensor:
        """Z [B, N, actions] from the observations and the fractions' embedding."""
        state = self.torso((obs - self.obs_mean) / self.obs_scale)  # [B, H]
        x = state.unsqueeze(1) * phi
        value, advantage = self.value(x), self.advantage(x)
        return value + advantage - advantage.mean(dim=-1, keepdim=True)

    def q_values(self, obs: torch.Tensor, taus: torch.Tensor) -> torch.Tensor:
        """The mean return of each action over the fractions `taus`: [B, actions]."""
        return self.forward(obs, taus).mean(dim=1)


def quantile_huber_loss(z: torch.Tensor, taus: torch.Tensor, target: torch.Tensor, kappa: float) -> torch.Tensor:
    """Per sample: sum over i of the mean over j of |tau_i - 1{delta_ij < 0}| * Huber_kappa(delta_ij) / kappa,
    delta_ij = target_j - z_i (Dabney et al. 2018, eq. 3 and 10). Dense [B, N, N'] arithmetic only: no
    scatter or index-add, whose CUDA backward passes add in an order that is not fixed."""
    delta = target.unsqueeze(1) - z.unsqueeze(2)  # [B, N, N']
    size = delta.abs()
    huber = torch.where(size <= kappa, 0.5 * delta * delta, kappa * (size - 0.5 * kappa))
    weight = (taus.unsqueeze(2) - (delta < 0).to(delta.dtype)).abs()
    return (weight * huber / kappa).mean(dim=2).sum(dim=1)


def pick(z: torch.Tensor, actions: torch.Tensor, count: int) -> torch.Tensor:
    """Z [B, N, A] at each sample's action [B] -> [B, N], by a one-hot product (dense: no gather, whose
    backward scatters)."""
    one_hot = nn.functional.one_hot(actions, count).to(z.dtype)
    return (z * one_hot.unsqueeze(1)).sum(dim=-1)
