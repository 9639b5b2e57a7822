"""Chetana's event names and the callback type through which they are delivered.

Events are fired on a *crossing*, never on every update: `frustrated` when frustration rises
through the alert threshold, `confident` when confidence rises through the autonomy threshold,
`goal_created` / `goal_changed` on an intention's creation or a real change of its status or
priority, `attention_shifted` when more than half of the top concepts are replaced. The one
exception, as in the original, is `self_updated`: once after every recorded tool result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = [
    "ATTENTION_SHIFTED",
    "CONFIDENT",
    "EVENT_NAMES",
    "FRUSTRATED",
    "GOAL_CHANGED",
    "GOAL_CREATED",
    "SELF_UPDATED",
    "EventCallback",
]

#: `on_event(name, data)`: `data` is a JSON-safe dict, so a host can log it as it is.
EventCallback = Callable[[str, dict[str, Any]], None]

FRUSTRATED = "frustrated"
CONFIDENT = "confident"
SELF_UPDATED = "self_updated"
GOAL_CREATED = "goal_created"
GOAL_CHANGED = "goal_changed"
ATTENTION_SHIFTED = "attention_shifted"

EVENT_NAMES: tuple[str, ...] = (
    FRUSTRATED,
    CONFIDENT,
    SELF_UPDATED,
    GOAL_CREATED,
    GOAL_CHANGED,
    ATTENTION_SHIFTED,
)
