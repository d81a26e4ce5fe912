"""Run the gateway: uvicorn serving the app (app.py) on [web] listen, on the event loop of the command.

uvicorn stops on SIGTERM or SIGINT, finishing the requests in flight (at most 10 s), then ends the process
with that signal, as systemd expects of a clean stop. Under systemd (scripts/foxhunt-web.service)
the gateway says READY=1 once it listens, so a unit ordered after it starts when it can be used.
"""

from __future__ import annotations

import ipaddress
import sys

import structlog
import uvicorn

from foxhunt.adapters.systemd import Notifier
from foxhunt.config import WebConfig
from foxhunt.web.app import Gateway, build_app

log = structlog.get_logger("foxhunt.web")


class _Server(uvicorn.Server):
    async def startup(self, sockets=None) -> None:
        await super().startup(sockets)
        if self.started:
            url = listening_url(self.config.host, self.config.port)
            # said on stderr whatever the log level: the one line a person starting it by hand looks for
            print(f"foxhunt web: listening on {url} (the dashboard; the API under {url}api/)", file=sys.stderr,
                  flush=True)
            log.info("web_listening", url=url)
            Notifier().ready(f"listening on {url}")


def listening_url(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


async def serve(gateway: Gateway, web: WebConfig) -> None:
    host, port = web.address()
    if not _loopback(host):
        log.warning("web_listening_beyond_loopback", host=host, port=port,
                    advice="serve it behind a reverse proxy that terminates TLS, and set web.secure_cookies")
    server = _Server(uvicorn.Config(
        # no permessage-deflate: compressing every frame was a third of what a stream cost the gateway's CPU,
        # which it shares with the daemon (bench/web_stream.py); a proxy on a slow link may compress instead
        build_app(gateway), host=host, port=port, loop="none", lifespan="on", ws="websockets-sansio", log_config=None,
        ws_per_message_deflate=False,
        access_log=False, proxy_headers=bool(web.forwarded_allow_ips),
        forwarded_allow_ips=web.forwarded_allow_ips or None, server_header=False, timeout_graceful_shutdown=10,
    ))
    await server.serve()


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
