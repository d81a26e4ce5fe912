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
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
