"""Reference strategies, and the table that builds one from its configured name."""

from __future__ import annotations

import msgspec

from foxhunt.core.strategies.agent import Agent
from foxhunt.core.strategies.ema_cross import EmaCross
from foxhunt.core.strategies.ensemble import Ensemble
from foxhunt.core.strategies.params import AgentParams, EmaCrossParams, EnsembleParams, ZScoreParams
from foxhunt.core.strategies.zscore import ZScoreReversion
from foxhunt.core.strategy import Strategy

STRATEGIES: dict[str, type[Strategy]] = {
    "ema_cross": EmaCross, "zscore": ZScoreReversion, "ensemble": Ensemble, "agent": Agent,
}


class StrategyParams(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Parameters of every reference strategy; `name` picks the one that runs."""

    name: str = "ema_cross"
    ema_cross: EmaCrossParams = EmaCrossParams()
    zscore: ZScoreParams = ZScoreParams()
    ensemble: EnsembleParams = EnsembleParams()
    agent: AgentParams = AgentParams()

    def __post_init__(self) -> None:
        if self.name not in STRATEGIES:
            raise ValueError(f"unknown strategy {self.name!r}; known: {', '.join(sorted(STRATEGIES))}")
        if self.name == "ensemble" and not self.ensemble.models:
            raise ValueError("the ensemble strategy needs models: strategy.ensemble.models = [model ids]")

    @property
    def models(self) -> list[str]:
        """The models the strategy that runs reads scores of (the scoring source serves them)."""
        return list(self.ensemble.models) if self.name == "ensemble" else []


def build_strategy(params: StrategyParams) -> Strategy:
    return STRATEGIES[params.name](getattr(params, params.name))
