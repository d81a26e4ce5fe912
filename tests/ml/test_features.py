"""The feature pipeline: the incremental and the batch forms give the same rows bit for bit, the compiled
kernels equal their Python twins, no row depends on a later event, and the formulas are pinned."""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest

from foxhunt.core.features import Columns, FeaturePipeline, FeatureSpec, batch
from foxhunt.core.features import kernels as k
from foxhunt.core.features.pipeline import new_state
from foxhunt.messages.market import AggressorSide, QuoteTick, TradeTick
from tests.ml.market import START, by_symbol, columns_by_symbol, messages

SPEC = FeatureSpec()


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.uint64)


def test_the_incremental_form_gives_the_batch_rows_bit_for_bit():
    msgs = messages(20_000)
    pipeline = FeaturePipeline(SPEC)
    incremental: dict[str, list[np.ndarray]] = {}
    for m in msgs:
        incremental.setdefault(m.symbol, []).append(pipeline.update(m).copy())
    for symbol, own in by_symbol(msgs).items():
        rows, _ = batch(SPEC, Columns.of(own))
        assert np.array_equal(bits(rows), bits(np.array(incremental[symbol])))


@pytest.mark.parametrize("cut", [1, 2, 63, 64, 65, 1000, 4321, 9999])
def test_a_batch_continued_from_a_cut_gives_the_rows_of_one_batch(cut):
    own = by_symbol(messages(10_000))["EURUSD"]
    whole, whole_prices = batch(SPEC, Columns.of(own))
    state = new_state(SPEC)
    head, head_prices = batch(SPEC, Columns.of(own[:cut]), state)
    tail, tail_prices = batch(SPEC, Columns.of(own[cut:]), state)
    assert np.array_equal(bits(np.concatenate([head, tail])), bits(whole))
    assert np.array_equal(np.concatenate([head_prices, tail_prices]), whole_prices)


def test_no_row_changes_when_the_data_after_it_is_cut_away():
    """No look-ahead: the rows of a prefix are the first rows of the whole, at every cut."""
    own = by_symbol(messages(6_000))["GBPUSD"]
    whole, _ = batch(SPEC, Columns.of(own))
    for cut in range(1, len(own), 97):
        prefix, _ = batch(SPEC, Columns.of(own[:cut]))
        assert np.array_equal(bits(prefix), bits(whole[:cut])), cut


def test_the_compiled_kernels_equal_their_python_twins():
    own = by_symbol(messages(3_000))["EURUSD"]
    cols = Columns.of(own)
    compiled_rows, compiled_prices = batch(SPEC, cols)
    rows = np.empty_like(compiled_rows)
    prices = np.empty_like(compiled_prices)
    k.batch_py(new_state(SPEC), cols.ts, cols.kind, cols.values, rows, prices)
    np.testing.assert_array_equal(prices, compiled_prices)
    np.testing.assert_allclose(rows, compiled_rows, rtol=1e-15, atol=1e-300)


def quote(i, bid, ask, bid_size=0, ask_size=0, ts=None, symbol="X"):
    return QuoteTick(ts_event=START + i if ts is None else ts, ts_init=0, symbol=symbol, bid=bid, ask=ask,
                     bid_size=bid_size, ask_size=ask_size)


def test_the_values_of_a_short_sequence_worked_by_hand():
    spec = FeatureSpec(return_horizons=(1, 2), vol_halflife=1.0, flow_halflife=1.0)  # weights of 1/2
    names = spec.names()
    p = FeaturePipeline(spec)
    first = dict(zip(names, p.update(quote(0, 100, 102, 3, 1)).copy(), strict=True))
    assert first["ret_1"] == 0.0 and first["ret_2"] == 0.0 and first["vol"] == 0.0
    assert first["spread_bps"] == pytest.approx(2 / 101 * 1e4)
    assert first["quote_imbalance"] == 0.5
    # depth's weighted mean: 0 + (2 - 0) / 2 = 1; no OFI yet (no earlier quote)
    assert first["ofi"] == 0.0
    # the bid rises with 5 and the ask stays with 1 (of 1): e = 5 - 1 + 1 = 5
    second = dict(zip(names, p.update(quote(1, 101, 102, 5, 1)).copy(), strict=True))
    assert second["ret_1"] == pytest.approx(math.log(101.5 / 101))
    assert second["vol"] == pytest.approx(math.sqrt(0.5 * math.log(101.5 / 101) ** 2))
    # ofi: 0 + (5 - 0) / 2 = 2.5; depth: 1 + (3 - 1) / 2 = 2
    assert second["ofi"] == pytest.approx(2.5 / 2.0)
    # a trade while quoted leaves the price; its flow is 1 buyer of 4 over 4
    third = dict(zip(names, p.update(TradeTick(ts_event=START + 2, ts_init=0, symbol="X", price=500, size=4,
                                                aggressor=AggressorSide.BUYER)).copy(), strict=True))
    assert third["ret_1"] == 0.0 and third["ret_2"] == pytest.approx(math.log(101.5 / 101))
    assert third["trade_imbalance"] == 1.0
    noon = dict(zip(names, p.update(quote(3, 101, 102, ts=START - START % 86_400_000_000_000 + 43_200_000_000_000)), strict=True))
    assert noon["tod_sin"] == pytest.approx(0.0, abs=1e-12) and noon["tod_cos"] == pytest.approx(-1.0)


def test_a_trade_sets_the_price_only_while_the_symbol_has_had_no_quote():
    p = FeaturePipeline(FeatureSpec(return_horizons=(1,)))
    trade = lambda i, price: TradeTick(ts_event=START + i, ts_init=0, symbol="Y", price=price, size=1)
    p.update(trade(0, 100))
    assert p.update(trade(1, 110))[0] == pytest.approx(math.log(1.1))
    p.update(quote(2, 109, 111, symbol="Y"))
    assert p.update(trade(3, 200))[0] == 0.0


def test_the_rows_of_a_fixed_input_are_pinned_so_a_formula_change_bumps_FORMULAS():
    """A change to what the kernels compute changes this digest: bump spec.FORMULAS with it, so that a
    model trained on the old rows is refused rather than fed other numbers. (Rounded to 1e-10: the
    digest pins the formulas, not one C library's last bit of a logarithm.)"""
    rows, _ = batch(SPEC, Columns.of(by_symbol(messages(2_000, seed=5))["EURUSD"]))
    assert hashlib.sha256(rows.round(10).tobytes()).hexdigest()[:16] == "dbf64df8fc69a925"


def test_a_spec_is_named_versioned_and_digested():
    assert SPEC.names()[:4] == ["ret_1", "ret_4", "ret_16", "ret_64"] and SPEC.width == len(SPEC.names())
    assert FeatureSpec(vol_halflife=31.0).digest() != SPEC.digest()
    assert FeatureSpec(version=2).digest() != SPEC.digest()
    assert FeatureSpec().digest() == SPEC.digest()
    for bad in ({"return_horizons": ()}, {"return_horizons": (4, 1)}, {"return_horizons": (0, 1)},
                {"vol_halflife": 0.0}, {"name": "a b"}, {"version": 0}):
        with pytest.raises(ValueError):
            FeatureSpec(**bad)


def test_events_gathered_one_by_one_are_the_columns_of_the_list():
    msgs = by_symbol(messages(3_000))["EURUSD"]
    gathered = columns_by_symbol(msgs)["EURUSD"]
    direct = Columns.of(msgs)
    for a, b in zip(gathered, direct, strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)


def test_ranges_of_several_journals_merge_in_time_order_ties_in_the_order_given():
    first = Columns(np.array([1, 3, 5]), np.zeros(3, dtype=np.int64), np.full((3, 4), 1.0))
    second = Columns(np.array([2, 3, 4]), np.ones(3, dtype=np.int64), np.full((3, 4), 2.0))
    merged = Columns.concat([first, second])
    assert merged.ts.tolist() == [1, 2, 3, 3, 4, 5]
    assert merged.kind.tolist() == [0, 1, 0, 1, 1, 0] and merged.values[:, 0].tolist() == [1, 2, 1, 2, 2, 1]


def test_no_feature_is_ever_nan_or_infinite():
    msgs = messages(5_000, seed=9)
    msgs.append(quote(10**9, 0, 0))  # an empty book
    msgs.append(quote(10**9 + 1, 105, 100))  # crossed
    msgs.append(TradeTick(ts_event=START + 10**9 + 2, ts_init=0, symbol="X", price=0, size=0))
    p = FeaturePipeline(SPEC)
    for m in msgs:
        assert np.isfinite(p.update(m)).all()
