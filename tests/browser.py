"""Debian's Chromium, driven by Playwright, for the tests that open a page as a user would (the report, the
dashboard): a page whose console errors and uncaught exceptions are collected, and screenshots kept."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
# Chromium's own connections are refused on a closed network: these flags keep it from trying
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


@contextmanager
def chromium_page(width: int, height: int) -> Iterator[tuple[object, list[str]]]:
    """A headless page and the list its console errors and page errors go to."""
    from playwright.sync_api import sync_playwright

    assert Path(CHROMIUM).exists(), "scripts/setup test installs Debian's chromium for the browser tests"
    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            yield page, errors
        finally:
            browser.close()


def keep(*screenshots: Path) -> None:
    """Copy screenshots to FOXHUNT_TEST_ARTIFACTS where that is set (they stay in the test's directory too)."""
    if artifacts := os.environ.get("FOXHUNT_TEST_ARTIFACTS"):
        for shot in screenshots:
            shutil.copy(shot, Path(artifacts) / shot.name)
    print(f"screenshots: {', '.join(map(str, screenshots))}")
