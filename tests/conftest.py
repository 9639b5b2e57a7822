"""Shared fixtures: no test touches the real soul home."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def soul_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("soul-home")
    monkeypatch.setenv("SOUL_HOME", str(home))
    # a SOUL_STORE set around the suite would send every test to one shared database
    monkeypatch.delenv("SOUL_STORE", raising=False)
    return home
