"""Where each part of a call's prompt lies: recorded while the prompt is built, so the context
window of any stored turn can be shown part by part (`window.py` reads it back).

A prompt is built from pieces (the persona, the mood, the soul state, the user model, the
summary, each working-memory region, the steering, this turn so far, the response format, each
turn of the history, the current message) joined into messages. A `Piece` is a text with the
spans of the parts in it; joining pieces joins their texts and shifts their spans, the
separator going to the piece before it, so the spans of a message cover every character of it
exactly once. The record kept in the trace is plain data:
`{"spans": [[part, label, message, start, end], ...], "messages": N}` — N, the number of
messages the builder made (re-asks and tool rounds add more to the call: `window.py` names them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

# The parts of a prompt, as the context window names them (docs/observability.md).
PERSONA = "persona"
MOOD = "mood & criteria"
STATE = "soul state"
USER_MODEL = "user model"
SUMMARY = "summary"
MEMORY = "working memory"
RECALLED = "recalled memories"
STEERING = "steering"
THIS_TURN = "this turn so far"
FORMAT = "response format"
TOOLS = "tools"
HISTORY = "history"
MESSAGE = "message"
IMPULSES = "impulses"
REASK = "re-ask"
TOOL_ROUND = "tool round"
TEMPLATE = "chat template"
OTHER = "other"

Span = tuple[str, str, int, int]  # part, label, start, end (within one message)


class Piece(NamedTuple):
    """A text and the spans of the parts in it (offsets into `text`). A named tuple: a prompt
    is built from ~20 of them a turn, and a frozen dataclass's init costs several times more."""

    text: str
    spans: tuple[Span, ...]


EMPTY = Piece("", ())


def piece(part: str, text: str, label: str = "") -> Piece:
    """A text that is one part."""
    return Piece(text, ((part, label, 0, len(text)),)) if text else EMPTY


def join(pieces: Sequence[Piece], sep: str = "\n\n") -> Piece:
    """`sep.join` of the non-empty pieces' texts, their spans shifted; a separator belongs to the
    span before it."""
    texts: list[str] = []
    spans: list[Span] = []
    at = 0
    for p in pieces:
        if not p.text:
            continue
        if texts:
            part, label, start, end = spans[-1]
            spans[-1] = (part, label, start, end + len(sep))
            at += len(sep)
        texts.append(p.text)
        spans.extend((part, label, start + at, end + at) for part, label, start, end in p.spans)
        at += len(p.text)
    return Piece(sep.join(texts), tuple(spans))


def headed(heading: str, body: Piece) -> Piece:
    """`heading` before `body`, the heading counted with the body's first span."""
    if not body.text:
        return EMPTY
    shift = len(heading)
    spans = [(part, label, start + shift, end + shift) for part, label, start, end in body.spans]
    part, label, _, end = spans[0]
    spans[0] = (part, label, 0, end)
    return Piece(heading + body.text, tuple(spans))


class Layout:
    """The spans of a call's messages, message by message."""

    def __init__(self) -> None:
        self.spans: list[list[Any]] = []
        self.messages = 0

    def add(self, content: Piece) -> None:
        """The next message, whose text is `content.text`."""
        self.spans.extend([part, label, self.messages, start, end] for part, label, start, end in content.spans)
        self.messages += 1

    def to_dict(self) -> dict[str, Any]:
        return {"spans": self.spans, "messages": self.messages}
