"""Trading on a reinforcement-learning agent's decisions: each PolicyActed sets a symbol's target position,
`fraction` times `trade_size`, rounded towards zero to whole lots, and the strategy trades towards it.

What the agent learns is which target to hold; how the position gets there is the same for every strategy
(StrategyContext.trade_towards): a market IOC order through the pre-trade gate, only towards flat while
trading is REDUCING, nothing while HALTED, and an order the gate denied is not asked for again until
something it depended on has changed. A target not reached at once (an order denied, filled in part, or
still on its way) is asked for again with each market data input of the symbol, so the agent need only
say when it changes its mind: the trading environment (training/rl/environment.py) sends a PolicyActed
only then. The policy source of a served agent (runtime/policies.py) journals every decision, the same
target again included, which changes nothing here.
"""

from __future__ import annotations

from foxhunt.core.strategies.params import AgentParams
from foxhunt.core.strategy import Strategy, StrategyContext
from foxhunt.messages.base import nanos
from foxhunt.messages.market import Bar, QuoteTick, TradeTick
from foxhunt.messages.scores import PolicyActed


class Agent(Strategy):
    strategy_id = "agent"

    def __init__(self, params: AgentParams) -> None:
        self.params = params
        self.size = nanos(params.trade_size)
        self.targets: dict[str, int] = {}

    def digest_state(self) -> object:
        return sorted(self.targets.items())

    def on_action(self, act: PolicyActed, ctx: StrategyContext) -> None:
        if self.params.policy and act.policy_id != self.params.policy:
            return  # another policy's decision: not the one this strategy follows
        lot = ctx.instrument(act.symbol).lot_size
        target = int(self.size * act.fraction)
        target -= target % lot if target >= 0 else -(-target % lot)  # towards zero, to whole lots
        self.targets[act.symbol] = target
        ctx.trade_towards(act.symbol, target)

    def on_quote(self, quote: QuoteTick, ctx: StrategyContext) -> None:
        self._pursue(quote.symbol, ctx)

    def on_bar(self, bar: Bar, ctx: StrategyContext) -> None:
        self._pursue(bar.symbol, ctx)

    def on_trade(self, trade: TradeTick, ctx: StrategyContext) -> None:
        self._pursue(trade.symbol, ctx)

    def _pursue(self, symbol: str, ctx: StrategyContext) -> None:
        target = self.targets.get(symbol)
        if target is not None and target != ctx.position(symbol):
            ctx.trade_towards(symbol, target)
