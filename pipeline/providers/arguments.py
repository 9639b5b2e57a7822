"""A tool call's arguments as the JSON text `ToolCall` holds, from a value an SDK already
parsed (Anthropic's `tool_use.input`, a script's mapping).

`json.dumps` recurses once per level of nesting, so a model's arguments nested deep enough
would crash the provider (RecursionError) before the runtime could refuse them. This encoder
walks the value with a stack of its own: any depth becomes text, which the tool box then
refuses with its reason (docs/tools.md). A value that would make more than `limit`
characters (or one that contains itself) stops there: the box refuses it for its length.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

LIMIT = 1 << 20  # characters: far past what the tool box accepts


class _Literal(str):
    """Text to copy as is, on the encoder's stack (a plain str there is a JSON string)."""

    __slots__ = ()


_OPEN_OBJECT, _CLOSE_OBJECT = _Literal("{"), _Literal("}")
_OPEN_ARRAY, _CLOSE_ARRAY = _Literal("["), _Literal("]")
_COMMA = _Literal(", ")


def arguments_json(value: Any, limit: int = LIMIT) -> str:
    """`value` as `json.dumps(value, ensure_ascii=False, default=str)` writes it, without
    recursion; at most about `limit` characters."""
    parts: list[str] = []
    size = 0
    work: list[Any] = [value]
    while work and size <= limit:
        item = work.pop()
        if type(item) is _Literal:
            text: str = item
        elif isinstance(item, Mapping):
            entries = list(item.items())
            work.append(_CLOSE_OBJECT)
            for i in range(len(entries) - 1, -1, -1):
                key, inner = entries[i]
                work.append(inner)
                work.append(_Literal(("" if i == 0 else ", ") + json.dumps(_key(key), ensure_ascii=False) + ": "))
            text = _OPEN_OBJECT
        elif isinstance(item, list | tuple):
            work.append(_CLOSE_ARRAY)
            for i in range(len(item) - 1, -1, -1):
                work.append(item[i])
                if i:
                    work.append(_COMMA)
            text = _OPEN_ARRAY
        else:
            text = json.dumps(item, ensure_ascii=False, default=str)
        parts.append(text)
        size += len(text)
    return "".join(parts)


def _key(key: Any) -> str:
    """A mapping key as JSON writes it (`true`, `1`, `null` for True, 1, None)."""
    return key if isinstance(key, str) else json.dumps(key, default=str).strip('"')
