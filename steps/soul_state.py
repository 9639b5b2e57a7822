"""soul_state_check / soul_state_update: keep the soul's persistent state current."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from soul.kinds import ChangeContext, Changes, Output, Section, StepKind
from soul.records import MessageRecord

if TYPE_CHECKING:
    from soul.language import StateVar


class SoulStateCheck(StepKind):
    name = "soul_state_check"
    description = "Decides whether the soul state (topic, task, mood, ...) has changed."
    inputs = ("soul", "input", "state")
    outputs = (Output("result", "bool", "true when the soul state should be updated"),)
    sections = (
        Section(
            "soul_state_check",
            "result",
            type="bool",
            description="true if any soul state value has changed, else false",
        ),
    )
    template = "soul_state_check.j2"


class SoulStateUpdate(StepKind):
    name = "soul_state_update"
    description = "New values for declared soul state keys, as `key: value` lines."
    inputs = ("soul", "input", "state")
    outputs = (Output("updates", "mapping", "the changed keys and their new values"),)
    sections = (
        Section(
            "soul_state_update",
            "updates",
            type="mapping",
            description="one `key: value` line per changed key; only the declared keys",
        ),
    )
    template = "soul_state_update.j2"
    effects = ("state",)

    @classmethod
    def changes(cls, step: str, outputs: Mapping[str, Any], context: ChangeContext) -> Changes:
        updates: dict[str, Any] = {}
        flags: list[str] = []
        for key, raw in (outputs.get("updates") or {}).items():
            var = context.state_spec.get(key)
            if var is None:
                flags.append(f"state key '{key}' is not declared (ignored)")
                continue
            value, problem = coerce(var, str(raw).strip())
            if problem:
                flags.append(problem)
            else:
                updates[key] = value
        lines = "\n".join(f"{k}: {v}" for k, v in updates.items())
        messages = (MessageRecord("internal", "soul_state_update", lines, step),) if updates else ()
        return Changes(messages=messages, state=updates or None, flags=tuple(flags))


def coerce(var: StateVar, text: str) -> tuple[Any, str | None]:
    """A model's `key: value` text as the declared type, or a problem."""
    try:
        if var.type == "integer":
            return int(text), None
        if var.type == "number":
            number = float(text)
            if not math.isfinite(number):  # `nan`, `inf`: no number a state can compare or store as JSON
                return None, f"state key '{var.name}': {text!r} is not a finite number"
            return number, None
        if var.type == "boolean":
            from soul.sections import parse_bool

            value = parse_bool(text)
            if value is None:
                raise ValueError(text)
            return value, None
        if var.type in ("list", "mapping"):
            return None, f"state key '{var.name}' ({var.type}) cannot be set from text"
    except ValueError:
        return None, f"state key '{var.name}': {text!r} is not a {var.type}"
    if var.values and text not in var.values:
        match = next((v for v in var.values if v.lower() == text.lower()), None)
        if match is None:
            return None, f"state key '{var.name}': {text!r} is not one of {', '.join(var.values)}"
        text = match
    return text, None
