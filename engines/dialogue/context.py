"""The context builder: the budgeted prompt an agent answers each turn.

Sections, in order: who the agent is (name, persona), drives, style, the seed, the last 8
turns (200 characters each), recent thoughts (6 STM entries, 150 characters each), key
memories (the 5 LTM entries of highest `ltm_relevance`, 150 characters each), relevant
memories the caller supplies (e.g. the resonance engine's recalls), and "Respond now:".
Over the character budget, parts go in the reverse of the spec's priority (persona →
dialogue tail → relevant LTM → STM): first STM lines (oldest first), then the caller's
memories, then LTM lines (least relevant first), then dialogue lines (oldest first), and
last the persona text is cut. The seed and "Respond now:" always stay.

`build_context_parts` returns the same prompt in two parts, for a caller that keeps trusted
and untrusted text apart: `system` — who the agent is, drives, style, the seed (the
blueprint's and the rules' own words) — and `dialogue` — the dialogue's tail, thoughts and
memories (what models said) and "Respond now:". `build_context` is the two joined.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .memory import MemoryEntry, select_memories
from .persona import Drives, conflict_index
from .turns import Turn

__all__ = ["ContextParts", "ContextRequest", "build_context", "build_context_parts"]

RESPOND = "Respond now:"


@dataclass(frozen=True)
class ContextRequest:
    """Everything the context builder reads. `persona` is the persona text (already formatted
    for a rich persona: `format_persona`); `stm` and `ltm` are the agent's entries (or plain
    strings for STM); `recalled` are extra relevant memories from the caller; `budget` is
    the prompt's maximum length in characters."""

    name: str
    persona: str = ""
    drives: Drives | None = None
    style: str = ""
    seed: str = ""
    topic: str = ""
    history: tuple[Turn, ...] = ()
    stm: tuple[MemoryEntry | str, ...] = ()
    ltm: tuple[MemoryEntry, ...] = ()
    recalled: tuple[str, ...] = field(default_factory=tuple)
    budget: int = 6000
    tail_turns: int = 8
    turn_chars: int = 200
    stm_items: int = 6
    stm_chars: int = 150
    ltm_items: int = 5
    ltm_chars: int = 150


def _flat(text: str, limit: int) -> str:
    # one line per item: model text cannot open a fake section with a newline
    return " ".join(text[:limit * 2].split())[:limit]


def _section(title: str, lines: Sequence[str]) -> str:
    return f"{title}\n" + "\n".join(lines) if lines else ""


@dataclass(frozen=True)
class ContextParts:
    """The prompt of `build_context` in two parts: `system` (persona, drives, style, seed: the
    trusted text) and `dialogue` (the dialogue's tail, thoughts, memories, "Respond now:": what
    models said). `text` is the whole prompt, as `build_context` returns it."""

    system: str
    dialogue: str

    @property
    def text(self) -> str:
        return "\n\n".join(p for p in (self.system, self.dialogue) if p)


def build_context(request: ContextRequest) -> str:
    """The prompt text for `request`, at most `request.budget` characters (see the module
    docstring for the sections and what gives way first)."""
    return build_context_parts(request).text


def build_context_parts(request: ContextRequest) -> ContextParts:
    """`build_context`'s prompt split into its trusted `system` part and its `dialogue` part
    (see `ContextParts`); both together are at most `request.budget` characters."""
    r = request
    persona = r.persona.strip()
    head = persona if persona.startswith(f"You are {r.name}") else (f"You are {r.name}.\n{persona}" if persona else f"You are {r.name}.")
    fixed: list[str] = []
    if r.drives is not None:
        d = r.drives
        fixed.append(f"Drives: id {d.id:g}, ego {d.ego:g}, superego {d.superego:g}, "
                     f"self-awareness {d.self_awareness:g}, conflict index {conflict_index(d):g}")
    if r.style:
        fixed.append(f"Style: {_flat(r.style, 300)}")
    seed = f"Seed:\n{r.seed.strip()}" if r.seed.strip() else ""
    tail = [f"{t.speaker}: {_flat(t.text, r.turn_chars)}" for t in r.history[-r.tail_turns:]] if r.tail_turns > 0 else []
    stm_texts = [e if isinstance(e, str) else e.content for e in r.stm]
    stm = [f"- {_flat(s, r.stm_chars)}" for s in stm_texts[-r.stm_items:] if s.strip()] if r.stm_items > 0 else []
    recent = [t.text for t in r.history[-3:]]
    ltm = [f"- {_flat(e.content, r.ltm_chars)}" for e in select_memories(r.ltm, r.topic, recent, r.ltm_items)
           if e.content.strip()] if r.ltm_items > 0 else []
    recalled = [f"- {_flat(s, r.ltm_chars)}" for s in r.recalled if s.strip()]

    def split() -> ContextParts:
        trusted = [head, *fixed, seed]
        told = [_section("Recent dialogue:", tail), _section("Recent thoughts:", stm),
                _section("Key memories:", ltm), _section("Relevant memories:", recalled), RESPOND]
        return ContextParts("\n\n".join(p for p in trusted if p), "\n\n".join(p for p in told if p))

    def render() -> str:
        return split().text

    text = render()
    # give way in the reverse of the spec's priority; the LTM list is most relevant first
    for lines, oldest_first in ((stm, True), (recalled, False), (ltm, False), (tail, True)):
        while lines and len(text) > r.budget:
            lines.pop(0 if oldest_first else -1)
            text = render()
    if len(text) > r.budget:
        over = len(text) - r.budget
        keep = max(len(head) - over - 1, 0)
        head = head[:keep] + "…" if keep else ""
        text = render()
    if len(text) > r.budget and seed:
        # a seed longer than the budget is cut too, so "Respond now:" still ends the prompt
        seed = seed[:max(len(seed) - (len(text) - r.budget) - 1, 0)] + "…"
        text = render()
    if len(text) > r.budget:  # a tiny budget: every untrusted line is gone by now
        return ContextParts(text[:r.budget], "")
    return split()
