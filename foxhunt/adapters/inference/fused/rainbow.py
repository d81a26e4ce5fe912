"""Rainbow-IQN's acting policy (models/greedy.py's GreedyQuantiles) in Triton kernels: what `[scoring]
fuse = true` serves for a Rainbow agent on a GPU (adapters/inference/policy.py), inside the policy's CUDA
graph. Five launches where eager's graph replays about twenty kernels:

- the torso's layers, each with its ReLU, the first standardising the observation (linear.py's kernel);
- the value's and the advantage's hidden layers as one layer over the fractions' rows ([N, 2H], their
  weights stacked), each row the torso's state times the fraction's embedding as the kernel reads it
  (`in_scale`; the embedding made at `begin`, as GreedyQuantiles makes it);
- the two output layers, the dueling combination and the mean over the fractions in one program
  (`dueling_kernel`): the value's output row reads the first H hidden values, the advantages' rows the
  last H (their weights laid side by side, zeros elsewhere).

The dots as linear.py's (tf32x3, fixed tiles): the same bytes every call, not eager's (within float32
rounding of them); a journal records that the policy was served so (LoadedModel.fused) and verify serves
it the same way. A served policy's weights are copied when it is made: it is made for each load.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import nn

from foxhunt.adapters.inference.fused.linear import PRECISION, RELU, WARPS, linear
from foxhunt.models.greedy import GreedyQuantiles
from foxhunt.models.iqn import QuantileNetwork

MAX_FRACTIONS = 128  # the fractions are one tile of dueling_kernel's rows


@triton.jit
def dueling_kernel(h_ptr, w_ptr, b_ptr, q_ptr, N: tl.constexpr, K: tl.constexpr, A: tl.constexpr,
                   BLOCK_N: tl.constexpr, BLOCK_A: tl.constexpr, BLOCK_K: tl.constexpr, PRECISION: tl.constexpr):
    """q [A] = the mean over the N fractions of value + advantage - mean(advantage) (QuantileNetwork's
    forward, then q_values), where [value, advantage_1..A] = h [N, K] @ w.T + b, w [1 + A, K]."""
    rows = tl.arange(0, BLOCK_N)
    cols = tl.arange(0, BLOCK_A)
    row_ok = rows < N
    col_ok = cols < A + 1
    acc = tl.zeros([BLOCK_N, BLOCK_A], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        k_ok = ks < K
        a = tl.load(h_ptr + rows[:, None] * K + ks[None, :], mask=row_ok[:, None] & k_ok[None, :], other=0.0)
        w = tl.load(w_ptr + cols[:, None] * K + ks[None, :], mask=col_ok[:, None] & k_ok[None, :], other=0.0)
        acc += tl.dot(a, tl.trans(w), input_precision=PRECISION)
    acc += tl.load(b_ptr + cols, mask=col_ok, other=0.0)[None, :]
    advantage = (cols >= 1) & col_ok
    value = tl.sum(tl.where(cols[None, :] == 0, acc, 0.0), axis=1)
    mean = tl.sum(tl.where(advantage[None, :], acc, 0.0), axis=1) / A
    z = tl.where(row_ok[:, None] & advantage[None, :], value[:, None] + acc - mean[:, None], 0.0)
    tl.store(q_ptr + cols - 1, tl.sum(z, axis=0) / N, mask=advantage)


def unfusable(net: nn.Module) -> str | None:
    """Why these kernels cannot serve the agent `net`; None where they can."""
    if not isinstance(net, QuantileNetwork):
        return f"no fused kernels for the agent {type(net).__name__} (only for Rainbow-IQN's QuantileNetwork)"
    if net.cfg.act_quantiles > MAX_FRACTIONS:
        return f"{net.cfg.act_quantiles} fractions to act are more than the fused kernels' {MAX_FRACTIONS}"
    return None


class FusedRainbow(GreedyQuantiles):
    """GreedyQuantiles' forward in the kernels above: [1, observations] to the actions' mean returns [1, A]
    (a buffer the next call overwrites)."""

    def __init__(self, net: QuantileNetwork, device: torch.device) -> None:
        if (why := unfusable(net)) is not None:
            raise ValueError(why)
        super().__init__(net, device)  # the fractions, and their embedding `phi` at begin
        h, actions, fractions = net.cfg.hidden, net.actions, net.cfg.act_quantiles
        (v1, _, v2), (a1, _, a2) = net.value, net.advantage  # noise off: their means
        with torch.no_grad():
            self.torso = [(m.weight.detach().clone(), m.bias.detach().clone()) for m in net.torso
                          if isinstance(m, nn.Linear)]
            self.obs = (net.obs_mean.clone(), net.obs_scale.clone())
            self.hidden_w = torch.cat([v1.weight_mu, a1.weight_mu]).contiguous()  # [2H, H]
            self.hidden_b = torch.cat([v1.bias_mu, a1.bias_mu]).contiguous()
            self.out_w = torch.zeros(1 + actions, 2 * h, device=device)
            self.out_w[0, :h] = v2.weight_mu[0]
            self.out_w[1:, h:] = a2.weight_mu
            self.out_b = torch.cat([v2.bias_mu, a2.bias_mu]).contiguous()
        self.states = [torch.zeros(1, h, device=device) for _ in self.torso]
        self.hidden = torch.zeros(fractions, 2 * h, device=device)
        self.q = torch.zeros(1, actions, device=device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        for i, (w, b) in enumerate(self.torso):
            linear(x, w, b, self.states[i], standardize=self.obs if i == 0 else None, act=RELU)
            x = self.states[i]
        linear(self.phi[0], self.hidden_w, self.hidden_b, self.hidden, in_scale=x[0], act=RELU)
        n, k, actions = self.hidden.shape[0], self.hidden.shape[1], self.q.shape[1]
        dueling_kernel[(1,)](self.hidden, self.out_w, self.out_b, self.q, N=n, K=k, A=actions,
                             BLOCK_N=max(16, triton.next_power_of_2(n)),
                             BLOCK_A=max(16, triton.next_power_of_2(actions + 1)), BLOCK_K=64, PRECISION=PRECISION,
                             num_warps=WARPS)
        return self.q
