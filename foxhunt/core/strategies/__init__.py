"""Reference strategies, and the table that builds one from its configured name."""

from __future__ import annotations

import msgspec

from foxhunt.core.strategies.ema_cross import EmaCross
from foxhunt.core.strategies.params import EmaCrossParams, ZScoreParams
from foxhunt.core.strategies.zscore import ZScoreReversion
from foxhunt.core.strategy import Strategy

STRATEGIES: dict[str, type[Strategy]] = {"ema_cross": EmaCross, "zscore": ZScoreReversion}


class StrategyParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Parameters of every reference strategy; `name` picks the one that runs."""

    name: str = "ema_cross"
    ema_cross: EmaCrossParams = EmaCrossParams()
    zscore: ZScoreParams = ZScoreParams()

    def __post_init__(self) -> None:
        if self.name not in STRATEGIES:
            raise ValueError(f"unknown strategy {self.name!r}; known: {', '.join(sorted(STRATEGIES))}")


def build_strategy(params: StrategyParams) -> Strategy:
    return STRATEGIES[params.name](getattr(params, params.name))
