"""structlog configuration: JSON lines when stderr is not a terminal (systemd, CI), readable otherwise.

structlog's JSONRenderer always passes `default=` to its serializer, which msgspec's encoder does not
take, so JSON lines are rendered by a small processor of our own around one msgspec encoder.
"""

from __future__ import annotations

import logging
import sys

import msgspec
import structlog

_json = msgspec.json.Encoder(enc_hook=str)


def _render_json(_logger, _name, event_dict) -> str:
    return _json.encode(event_dict).decode()


class _Stderr:
    """Whatever `sys.stderr` is when a line is written, not what it was when logging was configured: a caller
    that swaps it (a test's capture, a redirect) and closes its own does not leave the logger on a closed file."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure(level: str = "info", json: bool | None = None) -> None:
    json = (not sys.stderr.isatty()) if json is None else json
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            _render_json if json else structlog.dev.ConsoleRenderer(colors=False),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelNamesMapping()[level.upper()]),
        logger_factory=structlog.PrintLoggerFactory(file=_Stderr()),
        cache_logger_on_first_use=True,
    )
