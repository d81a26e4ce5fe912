"""The reference strategies' parameters, as configured under [strategy] in config/foxhunt.toml.

Apart from the strategies because those are compiled by mypyc (foxhunt/compiled.py), and mypyc drops the
class keywords (frozen=True, forbid_unknown_fields=True) that make a msgspec Struct what it is.
"""

from __future__ import annotations

from decimal import Decimal

import msgspec


class EmaCrossParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    fast: int = 10
    slow: int = 40
    trade_size: Decimal = Decimal("100000")

    def __post_init__(self) -> None:
        if not 0 < self.fast < self.slow:
            raise ValueError(f"ema_cross needs 0 < fast < slow, got fast={self.fast} slow={self.slow}")


class ZScoreParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    window: int = 100
    entry_z: float = 2.0
    exit_z: float = 0.5
    trade_size: Decimal = Decimal("100000")
    order_ttl: int = 20

    def __post_init__(self) -> None:
        if self.window < 2 or not 0 <= self.exit_z < self.entry_z or self.order_ttl < 1:
            raise ValueError("zscore needs window >= 2, 0 <= exit_z < entry_z and order_ttl >= 1")


class EnsembleParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The ensemble strategy (core/strategies/ensemble.py): the models it combines, by their ids in the model
    store (`foxhunt models list`), and how it turns their combined forecast into a target position."""

    models: list[str] = []  # each scored by the scoring source; a window's decision waits for all of them
    weights: list[float] = []  # one per model, >= 0; []: equal weights
    horizon: int = 0  # the forecast horizon (events) it trades on, one every model forecasts; 0: the first
    trade_size: Decimal = Decimal("100000")  # the largest position, in units
    entry_bps: float = 0.5  # the least expected return (basis points of log return) that holds a position
    full_bps: float = 5.0  # the expected return at which the position is trade_size
    levels: int = 4  # the target moves in steps of trade_size / levels

    def __post_init__(self) -> None:
        if self.weights and len(self.weights) != len(self.models):
            raise ValueError(f"ensemble: {len(self.weights)} weights for {len(self.models)} models")
        if any(not w >= 0.0 for w in self.weights) or (self.weights and not sum(self.weights) > 0.0):
            raise ValueError(f"ensemble: weights must be >= 0 with a positive sum, got {self.weights}")
        if len(set(self.models)) != len(self.models):
            raise ValueError(f"ensemble: a model is named twice in {self.models}")
        if self.horizon < 0 or not 0.0 <= self.entry_bps < self.full_bps or self.trade_size <= 0 or self.levels < 1:
            raise ValueError("ensemble needs horizon >= 0, 0 <= entry_bps < full_bps, trade_size > 0 and levels >= 1")


class AgentParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The agent strategy (core/strategies/agent.py): trades towards the targets a reinforcement-learning
    policy's PolicyActed inputs set, each a fraction of `trade_size`."""

    trade_size: Decimal = Decimal("100000")  # the largest position, in units (a fraction of 1 or -1)
    policy: str = ""  # the policy whose decisions it follows, by id (the daemon serves it: runtime/policies.py); "": any

    def __post_init__(self) -> None:
        if self.trade_size <= 0:
            raise ValueError(f"agent needs trade_size > 0, got {self.trade_size}")
