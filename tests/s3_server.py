"""A real S3-compatible HTTP server for the tests (moto's standalone server, in a subprocess), behind a TCP
proxy that can cut an upload half way, as a network that fails does."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class BreakingProxy:
    """Forwards TCP connections to `upstream`; while `breaking`, a connection that sends more than
    `after` bytes is cut there, as a network that fails in the middle of an upload."""

    def __init__(self, upstream: int, after: int = 2048) -> None:
        self.upstream, self.after, self.breaking = upstream, after, False
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.cuts = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.upstream))
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, upload: bool) -> None:
        sent = 0
        try:
            while data := src.recv(65536):
                if upload and self.breaking and sent + len(data) > self.after:
                    dst.sendall(data[: self.after - sent])
                    self.cuts += 1
                    break
                dst.sendall(data)
                sent += len(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self) -> None:
        self.listener.close()


@contextmanager
def s3_server():
    """moto's S3 server in a subprocess, and a BreakingProxy in front of it (what clients connect to)."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    else:
        server.kill()
        raise RuntimeError("moto's S3 server did not start")
    proxy = BreakingProxy(port)
    try:
        yield proxy
    finally:
        proxy.close()
        server.terminate()
        server.wait(timeout=10)
