"""`foxhunt journal export` and the SQL views, against what the journal holds (read back through the codec):
every exported value and every view row is the event's own, exact."""

from __future__ import annotations

import decimal
import json
import typing

import msgspec
import psycopg
import pytest

from foxhunt.messages import codec
from foxhunt.messages.base import COUNT_FIELDS, FIXED_POINT_FIELDS, format_fixed
from tests.integration.test_cli import foxhunt, ok, summary
from tests.integration.test_report import RISKY

pa = pytest.importorskip("pyarrow", reason="pyarrow is a dependency (pyproject.toml)")
import pyarrow.csv as pa_csv  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402


def test_every_integer_field_is_fixed_point_or_a_count():
    """An export writes fixed-point fields as decimals and counts as integers: a new integer field must be
    put in one of messages/base.py's two sets, or this fails naming it."""
    unclassified = set()
    for cls in codec.MESSAGE_TYPES:
        hints = typing.get_type_hints(cls)
        for f in msgspec.structs.fields(cls):
            if hints[f.name] in (int, int | None) and f.name not in FIXED_POINT_FIELDS | COUNT_FIELDS:
                unclassified.add(f"{cls.__name__}.{f.name}")
    assert not unclassified
    assert not FIXED_POINT_FIELDS & COUNT_FIELDS


@pytest.fixture
def recorded(cli_env, journal_name):
    summary("run", "--journal", journal_name, "--feed", "synthetic:seed=7,n=8000", "--clock", "feed",
            env=cli_env | RISKY)
    events = []
    for line in ok("journal", "show", journal_name, env=cli_env).stdout.splitlines():
        seq, cause, kind, _, body = line.split("\t", 4)
        events.append((int(seq), None if cause == "-" else int(cause), kind, json.loads(body)))
    return journal_name, events


@pytest.mark.postgres
def test_parquet_and_csv_exports_hold_every_event_exactly(cli_env, recorded, tmp_path):
    name, events = recorded
    done = summary("journal", "export", name, "--to", str(tmp_path / "all.parquet"), env=cli_env)
    assert done["rows"] == len(events)
    table = pq.read_table(tmp_path / "all.parquet")
    assert table.column("seq").to_pylist() == [e[0] for e in events]
    assert table.column("causation").to_pylist() == [e[1] for e in events]
    assert table.schema.field("bid").type == pa.decimal128(38, 9)
    assert table.schema.field("ts_event").type == pa.timestamp("ns", "UTC")
    for column in ("ts_event", "ts_init"):
        assert table.column(column).cast(pa.int64()).to_pylist() == [e[3][column] for e in events]
    rows = table.to_pylist()
    checked = 0
    for (seq, _, kind, body), row in zip(events, rows, strict=True):
        assert row["kind"] == kind
        for field, value in body.items():
            if field in ("kind", "ts_event", "ts_init") or value is None:
                continue
            exported = row[field]
            if field in FIXED_POINT_FIELDS and isinstance(value, int):
                assert exported == decimal.Decimal(format_fixed(value)), (seq, field)
            elif isinstance(value, (dict, list)):
                assert json.loads(exported) == value, (seq, field)
            elif isinstance(value, str) and field in ("config",):
                continue  # bytes: base64 text in both
            else:
                assert exported == value or str(exported) == str(value), (seq, field)
            checked += 1
    assert checked > 10 * len(events) // 2
    fills = summary("journal", "export", name, "--to", str(tmp_path / "fills.csv"), "--kinds",
                    "OrderFilled,OrderPartiallyFilled", env=cli_env)
    csv_rows = pa_csv.read_csv(tmp_path / "fills.csv").to_pylist()
    expected = [b for _, _, k, b in events if k in ("OrderFilled", "OrderPartiallyFilled")]
    assert fills["rows"] == len(csv_rows) == len(expected) > 5
    assert [decimal.Decimal(str(r["last_price"])) for r in csv_rows] == [
        decimal.Decimal(format_fixed(b["last_price"])) for b in expected]


@pytest.mark.postgres
def test_export_refusals_name_what_was_wrong(cli_env, recorded, tmp_path):
    name, _ = recorded
    for args, message in (
        (["--to", str(tmp_path / "x.xlsx")],
         r"x\.xlsx: the file's name says its format: \.parquet \(or \.pq\) or \.csv"),
        (["--to", str(tmp_path / "x.csv"), "--kinds", "QuoteTick,Fils"], "unknown kind.*Fils"),
        (["--to", str(tmp_path / "missing" / "x.csv")], "cannot write"),
    ):
        done = foxhunt("journal", "export", name, *args, env=cli_env)
        assert done.returncode == 2 and re_search(message, done.stderr), done.stderr
    done = foxhunt("journal", "export", "no-such-journal", "--to", str(tmp_path / "y.csv"), env=cli_env)
    assert done.returncode == 2 and "no-such-journal" in done.stderr and not (tmp_path / "y.csv").exists()


def re_search(pattern: str, text: str) -> bool:
    import re

    return re.search(pattern, text) is not None


@pytest.mark.postgres
def test_the_sql_views_give_the_journals_events(cli_env, recorded, pg_dsn):
    name, events = recorded
    with psycopg.connect(pg_dsn) as conn:
        fills = conn.execute("SELECT seq, order_id, side, quantity, price, commission FROM journal_fills"
                             " WHERE journal = %s ORDER BY seq", (name,)).fetchall()
        denials = conn.execute("SELECT reason, sum(denials) FROM journal_denials WHERE journal = %s GROUP BY 1",
                               (name,)).fetchall()
        states = conn.execute("SELECT state, previous FROM journal_state_changes WHERE journal = %s",
                              (name,)).fetchall()
        quotes = conn.execute("SELECT count(*), sum(bid), min(ask) FROM journal_quotes WHERE journal = %s",
                              (name,)).fetchone()
        runs = conn.execute("SELECT kind, clock, fingerprint->>'kernel' FROM journal_runs WHERE journal = %s"
                            " ORDER BY seq", (name,)).fetchall()
        scored = conn.execute("SELECT journal_payload(payload) FROM events e JOIN journals j ON j.id = e.journal_id"
                              " WHERE j.name = %s ORDER BY seq", (name,)).fetchall()
    expected_fills = [(s, b["order_id"], b["side"], decimal.Decimal(format_fixed(b["last_qty"])),
                       decimal.Decimal(format_fixed(b["last_price"])), decimal.Decimal(format_fixed(b["commission"])))
                      for s, _, k, b in events if k in ("OrderFilled", "OrderPartiallyFilled")]
    assert fills == expected_fills and len(fills) > 5
    held = sum(b["repeats"] for _, _, k, b in events if k == "DenialsRepeated")
    assert dict(denials) == {"ORDER_THROTTLE": held + sum(1 for e in events if e[2] == "OrderDenied")}
    quote_bodies = [b for _, _, k, b in events if k == "QuoteTick"]
    assert quotes == (len(quote_bodies), sum(decimal.Decimal(format_fixed(b["bid"])) for b in quote_bodies),
                      min(decimal.Decimal(format_fixed(b["ask"])) for b in quote_bodies))
    assert runs[0][:2] == ("RunStarted", "feed") and runs[-1][0] == "RunStopped"
    assert all(isinstance(s, tuple) for s in states)
    # the decoder against the codec, every event: the same fields and values (floats to the last bit)
    for (_, _, _, body), (decoded,) in zip(events, scored, strict=True):
        assert decoded == json.loads(json.dumps(body)), body["kind"]


@pytest.mark.postgres
def test_the_sql_decoder_reads_every_msgpack_form_foxhunt_writes(pg_dsn):
    """journal_payload() against the codec on values that take every branch: floats (negative, subnormal,
    huge; float32 is never written), integers of every width and sign, long strings, bytes, nested maps and
    lists, None and booleans. A float comes back as the same double (jsonb keeps no sign of a zero)."""
    from foxhunt.messages.scores import ModelScored
    from foxhunt.messages.system import RunStarted

    floats = [0.0, -0.0, 0.1, -2.5, 5e-324, 1.7976931348623157e308, -1e-300, 123456.789]
    messages = [
        ModelScored(ts_event=2**62, ts_init=-(2**40), model_id="m" * 300, parameter_sha256="é∂" * 40, symbol="EURUSD",
                    as_of=2**31, input_digest="", horizons=[1, 200, 70000, 2**33], quantiles=floats, outputs=floats,
                    latency_ns=-5),
        RunStarted(ts_event=0, ts_init=127, run_id=128, seed=-33, config_digest="x", config=bytes(range(256)) * 3,
                   fingerprint={"a": "b" * 70000, "c": ""}, clock="feed"),
    ]
    with psycopg.connect(pg_dsn) as conn:
        for message in messages:
            (decoded,) = conn.execute("SELECT journal_payload(%s)", (codec.encode(message),)).fetchone()
            expected = json.loads(msgspec.json.encode(message))
            for field in ("quantiles", "outputs"):  # jsonb numbers are numeric: a float comes back as its value
                if field in expected:
                    assert [float(v) for v in decoded.pop(field)] == expected.pop(field)
            assert decoded == expected, type(message).__name__
