"""Dialogues: a blueprint's `dialogue:` block run as several souls speaking in turn.

`runner` runs it (`DialogueRunner`: speaker, line, observer, memory, metrics); `agents`
makes each agent's blueprint and provider from the dialogue's; `store` saves and resumes a
dialogue's state. The rules (speakers, seeds, energy, Fixy's detectors, metrics) come from
the engine through the bridge `runtime.bridges.dialogue`.
"""

from soul.runtime.dialogue.runner import DialogueRunner
from soul.runtime.dialogue.store import DialogueResult, dialogues_dir

__all__ = [
    "DialogueResult",
    "DialogueRunner",
    "dialogues_dir",
]
