"""Rainbow-IQN's acting policy (models/greedy.py's GreedyQuantiles) in Triton kernels: what `[scoring]
fuse = true` serves for a Rainbow agent on a GPU (adapters/inference/policy.py), inside the policy's CUDA
graph. One observation a call; where eager's graph replays about twenty kernels, this replays a kernel for
each of the torso's layers and two more:

- `layer_kernel`: a layer of one row, y = ReLU(w @ x + b) (the first standardising the observation), each
  program BLOCK_N outputs, FP32 products on the CUDA cores summed in a fixed order;
- `fractions_kernel`: the value's and the advantage's hidden layers over the fractions' rows (their
  weights stacked, [2H, H]), each row the torso's state times the fraction's embedding (made at `begin`,
  as GreedyQuantiles makes it), and the mean of the rows: each program holds all the fractions of its
  columns, so the mean needs no reduction across programs;
- `layer_kernel` once more: the actions' mean returns from that mean, in one product.

Why the mean can come first: the output layers are affine and the mean over the fractions is linear, so
mean_n(V_n + A_n,a - mean_a' A_n,a') = v2 . hv + bv + (a2_a - mean_a' a2_a') . ha + ba_a - mean_a' ba_a',
hv and ha the fractions' mean hidden values (Dabney et al. 2018's policy, q_a the mean over fractions of
Z_a; Wang et al. 2016's dueling sum with the mean advantage subtracted). The output weights are folded
once, when the policy is made: [A, 2H], a row per action.

The sums run in another order than eager's: the same bytes every call, not eager's (within float32
rounding of them); a journal records that the policy was served so (LoadedModel.fused) and verify serves it
the same way. The fractions' dots run as three TF32 products (linear.py's PRECISION, about FP32's
accuracy). A served policy's weights are copied when it is made: it is made for each load.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import nn

from foxhunt.adapters.inference.fused.linear import PRECISION, WARPS
from foxhunt.models.greedy import GreedyQuantiles
from foxhunt.models.iqn import QuantileNetwork

MAX_FRACTIONS = 128  # the fractions are one tile of fractions_kernel's rows
LAYER_N, LAYER_K = 16, 128  # layer_kernel's outputs a program, and its inputs a step (fixed: the same sums)
FRACTION_N, FRACTION_K = 32, 64  # fractions_kernel's columns a program, and its inputs a step


@triton.jit
def layer_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, scale_ptr, N: tl.constexpr, K: tl.constexpr,
                 STANDARDIZE: tl.constexpr, RELU: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """y [N] = w [N, K] @ f(x [K]) + b, f the standardisation (x - mean) / scale with STANDARDIZE, then
    ReLU with RELU; program i the outputs from i * BLOCK_N."""
    ns = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = ns < N
    acc = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        k_ok = ks < K
        x = tl.load(x_ptr + ks, mask=k_ok, other=0.0)
        if STANDARDIZE:
            x = (x - tl.load(mean_ptr + ks, mask=k_ok, other=0.0)) / tl.load(scale_ptr + ks, mask=k_ok, other=1.0)
        w = tl.load(w_ptr + ns[:, None] * K + ks[None, :], mask=n_ok[:, None] & k_ok[None, :], other=0.0)
        acc += w * x[None, :]
    y = tl.sum(acc, axis=1) + tl.load(b_ptr + ns, mask=n_ok, other=0.0)
    if RELU:
        y = tl.maximum(y, 0.0)
    tl.store(y_ptr + ns, y, mask=n_ok)


@triton.jit
def fractions_kernel(state_ptr, phi_ptr, w_ptr, b_ptr, mean_ptr, F: tl.constexpr, N: tl.constexpr,
                     K: tl.constexpr, BLOCK_F: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                     PRECISION: tl.constexpr):
    """mean [N] = the mean over the F fractions f of ReLU((state [K] * phi [F, K][f]) @ w [N, K].T + b);
    program i the columns from i * BLOCK_N, all F rows."""
    fs = tl.arange(0, BLOCK_F)
    ns = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    f_ok = fs < F
    n_ok = ns < N
    acc = tl.zeros([BLOCK_F, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        k_ok = ks < K
        a = tl.load(phi_ptr + fs[:, None] * K + ks[None, :], mask=f_ok[:, None] & k_ok[None, :], other=0.0)
        a = a * tl.load(state_ptr + ks, mask=k_ok, other=0.0)[None, :]
        w = tl.load(w_ptr + ns[:, None] * K + ks[None, :], mask=n_ok[:, None] & k_ok[None, :], other=0.0)
        acc += tl.dot(a, tl.trans(w), input_precision=PRECISION)
    hidden = tl.maximum(acc + tl.load(b_ptr + ns, mask=n_ok, other=0.0)[None, :], 0.0)
    tl.store(mean_ptr + ns, tl.sum(tl.where(f_ok[:, None], hidden, 0.0), axis=0) / F, mask=n_ok)


def unfusable(net: nn.Module) -> str | None:
    """Why these kernels cannot serve the agent `net`; None where they can."""
    if not isinstance(net, QuantileNetwork):
        return f"no fused kernels for the agent {type(net).__name__} (only for Rainbow-IQN's QuantileNetwork)"
    if net.cfg.act_quantiles > MAX_FRACTIONS:
        return f"{net.cfg.act_quantiles} fractions to act are more than the fused kernels' {MAX_FRACTIONS}"
    return None


def _layer(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, y: torch.Tensor, *, relu: bool,
           standardize: tuple[torch.Tensor, torch.Tensor] | None = None) -> None:
    n, k = w.shape
    mean, scale = standardize if standardize is not None else (w, w)  # unread without STANDARDIZE
    layer_kernel[(triton.cdiv(n, LAYER_N),)](x, w, b, y, mean, scale, N=n, K=k, STANDARDIZE=standardize is not None,
                                             RELU=relu, BLOCK_N=LAYER_N,
                                             BLOCK_K=min(LAYER_K, max(16, triton.next_power_of_2(k))), num_warps=WARPS)


class FusedRainbow(GreedyQuantiles):
    """GreedyQuantiles' forward in the kernels above: [1, observations] to the actions' mean returns [1, A]
    (a buffer the next call overwrites)."""

    def __init__(self, net: QuantileNetwork, device: torch.device) -> None:
        if (why := unfusable(net)) is not None:
            raise ValueError(why)
        super().__init__(net, device)  # the fractions, and their embedding `phi` at begin
        h, actions = net.cfg.hidden, net.actions
        (v1, _, v2), (a1, _, a2) = net.value, net.advantage  # noise off: their means
        with torch.no_grad():
            self.torso = [(m.weight.detach().clone(), m.bias.detach().clone()) for m in net.torso
                          if isinstance(m, nn.Linear)]
            self.obs = (net.obs_mean.clone(), net.obs_scale.clone())
            self.hidden_w = torch.cat([v1.weight_mu, a1.weight_mu]).contiguous()  # [2H, H]
            self.hidden_b = torch.cat([v1.bias_mu, a1.bias_mu]).contiguous()
            self.out_w = torch.cat([v2.weight_mu.expand(actions, h), a2.weight_mu - a2.weight_mu.mean(0)], 1)
            self.out_b = v2.bias_mu + a2.bias_mu - a2.bias_mu.mean()  # [A]
        self.states = [torch.zeros(h, device=device) for _ in self.torso]
        self.hidden = torch.zeros(2 * h, device=device)  # the fractions' mean hidden values: [hv, ha]
        self.q = torch.zeros(1, actions, device=device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        for i, (w, b) in enumerate(self.torso):
            _layer(x, w, b, self.states[i], relu=True, standardize=self.obs if i == 0 else None)
            x = self.states[i]
        (fractions, k), n = self.phi.shape[1:], self.hidden_w.shape[0]
        fractions_kernel[(triton.cdiv(n, FRACTION_N),)](
            x, self.phi, self.hidden_w, self.hidden_b, self.hidden, F=fractions, N=n, K=k,
            BLOCK_F=max(16, triton.next_power_of_2(fractions)), BLOCK_N=FRACTION_N, BLOCK_K=FRACTION_K,
            PRECISION=PRECISION, num_warps=WARPS)
        _layer(self.hidden, self.out_w, self.out_b, self.q, relu=False)
        return self.q
