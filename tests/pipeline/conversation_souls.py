"""A small fused soul for the conversation tests (history, budget, summaries): a thought and a
reply on a `main` slot, summaries on a `cheap` slot, each served by its own scripted list."""

from __future__ import annotations

import asyncio
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import soul
from soul.providers import ScriptedProvider

BLUEPRINT = """\
soul: talker
version: 1
model: main
models:
  main: {{provider: local, context_window: {window}, max_tokens: {reserve}}}
  cheap: local
working_memory:
  limits: {{default: {limit}}}
steps:
  think: {{uses: internal_monologue{think}}}
  reply: {{uses: external_dialogue, after: [think]}}
"""


def reply(text: str, thought: str = "Short thought.") -> str:
    return f'<internal_monologue verb="thought">{thought}</internal_monologue><external_dialogue verb="said">{text}</external_dialogue>'


def write_soul(folder: Path, *, window: int = 131072, reserve: int = 256, limit: int = 12, think: str = "") -> Path:
    path = folder / "talker.yaml"
    path.write_text(BLUEPRINT.format(window=window, reserve=reserve, limit=limit, think=think))
    return path


def load(folder: Path, main: Sequence[str], cheap: Sequence[str] = (), **options: Any) -> tuple[Any, ScriptedProvider, ScriptedProvider]:
    """The soul, its main slot's provider and its summary slot's provider."""
    turns, summaries = ScriptedProvider(list(main)), ScriptedProvider(list(cheap))
    s = soul.load(write_soul(folder, **options), provider={"main": turns, "cheap": summaries}, home=folder / "home")
    return s, turns, summaries


def converse(session: Any, messages: Sequence[str]) -> list[Any]:
    async def go() -> list[Any]:
        return [await session.turn(m) for m in messages]

    return asyncio.run(go())


def dedent(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")
