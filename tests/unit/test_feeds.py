"""Feeds: the synthetic generator and the CSV formats, real files and bad rows."""

from __future__ import annotations

import decimal
import itertools

import pytest

from foxhunt import config
from foxhunt.adapters.feeds import open_feed, parse_spec
from foxhunt.errors import InputError
from foxhunt.messages.base import parse_fixed as d
from foxhunt.messages.market import AggressorSide, Bar, PriceType, QuoteTick, TradeTick
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
    with pytest.raises(InputError, match=r"x\.csv:1: columns a, b, c make no known layout"):
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


# --- the formats people have: layouts by column names, mappings, epoch units, Tardis, Parquet and Arrow ---

def with_btc() -> dict:
    btc = "BTCUSDT:tick_size=0.01,lot_size=0.00001,currency=USDT"
    cfg = config.declare_instruments(config.load(None, env={}), [btc])
    return cfg.trading().build_instruments()


@pytest.mark.parametrize(
    ("header", "stamp"),
    [
        ("Date,Open,High,Low,Close,Volume", "2020-01-01T00:00:00Z"),
        ("time,o,h,l,c,v", "1577836800"),
        ("timestamp_utc;open;high;low;close;volume", "1577836800000"),
        ("ts\topen\thigh\tlow\tclose\tvolume", "1577836800000000"),
        ("<DATETIME>|<OPEN>|<HIGH>|<LOW>|<CLOSE>|<VOL>", "1577836800000000000"),
    ],
)
def test_ohlcv_bars_by_their_usual_names_and_epoch_units(tmp_path, header, stamp):
    delimiter = next(d for d in ",;\t|" if d in header)
    row = delimiter.join([stamp, "1.1", "1.3", "1.0", "1.2", "12.5"])
    (b,) = feed(f"csv:{write(tmp_path, 'eurusd-m1.csv', header + chr(10) + row + chr(10))}")
    assert b == Bar(ts_event=(1577836800 + 60) * 10**9, ts_init=(1577836800 + 60) * 10**9, symbol="EURUSD",
                    price_type=PriceType.MID, interval_ns=60 * 10**9, open=d("1.1"), high=d("1.3"), low=d("1.0"),
                    close=d("1.2"), volume=d("12.5"))


def test_a_mapping_names_the_columns_and_options_say_the_unit_and_zone(tmp_path):
    path = write(tmp_path, "x.csv", "when,b,a,extra\n2020-01-01 01:00:00,1.1,1.2,z\n")
    with pytest.raises(InputError, match=r"x\.csv:2: timestamp without a UTC offset.*tz=UTC"):
        feed(f"csv:{path},symbol=EURUSD,columns=ts:when;bid:b;ask:a")
    (q,) = feed(f"csv:{path},symbol=EURUSD,columns=ts:when;bid:b;ask:a,tz=Europe/Berlin")
    assert q.ts_event == 1577836800 * 10**9 and (q.bid, q.ask) == (d("1.1"), d("1.2"))  # 01:00 CET is 00:00 UTC
    seconds = write(tmp_path, "y.csv", "t,bid,ask\n1577836800123,1.1,1.2\n")
    assert feed(f"csv:{seconds},symbol=EURUSD,unit=us")[0].ts_event == 1577836800123 * 1000
    assert feed(f"csv:{seconds},symbol=EURUSD")[0].ts_event == 1577836800123 * 10**6  # 13 digits: milliseconds
    joined = write(tmp_path, "z.csv", "Date,Time,Bid,Ask\n01.01.2020,00:00:01.5,1.1,1.2\n")
    (q,) = feed(f"csv:{joined},symbol=EURUSD,ts_format=%d.%m.%Y %H:%M:%S.%f,tz=UTC")
    assert q.ts_event == 1577836801500 * 10**6
    for spec, message in (
        (f"csv:{path},symbol=EURUSD,columns=ts:nope;bid:b;ask:a", "no column 'nope' in when, b, a, extra"),
        (f"csv:{path},symbol=EURUSD,columns=stamp:when", "unknown field 'stamp'"),
        (f"csv:{path},symbol=EURUSD,columns=ts:when;bid:b;ask:a,tz=Mars/Olympus", "not a time zone"),
        (f"csv:{seconds},symbol=EURUSD,unit=minutes", "unit='minutes'"),
    ):
        with pytest.raises(InputError, match=message):
            feed(spec)


def test_tardis_quotes_and_trades_with_their_symbol_column(tmp_path):
    """Tardis.dev's CSV layouts (docs.tardis.dev, 'Downloadable CSV files'): microseconds since the epoch,
    the exchange's timestamp as the event time, the taker's side on trades."""
    quotes = write(tmp_path, "binance_quotes_2020-01-01_BTCUSDT.csv",
                   "exchange,symbol,timestamp,local_timestamp,ask_amount,ask_price,bid_price,bid_amount\n"
                   "binance,BTCUSDT,1577836800000123,1577836800001000,0.5,7195.25,7195.24,1.25\n")
    trades = write(tmp_path, "binance_trades_2020-01-01_BTCUSDT.csv",
                   "exchange,symbol,timestamp,local_timestamp,id,side,price,amount\n"
                   "binance,BTCUSDT,1577836800000123,1577836800001000,233222,buy,7195.25,0.002\n"
                   "binance,BTCUSDT,1577836800000200,1577836800002000,233223,sell,7195.24,0.1\n")
    with pytest.raises(InputError, match=r"symbol 'BTCUSDT' is not a configured instrument.*--instrument BTCUSDT:"):
        feed(f"csv:{quotes}")
    btc = with_btc()
    (q,) = list(open_feed(f"csv:{quotes}", btc, EventClock()))
    assert q == QuoteTick(ts_event=1577836800000123000, ts_init=1577836800000123000, symbol="BTCUSDT",
                          bid=d("7195.24"), ask=d("7195.25"), bid_size=d("1.25"), ask_size=d("0.5"))
    buy, sell = open_feed(f"csv:{trades}", btc, EventClock())
    assert buy == TradeTick(ts_event=1577836800000123000, ts_init=1577836800000123000, symbol="BTCUSDT",
                            price=d("7195.25"), size=d("0.002"), aggressor=AggressorSide.BUYER, trade_id="233222")
    assert sell.aggressor is AggressorSide.SELLER and sell.size == d("0.1")


def test_a_row_of_an_unknown_symbol_is_a_bad_row_and_can_be_skipped(tmp_path):
    path = write(tmp_path, "mixed.csv", "symbol,timestamp,bid,ask\nEURUSD,1577836800,1.1,1.2\nXAUUSD,1577836801,1,2\n"
                                        "GBPUSD,1577836802,1.3,1.4\n")
    with pytest.raises(InputError, match=r"mixed\.csv:3: symbol 'XAUUSD' is not a configured instrument"):
        feed(f"csv:{path}")
    eur, gap, gbp = feed(f"csv:{path}", on_bad_row="skip")
    assert (eur.symbol, gbp.symbol) == ("EURUSD", "GBPUSD") and isinstance(gap, FeedGap)


def _table(rows: dict, **types):
    import pyarrow as pa

    return pa.table({k: pa.array(v, type=types.get(k)) for k, v in rows.items()})


def test_parquet_and_arrow_give_what_the_same_csv_gives(tmp_path):
    import pyarrow as pa
    import pyarrow.feather as feather
    import pyarrow.parquet as pq

    rows = 2500
    stamps = [1577836800_000_000 + 1000 * i for i in range(rows)]
    bids = [round(1.1 + 0.00001 * (i % 97), 5) for i in range(rows)]
    csv_path = write(tmp_path, "eurusd.csv", "timestamp,bid,ask\n" + "".join(
        f"{t},{b:.5f},{b + 0.0002:.5f}\n" for t, b in zip(stamps, bids, strict=True)))
    table = _table({"timestamp": stamps, "bid": bids, "ask": [round(b + 0.0002, 5) for b in bids]})
    pq.write_table(table, tmp_path / "eurusd.parquet", row_group_size=1000)
    feather.write_feather(table, tmp_path / "eurusd.arrow", chunksize=700)
    expected = feed(f"csv:{csv_path}")
    assert len(expected) == rows
    assert feed(f"parquet:{tmp_path / 'eurusd.parquet'}") == expected
    assert feed(f"{tmp_path / 'eurusd.arrow'}") == expected  # a path alone: its kind from the extension
    # Arrow's own timestamp type, in its unit and zone, and decimals
    typed = _table({"ts": [s * 1000 for s in stamps[:3]], "bid": [decimal.Decimal(f"{b:.5f}") for b in bids[:3]],
                    "ask": [str(round(b + 0.0002, 5)) for b in bids[:3]]},
                   ts=pa.timestamp("ns", "UTC"), bid=pa.decimal128(10, 5), ask=pa.string())
    pq.write_table(typed, tmp_path / "typed-eurusd.parquet")
    assert feed(f"parquet:{tmp_path / 'typed-eurusd.parquet'}") == expected[:3]


def test_parquet_refusals_name_the_file_row_group_and_row(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = _table({"time": [1577836800 + i for i in range(6)], "bid": [1.1, 1.1, float("nan"), 1.1, None, 1.1],
                    "ask": [1.2] * 6})
    pq.write_table(table, tmp_path / "eurusd.parquet", row_group_size=4)
    with pytest.raises(InputError, match=r"eurusd\.parquet: row group 0, row 2: bid: not a finite decimal: nan"):
        feed(f"parquet:{tmp_path / 'eurusd.parquet'}")
    messages = feed(f"parquet:{tmp_path / 'eurusd.parquet'}", on_bad_row="skip")
    gaps = [m for m in messages if isinstance(m, FeedGap)]
    assert len(messages) == 6 and [g.source.rsplit(": ", 1)[1] for g in gaps] == ["row group 0, row 2",
                                                                                   "row group 1, row 0"]
    assert "bid is missing (null)" in gaps[1].reason
    naive = _table({"time": [1, 2], "bid": [1.1, 1.1], "ask": [1.2, 1.2]}, time=pa.timestamp("s"))
    pq.write_table(naive, tmp_path / "naive-eurusd.parquet")
    with pytest.raises(InputError, match=r"naive-eurusd\.parquet: row group 0: column 'time' is a timestamp without"
                                         r" a time zone; say which with tz=UTC"):
        feed(f"parquet:{tmp_path / 'naive-eurusd.parquet'}")
    assert feed(f"parquet:{tmp_path / 'naive-eurusd.parquet'},tz=UTC")[1].ts_event == 2 * 10**9
    (tmp_path / "broken-eurusd.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(InputError, match=r"broken-eurusd\.parquet: not a Parquet file"):
        feed(f"parquet:{tmp_path / 'broken-eurusd.parquet'}")
    pq.write_table(_table({"a": [1], "b": [2]}), tmp_path / "ab-eurusd.parquet")
    with pytest.raises(InputError, match=r"ab-eurusd\.parquet: columns a, b make no known layout"):
        feed(f"parquet:{tmp_path / 'ab-eurusd.parquet'}")


def test_tardis_trades_in_parquet_take_the_same_path_as_in_csv(tmp_path):
    """A whole clean batch is built at once, a batch with a bad row one row at a time: both give what the
    CSV reading of the same rows gives."""
    import pyarrow.parquet as pq

    rows = {"exchange": ["binance"] * 4, "symbol": ["BTCUSDT"] * 4,
            "timestamp": [1577836800000123 + i for i in range(4)], "local_timestamp": [1577836800001000] * 4,
            "id": ["1", "2", "3", "4"], "side": ["buy", "sell", "unknown", "buy"],
            "price": [7195.25, 7195.24, 7195.26, 7195.2], "amount": [0.002, 0.1, 1.5, 0.25]}
    csv_path = tmp_path / "trades.csv"
    csv_path.write_text(",".join(rows) + "\n" + "".join(
        ",".join(str(rows[k][i]) for k in rows) + "\n" for i in range(4)))
    pq.write_table(_table(rows), tmp_path / "trades.parquet", row_group_size=2)
    btc = with_btc()
    expected = list(open_feed(f"csv:{csv_path}", btc, EventClock()))
    assert list(open_feed(f"parquet:{tmp_path / 'trades.parquet'}", btc, EventClock())) == expected
    rows["side"][3] = "sideways"  # the second row group falls back to row by row, and names the row
    pq.write_table(_table(rows), tmp_path / "bad.parquet", row_group_size=2)
    with pytest.raises(InputError, match=r"bad\.parquet: row group 1, row 1: side 'sideways'"):
        list(open_feed(f"parquet:{tmp_path / 'bad.parquet'}", btc, EventClock()))
    skipped = list(open_feed(f"parquet:{tmp_path / 'bad.parquet'}", btc, EventClock(), "skip"))
    assert skipped[:3] == expected[:3] and isinstance(skipped[3], FeedGap)
