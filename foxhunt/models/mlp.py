"""The baseline: the window flattened, through a few fully connected layers."""

from __future__ import annotations

import torch
from torch import nn

from foxhunt.models.configs import MlpConfig, Shape
from foxhunt.models.layers import QuantileHead


class Mlp(nn.Module):
    def __init__(self, cfg: MlpConfig, shape: Shape) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = shape.window * shape.features
        for _ in range(cfg.layers):
            layers += [nn.Linear(width, cfg.hidden), nn.GELU(), nn.Dropout(cfg.dropout)]
            width = cfg.hidden
        self.body = nn.Sequential(*layers)
        self.head = QuantileHead(width, len(shape.horizons), len(shape.quantiles))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x.flatten(1)))
