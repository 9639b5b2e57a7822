"""A reply's checks: what a model call's reply lacks, holds empty, refuses or repeats of its
instructions, and the request that asks for it once more (`calls.py` makes the calls).

A required section may be missing; a reply section may be empty (the user would see
nothing); a kind may refuse what a section holds (`StepKind.refusals`, which asks `Seen`
whether a text was said before); a section that reads as text may repeat the instructions
(`soul.sections.echo`). `reask` words the problems for the model; `FALLBACK_REPLY` is what
a reply step says when nothing readable is left.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from soul.compiler import PlannedStep
from soul.kinds import Section
from soul.sections import Instructions, StepParse

FALLBACK_REPLY = "I had a thought but couldn't form a response."
REPLY_KINDS = ("external_dialogue",)


def reask(missing: Sequence[str], tags: Sequence[str], empty: Sequence[str] = (),
          refused: Mapping[str, str] | None = None, echoes: Sequence[Echo] = ()) -> str:
    """The request that asks for a reply once more: its problems, and the sections in order."""
    order = " ".join(f"<{t}>" for t in tags)
    problems = []
    for echo in echoes:
        problems.append(f"<{echo.tag}> repeats the instructions (\"{echo.what}\") instead of doing what they ask; "
                        "write it in your own words")
    if missing:
        problems.append(
            f"the section{'s' if len(missing) > 1 else ''} "
            f"{', '.join(f'<{m}>' for m in missing)} {'are' if len(missing) > 1 else 'is'} missing"
        )
    if empty:
        problems.append(f"{', '.join(f'<{m}>' for m in empty)} {'are' if len(empty) > 1 else 'is'} empty")
    problems.extend(f"<{tag}> {reason}" for tag, reason in (refused or {}).items())
    return (
        f"Your reply could not be read: {'; '.join(problems)}. "
        f"Write the whole reply again with every section, in this order: {order}"
    )


class Seen:
    """`soul.kinds.Seen` over one call: what the turn said before it (the user's message,
    earlier steps' text; normalised once, when first asked) and one reply's sections."""

    __slots__ = ("_known", "_plain_known", "sections")

    def __init__(self, known: Sequence[str]) -> None:
        self._known = known
        self._plain_known: tuple[str, ...] | None = None
        self.sections: Mapping[str, Any] = {}

    def holds(self, text: str, besides: str) -> bool:
        wanted = _plain(text)
        if not wanted:
            return False
        if self._plain_known is None:
            self._plain_known = tuple(_plain(k) for k in self._known)
        if any(wanted in k for k in self._plain_known):
            return True
        return any(tag != besides and wanted in _plain(section.text) for tag, section in self.sections.items())


def _plain(text: str) -> str:
    """Case and runs of whitespace aside: how a copy is recognised."""
    return " ".join(text.casefold().split())


def refusals(steps: Sequence[PlannedStep], parses: dict[str, StepParse], seen: Seen,
              gated_off: Callable[[str, dict[str, StepParse]], bool] | None) -> dict[str, dict[str, str]]:
    """Per step, the sections its kind refuses in this reply (a gated-off step's do not count)."""
    out: dict[str, dict[str, str]] = {}
    for step in steps:
        found = step.kind.refusals(parses[step.name].outputs, seen)
        if found and not (gated_off and gated_off(step.name, parses)):
            out[step.name] = dict(found)
    return out


@dataclass(frozen=True, slots=True)
class Echo:
    """A section whose text repeats the instructions: which step and output, and what of them."""

    step: str
    tag: str
    output: str
    what: str


def echoes_of(echoing: Sequence[tuple[PlannedStep, Sequence[Section]]], parses: dict[str, StepParse], instructions: Instructions | None,
            gated_off: Callable[[str, dict[str, StepParse]], bool] | None = None) -> list[Echo]:
    """The sections of this reply that repeat the call's instructions (a gated-off step's do
    not count: its outputs are not used, as its missing sections and refusals do not count).
    Only sections that read as text can: `echoing`, the call's `CallShape.echoing`."""
    if instructions is None:
        return []
    found = []
    for step, sections in echoing:
        if gated_off and gated_off(step.name, parses):
            continue
        outputs = parses[step.name].outputs
        for section in sections:
            value = outputs.get(section.output)
            if isinstance(value, str) and value.strip() and value.strip() != step.kind.silence:
                what = instructions.echoed(value)
                if what is not None:
                    found.append(Echo(step.name, section.tag, section.output, what))
    return found


def empty_reply(step: PlannedStep, parse: StepParse) -> bool:
    """Whether a reply step's section was written but holds nothing the user could read."""
    if step.kind.name not in REPLY_KINDS or parse.missing:
        return False
    text = parse.outputs.get("text")
    return text is None or not str(text).strip()
