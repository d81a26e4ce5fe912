"""Transitions from journaled trading: what an offline agent (IQL) learns from, read from any journal
that traded the symbol (a daemon's run, paper or live, a journaled episode of an agent), never acting.

The journal is read in its order. Its market data of the symbol gives the feature rows (training/rl/
market.py) and the marks (a quote's mid, a bar's close, a trade's price); its PositionChanged events
give the position, its average price and its money after each fill; its OrderDenied events of the symbol
the denials. A step is `decision_every` market data events, as in the environment; the account is read at
each step's end, after everything that step's events set off. Then, for each step t to t+1:
- the observation is the environment's (environment.py): the feature row, the position as a fraction of
  the agent strategy's trade size, the unrealised PnL and the equity since the episode's start in basis
  points of the full position's notional at its first price, and whether an order was denied in step t;
  the journal is cut into episodes of `episode_steps` steps, as the environment's are;
- the action is the target the position moved to in the step (its fraction of trade size, clipped to
  [-1, 1]) rounded to the nearest of the environment's discrete steps: what the trader chose, whoever it
  was;
- the reward is the change in equity (money plus the position at the mark), in those basis points, less
  `risk_penalty` times the squared fraction held, as the environment's.
"""

from __future__ import annotations

from contextlib import aclosing
from typing import NamedTuple

import numpy as np

from foxhunt.core.features import Columns, FeatureSpec, batch
from foxhunt.core.risk.gate import reference_price
from foxhunt.errors import DataError
from foxhunt.messages.fixed_point import SCALE
from foxhunt.messages.market import MARKET_DATA_TYPES
from foxhunt.messages.orders import OrderDenied
from foxhunt.messages.scores import PolicyActed
from foxhunt.messages.system import PositionChanged
from foxhunt.models.agent_configs import EXTRA, EnvConfig, notional
from foxhunt.ports import JournalStore


class Transitions(NamedTuple):
    obs: np.ndarray  # float32 [n, observations]
    action: np.ndarray  # int64 [n]
    reward: np.ndarray  # float32 [n]
    next_obs: np.ndarray  # float32 [n, observations]
    last_ts: np.ndarray  # int64 [n]: the time of each transition's last event (to split by time)
    source: str

    def __len__(self) -> int:
        return int(self.action.size)

    def within(self, start_ts: int, end_ts: int) -> Transitions:
        """The transitions that end in [start_ts, end_ts): the training range, before the held-out one."""
        keep = (self.last_ts >= start_ts) & (self.last_ts < end_ts)
        return Transitions(self.obs[keep], self.action[keep], self.reward[keep], self.next_obs[keep],
                           self.last_ts[keep], f"{self.source}, ending in [{start_ts}, {end_ts}) ns")

    @classmethod
    def concat(cls, parts: list[Transitions]) -> Transitions:
        return cls(*(np.concatenate([getattr(p, f) for p in parts]) for f in cls._fields[:5]),
                   "; ".join(p.source for p in parts))


class _Account(NamedTuple):
    """The symbol's account after a market data event: position, average price and money (nanos), and the
    denials so far."""

    quantity: int
    avg_price: int
    cash: int
    denials: int


async def read_journal(store: JournalStore, name: str, symbol: str) -> tuple[list, list[_Account]]:
    """The symbol's market data events of journal `name`, and the account after each: after everything the
    event set off (its fills), before the next decision about the symbol (an agent's PolicyActed) or its
    next market data event, whichever comes first."""
    events: list = []
    accounts: list[_Account] = []
    quantity = avg_price = cash = denials = 0
    async with aclosing(store.read(name)) as pages:
        async for page in pages:
            for record in page:
                msg = record.message
                kind = type(msg)
                market = record.causation is None and kind in MARKET_DATA_TYPES and msg.symbol == symbol
                if (market or kind is PolicyActed and msg.symbol == symbol) and len(accounts) < len(events):
                    accounts.append(_Account(quantity, avg_price, cash, denials))
                if market:
                    events.append(msg)
                elif kind is PositionChanged and msg.symbol == symbol:
                    quantity, avg_price, cash = msg.quantity, msg.avg_price, msg.cash
                elif kind is OrderDenied and msg.symbol == symbol:
                    denials += 1
    if len(accounts) < len(events):
        accounts.append(_Account(quantity, avg_price, cash, denials))
    return events, accounts


def transitions(events: list, accounts: list[_Account], spec: FeatureSpec, cfg: EnvConfig, size: int,
                multiplier: int, source: str) -> Transitions:
    """The steps of one journal's trading of a symbol (module docstring)."""
    rows, _ = batch(spec, Columns.of(events))
    ends = np.arange(cfg.warmup, len(events), cfg.decision_every)
    if ends.size < 2:
        raise DataError(f"{source}: {len(events)} market data events, too few for two steps after warmup"
                        f" ({cfg.warmup}) of {cfg.decision_every} events")
    width = rows.shape[1] + EXTRA
    obs = np.zeros((ends.size, width), dtype=np.float32)
    money = np.zeros(ends.size, dtype=np.float64)  # equity, money nanos
    per_bp = np.zeros(ends.size, dtype=np.float64)  # basis points per nano of the step's episode
    held = np.zeros(ends.size, dtype=np.float64)
    full = start_equity = 0
    denied_before = accounts[ends[0]].denials
    for k, i in enumerate(ends):
        a, mark = accounts[i], reference_price(events[i], 0)[0]  # the kernel's mark
        equity = a.cash + a.quantity * mark // SCALE * multiplier
        if k % cfg.episode_steps == 0:  # a new episode: its notional and its equity's zero
            full = notional(mark, size, multiplier)
            start_equity = equity
        bp = per_bp[k] = 1e4 / full
        money[k], held[k] = equity, a.quantity / size
        obs[k, : rows.shape[1]] = rows[i]
        obs[k, -4] = held[k]
        obs[k, -3] = (mark - a.avg_price) * a.quantity // SCALE * multiplier * bp if a.quantity else 0.0
        obs[k, -2] = (equity - start_equity) * bp
        obs[k, -1] = 1.0 if a.denials > denied_before else 0.0
        denied_before = a.denials
    reward = np.diff(money) * per_bp[:-1] - cfg.risk_penalty * held[1:] ** 2
    action = np.rint(np.clip(held[1:], -1.0, 1.0) * cfg.levels).astype(np.int64) + cfg.levels
    last_ts = np.array([events[i].ts_event for i in ends[1:]], dtype=np.int64)
    return Transitions(obs[:-1], action, reward.astype(np.float32), obs[1:], last_ts, source)


async def read(store: JournalStore, journals: list[str], symbol: str, spec: FeatureSpec, cfg: EnvConfig,
               size: int, multiplier: int) -> Transitions:
    """The transitions of every journal's trading of `symbol`, one journal after another."""
    parts = []
    for name in journals:
        await store.info(name)
        events, accounts = await read_journal(store, name, symbol)
        if not events:
            raise DataError(f"journal {name!r} has no market data of {symbol}")
        parts.append(transitions(events, accounts, spec, cfg, size, multiplier, f"journal {name} ({symbol})"))
    return Transitions.concat(parts)
