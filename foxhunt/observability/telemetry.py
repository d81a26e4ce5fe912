"""OpenTelemetry traces and metrics of the trading loop, at almost no cost per market data tick.

What is measured, and where:
- a trace per order: one span from the tick that led to it to its last report, with events for the
  tick, the decision and the risk verdict, the venue send, the acknowledgement and each fill, and a child
  span for the journal commit the order waited for (durability `before_send`);
- metrics: journal events committed by kind and commit latency (from the writer, per batch), risk
  denials by reason, tick-to-order latency (tick received to order handed to the venue) and venue round
  trip (order sent to its acknowledgement).

The trading loop calls `on_step` only for steps that derived something or are not market data, and
`on_send` per command sent, so a quote that changes nothing costs one attribute test. Event counts are
summed per committed batch on the writer's side, not per event.

Exporters: none (the default: no SDK objects are built, no cost at all), console (stderr), or OTLP over
HTTP to `OTEL_EXPORTER_OTLP_ENDPOINT`, which also reads the other standard OTEL_* variables.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

from foxhunt.messages.base import Input
from foxhunt.messages.orders import (
    CancelOrder,
    OrderAccepted,
    OrderCanceled,
    OrderDenied,
    OrderExpired,
    OrderFilled,
    OrderPartiallyFilled,
    OrderRejected,
    OrderSubmitted,
    ReplaceOrder,
    SubmitOrder,
)

_ENDS = (OrderFilled, OrderCanceled, OrderRejected, OrderExpired, OrderDenied)
MAX_OPEN_SPANS = 10_000  # an order that never hears back must not keep its span (and memory) forever


def build(exporter: str, interval_s: float, service: str, journal: str) -> Telemetry | None:
    """The configured telemetry, or None when it is off."""
    if exporter == "none":
        return None
    resource = Resource.create({"service.name": service, "foxhunt.journal": journal})
    if exporter == "otlp":
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        spans: SpanExporter = OTLPSpanExporter()
        reader: MetricReader = PeriodicExportingMetricReader(OTLPMetricExporter(), int(interval_s * 1000))
    else:
        spans = ConsoleSpanExporter(out=sys.stderr)
        reader = PeriodicExportingMetricReader(ConsoleMetricExporter(out=sys.stderr), int(interval_s * 1000))
    return Telemetry(resource, spans, reader)


class Telemetry:
    def __init__(self, resource: Resource, spans: SpanExporter, reader: MetricReader) -> None:
        self.tracer_provider = TracerProvider(resource=resource)
        self.tracer_provider.add_span_processor(BatchSpanProcessor(spans))
        self.meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
        # providers are kept here, not installed globally: importing foxhunt changes nothing, and tests can
        # build several side by side
        self.tracer = self.tracer_provider.get_tracer("foxhunt")
        meter = self.meter_provider.get_meter("foxhunt")
        self.committed: Counter[str] = Counter()
        meter.create_observable_counter(
            "foxhunt.journal.events", callbacks=[self._observe_committed], unit="{event}",
            description="events committed to the journal, by kind",
        )
        self.commit_latency = meter.create_histogram(
            "foxhunt.journal.commit.duration", unit="s", description="time to make one batch durable"
        )
        self.denials = meter.create_counter("foxhunt.risk.denials", unit="{order}", description="orders denied, by reason")
        self.tick_to_order = meter.create_histogram(
            "foxhunt.tick_to_order.duration", unit="s", description="input received to order handed to the venue"
        )
        self.round_trip = meter.create_histogram(
            "foxhunt.venue.round_trip.duration", unit="s", description="order sent to the venue's acknowledgement"
        )
        self.open: dict[str, tuple[Any, int]] = {}  # order id -> (span, ns it was sent, 0 before)

    # --- hooks ---------------------------------------------------------------------------------------

    def on_commit(self, kinds: list[str], seconds: float) -> None:
        self.committed.update(kinds)
        self.commit_latency.record(seconds)

    def on_step(self, msg: Input, derived: Sequence[object]) -> None:
        """An input that derived something, or any input that is not market data."""
        now = time.time_ns()
        for event in derived:
            match event:
                case SubmitOrder():
                    self._start(event, msg, now)
                case OrderSubmitted():
                    self._event(event.order_id, "risk_check", now, {"verdict": "approved"})
                case OrderDenied():
                    self.denials.add(1, {"reason": event.reason})
                    self._event(event.order_id, "risk_check", now, {"verdict": "denied", "reason": event.reason,
                                                                    "detail": event.detail})
                    self._end(event.order_id, now, "denied")
        match msg:
            case OrderAccepted():
                self._accepted(msg.order_id, now)
            case OrderPartiallyFilled() | OrderFilled():
                self._event(msg.order_id, "fill", now, {"last_qty": msg.last_qty, "last_price": msg.last_price})
        if isinstance(msg, _ENDS):
            self._end(msg.order_id, now, type(msg).__name__)

    def on_commit_wait(self, order_ids: Iterable[str], started_ns: int, ended_ns: int) -> None:
        """The journal commit that orders waited for before they could be sent (`before_send`)."""
        for order_id in order_ids:
            entry = self.open.get(order_id)
            if entry is not None:
                with trace.use_span(entry[0], end_on_exit=False):
                    self.tracer.start_span("journal_commit", start_time=started_ns).end(end_time=ended_ns)

    def on_send(self, cmd: SubmitOrder | CancelOrder | ReplaceOrder, received_ns: int) -> None:
        now = time.time_ns()
        if isinstance(cmd, SubmitOrder):
            self.tick_to_order.record((now - received_ns) / 1e9)
            entry = self.open.get(cmd.order_id)
            if entry is not None:
                self.open[cmd.order_id] = (entry[0], now)
        self._event(cmd.order_id, f"venue_send_{type(cmd).__name__}", now, {})

    def shutdown(self) -> None:
        now = time.time_ns()
        for order_id in list(self.open):
            self._end(order_id, now, "daemon stopped")
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()

    # --- spans ---------------------------------------------------------------------------------------

    def _start(self, cmd: SubmitOrder, cause: Input, now: int) -> None:
        if len(self.open) >= MAX_OPEN_SPANS:
            self._end(next(iter(self.open)), now, "span limit reached")
        span = self.tracer.start_span(
            "order", start_time=min(cause.ts_init, now),
            attributes={"order_id": cmd.order_id, "strategy": cmd.strategy_id, "symbol": cmd.symbol,
                        "side": cmd.side.value, "type": cmd.order_type.value, "quantity": cmd.quantity},
        )
        span.add_event("tick", {"kind": type(cause).__name__}, timestamp=min(cause.ts_init, now))
        span.add_event("decision", {}, timestamp=now)
        self.open[cmd.order_id] = (span, 0)

    def _event(self, order_id: str, name: str, now: int, attributes: dict[str, Any]) -> None:
        entry = self.open.get(order_id)
        if entry is not None:
            entry[0].add_event(name, attributes, timestamp=now)

    def _accepted(self, order_id: str, now: int) -> None:
        entry = self.open.get(order_id)
        if entry is None:
            return
        if entry[1]:
            self.round_trip.record((now - entry[1]) / 1e9)
        entry[0].add_event("acknowledged", {}, timestamp=now)

    def _end(self, order_id: str, now: int, outcome: str) -> None:
        entry = self.open.pop(order_id, None)
        if entry is not None:
            entry[0].set_attribute("outcome", outcome)
            entry[0].end(end_time=now)

    def _observe_committed(self, _options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(count, {"kind": kind}) for kind, count in sorted(self.committed.items())]

