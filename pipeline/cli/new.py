"""`soul new`: a blueprint and its persona, valid as written, with the schema modeline."""

from __future__ import annotations

import re
from importlib.resources import files
from pathlib import Path

from soul.errors import SoulError

NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_-]*$")

BLUEPRINT = """\
# yaml-language-server: $schema={schema}
soul: {name}
version: 1
description: {title}, a soul written with soulgraph.
persona: {name}.md
model: local            # the bundled offline model; or anthropic/..., openai/..., a slot name
mode: fused             # one model call per turn; `chained` makes one call per step

state:
  mood:
    default: calm
    description: how {title} feels right now

steps:
  think:
    uses: internal_monologue
  reply:
    uses: external_dialogue
    after: [think]
    stream: true
  user_check:
    uses: user_model_check
    after: [reply]
  user_update:
    uses: user_model_update
    after: [user_check]
    when: steps.user_check.result
"""

PERSONA = """\
# {title}

## Persona
You are {title}. Describe here who the soul is: its history, what it cares about, what it
will and will not do.

## Speaking Style
Describe here how {title} speaks: length, tone, habits.
"""


def schema_path() -> str:
    """Where the installed schema file is, for the modeline."""
    return str(files("soul.schemas").joinpath("blueprint.schema.json"))


def scaffold(name: str, folder: Path) -> list[Path]:
    """Write NAME.yaml and NAME.md into `folder`; never overwrites."""
    if not NAME_PATTERN.match(name):
        raise SoulError(f"invalid soul name '{name}': use lowercase letters, digits, _ and -, starting with a letter")
    folder.mkdir(parents=True, exist_ok=True)
    title = name.replace("_", " ").replace("-", " ").title()
    targets = {
        folder / f"{name}.yaml": BLUEPRINT.format(schema=schema_path(), name=name, title=title),
        folder / f"{name}.md": PERSONA.format(title=title),
    }
    existing = [str(p) for p in targets if p.exists()]
    if existing:
        raise SoulError(f"{', '.join(existing)} already exist{'s' if len(existing) == 1 else ''}; choose another name or --dir")
    for path, text in targets.items():
        path.write_text(text, encoding="utf-8")
    return list(targets)
