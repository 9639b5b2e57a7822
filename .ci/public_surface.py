"""Code that uses soul's public surface as an app would, for mypy (`.ci/typecheck.py`).

It is type-checked, never run. Each `assert_type` pins what a public name promises: if a
signature loosened to `Any` (say `Soul.session() -> Any`), mypy reports that line, and with
a precise type any misspelt attribute below is an error too. Use only names in `soul.__all__`.
"""

from __future__ import annotations

from pathlib import Path
from typing import assert_type

import soul
from soul import (
    AuthError,
    BadRequest,
    Blueprint,
    BlueprintError,
    BlueprintInvalid,
    BlueprintNotFound,
    BlueprintTooLarge,
    CallTrace,
    Checked,
    ChetanaError,
    CircuitOpen,
    Diagnostic,
    EngineError,
    MemoryFieldError,
    Message,
    MissingExtra,
    Plan,
    Provider,
    ProviderError,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
    RegistryError,
    ReplayMiss,
    Reply,
    RunError,
    ScriptedProvider,
    Session,
    SessionNotFound,
    SessionStore,
    Soul,
    SoulError,
    StaleTurn,
    StepError,
    StepFinished,
    StepStarted,
    StepTrace,
    StoreError,
    SubprocessFinished,
    Token,
    Trace,
    TurnCommitted,
    TurnResult,
)

# The whole error tree: every class is a SoulError.
ERRORS: tuple[type[SoulError], ...] = (
    BlueprintError, BlueprintNotFound, BlueprintTooLarge, BlueprintInvalid, RegistryError,
    StoreError, SessionNotFound, StaleTurn, RunError, StepError, MissingExtra, EngineError,
    MemoryFieldError, ChetanaError, ProviderError, ProviderTimeout, ProviderUnavailable,
    RateLimited, AuthError, BadRequest, CircuitOpen, ReplayMiss,
)  # fmt: skip


def one_turn(home: Path) -> str:
    provider = ScriptedProvider(['<external_dialogue verb="said">Hello!</external_dialogue>'])
    assert_type(provider, ScriptedProvider)
    interface: Provider = provider
    claudius = soul.load("claudius", provider=interface, home=home)
    assert_type(claudius, Soul)
    assert_type(claudius.store, SessionStore)
    assert_type(claudius.plan, Plan)
    session = claudius.session(user="ada")
    assert_type(session, Session)
    assert_type(claudius.session("0123abcd"), Session)
    assert_type(session.id, str)
    result = session.turn_sync("Hi, I'm Ada.")
    assert_type(result, TurnResult)
    assert_type(result.reply, str)
    assert_type(result.turn, int)
    assert_type(result.session_id, str)
    trace = result.trace
    assert_type(trace, Trace | None)
    if trace is not None:
        steps: tuple[StepTrace, ...] = trace.steps
        calls: tuple[CallTrace, ...] = trace.calls
        print(len(steps), len(calls), trace.summary()["calls"])
    return result.reply


async def streamed(session: Session) -> str:
    assert_type(await session.turn("hi"), TurnResult)
    pieces: list[str] = []
    async for event in session.stream("hi"):
        if isinstance(event, Token):
            pieces.append(event.text)
        elif isinstance(event, StepFinished) and event.ok:
            print(event.step, event.outputs)
        elif isinstance(event, TurnCommitted):
            print(event.session_id, event.turn)
    await session.settle()
    return "".join(pieces)


def events() -> list[object]:
    return [
        StepStarted(step="think", kind="internal_monologue"),
        Token(step="reply", text="Hel"),
        StepFinished(step="reply", outputs={"text": "Hello"}, ok=True),
        Reply(text="Hello"),
        TurnCommitted(session_id="0123abcd", turn=1),
        SubprocessFinished(name="learn", committed=True),
    ]


def compile_time(path: str) -> str:
    checked = soul.validate(path)
    assert_type(checked, Checked)
    assert_type(checked.ok, bool)
    diagnostics: list[Diagnostic] = checked.diagnostics
    blueprint = soul.load_valid(path)
    assert_type(blueprint, Blueprint)
    plan = soul.compile(blueprint)
    assert_type(plan, Plan)
    return "\n".join(d.format() for d in diagnostics) + plan.text()


def messages() -> Message:
    return Message(role="user", content="hi")


def explain(error: SoulError) -> str:
    if isinstance(error, StepError):
        assert_type(error.step, str | None)
        assert_type(error.kind, str | None)
        return f"{error.step} ({error.kind}): {error}"
    if isinstance(error, RateLimited):
        assert_type(error.retry_after, float | None)
    if isinstance(error, BlueprintInvalid):
        return "\n".join(d.format() for d in error.diagnostics)
    return str(error)


def translated(exc: ValueError) -> StepError:
    error = StepError.from_exception(exc, step="think", kind="internal_monologue", what="parsing")
    assert_type(error, StepError)
    return error
