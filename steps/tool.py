"""tool: a step whose model calls the soul's tools, then writes what it found.

The model chooses a tool and its arguments (natively, where the provider calls tools, or as
`<tool_call name="...">{json}</tool_call>` in its text); the runtime runs the call, feeds the
result (or the error, or the timeout) back, and the model either calls again (up to the step's
`tools: {rounds: N}`, default 4) or writes `<tool_answer>`. With `with: {tool: NAME,
arguments: {...}}` the call is chosen by the blueprint instead — each argument a template over
the turn (`"{{ input.text }}"`) or a plain value — and runs before the model is asked. The
calling is the runtime's (soul.runtime.tools.loop); this kind only declares. Its outputs beside
the answer — `call`, `result`, `error`, `latency_ms` of the last call, and every call in
`calls` — are filled from what the runtime ran.
"""

from __future__ import annotations

from soul.kinds import Output, Section, StepKind, param, params_schema

TOOL_TAG = "tool_answer"


class ToolStep(StepKind):
    name = "tool"
    description = "Calls the soul's tools (the model or a template chooses), then says what it found."
    inputs = ("soul", "input", "memory", "params")
    outputs = (
        Output("text", "text", "what the model wrote after the tool results"),
        Output("call", "mapping", "the last call made: tool, arguments"),
        Output("result", "text", "the last call's result as the model saw it (None when it failed)"),
        Output("error", "text", "why the last call failed or timed out (None when it succeeded)"),
        Output("latency_ms", "any", "how long the last call took, in milliseconds"),
        Output("calls", "list", "every call of this step: tool, arguments, result, error, ms"),
    )
    sections = (Section(TOOL_TAG, "text", description="what the tool results say, in a few sentences"),)
    template = "tool.j2"
    params = params_schema(
        task=param({"type": "string", "minLength": 1}, "what the tools are for in this step (shown to the model)"),
        tool=param({"type": "string", "pattern": "^[A-Za-z][A-Za-z0-9_-]{0,63}$"},
                   "call this tool before asking the model, with `arguments` (the blueprint chooses, not the model)"),
        arguments=param({"type": "object", "additionalProperties": {"format": "template"}},
                        "the arguments of `tool`: each a template over the turn, or a plain value"),
    )
