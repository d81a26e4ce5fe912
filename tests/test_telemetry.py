"""OpenTelemetry: a paper run produces one trace per order with its lifecycle, and the metrics."""

from __future__ import annotations

from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from foxhunt import config
from foxhunt.adapters.journal_memory import MemoryJournalStore
from foxhunt.observability import telemetry
from foxhunt.observability.telemetry import Telemetry
from foxhunt.runtime.clock import WallClock
from foxhunt.runtime.live import Operations, RunRequest, run_paper
from tests.test_runtime import synthetic

# one order a minute gets through: the rest are denied by the throttle, so both verdicts are traced
CFG = config.load(None, env={"FOXHUNT_RISK__MAX_ORDERS_PER_WINDOW": "1", "FOXHUNT_RISK__ORDER_WINDOW_MS": "60000"})


def metric_points(reader: InMemoryMetricReader) -> dict[str, list]:
    data = reader.get_metrics_data()
    return {m.name: list(m.data.data_points) for rm in data.resource_metrics for sm in rm.scope_metrics
            for m in sm.metrics}


async def test_a_paper_run_traces_each_order_and_records_the_metrics():
    spans, reader = InMemorySpanExporter(), InMemoryMetricReader()
    tel = Telemetry(Resource.create({"service.name": "foxhunt-test"}), spans, reader)
    clock = WallClock()
    summary = await run_paper(MemoryJournalStore(), CFG, RunRequest("j", synthetic(3000, clock), clock),
                              {"test": "1"}, Operations(telemetry=tel))
    points = metric_points(reader)  # read before shutdown (run_paper shuts the providers down)
    orders = [s for s in spans.get_finished_spans() if s.name == "order"]
    assert len(orders) == summary["orders"] > 2
    outcomes = {s.attributes["outcome"] for s in orders}
    assert "denied" in outcomes and outcomes & {"OrderFilled", "OrderCanceled"}
    filled = next(s for s in orders if s.attributes["outcome"] == "OrderFilled")
    names = [e.name for e in filled.events]
    assert names[:4] == ["tick", "decision", "risk_check", "venue_send_SubmitOrder"]
    assert "acknowledged" in names and "fill" in names
    assert any(s.name == "journal_commit" and s.parent.span_id == filled.context.span_id
               for s in spans.get_finished_spans())
    denials = {p.attributes["reason"]: p.value for p in points["foxhunt.risk.denials"]}
    assert denials == {"ORDER_THROTTLE": summary["denied"]}
    sent = sum(1 for s in orders if s.attributes["outcome"] != "denied")
    assert points["foxhunt.tick_to_order.duration"][0].count == sent
    assert points["foxhunt.venue.round_trip.duration"][0].count == sent


def test_no_exporter_builds_nothing():
    assert telemetry.build("none", 10.0, "foxhunt", "j") is None
