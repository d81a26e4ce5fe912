"""Mamba2 in plain PyTorch (Dao and Gu 2024, "Transformers are SSMs: generalized models and efficient
algorithms through structured state space duality", ICML), in the chunked state-space-duality (SSD) form
of its section 6: within a chunk the scan is a masked matrix product, across chunks a short recurrence
over the chunks' states. Only matmuls, cumulative sums and elementwise ops: no custom kernel, no scatter.

Cumulative sums are products with a triangular matrix of ones: a matmul is deterministic on every device
and release, while torch.cumsum on CUDA had no deterministic kernel for floating point in earlier releases
(deterministic mode refuses it in torch 2.5; 2.11 on the H200 runs it).

A block: input projection to (z, x, B, C, dt), a causal depthwise convolution over (x, B, C) written as a
sum of shifted products, SiLU, the SSD scan with a scalar decay per head (A = -exp(A_log), discretised
by dt), a skip D, a norm gated by SiLU(z), output projection; blocks are residual and pre-normed.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import nn
from torch.nn import functional as F

from foxhunt.models.configs import Mamba2Config, Shape
from foxhunt.models.layers import QuantileHead


class Triangles(NamedTuple):
    """The constant T x T matrices of the sums below: the upper and the lower triangle of ones (diagonal
    included) in the values' dtype, and as masks where a row is not below the diagonal (k <= j) and where
    it is above it (i < j)."""

    upper: torch.Tensor
    lower: torch.Tensor
    not_below: torch.Tensor
    above: torch.Tensor


_TRIANGLES: dict[tuple[int, torch.dtype, torch.device], Triangles] = {}


def triangles(t: int, dtype: torch.dtype, device: torch.device) -> Triangles:
    """Made once per size, dtype and device and kept: made anew in each call they cost a dozen kernels a
    block, which a scorer's CUDA graph would replay every call (bench/kernel_census.py). Under
    torch.compile they are made in the traced code, which Inductor folds into its kernels, as before."""
    if torch.compiler.is_compiling():
        return _made(t, dtype, device)
    kept = _TRIANGLES.get((t, dtype, device))
    if kept is None:
        with torch.inference_mode(False):  # plain tensors, which autograd may save whatever mode made them
            kept = _TRIANGLES[(t, dtype, device)] = _made(t, dtype, device)
    return kept


def _made(t: int, dtype: torch.dtype, device: torch.device) -> Triangles:
    ones = torch.ones(t, t, dtype=torch.bool, device=device)
    return Triangles(torch.triu(ones).to(dtype), torch.tril(ones).to(dtype), ~torch.tril(ones, -1), ~torch.tril(ones))


def prefix_sums(x: torch.Tensor) -> torch.Tensor:
    """x [..., T] -> out[..., i] = x[..., 0] + ... + x[..., i], as x times an upper triangle of ones."""
    return x @ triangles(x.size(-1), x.dtype, x.device).upper


def segment_sums(x: torch.Tensor) -> torch.Tensor:
    """x [..., T] -> [..., T, T] with out[i, j] = x[j+1] + ... + x[i] for i >= j and -inf above the
    diagonal; summed over masked copies (a lower triangle of ones times them), so no difference of large
    sums loses precision."""
    t = x.size(-1)
    tri = triangles(t, x.dtype, x.device)
    copies = x.unsqueeze(-1).expand(*x.shape, t).masked_fill(tri.not_below, 0.0)  # [..., k, j] = x[k] where k > j
    return (tri.lower @ copies).masked_fill(tri.above, float("-inf"))


def ssd(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, chunk: int) -> torch.Tensor:
    """The scan h_t = exp(a_t) h_{t-1} + b_t x_t^T, y_t = c_t h_t, from h_0 = 0, in chunks of `chunk`.
    x [B, L, H, P] (already scaled by dt), a [B, L, H] (dt * A), b and c [B, L, H, N] -> y [B, L, H, P].
    L is padded at the front to a multiple of `chunk` with x = 0 and a = 0, which leaves the state 0."""
    length = x.size(1)
    pad = (-length) % chunk
    if pad:
        x, a, b, c = (F.pad(t, (0, 0) * (t.dim() - 2) + (pad, 0)) for t in (x, a, b, c))
    batch, padded, heads, p = x.shape
    chunks = padded // chunk
    x = x.reshape(batch, chunks, chunk, heads, p)
    b = b.reshape(batch, chunks, chunk, heads, -1)
    c = c.reshape(batch, chunks, chunk, heads, -1)
    a = a.reshape(batch, chunks, chunk, heads).permute(0, 3, 1, 2)  # [B, H, chunks, chunk]
    a_cum = prefix_sums(a)
    # within chunks: the quadratic (attention-like) form
    decay = torch.exp(segment_sums(a))
    y_diag = torch.einsum("bclhn,bcshn,bhcls,bcshp->bclhp", c, b, decay, x)
    # each chunk's final state, from its own inputs
    to_end = torch.exp(a_cum[..., -1:] - a_cum)
    states = torch.einsum("bclhn,bhcl,bclhp->bchpn", b, to_end, x)
    # across chunks: the state entering each chunk
    states = torch.cat([torch.zeros_like(states[:, :1]), states], dim=1)
    across = torch.exp(segment_sums(F.pad(a_cum[..., -1], (1, 0))))
    states = torch.einsum("bhzc,bchpn->bzhpn", across, states)[:, :-1]
    # the entering state's part of each output
    y_off = torch.einsum("bclhn,bchpn,bhcl->bclhp", c, states, torch.exp(a_cum))
    y = (y_diag + y_off).reshape(batch, padded, heads, p)
    return y[:, pad:]


class Mamba2Block(nn.Module):
    def __init__(self, cfg: Mamba2Config) -> None:
        super().__init__()
        inner = cfg.expand * cfg.d_model
        if inner % cfg.headdim:
            raise ValueError(f"expand * d_model ({inner}) is not a multiple of headdim {cfg.headdim}")
        self.inner, self.d_state, self.heads, self.headdim = inner, cfg.d_state, inner // cfg.headdim, cfg.headdim
        self.chunk = cfg.chunk
        conv_channels = inner + 2 * cfg.d_state
        self.norm_in = nn.RMSNorm(cfg.d_model)
        self.in_proj = nn.Linear(cfg.d_model, 2 * inner + 2 * cfg.d_state + self.heads, bias=False)
        self.conv_weight = nn.Parameter(torch.randn(conv_channels, cfg.d_conv) / math.sqrt(cfg.d_conv))
        self.conv_bias = nn.Parameter(torch.zeros(conv_channels))
        # dt starts log-uniform in [1e-3, 1e-1] and A in [1, 16], the initialisation of the paper's code
        dt = torch.exp(torch.rand(self.heads) * (math.log(0.1) - math.log(0.001)) + math.log(0.001))
        self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))  # softplus(dt_bias) = dt
        self.a_log = nn.Parameter(torch.log(torch.empty(self.heads).uniform_(1.0, 16.0)))
        self.d = nn.Parameter(torch.ones(self.heads))
        self.norm_out = nn.RMSNorm(inner)
        self.out_proj = nn.Linear(inner, cfg.d_model, bias=False)

    def causal_conv(self, u: torch.Tensor) -> torch.Tensor:
        """Depthwise causal convolution over time, u [B, L, C], as a sum of shifted products."""
        width = self.conv_weight.size(1)
        padded = F.pad(u, (0, 0, width - 1, 0))
        length = u.size(1)
        out = self.conv_bias.expand_as(u)
        for k in range(width):
            out = out + padded[:, k : k + length] * self.conv_weight[:, k]
        return out

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        batch, length, _ = u.shape
        z, xbc, dt = torch.split(self.in_proj(self.norm_in(u)), [self.inner, self.inner + 2 * self.d_state,
                                                                 self.heads], dim=-1)
        xbc = F.silu(self.causal_conv(xbc))
        x, b, c = torch.split(xbc, [self.inner, self.d_state, self.d_state], dim=-1)
        dt = F.softplus(dt + self.dt_bias)  # [B, L, H]
        a = -torch.exp(self.a_log)
        x = x.view(batch, length, self.heads, self.headdim)
        b = b.unsqueeze(2).expand(batch, length, self.heads, self.d_state)
        c = c.unsqueeze(2).expand(batch, length, self.heads, self.d_state)
        y = ssd(x * dt.unsqueeze(-1), dt * a, b, c, self.chunk) + x * self.d.unsqueeze(-1)
        y = self.norm_out(y.reshape(batch, length, self.inner) * F.silu(z))
        return u + self.out_proj(y)


class Mamba2Forecaster(nn.Module):
    def __init__(self, cfg: Mamba2Config, shape: Shape) -> None:
        super().__init__()
        self.embed = nn.Linear(shape.features, cfg.d_model)
        self.blocks = nn.ModuleList(Mamba2Block(cfg) for _ in range(cfg.layers))
        self.norm = nn.RMSNorm(cfg.d_model)
        self.head = QuantileHead(cfg.d_model, len(shape.horizons), len(shape.quantiles))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        for block in self.blocks:
            h = block(h)
        return self.head(self.norm(h[:, -1]))
