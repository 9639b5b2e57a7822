"""Fixtures for the front half: write a blueprint (and files beside it) into a temp folder."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from soul.compiler.validation import Checked, validate

Write = Callable[..., Path]


@pytest.fixture
def write_blueprint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Write:
    """Write `soul.yaml` (dedented) plus any extra files; cwd is the folder, so errors say soul.yaml."""
    monkeypatch.chdir(tmp_path)

    def write(text: str, **files: str) -> Path:
        for name, content in files.items():
            target = tmp_path / name.replace("__", os.sep)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(textwrap.dedent(content))
        path = tmp_path / "soul.yaml"
        path.write_text(textwrap.dedent(text).lstrip("\n"))
        return path

    return write


@pytest.fixture
def check(write_blueprint: Write) -> Callable[..., list[str]]:
    """Validate a blueprint text; the diagnostics as their one-line form."""

    def run(text: str, **files: str) -> list[str]:
        checked: Checked = validate(write_blueprint(text, **files))
        return [d.format() for d in checked.diagnostics]

    return run
