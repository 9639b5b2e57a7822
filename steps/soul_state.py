"""soul_state_check / soul_state_update: keep the soul's persistent state current."""

from __future__ import annotations

from soul.stepkind import Output, Section, StepKind


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
