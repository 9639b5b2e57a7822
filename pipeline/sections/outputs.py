"""Typed outputs: a step kind's parsed sections turned into the values downstream steps read.

`parse_step` reads a `ParseResult` (from `soul.sections.xmlparse`) through a kind's declared sections:
text stays text, booleans come from true/yes/1 and false/no/0, lists from bullet lines,
mappings from `key: value` lines, choices are matched against the step's options, and
attribute values (verbs) against their allowed values. Problems that do not stop the turn
become flags; only an absent required section (or an unreadable required boolean) is missing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from soul.kinds import Attribute, Section, StepKind
from soul.sections.xmlparse import ParsedSection, ParseResult, clean_single

__all__ = ["CleanReader", "StepParse", "parse_bool", "parse_list", "parse_mapping", "parse_step"]

_TRUE = frozenset({"true", "yes", "1", "y", "on"})
_FALSE = frozenset({"false", "no", "0", "n", "off"})
# Markdown emphasis, quotes and sentence punctuation models put around a bare answer.
_DECORATION = " \t\r\n\"'`*_.,;:!?()[]{}<>~"
_BULLET = re.compile(r"^\s*(?:[-*+•‣◦▪]|\d{1,3}[.)])\s+(.*)$")
_BULLET_PREFIX = re.compile(r"^\s*(?:[-*+•‣◦▪]|\d{1,3}[.)])\s+")
_CHOICE_DECORATION = " \t\r\n\"'`*_.,;:!?()[]{}"


# Not frozen: built on every model call (a frozen init costs 4x); treat it as immutable.
@dataclass(slots=True)
class StepParse:
    """A step's typed outputs from one reply."""

    outputs: dict[str, Any]  # every output name of the kind -> value (None when absent)
    missing: tuple[str, ...]  # tags of required sections that were absent (or unreadable bools)
    flags: tuple[str, ...]  # non-fatal problems, e.g. "unknown verb 'shouted' (kept)"


def parse_bool(text: str) -> bool | None:
    """true/yes/1/y/on -> True, false/no/0/n/off -> False, ignoring case and decoration; else None.

    Decoration is what models wrap a bare answer in: whitespace, punctuation, quotes and
    markdown emphasis (`True.`, `**true**`, `"no"`).
    """
    word = text.strip(_DECORATION).lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    return None


def parse_list(text: str) -> list[str]:
    """Bullet items (`- x`, `* x`, `1. x`, `• x`), or every non-empty line when there are none."""
    lines = text.splitlines()
    items = [m.group(1).strip() for m in map(_BULLET.match, lines) if m is not None]
    if items:
        return [item for item in items if item]
    return [line.strip() for line in lines if line.strip()]


def parse_mapping(text: str) -> dict[str, str]:
    """`key: value` lines as a dict (a bullet before the key is ignored; a later key wins)."""
    mapping: dict[str, str] = {}
    for line in text.splitlines():
        key, colon, value = _BULLET_PREFIX.sub("", line, count=1).partition(":")
        key = key.strip()
        if colon and key:
            mapping[key] = value.strip()
    return mapping


def _normalise(value: str, decoration: str = " \t\r\n") -> str:
    """Case-folded, whitespace-collapsed, `_`/`-` as spaces: how allowed values are compared."""
    return " ".join(value.strip(decoration).replace("_", " ").replace("-", " ").casefold().split())


_OPTIONS: dict[tuple[str, ...], dict[str, str]] = {}  # allowed values -> {normalised: the first such value}


def _match(value: str, allowed: Sequence[str], decoration: str = " \t\r\n") -> str | None:
    """The first of `allowed` that reads as `value` (`_normalise`d alike), or None; the allowed
    values of a kind's attribute (a verb's dozen) are normalised once, not on every reply."""
    wanted = _normalise(value, decoration)
    if type(allowed) is not tuple:
        return next((option for option in allowed if _normalise(option) == wanted), None)
    options = _OPTIONS.get(allowed)
    if options is None:
        if len(_OPTIONS) >= 1024:
            _OPTIONS.clear()
        options = _OPTIONS[allowed] = {}
        for option in allowed:
            options.setdefault(_normalise(option), option)
    return options.get(wanted)


def _find(result: ParseResult, tag: str) -> ParsedSection | None:
    section = result.sections.get(tag)
    if section is None:  # the runtime may have requested another spelling of the tag
        lowered = tag.lower()
        section = next((s for t, s in result.sections.items() if t.lower() == lowered), None)
    return section


def _options(section: Section, params: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The allowed choices of a choice section, from the `with:` parameter its attribute names."""
    for attribute in section.attributes:
        if attribute.param is not None:
            options = params.get(attribute.param)
            if isinstance(options, Sequence) and not isinstance(options, str):
                return tuple(str(option) for option in options)
    return None


def _value(section: Section, text: str, params: Mapping[str, Any], flags: list[str]) -> Any:
    if section.type == "bool":
        return parse_bool(text)
    if section.type == "list":
        return parse_list(text)
    if section.type == "mapping":
        return parse_mapping(text)
    if section.type == "choice":
        options = _options(section, params)
        if options:
            chosen = _match(text, options, _CHOICE_DECORATION)
            if chosen is not None:
                return chosen
            flags.append(f"choice {text!r} is not one of: {', '.join(options)}")
        return text
    return text  # text, markdown, any


def _attribute(
    section: Section, attribute: Attribute, parsed: ParsedSection, outputs: dict[str, Any], flags: list[str]
) -> None:
    raw = parsed.attributes.get(attribute.name.lower())
    if raw is None:
        if attribute.required:
            flags.append(f"<{section.tag}> has no '{attribute.name}' attribute")
        return
    value = " ".join(raw.split())
    if attribute.values:
        canonical = _match(value, attribute.values)
        if canonical is None:
            flags.append(f"unknown {attribute.name} {value!r} (kept)")
        else:
            value = canonical
    if attribute.output is not None:
        outputs[attribute.output] = value


_names: dict[type[StepKind], tuple[str, ...]] = {}  # each kind's output names (read on every reply)


def parse_step(kind: type[StepKind], params: Mapping[str, Any], result: ParseResult) -> StepParse:
    """The typed outputs of one step of `kind` (with its `with:` values) from a parsed reply.

    Every declared output is present (None when its section or attribute is absent). An empty
    required section counts as present, except a boolean, which must read as true or false.
    A section written more than once keeps its first occurrence and is flagged.
    """
    names = _names.get(kind)
    if names is None:
        names = _names[kind] = kind.output_names()
    outputs: dict[str, Any] = dict.fromkeys(names)
    missing: list[str] = []
    flags: list[str] = []
    found = result.sections
    for section in kind.sections:
        parsed = found.get(section.tag)
        if parsed is None:
            parsed = _find(result, section.tag)  # another spelling of the tag
            if parsed is None:
                if section.required:
                    missing.append(section.tag)
                continue
        if result.duplicates and parsed.tag in result.duplicates:
            flags.append(f"<{section.tag}> written more than once: the first is kept, the rest dropped")
        if section.type == "bool":
            value = parse_bool(parsed.text)
            if value is None:
                flags.append(f"<{section.tag}> is not true or false: {parsed.text[:80]!r}")
                if section.required:
                    missing.append(section.tag)
        else:
            value = _value(section, parsed.text, params, flags)
        outputs[section.output] = value
        for attribute in section.attributes:
            _attribute(section, attribute, parsed, outputs, flags)
    return StepParse(outputs, tuple(missing) if missing else (), tuple(flags) if flags else ())


class CleanReader:
    """Reads the usual reply of a call of one step whose kind writes one section without
    attributes — the whole reply that section, well formed, as a chained step's is — straight
    into the step's outputs: exactly `parse_step(kind, params, extract_sections(raw, (tag,)))`
    (a test checks both agree) without the reply's intermediate result. `read` gives None for
    any other reply (not clean, or a boolean that does not read as one): the caller then reads
    it the usual way, so nothing a tolerant read would repair or flag is decided here."""

    __slots__ = ("answers", "boolean", "close", "end", "names", "only", "open", "params", "pattern", "section", "start")

    def __init__(self, kind: type[StepKind], params: Mapping[str, Any]) -> None:
        (section,) = kind.sections  # one section (`fits` says which kinds)
        self.params, self.section = params, section
        self.pattern = clean_single(section.tag)
        # the reply as a model usually writes it, `<tag>text</tag>` and nothing else: told by
        # its two ends, no regex match (what the pattern reads it as, when `text` holds no markup)
        self.open, self.close = f"<{section.tag}>", f"</{section.tag}>"
        self.start, self.end = len(self.open), -len(self.close)  # the text between them: raw[start:end]
        self.names = kind.output_names()
        self.only = self.names == (section.output,)  # the section's output is the kind's only one
        self.boolean = section.type == "bool"
        # a boolean's two usual replies, each read whole as `parse_bool` reads its text
        self.answers = {f"{self.open}true{self.close}": True, f"{self.open}false{self.close}": False} if self.boolean else {}

    @staticmethod
    def fits(kind: type[StepKind]) -> bool:
        """Whether replies of `kind` can be read this way: one section, no attributes."""
        return len(kind.sections) == 1 and not kind.sections[0].attributes

    def read(self, raw: str) -> StepParse | None:
        value = self.answers.get(raw)  # a boolean's reply as models mostly write it, whole: one look-up
        if value is None:
            if raw.startswith(self.open) and raw.endswith(self.close):  # (they cannot overlap: a tag name holds no '/')
                text = raw[self.start:self.end]
                if "<" in text or "&" in text:  # not clean: the pattern does not match either
                    return None
            else:
                whole = self.pattern.fullmatch(raw)
                if whole is None:
                    return None
                text = whole.group(3)  # (attributes written: the kind reads none)
            if not self.boolean:
                flags: list[str] = []
                outputs = dict.fromkeys(self.names)
                outputs[self.section.output] = _value(self.section, text.strip(), self.params, flags)
                return StepParse(outputs, (), tuple(flags) if flags else ())
            value = parse_bool(text)
            if value is None:  # the usual read flags it (and calls it missing when required)
                return None
        if self.only:
            return StepParse({self.section.output: value}, (), ())
        outputs = dict.fromkeys(self.names)
        outputs[self.section.output] = value
        return StepParse(outputs, (), ())
