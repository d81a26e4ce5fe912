"""A forecaster: one of the architectures behind the normalisation it was trained with, and the
parameter hash that names its weights."""

from __future__ import annotations

import hashlib

import msgspec
import torch
from torch import nn

from foxhunt.models.attention import AttentionForecaster
from foxhunt.models.configs import Shape
from foxhunt.models.determinism import seeded
from foxhunt.models.mamba2 import Mamba2Forecaster
from foxhunt.models.mlp import Mlp
from foxhunt.models.tft import TemporalFusionTransformer

NETS: dict[str, type[nn.Module]] = {
    "mlp": Mlp, "attention": AttentionForecaster, "tft": TemporalFusionTransformer, "mamba2": Mamba2Forecaster,
}


class Forecaster(nn.Module):
    """`forward(x)`: raw feature windows [B, window, features] to forecasts [B, horizons, quantiles] in
    units of each horizon's training label scale (what the loss sees); `predict(x)`: in log returns.
    The scales are buffers, so they travel with the weights and count in the hash."""

    def __init__(self, arch: str, cfg: msgspec.Struct, shape: Shape) -> None:
        super().__init__()
        self.arch, self.cfg, self.shape = arch, cfg, shape
        self.net = NETS[arch](cfg, shape)
        self.register_buffer("x_mean", torch.zeros(shape.features))
        self.register_buffer("x_scale", torch.ones(shape.features))
        self.register_buffer("y_scale", torch.ones(len(shape.horizons)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net((x - self.x_mean) / self.x_scale)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward(x) * self.y_scale.unsqueeze(-1)


def build(arch: str, cfg: msgspec.Struct, shape: Shape, seed: int) -> Forecaster:
    """The forecaster's initial weights, from `seed` alone (determinism.seeded)."""
    return seeded(seed, lambda: Forecaster(arch, cfg, shape))


def parameter_hash(module: nn.Module) -> str:
    """SHA-256 over the state dict in name order: each tensor's name, dtype, shape and bytes."""
    digest = hashlib.sha256()
    for name, tensor in sorted(module.state_dict().items()):
        t = tensor.detach().to("cpu").contiguous()
        digest.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        digest.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return digest.hexdigest()
