"""OpenTelemetry: a paper run produces one trace per order with its lifecycle, and the metrics."""

from __future__ import annotations

import time

import anyio
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from foxhunt import config
from foxhunt.adapters.journal.memory import MemoryJournalStore
from foxhunt.bootstrap import paper_operations
from foxhunt.messages.orders import DenialsRepeated, DuplicateFillIgnored, OrderFilled, OrderReportRefused, Side
from foxhunt.messages.system import RunStopped, VenueMessageRejected
from foxhunt.observability import telemetry
from foxhunt.observability.telemetry import Telemetry
from foxhunt.runtime.clock import EventClock
from foxhunt.runtime.daemon import RunRequest, run_daemon
from tests.integration.test_runtime import synthetic

# one order a minute of the feed's time gets through: the rest are denied by the throttle, so both verdicts are
# traced (ema_cross asks again a second after a denial, or once its position changed: core/strategy.py)
CFG = config.load(None, env={"FOXHUNT_RISK__MAX_ORDERS_PER_WINDOW": "1", "FOXHUNT_RISK__ORDER_WINDOW_MS": "60000"})


def metric_points(reader: InMemoryMetricReader) -> dict[str, list]:
    data = reader.get_metrics_data()
    return {m.name: list(m.data.data_points) for rm in data.resource_metrics for sm in rm.scope_metrics
            for m in sm.metrics}


async def test_a_paper_run_traces_each_order_and_records_the_metrics():
    spans, reader = InMemorySpanExporter(), InMemoryMetricReader()
    tel = Telemetry(Resource.create({"service.name": "foxhunt-test"}), spans, reader, traces_per_second=float("inf"))
    clock = EventClock()  # the feed's time: 3,000 quotes span minutes, over which ema_cross asks again
    summary = await run_daemon(MemoryJournalStore(), CFG, RunRequest("j", synthetic(3000, clock), clock),
                              {"test": "1"}, paper_operations(telemetry=tel))
    points = metric_points(reader)  # read before shutdown (run_daemon shuts the providers down)
    orders = [s for s in spans.get_finished_spans() if s.name == "order"]
    assert len(orders) == summary["orders"] - summary["denials_held_back"] > 2  # a denial held back is no trace
    assert summary["denials_held_back"] > 0
    outcomes = {s.attributes["outcome"] for s in orders}
    assert "denied" in outcomes and outcomes & {"OrderFilled", "OrderCanceled"}
    filled = next(s for s in orders if s.attributes["outcome"] == "OrderFilled")
    names = [e.name for e in filled.events]
    assert names[:5] == ["tick", "decision", "risk_check", "journal_commit", "venue_send_SubmitOrder"]
    assert "acknowledged" in names and "fill" in names
    denials = {p.attributes["reason"]: p.value for p in points["foxhunt.risk.denials"]}
    assert denials == {"ORDER_THROTTLE": summary["denied"]}
    sent = sum(1 for s in orders if s.attributes["outcome"] != "denied")
    assert points["foxhunt.tick_to_order.duration"][0].count == sent
    assert points["foxhunt.venue.round_trip.duration"][0].count == sent


async def test_tracing_is_bounded_per_second_while_the_counters_count_everything():
    spans, reader = InMemorySpanExporter(), InMemoryMetricReader()
    tel = Telemetry(Resource.create({"service.name": "foxhunt-test"}), spans, reader, traces_per_second=5)
    clock = EventClock()  # the feed's time: 3,000 quotes span minutes, over which ema_cross asks again
    started = time.monotonic()
    summary = await run_daemon(MemoryJournalStore(), CFG, RunRequest("j", synthetic(3000, clock), clock),
                              {"test": "1"}, paper_operations(telemetry=tel))
    seconds = time.monotonic() - started
    points = metric_points(reader)
    traced = [s for s in spans.get_finished_spans() if s.name == "order"]
    assert 0 < len(traced) <= 5 * (int(seconds) + 1) < summary["orders"]
    assert sum(p.value for p in points["foxhunt.risk.denials"]) == summary["denied"]


def test_venue_reports_the_kernel_refused_are_counted_by_kind():
    reader = InMemoryMetricReader()
    tel = Telemetry(Resource.create({"service.name": "foxhunt-test"}), InMemorySpanExporter(), reader)
    fill = OrderFilled(ts_event=1, ts_init=1, order_id="o", symbol="EURUSD", side=Side.BUY, trade_id="t",
                       last_qty=1, last_price=1, leaves_qty=0)
    for kind in ("OrderAccepted", "OrderAccepted", "OrderFilled"):
        tel.on_step(fill, [OrderReportRefused(ts_event=1, ts_init=1, order_id="o", symbol="EURUSD", report=kind,
                                              reason="not allowed")])
    points = metric_points(reader)
    assert {p.attributes["report"]: p.value for p in points["foxhunt.venue.reports_refused"]} == {
        "OrderAccepted": 2, "OrderFilled": 1}
    tel.shutdown()


def test_duplicate_fills_and_rejected_venue_messages_are_counted():
    reader = InMemoryMetricReader()
    tel = Telemetry(Resource.create({"service.name": "foxhunt-test"}), InMemorySpanExporter(), reader)
    fill = OrderFilled(ts_event=1, ts_init=1, order_id="o", symbol="EURUSD", side=Side.BUY, trade_id="E1",
                       last_qty=1, last_price=1, leaves_qty=0)
    tel.on_step(fill, [DuplicateFillIgnored(ts_event=1, ts_init=1, order_id="o", symbol="EURUSD", trade_id="E1",
                                            reason="execution E1 is booked already")])
    tel.on_step(VenueMessageRejected(ts_event=1, ts_init=1, venue="FIX", msg_type="8", reason="r", raw="35=8|"), [])
    points = metric_points(reader)
    assert [p.value for p in points["foxhunt.venue.fills_duplicate"]] == [1]
    assert {p.attributes["msg_type"]: p.value for p in points["foxhunt.venue.messages_rejected"]} == {"8": 1}
    tel.shutdown()


def test_denials_a_window_held_back_are_counted_when_it_closes():
    reader = InMemoryMetricReader()
    tel = Telemetry(Resource.create({"service.name": "foxhunt-test"}), InMemorySpanExporter(), reader)
    stopped = RunStopped(ts_event=1, ts_init=1, reason="end")
    tel.on_step(stopped, [DenialsRepeated(ts_event=1, ts_init=1, strategy_id="s", symbol="EURUSD", request="SubmitOrder",
                                          side="BUY", reason="TRADING_HALTED", repeats=41, first_order_id="s-1-1",
                                          last_order_id="s-42-1", since_ns=0)])
    points = metric_points(reader)
    assert {p.attributes["reason"]: p.value for p in points["foxhunt.denials.held_back"]} == {"TRADING_HALTED": 41}
    assert {p.attributes["reason"]: p.value for p in points["foxhunt.risk.denials"]} == {"TRADING_HALTED": 41}
    tel.shutdown()


def test_no_exporter_builds_nothing():
    assert telemetry.build("none", 10.0, "foxhunt", "j") is None


def test_otlp_export_reaches_the_endpoint_named_by_the_environment(monkeypatch):
    """A real OTLP/HTTP exchange with a local receiver: traces and metrics arrive as protobuf POSTs."""
    import http.server
    import threading

    received: list[tuple[str, str, int]] = []

    class Receiver(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - the name http.server calls
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((self.path, self.headers["Content-Type"], len(body)))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{server.server_port}")
    try:
        tel = telemetry.build("otlp", 60.0, "foxhunt-test", "j", traces_per_second=float("inf"))
        clock = EventClock()  # the feed's time: 3,000 quotes span minutes, over which ema_cross asks again
        anyio.run(run_daemon, MemoryJournalStore(), CFG, RunRequest("j", synthetic(300, clock), clock), {"t": "1"},
                  paper_operations(telemetry=tel))  # shuts telemetry down at the end: everything is flushed
    finally:
        server.shutdown()
        server.server_close()
    paths = {path for path, _, _ in received}
    assert paths == {"/v1/traces", "/v1/metrics"}, received
    assert all(kind == "application/x-protobuf" and size > 0 for _, kind, size in received)
