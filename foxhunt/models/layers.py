"""Building blocks the forecasters share. Attention is written as matmuls and a softmax, not a fused
kernel: its backward pass then has no atomics, on any device."""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F


class Attention(nn.Module):
    """Multi-head scaled dot-product attention (Vaswani et al. 2017). With `shared_values`, the heads
    share one value projection and their outputs are averaged, so the averaged weights say what the
    output attended to: the TFT's interpretable multi-head attention (Lim et al. 2021, section 4.4)."""

    def __init__(self, d_model: int, heads: int, dropout: float, *, shared_values: bool = False) -> None:
        super().__init__()
        if d_model % heads:
            raise ValueError(f"d_model {d_model} is not a multiple of heads {heads}")
        self.heads, self.d_head, self.shared = heads, d_model // heads, shared_values
        self.q = nn.Linear(d_model, d_model)
        self.k = nn.Linear(d_model, d_model)
        self.v = nn.Linear(d_model, self.d_head if shared_values else d_model)
        self.out = nn.Linear(self.d_head if shared_values else d_model, d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, query: torch.Tensor, memory: torch.Tensor, mask: torch.Tensor | None = None):
        """(output [B, Tq, d], weights [B, heads, Tq, Tk]); `mask` [Tq, Tk] is True where attending is allowed."""
        b, tq, tk = query.size(0), query.size(1), memory.size(1)
        q = self.q(query).view(b, tq, self.heads, self.d_head).transpose(1, 2)
        k = self.k(memory).view(b, tk, self.heads, self.d_head).transpose(1, 2)
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.d_head)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        if self.shared:
            v = self.v(memory).unsqueeze(1)  # [B, 1, Tk, d_head], one for every head
            out = (self.drop(weights) @ v).mean(dim=1)
        else:
            v = self.v(memory).view(b, tk, self.heads, self.d_head).transpose(1, 2)
            out = (self.drop(weights) @ v).transpose(1, 2).reshape(b, tq, self.heads * self.d_head)
        return self.out(out), weights


class GatedLinearUnit(nn.Module):
    def __init__(self, d_in: int, d_out: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.proj = nn.Linear(d_in, 2 * d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.glu(self.proj(self.drop(x)), dim=-1)


class GateAddNorm(nn.Module):
    """LayerNorm(skip + GLU(x)): the TFT's gated skip connection (Lim et al. 2021, eq. 2 and 5)."""

    def __init__(self, d: int, dropout: float) -> None:
        super().__init__()
        self.glu = GatedLinearUnit(d, d, dropout)
        self.norm = nn.LayerNorm(d)

    def forward(self, x: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:
        return self.norm(skip + self.glu(x))


class GatedResidualNetwork(nn.Module):
    """GRN(a) = LayerNorm(skip(a) + GLU(W1 ELU(W2 a + b2) + b1)) (Lim et al. 2021, eq. 2 to 4), without the
    static context (foxhunt's inputs have no static covariates)."""

    def __init__(self, d_in: int, d_hidden: int, d_out: int, dropout: float) -> None:
        super().__init__()
        self.skip = nn.Linear(d_in, d_out) if d_in != d_out else nn.Identity()
        self.fc2 = nn.Linear(d_in, d_hidden)
        self.fc1 = nn.Linear(d_hidden, d_out)
        self.gate = GateAddNorm(d_out, dropout)

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return self.gate(self.fc1(F.elu(self.fc2(a))), self.skip(a))


class QuantileHead(nn.Module):
    """A state [B, d] to the forecast [B, horizons, quantiles]."""

    def __init__(self, d: int, horizons: int, quantiles: int) -> None:
        super().__init__()
        self.shape = (horizons, quantiles)
        self.proj = nn.Linear(d, horizons * quantiles)

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return self.proj(state).view(state.size(0), *self.shape)
