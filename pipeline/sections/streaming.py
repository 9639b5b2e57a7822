"""Streaming: the text of chosen sections as a reply arrives, chunk by chunk.

Built on the scanner of `soul.sections.xmlparse`, so a streamed section's text, concatenated, equals
what `extract_sections` parses from the whole reply. Besides what the scanner holds back
(a partial tag, entity or CDATA marker), a section's leading whitespace, its trailing
whitespace and a trailing line that could be a markdown fence are held until more text shows
whether they belong inside: the parsed text is stripped, and a fence left by an unclosed
section is dropped.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from soul.sections.xmlparse import BY_END, OPEN, TEXT, Scanner, drop_fence_tail

__all__ = ["Closed", "Opened", "SectionStream", "Text"]

# A line that may still grow into a fence line (```xml): held back until it shows otherwise.
_FENCE_START = re.compile(r"[ \t]*`+[\w+.-]{0,32}")


@dataclass(frozen=True)
class Opened:
    """A known section opened (its attributes are complete)."""

    tag: str
    attributes: dict[str, str]


@dataclass(frozen=True)
class Text:
    """Decoded text of a streamed section."""

    tag: str
    text: str


@dataclass(frozen=True)
class Closed:
    """A known section ended (by its closing tag, the next known tag, or the end of the reply)."""

    tag: str


Event = Opened | Text | Closed


class SectionStream:
    """An incremental, tag-aware parser of one reply.

    `Opened` and `Closed` come for every known tag (a dropped duplicate gives none), `Text`
    only for the tags in `stream_tags`: never for text outside sections or inside other
    sections. Chunks may split anywhere. Never raises on any text.
    """

    def __init__(self, tags: Sequence[str], stream_tags: Collection[str]) -> None:
        self._scanner = Scanner(tags)
        lowered = {tag.lower() for tag in stream_tags}
        self._streamed = {tag for tag in self._scanner.canonical.values() if tag.lower() in lowered}
        self.opened: set[str] = set()
        self._pending = ""  # text of the streamed section not yet emitted
        self._started = False  # whether its first non-whitespace text was emitted
        self._done = False

    @property
    def repairs(self) -> tuple[str, ...]:
        """What the scanner repaired so far (as in `ParseResult.repairs`)."""
        return tuple(self._scanner.repairs)

    def feed(self, chunk: str) -> list[Event]:
        """Events for the next chunk of the reply."""
        if self._done:
            return []
        return self._translate(self._scanner.feed(chunk))

    def close(self) -> list[Event]:
        """End of reply: flush held text and close a section left open."""
        if self._done:
            return []
        self._done = True
        return self._translate(self._scanner.feed("", final=True))

    def _translate(self, events: list[tuple]) -> list[Event]:
        out: list[Event] = []
        for event in events:
            kind, tag = event[0], event[1]
            if kind == TEXT:
                if tag in self._streamed:
                    text = self._take(event[2])
                    if text:
                        out.append(Text(tag, text))
            elif kind == OPEN:
                self.opened.add(tag)
                self._pending, self._started = "", False
                out.append(Opened(tag, event[2]))
            else:
                if tag in self._streamed:
                    text = self._flush(at_end=event[2] == BY_END)
                    if text:
                        out.append(Text(tag, text))
                out.append(Closed(tag))
        return out

    def _take(self, text: str) -> str:
        """What of the pending text is safe to emit now."""
        pending = self._pending + text
        if not self._started:
            pending = pending.lstrip()
            if not pending:
                self._pending = ""
                return ""
            self._started = True
        keep = len(pending.rstrip())
        newline = pending.rfind("\n", 0, keep)
        if newline >= 0 and _FENCE_START.fullmatch(pending, newline + 1, keep):
            keep = len(pending[:newline].rstrip())
        self._pending = pending[keep:]
        return pending[:keep]

    def _flush(self, at_end: bool) -> str:
        """The rest of the section's text when it ends."""
        text = self._pending.rstrip() if self._started else self._pending.strip()
        self._pending, self._started = "", False
        return drop_fence_tail(text) if at_end else text
