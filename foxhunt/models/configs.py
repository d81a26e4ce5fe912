"""The configurations of the forecasters and of their training: frozen Structs with no torch in them, so
that foxhunt.config can hold them and a manifest can record them.

Every architecture has two presets, `tiny` (CPU tests, seconds) and `production` (the GPU), and a
configuration file changes single values of the chosen one (`[train.models.tft] hidden = 64`).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from foxhunt.errors import ConfigError

ARCHITECTURES = ("mlp", "attention", "tft", "mamba2")
Size = Literal["tiny", "production"]


class _Config(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    pass


class _ModelConfig(_Config, frozen=True, kw_only=True):
    """Sizes are positive integers, a dropout is in [0, 1); each architecture adds what its shapes need."""

    def __post_init__(self) -> None:
        for name in self.__struct_fields__:
            value = getattr(self, name)
            if name == "dropout":
                if not 0.0 <= value < 1.0:
                    raise ValueError(f"dropout must be in [0, 1), got {value}")
            elif value < 1:
                raise ValueError(f"{name} must be positive, got {value}")
        self.check()

    def check(self) -> None:
        pass


class MlpConfig(_ModelConfig, frozen=True, kw_only=True):
    hidden: int = 16
    layers: int = 2
    dropout: float = 0.0


class AttentionConfig(_ModelConfig, frozen=True, kw_only=True):
    """A pre-norm transformer encoder over the window; the last position's state forecasts."""

    d_model: int = 16
    heads: int = 2
    layers: int = 1
    d_ff: int = 32
    dropout: float = 0.0

    def check(self) -> None:
        if self.d_model % self.heads:
            raise ValueError(f"d_model ({self.d_model}) must be a multiple of heads ({self.heads})")


class TftConfig(_ModelConfig, frozen=True, kw_only=True):
    """The Temporal Fusion Transformer (Lim, Arik, Loeff and Pfister 2021, Int. J. Forecasting 37(4)):
    hidden size, attention heads, LSTM layers, dropout."""

    hidden: int = 16
    heads: int = 2
    lstm_layers: int = 1
    dropout: float = 0.0

    def check(self) -> None:
        if self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be a multiple of heads ({self.heads})")


class Mamba2Config(_ModelConfig, frozen=True, kw_only=True):
    """Mamba2 blocks (Dao and Gu 2024, "Transformers are SSMs", ICML): model width, state size, head
    width, expansion, depthwise convolution width, blocks, and the chunk length of the SSD form."""

    d_model: int = 16
    d_state: int = 8
    headdim: int = 8
    expand: int = 2
    d_conv: int = 4
    layers: int = 1
    chunk: int = 8

    def check(self) -> None:
        if self.expand * self.d_model % self.headdim:
            raise ValueError(f"expand * d_model ({self.expand * self.d_model}) must be a multiple of headdim"
                             f" ({self.headdim})")


MODEL_CONFIGS: dict[str, type[_ModelConfig]] = {
    "mlp": MlpConfig, "attention": AttentionConfig, "tft": TftConfig, "mamba2": Mamba2Config,
}

PRODUCTION: dict[str, dict[str, Any]] = {
    "mlp": {"hidden": 512, "layers": 3, "dropout": 0.1},
    "attention": {"d_model": 256, "heads": 8, "layers": 4, "d_ff": 1024, "dropout": 0.1},
    "tft": {"hidden": 128, "heads": 4, "lstm_layers": 2, "dropout": 0.1},
    "mamba2": {"d_model": 256, "d_state": 64, "headdim": 64, "expand": 2, "layers": 4, "chunk": 32},
}


class Shape(_Config, frozen=True, kw_only=True):
    """What a forecaster reads and writes: a window of `window` feature rows of `features` values in, a
    forecast of `len(quantiles)` quantiles at each of `len(horizons)` horizons out."""

    window: int
    features: int
    horizons: tuple[int, ...]
    quantiles: tuple[float, ...]


class TrainConfig(_Config, frozen=True, kw_only=True):
    """How a forecaster is trained (foxhunt/training/). Horizons count the symbol's events, as the
    features' return horizons do; the splits are fractions of the samples, in time order, with a purge
    between ranges so that no label reaches into the next one (training/dataset.py)."""

    window: int = 16
    horizons: tuple[int, ...] = (1, 4, 16)
    quantiles: tuple[float, ...] = (0.1, 0.5, 0.9)
    train_fraction: float = 0.7
    validation_fraction: float = 0.15
    batch_size: int = 64
    learning_rate: float = 1e-3
    weight_decay: float = 1e-4
    grad_clip: float = 1.0
    max_steps: int = 200
    eval_every: int = 50  # steps between evaluations on the validation range (and checkpoints)
    patience: int = 4  # evaluations without improvement before training stops early
    threads: int = 1  # torch's CPU threads: fixed, since a reduction's order can follow their number
    models: dict[str, dict[str, Any]] = {}  # per architecture, values that replace the chosen preset's

    def __post_init__(self) -> None:
        if self.window < 1 or self.batch_size < 1 or self.max_steps < 1 or self.eval_every < 1:
            raise ValueError("window, batch_size, max_steps and eval_every must be positive")
        if self.patience < 1 or self.threads < 1:
            raise ValueError("patience and threads must be positive")
        if not self.horizons or list(self.horizons) != sorted(set(self.horizons)) or self.horizons[0] < 1:
            raise ValueError(f"horizons must be increasing, distinct and positive, got {list(self.horizons)}")
        q = self.quantiles
        if not q or list(q) != sorted(set(q)) or not 0 < q[0] or not q[-1] < 1:
            raise ValueError(f"quantiles must be increasing, distinct, strictly between 0 and 1, got {list(q)}")
        if not (0 < self.train_fraction < 1 and 0 < self.validation_fraction < 1
                and self.train_fraction + self.validation_fraction < 1):
            raise ValueError("train_fraction and validation_fraction must be positive and sum to less than 1")
        if not self.learning_rate > 0 or self.weight_decay < 0 or not self.grad_clip > 0:
            raise ValueError("learning_rate and grad_clip must be positive, weight_decay not negative")
        for arch, values in self.models.items():
            if arch not in MODEL_CONFIGS:
                raise ValueError(f"models.{arch}: no such architecture (one of {', '.join(ARCHITECTURES)})")
            if unknown := set(values) - set(MODEL_CONFIGS[arch].__struct_fields__):
                raise ValueError(f"models.{arch}: unknown setting(s) {sorted(unknown)}; known:"
                                 f" {list(MODEL_CONFIGS[arch].__struct_fields__)}")

    def model(self, arch: str, size: Size) -> msgspec.Struct:
        """The architecture's configuration: the preset of `size` with this configuration's values over it
        (ConfigError where the two do not make a model: a hidden size the heads do not divide, say)."""
        values = dict(PRODUCTION[arch]) if size == "production" else {}
        values.update(self.models.get(arch, {}))
        try:
            return msgspec.convert(values, MODEL_CONFIGS[arch])
        except msgspec.ValidationError as e:
            raise ConfigError(f"train.models.{arch}, over the {size} preset: {e}") from e
