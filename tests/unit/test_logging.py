"""Logging (observability/logging.py): lines go to whatever sys.stderr is when they are written."""

from __future__ import annotations

import io
import json
import sys

import structlog

from foxhunt.observability import logging as fh_logging


def test_a_line_goes_to_the_stderr_of_its_time_not_to_a_closed_one_of_the_configuration(monkeypatch):
    earlier, now = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stderr", earlier)
    fh_logging.configure("info", json=True)  # as cli.main does, under a capture that later ends
    log = structlog.get_logger("foxhunt.test")
    log.info("first", n=1)
    earlier.close()
    monkeypatch.setattr(sys, "stderr", now)
    log.info("second", n=2)  # a logger bound before: it used to raise "I/O operation on closed file"
    assert [json.loads(line)["event"] for line in now.getvalue().splitlines()] == ["second"]
