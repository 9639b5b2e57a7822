"""The testing kit for soul authors: run a scripted conversation, get a readable transcript.

    transcript = converse("my_soul.yaml", ["Hi", "What do you do?"], replies=[...])
    transcript = converse("my_soul.yaml", ["Hi"], cassette="tests/cassettes/hi.yaml")

Model replies come from a list (`replies`, one raw reply per model call), from a cassette
(`cassette`, recorded with `soul run --record` or with `record=True` here), or from the live
models the blueprint names while recording. A `Transcript` renders every turn's trace —
rendered prompts, raw replies, parsed steps, state changes and the user-model diff — as text
with no timestamps, ids or timings, so it is stable across runs and fit for snapshots (the
pytest plugin `soul.testing.plugin` and the syrupy extension `soul.testing.extension` build on this).
"""

from __future__ import annotations

import difflib
import json
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from soul.providers import Provider


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """One turn of a conversation, as the snapshot shows it."""

    number: int
    message: str
    reply: str
    traces: tuple[dict[str, Any], ...]  # the turn's trace, then its subprocesses', as stored
    state_before: dict[str, Any] = field(default_factory=dict)
    state_after: dict[str, Any] = field(default_factory=dict)
    user_model_before: str = ""
    user_model_after: str = ""

    @property
    def steps(self) -> dict[str, dict[str, Any]]:
        """Every step that ran this turn (subprocesses included): its parsed outputs."""
        return {s["step"]: s["outputs"] for t in self.traces for s in t.get("steps", [])}

    @property
    def state_changes(self) -> dict[str, tuple[Any, Any]]:
        keys = sorted(set(self.state_before) | set(self.state_after))
        return {
            k: (self.state_before.get(k), self.state_after.get(k))
            for k in keys
            if self.state_before.get(k) != self.state_after.get(k)
        }

    @property
    def user_model_diff(self) -> str:
        lines = difflib.unified_diff(
            self.user_model_before.splitlines(), self.user_model_after.splitlines(), "before", "after", lineterm=""
        )
        return "\n".join(lines)

    def render(self) -> str:
        """The turn as readable, stable text."""
        out = [f"## turn {self.number}", "", "### user", self.message, ""]
        for trace in self.traces:
            scope = trace.get("kind", "message")
            for n, call in enumerate(trace.get("calls", []), 1):
                steps = ", ".join(call.get("steps", []))
                out += [f"### {scope} · call {n} ({steps}) · model {call.get('model')} · attempts {call.get('attempts')}", ""]
                for message in call.get("messages", []):
                    out += [f"#### prompt: {message['role']}", message["content"].rstrip(), ""]
                out += ["#### raw reply", str(call.get("raw", "")).rstrip(), ""]
                out += [f"#### re-asked: {r}" for r in call.get("reasks", [])]
            steps_ = trace.get("steps", [])
            if steps_:
                out += [f"### {scope} · steps", ""]
                for step in steps_:
                    flags = f" [{'; '.join(step['flags'])}]" if step.get("flags") else ""
                    out.append(f"- {step['step']} ({step['kind']}): {step['status']}{flags}")
                    for key, value in sorted(step.get("outputs", {}).items()):
                        if value not in (None, "", [], {}):
                            out.append(f"    {key}: {_value(value)}")
                out.append("")
        changes = self.state_changes
        out += ["### state", *(f"- {k}: {_value(a)} → {_value(b)}" for k, (a, b) in changes.items()), ""] if changes else []
        diff = self.user_model_diff
        out += ["### user model", diff, ""] if diff else []
        out += ["### reply", self.reply, ""]
        return "\n".join(line.rstrip() for line in out)  # no trailing blanks for editors to strip


@dataclass(frozen=True, slots=True)
class Transcript:
    """A whole scripted conversation."""

    soul: str
    turns: tuple[TurnRecord, ...]

    @property
    def replies(self) -> list[str]:
        return [t.reply for t in self.turns]

    def render(self) -> str:
        head = f"# {self.soul}: {len(self.turns)} turn{'s' if len(self.turns) != 1 else ''}\n\n"
        return head + "\n".join(t.render() for t in self.turns)


def _value(value: Any) -> str:
    if isinstance(value, str):
        return value if "\n" not in value else "\n      " + value.replace("\n", "\n      ")
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _provider(replies: Sequence[str] | None, cassette: str | Path | None, record: bool) -> tuple[Provider | None, Any]:
    """The provider object and the `wrap` for `soul.load`."""
    if replies is not None and cassette is not None and not record:
        raise ValueError("give replies or a cassette to replay, not both")
    provider: Provider | None = None
    wrap = None
    if replies is not None:
        from soul.providers import ScriptedProvider

        provider = ScriptedProvider(list(replies))
    if cassette is not None:
        if record:
            from soul.providers import recording

            wrap = recording(cassette)  # around the scripted replies, or the live models
        else:
            from soul.providers import ReplayProvider

            provider = ReplayProvider.from_file(cassette)
    return provider, wrap


def converse(
    blueprint: str | Path,
    messages: Sequence[str],
    *,
    replies: Sequence[str] | None = None,
    cassette: str | Path | None = None,
    record: bool = False,
    user: str = "user",
    home: str | Path | None = None,
    model: str | None = None,
    options: Mapping[str, Any] | None = None,
) -> Transcript:
    """Run `messages` as one conversation with a fresh session and return its transcript.

    `replies` feeds raw model replies in order; `cassette` replays a recording (or, with
    `record=True`, writes one from `replies` or the live models); `home` is the data home
    (a temporary folder by default; the pytest fixture passes the test's own).
    """
    from soul.runtime import load

    provider, wrap = _provider(replies, cassette, record)
    with tempfile.TemporaryDirectory(prefix="soul-test-") as scratch:
        soul = load(blueprint, model=model, provider=provider, wrap=wrap, home=home or scratch, **dict(options or {}))
        try:
            return _run(soul, messages, user)
        finally:
            soul.close()


def _run(soul: Any, messages: Sequence[str], user: str) -> Transcript:
    session = soul.session(user=user)
    ttl = soul.blueprint.memory_ttl_hours
    turns = []
    seen = 0
    for number, text in enumerate(messages, 1):
        before = soul.store.snapshot(session.id, ttl_hours=ttl)
        result = session.turn_sync(text)  # waits for the turn's subprocesses too
        after = soul.store.snapshot(session.id, ttl_hours=ttl)
        stored = soul.store.traces(session.id)
        traces = tuple(_stable(json.loads(t["trace"]) if isinstance(t["trace"], str) else t["trace"]) for t in stored[seen:])
        seen = len(stored)
        turns.append(TurnRecord(
            number, text, result.reply, traces, dict(before.state), dict(after.state), before.user_model, after.user_model,
        ))
    return Transcript(soul.name, tuple(turns))


_UNSTABLE = {"latency_ms", "ms", "framework_ms", "total_ms", "input_tokens", "output_tokens"}


_MEMORY_ID = re.compile(r"[0-9a-f]{16}")


def _stable(trace: Any) -> Any:
    """The trace without timings (and token counts, which some providers estimate), nor
    memory ids (random per field)."""
    if isinstance(trace, dict):
        return {k: _stable(v) for k, v in trace.items() if k not in _UNSTABLE and not (k == "id" and isinstance(v, str) and _MEMORY_ID.fullmatch(v))}
    if isinstance(trace, list):
        return [_stable(v) for v in trace]
    return trace
