"""Long outages, soaked: the paper daemon at a live rate with its database stopped for minutes, then killed
with SIGKILL again and again (issue 27).

Two runs, each on its own journal in a throwaway embedded PostgreSQL:

1. `outage`: `foxhunt run` on a paced synthetic feed (`--rate` quotes a second, wall clock) for `--minutes`;
   `--outage-at` minutes in, the server is stopped with `pg_ctl stop -m immediate` and started again
   `--outage` minutes later. Reported: events lost (the journal must be gap-free and hold every event the
   daemon says it appended), the time from the server accepting connections again to trading ACTIVE (the
   `TradingStateChanged` the kernel derived, stamped with the daemon's wall clock), the daemon's peak
   resident memory while the server was away, what the journal holds of the incident (every event from
   `JournalDegraded` to trading ACTIVE again, by kind, market data apart) per minute of outage, and
   `replay --verify` of the journal.
2. `kills`: the same daemon on a second journal, killed with SIGKILL `--kills` times at random moments and
   started again each time (recovery from the journal and its snapshots). Reported: gaps, orders that
   reached the venue (the wire log) but not the journal (both must be none), and `replay --verify`.

    .venv/bin/python bench/outage_soak.py [--minutes 20 --outage 5 --outage-at 7.5 --rate 20000 --kills 20]

Against an older foxhunt: PYTHONPATH=/path/to/its/checkout (the daemon runs as `python -m foxhunt` with the
same environment). A benchmark, not a test: it takes as long as it is told to. It prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psycopg

from foxhunt import compiled

compiled.check()

from foxhunt.adapters.journal.pg_embedded import EmbeddedCluster  # noqa: E402
from foxhunt.messages import codec  # noqa: E402

MARKET_DATA = ("QuoteTick", "TradeTick", "Bar")
FOXHUNT = [sys.executable, "-m", "foxhunt"]


class Peak:
    """Samples a process's resident memory (VmRSS) four times a second, remembering each sample's time."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.samples: list[tuple[float, int]] = []  # (time.time(), kB)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        status = Path(f"/proc/{self.pid}/status")
        while not self._stop.wait(0.25):
            try:
                kb = next(int(line.split()[1]) for line in status.read_text().splitlines() if line.startswith("VmRSS:"))
            except (OSError, StopIteration):
                return
            self.samples.append((time.time(), kb))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def peak_mib(self, start: float = 0.0, end: float = float("inf")) -> float:
        inside = [kb for t, kb in self.samples if start <= t <= end]
        return round(max(inside, default=0) / 1024, 1)


def journal_id(conn: psycopg.Connection, name: str) -> int:
    return conn.execute("SELECT id FROM journals WHERE name = %s", (name,)).fetchone()[0]


def gap_free(conn: psycopg.Connection, jid: int) -> tuple[int, int]:
    """(events, highest seq): equal when the journal has no gap."""
    count, last = conn.execute("SELECT count(*), coalesce(max(seq), 0) FROM events WHERE journal_id = %s",
                               (jid,)).fetchone()
    return count, last


def incident(conn: psycopg.Connection, jid: int, down: float, back: float) -> dict:
    """What the journal holds from the JournalDegraded of the outage (the first stamped after the server was
    stopped) to trading ACTIVE again after the JournalRecovered that followed it."""
    minutes = (back - down) / 60
    marks = conn.execute(
        "SELECT seq, kind, payload FROM events WHERE journal_id = %s AND kind IN"
        " ('JournalDegraded', 'JournalRecovered', 'TradingStateChanged') ORDER BY seq", (jid,)).fetchall()
    degraded = next((seq for seq, kind, p in marks if kind == "JournalDegraded" and codec.decode(p).ts_init >= down * 1e9),
                    None)
    if degraded is None:
        return {"error": "no JournalDegraded in the journal: the outage was not noticed"}
    recovered = next((seq for seq, kind, _ in marks if kind == "JournalRecovered" and seq > degraded), None)
    changes = [(seq, codec.decode(p)) for seq, kind, p in marks if kind == "TradingStateChanged"]
    active = next(((seq, change) for seq, change in changes
                   if recovered is not None and seq > recovered and change.state.value == "ACTIVE"), None)
    end = active[0] if active is not None else gap_free(conn, jid)[1]
    kinds = conn.execute(
        "SELECT kind, count(*), sum(octet_length(payload)) FROM events WHERE journal_id = %s AND seq BETWEEN %s AND %s"
        " GROUP BY kind ORDER BY count(*) DESC", (jid, degraded, end)).fetchall()
    besides = [(kind, n, size) for kind, n, size in kinds if kind not in MARKET_DATA]
    other_events = sum(n for _, n, _ in besides)
    other_bytes = sum(size for _, _, size in besides)
    return {
        "seq_degraded": degraded, "seq_recovered": recovered, "seq_active": active[0] if active else None,
        "active_ts_init_ns": active[1].ts_init if active else None,
        "by_kind": {kind: n for kind, n, _ in kinds},
        "events_besides_market_data": other_events,
        "events_besides_market_data_per_outage_minute": round(other_events / minutes),
        "payload_bytes_besides_market_data_per_outage_minute": round(other_bytes / minutes),
        "all_events": sum(n for _, n, _ in kinds),
        "stalls_besides_the_outage": sum(1 for seq, kind, _ in marks if kind == "JournalDegraded" and seq != degraded),
    }


def around(conn: psycopg.Connection, jid: int, down: float, back: float, active_ns: int | None) -> dict:
    """What the journal holds besides market data, by kind: in the wall-clock minute before the server went,
    over the outage and in the minute after trading was ACTIVE again (the daemon stamps inputs with the wall
    clock, and a derived event with its input's stamp); and per minute over the whole run."""
    start = int((down - 60) * 1e9)
    end = (active_ns if active_ns is not None else int(back * 1e9)) + 60 * 1_000_000_000
    near = conn.execute(
        "SELECT kind, count(*) FROM events WHERE journal_id = %s AND ts_init BETWEEN %s AND %s GROUP BY kind",
        (jid, start, end)).fetchall()
    whole = conn.execute("SELECT kind, count(*), min(ts_init), max(ts_init) FROM events WHERE journal_id = %s"
                         " GROUP BY kind", (jid,)).fetchall()
    first, last = min(r[2] for r in whole), max(r[3] for r in whole)
    run_minutes = (last - first) / 60e9
    minutes_near = (end - start) / 60e9
    besides_near = {kind: n for kind, n in near if kind not in MARKET_DATA}
    besides = {kind: n for kind, n, _, _ in whole if kind not in MARKET_DATA}
    return {
        "minutes_around_the_outage": round(minutes_near, 2),
        "around_the_outage_besides_market_data": dict(sorted(besides_near.items(), key=lambda kv: -kv[1])),
        "around_the_outage_besides_market_data_total": sum(besides_near.values()),
        "market_data_around_the_outage": sum(n for kind, n in near if kind in MARKET_DATA),
        "whole_run_minutes": round(run_minutes, 2),
        "whole_run_besides_market_data_per_minute": {
            kind: round(n / run_minutes) for kind, n in sorted(besides.items(), key=lambda kv: -kv[1])},
    }


def verify(env: dict, name: str) -> dict:
    started = time.monotonic()
    done = subprocess.run([*FOXHUNT, "replay", name, "--verify", "--json"], env=env, capture_output=True, text=True,
                          check=False)
    out = {"returncode": done.returncode, "seconds": round(time.monotonic() - started, 1)}
    if done.returncode == 0:
        summary = json.loads(done.stdout)
        out["events"] = summary.get("events", summary.get("inputs"))
    else:
        out["stderr"] = done.stderr[-2000:]
    return out


def outage_run(env: dict, cluster: EmbeddedCluster, args, workdir: Path) -> dict:
    name = "soak-outage"
    log_path = workdir / "outage-run.log"
    feed = f"synthetic:seed=1,n=1000000000000,rate={args.rate}"
    with log_path.open("w") as log:
        daemon = subprocess.Popen([*FOXHUNT, "run", "--journal", name, "--feed", feed, "--duration",
                                   str(args.minutes * 60), "--json", "--log-level", "info"],
                                  env=env, stdout=subprocess.PIPE, stderr=log, text=True)
        memory = Peak(daemon.pid)
        started = time.time()
        try:
            time.sleep(args.outage_at * 60)
            down = time.time()
            cluster.stop(mode="immediate")
            time.sleep(args.outage * 60)
            cluster.start()
            back = time.time()
            out, _ = daemon.communicate(timeout=args.minutes * 60 + 600)
        except BaseException:
            daemon.kill()
            raise
        finally:
            memory.stop()
    if daemon.returncode != 0:
        raise SystemExit(f"the daemon failed ({daemon.returncode}): {log_path.read_text()[-3000:]}")
    summary = json.loads(out)
    with psycopg.connect(cluster.dsn) as conn:
        jid = journal_id(conn, name)
        count, last = gap_free(conn, jid)
        facts = incident(conn, jid, down, back)
        nearby = around(conn, jid, down, back, facts.get("active_ts_init_ns"))
    to_active = facts.get("active_ts_init_ns")
    return {
        "journal": name, "events": count, "last_seq": last, "daemon_last_seq": summary.get("last_seq"),
        "events_lost": max(summary.get("last_seq") or 0, last) - count,
        "outage_seconds": round(back - down, 1), "ran_seconds": round(time.time() - started, 1),
        "seconds_from_database_back_to_active": None if to_active is None else round(to_active / 1e9 - back, 2),
        "peak_rss_mib_before_outage": memory.peak_mib(end=down),
        "peak_rss_mib_while_database_away": memory.peak_mib(down, back),
        "peak_rss_mib_whole_run": memory.peak_mib(),
        "incident": facts,
        "around": nearby,
        "verify": verify(env, name),
    }


def submitted(conn: psycopg.Connection, jid: int) -> set[str]:
    rows = conn.execute("SELECT payload FROM events WHERE journal_id = %s AND kind = 'OrderSubmitted'", (jid,))
    return {codec.decode(payload).order_id for (payload,) in rows}


def session_gone(conn: psycopg.Connection, pid: int) -> None:
    """A killed writer's server session holds the journal's lock until the server notices the client is gone."""
    deadline = time.monotonic() + 60
    while conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE %s",
                       (f"foxhunt writer pid={pid} %",)).fetchone()[0]:
        if time.monotonic() > deadline:
            raise SystemExit(f"the killed daemon's server session (pid {pid}) lingers")
        time.sleep(0.05)


def kills_run(env: dict, cluster: EmbeddedCluster, args, workdir: Path) -> dict:
    name = "soak-kills"
    wire = workdir / "wire.jsonl"
    env = {**env, "FOXHUNT_RUN__WIRE_LOG": str(wire), "FOXHUNT_JOURNAL__SNAPSHOT_AFTER": "100000"}
    rng = random.Random(27)
    gaps, missing_total, ran = 0, 0, []
    with psycopg.connect(cluster.dsn, autocommit=True) as conn:
        for cycle in range(args.kills):
            log_path = workdir / f"kill-{cycle}.log"
            with log_path.open("w") as log:
                daemon = subprocess.Popen(
                    [*FOXHUNT, "run", "--journal", name, "--log-level", "info",
                     "--feed", f"synthetic:seed={cycle},n=1000000000000,rate={args.rate}"],
                    env=env, stdout=subprocess.DEVNULL, stderr=log)
                alive = rng.uniform(3.0, 12.0)
                time.sleep(alive)
                if daemon.poll() is not None:
                    raise SystemExit(f"cycle {cycle}: the daemon ended early: {log_path.read_text()[-3000:]}")
                daemon.kill()
                daemon.wait()
            ran.append(round(alive, 1))
            session_gone(conn, daemon.pid)
            jid = journal_id(conn, name)
            count, last = gap_free(conn, jid)
            gaps += last - count
            sent = {json.loads(line)["order_id"] for line in wire.read_text().splitlines() if '"SubmitOrder"' in line}
            missing_total += len(sent - submitted(conn, jid))
        count, last = gap_free(conn, journal_id(conn, name))
    return {"journal": name, "kills": args.kills, "seconds_alive": ran, "events": count, "gaps": gaps,
            "orders_sent_not_journaled": missing_total, "orders_sent": len(sent), "verify": verify(env, name)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=20.0, help="length of the outage run")
    parser.add_argument("--outage", type=float, default=5.0, help="minutes the database is away")
    parser.add_argument("--outage-at", type=float, default=7.5, help="minutes into the run it goes")
    parser.add_argument("--rate", type=int, default=20_000, help="quotes a second")
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--skip", choices=["outage", "kills"], help="leave one of the runs out")
    parser.add_argument("--state-dir", help="for the embedded PostgreSQL (default: a new temporary directory)")
    parser.add_argument("--report", nargs=3, metavar=("JOURNAL", "DOWN", "BACK"),
                        help="run nothing: report on a journal of --state-dir whose server was stopped at DOWN and"
                             " back at BACK (Unix time, seconds)")
    args = parser.parse_args()
    workdir = Path(args.state_dir or tempfile.mkdtemp(prefix="fh-soak-"))
    env = {**os.environ, "FOXHUNT_STATE_DIR": str(workdir)}
    cluster = EmbeddedCluster(workdir)
    subprocess.run([*FOXHUNT, "db", "start"], env=env, check=True, capture_output=True)
    env["FOXHUNT_DSN"] = cluster.dsn
    result: dict = {"rate": args.rate, "state_dir": str(workdir), "python_path": os.environ.get("PYTHONPATH", "")}
    if args.report:
        name, down, back = args.report[0], float(args.report[1]), float(args.report[2])
        with psycopg.connect(cluster.dsn) as conn:
            jid = journal_id(conn, name)
            facts = incident(conn, jid, down, back)
            result["report"] = {"incident": facts, "around": around(conn, jid, down, back, facts.get("active_ts_init_ns"))}
        print(json.dumps(result, indent=1))
        return
    try:
        if args.skip != "outage":
            result["outage"] = outage_run(env, cluster, args, workdir)
            print(json.dumps(result["outage"]), file=sys.stderr, flush=True)
        if args.skip != "kills":
            result["kills"] = kills_run(env, cluster, args, workdir)
    finally:
        cluster.stop()
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
