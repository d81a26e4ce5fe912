"""The trading-state table (core/trading_state.py): each cause's move, cancels and memories, one by one and in
the sequences that tell them apart (an operator's halt during the journal's, a market halt on a halt)."""

from __future__ import annotations

import pytest

from foxhunt.core.trading_state import RULES, Cause, TradingStates
from foxhunt.messages.system import TradingState

ACTIVE, REDUCING, HALTED = TradingState.ACTIVE, TradingState.REDUCING, TradingState.HALTED


def states(start: TradingState = ACTIVE) -> TradingStates:
    t = TradingStates()
    t.state = start
    return t


def run(t: TradingStates, *steps: tuple[Cause, TradingState | None]) -> list[tuple[TradingState | None, bool]]:
    return [t.apply(cause, to) for cause, to in steps]


def test_every_cause_has_a_rule():
    assert set(RULES) == set(Cause)


@pytest.mark.parametrize("start", [ACTIVE, REDUCING, HALTED])
@pytest.mark.parametrize("to", [ACTIVE, REDUCING, HALTED])
def test_an_operator_moves_anywhere_and_cancels_nothing(start, to):
    t = states(start)
    assert t.apply(Cause.OPERATOR, to) == ((start if start is not to else None), False)
    assert t.state is to


@pytest.mark.parametrize("start", [ACTIVE, REDUCING, HALTED])
def test_a_kill_halts_and_always_cancels(start):
    t = states(start)
    assert t.apply(Cause.KILL) == ((start if start is not HALTED else None), True)
    assert t.state is HALTED


@pytest.mark.parametrize(("start", "to", "moves"), [
    (ACTIVE, REDUCING, True), (ACTIVE, HALTED, True), (REDUCING, HALTED, True),
    (REDUCING, REDUCING, False), (REDUCING, ACTIVE, False), (HALTED, REDUCING, False), (HALTED, HALTED, False),
])
def test_a_breaker_only_tightens_and_cancels_on_the_move_to_halted(start, to, moves):
    t = states(start)
    previous, cancel = t.apply(Cause.BREAKER, to)
    assert (previous is not None) is moves and t.state is (to if moves else start)
    assert cancel is (moves and to is HALTED)


def test_the_journal_halts_without_cancelling_and_goes_back_to_the_first_state_it_left():
    t = states(REDUCING)
    assert run(t, (Cause.JOURNAL_DOWN, None), (Cause.JOURNAL_DOWN, None)) == [(REDUCING, False), (None, False)]
    assert t.apply(Cause.JOURNAL_BACK) == (HALTED, False) and t.state is REDUCING
    assert t.apply(Cause.JOURNAL_BACK) == (None, False) and not t.kept  # back once


def test_an_operator_decides_over_the_journal_halt():
    t = states()
    run(t, (Cause.JOURNAL_DOWN, None), (Cause.OPERATOR, HALTED))
    assert t.apply(Cause.JOURNAL_BACK) == (None, False) and t.state is HALTED  # the operator's halt stays
    t = states()
    run(t, (Cause.JOURNAL_DOWN, None), (Cause.KILL, None))
    assert t.apply(Cause.JOURNAL_BACK) == (None, False) and t.state is HALTED


def test_a_journal_halt_during_an_operator_halt_goes_back_to_halted():
    t = states(HALTED)
    assert t.apply(Cause.JOURNAL_DOWN) == (None, False)
    assert t.apply(Cause.JOURNAL_BACK) == (None, False) and t.state is HALTED


def test_a_market_halt_cancels_and_resumes_to_the_state_it_left():
    t = states(REDUCING)
    assert t.apply(Cause.MARKET_HALT) == (REDUCING, True)
    assert t.apply(Cause.MARKET_RESUMED) == (HALTED, False) and t.state is REDUCING
    assert t.apply(Cause.MARKET_RESUMED) == (None, False)


def test_a_market_halt_on_a_halt_remembers_nothing_and_its_end_changes_nothing():
    t = states(HALTED)
    assert t.apply(Cause.MARKET_HALT) == (None, False) and not t.kept
    assert t.apply(Cause.MARKET_RESUMED) == (None, False) and t.state is HALTED


def test_a_market_closed_for_the_day_forgets_a_resumption():
    t = states()
    run(t, (Cause.MARKET_HALT, None), (Cause.MARKET_CLOSED, None))
    assert t.apply(Cause.MARKET_RESUMED) == (None, False) and t.state is HALTED  # an operator resumes


def test_a_market_resumption_after_an_operator_resumed_keeps_its_memory_as_before():
    # The market-wide breaker's memory is its own: an operator's resume leaves it, and the resumption only
    # acts on a halted account (kernel behaviour 6, unchanged by the table).
    t = states()
    run(t, (Cause.MARKET_HALT, None), (Cause.OPERATOR, ACTIVE))
    assert t.apply(Cause.MARKET_RESUMED) == (None, False) and t.kept
    assert t.state is ACTIVE


def test_the_digest_covers_the_state_and_the_memories():
    a, b = states(), states()
    run(a, (Cause.JOURNAL_DOWN, None))
    run(b, (Cause.OPERATOR, HALTED))
    assert a.state is b.state and a.digest_state() != b.digest_state()
