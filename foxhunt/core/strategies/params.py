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
