"""A tool call's arguments, read into keyword arguments or refused with the reason.

What a model writes as arguments is hostile input like any other text: at most
`MAX_ARGUMENT_CHARS` characters, and nested at most `MAX_ARGUMENT_DEPTH` levels — checked by
one linear scan *before* anything that recurses (JSON parsing, schema validation, the tape's
canonical text), so arguments nested 40,000 deep are an error the model reads, not a
RecursionError that ends the turn. A value an SDK already parsed (or an app passes) is
measured the same way, with a stack of its own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

MAX_ARGUMENT_CHARS = 100_000  # of a model's arguments text: more is refused unparsed
MAX_ARGUMENT_DEPTH = 64  # levels of objects and arrays, the outer object included
MAX_KEPT_CHARS = 1000  # of refused arguments text, kept in the run (outputs, trace, later prompts)

# a JSON string (possibly unterminated), or one bracket: strings hide their brackets
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[\]{}]', re.DOTALL)


def text_depth(text: str) -> int:
    """How deep the objects and arrays of JSON `text` nest (0 for a scalar); linear, and
    tolerant of text that is not JSON (it is measured, not judged)."""
    if text.count("[") + text.count("{") <= MAX_ARGUMENT_DEPTH:
        return text.count("[") + text.count("{")  # an upper bound, within the limit
    depth = deepest = 0
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
            deepest = max(deepest, depth)
        elif token in ("]", "}"):
            depth = max(depth - 1, 0)
    return deepest


def value_depth(value: Any) -> int:
    """How deep the mappings and sequences of a parsed value nest, without recursion; the
    walk stops past `MAX_ARGUMENT_DEPTH` (and so ends on a value that contains itself)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            inner: Any = item.values()
        elif isinstance(item, list | tuple):
            inner = item
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > MAX_ARGUMENT_DEPTH:
            return deepest
        stack.extend((v, depth + 1) for v in inner)
    return deepest


def arguments_problem(arguments: Any) -> str | None:
    """Why `arguments` (text or a parsed value) is refused before it is read, or None."""
    if isinstance(arguments, str):
        if len(arguments) > MAX_ARGUMENT_CHARS:
            return f"the arguments are {len(arguments):,} characters; at most {MAX_ARGUMENT_CHARS:,}"
        depth = text_depth(arguments)
    else:
        depth = value_depth(arguments)
    if depth > MAX_ARGUMENT_DEPTH:
        shown = f"{depth:,} levels" if isinstance(arguments, str) else "more"
        return (f"the arguments are nested deeper than {MAX_ARGUMENT_DEPTH} levels ({shown}): "
                "pass the values the tool's parameters ask for")
    return None


def kept(arguments: Any) -> Any:
    """Refused arguments as the run keeps them: text cut at `MAX_KEPT_CHARS` with the cut
    said (arguments the model could not use need not fill later prompts); a value nested
    too deep to store as a note; any other value as is."""
    if isinstance(arguments, str):
        if len(arguments) > MAX_KEPT_CHARS:
            return f"{arguments[:MAX_KEPT_CHARS]}[... cut: {len(arguments) - MAX_KEPT_CHARS:,} more characters]"
        return arguments
    if value_depth(arguments) > MAX_ARGUMENT_DEPTH:
        return f"(arguments nested deeper than {MAX_ARGUMENT_DEPTH} levels: not kept)"
    return arguments


def read_arguments(arguments: Any) -> tuple[dict[str, Any] | None, str | None]:
    """The arguments as a JSON object (text parsed; empty text is `{}`), or why not."""
    problem = arguments_problem(arguments)
    if problem is not None:
        return None, problem
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except (ValueError, RecursionError) as exc:
            return None, f"the arguments are not JSON: {exc}"
    if not isinstance(arguments, dict):
        return None, f"the arguments must be a JSON object, not {type(arguments).__name__}"
    return arguments, None
