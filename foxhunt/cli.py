"""`foxhunt` and `python -m foxhunt`: parse arguments, build through the composition root, print.

Exit codes: 0 success, 1 replay verification diverged, 2 usage, configuration, input or journal error.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import aclosing, contextmanager
from pathlib import Path

import anyio
import msgspec
import structlog

from foxhunt import bootstrap, config
from foxhunt.admin import client as admin_client
from foxhunt.errors import ConfigError, FoxhuntError, VerificationFailed
from foxhunt.models.agent_configs import AGENTS
from foxhunt.models.configs import ARCHITECTURES
from foxhunt.observability import logging as fh_logging
from foxhunt.runtime.daemon import StartupSignals, run_daemon
from foxhunt.runtime.ingest import ingest
from foxhunt.runtime.recovery import recorded_config, trading_config

EXIT_OK, EXIT_DIVERGED, EXIT_ERROR = 0, 1, 2

log = structlog.get_logger("foxhunt.cli")


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", metavar="FILE", help="TOML configuration (default: built-in defaults)")
    common.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])

    parser = argparse.ArgumentParser(prog="foxhunt", description="Event-sourced trading daemon.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", parents=[common], help="run the paper-trading daemon")
    run.add_argument("--journal", required=True, metavar="NAME")
    run.add_argument("--feed", metavar="SPEC",
                     help="synthetic:seed=7,n=100000 (default: [run] feed), csv:PATH, or none (the venue's market data)")
    run.add_argument("--max-events", type=_positive_int, metavar="N", help="stop after N feed inputs")
    run.add_argument("--duration", type=_positive_float, metavar="SECONDS", help="stop after this long")
    run.add_argument("--clock", choices=["wall", "feed"],
                     help="stamp inputs with the wall clock (live; the default for a live feed: none, or synthetic"
                          " with a rate) or the feed's own timestamps (as fast as possible; the default for a record)")
    run.add_argument("--on-bad-row", choices=["error", "skip"], default="error",
                     help="a malformed feed row stops the run (error) or is recorded as a FeedGap (skip)")
    run.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    _instrument_arguments(run)

    rep = sub.add_parser("replay", parents=[common], help="backtest or verify from a journal")
    rep.add_argument("journal", metavar="NAME")
    rep.add_argument("--verify", action="store_true",
                     help="compare every derived event with the recorded one, and every model score recomputed")
    rep.add_argument("--rescore", action="store_true",
                     help="backtest with model scores computed again by the configured models, not the recorded")
    rep.add_argument("--device", metavar="DEVICE",
                     help="where scores are recomputed: cpu, cuda, cuda:N (default: [scoring] device)")
    rep.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="sets",
                     help="override a recorded configuration value, e.g. strategy.ema_cross.fast=5")
    rep.add_argument("--report", metavar="FILE.html",
                     help="write the backtest's report, beside the recorded run's where the journal was traded")
    rep.add_argument("--json", action="store_true", help="print the summary as one JSON object")

    rpt = sub.add_parser("report", parents=[common], help="a run's report: one HTML file with interactive plots")
    rpt.add_argument("journal", metavar="JOURNAL")
    rpt.add_argument("--out", metavar="FILE.html", help="where the report goes (default: JOURNAL.html here)")
    rpt.add_argument("--compare", metavar="OTHER", help="another journal, laid side by side with the first")
    rpt.add_argument("--from", dest="start", type=_timestamp, metavar="TIME",
                     help="from this time on (ISO 8601, UTC unless it says otherwise)")
    rpt.add_argument("--to", dest="end", type=_timestamp, metavar="TIME", help="before this time")
    rpt.add_argument("--capital", type=_positive_float, metavar="MONEY",
                     help="the capital returns are measured on (default: [risk] kelly_capital or max_gross_exposure,"
                          " else the run's largest gross position)")
    rpt.add_argument("--json", action="store_true", help="print the metrics as one JSON object")

    swp = sub.add_parser("sweep", parents=[common],
                         help="backtest journals under many --set variants, on Ray (this machine or a cluster)")
    swp.add_argument("--journal", action="append", required=True, dest="journals", metavar="NAME",
                     help="a journal to backtest at every point (repeat for several)")
    swp.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2,...",
                     help="every combination of these values, e.g. strategy.ema_cross.fast=5,10,20")
    swp.add_argument("--random", action="append", default=[], metavar="KEY=int:LO:HI|float:LO:HI|choice:A|B",
                     help="--samples seeded draws of these, e.g. strategy.ema_cross.slow=int:20:80")
    swp.add_argument("--samples", type=_positive_int, default=16, metavar="N", help="random draws (default 16)")
    swp.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="sets",
                     help="an override every point has")
    swp.add_argument("--rescore", action="store_true", help="each point's backtest with the scores or an agent's"
                     " decisions made again by the models it names (replay --rescore), e.g. --grid"
                     " strategy.agent.policy=ID1,ID2")
    swp.add_argument("--seed", type=int, default=1, metavar="N", help="draws the random points (default 1)")
    swp.add_argument("--workers", type=_positive_int, default=os.cpu_count() or 1, metavar="N",
                     help="points at a time (default: this machine's CPUs)")
    swp.add_argument("--cpus-per-trial", type=_positive_float, default=1.0, metavar="N",
                     help="CPUs a point takes (default 1)")
    swp.add_argument("--gpus-per-trial", type=_positive_float, default=None, metavar="X",
                     help="a GPU share a point takes, for --rescore on a GPU ([scoring] device = \"cuda\")")
    swp.add_argument("--address", metavar="ADDR", help="join this Ray cluster (default: Ray inside this command)")
    swp.add_argument("--metric", default="sharpe", metavar="NAME", help="what the best point has most of"
                     " (default sharpe; pnl, total_return, ... or -drawdown for the least)")
    swp.add_argument("--out", metavar="FILE.toml", help="write the best point's configuration, for --config")
    swp.add_argument("--report", metavar="FILE.html",
                     help="write the sweep's report: parameters against --metric, a heat map of two, every point")
    swp.add_argument("--name", metavar="NAME", help="the sweep's name: its directory under the state directory's"
                     " sweeps/ (default: sweep-TIME)")
    swp.add_argument("--resume", action="store_true", help="go on with sweep --name, running only the points"
                     " that did not finish")
    swp.add_argument("--json", action="store_true", help="print the results as one JSON object")

    tn = sub.add_parser("tune", parents=[common],
                        help="search a forecaster's or an agent's settings (Optuna on Ray Tune) and store the best")
    tn.add_argument("model", choices=[*ARCHITECTURES, *AGENTS], metavar="MODEL",
                    help=f"a forecaster, one of {', '.join(ARCHITECTURES)}, or a trading agent, {' or '.join(AGENTS)}")
    _data_arguments(tn)
    tn.add_argument("--space", action="append", default=[], metavar="KEY=KIND:...",
                    help="a setting to search: KEY=float:LO:HI, log:LO:HI, int:LO:HI or choice:A|B|C, e.g."
                         " train.learning_rate=log:0.0001:0.01 (agents.* for an agent; repeat for several)")
    tn.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="sets",
                    help="a setting every trial has")
    tn.add_argument("--trials", type=_positive_int, default=16, metavar="N", help="trials in all (default 16)")
    tn.add_argument("--seed", type=int, default=1, metavar="N",
                    help="every trial's weights, and the sampler's draws (default 1)")
    tn.add_argument("--metric", metavar="NAME", help="what the best trial has most of, -NAME for the least (default:"
                    " a forecaster's validation_loss, least; an agent's held_out_pnl_bp, most; either keeps its"
                    " own sense when named)")
    tn.add_argument("--grace", type=_positive_int, default=1, metavar="N",
                    help="evaluations every trial gets before ASHA may stop it (default 1)")
    tn.add_argument("--workers", type=_positive_int, default=os.cpu_count() or 1, metavar="N",
                    help="trials at a time (default: this machine's CPUs)")
    tn.add_argument("--cpus-per-trial", type=_positive_float, default=1.0, metavar="N", help="(default 1)")
    tn.add_argument("--gpus-per-trial", type=_positive_float, default=None, metavar="X",
                    help="a GPU share, 0.25 to run four trials on one (--device cuda needs it)")
    tn.add_argument("--address", metavar="ADDR", help="join this Ray cluster (default: Ray inside this command)")
    tn.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    tn.add_argument("--size", choices=["tiny", "production"], default="tiny",
                    help="the architecture's preset the space varies: tiny (the CPU) or production (the GPU)")
    tn.add_argument("--symbol", default="EURUSD", help="an agent: the instrument it trades (default EURUSD)")
    tn.add_argument("--out", metavar="STORE", help="where the best model goes: a directory or s3://bucket/prefix"
                    " (default: [models] store)")
    tn.add_argument("--report", metavar="FILE.html",
                    help="write the search's report: every trial's values against --metric, and the table")
    tn.add_argument("--name", metavar="NAME", help="the search's name: its directory under the state directory's"
                    " tunes/ (default: tune-MODEL-TIME)")
    tn.add_argument("--resume", action="store_true", help="go on with search --name, its finished trials kept")
    tn.add_argument("--json", action="store_true", help="print the results as one JSON object")

    ing = sub.add_parser("ingest", parents=[common], help="bulk-load market data into a journal")
    ing.add_argument("file", metavar="FILE", help="a CSV, Parquet or Arrow file (by its extension), or a feed spec"
                     " such as csv:PATH,symbol=EURUSD,columns=ts:time;bid:b;ask:a")
    ing.add_argument("--journal", required=True, metavar="NAME")
    ing.add_argument("--on-bad-row", choices=["error", "skip"], default="error")
    ing.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    _instrument_arguments(ing)

    jr = sub.add_parser("journal", help="inspect journals").add_subparsers(dest="action", required=True, metavar="ACTION")
    jr.add_parser("list", parents=[common], help="list journals")
    show = jr.add_parser("show", parents=[common], help="print events")
    show.add_argument("journal", metavar="NAME")
    show.add_argument("--from", type=_positive_int, default=1, dest="from_seq", metavar="SEQ")
    show.add_argument("--limit", type=_positive_int, metavar="N")
    tail = jr.add_parser("tail", parents=[common], help="print the last events, or follow new ones")
    tail.add_argument("journal", metavar="NAME")
    tail.add_argument("-n", type=_positive_int, default=10, dest="count", metavar="N")
    tail.add_argument("--follow", "-f", action="store_true", help="keep printing events as they are committed")
    arc = jr.add_parser("archive", parents=[common],
                        help="move a journal's whole old partition ranges out of the database, into checksummed files")
    arc.add_argument("journal", metavar="NAME")
    arc.add_argument("--through", type=_positive_int, required=True, metavar="SEQ",
                     help="archive the ranges that end at or before this sequence number")
    arc.add_argument("--to", required=True, metavar="DIR", help="where the files go")
    res = jr.add_parser("restore", parents=[common], help="bring a journal's archived ranges back into the database")
    res.add_argument("journal", metavar="NAME")
    exp = jr.add_parser("export", parents=[common],
                        help="write a journal's events as a table: one row per event, its fields as typed columns")
    exp.add_argument("journal", metavar="NAME")
    exp.add_argument("--to", required=True, dest="out", metavar="FILE",
                     help="FILE.parquet (or .pq) or FILE.csv: the name says the format")
    exp.add_argument("--kinds", metavar="KIND,KIND,...", help="only these kinds of event, e.g. QuoteTick,OrderFilled")
    exp.add_argument("--from", dest="start", type=_timestamp, metavar="TIME",
                     help="events from this time on (ISO 8601, UTC unless it says otherwise)")
    exp.add_argument("--until", dest="end", type=_timestamp, metavar="TIME", help="events before this time")
    exp.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    snap = jr.add_parser("snapshot", parents=[common],
                         help="store the journal's kernel state, so that start-up feeds only the inputs after it")
    snap.add_argument("journal", metavar="NAME")

    adm = sub.add_parser("admin", parents=[common], help="steer a running daemon over its admin socket")
    adm.add_argument("-c", dest="line", metavar="COMMAND", help="run one command and exit, e.g. -c 'status'")
    adm.add_argument("--socket", metavar="PATH", help="the admin socket (default: [admin] socket)")
    adm.add_argument("--json", action="store_true", help="print each answer as one JSON object")
    risk = sub.add_parser("risk", help="the running daemon's risk engine (its admin socket's `risk` query)")
    risk.add_argument("action", choices=["show"])
    risk.add_argument("--socket", metavar="PATH", help="the admin socket (default: [admin] socket)")
    risk.add_argument("--json", action="store_true", help="print the answer as one JSON object")
    risk.add_argument("--config", metavar="FILE")
    risk.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])

    tr = sub.add_parser("train", parents=[common],
                        help="train a forecaster, or a trading agent, on the market data of journals")
    tr.add_argument("model", choices=[*ARCHITECTURES, "ensemble", *AGENTS], metavar="MODEL",
                    help=f"a forecaster, one of {', '.join(ARCHITECTURES)}, or ensemble (of --members); or a"
                         f" trading agent, {' or '.join(AGENTS)} (docs/agents.md)")
    tr.add_argument("--members", type=_model_ids, default=[], metavar="ID,ID,...",
                    help="ensemble: the stored models it combines (weights fitted on the validation range)")
    _data_arguments(tr)
    tr.add_argument("--seed", type=int, default=1, metavar="N", help="decides the weights, with the data (default 1)")
    tr.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="sets",
                    help="a setting over the configuration's, e.g. train.learning_rate=0.002 (what a tune's trial sets)")
    tr.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    tr.add_argument("--size", choices=["tiny", "production"], default="tiny",
                    help="the architecture's preset: tiny (the CPU, seconds) or production (the GPU)")
    tr.add_argument("--out", metavar="STORE", help="a directory or s3://bucket/prefix (default: [models] store)")
    tr.add_argument("--resume", action="store_true", help="go on from this run's last checkpoint, if it has one")
    tr.add_argument("--json", action="store_true", help="print the manifest as one JSON object")
    tr.add_argument("--symbol", default="EURUSD", help="an agent: the instrument it trades (default EURUSD)")
    tr.add_argument("--record", metavar="JOURNAL", help="an agent: journal one held-out episode of the trained"
                    " agent into this new journal (`foxhunt replay JOURNAL --verify` verifies it)")

    md = sub.add_parser("models", help="the trained models in the store").add_subparsers(
        dest="action", required=True, metavar="ACTION")
    store_arg = argparse.ArgumentParser(add_help=False)
    store_arg.add_argument("--store", metavar="STORE", help="a directory or s3://bucket/prefix (default: [models] store)")
    md.add_parser("list", parents=[common, store_arg], help="list the stored models")
    md_show = md.add_parser("show", parents=[common, store_arg], help="print a model's manifest")
    md_show.add_argument("model_id", metavar="ID")
    md_eval = md.add_parser("eval", parents=[common, store_arg], help="score a model on journals' market data")
    md_eval.add_argument("model_id", metavar="ID")
    _data_arguments(md_eval)
    md_eval.add_argument("--json", action="store_true", help="print the metrics as one JSON object")
    md_eval.add_argument("--symbol", help="an agent: the instrument (default: the one it was trained on)")
    md_rm = md.add_parser("rm", parents=[common, store_arg], help="delete a model from the store")
    md_rm.add_argument("model_id", metavar="ID")

    web = sub.add_parser("web", help="the web gateway and dashboard: serve it, and manage its API tokens"
                         ).add_subparsers(dest="action", required=True, metavar="ACTION")
    serve = web.add_parser("serve", parents=[common], help="serve the API, its WebSockets and the dashboard ([web])")
    serve.add_argument("--listen", metavar="HOST:PORT", help="where to listen (default: [web] listen, 127.0.0.1:8787)")
    serve.add_argument("--journal", metavar="NAME", help="the live daemon's journal (default: [web] journal)")
    tok = web.add_parser("token", help="API tokens: a token is printed once and stored hashed").add_subparsers(
        dest="token_action", required=True, metavar="ACTION")
    tok_add = tok.add_parser("add", parents=[common], help="make a token for an operator")
    tok_add.add_argument("name", metavar="NAME", help="the operator's name; commands are journaled as web:NAME")
    tok_add.add_argument("--scope", choices=["read", "operate"], required=True,
                         help="read: see everything; operate: also halt, reduce, resume, cancel, ...")
    tok.add_parser("list", parents=[common], help="list the tokens (never the tokens themselves)")
    tok_rm = tok.add_parser("revoke", parents=[common], help="revoke a token by id, or all of an operator's by name")
    tok_rm.add_argument("ref", metavar="ID|NAME")

    db = sub.add_parser("db", help="the embedded PostgreSQL and the schema")
    db.add_argument("action", choices=["start", "stop", "status", "migrate", "dsn"])
    db.add_argument("--config", metavar="FILE")
    db.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    fh_logging.configure(args.log_level)
    try:
        cfg = config.load(args.config)
        if getattr(args, "instruments", None) or getattr(args, "instrument", None):
            cfg = config.declare_instruments(cfg, args.instrument, args.instruments)
        bootstrap.configure_numba(cfg)
        handlers = {"run": cmd_run, "replay": cmd_replay, "ingest": cmd_ingest, "journal": cmd_journal, "db": cmd_db,
                    "admin": cmd_admin, "risk": cmd_risk, "train": cmd_train, "models": cmd_models,
                    "report": cmd_report, "sweep": cmd_sweep, "tune": cmd_tune, "web": cmd_web}
        handler: Callable = handlers[args.command]
        return handler(args, cfg)
    except BrokenPipeError:
        # The reader went away (`foxhunt journal show X | head`): fine. Point stdout at /dev/null so that
        # flushing it at exit does not fail again (the Python docs' recipe for SIGPIPE).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except BaseException as e:  # noqa: BLE001 - sorted into exit codes below; anything else re-raises
        return _report(e)


def _report(e: BaseException) -> int:
    errors = _flatten(e)
    if not errors or not all(isinstance(x, (FoxhuntError, KeyboardInterrupt)) for x in errors):
        raise e
    for x in errors:
        if isinstance(x, FoxhuntError):
            print(f"foxhunt: {'verification failed' if isinstance(x, VerificationFailed) else 'error'}: {x}",
                  file=sys.stderr)
    return EXIT_DIVERGED if any(isinstance(x, VerificationFailed) for x in errors) else EXIT_ERROR


def _flatten(e: BaseException) -> list[BaseException]:
    if isinstance(e, BaseExceptionGroup):
        return [leaf for sub in e.exceptions for leaf in _flatten(sub)]
    return [e]


def _run_async(fn, *args):
    return anyio.run(fn, *args, backend_options={"use_uvloop": True})


# --- commands ------------------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace, cfg: config.Config) -> int:
    startup_signals = StartupSignals().install()  # before anything that opens the journal or its database
    request = bootstrap.run_request(cfg, args.journal, args.feed, args.clock, args.on_bad_row, args.max_events,
                                    args.duration, startup_signals)
    ops = bootstrap.operations(cfg, args.journal, args.config)
    dsn = bootstrap.resolve_dsn(cfg)

    async def go():
        store = await bootstrap.open_store(cfg, dsn)
        return await run_daemon(store, cfg, request, bootstrap.fingerprint(), ops)

    _print_summary(_run_async(go), args.json)
    return EXIT_OK


def cmd_replay(args: argparse.Namespace, cfg: config.Config) -> int:
    dsn = bootstrap.resolve_dsn(cfg)
    override = cfg.trading() if args.config else None
    if args.verify and args.rescore:
        raise ConfigError("--verify recomputes every score already; --rescore is for a backtest")
    scoring_cfg = cfg if args.device is None else msgspec.structs.replace(
        cfg, scoring=msgspec.structs.replace(cfg.scoring, device=args.device))

    if args.verify and args.report:
        raise ConfigError("--report writes a backtest's report; verify it, then `foxhunt report` the journal")

    async def go():
        store = await bootstrap.open_store(cfg, dsn)
        info = await store.info(args.journal)
        trading = await trading_config(store, args.journal, args.sets, override)
        doing = "verifying" if args.verify else "replaying"
        with _bar(f"{doing} {args.journal}", info.last_seq, args.json, "events") as progress:
            if args.verify:
                return await bootstrap.verify(store, args.journal, trading, scoring_cfg, progress)
            if not args.report:
                return await bootstrap.backtest(store, args.journal, trading, scoring_cfg if args.rescore else None,
                                                progress=progress)
            return await _backtest_report(store, args.journal, trading, scoring_cfg if args.rescore else None,
                                          Path(args.report), progress)

    _print_summary(_run_async(go), args.json)
    return EXIT_OK


async def _backtest_report(store, name: str, trading, rescore_with, out: Path, progress) -> dict[str, object]:
    """A backtest whose report goes to `out`, beside the recorded run where the journal was traded."""
    from foxhunt.runtime import report

    trackers: list[report.Tracker] = []

    def track(kernel, journal):
        trackers.append(report.Tracker(kernel, f"{name} (replay)"))
        return report.TrackingJournal(journal, trackers[0])

    summary = await bootstrap.backtest(store, name, trading, rescore_with, track=track, progress=progress)
    run = trackers[0].finish()
    run.summary = summary
    started = await recorded_config(store, name)
    recorded = [name] if started.recorded_by != "ingest" else []
    await report.write_report(store, recorded, out, extra=[(run, trading)])
    return summary | {"report": str(out)}


def cmd_report(args: argparse.Namespace, cfg: config.Config) -> int:
    """`foxhunt report JOURNAL`: one HTML file (runtime/report.py)."""
    from foxhunt.runtime import report

    out = Path(args.out or f"{args.journal}.html")
    names = [args.journal] + ([args.compare] if args.compare else [])
    dsn = bootstrap.resolve_dsn(cfg)

    async def go():
        store = await bootstrap.open_store(cfg, dsn)
        total = sum([(await store.info(name)).last_seq for name in names])
        with _bar(f"reading {', '.join(names)}", total, args.json, "events") as progress:
            return await report.write_report(store, names, out, args.start, args.end, args.capital, progress)

    figures = _run_async(go)
    result = {"report": str(out), "runs": {name: {"currency": f.currency, "capital": f.capital, **f.metrics}
                                           for name, f in zip(names, figures, strict=True)}}
    if args.json:
        print(json.dumps(result, sort_keys=True, default=str))
        return EXIT_OK
    print(f"report: {out} (open it in a browser)")
    for name, f in zip(names, figures, strict=True):
        _print_summary({"journal": name, "capital": f"{f.capital:,.2f} {f.currency}"} | {
            k: round(v, 6) for k, v in f.metrics.items()}, False)
    return EXIT_OK


def cmd_sweep(args: argparse.Namespace, cfg: config.Config) -> int:
    """`foxhunt sweep`: the points (training/sweep.py) through Ray, each a backtest (bootstrap.BacktestTrainable)."""
    try:
        import ray  # noqa: F401

        from foxhunt.training import sweep
    except ImportError:
        raise ConfigError("foxhunt sweep runs on Ray, an optional extra: pip install 'foxhunt[sweep]'"
                          " (scripts/setup sweep)") from None
    if args.resume and not args.name:
        raise ConfigError("--resume needs the --name of the sweep to go on with")
    if bool(args.grid) == bool(args.random):
        raise ConfigError("a sweep is a --grid or --random draws (one of them, not both)")
    points = sweep.grid(args.grid) if args.grid else sweep.random(args.random, args.samples, args.seed)
    name = args.name or f"sweep-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    dsn = bootstrap.resolve_dsn(cfg)

    async def check():  # every point's configuration is valid and every journal there, before Ray starts
        store = await bootstrap.open_store(cfg, dsn)
        for journal in args.journals:
            await store.info(journal)
            for point in points:
                await trading_config(store, journal, [*args.sets, *point], None)

    _run_async(check)
    trainable = bootstrap.BacktestTrainable(cfg, dsn, tuple(args.journals), tuple(args.sets), args.rescore)
    with _bar(f"sweep {name}", None, args.json, "points") as update:
        outcomes = sweep.run(trainable, points, args.seed, bootstrap.state_dir(cfg) / "sweeps", name, args.workers,
                             args.address, args.resume, args.cpus_per_trial, args.gpus_per_trial or 0.0,
                             progress=lambda done, failed, total: update(
                                 done, total=total, note=f"{failed} failed" if failed else ""),
                             context={"journals": args.journals, "sets": args.sets, "rescore": args.rescore})
    metric, mode = (args.metric[1:], "min") if args.metric.startswith("-") else (args.metric, "max")
    chosen = sweep.best(outcomes, metric, mode)
    if args.out and chosen is not None:
        async def best_config():
            store = await bootstrap.open_store(cfg, dsn)
            return await trading_config(store, args.journals[0], [*args.sets, *chosen.overrides], None)

        config.write_trading(_run_async(best_config), Path(args.out))
    points_out = [{"index": o.index, "overrides": list(o.overrides), "metrics": o.metrics, "error": o.error}
                  for o in outcomes]
    if args.report:
        from foxhunt.runtime import report

        report.render_sweep(points_out, metric, Path(args.report), f"foxhunt sweep {name}")
    if args.json:
        print(json.dumps({"sweep": name, "best": None if chosen is None else chosen.index, "metric": args.metric,
                          "points": points_out}, sort_keys=True, default=str))
    else:
        _print_sweep(outcomes, metric, chosen, name, args.out)
    failed = [o for o in outcomes if o.error]
    return EXIT_ERROR if failed and len(failed) == len(outcomes) else EXIT_OK


def _print_sweep(outcomes, metric: str, chosen, name: str, out: str | None) -> None:
    columns = [metric] + [c for c in ("pnl", "sharpe", "orders", "fills", "denied") if c != metric]
    print(f"sweep {name}: {len(outcomes)} points, {sum(1 for o in outcomes if o.error)} failed")
    print(f"  {'#':>4}  " + "".join(f"{c:>14}" for c in columns) + "  overrides")
    for o in outcomes:
        mark = "*" if chosen is not None and o.index == chosen.index else " "
        cells = "".join(f"{_cell(o.metrics.get(c)):>14}" for c in columns) if not o.error else f"  failed: {o.error}"
        print(f"{mark} {o.index:>4}  {cells}  {' '.join(o.overrides)}")
    if chosen is not None and out:
        print(f"best (*): point {chosen.index}, configuration written to {out} (foxhunt run --config {out})")


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return "-" if value is None else str(value)


def cmd_tune(args: argparse.Namespace, cfg: config.Config) -> int:
    """`foxhunt tune MODEL`: a search over the model's settings (training/tune.py), each trial a training run
    (training/trainables.py) on data read here once, the best finished trial's model stored, its manifest
    naming the search."""
    try:
        import optuna  # noqa: F401
        import ray  # noqa: F401

        from foxhunt.training import trainables, tune
    except ImportError:
        raise ConfigError("foxhunt tune runs Optuna on Ray Tune, an optional extra: pip install 'foxhunt[sweep]'"
                          " (scripts/setup sweep)") from None
    if args.resume and not args.name:
        raise ConfigError("--resume needs the --name of the search to go on with")
    if args.device == "cuda" and not args.gpus_per_trial:
        raise ConfigError("--device cuda: give each trial a GPU share with --gpus-per-trial (0.25: four trials a GPU)")
    cfg = config.override(cfg, args.sets)
    agent = args.model in AGENTS
    kind = trainables.AgentTrainable if agent else trainables.ForecasterTrainable
    searches = bootstrap.state_dir(cfg) / "tunes"
    if args.resume and args.space:
        raise ConfigError("--resume goes on with the search's own space: give no --space")
    name = args.name or f"tune-{args.model}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    dimensions = (tune.saved_space(searches / name) if args.resume
                  else tune.space(args.space, kind.sections))
    context = {key: getattr(args, key) for key in ("model", "journals", "start", "end", "sets", "seed", "size",
                                                   "device", "symbol")}  # what else decides the trials
    if args.resume:
        tune.check_context(searches / name, context)
    edges = [cfg] + [config.override(cfg, tune.overrides({d.key: v})) for d in dimensions for v in d.ends()]
    for edge in edges:  # every edge of the space makes a model, before any data is read
        edge.agents.agent(args.model, args.size) if agent else edge.train.model(args.model, args.size)
    models = bootstrap.model_store(cfg, args.out)
    dsn = bootstrap.resolve_dsn(cfg)
    trainable = _run_async(_tunable, args, cfg, dsn, agent)
    metric, mode = tune.objective(args.metric, trainable.metric, trainable.mode)
    evaluations = max(trainable.evaluations(edge) for edge in edges) + 1  # and the final report
    outcomes = tune.run(trainable, dimensions, args.trials, metric, mode, args.seed, searches, name, args.workers,
                        args.address, args.resume,
                        args.cpus_per_trial, args.gpus_per_trial or 0.0, evaluations, args.grace, context=context)
    chosen = tune.best(outcomes, metric, mode)
    stored = None
    if chosen is not None:
        search = tune.record(name, dimensions, outcomes, chosen, metric, mode, args.seed, args.workers)
        stored = tune.keep(chosen, search, models)
    trials = [{"index": int(o.trial) if o.trial.isdigit() else i, "overrides": list(o.overrides),
               "metrics": o.metrics, "error": o.error, "trial": o.trial, "ended": o.ended}
              for i, o in enumerate(outcomes)]
    if args.report:
        from foxhunt.runtime import report

        report.render_sweep(trials, metric, Path(args.report), f"foxhunt tune {name}", heat_map=False)
    if args.json:
        print(json.dumps({"tune": name, "metric": metric, "mode": mode,
                          "best": None if chosen is None else chosen.trial,
                          "model": None if stored is None else stored[0],
                          "trials": [{k: t[k] for k in ("trial", "overrides", "ended", "error", "metrics")}
                                     for t in trials]},
                         sort_keys=True, default=str))
    else:
        _print_tune(outcomes, metric, chosen, name, stored, models.location)
    return EXIT_OK if chosen is not None else EXIT_ERROR


async def _tunable(args: argparse.Namespace, cfg: config.Config, dsn: str, agent: bool):
    """The trainable of `foxhunt tune`, with the market data it trains on, read from the journals once."""
    from foxhunt.training import trainables

    store = await bootstrap.open_store(cfg, dsn)
    if agent:
        from foxhunt.training import agents
        from foxhunt.training.rl.episode import check

        check(agents.agent_trading(cfg), args.symbol)
        request = agents.AgentRequest(args.model, args.journals, args.symbol, args.start, args.end, args.seed,
                                      args.device, args.size, False)
        market = await agents.market(store, request, cfg)
        history = await agents.history(store, request, cfg) if args.model == "iql" else None
        return trainables.AgentTrainable(cfg, args.model, args.symbol, args.size, args.device, tuple(args.journals),
                                         market, history, bootstrap.agent_engine, args.start, args.end)
    from foxhunt.training import dataset

    market, sources = await dataset.read_market_data(store, args.journals, args.start, args.end)
    return trainables.ForecasterTrainable(cfg, args.model, args.size, args.device, market, sources, args.start,
                                          args.end)


def _print_tune(outcomes, metric: str, chosen, name: str, stored, location: str) -> None:
    ended = [o.ended for o in outcomes]
    print(f"tune {name}: {len(outcomes)} trials, {ended.count('finished')} finished, {ended.count('stopped')}"
          f" stopped early, {ended.count('failed')} failed")
    print(f"  {'trial':<12}{'ended':<10}{metric:>16}  overrides")
    for o in outcomes:
        mark = "*" if chosen is not None and o.trial == chosen.trial else " "
        value = f"failed: {o.error}" if o.error else _cell(o.metrics.get(metric))
        print(f"{mark} {o.trial:<12}{o.ended:<10}{value:>16}  {' '.join(o.overrides)}")
    if stored is not None:
        mid, new = stored
        print(f"best (*): trial {chosen.trial}, model {mid} in {location}"
              + ("" if new else " (already there: same weights; its manifest is the earlier one's)"))
    else:
        print("no trial finished: nothing stored")


def cmd_ingest(args: argparse.Namespace, cfg: config.Config) -> int:
    feed = bootstrap.ingest_feed(cfg, args.file, args.on_bad_row)
    dsn = bootstrap.resolve_dsn(cfg)

    where = getattr(feed, "progress", None)  # a file's (done, total): bytes of a CSV, rows of a Parquet file
    total = where()[1] if where is not None else None

    async def go():
        store = await bootstrap.open_store(cfg, dsn)
        with _bar(f"ingesting {args.file}", total, args.json, "bytes" if hasattr(feed, "size_bytes") else "rows"
                  ) as progress:
            tick = (lambda rows: progress(where()[0])) if where is not None else progress
            return await ingest(store, cfg, args.journal, feed, bootstrap.fingerprint(), tick)

    _print_summary(_run_async(go), args.json)
    return EXIT_OK


def cmd_journal(args: argparse.Namespace, cfg: config.Config) -> int:
    if args.action == "snapshot":
        with _bar(f"snapshot of {args.journal}", None, False, "events") as progress:
            taken, recovery = bootstrap.snapshot_journal(cfg, args.journal, progress)
        since = f"snapshot at seq {recovery.snapshot.seq}" if recovery.snapshot else "the journal's start"
        print(f"snapshot\tseq {taken.seq}\t{taken.inputs} inputs ({recovery.inputs} fed from {since})"
              f"\t{len(taken.state)} bytes\tstate {taken.state_digest}")
        return EXIT_OK
    if args.action in ("archive", "restore"):
        with _bar(f"{args.action[:-1]}ing {args.journal}", None, False, "events") as progress:
            if args.action == "archive":
                done = bootstrap.archive_journal(cfg, args.journal, args.through, Path(args.to), progress)
            else:
                done = bootstrap.restore_journal(cfg, args.journal, progress)
        for entry in done:
            print(f"{args.action}d\t{entry.from_seq}-{entry.to_seq}\t{entry.location}\tsha256 {entry.sha256}")
        if not done:
            print(f"nothing to {args.action}")
        return EXIT_OK
    dsn = bootstrap.resolve_dsn(cfg)

    async def go():
        store = await bootstrap.open_store(cfg, dsn)
        if args.action == "list":
            for info in await store.list():
                print(f"{info.name}\t{info.events} events\tcreated {info.created_at}\tconfig {info.config_digest}")
            return
        if args.action == "export":
            from foxhunt.runtime.export import export, kinds_of

            kinds = kinds_of(args.kinds)
            total = (await store.info(args.journal)).last_seq
            with _bar(f"exporting {args.journal}", total, args.json, "events") as progress:
                done = await export(store, args.journal, Path(args.out), kinds, args.start, args.end, progress)
            _print_summary(done, args.json)
            return
        if args.action == "show":
            await store.info(args.journal)
            async with aclosing(store.read(args.journal, args.from_seq, args.limit)) as pages:
                async for page in pages:
                    print("\n".join(_format_record(record) for record in page))
            return
        info = await store.info(args.journal)
        start = max(1, info.last_seq - args.count + 1)
        pages = store.tail(args.journal, start) if args.follow else store.read(args.journal, start)
        async with aclosing(pages):
            async for page in pages:
                print("\n".join(_format_record(record) for record in page), flush=args.follow)

    _run_async(go)
    return EXIT_OK


def cmd_admin(args: argparse.Namespace, cfg: config.Config) -> int:
    path = Path(args.socket) if args.socket else bootstrap.admin_socket(cfg)
    if args.line is not None:
        return admin_client.run_one(path, args.line, args.json)
    return admin_client.repl(path, args.json)


def cmd_risk(args: argparse.Namespace, cfg: config.Config) -> int:
    """`risk show`: limits, usage, breakers and trading state; `foxhunt admin -c 'limit set ...'` changes them."""
    path = Path(args.socket) if args.socket else bootstrap.admin_socket(cfg)
    return admin_client.run_one(path, "risk", args.json)


def cmd_train(args: argparse.Namespace, cfg: config.Config) -> int:
    cfg = config.override(cfg, args.sets)
    if args.model in AGENTS:
        return _train_agent(args, cfg)
    if args.record:
        raise ConfigError(f"--record journals an episode of a trading agent ({', '.join(AGENTS)}); a forecaster has"
                          " none")
    from foxhunt.training import train  # torch: imported by the commands that need it, not by every start

    request = train.TrainRequest(args.model, args.journals, args.start, args.end, args.seed, args.device,
                                 args.size, args.resume)
    models = bootstrap.model_store(cfg, args.out)
    if (args.model == "ensemble") != bool(args.members):
        raise ConfigError("--members names an ensemble's members, and only an ensemble's")
    members = train.members(models, args.members, cfg.features) if args.members else []
    if not members:
        cfg.train.model(args.model, args.size)  # a configuration that makes no model fails before any reading
    data_cfg = train.ensemble_config(members, cfg.train) if members else cfg.train
    dsn = bootstrap.resolve_dsn(cfg)

    async def go():
        store = await bootstrap.open_store(cfg, dsn)
        return await train.load(store, request, cfg.features, data_cfg)

    data = _run_async(go)
    if members:
        trained = train.train_ensemble(data, request, args.members, members, cfg.features, data_cfg, models)
    else:
        with _bar(f"training {args.model}", cfg.train.max_steps, args.json, "steps") as update:
            trained = train.train(data, request, cfg.features, cfg.train, models, bootstrap.checkpoint_dir(cfg),
                                  _training(update))
    m = trained.manifest
    if args.json:
        print(msgspec.json.encode(m).decode())
        return EXIT_OK
    t = m.training
    lines = {
        "model": m.model_id, "store": models.location + ("" if trained.stored else " (already there: same weights)"),
        "parameters": m.parameter_sha256, "features": f"{m.feature_set.name} v{m.feature_set.version}",
        "samples": " ".join(f"{k} {v}" for k, v in t["samples"].items()),
    }
    if m.members:
        lines["members"] = ", ".join(ref["model_id"] for ref in m.members)
        lines["weights"] = "; ".join(f"h{h} " + " ".join(f"{w[j]:.3f}" for w in t["weights"])
                                     for j, h in enumerate(m.shape.horizons))
    else:
        lines["steps"] = (f"{t['steps']} (best at {t['best_step']}{', stopped early' if t['stopped_early'] else ''}"
                          f"{', resumed at ' + str(t['resumed_from']) if t['resumed_from'] else ''})")
        lines["validation loss"] = f"{t['best_validation_loss']:.6f}"
    _print_summary(lines, False)
    _print_metrics(m.metrics["test"], "test range")
    return EXIT_OK


def _train_agent(args: argparse.Namespace, cfg: config.Config) -> int:
    from foxhunt.adapters.models import opening
    from foxhunt.training import agents  # torch and gymnasium: imported by the commands that need them
    from foxhunt.training.rl.episode import check, write

    if args.members:
        raise ConfigError("--members names an ensemble's members; an agent has none")
    request = agents.AgentRequest(args.model, args.journals, args.symbol, args.start, args.end, args.seed,
                                  args.device, args.size, args.resume)
    agent_cfg = cfg.agents.agent(args.model, args.size)  # a configuration that makes no agent fails before reading
    trading = agents.agent_trading(cfg)
    check(trading, args.symbol)  # before any data is read
    models = bootstrap.model_store(cfg, args.out)
    dsn = bootstrap.resolve_dsn(cfg)

    async def go():
        store = await bootstrap.open_store(cfg, dsn)
        market = await agents.market(store, request, cfg)
        return market, await agents.history(store, request, cfg) if args.model == "iql" else None

    market, transitions = _run_async(go)
    engine = bootstrap.agent_engine()
    with _bar(f"training {args.model}", agent_cfg.steps, args.json, "steps") as update:
        trained = agents.train(market, request, cfg, models, engine, bootstrap.checkpoint_dir(cfg), _training(update),
                               transitions)
    m = trained.manifest
    recorded = None
    if args.record:
        net, _ = opening.open_agent(models, m.model_id, None)
        episode = agents.record_episode(net, m, market.split(cfg.agents.env.held_out_fraction)[1], engine)

        async def keep():
            return await write(await bootstrap.open_store(cfg, dsn), args.record, episode, trading)

        recorded = _run_async(keep)
    if args.json:
        print(msgspec.json.encode(m).decode())
        return EXIT_OK
    stored = models.location + ("" if trained.stored else " (already there: same weights)")
    lines = agents.summary(m) | {"store": stored}
    if recorded is not None:
        lines["recorded"] = f"journal {args.record}, {recorded} events (foxhunt replay {args.record} --verify)"
    _print_summary(lines, False)
    _print_agent_metrics(m.metrics["held_out"], "held-out range")
    return EXIT_OK


def _print_agent_metrics(result: dict[str, dict[str, float]], where: str) -> None:
    """The agent's and the baselines' metrics, one row per policy."""
    columns = ["pnl_bp", "sharpe", "turnover", "max_drawdown_bp", "fills", "denials"]
    print(f"{where}: {next(iter(result.values()))['episodes']:.0f} episodes of"
          f" {next(iter(result.values()))['steps']:.0f} steps in all")
    print(f"  {'policy':<14}" + "".join(f"{c:>17}" for c in columns))
    for name, metrics in result.items():
        print(f"  {name:<14}" + "".join(f"{metrics[c]:>17.4f}" for c in columns))


def cmd_models(args: argparse.Namespace, cfg: config.Config) -> int:
    from foxhunt.adapters.models.opening import open_model  # torch, as train
    from foxhunt.training import train  # torch: imported by the commands that need it, not by every start

    models = bootstrap.model_store(cfg, args.store)
    if args.action == "list":
        ids = models.ids()
        for mid in ids:
            m = train.manifest(models, mid)
            journals = ",".join(j["journal"] for j in m.training.get("journals", []))
            print(f"{mid}\t{m.arch} {m.size}\t{m.feature_set.name} v{m.feature_set.version}\tseed {m.seed}"
                  f"\tjournals {journals}\tcreated {m.created_at}")
        if not ids:
            print(f"no models in {models.location}")
        return EXIT_OK
    if args.action == "rm":
        train.remove(models, args.model_id)
        print(f"removed {args.model_id} from {models.location}")
        return EXIT_OK
    if train.manifest(models, args.model_id).agent is not None:
        return _agent_models(args, cfg, models)
    if args.action == "show":
        _, m = open_model(models, args.model_id, None)
        print(msgspec.json.format(msgspec.json.encode(m)).decode())
        return EXIT_OK
    model, m = open_model(models, args.model_id, cfg.features.digest())
    data_cfg = train.eval_config(m, cfg.train)
    request = train.TrainRequest(m.arch, args.journals, args.start, args.end, m.seed, "cpu", m.size, False)
    dsn = bootstrap.resolve_dsn(cfg)

    async def go():
        store = await bootstrap.open_store(cfg, dsn)
        return await train.load(store, request, cfg.features, data_cfg, splits=False)

    data = _run_async(go)
    result = train.evaluate(model, data)
    if args.json:
        print(json.dumps(result, sort_keys=True))
    else:
        _print_metrics(result, f"{args.model_id} on {', '.join(args.journals)}")
    return EXIT_OK


def _agent_models(args: argparse.Namespace, cfg: config.Config, models) -> int:
    """`models show` and `models eval` of a trading agent."""
    from foxhunt.adapters.models import opening
    from foxhunt.training import agents  # torch and gymnasium, as train

    if args.action == "show":
        _, m = opening.open_agent(models, args.model_id, None)
        print(msgspec.json.format(msgspec.json.encode(m)).decode())
        return EXIT_OK
    net, m = opening.open_agent(models, args.model_id, cfg.features.digest())
    assert m.agent is not None
    request = agents.AgentRequest(m.arch, args.journals, args.symbol or m.agent.symbol, args.start, args.end,
                                  m.seed, "cpu", m.size, False)
    dsn = bootstrap.resolve_dsn(cfg)

    async def go():
        return await agents.market(await bootstrap.open_store(cfg, dsn), request, cfg)

    result = agents.evaluate(net, m, _run_async(go), bootstrap.agent_engine(), cfg.agents.eval_episodes)
    if args.json:
        print(json.dumps(result, sort_keys=True))
    else:
        _print_agent_metrics(result, f"{args.model_id} on {', '.join(args.journals)}")
    return EXIT_OK


def cmd_web(args: argparse.Namespace, cfg: config.Config) -> int:
    """`foxhunt web serve` (foxhunt/web/), `foxhunt web token add|list|revoke` (foxhunt/web/tokens.py)."""
    from foxhunt.web import serve
    from foxhunt.web.db import Database
    from foxhunt.web.tokens import TokenStore

    sets = ([f"web.listen={json.dumps(args.listen)}"] if getattr(args, "listen", None) else []) + (
        [f"web.journal={json.dumps(args.journal)}"] if getattr(args, "journal", None) else [])
    cfg = config.override(cfg, sets)
    dsn = bootstrap.resolve_dsn(cfg)
    if args.action == "serve":
        async def go():
            store = await bootstrap.open_store(cfg, dsn)
            await serve.serve(bootstrap.web_gateway(cfg, dsn, store), cfg.web)

        _run_async(go)
        return EXIT_OK

    async def tokens():
        await bootstrap.migrate(dsn)
        db = Database(dsn)
        try:
            store = TokenStore(db)
            if args.token_action == "add":
                return await store.add(args.name, args.scope)
            if args.token_action == "list":
                return await store.list()
            return await store.revoke(args.ref)
        finally:
            await db.aclose()

    result = _run_async(tokens)
    if args.token_action == "add":
        token_id, token = result
        print(f"token {token_id} for {args.name} ({args.scope}); it is shown only now, keep it secret:\n{token}")
    elif args.token_action == "list":
        for t in result:
            state = f"revoked {t['revoked_at']}" if t["revoked_at"] else f"last used {t['last_used_at'] or 'never'}"
            print(f"{t['id']:>4}  {t['name']:<20} {t['scope']:<8} made {t['created_at']}  {state}")
    else:
        print(f"revoked token(s) {', '.join(map(str, result))}")
    return EXIT_OK


def cmd_db(args: argparse.Namespace, cfg: config.Config) -> int:
    if args.action == "dsn":
        print(cfg.journal.dsn or bootstrap.embedded_cluster(cfg).dsn)
        return EXIT_OK
    if args.action == "migrate":
        applied = anyio.run(bootstrap.migrate, bootstrap.resolve_dsn(cfg))
        print(f"applied {len(applied)} migration(s){': ' + ', '.join(applied) if applied else ''}")
        return EXIT_OK
    if cfg.journal.dsn:
        raise ConfigError(f"'db {args.action}' manages the embedded cluster, but a DSN is configured (journal.dsn)")
    cluster = bootstrap.embedded_cluster(cfg)
    if args.action == "start":
        print(cluster.start())
    elif args.action == "stop":
        print("stopped" if cluster.stop() else "not running")
    else:
        print(f"{cluster.status()}\t{cluster.data_dir}")
    return EXIT_OK


# --- output --------------------------------------------------------------------------------------


def _format_record(record) -> str:
    ts = dt.datetime.fromtimestamp(record.message.ts_event / 1e9, dt.UTC).isoformat(timespec="microseconds")
    cause = "-" if record.causation is None else str(record.causation)
    body = msgspec.json.encode(record.message).decode()
    return f"{record.seq}\t{cause}\t{type(record.message).__name__}\t{ts}\t{body}"


def _print_summary(summary: dict, as_json: bool) -> None:
    """One JSON object, an aligned table on a terminal (rich), or `key: value` lines for a pipe or a log."""
    if as_json:
        print(json.dumps(summary, sort_keys=True))
        return
    if sys.stdout.isatty():
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        table = Table(show_header=False, box=None, pad_edge=False)
        table.add_column(justify="right", style="bold")
        table.add_column()
        for key, value in summary.items():
            shown = ", ".join(f"{k} {v}" for k, v in value.items()) if isinstance(value, dict) else str(value)
            # Text, not a str: rich reads a str's [markup], and a summary holds a journal's text (symbols, reasons)
            table.add_row(Text(admin_client.printable(str(key))), Text(admin_client.printable(shown)))
        Console().print(table)
        return
    for key, value in summary.items():
        print(admin_client.printable(f"{key:>18}: {value}"))


def _print_metrics(by_horizon: dict, title: str) -> None:
    """Per horizon: samples, IC, hit rate, skill against the zero forecast, pinball per quantile."""
    print(f"\n{title}:")
    first = next(iter(by_horizon.values()))
    quantiles = list(first["pinball"])
    head = ["horizon", "samples", "ic", "hit_rate", "skill_vs_zero"] + [f"pinball@{q}" for q in quantiles]
    print("  ".join(f"{h:>13}" for h in head))
    for horizon, m in by_horizon.items():
        cells = [horizon, m["samples"], f"{m['ic']:.4f}", f"{m['hit_rate']:.4f}", f"{m['skill_vs_zero']:.4f}"]
        cells += [f"{m['pinball'][q]:.3e}" for q in quantiles]
        print("  ".join(f"{c:>13}" for c in cells))


@contextmanager
def _bar(what: str, total: int | None, quiet: bool, unit: str):
    """A progress bar (rich) of a long command on a terminal, with its rate and time left; yields
    `update(done, total=None)` (a total learnt on the way replaces `total`), which does nothing where no bar
    shows (stderr not a terminal: a pipe, a log, systemd; or the output is JSON)."""
    if quiet or not sys.stderr.isatty():
        yield lambda done, total=None, note="": None
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

    columns = (TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(),
               TextColumn("{task.fields[rate]}"), TextColumn("{task.fields[note]}"), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True)) as bar:
        task = bar.add_task(what, total=total, rate="", note="")
        started = time.monotonic()

        def update(done: int, total: int | None = None, note: str = "") -> None:
            rate = done / max(time.monotonic() - started, 1e-9)
            shown = f"{rate / 2**20:,.1f} MiB/s" if unit == "bytes" else f"{rate:,.{1 if rate < 100 else 0}f} {unit}/s"
            if total is not None:
                bar.update(task, total=total)
            bar.update(task, completed=done, rate=shown, note=note)

        yield update


def _training(update: Callable[..., None]) -> Callable[[int, dict[str, float]], None]:
    """What training calls after each step (its step and last losses), shown on the bar."""
    shown = {"loss": "loss", "policy_loss": "policy loss", "validation_loss": "val",
             "held_out_pnl_bp": "held-out pnl bp"}

    def advance(step: int, last: dict[str, float]) -> None:
        update(step, note=" ".join(f"{label} {last[key]:.4f}" for key, label in shown.items() if key in last))

    return advance


def _instrument_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--instrument", action="append", default=[], metavar="SYMBOL:tick_size=X,lot_size=Y,currency=C",
                        help="declare an instrument the configuration does not list (repeat for several)")
    parser.add_argument("--instruments", metavar="FILE.toml",
                        help="declare instruments from a TOML file of [SYMBOL] tables (tick_size, lot_size, currency)")


def _data_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--journal", action="append", required=True, dest="journals", metavar="NAME",
                        help="a journal whose market data to read (repeat for several)")
    parser.add_argument("--from", dest="start", type=_timestamp, metavar="TIME",
                        help="from this time on (ISO 8601, UTC unless it says otherwise)")
    parser.add_argument("--to", dest="end", type=_timestamp, metavar="TIME", help="before this time")


def _model_ids(text: str) -> list[str]:
    ids = [part.strip() for part in text.split(",") if part.strip()]
    if not ids:
        raise argparse.ArgumentTypeError(f"expected model ids separated by commas, got {text!r}")
    return ids


def _timestamp(text: str) -> int:
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a time in ISO 8601 (2024-01-31 or 2024-01-31T09:30), got {text!r}")
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return (when - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(microseconds=1) * 1000


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return int(text)


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value
