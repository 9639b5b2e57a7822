"""The step-kind interface: what a kind of cognitive step declares about itself.

A step kind is a small class registered under the name authors write in `uses:`. It declares
the template variables it reads, its typed outputs, its default template, the XML sections a
model writes for it (tag, attributes, allowed values), its `with:` parameters as JSON Schema,
and which stores it may change. The runtime does the calling and the writing; a kind only
describes and (later) parses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

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


class StepKind:
    """Base of every step kind; subclasses set the class attributes below."""

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

    @classmethod
    def output_names(cls) -> tuple[str, ...]:
        return tuple(o.name for o in cls.outputs)

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
