"""A turn's result gathered for the store: the reply in plan order, the one `Commit` the session
store applies atomically, and what goes to the memory field once it has committed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from soul.compiler import Plan
from soul.records import Commit, MemoryEntry, MessageRecord, Snapshot, UserModelChange
from soul.runtime.conversation import REPLY_TYPE, USER_TYPE, labelled
from soul.runtime.events import Trace
from soul.runtime.turn.context import TurnState


def reply_of(ts: TurnState, order: Sequence[str]) -> str:
    """The turn's reply so far: its steps' replies in plan order."""
    return "\n\n".join(c.reply for c in (ts.changes.get(name) for name in order) if c is not None and c.reply)


def build_commit(snapshot: Snapshot, ts: TurnState, order: Sequence[str], kind: str, trace: Trace, reply: str | None = None,
                 events: Sequence[MessageRecord] = (), **fields: Any) -> tuple[Commit, str]:
    """The turn's Commit and its reply (`reply_of`, when not given), from the accumulated
    changes in plan order; `events` (the engine's records) go after the steps' messages, and
    `fields` are the Commit's other fields (Chetana's state, the memory items, the fence): the
    Commit is made once, whole."""
    messages: list[MessageRecord] = []
    memory: list[MemoryEntry] = []
    number = ts.ctx.number
    if kind == "message":
        messages.append(MessageRecord("external", "user", ts.ctx.text, meta={"user": ts.ctx.user}))
        memory.append(MemoryEntry("default", USER_TYPE, ts.ctx.text, meta={"turn": number, "user": ts.ctx.user, "kind": "user"}))
    state_changed = False
    user_model: UserModelChange | None = None
    for name in order:
        changes = ts.changes.get(name)
        if changes is None:
            continue
        messages.extend(changes.messages)
        if changes.memory:
            label = ts.labels.get(name)
            # each entry labelled with the step, kind and turn that wrote it (entries a step
            # labelled itself keep their own labels: theirs come last in `labelled`)
            memory.extend(changes.memory if label is None else (labelled(e, name, label, number) for e in changes.memory))
        state_changed = state_changed or bool(changes.state)
        user_model = changes.user_model or user_model
    if reply is None:
        reply = reply_of(ts, order)
    if reply and kind in ("message", "spontaneous"):  # the soul's side of the conversation
        said = {"turn": number, "step": "reply", "kind": "soul"} | ({"spontaneous": True} if kind == "spontaneous" else {})
        memory.append(MemoryEntry("default", REPLY_TYPE, reply, meta=said))
    commit = Commit(
        session_id=snapshot.session.id,
        base_turn=snapshot.session.turns,
        messages=(*messages, *events) if events else tuple(messages),
        state=dict(ts.ctx.state) if state_changed else None,
        user_model=user_model,
        memory=tuple(memory) + tuple(ts.folded),
        trace=trace,  # encoded by the store as it stands (`soul.store.logs.dumps_fields`)
        kind=kind,  # type: ignore[arg-type]
        summaries=tuple(ts.summaries),
        **fields,
    )
    return commit, reply


def memory_items(plan: Plan, ts: TurnState, order: Sequence[str], reply: str, kind: str) -> list[dict[str, Any]]:
    """What to write to the memory field once the turn has committed: memory.store requests
    (an empty content means the exchange) and what the `memory.store` block asks for."""
    soul = plan.blueprint.name
    exchange = f"{ts.ctx.user}: {ts.ctx.text}\n{soul}: {reply}".strip() if kind == "message" else reply
    items: list[dict[str, Any]] = []
    for name in order:
        changes = ts.changes.get(name)
        for item in changes.remember if changes else ():
            items.append({**item, "text": item["text"] or exchange})
    block = plan.blueprint.memory
    if block is None or block.get("enabled", True) is False:
        return items
    wanted = block.get("store") or {}
    if wanted.get("episodes") and kind == "message" and reply:
        items.append({"text": exchange, "kind": "episode", "source": "turn"})
    if wanted.get("corrections") and ts.cognition is not None and ts.cognition.correction:
        items.append({"text": f"{ts.ctx.user} corrected {soul}: {ts.ctx.text}", "kind": "correction", "source": "user"})
    if wanted.get("user_facts"):
        for name in order:
            changes = ts.changes.get(name)
            if changes is not None and changes.user_model is not None:
                items.append({"text": f"About {ts.ctx.user}: {changes.user_model.note}", "kind": "preference", "source": "user_model"})
    return items
