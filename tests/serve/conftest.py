"""Fixtures for the `soul serve` tests: servers in subprocesses, and the system Chromium
driven by Playwright (launched with `executable_path`: Playwright's own browser download is
never used).

`browser`, `context` and `page` are ours, not pytest-playwright's: its session-wide
Playwright keeps an event loop running in the main thread for the rest of the run, and every
later test that calls `asyncio.run` would fail. Ours starts Playwright for this folder's
browser tests and stops it after them."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from serving import SKIP_REASON, Server, find_chromium, screenshot_folder


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    path = find_chromium()
    if path is None:
        pytest.skip(SKIP_REASON)
    from playwright.sync_api import sync_playwright

    args = ["--no-sandbox"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []  # root (CI containers)
    playwright = sync_playwright().start()
    try:
        launched = playwright.chromium.launch(executable_path=path, args=args, headless=True)
        yield launched
        launched.close()
    finally:
        playwright.stop()


@pytest.fixture
def context(browser: Any) -> Iterator[Any]:
    made = browser.new_context(viewport={"width": 1400, "height": 950})
    yield made
    made.close()


@pytest.fixture
def page(context: Any) -> Any:
    return context.new_page()


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    """Start `soul serve SOUL ARGS...` (home: tmp_path/home); every server stops at the end."""
    started: list[Server] = []

    def start(soul: str, *args: str, home: Path | None = None, **options: Any) -> Server:
        server = Server(soul, home or tmp_path / "home", *args, **options)
        started.append(server)
        return server.wait()

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    """Where this test saves its screenshots: a temp folder, or $SOUL_SCREENSHOTS (docs/img to
    refresh the docs' pictures: `SOUL_SCREENSHOTS=docs/img pytest tests/serve`)."""
    return screenshot_folder(tmp_path)
