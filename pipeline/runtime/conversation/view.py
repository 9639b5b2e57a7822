"""What every call of a turn shows of the conversation, worked out once per turn.

A turn's calls share its history and its summary: each call used to rebuild the history's
messages (escaping every past text), count their tokens and render the summary's section.
A `ConversationView` does that once for a turn's `(history, summary)` and keeps, per way of
counting, each turn's cost (its messages' tokens plus `MESSAGE_OVERHEAD` each) and their
total, so fitting a call whose history plainly fits is a comparison, and cutting one walks
the saved costs instead of counting again. The messages of each past turn are kept between
turns too (`TurnMessages`): the next turn's history is this one's plus one, and only the new
turn is escaped and counted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from soul.providers import Message
from soul.runtime.conversation.budget import MESSAGE_OVERHEAD, Counter
from soul.runtime.conversation.history import ConversationSummary, HistoryTurn, merged

TURN_CACHE = 1024  # past turns whose messages are kept (a session's recent turns recur every turn)

Count = Callable[[Counter, str], int]


class TurnMessages:
    """Each past turn's messages, kept between turns (a turn is a value: equal turns share)."""

    def __init__(self) -> None:
        self._known: dict[HistoryTurn, tuple[Message, ...]] = {}
        # per turn's messages (by identity, the messages kept) and way of counting: their tokens
        self._costs: dict[tuple[int, bool], tuple[tuple[Message, ...], int]] = {}

    def __call__(self, turn: HistoryTurn) -> tuple[Message, ...]:
        found = self._known.get(turn)
        if found is None:
            if len(self._known) >= TURN_CACHE:
                self._known.clear()
            found = self._known[turn] = turn.messages()
        return found

    def cost(self, messages: tuple[Message, ...], counter: Counter, count: Count) -> int:
        """The tokens of a turn's `messages` (as this returned them), with `MESSAGE_OVERHEAD`
        each, counted once: the same turns are shown turn after turn."""
        key = (id(messages), counter.exact)
        found = self._costs.get(key)
        if found is not None and found[0] is messages:
            return found[1]
        if len(self._costs) >= 2 * TURN_CACHE:
            self._costs.clear()
        cost = sum(count(counter, m.content) + MESSAGE_OVERHEAD for m in messages)
        self._costs[key] = (messages, cost)
        return cost


class ConversationView:
    """A turn's history and summary as its calls show them: the summary's section, each past
    turn's messages, and (per counter) each turn's token cost, counted once."""

    __slots__ = ("_costs", "_merged", "_tail", "_turns", "history", "summary", "summary_text", "turn_messages")

    def __init__(self, history: Sequence[HistoryTurn], summary: ConversationSummary | None, messages: TurnMessages) -> None:
        self.history = history
        self.summary = summary
        self.summary_text = summary.section() if summary else ""
        self.turn_messages = tuple(messages(turn) for turn in history)
        self._turns = messages
        self._costs: dict[bool, tuple[tuple[int, ...], int]] = {}
        self._merged: list[Message] | None = None
        self._tail: tuple[str | None, tuple[Message, ...]] = (None, ())

    def costs(self, counter: Counter, count: Count) -> tuple[tuple[int, ...], int]:
        """Each turn's tokens (with the per-message overhead) and their sum, under `counter`."""
        found = self._costs.get(counter.exact)
        if found is None:
            cost = self._turns.cost
            each = tuple([cost(messages, counter, count) for messages in self.turn_messages])
            found = self._costs[counter.exact] = (each, sum(each))
        return found

    def tail(self, user: str) -> tuple[Message, ...]:
        """The whole history and then the input `user` as messages, roles alternating (a last
        turn that got no reply is merged into the input); kept for the turn's next call."""
        if self._tail[0] is user:
            return self._tail[1]
        history = self.messages()
        if history and history[-1].role == "user":
            last = history.pop()
            tail = (*history, Message("user", f"{last.content}\n\n{user}"))
        else:
            tail = (*history, Message("user", user))
        self._tail = (user, tail)
        return tail

    def labels(self, start: int = 0) -> list[str]:
        """Beside each of `messages(start)`, which turns it holds and whose it is (`turn 3 ·
        user`, `turns 3–4 · user` when merged): the context window's labels."""
        spans: list[list[Any]] = []  # first turn, last turn, role
        for turn, messages in zip(self.history[start:], self.turn_messages[start:], strict=True):
            for message in messages:
                if spans and spans[-1][2] == message.role:
                    spans[-1][1] = turn.number
                else:
                    spans.append([turn.number, turn.number, message.role])
        return [f"turn {first} · {'user' if role == 'user' else 'soul'}" if first == last
                else f"turns {first}–{last} · {'user' if role == 'user' else 'soul'}" for first, last, role in spans]

    def messages(self, start: int = 0) -> list[Message]:
        """The turns from `start` on as chat messages, one role never twice in a row (a new
        list: the caller may change it)."""
        if start:
            return merged(self.turn_messages[start:])
        if self._merged is None:
            self._merged = merged(self.turn_messages)
        return list(self._merged)

