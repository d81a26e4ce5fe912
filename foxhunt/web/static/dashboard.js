// The foxhunt dashboard: what the gateway's API (/api/openapi.json) serves, drawn, and the daemon's state
// commands, each with a reason. Plain browser JavaScript, no build step; the chart is TradingView's
// lightweight-charts, bundled into static/vendor by scripts/setup (it works offline).
//
// Live data: one WebSocket follows the journal's events from where the page's first reads stopped
// (reconnecting from the last `next_seq` it got, so nothing is missed or seen twice) and another the
// daemon's status. Quotes update the chart as they arrive; tables are read again (REST) at most once a
// second when something happened. The journal shown is the live one (web.journal), or the one the address
// names (#journal=NAME, which the journals table links to).
//
// What is shown is never older than it says: the status stream answers at least every 5 s, and a page
// that has heard nothing for STALE_MS, or whose stream broke, says so in the header (and keeps trying).
// A stream closed because the token was revoked or the session ended (REVOKED), or a gateway that no
// longer knows the session (it restarted: sessions live in its memory), brings the login back with why.
"use strict";

const $ = (id) => document.getElementById(id);
const TAPE_LENGTH = 60;
const STALE_MS = 7000;  // the status stream sends at least every 5 s (app.py, status_stream)
const REVOKED = 4401;  // a stream's close code when its credentials end (app.py)
const state = { session: null, journal: "", symbol: "", heardAt: 0, ended: false, chart: null, series: null,
                markers: null, bars: new Map(),
                runs: [], touched: [], lastPrice: 0, fillMarks: [], orderMarks: [], openOrders: [], priceLines: [],
                nextSeq: 1, dirty: false, quotes: 0, risk: null, pnl: null };
window.foxhunt = state;  // for the browser test and a curious operator's console

async function api(path, options = {}) {
  const headers = { ...(options.headers || {}) };
  if (options.body !== undefined) headers["content-type"] = "application/json";
  if (options.method && options.method !== "GET" && state.session) headers["x-csrf-token"] = state.session.csrf;
  const response = await fetch(path, { ...options, headers, credentials: "same-origin" });
  const text = await response.text();
  const body = text ? JSON.parse(text) : null;
  if (!response.ok) {
    const error = new Error((body && body.error) || `${response.status} ${response.statusText}`);
    error.status = response.status;
    throw error;
  }
  return body;
}

function text(value) { return value === null || value === undefined ? "" : String(value); }

function fillTable(table, columns, rows, extra) {
  table.replaceChildren();
  const head = table.insertRow();
  for (const [, label] of columns) { const th = document.createElement("th"); th.textContent = label; head.appendChild(th); }
  if (extra) head.appendChild(document.createElement("th"));
  for (const row of rows) {
    const tr = table.insertRow();
    for (const [key] of columns) tr.insertCell().textContent = text(row[key]);
    if (extra) tr.insertCell().appendChild(extra(row));
  }
}

// --- logging in ----------------------------------------------------------------------------------

async function start() {
  try {
    state.session = await api("/api/session");
  } catch (e) {
    if (e.status === 401) { showLogin(); return; }
    throw e;
  }
  showDashboard();
}

function showLogin(why) {
  $("dashboard").hidden = true;
  $("login").hidden = false;
  $("login-why").textContent = why || "";
}

// the session is over (revoked, logged out elsewhere, expired, or the gateway restarted): stop following,
// and ask for a token again, saying why
function sessionEnded(why) {
  if (state.ended) return;
  state.ended = true;
  for (const ws of [state.eventSocket, state.statusSocket]) if (ws) ws.close();
  showLogin(why);
}

// a stream closed: REVOKED ends the session; otherwise ask the gateway whether the session still holds
// (a restarted gateway has forgotten it) before trying again
async function reconnect(follow, event) {
  if (state.ended) return;
  if (event.code === REVOKED) { sessionEnded(`signed out: ${event.reason || "the token was revoked"}`); return; }
  showStale();
  try {
    await api("/api/session");
  } catch (e) {
    if (e.status === 401) {
      sessionEnded("signed out: the gateway does not know this session any more (it restarted, or the session"
                   + " expired); log in again");
      return;
    }
  }
  setTimeout(follow, 1000);
}

function showStale() {
  const quiet = Date.now() - state.heardAt;
  const el = $("stale");
  const stale = state.heardAt === 0 || quiet > STALE_MS ||
    !state.statusSocket || state.statusSocket.readyState !== WebSocket.OPEN;
  el.hidden = !stale;
  if (stale) {
    el.textContent = state.heardAt === 0 ? "not connected: what is shown may be old"
      : `stale: nothing heard for ${Math.round(quiet / 1000)} s; reconnecting`;
  }
}

$("login-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  $("login-error").textContent = "";
  try {
    state.session = await api("/api/login", { method: "POST", body: JSON.stringify({ token: $("token").value }) });
    $("token").value = "";
    showDashboard();
  } catch (e) {
    $("login-error").textContent = e.message;
  }
});

$("logout").addEventListener("click", async () => {
  await api("/api/logout", { method: "POST" }).catch(() => {});
  location.reload();
});

// --- the dashboard -------------------------------------------------------------------------------

async function showDashboard() {
  $("login").hidden = true;
  $("dashboard").hidden = false;
  const s = state.session;
  const asked = new URLSearchParams(location.hash.slice(1)).get("journal");
  state.journal = asked || s.live_journal;
  $("who").textContent = `${s.name} (${s.scope})`;
  const other = state.journal !== s.live_journal ? " (not the live journal)" : "";
  $("journal").textContent = state.journal ? `${state.journal}${other}`
    : "no live journal (web.journal): pick one below";
  $("controls").hidden = s.scope !== "operate";
  makeChart();
  await refreshJournals();
  if (!state.journal) return;
  await refreshRuns();
  const commands = await api(`/api/journals/${encodeURIComponent(state.journal)}/events?kinds=AdminCommand&last=true&limit=1`);
  for (const c of commands.events) showCommand(c.event);
  await loadBars();
  await refreshTables();
  const last = await api(`/api/journals/${encodeURIComponent(state.journal)}/events?last=true&limit=${TAPE_LENGTH}`);
  for (const e of last.events) tape(e);
  state.nextSeq = last.next_seq;
  followEvents();
  followStatus();
  setInterval(() => { if (state.dirty) { state.dirty = false; refreshTables(); } }, 1000);
  setInterval(showStale, 1000);
}

function makeChart() {
  if (typeof LightweightCharts === "undefined") {
    $("chart-error").textContent = "the chart library is not bundled: run scripts/setup web";
    return;
  }
  state.chart = LightweightCharts.createChart($("chart"), { autoSize: true, timeScale: { timeVisible: true, secondsVisible: true } });
  state.series = state.chart.addSeries(LightweightCharts.CandlestickSeries, {});
  state.markers = LightweightCharts.createSeriesMarkers(state.series, []);
  $("symbol").addEventListener("change", () => { state.symbol = $("symbol").value; drawBars(); });
}

async function loadBars() {
  const all = await api(`/api/journals/${encodeURIComponent(state.journal)}/bars`);
  for (const { symbol, bars } of all) {
    state.bars.set(symbol, bars.map(([time, open, high, low, close]) => ({ time, open, high, low, close })));
  }
  const fills = await api(`/api/journals/${encodeURIComponent(state.journal)}/fills`);
  state.fillMarks = fills.map(fillMark);
  const orders = await api(`/api/journals/${encodeURIComponent(state.journal)}/events?kinds=SubmitOrder&last=true&limit=200`);
  state.orderMarks = orders.events.map((e) => orderMark(e.event));
  updateSymbols();
  drawBars();
}

function updateSymbols() {
  const select = $("symbol");
  for (const symbol of state.bars.keys()) {
    if (![...select.options].some((o) => o.value === symbol)) select.add(new Option(symbol, symbol));
  }
  if (!state.symbol && select.options.length) { state.symbol = select.options[0].value; select.value = state.symbol; }
}

function drawBars() {
  if (!state.series) return;
  state.series.setData(state.bars.get(state.symbol) || []);
  drawMarks();
  drawOrderLines(state.openOrders);
}

function fillMark(f) {
  const buy = f.side === "BUY";
  return { symbol: f.symbol, time: Math.floor(f.time_ns / 1e9), position: buy ? "belowBar" : "aboveBar",
           color: buy ? "#1f8a4c" : "#c0392b", shape: buy ? "arrowUp" : "arrowDown" };
}

// an order as its strategy or operator asked for it (SubmitOrder, before the gate): a dot, B or S
function orderMark(o) {
  return { symbol: o.symbol, time: Math.floor(o.ts_event / 1e9), position: "inBar", color: "#2962ff",
           shape: "circle", text: o.side === "BUY" ? "B" : "S" };
}

// the working orders with a price, as dashed lines across the chart at their limit
function drawOrderLines(orders) {
  state.openOrders = orders;
  if (!state.series) return;
  for (const line of state.priceLines) state.series.removePriceLine(line);
  state.priceLines = orders.filter((o) => o.symbol === state.symbol && o.price !== null).map((o) =>
    state.series.createPriceLine({ price: Number(o.price), color: o.side === "BUY" ? "#1f8a4c" : "#c0392b",
                                   lineStyle: LightweightCharts.LineStyle.Dashed, lineWidth: 1,
                                   title: `${o.side} ${o.quantity} ${o.order_id}` }));
}

function drawMarks() {
  if (!state.markers) return;
  const ours = (marks) => marks.filter((m) => m.symbol === state.symbol).slice(-200).map(({ symbol, ...m }) => m);
  const marks = [...ours(state.orderMarks), ...ours(state.fillMarks)];
  marks.sort((a, b) => a.time - b.time);
  state.markers.setMarkers(marks);
}

function onQuote(symbol, ts_ns, price) {
  let bars = state.bars.get(symbol);
  if (!bars) { bars = []; state.bars.set(symbol, bars); updateSymbols(); }
  const time = Math.floor(ts_ns / 1e9);
  const last = bars[bars.length - 1];
  let bar;
  if (last && last.time === time) {
    bar = last; bar.high = Math.max(bar.high, price); bar.low = Math.min(bar.low, price); bar.close = price;
  } else if (!last || time > last.time) {
    bar = { time, open: price, high: price, low: price, close: price }; bars.push(bar);
    if (bars.length > 2000) bars.shift();
  } else {
    return;
  }
  state.quotes += 1;
  if (symbol === state.symbol) {
    const touched = state.touched;
    if (touched[touched.length - 1] !== bar) touched.push(bar);
    state.lastPrice = price;
  }
}

// the chart is drawn once a frame of the stream, not once a quote: each bar the frame changed, in order
function drawTouched() {
  if (!state.touched.length) return;
  if (state.series) for (const bar of state.touched) state.series.update({ ...bar });
  $("last-price").textContent = state.lastPrice.toFixed(5);
  state.touched = [];
}

const SCALE = 1e9;  // prices in the events are fixed-point nanos (messages/fixed_point.py)

function onEvent(e) {
  const m = e.event;
  if (e.kind === "QuoteTick") { onQuote(m.symbol, m.ts_event, (m.bid + m.ask) / (2 * SCALE)); return; }
  if (e.kind === "TradeTick") { onQuote(m.symbol, m.ts_event, m.price / SCALE); return; }
  if (e.kind === "SubmitOrder") {  // drawn with the next refresh of the tables (once a second at most)
    state.orderMarks.push(orderMark(m));
    if (state.orderMarks.length > 2000) state.orderMarks.shift();
    state.dirty = true;
  }
  if (e.kind.startsWith("Order") || e.kind.endsWith("Changed") || e.kind === "AdminCommand") state.dirty = true;
  if (e.kind === "RunStarted" || e.kind === "RunStopped") refreshRuns();
  if (e.kind === "AdminCommand") showCommand(m);
  tape(e);
}

// a fixed-point number (nanos, an integer of 10^-9 units) as the decimal it stands for: 1100000000 -> "1.1"
function decimal(nanos) {
  const digits = String(Math.abs(nanos)).padStart(10, "0");
  const units = digits.slice(0, -9), fraction = digits.slice(-9).replace(/0+$/, "");
  return `${nanos < 0 ? "-" : ""}${units}${fraction ? `.${fraction}` : ""}`;
}

function tape(e) {
  if (e.kind === "QuoteTick" || e.kind === "TradeTick") return;
  const li = document.createElement("li");
  const { ts_event, ts_init, ...rest } = e.event;
  const fixed = new Set((state.session && state.session.fixed_point) || []);
  const shown = JSON.stringify(rest, (key, value) => (fixed.has(key) && Number.isInteger(value) ? decimal(value)
                                                                                                 : value));
  li.textContent = `${e.seq} ${e.kind} ${shown}`;
  const list = $("tape");
  list.prepend(li);
  while (list.children.length > TAPE_LENGTH) list.lastChild.remove();
}

const decoder = new TextDecoder();

function socketUrl(path) {
  return `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}${path}`;
}

function followEvents() {
  const ws = new WebSocket(socketUrl(`/api/journals/${encodeURIComponent(state.journal)}/stream?from_seq=${state.nextSeq}`));
  ws.binaryType = "arraybuffer";  // decoded as each frame arrives, in order (a Blob's text() would let them overtake)
  ws.onmessage = (message) => {
    const frame = JSON.parse(decoder.decode(message.data));
    for (const e of frame.events) onEvent(e);
    drawTouched();
    state.nextSeq = frame.next_seq;
  };
  ws.onclose = (event) => reconnect(followEvents, event);  // from the last next_seq: no gap, no repeat
  state.eventSocket = ws;
}

function followStatus() {
  const ws = new WebSocket(socketUrl(`/api/status/stream?journal=${encodeURIComponent(state.journal)}`));
  ws.binaryType = "arraybuffer";
  ws.onmessage = (message) => {
    const s = JSON.parse(decoder.decode(message.data));
    const el = $("state");
    el.textContent = s.view.trading_state || "…";
    el.className = `state ${s.view.trading_state || ""}`;
    $("daemon").textContent = s.writer ? "daemon running" : "no daemon on this journal";
    $("seq").textContent = `seq ${s.view.seq}`;
    state.heardAt = Date.now();
    showStale();
  };
  ws.onclose = (event) => reconnect(followStatus, event);
  state.statusSocket = ws;
}

async function refreshTables() {
  const base = `/api/journals/${encodeURIComponent(state.journal)}`;
  const [positions, orders, pnl, risk, fills] = await Promise.all(
    ["positions", "orders?open=true&n=200", "pnl", "risk", "fills"].map((p) => api(`${base}/${p}`)));
  fillTable($("positions"), [["symbol", "Symbol"], ["quantity", "Qty"], ["avg_price", "Avg"], ["mark", "Mark"],
                             ["unrealized_pnl", "Unrealised"], ["realized_pnl", "Realised"]], positions);
  const operate = state.session.scope === "operate";
  fillTable($("orders"), [["order_id", "Order"], ["symbol", "Symbol"], ["side", "Side"], ["quantity", "Qty"],
                          ["filled", "Filled"], ["price", "Price"], ["status", "Status"]], orders,
            operate ? (o) => commandButton("Cancel", "cancel", [o.order_id]) : null);
  drawOrderLines(orders);
  const rows = Object.entries(pnl.by_currency || {}).map(([ccy, m]) => ({ ccy, ...m }));
  rows.push({ ccy: "equity", net: pnl.equity }, { ccy: "peak", net: pnl.peak_equity }, { ccy: "max drawdown", net: pnl.max_drawdown });
  fillTable($("pnl"), [["ccy", ""], ["realized", "Realised"], ["unrealized", "Unrealised"], ["commissions", "Comm."], ["net", "Net"]], rows);
  state.pnl = pnl;
  state.risk = risk;
  drawRisk(risk, pnl);
  state.fillMarks = fills.map(fillMark);
  drawMarks();
}

function drawRisk(risk, pnl) {
  const box = $("risk");
  box.replaceChildren();
  if (!risk.limits) return;
  const l = risk.limits, u = risk.usage, b = risk.breakers;
  const equity = Number(pnl.equity), peak = Number(pnl.peak_equity), dayStart = Number(b.day_start_equity);
  const usage = [
    ["open orders", u.open_orders, l.max_open_orders],
    ["gross exposure", u.gross_exposure === null ? null : Math.abs(Number(u.gross_exposure)), l.max_gross_exposure],
    ["net exposure", u.net_exposure === null ? null : Math.abs(Number(u.net_exposure)), l.max_net_exposure],
    ["drawdown", Math.max(0, peak - equity), l.max_drawdown],
    ["daily loss", Math.max(0, dayStart - equity), l.max_daily_loss],
  ];
  for (const [label, used, limit] of usage) {
    const row = document.createElement("div");
    const share = limit && used !== null ? Math.min(1, used / Number(limit)) : 0;
    // null: the kernel does not track it (gross exposure is kept only under a gross limit), never a zero
    const shown = used === null ? "not tracked" : used;
    row.textContent = `${label}: ${shown}${limit ? ` of ${limit}` : " (no limit)"}`;
    const bar = document.createElement("div");
    bar.className = share > 0.8 ? "bar hot" : "bar";
    const fill = document.createElement("div");
    fill.style.width = `${(share * 100).toFixed(1)}%`;
    bar.appendChild(fill);
    box.append(row, bar);
  }
  const held = document.createElement("div");
  held.textContent = `trading state ${risk.trading_state}; denials held back ${risk.denials_held_back}`;
  box.appendChild(held);
}

// the last operator command in the journal, whoever sent it (the admin REPL or a browser), with its reason
function showCommand(c) {
  $("last-command").textContent = `last command: ${[c.command, ...c.args].join(" ")} by ${c.operator}` +
    (c.reason ? ` (${c.reason})` : "");
}

// the journal's runs (a daemon's restart starts one): read at the start and when a run starts or stops
async function refreshRuns() {
  const runs = await api(`/api/journals/${encodeURIComponent(state.journal)}/runs`);
  const when = (ns) => (ns === null ? "" : new Date(ns / 1e6).toISOString().replace("T", " ").slice(0, 19));
  // a run with no RunStopped: the last may still be running (the header says whether a daemon holds the
  // journal); an earlier one ended with its process
  const unstopped = (i) => (i === runs.length - 1 ? "not stopped" : "no stop recorded");
  const rows = runs.map((r, i) => ({
    // a run on the feed's clock starts before its first input's time is known: its RunStarted says 0
    run: r.run_id, started: r.started_ns === 0 ? "on the feed's clock" : when(r.started_ns),
    stopped: r.stopped_ns !== null ? when(r.stopped_ns) : unstopped(i),
    reason: r.stop_reason, inputs: r.summary && r.summary.inputs, fills: r.summary && r.summary.fills,
    pnl: r.summary ? r.summary.pnl : "not in the view (before its snapshot)",
  })).reverse();
  fillTable($("runs"), [["run", "Run"], ["started", "Started (UTC)"], ["stopped", "Stopped"], ["reason", "Why"],
                        ["inputs", "Inputs"], ["fills", "Fills"], ["pnl", "PnL"]], rows);
  state.runs = runs;
}

async function refreshJournals() {
  const journals = await api("/api/journals");
  fillTable($("journals"), [["name", "Journal"], ["created_at", "Created"], ["last_seq", "Events"], ["writer", "Held by"]],
            journals, (j) => {
              const show = document.createElement("a");
              show.href = `#journal=${encodeURIComponent(j.name)}`;
              show.textContent = "show";
              show.addEventListener("click", () => setTimeout(() => location.reload(), 0));
              const a = document.createElement("a");
              a.href = `/api/journals/${encodeURIComponent(j.name)}/report`;
              a.target = "_blank";
              a.rel = "noopener";
              a.textContent = "report";
              const cell = document.createElement("span");
              cell.append(show, " ", a);
              return cell;
            });
}

// --- commands ------------------------------------------------------------------------------------

function commandButton(label, command, args) {
  const button = document.createElement("button");
  button.type = "button";
  button.textContent = label;
  button.addEventListener("click", () => send(command, args));
  return button;
}

for (const button of document.querySelectorAll("#controls button[data-command]")) {
  button.addEventListener("click", () => send(button.dataset.command, []));
}

async function send(command, args) {
  const reason = $("reason").value.trim();
  const out = $("command-result");
  if (!reason) {
    out.className = "error";
    out.textContent = `${command} needs a reason: it is journaled with your name`;
    $("reason").focus();
    return;
  }
  try {
    const result = await api("/api/commands", { method: "POST", body: JSON.stringify({ command, args, reason }) });
    out.className = "ok";
    out.textContent = `${command}: journaled at seq ${result.seq}; trading state ${result.trading_state}`;
    $("reason").value = "";
    state.dirty = true;
  } catch (e) {
    out.className = "error";
    out.textContent = `${command}: ${e.message}`;
  }
}

start().catch((e) => { document.body.textContent = `foxhunt dashboard: ${e.message}`; });
