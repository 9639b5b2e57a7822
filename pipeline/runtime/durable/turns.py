"""A user turn sent by another process (`runtime/routing.py`), run in the worker that owns the
user's memory partition: the step of the workflow `soul.user_turn`.

The workflow is keyed by (session, base turn, text), so it is run once however often it is
sent. Its step may still run twice: a worker killed mid-turn leaves it PENDING and a survivor
runs it again (`runtime/durable/recovery.py`). So it first looks at the store:

- the session is still at the base turn: the turn runs here, holding the partition's lease,
  and commits with its fence (`Session.turn`);
- the session is past it, and a turn after the base is this text's: the killed run had
  committed it; its stored result is the answer (no model call, nothing written twice, and
  the memories it had not yet written are caught up from the store when the partition opens);
- the session is past it with other turns only: the turn runs now, after them, as a message
  sent while another turn ran does in-process.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from soul.runtime.souls import Soul


async def run_user_turn(soul: Soul, session_id: str, base: int, text: str) -> dict[str, Any]:
    """Run (or find, when a killed run had committed it) the user turn `text` of `session_id`
    at `base`; its reply, turn number, kind and step outputs, as plain data."""
    store = soul.store
    info = store.session(session_id)
    for turn in range(base + 1, info.turns + 1):
        stored = store.turn_commit(session_id, turn)
        if stored is not None and [m.content for m in stored.messages if m.tag == "user"] == [text]:
            reply = "".join(m.content for m in stored.messages if m.layer == "external" and m.tag != "user")
            if soul.memory.partitions() is not None:  # its memories, if the killed run had not written them
                await asyncio.to_thread(soul.memory.for_user(info.user).hold)
            return {"reply": reply, "turn": stored.turn, "kind": stored.kind, "steps": stored.steps}
    session = soul.session(session_id, runner="dbos")  # no loops of its own: just the turn
    try:
        result = await session.turn(text)
        await session.settle()  # its subprocesses, if the soul has any
    finally:
        await session.close()
    return {"reply": result.reply, "turn": result.turn, "kind": result.kind, "steps": result.steps}
