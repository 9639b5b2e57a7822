"""The step-kind interface: what a kind of cognitive step declares about itself.

A step kind is a small class registered under the name authors write in `uses:`. It declares
the template variables it reads, its typed outputs, its default template, the XML sections a
model writes for it (tag, attributes, allowed values), its `with:` parameters as JSON Schema,
and which stores it may change. The runtime does the calling and the writing; a kind only
describes and (later) parses.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, runtime_checkable

from soul.records import Layer, MemoryEntry, MessageRecord, UserModelChange

if TYPE_CHECKING:
    from soul.language import StateVar

OutputType = Literal["text", "bool", "list", "mapping", "markdown", "choice", "any"]
Effect = Literal["state", "user_model", "memory", "mood", "impulses"]

# Names every template and `when` expression may read, besides `steps`.
CONTEXT_NAMES: tuple[str, ...] = (
    "soul",  # name, description, persona text
    "input",  # the turn's input: text, kind (message | spontaneous), user
    "turn",  # number (1-based), first (bool)
    "state",  # the soul state, declared keys only
    "user_model",  # the markdown user model of the current user
    "memory",  # working-memory regions, in order
    "chetana",  # affect, focus, self_assessment, intentions, steering (when enabled)
    "params",  # the step's own `with:` values
    "mind",  # AgentCSD: mood, criteria, impulses, histories, changes (empty without a process)
)


@dataclass(frozen=True)
class Output:
    """One typed output of a step, readable downstream as `steps.<step>.<name>`."""

    name: str
    type: OutputType
    description: str


@dataclass(frozen=True)
class Attribute:
    """An XML attribute of a section; `values` lists the allowed ones (empty: free text)."""

    name: str
    output: str | None = None
    values: tuple[str, ...] = ()
    required: bool = False
    param: str | None = None  # the allowed values come from this `with:` parameter instead


@dataclass(frozen=True)
class Section:
    """An XML section the model writes for the step: `<tag attr="...">content</tag>`."""

    tag: str
    output: str
    type: OutputType = "text"
    attributes: tuple[Attribute, ...] = ()
    required: bool = True
    description: str = ""
    # Tokens a local model may write in this section when the framework drives decoding
    # (`soul.sections.grammar.section_budget`); None: by type — short for a thought, longer for a reply
    budget: int | None = None
    # When the framework drives decoding (the local model): words it writes at the start of the
    # content for the model to continue ("I feel" before a mood), so a small model answers
    # instead of copying the section's instructions; they are part of the content. Other
    # providers never see them: the response format is the same for every model.
    lead: str = ""
    # ... and characters that end the content once it holds a visible character (a mood ends
    # at its first comma or full stop); the character itself is left out. "": only `<`, the
    # model's end or the budget end it.
    ends: str = ""


# Not frozen: built on every model call (a frozen init costs 4x); treat it as immutable.
@dataclass(slots=True)
class Changes:
    """What a step's outputs change, returned to the runtime (a step never writes a store)."""

    messages: tuple[MessageRecord, ...] = ()
    state: Mapping[str, Any] | None = None  # new values of declared state keys
    user_model: UserModelChange | None = None
    memory: tuple[MemoryEntry, ...] = ()
    reply: str | None = None  # text that reaches the user
    flags: tuple[str, ...] = ()
    regions: Mapping[str, tuple[str, ...]] | None = None  # working memory for this turn only
    remember: tuple[Mapping[str, Any], ...] = ()  # memory-field items, written after the commit


def with_memory(changes: Changes, *entries: MemoryEntry, reply: str | None = None) -> Changes:
    """`changes` plus working-memory entries (and a reply): cheaper than dataclasses.replace."""
    return Changes(
        changes.messages, changes.state, changes.user_model, changes.memory + entries,
        reply if reply is not None else changes.reply, changes.flags, changes.regions, changes.remember,
    )


class RecalledMemory(Protocol):
    """One memory a recall found, best first (the memory engine's `Hit` has this shape)."""

    @property
    def id(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def score(self) -> float: ...
    @property
    def kind(self) -> str: ...  # a memory kind's label: episode, entity, ...
    @property
    def tags(self) -> tuple[str, ...]: ...
    @property
    def meta(self) -> Mapping[str, Any]: ...  # e.g. "session": the conversation it came from


@runtime_checkable
class Recall(Protocol):
    """What a step may do with the soul's memory field: search it, never change it (the
    runtime writes memories after the turn commits). Opening the field and every query may
    raise `soul.errors.MemoryFieldError`, which names the field and how to fix it."""

    def recall(self, query: str, k: int = 10, *, mode: str = "hybrid",
               tags: Sequence[str] | None = None) -> Sequence[RecalledMemory]:
        """The `k` memories most relevant to `query`; `mode`: hybrid, semantic or keyword;
        `tags` boost memories carrying them."""
        ...

    def resonate(self, query: str, k: int = 10, *, session: str | None = None, tags: Sequence[str] | None = None,
                 affect: Mapping[str, float] | None = None) -> Sequence[RecalledMemory]:
        """Full resonance (association through the knowledge graph, scoring); `session`
        primes with what that conversation saw; `affect`: valence, arousal, frustration,
        confidence (Chetana's), for the mood factors."""
        ...


@dataclass(frozen=True)
class StepEnv:
    """What a non-LLM step may use: the names templates see, a sandboxed renderer for its
    template parameters, and `recall()`, the read-only search of the soul's memory field
    (the field opens on its first query)."""

    variables: Mapping[str, Any]
    render: Callable[[str], str]
    recall: Callable[[], Recall]
    memory_config: Mapping[str, Any] = field(default_factory=dict)
    input_text: str = ""  # the raw input, for engines (a search query); never for prompts
    session: str | None = None  # the session's id (memory priming), None outside a session


class Seen(Protocol):
    """What `StepKind.refusals` may ask about a reply: whether a text (case and whitespace
    aside) is a copy of what the turn said before the call — the user's message, earlier
    steps' text (the reply, in a chained soul) — or of what the model wrote in another section
    of the same reply (the reply, in a fused one)."""

    def holds(self, text: str, besides: str) -> bool:
        """Whether `text` lies within what the turn said or within a section of the reply
        other than `besides`."""
        ...


@dataclass(frozen=True, init=False)
class ChangeContext:
    """What `StepKind.changes` may consult: the declared state and its current values."""

    state_spec: Mapping[str, StateVar] = field(default_factory=dict)
    state: Mapping[str, Any] = field(default_factory=dict)

    def __init__(self, state_spec: Mapping[str, StateVar] | None = None, state: Mapping[str, Any] | None = None) -> None:
        # its own: the generated frozen __init__ tests each field for a default factory first (every
        # runner builds one). Not through `__dict__`, which would make CPython 3.11 read the fields
        # by its slow path from then on (`changes` reads them for every step).
        setattr_ = object.__setattr__
        setattr_(self, "state_spec", {} if state_spec is None else state_spec)
        setattr_(self, "state", {} if state is None else state)


# each kind's output names, by kind (with the outputs they were read from)
_OUTPUT_NAMES: dict[type, tuple[tuple[Output, ...], tuple[str, ...]]] = {}


class StepKind:
    """Base of every step kind; subclasses set the class attributes below."""

    layer: ClassVar[Layer] = "internal"

    name: ClassVar[str]
    description: ClassVar[str]
    llm: ClassVar[bool] = True
    streamable: ClassVar[bool] = False
    inputs: ClassVar[tuple[str, ...]] = ()
    outputs: ClassVar[tuple[Output, ...]] = ()
    sections: ClassVar[tuple[Section, ...]] = ()
    template: ClassVar[str | None] = None
    params: ClassVar[dict[str, Any]] = {"type": "object", "additionalProperties": False}
    effects: ClassVar[tuple[Effect, ...]] = ()
    # The output that takes the whole reply (tags stripped) when none of the kind's sections
    # parse — AgentCSD's internal dialog: everything unparsed is quiet, so nothing leaks.
    unparsed: ClassVar[str | None] = None
    # The section whose text streams to the user (`stream: true`); default the first.
    stream_tag: ClassVar[str | None] = None
    # A streamed section holding only this word says nothing: it is never streamed either
    silence: ClassVar[str | None] = None
    # How much of the conversation a call of this kind sees by default (a step's `history:`
    # overrides it): at most `history_turns` recent turns, within `history_share` of the
    # tokens its call has left after the parts that cannot be cut. A fused call takes the most.
    history_turns: ClassVar[int] = 4
    history_share: ClassVar[float] = 0.3

    @classmethod
    def changes(cls, step: str, outputs: Mapping[str, Any], context: ChangeContext) -> Changes:
        """The records a run of this step leaves; by default one message of its first section."""
        if not cls.sections:
            return Changes()
        first = cls.sections[0]
        value = outputs.get(first.output)
        if value is None:
            return Changes()
        if isinstance(value, list):
            content = "\n".join(f"- {v}" for v in value)
        elif isinstance(value, dict):
            content = "\n".join(f"{k}: {v}" for k, v in value.items())
        else:
            content = str(value)
        meta = {k: v for k, v in outputs.items() if k not in (first.output, "verb") and v is not None}
        if isinstance(value, bool):
            meta["result"] = value
        return Changes(messages=(MessageRecord(cls.layer, first.tag, content, step, outputs.get("verb"), meta),))

    @classmethod
    def refusals(cls, outputs: Mapping[str, Any], seen: Seen) -> Mapping[str, str]:
        """Sections written but not what they ask for, by tag, each with the reason the model
        is told: the runtime re-asks as for a missing section and, when the re-ask is no
        better, refuses them (their outputs None, the step flagged). None by default."""
        return {}

    @classmethod
    async def run(cls, step: str, params: Mapping[str, Any], env: StepEnv) -> dict[str, Any]:
        """A non-LLM step's outputs (LLM kinds are answered by the model instead)."""
        raise NotImplementedError(f"the {cls.name} step kind has no run() yet")

    @classmethod
    def output_names(cls) -> tuple[str, ...]:
        found = _OUTPUT_NAMES.get(cls)
        if found is None or found[0] is not cls.outputs:  # parsing asks on every reply
            found = _OUTPUT_NAMES[cls] = (cls.outputs, tuple(o.name for o in cls.outputs))
        return found[1]

    @classmethod
    def check_declaration(cls) -> list[str]:
        """Problems with the declaration itself (used by the registry on registration)."""
        problems = []
        for attr in ("name", "description"):
            if not isinstance(getattr(cls, attr, None), str) or not getattr(cls, attr):
                problems.append(f"missing class attribute '{attr}'")
        names = cls.output_names()
        if len(set(names)) != len(names):
            problems.append("duplicate output names")
        for section in cls.sections:
            if section.output not in names:
                problems.append(f"section <{section.tag}> fills unknown output '{section.output}'")
            for attribute in section.attributes:
                if attribute.output and attribute.output not in names:
                    problems.append(
                        f"attribute '{attribute.name}' of <{section.tag}> fills unknown output "
                        f"'{attribute.output}'"
                    )
        if cls.llm and not cls.sections:
            problems.append("an LLM step kind must declare at least one XML section")
        if not cls.llm and cls.sections:
            problems.append("a non-LLM step kind cannot declare XML sections")
        if cls.streamable and not cls.llm:
            problems.append("only LLM step kinds can stream")
        return problems


def param(schema: dict[str, Any], description: str) -> dict[str, Any]:
    """A `with:` parameter schema with its description (shown by editors)."""
    return {**schema, "description": description}


def params_schema(required: tuple[str, ...] = (), **properties: dict[str, Any]) -> dict[str, Any]:
    """The JSON Schema of a kind's `with:` block."""
    schema: dict[str, Any] = {
        "type": "object",
        "additionalProperties": False,
        "properties": properties,
    }
    if required:
        schema["required"] = list(required)
    return schema
