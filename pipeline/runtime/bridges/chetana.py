"""Chetana in a session: the controller's life across a turn, and user corrections.

When a blueprint has a `chetana:` block, each session carries a ChetanaController whose state
is stored with the session (in the turn's Commit, all or nothing). Per turn: `before_turn` on
the input (with a correction flag when the user is correcting the soul, and then
`after_user_correction`, so the frustration it brings is in this turn's prompt), one
`after_tool_execution` per step that ran (name = the step, success = it parsed, latency, its
output as content) and one per call of a blueprint tool (name = the tool, success = it returned
within its timeout, its latency, its result or error as content), then `after_turn`. Templates see the context as `chetana.*`; events go to
the trace and to the session's events log.

Chetana's errors stop here: a refused `chetana:` block, a saved state that cannot be restored
or a refused hook call leave this bridge as a `soul.errors.ChetanaError` that says what was
refused and how to fix it, with the engine's exception as its `__cause__`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from soul.errors import ChetanaError, SoulError
from soul.records import MessageRecord

if TYPE_CHECKING:
    from soul.compiler import Plan

# Phrases that mark a message as a correction of what the soul said or did.
_CORRECTION = re.compile(
    r"""(?ix)
    (^|[.!?]\s+|^\s*)(no|nope|nah)\b[\s,.!-]+(i\s+(meant|mean|said|asked|wanted)|that'?s|not|it'?s|you)
    | \bthat'?s\s+(not\s+(right|correct|true|what\s+i\s+(meant|asked|said|wanted))|wrong|incorrect)\b
    | \b(that|this|it)\s+is\s+(not\s+(right|correct|what\s+i\s+(meant|asked))|wrong|incorrect)\b
    | \bnot\s+what\s+i\s+(meant|asked|said|wanted)\b
    | \byou\s+(misunderstood|misread|got\s+(it|that)\s+wrong|are\s+wrong|'re\s+wrong)\b
    | \bi\s+(didn'?t|did\s+not)\s+(mean|say|ask)\b
    | \bactually,?\s+i\s+(meant|said|asked)\b
    | \b(wrong|incorrect)\s*[,.!]\s*(i|it|the|that)\b
    """
)


# Every alternative of _CORRECTION holds one of these words ("not" and "nope" hold "no"): an
# ASCII text holding none of them, case aside, is no correction, told without the search (which
# tries every alternative at every character, ~0.1 us each). A text that is not ASCII is always
# searched: case-insensitive matching also folds a few other letters (the long s, the dotless i).
_CORRECTION_WORDS = ("no", "nah", "wrong", "incorrect", "misread", "misunderstood", "did", "actually")


def is_correction(text: str) -> bool:
    """Whether a user message corrects the soul ("no, I meant…", "that's wrong", …)."""
    if not text:
        return False
    if text.isascii():
        lowered = text.lower()
        for word in _CORRECTION_WORDS:
            if word in lowered:
                break
        else:
            return False
    return _CORRECTION.search(text) is not None


# json.dumps(..., ensure_ascii=False, default=str) without making its encoder on every call
# (each step that runs reports its outputs): the same encoder, made once
_ENCODE = json.JSONEncoder(ensure_ascii=False, default=str).encode


def _content(outputs: Mapping[str, Any]) -> str:
    shown = {k: v for k, v in outputs.items() if v not in (None, "")}
    return _ENCODE(shown)


# The kinds of this package that run without a model and read `chetana` from their variables,
# and the parts they read: a recall weighs its memories by the affect (steps/memory.py).
_LOCAL_READS = {"memory.recall": frozenset({"affect"})}
_RUNTIME_PARTS = frozenset({"affect", "steering"})  # what the runtime reads itself (a recall, the prompt)
_EVERY_PART = frozenset({"affect", "focus", "self_assessment", "intentions", "steering"})


def reads_whole_context(plan: Plan, template_reads: Callable[[str], frozenset[str]]) -> bool:
    """Whether a turn of `plan` may read more of Chetana's context than its affect and
    steering (which the runtime reads itself: a recall's affect, the prompt's steering) —
    anything that could: a template reading `chetana` (`template_reads`: the names a template
    reads, its includes' too), a `when:` or a parameter naming it, a step kind without a
    model call that is not one of this package's known readers (a plugin kind sees every
    variable). Decided once a plan: without it, `Cognition.begin` builds neither the focus
    nor the self-assessment."""
    if plan.blueprint.tools or plan.blueprint.mcp:  # tool arguments are templates too
        return True
    for _, scope, _ in plan.scopes():
        if scope.gate is not None and scope.gate.when and "chetana" in scope.gate.when:
            return True
        for step in scope.steps.values():
            kind = step.kind
            if step.gate is not None and step.gate.when and "chetana" in step.gate.when:
                return True
            if _names_chetana(step.params):
                return True
            if step.llm:
                name = step.template or kind.template
                if name is not None and "chetana" in template_reads(name):
                    return True
            elif not kind.__module__.startswith("soul.steps.") or (
                    "chetana" in kind.inputs and _LOCAL_READS.get(kind.name, _EVERY_PART) - _RUNTIME_PARTS):
                return True
    return False


def _names_chetana(value: Any) -> bool:
    """Whether a `with:` value (a template parameter, maybe) holds the word `chetana` in a
    string, a key or an item at any depth (walked with a stack: a plugin's nested value may
    be as deep as YAML allows)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "chetana" in item:
                return True
        elif isinstance(item, Mapping):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False


@dataclass(frozen=True)
class Kept:
    """A session's controller between turns: the `chetana:` block it was built from, the
    state it stored, and the controller itself (`Cognition.keep`; used once: a turn takes it)."""

    block: Mapping[str, Any]
    state: dict[str, Any]
    controller: Any


@dataclass
class Cognition:
    """One turn's use of a session's ChetanaController."""

    controller: Any
    context: dict[str, Any]
    correction: bool
    block: Mapping[str, Any]  # the `chetana:` block it began from (what `keep` records)
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    @classmethod
    def begin(cls, block: Mapping[str, Any], state: Mapping[str, Any] | None, text: str, kept: Kept | None = None,
              *, whole: bool = True) -> Cognition:
        """Restore (or create) the controller and run `before_turn` on the input.

        `kept`: the controller the session's last turn ended with and the state it stored
        (`keep`); when the state read back is that state, the controller goes on instead
        of a restore (it rested: it is what the restore would build, as a property test
        pins), which spares each turn Chetana's restore. `whole`: the context holds focus,
        self-assessment and intentions too; without, only affect and steering (what the
        runtime itself reads: `reads_whole_context` says when nothing else is read), and
        the focus and self-assessment are never built."""
        from soul.engines.chetana import ChetanaController

        events: list[tuple[str, dict[str, Any]]] = []

        def on_event(name: str, data: Mapping[str, Any]) -> None:
            events.append((name, dict(data)))

        with _ChetanaErrors("the session's saved Chetana state"):
            config, priors = _settings(block)
            if state and kept is not None and kept.block is block and kept.state == state:
                controller = kept.controller
                controller.on_event = on_event
            elif state:
                controller = ChetanaController.deserialize(state, config, on_event, priors)
            else:
                controller = ChetanaController(config, on_event, priors)
        correction = is_correction(text)
        with _ChetanaErrors(doing="the turn's input"):
            context = controller.before_turn(text or None, correction=correction)
            if correction:  # felt when read: this turn's prompt is built with it
                del context  # unread: the controller's gate need not build it before the change
                context = controller.after_user_correction()
        if whole:
            data = context.to_dict()
        else:  # the context handed out is dropped unread: the controller's gate builds nothing
            affect = context.affect
            data = {"affect": affect._asdict(), "steering": controller.steering(affect)}
        data["correction"] = correction
        return cls(controller, data, correction, block, events)

    def record(self, step: str, ok: bool, latency_ms: float, outputs: Mapping[str, Any]) -> None:
        """Report one step's run as a tool execution (a user correction was reported once,
        when the turn began: `begin`); its outputs, as JSON, are the content only when an
        intention could read them (`reads_results`: no goal, no encoding)."""
        controller = self.controller
        with _REPORTING:
            controller.after_tool_execution(step, ok, max(0.0, latency_ms), _content(outputs) if controller.reads_results else None)

    def tool(self, name: str, ok: bool, latency_ms: float, content: str | None) -> None:
        """Report one call of a blueprint tool (soul.runtime.tools): its real outcome (False
        for an error or a timeout) and latency, under the tool's name."""
        with _REPORTING:
            self.controller.after_tool_execution(name, ok, max(0.0, latency_ms), content or "")

    def finish(self) -> dict[str, Any]:
        """End the turn; the controller's state to store with the session."""
        with _ChetanaErrors(doing="the end of the turn"):
            self.controller.after_turn()
            state: dict[str, Any] = self.controller.serialize()
        return state

    def keep(self, state: dict[str, Any]) -> Kept:
        """The controller to go on with next turn, once `state` (what `finish` returned) is
        stored: rested to what `serialize` keeps, so that it is the restore of `state`."""
        with _ChetanaErrors(doing="the end of the turn"):
            self.controller.rest()
        return Kept(self.block, state, self.controller)

    def event_records(self) -> tuple[MessageRecord, ...]:
        """The turn's events as records for the session's events log."""
        records = [MessageRecord("system", "chetana_event", name, None, None, _json_safe(data)) for name, data in self.events]
        if self.correction:
            records.insert(0, MessageRecord("system", "user_correction", "the user corrected the soul", None, None, {}))
        return tuple(records)


_SETTINGS: dict[int, tuple[Mapping[str, Any], Any, Any]] = {}  # id(block) -> (block, config, priors)


def _settings(block: Mapping[str, Any]) -> tuple[Any, Any]:
    """The `chetana:` block's config and priors, validated once per block (each turn
    restores the controller with them; building them was a tenth of the restore)."""
    hit = _SETTINGS.get(id(block))
    if hit is not None and hit[0] is block:
        return hit[1], hit[2]
    from soul.engines.chetana import ChetanaConfig, CognitivePriors

    config = ChetanaConfig.from_dict(dict(block.get("config") or {}))
    priors = CognitivePriors.from_dict(dict(block.get("priors") or {}))
    if len(_SETTINGS) >= 64:
        _SETTINGS.clear()
    _SETTINGS[id(block)] = (block, config, priors)  # the block is kept: its id is not reused
    return config, priors


_SCALARS = frozenset((str, int, float, bool, type(None)))
_KEYS = frozenset((str,))
_FLAT = _SCALARS | {list, tuple}


def _json_safe(data: Mapping[str, Any]) -> dict[str, Any]:
    """`data` as it reads back from JSON. An event of plain scalars, and lists or tuples of
    them, under string keys (every event Chetana sends today) reads back equal with its
    sequences as lists, so it is copied so, not encoded and decoded (told by passes in C over
    its keys' and values' types)."""
    if _KEYS.issuperset(map(type, data)):
        values = data.values()
        if _SCALARS.issuperset(map(type, values)):
            return dict(data)
        if _FLAT.issuperset(map(type, values)):
            copied = dict(data)
            for key, value in copied.items():
                if type(value) is list or type(value) is tuple:
                    if not _SCALARS.issuperset(map(type, value)):
                        break
                    copied[key] = list(value)
            else:
                return copied
    return json.loads(json.dumps(dict(data), default=str))


def session_report(store: Any, session_id: str) -> Any:
    """The CognitiveReport of a stored session (`soul chetana`, `/chetana`)."""
    from soul.engines.chetana import ChetanaController

    info = store.find_session(session_id)
    state = store.snapshot(info.id).chetana
    if state is None:
        raise SoulError(f"session {info.id} ({info.soul}) has no Chetana state: its blueprint has no `chetana:` block, or no turn ran yet")
    block = _chetana_block(info.blueprint)
    with _ChetanaErrors(f"the saved Chetana state of session {info.id} ({info.soul})"):
        controller = ChetanaController.deserialize(state, dict(block.get("config") or {}), None, dict(block.get("priors") or {}))
        return controller.cognitive_report()


def _chetana_block(blueprint_file: str) -> Mapping[str, Any]:
    """The session's blueprint's `chetana:` block, or {} when the file is gone or invalid."""
    if not blueprint_file:
        return {}
    from soul.compiler import validate
    from soul.errors import BlueprintError

    try:
        checked = validate(blueprint_file)
    except BlueprintError:
        return {}
    return (checked.blueprint.chetana or {}) if checked.ok and checked.blueprint else {}


class _ChetanaErrors:
    """Raise a `soul.errors.ChetanaError` (from the original) for an engine error raised
    inside: a refused config is the blueprint's `chetana:` block, a refused state is `state`
    (whose it is), a refused input is what the bridge was `doing`. A class, not a generator:
    it wraps every step's report, so entering it must cost next to nothing."""

    __slots__ = ("doing", "state")

    def __init__(self, state: str = "the saved Chetana state", *, doing: str = "") -> None:
        self.state = state
        self.doing = doing

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, traceback: object) -> None:
        if exc is None:
            return
        from soul.engines.chetana import ChetanaError as EngineError
        from soul.engines.chetana import ConfigError, InputError, StateError

        if not isinstance(exc, EngineError):
            return
        if isinstance(exc, ConfigError):
            message = (f"Chetana refused the blueprint's `chetana:` block: {exc}: fix `chetana.config` or "
                       "`chetana.priors` (docs/chetana.md lists every key and its range)")
        elif isinstance(exc, StateError):
            message = (f"Chetana cannot restore {self.state}: {exc}: the session store holds a damaged state or one "
                       "written by a newer soulgraph; upgrade soulgraph, or start a new session (this one keeps its messages)")
        elif isinstance(exc, InputError):
            message = f"Chetana refused {self.doing or 'a call'}: {exc}"
        else:
            message = f"Chetana failed{f' on {self.doing}' if self.doing else ''}: {exc}"
        raise ChetanaError(message) from exc


_REPORTING = _ChetanaErrors(doing="a step's report")  # stateless: one for every step
