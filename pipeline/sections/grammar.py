"""GBNF grammars from the XML sections of a call, so small local models write parseable replies.

The grammar asks for the call's sections in order: a required section must appear, an optional
one (or one whose gate is decided after the call) may; attributes with allowed values (verbs)
are limited to them; booleans are `true | false`; a choice is one of its options; free text is
anything without `<`. No bounded repetitions: llama.cpp's grammar engine slows down badly on
them (measured here: `[^<]{1,600}` took 171 s for 237 tokens, `[^<]+` took 9 s).

The grammar's last line is a GBNF comment holding the call's section plan as JSON
(`# soul-sections: {...}`): what a provider needs to drive decoding section by section
(`soul.providers.local_sections`) without knowing step kinds. For each section, in call order:
`tag`, `type`, `attrs` (attribute -> allowed values), `options` (a choice's), `budget` (tokens),
`required`, `step` (its step's index), and when the section declares them `lead` (the words its
content starts with) and `ends` (the characters that end its content) — and `gated`: the
indexes of the steps whose sections come together or not at all.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from soul.kinds import Section, StepKind


def _literal(text: str) -> str:
    """A GBNF string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _rule_name(*parts: str) -> str:
    return "-".join(re.sub(r"[^a-zA-Z0-9]+", "-", p).strip("-").lower() for p in parts if p)


def _alternatives(values: Sequence[str]) -> str:
    return "(" + " | ".join(_literal(v) for v in values) + ")"


PLAN_PREFIX = "# soul-sections: "
# Tokens by section type when a section declares no `budget`: a boolean or a choice is a word
# (decoded under its own grammar); a thought is short, a reply longer; lists and markdown
# (a whole user model) the longest.
TYPE_BUDGETS = {"bool": 8, "choice": 16, "list": 128, "mapping": 128, "markdown": 192}
THOUGHT_BUDGET = 64
REPLY_BUDGET = 160


def section_budget(kind: type[StepKind], section: Section) -> int:
    """The tokens a local model may write in `section` of a `kind` step (its `budget`, else by
    type: the streamed text of a reply kind gets `REPLY_BUDGET`, other text `THOUGHT_BUDGET`)."""
    if section.budget is not None:
        return section.budget
    if section.type in TYPE_BUDGETS:
        return TYPE_BUDGETS[section.type]
    streamed = kind.streamable and section.tag == (kind.stream_tag or kind.sections[0].tag)
    return REPLY_BUDGET if streamed else THOUGHT_BUDGET


def _choices(section: Section, params: Mapping[str, Any]) -> list[str] | None:
    options = None
    for attribute in section.attributes:
        raw = params.get(attribute.param) if attribute.param else None
        if isinstance(raw, list | tuple) and raw:
            options = [str(o) for o in raw]
    return options


def section_plan(
    steps: Sequence[tuple[type[StepKind], Mapping[str, Any]]],
    optional_steps: Collection[int] = (),
) -> dict[str, Any]:
    """The call's sections as plain data, for providers that write the structure themselves."""
    sections: list[dict[str, Any]] = []
    seen: set[str] = set()
    for index, (kind, params) in enumerate(steps):
        for section in kind.sections:
            if section.tag in seen:
                continue
            seen.add(section.tag)
            options = _choices(section, params) if section.type == "choice" else None
            sections.append({
                "tag": section.tag,
                "type": section.type if section.type != "choice" or options else "text",
                "attrs": {a.name: list(a.values) for a in section.attributes if a.values},
                "options": options or [],
                "budget": section_budget(kind, section),
                "required": section.required,
                "step": index,
                # only when set: the plan of a call whose sections have neither stays as it was
                **({"lead": section.lead} if section.lead else {}),
                **({"ends": section.ends} if section.ends else {}),
            })
    return {"sections": sections, "gated": sorted(set(optional_steps))}


def _section_rules(section: Section, params: Mapping[str, Any]) -> tuple[str, list[str]]:
    """The rule name of one section and the rules it needs."""
    name = _rule_name("sec", section.tag)
    rules: list[str] = []
    opening = [_literal(f"<{section.tag}")]
    for attribute in section.attributes:
        if attribute.values:
            rule = _rule_name("attr", section.tag, attribute.name)
            rules.append(f"{rule} ::= {_alternatives(attribute.values)}")
            opening.append(f'{_literal(f" {attribute.name}=")} "\\"" {rule} "\\""')
        # attributes without allowed values (decision's options, brainstorm's count) are left
        # out: the model gains nothing by copying them back
    opening.append(_literal(">"))
    options = _choices(section, params)
    if section.type == "bool":
        body = '("true" | "false")'
    elif section.type == "choice" and options:
        body = _alternatives(options)
    else:
        # Free text without `<`. Tighter forms were tried and dropped: one line per section
        # made decoding crawl whenever the model wanted a newline (minutes per turn), and
        # nested sentences or lines did the same; the token budget bounds the text instead.
        body = "text"
    rules.append(f"{name} ::= {' '.join(opening)} {body} {_literal(f'</{section.tag}>')}")
    return name, rules


def call_grammar(
    steps: Sequence[tuple[type[StepKind], Mapping[str, Any]]],
    optional_steps: Collection[int] = (),
) -> str:
    """A GBNF grammar for a reply to a call over `steps` ((kind, `with:` params) in call order);
    the sections of the steps at the indexes in `optional_steps` may be left out."""
    rules: list[str] = []
    sequence: list[str] = []
    seen: set[str] = set()
    for index, (kind, params) in enumerate(steps):
        parts = []
        for section in kind.sections:
            name, needed = _section_rules(section, params)
            if name in seen:
                continue
            seen.add(name)
            rules.extend(needed)
            parts.append(f"ws {name}" if section.required else f"(ws {name})?")
        if parts and index in optional_steps:
            # the step's sections come together or not at all (an update with its note)
            sequence.append(f"({' '.join(parts)})?")
        else:
            sequence.extend(parts)
    # no trailing whitespace rule: after the last section the only way on is the end (a small
    # model otherwise pads with blank lines up to its token budget)
    head = f"root ::= {' '.join(sequence)}"
    # free text holds a visible character: whitespace alone is no content (a small model
    # otherwise answers a section with its indentation and closes it)
    tail = ["ws ::= [ \\t\\n]*", "text ::= [ \\t\\n]* [^< \\t\\n] [^<]*"]
    # ensure_ascii: the comment stays one line whatever the tags or options hold
    plan = PLAN_PREFIX + json.dumps(section_plan(steps, optional_steps), ensure_ascii=True)
    return "\n".join([head, *rules, *tail, plan]) + "\n"
