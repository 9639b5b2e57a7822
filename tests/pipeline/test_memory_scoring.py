"""A soul's field reads a `scoring.json` created while the soul runs, after the field was
first used (issue 24, 15e): before, only a file present when the field opened was watched."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import soul
from soul.providers.scripted import ScriptedProvider

pytest.importorskip("numpy")
pytest.importorskip("onnxruntime")

BLUEPRINT = """\
soul: scorer
version: 1
memory:
  field: field
  recall: {mode: resonate, k: 3}
  store: {episodes: true}
steps:
  recall: {uses: memory.recall, with: {region: context}}
  reply: {uses: external_dialogue, after: [recall]}
"""


def test_a_scoring_json_written_between_turns_is_used_by_the_next(write_blueprint, soul_home: Path) -> None:  # type: ignore[no-untyped-def]
    path = write_blueprint(BLUEPRINT)
    provider = ScriptedProvider([f"<external_dialogue>Reply {i}.</external_dialogue>" for i in range(3)])
    with soul.load(path, provider=provider, home=soul_home) as s:
        session = s.session(user="ada")
        session.turn_sync("My cat is called Miso.")
        session.turn_sync("What is my cat called?")  # the field has scored with the defaults
        field = s.memory_field()
        scoring = path.parent / "field" / "scoring.json"
        assert field.scorer.config.source != str(scoring)
        scoring.write_text(json.dumps({"factors": {"Kind": {"weight": 2.5}}}))
        time.sleep(1.1)  # the scorer stats its file at most once a second
        session.turn_sync("And her colour?")
        assert field.scorer.config.source == str(scoring)
        assert field.scorer.config.factor("Kind").weight == 2.5
