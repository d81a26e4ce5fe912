"""A user's own data, through the command line: a vendor's layout ingested with an instrument declared on the
command line, the same quotes as CSV and as Parquet backtesting alike, and progress bars only on a terminal."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

import pytest

from tests.integration.test_cli import foxhunt, ok, summary

pytestmark = pytest.mark.postgres

BTC = "BTCUSDT:tick_size=0.01,lot_size=0.00001,currency=USDT"


def tardis_trades(path, rows: int) -> None:
    """Tardis.dev's trades layout (docs.tardis.dev, 'Downloadable CSV files'), a seeded walk."""
    price, lines = 7195.0, ["exchange,symbol,timestamp,local_timestamp,id,side,price,amount"]
    for i in range(rows):
        price = round(price + (0.5 if (i * 7919) % 13 < 6 else -0.5), 2)
        ts = 1577836800_000_000 + 250_000 * i
        side = "buy" if i % 3 else "sell"
        lines.append(f"binance,BTCUSDT,{ts},{ts + 900},{1000 + i},{side},{price:.2f},0.0{i % 9 + 1}")
    path.write_text("\n".join(lines) + "\n")


def test_tardis_trades_ingested_with_an_instrument_declared_on_the_command_line(cli_env, journal_name, tmp_path):
    data = tmp_path / "binance_trades_2020-01-01_BTCUSDT.csv"
    tardis_trades(data, 3000)
    refused = foxhunt("ingest", str(data), "--journal", journal_name, env=cli_env)
    assert refused.returncode == 2
    assert "symbol 'BTCUSDT' is not a configured instrument" in refused.stderr
    assert "--instrument BTCUSDT:" in refused.stderr
    loaded = summary("ingest", str(data), "--journal", journal_name, "--instrument", BTC, env=cli_env)
    assert loaded["rows"] == 3000 and loaded["gaps"] == 0
    # the journal keeps the declared instrument: its backtest needs no declaration
    backtest = summary("replay", journal_name, env=cli_env)
    assert backtest["mode"] == "backtest" and backtest["inputs"] >= 3000
    shown = ok("journal", "show", journal_name, "--limit", "3", env=cli_env).stdout
    assert '"aggressor":"SELLER"' in shown and '"trade_id":"1000"' in shown
    missing = foxhunt("ingest", str(data), "--journal", f"{journal_name}-x", "--instrument", "BTCUSDT:tick_size=0.01",
                      env=cli_env)
    assert missing.returncode == 2 and "missing lot_size, currency" in missing.stderr


def test_the_same_quotes_as_csv_and_as_parquet_backtest_alike(cli_env, journal_name, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = 4000
    stamps = [1704153600_000 + 37 * i for i in range(rows)]  # milliseconds since the epoch
    mids = [round(1.1 + 0.00001 * ((i * 7919) % 61 - 30), 5) for i in range(rows)]
    csv_path = tmp_path / "eurusd-quotes.csv"
    csv_path.write_text("time,bid,ask\n" + "".join(f"{t},{m - 0.00001:.5f},{m + 0.00001:.5f}\n"
                                                   for t, m in zip(stamps, mids, strict=True)))
    table = pa.table({"time": pa.array(stamps, pa.int64()).cast(pa.timestamp("ms", "UTC")),
                      "bid": [round(m - 0.00001, 5) for m in mids], "ask": [round(m + 0.00001, 5) for m in mids]})
    pq.write_table(table, tmp_path / "eurusd-quotes.parquet", row_group_size=1000)
    a, b = f"{journal_name}-csv", f"{journal_name}-parquet"
    assert summary("ingest", str(csv_path), "--journal", a, env=cli_env)["rows"] == rows
    assert summary("ingest", str(tmp_path / "eurusd-quotes.parquet"), "--journal", b, env=cli_env)["rows"] == rows
    from_csv, from_parquet = summary("replay", a, env=cli_env), summary("replay", b, env=cli_env)
    assert from_csv["orders"] > 5
    for key in ("orders", "fills", "pnl", "positions", "state_digest"):
        assert from_csv[key] == from_parquet[key], key


def test_progress_bars_show_on_a_terminal_only(cli_env, journal_name):
    ok("run", "--journal", journal_name, "--feed", "synthetic:seed=3,n=20000", "--clock", "feed", env=cli_env)
    leader, follower = pty.openpty()
    try:
        done = subprocess.run([sys.executable, "-m", "foxhunt", "replay", journal_name],
                              env=cli_env | {"COLUMNS": "120"}, stdout=subprocess.PIPE, stderr=follower, timeout=120)
        os.close(follower)
        follower = -1
        shown = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
    finally:
        if follower >= 0:
            os.close(follower)
        os.close(leader)
    assert done.returncode == 0
    text = shown.decode(errors="replace")
    assert f"replaying {journal_name}" in text and "events/s" in text
    piped = foxhunt("replay", journal_name, env=cli_env)
    assert "events/s" not in piped.stderr and "replaying" not in piped.stderr
    assert "events/s" not in foxhunt("replay", journal_name, "--json", env=cli_env).stderr
