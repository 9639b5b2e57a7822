"""Dialogue blueprints and scripts for the dialogue tests (tests/pipeline/test_dialogue*.py)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import yaml

# Two agents and Fixy. round_robin alternates a, b; Fixy's schedule (every 1000) never comes,
# so Fixy speaks only when a detector fires; only the reference's five detectors run (no
# embedder needed), and the conflict index of each agent is fixed.
HAND = """\
soul: hand
version: 1
model: local
steps:
  reply: {uses: external_dialogue}
dialogue:
  seed: 3
  topics: [freedom]
  agents:
    a: {persona: a.md, drives: {conflict: 2}}
    b: {persona: b.md, drives: {conflict: 6}}
    fixy: {persona: fixy.md}
  speaker_policy: {kind: round_robin, first: a}
  observer:
    agent: fixy
    every: 1000
    detectors: [circular_reasoning, high_conflict, shallow_discussion, synthesis_opportunity, meta_reflection]
"""

# What each says, in order. Keywords (words over 4 letters): a1 = a2 (the one circular pair,
# turns 1 and 3); every other turn's words are its own; no synthesis, conflict or depth marker.
HAND_SCRIPT = {
    "a": ["Liberty demands careful judgement.", "Liberty demands careful judgement.",
          "Mountains stand quietly.", "Seasons change slowly."],
    "b": ["Rivers follow their valleys downhill.", "Gardens bloom after patient watering.",
          "Lanterns glow inside windows.", "Bridges cross wide canyons."],
    "fixy": ["Consider what these images share.", "Name one example please."],
}


def write_dialogue(folder: Path, blueprint: str, script: dict[str, list[str]] | None = None, **files: str) -> Path:
    """`soul.yaml` (+ personas a.md, b.md, fixy.md and `files`) in `folder`; the script as
    script.yaml beside it. Returns the blueprint's path."""
    folder.mkdir(parents=True, exist_ok=True)
    personas = {"a.md": "You are A, who asks.", "b.md": "You are B, who answers.", "fixy.md": "You are Fixy, the observer."}
    for name, text in {**personas, **files}.items():
        (folder / name).write_text(textwrap.dedent(text))
    path = folder / "soul.yaml"
    path.write_text(textwrap.dedent(blueprint))
    if script is not None:
        (folder / "script.yaml").write_text(yaml.safe_dump(script, allow_unicode=True))
    return path
