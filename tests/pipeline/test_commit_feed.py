"""What another process's commit stands for (`soul.runtime.durable.feed.commit_events`): the
events `Session.stream`/`subscribe` give in-process, read from the stored commit alone."""

from __future__ import annotations

from typing import Any

import pytest

from soul.records import MessageRecord
from soul.runtime import (
    CycleFinished,
    ImpulseQueued,
    MoodChanged,
    Reply,
    StepFinished,
    StepStarted,
    SubprocessFinished,
    TurnCommitted,
    commit_events,
)
from soul.store import StoredCommit


def stored(kind: str, *messages: MessageRecord, mood: tuple[str, str] | None = None,
           steps: dict[str, tuple[str, str, dict[str, Any]]] | None = None, process: str | None = None,
           cycle: int | None = None, pending: int = 0) -> StoredCommit:
    steps = steps or {}
    return StoredCommit("s1", 7, kind, 3, process, cycle, 0.0, messages, mood,
                        {name: out for name, (_, _, out) in steps.items()}, pending,
                        {name: (kind_, status) for name, (kind_, status, _) in steps.items()})


def msg(layer: str, tag: str, content: str, **meta: Any) -> MessageRecord:
    return MessageRecord(layer, tag, content, None, None, meta)


SUB = {"sub": ("s_loud", "ran", {"loud": "say hi", "quiet": "hm"})}
TURN = {"think": ("internal_dialog", "ran", {"quiet": "q", "loud": "hi"}),
        "gated": ("user_model_check", "skipped", {})}


@pytest.mark.parametrize(("commit", "events"), [
    (stored("cycle", msg("subconscious", "S_loud", " say hi ", trigger=True), mood=("calm", "be brief"),
            steps=SUB, process="subconscious", cycle=2, pending=1),
     [CycleFinished("subconscious", 2, {"sub": {"loud": "say hi", "quiet": "hm"}}),
      MoodChanged("subconscious", 2, "calm", "be brief"),
      ImpulseQueued("subconscious", 2, "say hi", True, 1)]),
    (stored("cycle", process="subconscious", cycle=10), []),  # a commit of summaries only
    (stored("subprocess", process="learn"), [SubprocessFinished("learn", True)]),
    (stored("spontaneous", msg("external", "ID_loud", "hi"), steps=TURN),
     [StepStarted("think", "internal_dialog"), StepFinished("think", {"quiet": "q", "loud": "hi"}, True),
      Reply("hi", True), TurnCommitted("s1", 3)]),
    (stored("spontaneous", steps={}), [TurnCommitted("s1", 3)]),  # it said nothing: no Reply
    (stored("message", msg("external", "user", "hello"), msg("external", "ID_loud", "hi")),
     [Reply("hi", False), TurnCommitted("s1", 3)]),
])
def test_a_stored_commit_gives_the_events_its_process_announced(commit: StoredCommit, events: list[Any]) -> None:
    assert commit_events(commit) == events
