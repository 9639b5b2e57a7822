"""The spans of a soul under the OpenTelemetry GenAI semantic conventions.

    invoke_agent SOUL                  a turn (gen_ai.operation.name=invoke_agent, agent, conversation)
    ├── step NAME / steps A, B         a unit of the plan: one step, or the steps of one fused call
    │   └── chat MODEL                 a model call (CLIENT; provider, request model, usage, cost)
    │       └── execute_tool TOOL      a tool the model called
    invoke_agent SOUL.PROCESS          a background cycle (the subconscious), its units below it
    worker cycle PROCESS               a `soul worker`'s cycle workflow, the cycle below it
    dialogue turn N SPEAKER            a dialogue's turn, the speaker's turn below it

Every helper awaits the work it is given inside its span, so what the work starts is its
child (asyncio copies the context). Attributes are ids, names, counts, tokens, costs and
statuses: message text — prompts, replies, thoughts, a step's outputs, tool arguments and
results — is added only when the user opted in (`capture_content`).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from soul.runtime.tracing.switch import capture_content, tracer

T = TypeVar("T")
PROVIDERS = {"anthropic": "anthropic", "openai": "openai", "litellm": "litellm"}  # the conventions' names


def _clean(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """Attributes as OpenTelemetry takes them: no None, sequences as tuples of str."""
    out: dict[str, Any] = {}
    for key, value in attributes.items():
        if value is None:
            continue
        if isinstance(value, list | tuple):
            value = tuple(str(v) for v in value)
        elif not isinstance(value, str | bool | int | float):
            value = str(value)
        out[key] = value
    return out


@contextmanager
def span(name: str, attributes: Mapping[str, Any], *, client: bool = False) -> Iterator[Any]:
    """A span made current for its block; an exception leaving it is recorded with `error.type`."""
    from opentelemetry.trace import SpanKind

    kind = SpanKind.CLIENT if client else SpanKind.INTERNAL
    with tracer().start_as_current_span(name, kind=kind, attributes=_clean(attributes)) as current:
        try:
            yield current
        except BaseException as exc:
            current.set_attribute("error.type", type(exc).__qualname__)
            raise


def _set(current: Any, attributes: Mapping[str, Any]) -> None:
    current.set_attributes(_clean(attributes))


def _text_messages(messages: Sequence[Any]) -> str:
    """Messages in the conventions' JSON form: role and text parts."""
    return json.dumps([{"role": _field(m, "role"), "parts": [{"type": "text", "content": _field(m, "content")}]}
                       for m in messages], ensure_ascii=False)


def _field(message: Any, name: str) -> Any:
    return message.get(name) if isinstance(message, Mapping) else getattr(message, name, None)


# -- a turn ------------------------------------------------------------------------------------

async def turn(work: Awaitable[Any], soul: str, session: str, kind: str, text: str) -> Any:
    """`work` (a turn, giving its TurnResult) inside the turn's span."""
    attributes: dict[str, Any] = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": soul,
                                  "gen_ai.conversation.id": session, "soul.turn.kind": kind}
    if capture_content() and text:
        attributes["gen_ai.input.messages"] = _text_messages([{"role": "user", "content": text}])
    with span(f"invoke_agent {soul}", attributes) as current:
        result = await work
        trace = getattr(result, "trace", None)
        calls = trace.calls if trace is not None else ()
        cost = trace.summary()["cost"] if trace is not None else {}
        _set(current, {"soul.turn.number": result.turn, "soul.turn.calls": len(calls),
                       "gen_ai.usage.input_tokens": sum(c.input_tokens for c in calls),
                       "gen_ai.usage.output_tokens": sum(c.output_tokens for c in calls),
                       "soul.cost.usd": cost.get("usd")})
        if capture_content() and result.reply:
            _set(current, {"gen_ai.output.messages": _text_messages([{"role": "assistant", "content": result.reply}])})
        return result


# -- a unit of the plan: one step, or the steps of one call ------------------------------------------

async def unit(work: Awaitable[None], steps: Sequence[tuple[str, str]], scope: str, done: list[Any]) -> None:
    """`work` (a unit's steps) inside its span; `done` is the list its StepTraces are added to."""
    names = [name for name, _ in steps]
    title = f"step {names[0]}" if len(names) == 1 else f"steps {', '.join(names)}"
    before = len(done)
    with span(title, {"soul.steps": names, "soul.step.kinds": [kind for _, kind in steps], "soul.scope": scope}) as current:
        await work
        finished = done[before:]
        _set(current, {"soul.step.statuses": [f"{s.step}:{s.status}" for s in finished]})
        if capture_content():  # a step's outputs hold its thoughts: only when the user opted in
            _set(current, {"soul.step.outputs": json.dumps({s.step: s.outputs for s in finished}, ensure_ascii=False, default=str)})


# -- a model call ----------------------------------------------------------------------------------

def call_attributes(provider: str, spec: str, options: Mapping[str, Any], unit_index: int, steps: Sequence[str],
                    session: str | None) -> dict[str, Any]:
    system = PROVIDERS.get(provider, provider)
    model = spec.split("/", 1)[1] if spec.startswith(f"{provider}/") else spec
    return {"gen_ai.operation.name": "chat", "gen_ai.provider.name": system, "gen_ai.system": system,
            "gen_ai.request.model": model, "gen_ai.request.max_tokens": options.get("max_tokens"),
            "gen_ai.request.temperature": options.get("temperature"), "gen_ai.request.top_p": options.get("top_p"),
            "gen_ai.conversation.id": session, "soul.call.unit": unit_index, "soul.call.steps": list(steps),
            "soul.model.spec": spec}


async def call(work: Awaitable[T], attributes: Mapping[str, Any]) -> T:
    """`work` (a model call, giving its CallOutcome, its trace complete: budget and cost
    included) inside the call's span."""
    with span(f"chat {attributes['gen_ai.request.model']}", attributes, client=True) as current:
        outcome = await work
        trace = outcome.trace  # type: ignore[attr-defined]
        budget = trace.budget or {}
        cost = trace.cost or {}
        _set(current, {"gen_ai.response.model": attributes["gen_ai.request.model"],
                       "gen_ai.usage.input_tokens": trace.input_tokens, "gen_ai.usage.output_tokens": trace.output_tokens,
                       "soul.call.attempts": trace.attempts, "soul.call.tools": len(trace.tools),
                       "soul.cost.usd": cost.get("usd"), "soul.context.window": budget.get("window"),
                       "soul.context.budget": (budget["window"] - budget["reserve"]) if "window" in budget and "reserve" in budget else None,
                       "soul.context.used": budget.get("used"), "soul.context.cut": len(trace.cut)})
        if capture_content():
            messages = list(trace.messages)
            if messages and _field(messages[0], "role") == "system":
                _set(current, {"gen_ai.system_instructions": json.dumps(
                    [{"type": "text", "content": _field(messages[0], "content")}], ensure_ascii=False)})
                messages = messages[1:]
            _set(current, {"gen_ai.input.messages": _text_messages(messages),
                           "gen_ai.output.messages": _text_messages([{"role": "assistant", "content": trace.raw}])})
        return outcome


# -- a tool ------------------------------------------------------------------------------------------

async def tool(work: Awaitable[T], name: str, call_id: str) -> T:
    """`work` (a tool run, giving its ToolRun) inside the tool's span."""
    attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.type": "function",
                  "gen_ai.tool.call.id": call_id or None}
    with span(f"execute_tool {name}", attributes) as current:
        run = await work
        _set(current, {"soul.tool.ms": getattr(run, "ms", None), "soul.tool.source": getattr(run, "source", None),
                       "error.type": "tool_error" if getattr(run, "error", None) else None})
        if capture_content():
            _set(current, {"gen_ai.tool.call.arguments": json.dumps(getattr(run, "arguments", None), ensure_ascii=False, default=str),
                           "gen_ai.tool.call.result": getattr(run, "result", None) or getattr(run, "error", None)})
        return run


# -- the background mind, workers, dialogues ------------------------------------------------------------

async def cycle(work: Awaitable[T], soul: str, session: str, process: str, number: int) -> T:
    """`work` (a background cycle) inside its span."""
    attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": f"{soul}.{process}",
                  "gen_ai.conversation.id": session, "soul.cycle.process": process, "soul.cycle.number": number}
    with span(f"invoke_agent {soul}.{process}", attributes):
        return await work


async def worker_cycle(work: Awaitable[T], soul: str, session: str, process: str, number: int) -> T:
    """`work` (a `soul worker`'s cycle workflow step) inside its span."""
    attributes = {"gen_ai.conversation.id": session, "soul.soul": soul, "soul.cycle.process": process,
                  "soul.cycle.number": number}
    with span(f"worker cycle {process}", attributes):
        return await work


async def dialogue_turn(work: Awaitable[T], dialogue: str, number: int, speaker: str) -> T:
    """`work` (a dialogue's turn: an agent's, or Fixy's) inside its span."""
    attributes = {"gen_ai.conversation.id": dialogue, "soul.dialogue.id": dialogue, "soul.dialogue.turn": number,
                  "soul.dialogue.speaker": speaker}
    with span(f"dialogue turn {number} {speaker}", attributes):
        return await work
