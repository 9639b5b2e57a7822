"""What the API returns about a soul and its sessions: plain JSON built from the Python API
(`Soul`, `SessionStore`, the session's `Mind`), with nothing computed that the runtime does
not already know. Every text goes out redacted (`wire.encode`, or the caller's JSON response)."""

from __future__ import annotations

import dataclasses
from typing import Any

from soul.store import redact_data

HISTORY_MESSAGES = 500  # the newest messages a page is sent when it opens a session


def soul_view(soul: Any) -> dict[str, Any]:
    """The soul's name, description and which panels have something to show."""
    blueprint = soul.blueprint
    steps = {name: step.kind.name for name, step in soul.plan.turn.steps.items()}
    return {
        "name": soul.name,
        "description": blueprint.description or "",
        "steps": steps,
        "processes": list(blueprint.processes),
        "triggers": list(blueprint.triggers),
        "chetana": bool(blueprint.chetana),
        "memory": bool(blueprint.memory),
        "dialogue": bool(getattr(blueprint, "dialogue", None)),
    }


def session_info(info: Any) -> dict[str, Any]:
    return dataclasses.asdict(info)


def background_view(session: Any) -> dict[str, Any] | None:
    """The subconscious now: each loop's status, the mood and criteria, impulses pending."""
    work = getattr(session, "work", None)
    if work is None:
        return None
    mind = session.mind
    return {
        "loops": {name: {"status": proc.runner.status, "cycle": proc.mind.cycle} for name, proc in work.processes.items()},
        "process": mind.process if mind is not None else None,
        "cycle": mind.cycle if mind is not None else 0,
        "mood": mind.mood if mind is not None else "",
        "criteria": mind.criteria if mind is not None else "",
        "pending": list(mind.pending) if mind is not None else [],
    }


def history(store: Any, session_id: str, limit: int = HISTORY_MESSAGES) -> list[dict[str, Any]]:
    """The newest `limit` messages, oldest first. A soul's message in a turn that has no
    user message was spontaneous (a trigger spoke): marked so the chat can show it."""
    rows = store.messages(session_id)[-limit:]
    asked = {turn for turn, m, _ in rows if m.tag == "user"}
    out = []
    for turn, m, at in rows:
        item = {"turn": turn, "layer": m.layer, "tag": m.tag, "content": m.content, "step": m.step,
                "verb": m.verb, "meta": m.meta, "time": at}
        if m.layer == "external" and m.tag != "user" and turn not in asked:
            item["spontaneous"] = True
        out.append(item)
    return out


def session_view(store: Any, info: Any, session: Any = None) -> dict[str, Any]:
    """A session as a page opens it: its info, its history, its background work."""
    return redact_data({
        "session": session_info(info),
        "messages": history(store, info.id),
        "background": background_view(session) if session is not None else None,
    })


def layers_view(soul: Any, layers: dict[str, Any]) -> dict[str, Any]:
    """A session's layers (`SessionStore.layers`) as the page shows them: the soul state with
    every declared key (defaults where the session set none), the rest as the store gives it."""
    state = layers.get("state")
    shown = soul.plan.initial_state(state or {}) if layers.get("state_known", True) else None
    return redact_data({**layers, "state": shown, "state_declared": list(soul.blueprint.state)})
