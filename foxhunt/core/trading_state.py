"""Trading state, one table: which state each cause moves trading to, and whether working orders are canceled.

Trading is ACTIVE (anything the gate allows), REDUCING (only orders that reduce a position) or HALTED
(nothing new; the gate denies every order). Every change of state has a named cause, and this module's
`RULES` says what each cause does: where it moves, whether it only ever tightens, whether a move to HALTED
is the kill switch (working orders canceled), and what it remembers so that the end of its cause can go
back. The kernel applies a cause with `Kernel.change_trading` and journals the move as
`TradingStateChanged`; this module decides, and derives nothing itself.

The memories: a halt that ends by itself (the journal's fail-stop, a market-wide halt with a resumption
time) remembers the state it left, and its end goes back there. An operator's command decides over the
journal's memory (a halt ordered while the journal was down stays when the journal comes back); the
market-wide breaker's memory is the breaker's own: an operator's command leaves it.
"""

from __future__ import annotations

import enum
from typing import NamedTuple

from foxhunt.messages.system import TradingState

SEVERITY = {TradingState.ACTIVE: 0, TradingState.REDUCING: 1, TradingState.HALTED: 2}  # what "tighter" means


class Cause(enum.Enum):
    OPERATOR = "operator"  # admin halt, reduce, resume: to the state named
    KILL = "kill"  # admin kill: HALTED, and every working order canceled, whatever the state was
    BREAKER = "breaker"  # breakers, throttles, refused reports, a venue's policy: towards the state named
    JOURNAL_DOWN = "journal down"  # the journal's fail-stop: HALTED until it recovers, orders left working
    JOURNAL_BACK = "journal back"  # the journal recovered: back to the state before its fail-stop
    MARKET_HALT = "market halt"  # a market-wide halt that resumes at a time (levels 1 and 2)
    MARKET_CLOSED = "market closed"  # a market-wide halt for the rest of the day (level 3)
    MARKET_RESUMED = "market resumed"  # the market-wide halt's time is up: back to the state before it


class Memory(enum.Enum):
    JOURNAL = "journal"
    MARKET = "market"


class Rule(NamedTuple):
    to: TradingState | None  # where it moves; None: to the state the cause names (OPERATOR, BREAKER)
    tightens_only: bool  # moves only towards HALTED, never back
    cancels: str  # "never", "on halt" (when it moves trading to HALTED), "always"
    remembers: Memory | None  # keeps the state it moves away from, for its end to go back to
    remembers_first: bool  # keeps the first such state while one is kept (else: the latest it moved from)
    goes_back: Memory | None  # moves to the state kept there, and forgets it
    only_from: TradingState | None  # acts only when trading is in this state
    forgets: tuple[Memory, ...]


RULES: dict[Cause, Rule] = {
    Cause.OPERATOR: Rule(None, False, "never", None, False, None, None, (Memory.JOURNAL,)),
    Cause.KILL: Rule(TradingState.HALTED, False, "always", None, False, None, None, (Memory.JOURNAL,)),
    Cause.BREAKER: Rule(None, True, "on halt", None, False, None, None, ()),
    Cause.JOURNAL_DOWN: Rule(TradingState.HALTED, False, "never", Memory.JOURNAL, True, None, None, ()),
    Cause.JOURNAL_BACK: Rule(None, False, "never", None, False, Memory.JOURNAL, None, ()),
    Cause.MARKET_HALT: Rule(TradingState.HALTED, True, "on halt", Memory.MARKET, False, None, None, ()),
    Cause.MARKET_CLOSED: Rule(TradingState.HALTED, True, "on halt", None, False, None, None, (Memory.MARKET,)),
    Cause.MARKET_RESUMED: Rule(None, False, "never", None, False, Memory.MARKET, TradingState.HALTED, ()),
}


class TradingStates:
    """The trading state and the memories of the causes that end by themselves."""

    def __init__(self) -> None:
        self.state = TradingState.ACTIVE
        self.kept: dict[Memory, TradingState] = {}

    def apply(self, cause: Cause, to: TradingState | None = None) -> tuple[TradingState | None, bool]:
        """Apply `cause` (`to`: the state an OPERATOR or BREAKER cause names). Returns the state trading
        left (None if it did not move) and whether working orders are to be canceled."""
        rule = RULES[cause]
        before = self.state
        if rule.only_from is not None and before is not rule.only_from:
            return None, False
        if rule.goes_back is not None:
            target = self.kept.pop(rule.goes_back, None)
        else:
            target = rule.to if rule.to is not None else to
        if target is None:
            return None, False
        moves = target is not before and (not rule.tightens_only or SEVERITY[target] > SEVERITY[before])
        for memory in rule.forgets:
            self.kept.pop(memory, None)
        if rule.remembers is not None and rule.remembers_first:
            self.kept.setdefault(rule.remembers, before)
        elif rule.remembers is not None and moves:
            self.kept[rule.remembers] = before
        if moves:
            self.state = target
        cancel = rule.cancels == "always" or rule.cancels == "on halt" and moves and target is TradingState.HALTED
        return (before if moves else None), cancel

    def digest_state(self) -> object:
        return [self.state.value, sorted((m.value, s.value) for m, s in self.kept.items())]
