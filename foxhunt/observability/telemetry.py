"""OpenTelemetry traces and metrics of the trading loop, at almost no cost per market data tick.

What is measured, and where:
- a trace per order: one span from the tick that led to it to its last report, with events for the
  tick, the decision, the risk verdict, the journal commit it waited for (durability `before_send`),
  the venue send, the acknowledgement and each fill. On the order's path only timestamps are noted; the
  span is built once the order is done (filled, canceled, rejected, expired or denied), so tracing never
  delays an order;
- metrics: journal events committed by kind and commit latency (from the writer, per batch), risk
  denials by reason, tick-to-order latency (tick received to order handed to the venue) and venue round
  trip (order sent to its acknowledgement).

Sampling: the Python SDK takes on the order of 100 us of CPU per traced order (building the span with
its events, two histogram records), which a strategy that orders every few dozen ticks would feel. So
at most `traces_per_second` orders are traced and timed each second (all of them at a desk's usual
order rates; a bounded sample, and a bounded cost, in a burst); the latency histograms are estimated
from that sample, and the counters (events, denials) always count everything. Measured in
bench/telemetry_overhead.py, recorded in docs/benchmarks.md.

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

from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

from foxhunt.messages.base import Input
from foxhunt.messages.orders import (
    CancelOrder,
    DenialsRepeated,
    DuplicateFillIgnored,
    OrderAccepted,
    OrderCanceled,
    OrderDenied,
    OrderExpired,
    OrderFilled,
    OrderPartiallyFilled,
    OrderRejected,
    OrderReportRefused,
    OrderSubmitted,
    ReplaceOrder,
    SubmitOrder,
)
from foxhunt.messages.system import VenueMessageRejected

_ENDS = (OrderFilled, OrderCanceled, OrderRejected, OrderExpired, OrderDenied)
MAX_OPEN_SPANS = 10_000  # an order that never hears back must not keep its span (and memory) forever


def build(
    exporter: str, interval_s: float, service: str, journal: str, traces_per_second: float = 20.0
) -> Telemetry | None:
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
    return Telemetry(resource, spans, reader, traces_per_second)


class _Trace:
    """What is known of one order's life so far: plain values, cheap to note on the hot path. The span is
    built from it once the order's life is over, so that building it never delays the order itself."""

    __slots__ = ("attributes", "events", "sent_ns", "start_ns")

    def __init__(self, start_ns: int, attributes: dict[str, Any]) -> None:
        self.start_ns = start_ns
        self.attributes = attributes
        self.events: list[tuple[str, int, dict[str, Any]]] = []
        self.sent_ns = 0


class Telemetry:
    def __init__(
        self, resource: Resource, spans: SpanExporter, reader: MetricReader, traces_per_second: float = 20.0
    ) -> None:
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
        self.held_back = meter.create_counter(
            "foxhunt.denials.held_back", unit="{order}",
            description="denials counted and not journaled, repeats of one inside its window (core/risk/repeats.py),"
                        " by reason; counted when the window closes",
        )
        self.refused = meter.create_counter(
            "foxhunt.venue.reports_refused", unit="{report}",
            description="venue reports the order lifecycle does not allow, by kind (a refused fill halts trading)",
        )
        self.duplicates = meter.create_counter(
            "foxhunt.venue.fills_duplicate", unit="{fill}",
            description="venue fills the kernel had booked already (repeats, resends after a restart): not booked",
        )
        self.rejected = meter.create_counter(
            "foxhunt.venue.messages_rejected", unit="{message}",
            description="venue messages that could not be used and may have carried money, by message type",
        )
        self.tick_to_order = meter.create_histogram(
            "foxhunt.tick_to_order.duration", unit="s", description="input received to order handed to the venue"
        )
        self.round_trip = meter.create_histogram(
            "foxhunt.venue.round_trip.duration", unit="s", description="order sent to the venue's acknowledgement"
        )
        self.traces_per_second = traces_per_second  # orders traced and timed per second, at most
        self._window_end = 0
        self._in_window = 0
        self.open: dict[str, _Trace] = {}

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
                    self._note(event.order_id, "risk_check", now, {"verdict": "approved"})
                case OrderDenied():
                    self.denials.add(1, {"reason": event.reason})
                    self._note(event.order_id, "risk_check", now,
                               {"verdict": "denied", "reason": event.reason, "detail": event.detail})
                    self._end(event.order_id, now, "denied")
                case DenialsRepeated():  # denials held back in a window, counted when it closes
                    self.denials.add(event.repeats, {"reason": event.reason})
                    self.held_back.add(event.repeats, {"reason": event.reason})
                case OrderReportRefused():
                    self.refused.add(1, {"report": event.report})
                case DuplicateFillIgnored():
                    self.duplicates.add(1)
        match msg:
            case VenueMessageRejected():
                self.rejected.add(1, {"msg_type": msg.msg_type})
            case OrderAccepted():
                self._accepted(msg.order_id, now)
            case OrderPartiallyFilled() | OrderFilled():
                self._note(msg.order_id, "fill", now, {"last_qty": msg.last_qty, "last_price": msg.last_price})
        if isinstance(msg, _ENDS):
            self._end(msg.order_id, now, type(msg).__name__)

    def on_commit_wait(self, order_ids: Iterable[str], started_ns: int, ended_ns: int) -> None:
        """The journal commit that orders waited for before they could be sent (`before_send`)."""
        for order_id in order_ids:
            self._note(order_id, "journal_commit", ended_ns, {"waited_us": (ended_ns - started_ns) // 1000})

    def on_send(self, cmd: SubmitOrder | CancelOrder | ReplaceOrder, received_ns: int, now: int) -> None:
        """A command handed to the venue at `now`, for an input received at `received_ns`."""
        trace_ = self.open.get(cmd.order_id)
        if trace_ is None:
            return
        if isinstance(cmd, SubmitOrder):
            self.tick_to_order.record((now - received_ns) / 1e9)
            trace_.sent_ns = now
        trace_.events.append((f"venue_send_{type(cmd).__name__}", now, {}))

    def shutdown(self) -> None:
        now = time.time_ns()
        for order_id in list(self.open):
            self._end(order_id, now, "daemon stopped")
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()

    # --- spans ---------------------------------------------------------------------------------------

    def _start(self, cmd: SubmitOrder, cause: Input, now: int) -> None:
        if now >= self._window_end:
            self._window_end, self._in_window = now + 1_000_000_000, 0
        if self._in_window >= self.traces_per_second:
            return
        self._in_window += 1
        if len(self.open) >= MAX_OPEN_SPANS:
            self._end(next(iter(self.open)), now, "span limit reached")
        tick = min(cause.ts_init, now)
        trace_ = self.open[cmd.order_id] = _Trace(tick, {
            "order_id": cmd.order_id, "strategy": cmd.strategy_id, "symbol": cmd.symbol, "side": cmd.side.value,
            "type": cmd.order_type.value, "quantity": cmd.quantity,
        })
        trace_.events += [("tick", tick, {"kind": type(cause).__name__}), ("decision", now, {})]

    def _note(self, order_id: str, name: str, now: int, attributes: dict[str, Any]) -> None:
        trace_ = self.open.get(order_id)
        if trace_ is not None:
            trace_.events.append((name, now, attributes))

    def _accepted(self, order_id: str, now: int) -> None:
        trace_ = self.open.get(order_id)
        if trace_ is None:
            return
        if trace_.sent_ns:
            self.round_trip.record((now - trace_.sent_ns) / 1e9)
            trace_.sent_ns = 0  # a replace is acknowledged too: the round trip is the order's first
        trace_.events.append(("acknowledged", now, {}))

    def _end(self, order_id: str, now: int, outcome: str) -> None:
        trace_ = self.open.pop(order_id, None)
        if trace_ is None:
            return
        span = self.tracer.start_span("order", start_time=trace_.start_ns, attributes=trace_.attributes)
        for name, ts, attributes in trace_.events:
            span.add_event(name, attributes, timestamp=ts)
        span.set_attribute("outcome", outcome)
        span.end(end_time=now)

    def _observe_committed(self, _options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(count, {"kind": kind}) for kind, count in sorted(self.committed.items())]
