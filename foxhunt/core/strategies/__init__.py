"""Reference strategies, and the table that builds one from its configured name."""

from __future__ import annotations

import msgspec

from foxhunt.core.strategies.ema_cross import EmaCross, EmaCrossParams
from foxhunt.core.strategies.zscore import ZScoreParams, ZScoreReversion
from foxhunt.core.strategy import Strategy


class StrategyParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Parameters of every reference strategy; `[strategy] name` picks the one that runs."""

    ema_cross: EmaCrossParams = EmaCrossParams()
    zscore: ZScoreParams = ZScoreParams()


STRATEGIES = {"ema_cross": EmaCross, "zscore": ZScoreReversion}


def build_strategy(name: str, params: StrategyParams) -> Strategy:
    try:
        cls = STRATEGIES[name]
    except KeyError:
        raise ValueError(f"unknown strategy {name!r}; known: {', '.join(sorted(STRATEGIES))}") from None
    return cls(getattr(params, name))
