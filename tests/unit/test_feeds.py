"""Feeds: the synthetic generator and the CSV formats, real files and bad rows."""

from __future__ import annotations

import itertools

import pytest

from foxhunt import config
from foxhunt.adapters.feeds import open_feed, parse_spec
from foxhunt.errors import InputError
from foxhunt.messages.base import parse_fixed as d
from foxhunt.messages.market import Bar, PriceType, QuoteTick
from foxhunt.messages.system import FeedGap
from foxhunt.runtime.clock import EventClock
from tests.conftest import SHARED_DATA

INSTRUMENTS = config.load(None, env={}).trading().build_instruments()


def feed(spec: str, on_bad_row: str = "error") -> list:
    return list(open_feed(spec, INSTRUMENTS, EventClock(), on_bad_row))


def write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_spec_parsing():
    assert parse_spec("synthetic:seed=3,n=10") == ("synthetic", "", {"seed": "3", "n": "10"})
    assert parse_spec("csv:/a/b.csv,symbol=EURUSD") == ("csv", "/a/b.csv", {"symbol": "EURUSD"})
    for bad in ("kafka:topic", "csv:", "synthetic:seed"):
        with pytest.raises(InputError):
            feed(bad)


def test_synthetic_feed_is_seeded_and_tick_aligned():
    a, b, c = feed("synthetic:seed=5,n=300"), feed("synthetic:seed=5,n=300"), feed("synthetic:seed=6,n=300")
    assert a == b and a != c and len(a) == 300
    tick = INSTRUMENTS["EURUSD"].tick_size
    assert all(q.bid % tick == 0 and q.ask % tick == 0 and q.bid < q.ask for q in a)
    assert all(x.ts_event < y.ts_event for x, y in itertools.pairwise(a))


def test_quotes_csv_with_iso_timestamps(tmp_path):
    path = write(tmp_path, "eurusd.csv", "timestamp,bid,ask\n2020-01-01 00:00:00.001+00:00,1.1,1.2\n")
    (q,) = feed(f"csv:{path}")
    assert q == QuoteTick(ts_event=1577836800001000000, ts_init=1577836800001000000, symbol="EURUSD",
                          bid=d("1.1"), ask=d("1.2"))


def test_histdata_timestamps_are_est_without_daylight_saving(tmp_path):
    path = write(tmp_path, "x.csv", "20200701 120000000,1.1,1.2,0\n")
    (q,) = feed(f"csv:{path},symbol=EURUSD")
    assert q.ts_event == 1593622800 * 10**9  # 2020-07-01 17:00 UTC: +5h even in July


def test_bars_are_stamped_at_their_close_with_side_from_the_name(tmp_path):
    path = write(tmp_path, "gbpusd-m5-ask.csv", "timestamp,open,high,low,close\n2012-02-01 00:00:00+00:00,1.5,1.6,1.4,1.55\n")
    (bar,) = feed(f"csv:{path}")
    assert isinstance(bar, Bar) and bar.price_type is PriceType.ASK
    assert bar.ts_event == 1328054400 * 10**9 + 300 * 10**9 and bar.close == d("1.55")


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("2020-01-01 00:00:01+00:00,nan,1.2", "bid: not a decimal number: 'nan'"),
        ("2020-01-01 00:00:01+00:00,1.1,inf", "ask: not a decimal number: 'inf'"),
        ("2020-01-01 00:00:01+00:00,0,1.2", "bid must be positive"),
        ("2020-01-01 00:00:01+00:00,-1.1,1.2", "bid must be positive"),
        ("2020-01-01 00:00:01+00:00,1.1", "expected 3 fields, got 2"),
        ("yesterday,1.1,1.2", "not an ISO-8601 timestamp"),
        ("2020-01-01 00:00:01,1.1,1.2", "without a UTC offset"),
        ("2019-12-31 23:59:59+00:00,1.1,1.2", "timestamp goes backwards"),
    ],
)
def test_bad_rows_name_the_file_and_line(tmp_path, row, message):
    path = write(tmp_path, "eurusd.csv", f"timestamp,bid,ask\n2020-01-01 00:00:00+00:00,1.1,1.2\n{row}\n")
    with pytest.raises(InputError, match=rf"eurusd\.csv:3: .*{message}"):
        feed(f"csv:{path}")


def test_skipped_rows_become_feed_gaps_and_nothing_else_is_lost(tmp_path):
    path = write(tmp_path, "eurusd.csv",
                 "timestamp,bid,ask\n2020-01-01 00:00:00+00:00,1.1,1.2\nbad,row,here\n2020-01-01 00:00:02+00:00,1.1,1.2\n")
    first, gap, last = feed(f"csv:{path}", on_bad_row="skip")
    assert isinstance(gap, FeedGap) and gap.source.endswith("eurusd.csv:3") and "ISO-8601" in gap.reason
    assert isinstance(first, QuoteTick) and isinstance(last, QuoteTick)


def test_crossed_quotes_pass_through_to_be_flagged_by_the_kernel(tmp_path):
    path = write(tmp_path, "eurusd.csv", "timestamp,bid,ask\n2020-01-01 00:00:00+00:00,1.3,1.2\n")
    (q,) = feed(f"csv:{path}")
    assert q.bid > q.ask


def test_unrecognised_files_and_unknown_symbols(tmp_path):
    with pytest.raises(InputError, match=r"x\.csv:1: unrecognised CSV format"):
        feed(f"csv:{write(tmp_path, 'x.csv', 'a,b,c')},symbol=EURUSD")
    with pytest.raises(InputError, match="cannot tell the instrument"):
        feed(f"csv:{write(tmp_path, 'y.csv', 'timestamp,bid,ask')}")
    with pytest.raises(InputError, match="cannot read"):
        feed(f"csv:{tmp_path}/missing.csv")


@pytest.mark.skipif(not SHARED_DATA.exists(), reason="../shared/data is not beside this checkout")
def test_the_real_shared_files_parse_completely():
    counts = {}
    for name in ("truefx-usdjpy-ticks-2013.csv", "histdata-eurusd-ticks-2020-01-01.csv",
                 "fxcm-gbpusd-m1-bid-2012.csv", "fxcm-gbpusd-m1-ask-2012.csv"):
        messages = feed(f"csv:{SHARED_DATA / name}")
        assert not any(isinstance(m, FeedGap) for m in messages)
        counts[name] = len(messages)
    assert counts == {"truefx-usdjpy-ticks-2013.csv": 1000, "histdata-eurusd-ticks-2020-01-01.csv": 9500,
                      "fxcm-gbpusd-m1-bid-2012.csv": 30117, "fxcm-gbpusd-m1-ask-2012.csv": 30117}
    crossed = [q for q in feed(f"csv:{SHARED_DATA / 'truefx-usdjpy-ticks-2013.csv'}") if q.bid >= q.ask]
    assert len(crossed) == 1  # the README's one locked/crossed TrueFX quote
