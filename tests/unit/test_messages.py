"""Every message type survives the codec unchanged; fixed-point numbers parse and print exactly."""

from __future__ import annotations

import random

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foxhunt.messages import codec
from foxhunt.messages.base import SCALE, format_fixed, mul, parse_fixed
from foxhunt.messages.fixed_point import INT64_MAX, div, ratio, times

ints = st.integers(min_value=-(2**62), max_value=2**62)
texts = st.text(max_size=20)


def _strategy_for(tp):
    """A hypothesis strategy for a msgspec field type, built from msgspec's own type info."""
    info = msgspec.inspect.type_info(tp)
    return _from_info(info)


def _from_info(info):
    match info:
        case msgspec.inspect.IntType():
            return ints
        case msgspec.inspect.FloatType():
            return st.floats(allow_nan=False)
        case msgspec.inspect.StrType():
            return texts
        case msgspec.inspect.BoolType():
            return st.booleans()
        case msgspec.inspect.BytesType():
            return st.binary(max_size=64)
        case msgspec.inspect.NoneType():
            return st.none()
        case msgspec.inspect.EnumType(cls=cls):
            return st.sampled_from(list(cls))
        case msgspec.inspect.UnionType(types=types):
            return st.one_of([_from_info(t) for t in types])
        case msgspec.inspect.ListType(item_type=item):
            return st.lists(_from_info(item), max_size=4)
        case msgspec.inspect.DictType(key_type=k, value_type=v):
            return st.dictionaries(_from_info(k), _from_info(v), max_size=4)
        case msgspec.inspect.StructType(cls=cls, fields=fields):  # a plain Struct inside a message
            return st.builds(cls, **{f.name: _from_info(f.type) for f in fields})
    raise NotImplementedError(f"no strategy for {info}")


def _message_strategy(cls):
    info = msgspec.inspect.type_info(cls)
    fields = {f.name: _from_info(f.type) for f in info.fields}
    return st.fixed_dictionaries(fields).map(lambda kw: cls(**kw))


@pytest.mark.parametrize("cls", codec.MESSAGE_TYPES, ids=lambda c: c.__name__)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_every_message_type_round_trips_through_the_codec(cls, data):
    message = data.draw(_message_strategy(cls))
    payload = codec.encode(message)
    decoded = codec.decode(payload)
    assert decoded == message
    assert type(decoded) is cls
    assert codec.encode(decoded) == payload  # what --verify relies on: encoding is a function


def test_message_types_register_themselves_once_and_bases_do_not():
    names = [c.__name__ for c in codec.MESSAGE_TYPES]
    assert len(names) == len(set(names))  # a kind names one type: the journal's `kind` column
    assert "OrderFilled" in names and "_Fill" not in names and "Input" not in names


def test_every_message_kind_is_either_input_or_derived():
    names = {c.__name__ for c in codec.MESSAGE_TYPES}
    assert codec.INPUT_KINDS | codec.DERIVED_KINDS == names
    assert not codec.INPUT_KINDS & codec.DERIVED_KINDS


@pytest.mark.parametrize(
    ("text", "nanos"),
    [("1.10345", 1_103_450_000), ("-0.5", -500_000_000), ("86.655", 86_655_000_000), ("7", 7 * SCALE),
     (".25", 250_000_000), ("0.000000001", 1), ("1.1000000000", 1_100_000_000)],
)
def test_parse_fixed_is_exact(text, nanos):
    assert parse_fixed(text) == nanos


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "1e5", "", "1.2.3", "abc", "0.0000000001", "1,5"])
def test_parse_fixed_rejects_what_is_not_a_plain_decimal(text):
    with pytest.raises(ValueError, match="decimal|places"):
        parse_fixed(text)


@given(st.integers(min_value=-(10**18), max_value=10**18))
def test_format_fixed_inverts_parse_fixed(value):
    assert parse_fixed(format_fixed(value)) == value


def test_mul_of_fixed_point_numbers():
    assert mul(parse_fixed("1.10345"), parse_fixed("100000")) == parse_fixed("110345")
    assert mul(parse_fixed("0.1"), parse_fixed("0.2")) == parse_fixed("0.02")


# where mul's and times's machine-word paths begin and end (fixed_point._WORDS, _HIGH, _FITS), and either side
_EDGES = [0, 1, -1, SCALE - 1, SCALE, SCALE + 1, -SCALE + 1, -SCALE, -SCALE - 1, 2**30, 2**31, 2**32, 2**62 // SCALE,
          2**31 * SCALE - 1, 2**31 * SCALE, -(2**31) * SCALE + 1, -(2**31) * SCALE, 2**32 * SCALE, 2**62 - 1, -(2**62),
          2**62, 2**63, -(2**63) - 1, 10**30, -(10**30)]


def test_mul_div_and_times_are_python_s_exact_integer_arithmetic_on_both_paths_also_compiled():
    """Compiled, all three run in int64 wherever the result provably fits and through Python's integers
    elsewhere; either way the result is Python's `a * b // SCALE`, `a * SCALE // b` and `a * b`: rounding toward minus
    infinity, negative operands, every edge of the machine-word path, and results far beyond int64."""
    rng = random.Random(11)
    values = _EDGES + [-v for v in _EDGES] + [rng.randrange(-(2**e), 2**e + 1) for e in range(0, 72, 2)
                                              for _ in range(40)]
    pairs = [(a, b) for a in _EDGES for b in _EDGES] + [(rng.choice(values), rng.choice(values)) for _ in range(40_000)]
    assert [mul(a, b) for a, b in pairs] == [a * b // SCALE for a, b in pairs]
    assert [times(a, b) for a, b in pairs] == [a * b for a, b in pairs]
    divisors = [b for b in values if b] + [2**63 // 1000 - 1, 2**63 // 1000, -(2**63 // 1000), 3, -3, 7]
    quotients = [(a, rng.choice(divisors)) for a in values for _ in range(12)]
    quotients += [(a, b) for a in _EDGES for b in divisors[:40]]
    assert [div(a, b) for a, b in quotients] == [a * SCALE // b for a, b in quotients]
    with pytest.raises(ZeroDivisionError):
        div(1, 0)
    # what the order path multiplies: a price by a quantity, the value by a multiplier, a reference by bps
    assert mul(parse_fixed("1.10345"), parse_fixed("-20000000")) == parse_fixed("-22069000")
    assert mul(parse_fixed("-0.000000001"), parse_fixed("0.5")) == -1  # toward minus infinity
    assert times(mul(parse_fixed("150.125"), parse_fixed("3000000")), 1000) == parse_fixed("450375000000")


def test_ratio_divides_two_ints_as_python_does_beyond_two_to_the_53_also_compiled():
    """Where mypyc compiled fixed_point (the pre-trade gate's and the report tracker's nanos to floats), its
    division of two ints through their doubles would round an int beyond 2**53 first; `ratio` does not."""
    big = 2**54 + 3  # its double is 2**54 + 4: dividing the doubles rounds the other way
    assert float(big) / 3.0 == 6004799503160663.0 != big / 3
    assert ratio(big, 3) == big / 3 == 6004799503160662.0
    for a, b in ((-(2**70) - 7, 10**9), (2**53 + 1, 2), (123_456_789, 10**9), (-5, 2), (0, 7)):
        assert ratio(a, b) == a / b
    rng = random.Random(7)
    nanos = [rng.randrange(-(2**e), 2**e) for e in range(50, 64) for _ in range(300)] + [INT64_MAX, -INT64_MAX]
    assert [ratio(v, SCALE).hex() for v in nanos] == [(v / SCALE).hex() for v in nanos]
    assert any(float(v) / 1e9 != v / SCALE for v in nanos)  # among them, values where the doubles' quotient differs
    with pytest.raises(ZeroDivisionError):
        ratio(1, 0)
