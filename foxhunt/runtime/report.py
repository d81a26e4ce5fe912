"""`foxhunt report JOURNAL` and `foxhunt replay NAME --report FILE`: what a run did, as one HTML file.

A `Tracker` (runtime/tracking.py, compiled) watches a run's events in journal order beside the kernel that
handled them and keeps what the report shows, a `Run`. A recorded journal is read by `collect`: every input
through a fresh kernel (its state gives the equity), every derived event as recorded. A backtest hands its
tracker the events as its trading loop journals them (`TrackingJournal`, runtime/replay.py).

`render` writes one self-contained HTML file: plotly.js inlined (it opens offline, no CDN), interactive
figures, and the metrics of runtime/performance.py, whose conventions it states. Two runs lay side by side
(`--compare`, or a what-if replay beside the run it replays).
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import html
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from foxhunt.config import TradingConfig
from foxhunt.messages.base import Message
from foxhunt.ports import JournalStore, JournalWriter
from foxhunt.runtime import performance
from foxhunt.runtime.recovery import build_kernel
from foxhunt.runtime.tracking import Run, Tracker

MAX_MARKERS = 20_000  # fills drawn on the price, scores drawn; more are thinned evenly (all count in the figures)


class TrackingJournal(JournalWriter):
    """A journal writer that shows its tracker every event before handing it on: how a backtest's trading
    loop, which journals what it does, is reported on."""

    def __init__(self, inner: JournalWriter, tracker: Tracker) -> None:
        self.inner, self.tracker, self.name = inner, tracker, inner.name

    @property
    def last_seq(self) -> int:
        return self.inner.last_seq

    @property
    def backlogged(self) -> bool:  # type: ignore[override]
        return self.inner.backlogged

    def append(self, message: Message, causation: int | None = None) -> int:
        self.tracker.append(message, causation)
        return self.inner.append(message, causation)

    async def relieve(self) -> None:
        await self.inner.relieve()

    async def flush(self) -> None:
        await self.inner.flush()


async def collect(store: JournalStore, name: str, trading: TradingConfig, start: int | None = None,
                  end: int | None = None, progress: Callable[[int], None] | None = None) -> Run:
    """A recorded journal's Run: its inputs through a fresh kernel of its configuration, its derived events
    as recorded."""
    from foxhunt.runtime.summary import summarize

    kernel = build_kernel(trading)
    tracker = Tracker(kernel, name, start, end)
    events = 0
    async with aclosing(store.read(name)) as pages:
        async for page in pages:
            for record in page:
                if record.causation is None:
                    tracker.append(record.message)
                    kernel.handle(record.seq, record.message)
                else:
                    tracker.append(record.message, record.causation)
            events += len(page)
            if progress is not None:
                progress(events)
    run = tracker.finish()
    run.summary = summarize(kernel, events=events, seconds=0.0)
    return run


async def write_report(store: JournalStore, names: Sequence[str], out: Path, start: int | None = None,
                       end: int | None = None, capital: float | None = None,
                       progress: Callable[[int], None] | None = None, extra: Sequence[tuple[Run, TradingConfig]] = ()
                       ) -> list[Figures]:
    """The report of the journals `names` (one, or two side by side), and of runs already collected
    (`extra`: a what-if backtest beside the journal it replays), into `out`."""
    from foxhunt.runtime.recovery import trading_config

    runs: list[tuple[Run, TradingConfig]] = []
    read = 0
    for name in names:
        info = await store.info(name)
        trading = await trading_config(store, name, [], None)
        done = read

        def seen(events: int, done: int = done) -> None:
            if progress is not None:
                progress(done + events)
        runs.append((await collect(store, name, trading, start, end, seen), trading))
        read += info.last_seq
    runs.extend(extra)
    figures = [measure(run, capital, trading) for run, trading in runs]
    title = " vs ".join(run.label for run, _ in runs)
    render([run for run, _ in runs], figures, out, f"foxhunt report: {title}")
    return figures


# --- figures ------------------------------------------------------------------------------------------


@dataclass
class Figures:
    """A run's figures for the report: its returns and metrics, by the conventions of performance.py."""

    currency: str
    capital: float
    capital_source: str
    period_ns: int
    metrics: dict[str, float]


def measure(run: Run, capital: float | None, trading: TradingConfig) -> Figures:
    currencies = sorted(run.equity) or ["USD"]
    currency = max(currencies, key=lambda c: (run.notional.get(c, 0.0), c == currencies[0]))
    if capital is not None:
        source = "--capital"
    elif trading.risk.kelly_capital is not None:
        capital, source = float(trading.risk.kelly_capital), "[risk] kelly_capital"
    elif trading.risk.max_gross_exposure is not None:
        capital, source = float(trading.risk.max_gross_exposure), "[risk] max_gross_exposure"
    else:
        capital, source = run.peak_gross, "the run's largest gross position at market"
    if not capital or capital <= 0:
        capital, source = 1.0, "1 (the run never held a position)"
    span = max(run.end - run.start, 1)
    period = performance.period_for(span)
    ts = np.asarray(run.ts, dtype=np.int64)
    equity = np.asarray(run.equity.get(currency, [0.0] * len(ts)), dtype=np.float64)
    r = performance.returns(performance.sample(ts, equity, run.start, period), capital)
    m = performance.metrics(r, performance.YEAR_NS / period)
    duration = performance.drawdown_duration(r) * period
    pnls = np.asarray([p for _, _, c, p in run.trips if c == currency], dtype=np.float64)
    traded = run.notional.get(currency, 0.0)
    m |= performance.trade_stats(pnls) | {
        "max_drawdown_duration_s": duration / 1e9,
        "turnover": traded / capital,
        "exposure": run.exposed_ns / span if run.end > run.start else 0.0,
        "periods": float(len(r)),
    }
    return Figures(currency, capital, source, period, m)


_METRICS = [
    ("total_return", "Total return", "pct"), ("annual_return", "Annualised return", "pct"),
    ("annual_volatility", "Annualised volatility", "pct"), ("sharpe", "Sharpe", "num"), ("sortino", "Sortino", "num"),
    ("calmar", "Calmar", "num"), ("max_drawdown", "Maximum drawdown", "pct"),
    ("max_drawdown_duration_s", "Maximum drawdown duration", "duration"), ("hit_rate", "Hit rate", "pct"),
    ("profit_factor", "Profit factor", "num"), ("round_trips", "Round trips", "int"), ("turnover", "Turnover", "x"),
    ("exposure", "Exposure (time with a position)", "pct"), ("periods", "Returns measured", "int"),
]
_SUMMARY = [("pnl", "PnL"), ("realized_pnl", "Realised PnL"), ("commissions", "Commissions"), ("fills", "Fills"),
            ("orders", "Orders"), ("denied", "Denied"), ("max_drawdown", "Max drawdown (money)"),
            ("trading_state", "Trading state at the end"), ("events", "Events")]


def _fmt(value: float, how: str) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    if how == "pct":
        return f"{value * 100:.4f}%"
    if how == "int":
        return f"{value:.0f}"
    if how == "x":
        return f"{value:.4f}x"
    if how == "duration":
        return str(dt.timedelta(seconds=round(value)))
    return f"{value:.4f}"


def _time(ns_values: Sequence[int]) -> list[str]:
    return [dt.datetime.fromtimestamp(v / 1e9, dt.UTC).isoformat(timespec="milliseconds") for v in ns_values]


def render(runs: Sequence[Run], figures: Sequence[Figures], path: Path, title: str) -> None:
    """The report of one run, or two side by side, into `path`."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    colours = ["#1f77b4", "#ff7f0e"]
    plots: list[tuple[str, str, object]] = []  # id, heading, figure

    def layout(fig, height=360, **kw):
        fig.update_layout(height=height, margin=dict(l=60, r=20, t=30, b=40), template="plotly_white",
                          legend=dict(orientation="h", y=1.08), **kw)
        return fig

    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.65, 0.35], vertical_spacing=0.05)
    for run, fg, colour in zip(runs, figures, colours, strict=False):
        times = _time(run.ts)
        equity = np.asarray(run.equity.get(fg.currency, [0.0] * len(run.ts)))
        peak = np.maximum.accumulate(np.concatenate([[0.0], equity]))[1:] if len(equity) else equity
        fig.add_trace(go.Scatter(x=times, y=equity, name=f"{run.label} equity ({fg.currency})",
                                 line=dict(color=colour)), row=1, col=1)
        fig.add_trace(go.Scatter(x=times, y=equity - peak, name=f"{run.label} drawdown", fill="tozeroy",
                                 line=dict(color=colour, width=1)), row=2, col=1)
    fig.update_yaxes(title_text="equity", row=1, col=1)
    fig.update_yaxes(title_text="drawdown", row=2, col=1)
    plots.append(("equity", "Equity and drawdown", layout(fig, 480)))

    fig = go.Figure()
    for run, colour in zip(runs, colours, strict=False):
        for symbol, qty in sorted(run.position.items()):
            if any(q for q in qty if not math.isnan(q)):
                fig.add_trace(go.Scatter(x=_time(run.ts), y=qty, name=f"{run.label} {symbol}", line=dict(
                    color=colour, shape="hv")))
    plots.append(("positions", "Positions over time", layout(fig, yaxis_title="quantity")))

    fig = go.Figure()
    base = runs[0]
    traded = sorted({f[1] for run in runs for f in run.fills}) or sorted(base.mid)[:1]
    for symbol in traded:
        if symbol in base.mid:
            fig.add_trace(go.Scatter(x=_time(base.ts), y=base.mid[symbol], name=f"{symbol} mid",
                                     line=dict(color="#999", width=1)))
        for run, colour in zip(runs, colours, strict=False):
            fills = [f for f in run.fills if f[1] == symbol]
            step = max(1, len(fills) // MAX_MARKERS)
            for side, marker in (("BUY", "triangle-up"), ("SELL", "triangle-down")):
                shown = [f for f in fills[::step] if f[2] == side]
                fig.add_trace(go.Scatter(
                    x=_time([f[0] for f in shown]), y=[f[4] for f in shown], mode="markers",
                    name=f"{run.label} {symbol} {side.lower()}s", marker=dict(
                        symbol=marker, size=8, color="#2ca02c" if side == "BUY" else "#d62728",
                        line=dict(color=colour, width=1)),
                    text=[f"{f[3]:g} @ {f[4]:g}, commission {f[5]:g}" for f in shown]))
    plots.append(("trades", "Trades on the price", layout(fig, 420, yaxis_title="price")))

    fig = make_subplots(rows=1, cols=2, subplot_titles=(
        "Returns per period (bp of capital)", "Round trips' PnL, in order"))
    for run, fg, colour in zip(runs, figures, colours, strict=False):
        ts = np.asarray(run.ts, dtype=np.int64)
        equity = np.asarray(run.equity.get(fg.currency, [0.0] * len(ts)))
        r = performance.returns(performance.sample(ts, equity, run.start, fg.period_ns), fg.capital) * 1e4
        fig.add_trace(go.Histogram(x=r, name=f"{run.label} returns", marker_color=colour, opacity=0.7), row=1, col=1)
        pnls = [p for _, _, c, p in run.trips if c == fg.currency]
        fig.add_trace(go.Bar(y=pnls, name=f"{run.label} round trips", marker_color=[
            "#2ca02c" if p > 0 else "#d62728" for p in pnls]), row=1, col=2)
    plots.append(("outcomes", "PnL distribution and per-trade outcomes", layout(fig, 380, barmode="overlay")))
    fig.update_layout(legend=dict(orientation="h", y=-0.15), margin=dict(t=40))

    fig = go.Figure()
    for run, colour in zip(runs, colours, strict=False):
        paid = np.cumsum([f[5] for f in run.fills])
        fig.add_trace(go.Scatter(x=_time([f[0] for f in run.fills]), y=paid, name=f"{run.label} commissions",
                                 line=dict(color=colour, shape="hv")))
    plots.append(("commissions", "Commissions paid (cumulative)", layout(fig, 300)))

    fig = go.Figure()
    for run, colour in zip(runs, colours, strict=False):
        fig.add_trace(go.Scatter(
            x=_time([d[0] for d in run.denials]), y=[f"denied: {d[2]}" for d in run.denials], mode="markers",
            name=f"{run.label} denials",
            marker=dict(color=colour, size=[6 + min(10, math.log2(d[3])) for d in run.denials]),
            text=[f"{d[1]}: {d[3]} denial(s)" for d in run.denials]))
        fig.add_trace(go.Scatter(
            x=_time([s[0] for s in run.states]), y=[s[1] for s in run.states], mode="markers",
            name=f"{run.label} state changes", marker=dict(color=colour, symbol="diamond", size=10),
            text=[s[2] for s in run.states]))
    span = [_time([min(r.start for r in runs)])[0], _time([max(r.end for r in runs)])[0]]
    plots.append(("timeline", "Risk denials, breakers and trading state", layout(fig, 340, xaxis_range=span)))

    if any(run.latencies_ms for run in runs):
        fig = go.Figure()
        for run, colour in zip(runs, colours, strict=False):
            fig.add_trace(go.Histogram(x=run.latencies_ms, name=f"{run.label} command to acknowledgement (ms)",
                                       marker_color=colour, opacity=0.7))
        plots.append(("latency", "Order latency, command to acknowledgement", layout(fig, 300, barmode="overlay")))

    if any(run.scores for run in runs):
        fig = go.Figure()
        for run, colour in zip(runs, colours, strict=False):
            xs, ys = _score_outcomes(run)
            step = max(1, len(xs) // MAX_MARKERS)
            # SVG, not WebGL: plotly's WebGL traces compile code at run time, which the page's policy forbids
            fig.add_trace(go.Scatter(x=xs[::step], y=ys[::step], mode="markers", name=f"{run.label} scores",
                                     marker=dict(color=colour, size=4, opacity=0.5)))
        plots.append(("scores", "Model scores against outcomes (forecast and realised log return)",
                      layout(fig, 380, xaxis_title="score (median quantile, first horizon)",
                             yaxis_title="realised log return over the horizon")))

    if any(run.targets for run in runs):
        fig = go.Figure()
        for run, colour in zip(runs, colours, strict=False):
            for symbol in sorted({t[1] for t in run.targets}):
                shown = [t for t in run.targets if t[1] == symbol]
                fig.add_trace(go.Scatter(
                    x=_time([t[0] for t in shown] + [run.end]), y=[t[2] for t in shown] + [shown[-1][2]],
                    name=f"{run.label} {symbol} ({run.decisions} decisions)", line=dict(color=colour, shape="hv")))
        plots.append(("targets", "The agent's targets (fraction of trade size, as each decision set it)",
                      layout(fig, 300, yaxis_range=[-1.05, 1.05])))

    head = [_header(runs, figures), _metrics_table(runs, figures)]
    tail = [_denial_table(runs), f"<h2>Conventions</h2><div class='note'>{_conventions(figures)}</div>"]
    _page(path, title, head, plots, tail)


def _page(path: Path, title: str, head: Sequence[str], plots: Sequence[tuple[str, str, object]],
          tail: Sequence[str]) -> None:
    """One self-contained HTML file: plotly.js inlined, then `head`, the figures, `tail`.

    What a journal holds is hostile text (a symbol from a data file, a currency from the command line): every
    such string is escaped where it meets the HTML, and the page carries a Content-Security-Policy that runs
    only the scripts written here, by their hashes (CSP Level 3, "hash-source"). A script planted in a
    journal's text, should an escape ever be missed, is not run: neither a <script> element nor an event
    handler attribute matches a hash. The gateway serves the page under the same policy (`policy_of`)."""
    import plotly.offline

    body = [f"<h1>{html.escape(title)}</h1>", *head]
    scripts = [plotly.offline.get_plotlyjs()]
    for div_id, heading, figure in plots:
        body.append(f'<h2>{html.escape(heading)}</h2><div id="fig-{div_id}" class="figure"></div>')
        scripts.append(_plot_script(f"fig-{div_id}", figure))
    body.extend(tail)
    policy = "; ".join([
        "default-src 'none'",
        "script-src " + " ".join(_hash_source(s) for s in scripts),
        "style-src 'unsafe-inline'",  # plotly styles its figures as it draws them
        "img-src data:", "font-src data:", "base-uri 'none'", "form-action 'none'",
    ])
    page = (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{policy}\">"
        f"<title>{html.escape(title)}</title><style>{_CSS}</style>"
        f"<script type='text/javascript'>{scripts[0]}</script></head>"
        f"<body data-figures='{len(plots)}'>{''.join(body)}"
        f"{''.join(f'<script>{s}</script>' for s in scripts[1:])}</body></html>"
    )
    path.write_text(page, encoding="utf-8")


_POLICY = re.compile(rb"<meta http-equiv='Content-Security-Policy' content=\"([^\"]*)\">")


def policy_of(page: bytes) -> str:
    """The Content-Security-Policy a report (`_page`) carries, read from its head: what a server sends with
    it. Only the head before the title is read, which holds nothing of a journal's."""
    head = page[:page.find(b"<title>")]
    found = _POLICY.search(head)
    if found is None:
        raise ValueError("not a foxhunt report: its head carries no Content-Security-Policy")
    return found.group(1).decode("ascii")


def _plot_script(div_id: str, figure: object) -> str:
    """The script that draws `figure` into the element `div_id`. The figure's JSON has '<', '>' and '&'
    written as JSON escapes, so no string in it can end the script element it sits in (HTML's "script data"
    state ends at '</script')."""
    import plotly.io as pio

    shown = json.loads(pio.to_json(figure, validate=False, remove_uids=True))
    shown["data"] = _plain_text(shown["data"])
    data = json.dumps(shown, separators=(",", ":"))
    safe = data.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    safe = safe.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return (f"(function(){{var f={safe};Plotly.newPlot({json.dumps(div_id)},f.data,f.layout,"
            "{displaylogo:false,responsive:true});})();")


def _plain_text(value: object) -> object:
    """Every string of a figure's traces with '&', '<' and '>' as entities: plotly draws names, hover texts
    and category labels as a subset of HTML (links and styles among it), and a journal's text shows as the
    text it is."""
    if isinstance(value, str):
        return html.escape(value, quote=False)
    if isinstance(value, list):
        return [_plain_text(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain_text(v) for k, v in value.items()}
    return value


def _hash_source(script: str) -> str:
    digest = hashlib.sha256(script.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode('ascii')}'"


def render_sweep(points: Sequence[dict[str, object]], metric: str, path: Path, title: str,
                 heat_map: bool = True) -> None:
    """A sweep's report (`foxhunt sweep --report`, and `foxhunt tune --report` with `heat_map` off: its values
    are drawn, not a grid): every point's parameters against `metric` as parallel coordinates, a heat map
    where the sweep varies two parameters, and the table. `points`: as `foxhunt sweep --json` prints them
    (index, overrides, metrics, error)."""
    import plotly.graph_objects as go

    params: dict[str, list[object]] = {}
    for point in points:
        for item in point["overrides"]:  # type: ignore[union-attr]
            key, _, value = str(item).partition("=")
            params.setdefault(key, [])
    varied = [k for k in params if len({_override(p, k) for p in points}) > 1] or list(params)
    done = [p for p in points if not p["error"] and isinstance(p["metrics"].get(metric), (int, float))]  # type: ignore[union-attr]
    plots: list[tuple[str, str, object]] = []
    values = [float(p["metrics"][metric]) for p in done]  # type: ignore[index]
    dimensions = []
    for key in varied:
        column = [_override(p, key) for p in done]
        numeric = all(isinstance(v, (int, float)) for v in column)
        labels = sorted({str(v) for v in column})
        dimensions.append(dict(label=key, values=column if numeric else [labels.index(str(v)) for v in column],
                               **({} if numeric else {"tickvals": list(range(len(labels))), "ticktext": labels})))
    dimensions.append(dict(label=metric, values=values))
    fig = go.Figure(go.Parcoords(line=dict(color=values, colorscale="Viridis", showscale=True),
                                 dimensions=dimensions))
    fig.update_layout(height=420, margin=dict(l=80, r=80, t=60, b=30), template="plotly_white")
    plots.append(("parallel", f"Parameters against {metric}", fig))
    if heat_map and len(varied) == 2:
        xs = sorted({_override(p, varied[0]) for p in done}, key=_order)
        ys = sorted({_override(p, varied[1]) for p in done}, key=_order)
        z = [[None] * len(xs) for _ in ys]
        for p, v in zip(done, values, strict=True):
            z[ys.index(_override(p, varied[1]))][xs.index(_override(p, varied[0]))] = v
        fig = go.Figure(go.Heatmap(x=[str(x) for x in xs], y=[str(y) for y in ys], z=z, colorscale="Viridis",
                                   colorbar=dict(title=metric)))
        fig.update_layout(height=420, xaxis_title=varied[0], yaxis_title=varied[1], template="plotly_white")
        plots.append(("heatmap", f"{metric} by {varied[0]} and {varied[1]}", fig))
    shown = [metric] + [m for m in ("pnl", "sharpe", "orders", "fills", "denied") if m != metric]
    head = "".join(f"<th>{html.escape(h)}</th>" for h in ["#", *varied, *shown, "error"])
    rows = []
    for p in points:
        cells = [str(p["index"]), *(str(_override(p, k)) for k in varied)]
        cells += [_fmt(v, "num") if isinstance(v := p["metrics"].get(m), float) else str(v if v is not None else "-")  # type: ignore[union-attr]
                  for m in shown]
        cells.append(str(p["error"] or ""))
        rows.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    table = f"<h2>Every point</h2><table class='sweep'><tr>{head}</tr>{''.join(rows)}</table>"
    _page(path, title, [f"<p>{len(points)} points, {len(points) - len(done)} without a {metric}.</p>"], plots,
          [table])


def _override(point: dict[str, object], key: str) -> object:
    for item in point["overrides"]:  # type: ignore[union-attr]
        k, _, value = str(item).partition("=")
        if k == key:
            try:
                return json.loads(value)
            except ValueError:
                return value
    return None


def _order(value: object) -> tuple[int, object]:
    return (0, value) if isinstance(value, (int, float)) else (1, str(value))


def _score_outcomes(run: Run) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for _, symbol, score, index, horizon in run.scores:
        mids = run.mids_by_symbol.get(symbol, [])
        if 0 <= index and index + horizon < len(mids) and mids[index] > 0:
            xs.append(score)
            ys.append(math.log(mids[index + horizon] / mids[index]))
    return xs, ys


def _header(runs: Sequence[Run], figures: Sequence[Figures]) -> str:
    rows = []
    for run in runs:
        span = f"{_time([run.start])[0]} to {_time([run.end])[0]}" if run.events else "no events in the window"
        where = ", ".join(f"{k} {v}" for k, v in sorted(run.fingerprint.items()) if k in ("foxhunt", "kernel", "host"))
        rows.append(f"<li><b>{html.escape(run.label)}</b>: {span}, {run.events} inputs, {html.escape(run.clock)} clock"
                    f"{', ' + html.escape(where) if where else ''}</li>")
    return f"<ul class='runs'>{''.join(rows)}</ul>"


def _metrics_table(runs: Sequence[Run], figures: Sequence[Figures]) -> str:
    head = "".join(f"<th>{html.escape(run.label)}</th>" for run in runs)
    rows = []
    for key, label in _SUMMARY:
        cells = "".join(f"<td data-run='{i}' data-summary='{key}'>{html.escape(_summary_text(run.summary.get(key)))}"
                        "</td>" for i, run in enumerate(runs))
        rows.append(f"<tr><th>{label}</th>{cells}</tr>")
    for key, label, how in _METRICS:
        cells = "".join(f"<td data-run='{i}' data-metric='{key}' data-value='{fg.metrics.get(key)!r}'>"
                        f"{_fmt(fg.metrics.get(key, math.nan), how)}</td>" for i, fg in enumerate(figures))
        rows.append(f"<tr><th>{label}</th>{cells}</tr>")
    cells = "".join(f"<td data-run='{i}'>{dt.timedelta(seconds=fg.period_ns / 1e9)}, on {fg.capital:,.2f}"
                    f" {html.escape(fg.currency)}"
                    "</td>" for i, fg in enumerate(figures))
    rows.append(f"<tr><th>Return period, on capital</th>{cells}</tr>")
    return f"<h2>Summary and metrics</h2><table class='metrics'><tr><th></th>{head}</tr>{''.join(rows)}</table>"


def _summary_text(value: object) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items()) or "-"
    return "-" if value is None else str(value)


def _denial_table(runs: Sequence[Run]) -> str:
    rows = []
    for run in runs:
        counts: Counter[tuple[str, str]] = Counter()
        for _, symbol, reason, n in run.denials:
            counts[(symbol, reason)] += n
        for (symbol, reason), n in counts.most_common():
            rows.append(f"<tr><td>{html.escape(run.label)}</td><td>{html.escape(symbol)}</td>"
                        f"<td>{html.escape(reason)}</td><td data-denials='{n}'>{n}</td></tr>")
    if not rows:
        return "<h2>Why orders were denied</h2><p>No order was denied.</p>"
    return ("<h2>Why orders were denied</h2><table class='denials'><tr><th>run</th><th>symbol</th><th>reason</th>"
            f"<th>denials</th></tr>{''.join(rows)}</table>")


def _conventions(figures: Sequence[Figures]) -> str:
    fg = figures[0]
    period = dt.timedelta(seconds=fg.period_ns / 1e9)
    capital = ", ".join(f"{f.capital:,.2f} {html.escape(f.currency)} ({html.escape(f.capital_source)})"
                       for f in figures)
    currency = html.escape(fg.currency)
    per_year = performance.YEAR_NS / fg.period_ns
    return (
        f"Returns are the equity's change in {currency} over each period of {period}, divided by the capital"
        f" base: {capital}; not compounded within the run. Annualised by calendar time: {per_year:,.0f}"
        " periods a year (365 days, markets open around the clock). Annualised return"
        " compounds the total over the years the run spans; volatility is the sample standard deviation (ddof 1)"
        " times the square root of the periods a year; Sharpe the mean over that deviation, annualised, with no"
        " risk-free rate; Sortino the annualised mean over the annualised downside deviation; Calmar the"
        " annualised return over the maximum drawdown of the compounded return index (empyrical's definitions)."
        " Hit rate and profit factor are over round trips (flat to flat). Turnover is the traded notional over"
        " the capital; exposure the share of the run's time with a position open. The equity starts at 0 at the"
        " window's first input; PnL figures in the table are the kernel's at the journal's end."
    )


_CSS = (
    "body{font-family:system-ui,sans-serif;margin:24px auto;max-width:1200px;color:#222}"
    "h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}"
    "table{border-collapse:collapse}td,th{padding:3px 10px;border-bottom:1px solid #eee;text-align:right}"
    "th:first-child{text-align:left}.note{color:#555;font-size:.9em;max-width:900px}ul.runs{color:#444}"
)
