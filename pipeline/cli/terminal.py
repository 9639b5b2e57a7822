"""Text from models, users and stored sessions, made safe to print on a terminal.

A model (or a user, or a cloned session store) can write escape sequences: clear the screen,
set the window title (OSC 0), hide a link behind text (OSC 8), move the cursor back over what
was printed (`\\r`, CSI), or flip the reading order (bidi overrides). None of that may reach
the terminal as control: every C0 control except newline and tab, DEL, every C1 control (8-bit
CSI/OSC among them) and the bidi embedding/override/isolate characters are shown as visible
escapes instead (`\\x1b`, `\\u202e`). `str.translate` keeps it linear in the text.

Rich's markup is a second channel: text printed with markup on must be escaped too
(`markup_safe`), or `[/]` in a reply would end our colour and a bad tag would raise.

This module is the CLI's one output path: every verb writes through `say` (plain text) or
`say_json` (JSON), or a Rich console whose text it passes through `shown`/`markup_safe`;
tests/pipeline/test_cli_output.py fails on a `print` or a `sys.stdout.write` anywhere else.
"""

from __future__ import annotations

import sys
from typing import Any

_CONTROLS = [*range(0x00, 0x09), *range(0x0B, 0x20), 0x7F, *range(0x80, 0xA0)]
_BIDI = [0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]

_SHOWN = {c: f"\\x{c:02x}" for c in _CONTROLS} | {c: f"\\u{c:04x}" for c in _BIDI}
# Inside a JSON string the same characters become JSON escapes, so the output stays valid JSON.
_JSON = {c: f"\\u{c:04x}" for c in (*_CONTROLS, *_BIDI)}


def shown(text: str) -> str:
    """`text` with every terminal control shown as a visible escape (newlines and tabs kept)."""
    return text.translate(_SHOWN)


def markup_safe(text: str) -> str:
    """`shown(text)`, escaped for Rich markup as well."""
    from rich.markup import escape

    return escape(shown(text))


def json_text(value: Any, *, indent: int | None = 2, default: Any = None) -> str:
    """`json.dumps(value)` (UTF-8 kept) with the controls that JSON lets through raw — C1,
    DEL, bidi overrides — written as `\\uXXXX` escapes, so printing it is safe and it still
    parses to the same value. `default`: as json.dumps's (e.g. `str` for paths, datetimes)."""
    import json

    # json.dumps escapes C0 itself; these characters can only occur inside strings.
    return json.dumps(value, ensure_ascii=False, indent=indent, default=default).translate(_JSON)


def say(text: str = "", *, err: bool = False, end: str = "\n", flush: bool = False) -> None:
    """Print `text` (any mix of our words and model, user or stored text) with every terminal
    control shown as an escape, on stdout or, with `err`, stderr. Plain `print` interprets no
    markup, so `[bold]` prints as written."""
    print(shown(text), end=shown(end), file=sys.stderr if err else sys.stdout, flush=flush)


def say_json(value: Any, *, indent: int | None = 2, default: Any = None, err: bool = False) -> None:
    """Print `value` as JSON (`json_text`): valid, the same value, no raw control."""
    print(json_text(value, indent=indent, default=default), file=sys.stderr if err else sys.stdout)
