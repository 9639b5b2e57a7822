"""Loading YAML as plain data while keeping the line and column of every node.

`yaml.safe_load` forgets where things were; a blueprint error must point into the file. We
compose the node tree with PyYAML's safe loader and build the plain values ourselves, recording
each node's position under its key path (`("steps", "think", "after", 0)`). On the way we refuse
what a blueprint must never contain: duplicate keys, tabs, non-string keys, tags that construct
objects, and alias bombs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from soul.diagnostics import Diagnostic, Position, Severity

KeyPath = tuple[str | int, ...]

MAX_NODES = 200_000  # an alias bomb expands far past this; a real blueprint has hundreds
# Nesting deeper than this is refused before composing: libyaml's composer recurses in C
# (50k nested `[` crashed the process) and ours in Python; a real blueprint nests about 6 deep.
MAX_DEPTH = 64
MAX_SCALAR_DIGITS = 100  # a longer number is refused (Python refuses to read > 4300 digits)

_CORE_TAGS = {
    "tag:yaml.org,2002:str",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:null",
    "tag:yaml.org,2002:map",
    "tag:yaml.org,2002:seq",
    "tag:yaml.org,2002:timestamp",  # an unquoted date: kept as the text written
}

try:  # the C loader composes about 5x faster; same nodes, same marks
    _Loader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    _Loader = yaml.SafeLoader


@dataclass
class SourceMap:
    """Positions of every value and key of a loaded YAML file, by key path."""

    file: str
    lines: list[str]
    values: dict[KeyPath, Position] = field(default_factory=dict)
    keys: dict[KeyPath, Position] = field(default_factory=dict)

    def position(self, path: KeyPath, *, key: bool = False) -> Position:
        """Where `path` is; the nearest enclosing node when `path` itself was not written."""
        probe = tuple(path)
        while True:
            table = self.keys if key and probe in self.keys else self.values
            if probe in table:
                return table[probe]
            if not probe:
                return Position(1, 1)
            probe = probe[:-1]
            key = True  # a missing child is best shown at its parent's key

    def diagnostic(
        self,
        path: KeyPath,
        message: str,
        *,
        severity: Severity = "error",
        hint: str | None = None,
        key: bool = False,
        at: Position | None = None,
    ) -> Diagnostic:
        """A diagnostic pointing at `path` (or at an explicit position)."""
        pos = at or self.position(path, key=key)
        return Diagnostic(
            file=self.file,
            line=pos.line,
            col=pos.col,
            severity=severity,
            message=message,
            hint=hint,
            key_path=tuple(path),
            source_line=self.line_text(pos.line),
        )

    def text_position(self, path: KeyPath, line: int) -> tuple[Position, bool]:
        """Where line `line` of the string written at `path` is, and whether that is exact.

        A literal block scalar (`|`) keeps its lines: line N is N lines below the `|`. A
        folded, quoted or plain scalar joins or escapes lines, so the value's own position is
        the nearest (not exact, unless `line` is 1)."""
        start = self.position(path)
        text = self.line_text(start.line) or ""
        if text[start.col - 1:start.col] == "|":
            inner = self.line_text(start.line + line)
            if inner is not None and inner.strip():
                return Position(start.line + line, len(inner) - len(inner.lstrip(" ")) + 1), True
            return start, False
        return start, line == 1

    def line_text(self, line: int) -> str | None:
        return self.lines[line - 1] if 0 < line <= len(self.lines) else None


@dataclass
class Loaded:
    """The result of loading: plain data (None if unreadable), its map, and any problems."""

    data: Any
    source: SourceMap
    diagnostics: list[Diagnostic]


def _pos(mark: yaml.Mark) -> Position:
    return Position(mark.line + 1, mark.column + 1)


class _Builder:
    def __init__(self, source: SourceMap) -> None:
        self.source = source
        self.diagnostics: list[Diagnostic] = []
        self.count = 0
        self.constructor = yaml.constructor.SafeConstructor()

    def error(self, path: KeyPath, at: Position, message: str, hint: str | None = None) -> None:
        self.diagnostics.append(self.source.diagnostic(path, message, hint=hint, at=at))

    def build(self, node: yaml.Node, path: KeyPath) -> Any:
        self.count += 1
        if self.count > MAX_NODES:
            raise _TooManyNodes
        if len(path) > MAX_DEPTH:  # aliases can nest a shallow file deeply
            raise _TooDeep
        pos = _pos(node.start_mark)
        self.source.values[path] = pos
        if node.tag not in _CORE_TAGS:
            self.error(
                path,
                pos,
                f"YAML tag '{node.tag}' is not allowed: a blueprint is plain data",
                "remove the tag; quote the value if it is meant as text",
            )
            return None
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path)
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]
        if node.tag == "tag:yaml.org,2002:timestamp":
            return str(node.value)
        if node.tag in _NUMBER_TAGS and len(node.value) > MAX_SCALAR_DIGITS:
            self.error(path, pos, f"a number of {len(node.value)} characters", "quote it if it is meant as text")
            return None
        return self.constructor.construct_object(node, deep=True)

    def _mapping(self, node: yaml.MappingNode, path: KeyPath) -> dict[str, Any]:
        # PyYAML's merge keys (<<) are resolved first so positions stay those of the source.
        self.constructor.flatten_mapping(node)
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            kpos = _pos(key_node.start_mark)
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag != "tag:yaml.org,2002:str":
                shown = getattr(key_node, "value", "?")
                self.error(
                    path,
                    kpos,
                    f"key {shown!r} is not a string",
                    f"quote it: '{shown}' (YAML reads yes/no/on/off as booleans)",
                )
                continue
            key = key_node.value
            if key in out:
                first = self.source.keys[(*path, key)]
                self.error(
                    (*path, key),
                    kpos,
                    f"duplicate key '{key}'",
                    f"first defined at line {first.line}; keep one",
                )
                continue
            self.source.keys[(*path, key)] = kpos
            out[key] = self.build(value_node, (*path, key))
        return out


class _TooManyNodes(Exception):
    pass


class _TooDeep(Exception):
    pass


_NUMBER_TAGS = {"tag:yaml.org,2002:int", "tag:yaml.org,2002:float"}


def _structure_problem(text: str) -> tuple[str, yaml.Mark | None, str] | None:
    """Nesting past MAX_DEPTH or a recursive alias, found from the parser's events, which
    libyaml produces without recursion, before anything composes the tree recursively."""
    depth = 0
    open_anchors: list[str | None] = []
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                return (f"the YAML nests more than {MAX_DEPTH} levels deep", event.start_mark,
                        "flatten it: a blueprint nests a few levels")
            open_anchors.append(event.anchor)
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
            open_anchors.pop()
        elif isinstance(event, yaml.AliasEvent) and event.anchor in open_anchors:
            return (f"alias *{event.anchor} refers to a collection that contains it", event.start_mark,
                    "an alias may only name a finished node")
    return None


def load_yaml(text: str, file: str) -> Loaded:
    """Parse YAML text with safe-load semantics, keeping positions; never raises on bad input."""
    lines = text.splitlines()
    source = SourceMap(file=file, lines=lines)
    diagnostics: list[Diagnostic] = []
    for i, line in enumerate(lines, start=1):
        col = line.find("\t")
        if col >= 0:
            diagnostics.append(
                source.diagnostic(
                    (),
                    "tab character",
                    hint="indent with spaces; write \\t inside a quoted string for a tab",
                    at=Position(i, col + 1),
                )
            )
    if diagnostics:
        return Loaded(None, source, diagnostics)
    try:
        problem = _structure_problem(text)
        if problem is not None:
            message, mark, hint = problem
            return Loaded(None, source, [source.diagnostic((), message, hint=hint, at=_pos(mark) if mark else None)])
        nodes = list(yaml.compose_all(text, Loader=_Loader))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        if exc.context_mark and exc.problem and "end of stream" in exc.problem:
            mark = exc.context_mark  # an unclosed quote or bracket: show where it opened
        at = _pos(mark) if mark else Position(1, 1)
        if "maximum nesting depth" in str(exc.problem):  # libyaml >= 0.2.6 stops at 1000 itself,
            # scanning ahead of the events `_structure_problem` reads: the same finding, said our way
            return Loaded(None, source, [source.diagnostic(
                (), f"the YAML nests more than {MAX_DEPTH} levels deep", hint="flatten it: a blueprint nests a few levels",
                at=at)])
        problem = exc.problem or exc.context or "invalid YAML"
        message = f"invalid YAML: {problem}"
        if exc.context and exc.problem:
            message = f"invalid YAML: {exc.problem} ({exc.context})"
        return Loaded(None, source, [source.diagnostic((), message, at=at)])
    except yaml.YAMLError as exc:  # reader errors: bad bytes, control characters
        return Loaded(None, source, [source.diagnostic((), f"invalid YAML: {exc}")])
    if len(nodes) > 1:
        at = _pos(nodes[1].start_mark)
        # point at the `---` that opened the second document, when there is one
        marker = next((i for i in range(at.line - 1, 0, -1) if lines[i - 1].startswith("---")), None)
        at = Position(marker, 1) if marker else at
        return Loaded(
            None, source, [source.diagnostic((), "more than one YAML document", hint="a blueprint is one document; remove '---'", at=at)]
        )
    if not nodes:
        return Loaded(None, source, [source.diagnostic((), "the blueprint is empty")])
    builder = _Builder(source)
    try:
        data = builder.build(nodes[0], ())
    except _TooManyNodes:
        return Loaded(
            None,
            source,
            [source.diagnostic((), f"the YAML expands to more than {MAX_NODES} nodes", hint="aliases (*name) are expanded; use fewer")],
        )
    except _TooDeep:
        return Loaded(
            None,
            source,
            [source.diagnostic((), f"the YAML nests more than {MAX_DEPTH} levels deep once aliases are expanded", hint="use fewer nested aliases")],
        )
    return Loaded(data, source, builder.diagnostics)
