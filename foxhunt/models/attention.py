"""A transformer encoder forecaster: the window's rows embedded with learned positions, pre-norm encoder
blocks (Xiong et al. 2020), and the last row's state to the forecast."""

from __future__ import annotations

import torch
from torch import nn

from foxhunt.models.configs import AttentionConfig, Shape
from foxhunt.models.layers import Attention, QuantileHead


class EncoderBlock(nn.Module):
    def __init__(self, cfg: AttentionConfig) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(cfg.d_model)
        self.attn = Attention(cfg.d_model, cfg.heads, cfg.dropout)
        self.norm2 = nn.LayerNorm(cfg.d_model)
        self.ff = nn.Sequential(
            nn.Linear(cfg.d_model, cfg.d_ff), nn.GELU(), nn.Dropout(cfg.dropout), nn.Linear(cfg.d_ff, cfg.d_model),
        )
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        x = x + self.drop(self.attn(h, h)[0])
        return x + self.drop(self.ff(self.norm2(x)))


class AttentionForecaster(nn.Module):
    def __init__(self, cfg: AttentionConfig, shape: Shape) -> None:
        super().__init__()
        self.embed = nn.Linear(shape.features, cfg.d_model)
        self.position = nn.Parameter(torch.randn(shape.window, cfg.d_model) * 0.02)
        self.blocks = nn.ModuleList(EncoderBlock(cfg) for _ in range(cfg.layers))
        self.norm = nn.LayerNorm(cfg.d_model)
        self.head = QuantileHead(cfg.d_model, len(shape.horizons), len(shape.quantiles))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x) + self.position
        for block in self.blocks:
            h = block(h)
        return self.head(self.norm(h[:, -1]))
