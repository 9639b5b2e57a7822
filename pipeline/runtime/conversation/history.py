"""The conversation as the models see it: this session's turns as speaker-labelled messages.

Each turn leaves two working-memory entries in the `default` region (the Claudius seed's
thread): the user's message (`userMessage`) and the soul's reply (`externalDialog`), both
labelled with the turn's number, its kind and the step that wrote them. From them a call gets
its history: per turn a `user` message (`ada: ...`, or a marker for a spontaneous turn, which
no one asked for) and an `assistant` message (the reply), oldest first, before the current
message. Consecutive messages of one role are merged, so every provider gets alternating
roles. Text is escaped like every untrusted text in a prompt.

When the history outgrows what its calls show, the older turns fold into a running summary
(`runtime/conversation/summaries.py`): a `conversationSummary` entry in the `summary` region (and a row of
`context_summaries`), which covers turns `turn_from`..`turn_to`; the history then starts after
it, and the summary enters the prompt ahead of the kept turns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from soul.providers import Message
from soul.records import MemoryEntry
from soul.runtime.untrusted import escape_untrusted

USER_TYPE = "userMessage"
REPLY_TYPE = "externalDialog"
SUMMARY_TYPE = "conversationSummary"
HISTORY_TYPES = frozenset({USER_TYPE, REPLY_TYPE})
SUMMARY_REGION = "summary"
SPONTANEOUS = "[spontaneous turn: no one had spoken; what follows you said on your own]"


class HistoryTurn(NamedTuple):
    """One past turn: who spoke and what, and what the soul replied ("" when it kept quiet).
    A named tuple: a turn rebuilds its history from the store's entries, and looks each past
    turn's messages up by it (`view.TurnMessages`), so making, hashing and comparing it is in C."""

    number: int
    kind: str  # message | spontaneous
    user: str
    text: str
    reply: str

    def messages(self) -> tuple[Message, ...]:
        asked = SPONTANEOUS if self.kind == "spontaneous" else f"{self.user}: {escape_untrusted(self.text)}"
        out = [Message("user", asked)]
        if self.reply:
            out.append(Message("assistant", escape_untrusted(self.reply)))
        return tuple(out)

    def line(self, soul: str) -> str:
        """The turn as one entry of a summary's input."""
        said = f"(turn {self.number}) " + ("(spontaneous)" if self.kind == "spontaneous" else f"{self.user}: {self.text}")
        return f"{said}\n{soul}: {self.reply or '(no reply)'}"


@dataclass(frozen=True)
class ConversationSummary:
    """The running summary of turns `turn_from`..`turn_to`; `digest` when a truncation digest
    stands in for a summary the model could not write."""

    text: str
    turn_from: int
    turn_to: int
    digest: bool = False

    def section(self) -> str:
        what = "a digest" if self.digest else "a summary"
        return (f"## Earlier in This Conversation\n({what} of turns {self.turn_from}–{self.turn_to})\n"
                + escape_untrusted(self.text))


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def history_of(entries: Sequence[MemoryEntry], user: str) -> tuple[tuple[HistoryTurn, ...], ConversationSummary | None]:
    """The turns after the latest summary, and that summary, from working-memory entries in
    the order they were stored. Entries written before turns were labelled (no `turn` in
    their meta) are paired in order: a message starts a turn, a reply answers it."""
    reading = HistoryReading(user)
    reading.read(entries)
    return reading.result()


class HistoryReading:
    """`history_of` as a reading that can go on: `read` takes entries in the order they were
    stored, and may be called again with the entries stored since (a session's next turn reads
    only what the last commit added: `runtime/turn/memory_reading.py`); `copy` is an
    independent reading to go on from. Only the last turn can still change (a reply answers
    it): the turns before it are closed, kept as made, and those after the summary kept apart."""

    __slots__ = ("after", "closed", "counter", "last", "shown", "summary", "user")

    def __init__(self, user: str) -> None:
        self.user = user
        self.summary: ConversationSummary | None = None
        self.after = 0  # the turns shown are those numbered after it (the summary's last)
        self.closed: list[HistoryTurn] = []  # every turn but the last, in order
        self.shown: list[HistoryTurn] = []  # those of them after the summary
        self.last: list[Any] | None = None  # the last turn: [number, kind, user, text, reply]
        self.counter = 0

    def copy(self) -> HistoryReading:
        other = HistoryReading.__new__(HistoryReading)
        other.user, other.summary, other.after, other.counter = self.user, self.summary, self.after, self.counter
        other.closed, other.shown = self.closed.copy(), self.shown.copy()
        other.last = self.last.copy() if self.last is not None else None
        return other

    def read(self, entries: Sequence[MemoryEntry]) -> None:
        """Go on with `entries`, stored after those read so far."""
        user, last, counter = self.user, self.last, self.counter
        for entry in entries:
            kind = entry.entry_type
            if kind == SUMMARY_TYPE:
                meta = entry.meta
                self.summary = ConversationSummary(entry.content, _int(meta.get("turn_from")) or 1,
                                                   _int(meta.get("turn_to")) or 0, bool(meta.get("digest")))
                after = self.after = self.summary.turn_to
                self.shown = [turn for turn in self.closed if turn.number > after]
                continue
            if kind not in HISTORY_TYPES:
                continue
            meta = entry.meta
            labelled = _int(meta.get("turn"))
            if kind == USER_TYPE:
                counter = labelled or counter + 1
                last = self._close(last, [counter, "message", str(meta.get("user") or user), entry.content, ""])
                continue
            number = labelled or counter
            if last is not None and last[0] == number and not last[4]:
                last[4] = entry.content
            elif last is not None and last[0] == number:
                last[4] += "\n\n" + entry.content
            else:
                counter = number if labelled else counter + 1
                last = self._close(last, [counter, "spontaneous", user, "", entry.content])
        self.last, self.counter = last, counter

    def _close(self, last: list[Any] | None, opened: list[Any]) -> list[Any]:
        """`opened` starts a turn: the last one is closed."""
        if last is not None:
            turn = HistoryTurn(*last)
            self.closed.append(turn)
            if turn.number > self.after:
                self.shown.append(turn)
        return opened

    def result(self) -> tuple[tuple[HistoryTurn, ...], ConversationSummary | None]:
        """The turns after the latest summary read so far, and that summary."""
        last = self.last
        if last is not None and last[0] > self.after:
            return (*self.shown, HistoryTurn(*last)), self.summary
        return tuple(self.shown), self.summary


def messages_of(turns: Sequence[HistoryTurn]) -> list[Message]:
    """The turns as chat messages, consecutive messages of one role merged."""
    return merged([turn.messages() for turn in turns])


def merged(turns: Sequence[Sequence[Message]]) -> list[Message]:
    """Each turn's messages in one list, consecutive messages of one role merged."""
    out: list[Message] = []
    for messages in turns:
        for message in messages:
            if out and out[-1].role == message.role:
                out[-1] = Message(message.role, f"{out[-1].content}\n\n{message.content}")
            else:
                out.append(message)
    return out


def labelled_messages(turns: Sequence[HistoryTurn]) -> tuple[list[Message], list[str]]:
    """`messages_of(turns)`, and beside each message which turns it holds and whose it is
    (`turn 3 · user`, `turns 3–4 · user` when merged): the context window's labels."""
    out: list[Message] = []
    labels: list[str] = []
    spans: list[tuple[int, int]] = []
    for turn in turns:
        for message in turn.messages():
            if out and out[-1].role == message.role:
                out[-1] = Message(message.role, f"{out[-1].content}\n\n{message.content}")
                spans[-1] = (spans[-1][0], turn.number)
            else:
                out.append(message)
                spans.append((turn.number, turn.number))
    for (first, last), message in zip(spans, out, strict=True):
        who = "user" if message.role == "user" else "soul"
        labels.append(f"turn {first} · {who}" if first == last else f"turns {first}–{last} · {who}")
    return out, labels


def labelled(entry: MemoryEntry, step: str, kind: str, turn: int, extra: Mapping[str, Any] | None = None) -> MemoryEntry:
    """`entry` carrying the step and kind that wrote it and the turn it came from."""
    if extra:
        meta = {"step": step, "kind": kind, "turn": turn, **extra, **entry.meta}
    else:
        meta = {"step": step, "kind": kind, "turn": turn, **entry.meta}
    return MemoryEntry(entry.region, entry.entry_type, entry.content, entry.verb, meta)


def label_of(entry: MemoryEntry) -> str:
    """How an entry is shown in the prompt's working memory: `[turn 3 · think, internal_monologue]`."""
    meta = entry.meta
    parts = []
    if _int(meta.get("turn")):
        parts.append(f"turn {meta['turn']}")
    source = ", ".join(str(meta[k]) for k in ("step", "kind") if meta.get(k))
    if source:
        parts.append(source)
    return f"[{' · '.join(parts)}] " if parts else ""
