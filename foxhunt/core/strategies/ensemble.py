"""Trading on model scores: the forecasts of several models for one window, combined, set a target position.

For each symbol the strategy waits until every configured model has scored the same window (the same
`as_of`), then:
- combines their forecasts at its horizon by averaging quantiles with the configured weights
  ("Vincentization": Vincent 1912, Ratcliff 1979), each model's quantiles first sorted (the
  rearrangement of Chernozhukov, Fernandez-Val and Galichon 2010, so crossed quantiles still make a
  distribution);
- reads the combined quantiles as a distribution of the forward log return (its quantile function linear
  between them, flat beyond): its mean is the expected return `mu`, `p` the probability of a gain on mu's
  side and `b` the payoff ratio, the mean gain of a gain over the mean loss of a loss (so the Kelly
  fraction f* = p - (1 - p) / b is positive exactly where mu is not zero);
- holds nothing while |mu| is below `entry_bps`; otherwise `trade_size` times |mu| / `full_bps` (at most
  `trade_size`) on mu's side, capped at what the gate's Kelly check allows for (p, b) where [risk]
  kelly_capital is configured, and rounded down to a step of trade_size / `levels` (whole lots), so the
  target moves only when the forecast moves it a step.
A new target is journaled as TargetChanged with those numbers; the orders that reach it go through the gate
with the edge (p, b) attached, as trading's state allows (StrategyContext.trade_towards).
"""

from __future__ import annotations

import itertools

from foxhunt.core.strategies.params import EnsembleParams
from foxhunt.core.strategy import Strategy, StrategyContext
from foxhunt.messages.base import nanos
from foxhunt.messages.scores import ModelScored, ScoreRefused, TargetChanged

PAYOFF_MAX = 100.0  # the payoff ratio when the forecast sees no loss (its lowest quantile is a gain)


class Ensemble(Strategy):
    strategy_id = "ensemble"

    def __init__(self, params: EnsembleParams) -> None:
        self.params = params
        self.models = list(params.models)
        weights = list(params.weights) or [1.0] * len(self.models)
        total = sum(weights)
        self.weights = {m: w / total for m, w in zip(self.models, weights, strict=True)}
        self.size = nanos(params.trade_size)
        # per symbol: the window being scored (its as_of) and the scores of it so far, by model
        self.pending: dict[str, tuple[int, dict[str, ModelScored]]] = {}
        self.targets: dict[str, int] = {}

    def digest_state(self) -> object:
        pending = [[symbol, as_of, sorted(got)] for symbol, (as_of, got) in sorted(self.pending.items())]
        return [pending, sorted(self.targets.items())]

    def on_score(self, score: ModelScored, ctx: StrategyContext) -> None:
        if score.model_id not in self.weights:
            return  # a model this strategy does not combine
        symbol = score.symbol
        as_of, got = self.pending.get(symbol, (-1, {}))
        if score.as_of < as_of:
            return  # a window older than one being scored: late, and superseded
        if score.as_of > as_of:
            as_of, got = score.as_of, {}
        got[score.model_id] = score
        if len(got) < len(self.models):
            self.pending[symbol] = (as_of, got)
            return
        self.pending.pop(symbol, None)
        combined = self._combine(got, ctx)
        if combined is not None:
            self._decide(symbol, combined[0], combined[1], score, ctx)

    def _combine(self, scores: dict[str, ModelScored], ctx: StrategyContext) -> tuple[list[float], list[float]] | None:
        """(quantile levels, the weighted average of the models' sorted quantiles at the horizon), or None
        (recorded as ScoreRefused) when the models do not forecast the same quantiles or the horizon."""
        first = scores[self.models[0]]
        taus = first.quantiles
        combined = [0.0] * len(taus)
        for model in self.models:
            s = scores[model]
            horizon = self.params.horizon or s.horizons[0]
            problem = ("" if horizon in s.horizons else f"does not forecast horizon {horizon}") or (
                "" if s.quantiles == taus else f"forecasts quantiles {s.quantiles}, {first.model_id} {taus}")
            if problem:
                ctx.record(ScoreRefused(ts_event=s.ts_event, ts_init=s.ts_init, model_id=model, symbol=s.symbol,
                                        reason=f"ensemble: {problem}"))
                return None
            row = s.horizons.index(horizon) * len(taus)
            w = self.weights[model]
            for j, value in enumerate(sorted(s.outputs[row:row + len(taus)])):
                combined[j] += w * value
        return taus, combined

    def _decide(self, symbol: str, taus: list[float], q: list[float], score: ModelScored,
                ctx: StrategyContext) -> None:
        mu, p_up, up, down = moments(taus, q)
        gain = up / p_up if p_up > 0.0 else 0.0  # the mean gain of a gain, the mean loss of a loss
        loss = down / (1.0 - p_up) if p_up < 1.0 else 0.0
        if mu >= 0.0:
            p, b = p_up, (gain / loss if loss > 0.0 else PAYOFF_MAX)
        else:
            p, b = 1.0 - p_up, (loss / gain if gain > 0.0 else PAYOFF_MAX)
        b = min(b, PAYOFF_MAX)
        kelly = p - (1.0 - p) / b if b > 0.0 else -1.0
        bps = abs(mu) * 1e4
        inst = ctx.instrument(symbol)
        if bps < self.params.entry_bps:
            target, why = 0, f"expected return {bps:.3f} bp is below entry_bps {self.params.entry_bps}"
        elif kelly <= 0.0:
            target, why = 0, f"no Kelly edge (f* = {kelly:.4f})"
        else:
            size = int(self.size * min(1.0, bps / self.params.full_bps))
            why = f"{bps:.3f} bp of full_bps {self.params.full_bps}"
            cap = ctx.kelly_quantity(symbol, p, b)
            if cap is not None and cap < size:
                size, why = cap, f"{why}, capped by the Kelly check at {cap}"
            step = max(self.size // self.params.levels // inst.lot_size, 1) * inst.lot_size
            size -= size % step
            target = size if mu > 0.0 else -size
        previous = self.targets.get(symbol, 0)
        if target != previous:
            self.targets[symbol] = target
            ctx.record(TargetChanged(
                ts_event=score.ts_event, ts_init=score.ts_init, strategy_id=self.strategy_id, symbol=symbol,
                target=target, previous=previous, expected_return=mu, win_prob=p, payoff=b, kelly_fraction=kelly,
                reason=f"{', '.join(self.models)} as of seq {score.as_of}: {why}",
            ))
        ctx.trade_towards(symbol, target, (p, b) if target else None)


def moments(taus: list[float], q: list[float]) -> tuple[float, float, float, float]:
    """(mean, P(r > 0), E[r; r > 0], E[-r; r < 0]) of the distribution whose quantile function Q is linear
    between the points (taus, q) and flat beyond them (Q = q[0] below taus[0], q[-1] above taus[-1]): the
    integrals of Q, of max(Q, 0) and of max(-Q, 0) over (0, 1), piece by piece."""
    points = [(0.0, q[0]), *zip(taus, q, strict=True), (1.0, q[-1])]
    up = down = above = 0.0
    for (t0, a), (t1, b) in itertools.pairwise(points):
        width = t1 - t0
        if a >= 0.0 and b >= 0.0:
            up += 0.5 * (a + b) * width
            above += width if a > 0.0 or b > 0.0 else 0.0
        elif a <= 0.0 and b <= 0.0:
            down -= 0.5 * (a + b) * width
        else:  # Q crosses zero inside the piece, at t0 + width * a / (a - b)
            cross = width * a / (a - b)
            if a > 0.0:
                up += 0.5 * a * cross
                down -= 0.5 * b * (width - cross)
                above += cross
            else:
                down -= 0.5 * a * cross
                up += 0.5 * b * (width - cross)
                above += width - cross
    return up - down, above, up, down
