"""One model call over the steps of a unit: prompt, stream or complete, parse, re-ask, fall back.

A reply is read with the tolerant section parser. When a required section is missing — or
empty (a reply section: the user would see nothing), or refused by its kind
(`StepKind.refusals`: an update that is not a user model), or a repeat of the call's
instructions (`soul.sections.echo`: six words in a row of its persona or response format, a
note such as "(optional)") — the model is asked once more (bounded by the steps' `retry`)
with the problem fed back. What an earlier attempt read whole stands: a re-ask fills in the
rest, so a streamed reply the user already saw is kept (the re-ask is not streamed) and a turn
makes the same calls whether or not anyone listens to its stream. What is still missing falls
back; what is still refused is None, flagged; what still echoes is dropped — unless it was
streamed, when it stands, flagged (a streamed section's opening is held while it may still be
an echo, so an echo from the start is never shown). The external dialogue falls back as the
Claudius seed does — the raw text with tags stripped, or a fixed line when nothing is left —
but only from the text outside every section-like element (`soul.sections.fallback`): the
soul's thoughts never become its reply.

Model text passes `replace_lone_surrogates` as it arrives, so what is streamed, parsed and
stored can always be encoded. Streamed text is redacted as it goes (`StreamRedactor`, one per
section, flushed when the section closes), so a key the model writes reaches no `Token` even
when it arrives split across chunks; what is parsed and stored is the raw reply, redacted by
the store.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from soul.compiler import PlannedStep
from soul.kinds import Section, StepKind
from soul.providers import Chunk, Message, Priced, Provider, Request, Usage, call_cost, cost_of
from soul.runtime.conversation import Budget
from soul.runtime.events import CallTrace, Token
from soul.runtime.surrogates import replace_lone_surrogates
from soul.runtime.tools import TOOL_STEP, ToolRun, ToolUse, converse, tool_outputs
from soul.runtime.turn.prompting.fitting import Prompt
from soul.runtime.turn.replies import (
    FALLBACK_REPLY,
    REPLY_KINDS,
    Seen,
    echoes_of,
    empty_reply,
    reask,
    refusals,
)
from soul.sections import (
    CleanReader,
    Closed,
    Instructions,
    ParseResult,
    SectionStream,
    StepParse,
    Text,
    extract_sections,
    parse_step,
    strip_tags,
    text_outside_sections,
)
from soul.store import StreamRedactor, secrets


# Not frozen: built on every model call (a frozen init costs 4x); treat it as immutable.
@dataclass(slots=True)
class CallOutcome:
    parses: dict[str, StepParse]
    fallbacks: frozenset[str]
    trace: CallTrace
    streamed: bool
    tool_runs: tuple[ToolRun, ...] = ()  # the tools the call ran, in order (tool_loop.py)
    span: tuple[float, float] = (0.0, 0.0)  # (start, end) of the call on the perf_counter clock


def _window(layout: dict[str, Any] | None, tools: ToolUse | None, provider: Provider) -> dict[str, Any] | None:
    """The prompt's layout for the trace, with the tools' specs when they went beside the
    messages (native tool calling: the provider counts them in the call's input)."""
    if layout is not None and tools is not None and getattr(provider, "can_call_tools", False):
        specs = [{"name": s.name, "description": s.description, "parameters": s.parameters} for s in tools.specs()]
        return {**layout, "tool_specs": json.dumps(specs, ensure_ascii=False)}
    return layout


@dataclass(frozen=True)
class BoundCall:
    """A call plan bound to services (`Services.bind`): the provider, its spec and options,
    the shape of its steps (`CallShape`), what the plan fixes of the call (its unit, the
    sections it asks for, the steps it streams, its attempts: the first try plus re-asks),
    the GBNF grammar for providers that constrain decoding, the call's token budget (its
    window, reply reserve, counter and share of history) and its price as the price table
    has it (`PriceTable.price_for`; None: the data home's table is read per call,
    `call_cost`) — the same on every turn, so worked out once; with a prompt, all a call needs."""

    provider: Provider
    model: str
    options: dict[str, Any]
    shape: CallShape
    unit: int
    tags: tuple[str, ...]
    stream_steps: tuple[str, ...] = ()
    attempts: int = 2
    grammar: str | None = None
    budget: Budget | None = None
    price: Priced | None = None
    # the usual call, decided once: no gate after it, no tools in the run, no section that may
    # echo the instructions or be refused (the runner then passes none of what those need)
    usual: bool = False


async def run_call(
    bound: BoundCall,
    prompt: Prompt,
    emit: Callable[[Any], None] | None = None,
    gated_off: Callable[[str, dict[str, StepParse]], bool] | None = None,
    tools: ToolUse | None = None,
    known: Sequence[str] = (),
    instructions: Instructions | None = None,
) -> CallOutcome:
    """Run one call of `prompt` over the steps of `bound`'s call plan. A re-ask is made
    while its longer history still fits the model's window (`Budget.fits`). The call's trace
    is complete when it returns: what the prompt's budget held and cut, where its parts lie,
    and what the call cost.

    `gated_off(step, parses)` tells whether a step's after-the-call gate is closed on this
    reply: its sections are then not required (Claudius writes no update after a false check).

    With `tools`, each attempt may take tool rounds before its reply (`tool_loop.converse`;
    no streaming then); a `tool` step's outputs carry the runs. `known`: what the turn said
    before this call (the user's message, earlier steps' text), which a kind's refusals may
    tell a copy of (`StepKind.refusals`).

    `instructions` (the call's persona and response format, `soul.sections.instructions_of`):
    a section repeating them is re-asked like a missing one, then dropped.
    """
    # the first reply, read by the usual path below when it needs more
    first: tuple[str, Usage, ParseResult, dict[str, StepParse], float] | None = None
    provider = bound.provider
    if tools is None and not (bound.stream_steps and emit is not None and provider.can_stream):
        # the usual call: one completion, read at once; done here when nothing is missing
        shape, tags, messages = bound.shape, bound.tags, prompt.messages
        started = time.perf_counter()
        completion = await provider.complete(Request(bound.model, messages, bound.options, tags, bound.grammar))
        raw = completion.text
        if not raw.isascii():
            raw = replace_lone_surrogates(raw)
        reader = shape.reader
        parse = reader.read(raw) if reader is not None else None
        if parse is not None:  # the clean reply of a plain one-section call: nothing to repair or re-ask
            parses = {shape.names[0]: parse}
            repairs: tuple[str, ...] = ()
        else:
            result = extract_sections(raw, tags)
            repairs = result.repairs
            parses = {}
            for step in shape.steps:  # a plain loop: a comprehension is a frame of its own
                parses[step.name] = parse_step(step.kind, step.params, result)
            # no step's reply can fall back or be refused, and nothing repeats the instructions
            if shape.plain and not (shape.echoing and echoes_of(shape.echoing, parses, instructions)):
                for parse in parses.values():
                    if parse.missing:
                        first = (raw, completion.usage, result, parses, started)
                        break
            else:
                first = (raw, completion.usage, result, parses, started)
        if first is None:
            return _outcome(bound, prompt, raw, completion.usage, repairs, parses, started)
    return await _call_on(bound, prompt, emit, gated_off, tools, known, instructions, first)


def _outcome(bound: BoundCall, prompt: Prompt, raw: str, usage: Usage, repairs: tuple[str, ...],
             parses: dict[str, StepParse], started: float) -> CallOutcome:
    """The usual call's outcome, its trace complete. A function of its own, not inline in
    `run_call`: the coroutine's frame stays under 512 bytes (pymalloc's largest block; a
    bigger one is the C allocator's, on every call)."""
    ended = time.perf_counter()
    # one read a line (four names at once build and unpack a tuple: more than three do)
    tokens_in = usage.input_tokens
    tokens_out = usage.output_tokens
    cache_read = usage.cache_read_tokens
    cache_write = usage.cache_write_tokens
    budget, price = prompt.budget, bound.price
    if price is None:  # no table of the soul's own: the data home's, read now
        cost = call_cost(bound.provider.name, bound.model, tokens_in, tokens_out, cache_read, cache_write)
    else:
        cost = cost_of(price, tokens_in, tokens_out, cache_read, cache_write)
    # (the latency times 1000.0, not 1000: a float times a float is CPython 3.11's fast path)
    trace = CallTrace(bound.unit, bound.model, bound.shape.names, prompt.messages, raw, 1, tokens_in, tokens_out,
                      (ended - started) * 1000.0, repairs, (), budget, tuple(prompt.cut) if prompt.cut else (), (),
                      cache_read, cache_write, prompt.layout if budget is not None else None, cost)
    return CallOutcome(parses, _NONE, trace, False, (), (started, ended))


async def _call_on(
    bound: BoundCall,
    prompt: Prompt,
    emit: Callable[[Any], None] | None,
    gated_off: Callable[[str, dict[str, StepParse]], bool] | None,
    tools: ToolUse | None,
    known: Sequence[str],
    instructions: Instructions | None,
    first: tuple[str, Usage, ParseResult, dict[str, StepParse], float] | None,
) -> CallOutcome:
    """`run_call` past the usual call: streaming, tool rounds, re-asks, refusals, echoes and
    fallbacks (`first`: the usual call's reply, read, when it needs more; its own coroutine,
    so the usual call's stays small)."""
    provider, model, options, shape, tags, grammar, price = (bound.provider, bound.model, bound.options, bound.shape, bound.tags,
                                                            bound.grammar, bound.price)
    stream_steps, attempts, unit = bound.stream_steps, bound.attempts, bound.unit
    fits = bound.budget.fits if bound.budget is not None else None  # whether a re-ask still fits the window
    steps = shape.steps
    messages = prompt.messages
    silence: dict[str, str] = {}
    by_tag: dict[str, str] = {}
    if stream_steps:
        silence = {(step.kind.stream_tag or step.kind.sections[0].tag): step.kind.silence
                   for step in steps if step.name in stream_steps and step.kind.silence}
        by_tag = {(step.kind.stream_tag or step.kind.sections[0].tag): step.name for step in steps if step.name in stream_steps}
    history = messages
    reasks: list[str] = []
    input_tokens = output_tokens = cache_read = cache_write = 0
    raw = ""
    streamed = False
    parses = {}
    repairs: tuple[str, ...] = ()
    started = time.perf_counter() if first is None else first[4]
    runs: list[ToolRun] = []
    notes: list[str] = []
    seen = Seen(known)
    read: dict[str, StepParse] = {}  # steps read whole by an earlier attempt: they stand
    refused: dict[str, dict[str, str]] = {}
    for attempt in range(1, max(1, attempts) + 1):
        if first is not None:  # the usual path's reply
            (raw, usage, result, parses, _), first = first, None
        else:
            request = Request(model, history, options, tags, grammar)
            if tools is not None:
                turn = await converse(provider, request, tools, first=attempt == 1, fits=fits)
                raw, usage, history = turn.raw, turn.usage, turn.messages
                runs += turn.runs
                notes += turn.flags
            elif emit is not None and by_tag and provider.can_stream and not streamed:
                raw, usage, emitted = await _stream(provider, request, tags, by_tag, emit, silence, instructions)
                streamed = streamed or emitted
            else:  # a re-ask after a streamed reply is not shown: what the user saw stands
                completion = await provider.complete(request)
                raw, usage = replace_lone_surrogates(completion.text), completion.usage
            result = extract_sections(raw, tags)
            parses = {step.name: read.get(step.name) or parse_step(step.kind, step.params, result) for step in steps}
        input_tokens += usage.input_tokens
        output_tokens += usage.output_tokens
        cache_read += usage.cache_read_tokens
        cache_write += usage.cache_write_tokens
        repairs = result.repairs
        if shape.refusing:
            seen.sections = result.sections
            refused = refusals(shape.refusing, parses, seen, gated_off)
        missing = []
        for name, p in parses.items():
            if p.missing and not (gated_off and gated_off(name, parses)):
                missing += p.missing
        empty = [step.kind.sections[0].tag for step in shape.replies if empty_reply(step, parses[step.name])] if shape.replies else ()
        echoes = echoed_now = echoes_of(shape.echoing, parses, instructions, gated_off)
        if streamed and echoes:  # an echo the user saw as it streamed stands (flagged below), never re-asked
            echoes = [echo for echo in echoes if echo.tag not in by_tag]
        if not (missing or empty or refused or echoes) or attempt == attempts:
            break
        # A re-ask fills in what is missing; what was read whole stands (so a reply the user
        # already saw streamed, and the same re-asks whether anyone listens to the stream)
        echoed = {echo.step for echo in echoes}
        for step in steps:
            parse = parses[step.name]
            if not parse.missing and step.name not in refused and step.name not in echoed and not empty_reply(step, parse):
                read[step.name] = parse
        problem = reask(missing, tags, empty, {tag: why for found in refused.values() for tag, why in found.items()}, echoes)
        longer = (*history, Message("assistant", raw), Message("user", problem))
        if fits is not None and not fits(longer):
            break  # the re-ask would overrun the window: what parsed stands, the rest falls back
        reasks.append(problem)
        history = longer
    for name, found in refused.items():  # still not what they ask for: refused
        parse = parses[name]
        outputs = dict(parse.outputs)
        step = next(p for p in steps if p.name == name)
        for section in step.kind.sections:
            if section.tag in found:
                outputs[section.output] = None
        parses[name] = replace(parse, outputs=outputs, flags=(*parse.flags, *(f"<{t}> refused: {why}" for t, why in found.items())))
    if tools is not None:
        for step in steps:
            parse = parses[step.name]
            extra = tool_outputs(runs) if step.kind.name == TOOL_STEP else {}
            parses[step.name] = replace(parse, outputs={**parse.outputs, **extra}, flags=(*parse.flags, *notes))
    dropped: set[str] = set()
    # the last reply's echoes, found again only when refusals or tool runs changed its outputs
    for echo in echoed_now if not refused and tools is None else echoes_of(shape.echoing, parses, instructions, gated_off):
        parse = parses[echo.step]
        if streamed and echo.tag in by_tag:  # the user saw it as it came: it stands
            parses[echo.step] = replace(parse, flags=(*parse.flags, f"echo: <{echo.tag}> repeats the instructions (shown as streamed)"))
            continue
        parses[echo.step] = replace(parse, outputs={**parse.outputs, echo.output: None},
                                    flags=(*parse.flags, f"echo: <{echo.tag}> repeated the instructions (\"{echo.what}\"); dropped"))
        dropped.add(echo.step)
    fallbacks: set[str] = set()
    for step in shape.falling:  # the steps a reply can fall back for, in order
        parse = parses[step.name]
        into = step.kind.unparsed
        if into and step.name not in dropped and all(v is None for v in parse.outputs.values()):
            # none of its sections parsed: the whole reply goes to `into` (AgentCSD: quiet)
            whole = strip_tags(raw).strip()
            parses[step.name] = replace(parse, outputs={**parse.outputs, into: whole or None},
                                        flags=(*parse.flags, f"no section parsed: the reply kept as {into}"))
            continue
        if step.kind.name in REPLY_KINDS and (parse.missing or empty_reply(step, parse)):
            text = text_outside_sections(raw, tags).strip() or FALLBACK_REPLY
            parses[step.name] = replace(parse, outputs={**parse.outputs, "text": text}, flags=(*parse.flags, "fallback: reply taken from the raw text"))
            fallbacks.add(step.name)
    budget = prompt.budget
    ended = time.perf_counter()
    trace = CallTrace(
        unit, model, shape.names, history, raw, len(reasks) + 1,
        input_tokens, output_tokens, (ended - started) * 1000, repairs, tuple(reasks) if reasks else (),
        budget, tuple(prompt.cut) if budget is not None and prompt.cut else (),
        tuple(r.to_dict() for r in runs) if runs else (), cache_read, cache_write,
        None if budget is None else _window(prompt.layout, tools, provider),
        cost_of(price, input_tokens, output_tokens, cache_read, cache_write) if price is not None
        else call_cost(provider.name, model, input_tokens, output_tokens, cache_read, cache_write),
    )
    return CallOutcome(parses, frozenset(fallbacks) if fallbacks else _NONE, trace, streamed, tuple(runs) if runs else (), (started, ended))


TEXT_FREE = frozenset({"bool", "list", "mapping"})  # section types that never read as text


class CallShape:
    """What a call derives from its tuple of steps, once per call plan (`Services.bind` keeps
    it): their names, the reply steps (an empty reply is re-asked), the steps a reply can fall
    back for (reply kinds, kinds with an `unparsed` output), the steps whose kind may refuse a
    section (`StepKind.refusals` overridden), and the sections that read as text — the only
    ones that can repeat the instructions (`replies.echoes_of`): with none, a call needs no instructions."""

    __slots__ = ("echoing", "falling", "names", "plain", "reader", "refusing", "replies", "steps")

    def __init__(self, steps: Sequence[PlannedStep]) -> None:
        self.steps = steps
        self.names = tuple(s.name for s in steps)
        self.replies = tuple(s for s in steps if s.kind.name in REPLY_KINDS)
        self.falling = tuple(s for s in steps if s.kind.name in REPLY_KINDS or s.kind.unparsed)
        self.refusing = tuple(s for s in steps if getattr(s.kind.refusals, "__func__", None) is not _NO_REFUSALS)
        echoing = ((s, tuple(c for c in s.kind.sections if c.type not in TEXT_FREE)) for s in steps)
        self.echoing: tuple[tuple[PlannedStep, tuple[Section, ...]], ...] = tuple((s, c) for s, c in echoing if c)
        self.plain = not (self.falling or self.refusing)  # a reply can be taken as it parses
        # a plain call of one step writing one section that never reads as text (a chained
        # step's, mostly): its clean reply is read straight into the step's outputs
        only = steps[0] if len(steps) == 1 else None
        self.reader = (CleanReader(only.kind, only.params)
                       if only is not None and self.plain and not self.echoing and CleanReader.fits(only.kind) else None)


_NO_REFUSALS = StepKind.refusals.__func__
_NONE: frozenset[str] = frozenset()


async def _stream(
    provider: Provider,
    request: Request,
    tags: Sequence[str],
    by_tag: dict[str, str],
    emit: Callable[[Any], None],
    silence: dict[str, str] | None = None,
    instructions: Instructions | None = None,
) -> tuple[str, Usage, bool]:
    """Stream a reply; only the streamed sections' text reaches `emit`, redacted. With
    `instructions`, a streamed section's opening is held while it may still be an echo of
    them (its words so far begin a run of theirs): an echo from the start is then never shown,
    so it can be re-asked; other text streams as it comes."""
    parser = SectionStream(tags, set(by_tag))
    known = secrets()
    redactors: dict[str, StreamRedactor] = {}
    pieces: list[str] = []
    usage = Usage()
    emitted = False

    silence = silence or {}
    held: dict[str, str] = dict.fromkeys(silence, "")  # text that may still be the silence word
    # a streamed section's opening, held until it is known not to echo the instructions
    opening: dict[str, str] = dict.fromkeys(by_tag, "") if instructions is not None else {}
    echoing: set[str] = set()

    def unechoed(tag: str, text: str, closed: bool) -> str:
        """`text` to show now: "" while the opening is held or when the section echoes."""
        if tag in echoing:
            return ""
        if tag not in opening:
            return text
        start = opening.pop(tag) + text
        if not closed and instructions is not None and instructions.may_echo(start):
            opening[tag] = start
            return ""
        if instructions is not None and instructions.echoed(start) is not None:
            echoing.add(tag)
            return ""
        return start

    def send(events: list[Any]) -> None:
        nonlocal emitted
        for event in events:
            closed = isinstance(event, Closed)
            if isinstance(event, Text) and event.text:
                redactor = redactors.get(event.tag) or redactors.setdefault(event.tag, StreamRedactor(known))
                text = redactor.feed(event.text)
            elif closed and event.tag in redactors:
                text = redactors.pop(event.tag).flush()  # a key cannot span two sections
            elif closed and (event.tag in held or event.tag in opening):
                text = ""
            else:
                continue
            word = silence.get(event.tag)
            if word is not None and event.tag in held:
                # AgentCSD: "[NO_EXTERNAL_OUTPUT]" means say nothing, so it must not stream
                # either; text is held only while it could still be that word
                text = held.pop(event.tag) + text
                if not closed and word.startswith(text.strip()):
                    held[event.tag] = text
                    continue
                if closed and text.strip() == word:
                    continue
            if event.tag in by_tag:
                text = unechoed(event.tag, text, closed)
            if text:
                emit(Token(by_tag[event.tag], text))
                emitted = True

    chunk: Chunk
    async for chunk in provider.stream(request):
        if chunk.usage is not None:
            usage = chunk.usage
        if not chunk.text:
            continue
        text = replace_lone_surrogates(chunk.text)
        pieces.append(text)
        send(parser.feed(text))
        await asyncio.sleep(0)  # let a consumer print as tokens arrive
    send(parser.close())  # closes every section left open, which flushes its redactor
    return "".join(pieces), usage, emitted
