"""How fast an operator is answered while the daemon trades flat out (docs/benchmarks.md, "The admin socket").

A paper daemon (`foxhunt run`, ema_cross) takes a synthetic feed as fast as its loop goes, on the wall
clock, with a silent client and a junk client connected to its admin socket. Meanwhile an operator, as
`foxhunt admin -c` does (a connection per request), asks `status` and sends `halt` and `resume` with a
reason, `--rounds` times each, a fresh connection each time: the time from connecting to the answer,
p50, p99 and max, and the daemon's input rate meanwhile. `--hog N` runs N busy processes beside it (a
machine overloaded, as CI's with the test suite on it).

    .venv/bin/python bench/admin_latency.py [--rounds 30] [--hog 0] [--warmup 5]

Uses FOXHUNT_DSN, or the embedded cluster in FOXHUNT_STATE_DIR (a temporary one when neither is set).
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

from foxhunt.admin.client import Connection

HOG = "while True: pass"


def shown(seconds: list[float]) -> str:
    ms = np.asarray(seconds) * 1e3
    return (f"p50 {np.percentile(ms, 50):.1f} ms, p99 {np.percentile(ms, 99):.1f} ms, max {ms.max():.1f} ms"
            f" ({ms.size} requests)")


def ask(path: Path, *argv: str) -> tuple[float, dict]:
    started = time.perf_counter()
    conn = Connection(path, timeout=60)
    try:
        reply = conn.ask(list(argv))
    finally:
        conn.close()
    took = time.perf_counter() - started
    if not reply.ok:
        raise SystemExit(f"the daemon refused {argv}: {reply.error}")
    return took, reply.result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--hog", type=int, default=0, help="busy processes beside the daemon")
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds of trading before the first request")
    args = parser.parse_args()
    env = dict(os.environ)
    place = Path(tempfile.mkdtemp(prefix="fh-bench-admin-", dir="/tmp"))
    os.chmod(place, 0o755)  # the embedded cluster may run as another user (as root: foxhunt)
    if not env.get("FOXHUNT_DSN") and not env.get("FOXHUNT_STATE_DIR"):
        env["FOXHUNT_STATE_DIR"] = str(place / "state")
        os.makedirs(env["FOXHUNT_STATE_DIR"])
        os.chmod(env["FOXHUNT_STATE_DIR"], 0o755)
    sock = place / "admin.sock"
    (place / "foxhunt.toml").write_text(f'[admin]\nsocket = "{sock}"\n')
    journal = f"bench-admin-{uuid.uuid4().hex[:8]}"
    daemon = subprocess.Popen(
        [sys.executable, "-m", "foxhunt", "run", "--journal", journal, "--config", str(place / "foxhunt.toml"),
         "--feed", "synthetic:seed=3,n=1000000000", "--clock", "wall"], env=env, stdout=subprocess.DEVNULL,
        stderr=open(place / "daemon.log", "w"))
    hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(args.hog)]
    try:
        deadline = time.monotonic() + 120
        while not sock.exists():
            if daemon.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the daemon did not start:\n{(place / 'daemon.log').read_text()[-3000:]}")
            time.sleep(0.1)
        time.sleep(args.warmup)
        silent = socket.socket(socket.AF_UNIX)
        silent.connect(str(sock))
        junk = socket.socket(socket.AF_UNIX)
        junk.connect(str(sock))
        junk.sendall(b"\x7f\xff\xff\xffGET / HTTP/1.1\r\n")
        _, before = ask(sock, "status")
        started = time.monotonic()
        queries, commands = [], []
        for i in range(args.rounds):
            queries.append(ask(sock, "status")[0])
            commands.append(ask(sock, "halt", "--reason", f"bench round {i}")[0])
            commands.append(ask(sock, "resume", "--reason", f"bench round {i}")[0])
        took = time.monotonic() - started
        _, after = ask(sock, "status")
        silent.close()
        junk.close()
        rate = (after["inputs"] - before["inputs"]) / took
        print(f"machine: {os.cpu_count()} cores, {args.hog} busy processes beside the daemon;"
              f" the daemon took {rate:,.0f} inputs/s meanwhile (a silent and a junk client connected)")
        print(f"status (query): {shown(queries)}")
        print(f"halt/resume (command, answered once journaled): {shown(commands)}")
    finally:
        for hog in hogs:
            hog.kill()
        daemon.terminate()
        daemon.wait(timeout=60)


if __name__ == "__main__":
    main()
