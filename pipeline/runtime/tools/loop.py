"""Tool use inside a model call: the model asks for tools, the runtime runs them and feeds the
results back, round after round, until the model writes its sections (or the rounds run out).

Two forms, chosen by the provider:

- **Native** (`Provider.can_call_tools`: Anthropic, OpenAI, litellm): the tools' specs go in
  `Request.tools`; the reply's `Completion.tool_calls` are run; the exchange continues as an
  assistant message carrying the calls and one `tool` message per result.
- **XML** (the local model, and any provider without native calling): the tools are described
  at the end of the system prompt; the model writes `<tool_call name="NAME">{json}</tool_call>`
  (read with the project's section parser; one call per reply); each result comes back as a
  user message `<tool_result name="NAME" status="ok|error">...</tool_result>` whose text is
  escaped, so a result can never close its own tag or forge a call. For a provider that
  constrains decoding (llama.cpp), the grammar allows either the sections or one call while
  tool rounds remain, and only the sections in the last round.

A call of this kind does not stream: the runtime cannot know before the reply whether it is a
tool call or the answer (docs/tools.md). Every run is kept (`ToolRun`) for the step's outputs,
the call's trace and Chetana (`after_tool_execution`, through the turn).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from soul.compiler import PlannedStep
from soul.errors import SoulError, StepError
from soul.language import DEFAULT_ROUNDS, Blueprint, Step
from soul.providers import Message, Provider, Request, ToolCall, ToolSpec, Usage
from soul.runtime import tracing
from soul.runtime.surrogates import replace_lone_surrogates
from soul.runtime.tools.box import TapeMode, ToolBox, ToolRun
from soul.runtime.untrusted import escape_untrusted
from soul.sections import extract_sections

TOOL_STEP = "tool"  # the kind whose outputs carry its calls (steps/tool.py)
CALL_TAG = "tool_call"
RESULT_TAG = "tool_result"
LAST_ROUND = "You have used every tool round: write your answer now, without calling a tool."


@dataclass(frozen=True)
class ToolUse:
    """What one model call may do with tools: which, how many rounds, and the calls the
    blueprint chose (a `tool` step's `with: tool:`), run before the model is asked."""

    box: ToolBox
    names: tuple[str, ...]
    rounds: int = DEFAULT_ROUNDS
    chosen: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    session: str | None = None  # the session calling (MCP servers of lifetime `session`)

    def specs(self) -> tuple[ToolSpec, ...]:
        """The tools' specs; an MCP entry's name stands for the tools its server listed."""
        names = self.box.mcp.expand(self.names) if self.box.mcp is not None else self.names
        return tuple(self.box.get(name).spec for name in names)


@dataclass
class ToolTurn:
    """The outcome of a call with tools: the final reply, the summed usage, the messages as
    they stood at the end (for the trace and re-asks), every run, and notes for the trace."""

    raw: str
    usage: Usage
    messages: tuple[Message, ...]
    runs: list[ToolRun] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)


def scope_steps(blueprint: Blueprint, scope: str) -> Mapping[str, Step]:
    """The blueprint's steps of a plan scope (`turn`, `subprocess:NAME`, `process:NAME`)."""
    kind, _, name = scope.partition(":")
    if kind == "subprocess" and name in blueprint.subprocesses:
        return blueprint.subprocesses[name].steps
    if kind == "process" and name in blueprint.processes:
        return blueprint.processes[name].steps
    return blueprint.steps


def tool_use_for(box: ToolBox | None, written: Mapping[str, Step], steps: Sequence[PlannedStep],
                 render: Callable[[str], str], session: str | None = None) -> ToolUse | None:
    """The tools a call over `steps` may use (the union of its steps' `tools:`; a `tool` step
    without one may use every declared tool), or None when it may use none. `render` renders
    the template arguments of a `tool` step's chosen call."""
    if box is None or not box:
        return None
    names: dict[str, None] = {}
    rounds = 0
    chosen: list[tuple[str, Mapping[str, Any]]] = []
    for planned in steps:
        step = written.get(planned.name)
        declared = step.tools if step is not None else None
        if declared is not None:
            names.update(dict.fromkeys(n for n in declared.names if box.declares(n)))
            rounds = max(rounds, declared.rounds)
        elif planned.kind.name == TOOL_STEP:
            names.update(dict.fromkeys(box.names()))
            rounds = max(rounds, DEFAULT_ROUNDS)
        tool = planned.params.get("tool") if planned.kind.name == TOOL_STEP else None
        if isinstance(tool, str):
            arguments = planned.params.get("arguments") or {}
            chosen.append((tool, {k: render(v) if isinstance(v, str) else v for k, v in arguments.items()}))
    if not names and not chosen:
        return None
    return ToolUse(box, tuple(names), rounds or DEFAULT_ROUNDS, tuple(chosen), session)


def tool_outputs(runs: Sequence[ToolRun]) -> dict[str, Any]:
    """A `tool` step's outputs besides its answer, from the runs of its call."""
    if not runs:
        return {"call": None, "result": None, "error": None, "latency_ms": None, "calls": []}
    last = runs[-1]
    return {
        "call": {"tool": last.tool, "arguments": last.arguments},
        "result": last.result,
        "error": last.error,
        "latency_ms": round(last.ms, 3),
        "calls": [{"tool": r.tool, "arguments": r.arguments, "result": r.result, "error": r.error,
                   "ms": round(r.ms, 3)} for r in runs],
    }


def tape_of(provider: Provider) -> tuple[Any, TapeMode] | None:
    """The cassette a recording or replaying provider works on, and how."""
    cassette, mode = getattr(provider, "cassette", None), getattr(provider, "tape", None)
    return (cassette, mode) if cassette is not None and mode in ("record", "replay") else None


async def converse(provider: Provider, request: Request, use: ToolUse, *, first: bool = True,
                   fits: Callable[[tuple[Message, ...]], bool] | None = None) -> ToolTurn:
    """The call `request` with tool rounds; `first` runs the blueprint's chosen calls (not on
    a re-ask, whose history already holds them)."""
    native = provider.can_call_tools
    # MCP servers started and listed, each entry as its tools
    use = replace(use, names=await use.box.ready((*use.names, *(n for n, _ in use.chosen)), use.session))
    specs = use.specs()
    tape = tape_of(provider)
    # a re-ask's history already holds the description and the chosen calls
    messages = request.messages if native or not first else _described(request.messages, specs)
    turn = ToolTurn("", Usage(), messages)
    if first:
        for i, (name, arguments) in enumerate(use.chosen, 1):
            ran = use.box.call(name, dict(arguments), call_id=f"chosen_{i}", source="template", tape=tape, session=use.session)
            run = await (tracing.tool(ran, name, f"chosen_{i}") if tracing.on() else ran)
            turn.runs.append(run)
            call = ToolCall(run.id, name, json.dumps(run.arguments, ensure_ascii=False, default=str))
            messages = (*messages, *_exchange(native, "", [call], [run]))
    rounds = 0
    while True:
        last = rounds >= use.rounds
        asked = Request(
            request.model, messages, request.options, request.tags,
            _grammar(request.grammar, use.names) if request.grammar and not native and not last else request.grammar,
            specs if native else (),
        )
        completion = await provider.complete(asked)
        _add_usage(turn.usage, completion.usage)
        text = replace_lone_surrogates(completion.text)
        calls = list(completion.tool_calls) if native else _xml_calls(text, rounds)
        if not calls:
            turn.raw, turn.messages = text, messages
            return turn
        if last:
            turn.flags.append(f"tool rounds exhausted ({use.rounds}): the model asked for {', '.join(c.name for c in calls)} again")
            turn.raw, turn.messages = text, messages
            return turn
        rounds += 1
        runs = [await (tracing.tool(use.box.call(c.name, c.arguments, call_id=c.id, tape=tape, session=use.session), c.name, c.id)
                       if tracing.on() else use.box.call(c.name, c.arguments, call_id=c.id, tape=tape, session=use.session))
                for c in calls]
        turn.runs.extend(runs)
        longer = (*messages, *_exchange(native, text, calls, runs, rounds >= use.rounds))
        if fits is not None and not fits(longer):
            # the results would overrun the window: the model is told so instead
            shrunk = [ToolRun(r.id, r.tool, r.arguments, None, "the result is too long for the model's context window", r.ms, r.source) for r in runs]
            longer = (*messages, *_exchange(native, text, calls, shrunk, rounds >= use.rounds))
            turn.flags.append("a tool result did not fit the model's window and was withheld")
            if not fits(longer):
                turn.raw, turn.messages = text, messages
                turn.flags.append("no room left for a tool round: the reply stands as it was")
                return turn
        messages = longer


def _add_usage(total: Usage, usage: Usage) -> None:
    total.input_tokens += usage.input_tokens
    total.output_tokens += usage.output_tokens
    total.cache_read_tokens += usage.cache_read_tokens
    total.cache_write_tokens += usage.cache_write_tokens
    total.latency_s += usage.latency_s
    if total.first_token_s is None:
        total.first_token_s = usage.first_token_s
    if usage.cost is not None:
        total.cost = (total.cost or 0.0) + usage.cost


def _exchange(native: bool, text: str, calls: Sequence[ToolCall], runs: Sequence[ToolRun], last: bool = False) -> list[Message]:
    """The messages of one tool round: the model's calls, then each result."""
    if native:
        out = [Message("assistant", text, tuple(calls))]
        for run in runs:
            content = run.result if run.ok else f"error: {run.error}"
            out.append(Message("tool", content or "", tool_call_id=run.id, is_error=not run.ok))
        if last:
            out.append(Message("user", LAST_ROUND))
        return out
    written = text or "\n".join(f'<{CALL_TAG} name="{escape_untrusted(c.name)}">{c.arguments}</{CALL_TAG}>' for c in calls)
    results = "\n".join(_xml_result(run) for run in runs)
    return [Message("assistant", written), Message("user", results + (f"\n{LAST_ROUND}" if last else ""))]


def _xml_result(run: ToolRun) -> str:
    status = "ok" if run.ok else "error"
    body = run.result if run.ok else run.error
    return f'<{RESULT_TAG} name="{escape_untrusted(run.tool)}" status="{status}">{escape_untrusted(body or "")}</{RESULT_TAG}>'


def _xml_calls(text: str, round_: int) -> list[ToolCall]:
    """The tool call written in a reply (the first one: one call per reply in this form)."""
    section = extract_sections(text, (CALL_TAG,)).sections.get(CALL_TAG)
    if section is None:
        return []
    return [ToolCall(f"xml_{round_ + 1}", section.attributes.get("name", ""), section.text)]


def _described(messages: tuple[Message, ...], specs: Sequence[ToolSpec]) -> tuple[Message, ...]:
    """The messages with the tools described at the end of the system prompt (XML form)."""
    lines = [
        "## Tools",
        "Before you answer you may call one of these tools. To call one, write only this, then stop:",
        f'<{CALL_TAG} name="TOOL">{{"argument": "value"}}</{CALL_TAG}>',
        f'The result comes back as <{RESULT_TAG} name="TOOL" status="ok">...</{RESULT_TAG}> (status="error" '
        "when the call failed). One call per reply. When you have what you need, answer as asked, without a tool call.",
        "",
    ]
    for spec in specs:
        lines.append(f"- {spec.name}: {spec.description}")
        lines.append(f"  arguments (JSON Schema): {json.dumps(spec.parameters, ensure_ascii=False)}")
    block = "\n".join(lines)
    if messages and messages[0].role == "system":
        return (Message("system", f"{messages[0].content}\n\n{block}"), *messages[1:])
    return (Message("system", block), *messages)


def _grammar(grammar: str, names: Sequence[str]) -> str:
    """A GBNF grammar that allows the call's sections (`grammar`) or one tool call. The
    section plan a grammar may carry (`# soul-sections:`, for section-driven decoding, where
    the framework writes every tag) is left out: the model must be free to write the call."""
    kept = "\n".join(line for line in grammar.splitlines() if not line.startswith("#"))
    answer = kept.replace("root ::=", "answer ::=", 1)
    choices = " | ".join(json.dumps(f'<{CALL_TAG} name="{n}">') for n in names)
    return (f"root ::= answer | toolcall\ntoolcall ::= ({choices}) [^<]* {json.dumps(f'</{CALL_TAG}>')}\n{answer}")



def tools_of(runner: Any, call: Any, ts: Any, seen: Any = None) -> ToolUse | None:
    """The ToolUse of a call a ScopeRunner is about to make (None without tools): the
    blueprint's tools from its services, the steps as written in its scope, and a `tool`
    step's chosen arguments rendered over the turn so far (as the call's layer found it,
    given `seen`: `ScopeRunner.variables`)."""
    box = runner.services.tools
    if box is None:
        return None
    written = scope_steps(runner.plan.blueprint, runner.scope.scope)
    if not any(getattr(written.get(p.name), "tools", None) is not None or p.kind.name == TOOL_STEP for p in call.steps):
        return None
    env, variables = runner.builder.env, runner.variables(ts, seen=seen)

    def render(source: str) -> str:
        try:
            return str(env.from_string(source).render(variables))
        except SoulError:
            raise
        except Exception as exc:  # a template error in an argument: the step's error
            name = next((p.name for p in call.steps if p.kind.name == TOOL_STEP), call.steps[0].name)
            raise StepError.from_exception(exc, step=name, kind=TOOL_STEP, what="a tool argument failed") from exc

    return tool_use_for(box, written, call.steps, render, getattr(ts, "session", None))
