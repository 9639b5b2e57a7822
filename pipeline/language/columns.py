"""Where on its line a mistake in a template is.

Jinja's nodes and tokens carry a line, not a column, so each finding says what it is about as
a small pattern (`near`: the unknown name, the filter after its `|`, the token the parser
stopped at), and the column is where that pattern first matches on the line — inside a
`{{ }}` / `{% %}` tag first and outside its string literals, so a word of the template's
text or a `%` inside "%d" is not taken for it. With nothing to search for, or nothing
found, the caret goes under the line's first tag. Every search is one regex pass over the line.
"""

from __future__ import annotations

import re

from jinja2 import TemplateSyntaxError
from jinja2.lexer import TOKEN_EOF, TOKEN_NAME, Token

_TAG = re.compile(r"\{[{%#].*?(?:[}%#]\}|$)")
_STRING = re.compile(r"\"[^\"]*\"|'[^']*'")  # a string literal inside a tag
_UNEXPECTED = re.compile(r"^unexpected '(.+?)'")
_AT_OFFSET = re.compile(r" at (\d+)$")  # the lexer's "unexpected char '$' at 12": an offset in the source
END = r"\s*$"  # the end of the line's text (a template that ended too soon)


def column(line: str, near: str | None) -> int:
    """The 1-based column of `near` (a regex; its group `at`, if any, is the spot) on `line`."""
    if near:
        pattern = re.compile(near)
        for tag in _TAG.finditer(line):
            found = pattern.search(_STRING.sub(_blank, tag.group()))  # `%` in "%d" % 1 is not the operator
            if found:
                return tag.start() + _start(found) + 1
        found = pattern.search(line)
        if found:
            return _start(found) + 1
    tag = _TAG.search(line)
    return tag.start() + 1 if tag else 1


def _blank(string: re.Match[str]) -> str:
    """A string literal with its content blanked (same length, so columns stay)."""
    text = string.group()
    return text[0] + " " * (len(text) - 2) + text[-1]


def _start(found: re.Match[str]) -> int:
    return found.start("at") if "at" in found.re.groupindex and found.group("at") is not None else found.start()


def name_pattern(word: str) -> str:
    """A name read from the context (not an attribute, not part of a longer name)."""
    return rf"(?<![\w.]){re.escape(word)}\b"


def read_pattern(root: str, key: str) -> str:
    """`root.key` or `root['key']`: the caret under the root."""
    k = re.escape(key)
    return rf"(?<![\w.]){re.escape(root)}\s*(?:\.\s*{k}\b|\[\s*['\"]{k}['\"])"


def attribute_pattern(attr: str) -> str:
    return rf"\.\s*(?P<at>{re.escape(attr)})\b"


def filter_pattern(word: str) -> str:
    return rf"\|\s*(?P<at>{re.escape(word)})\b"


def test_pattern(word: str) -> str:
    return rf"\bis\s+(?:not\s+)?(?P<at>{re.escape(word)})\b"


def call_pattern(function: str) -> str:
    return rf"(?<![\w.]){re.escape(function)}\s*\("


def literal_pattern(text: str) -> str:
    return re.escape(text)


def syntax_error(exc: TemplateSyntaxError, current: Token | None, source: str) -> tuple[str | None, int | None]:
    """(near, exact column) for a syntax error: the lexer's offset when it gives one, else
    the character it names, else the token the parser stopped at when it is on the error's
    line (the end of the line for the end of the template)."""
    message = exc.message or ""
    offset = _AT_OFFSET.search(message)
    text = source.replace("\r\n", "\n").replace("\r", "\n")  # as the lexer counts
    if offset and int(offset.group(1)) <= len(text):
        at = int(offset.group(1))
        return None, at - (text.rfind("\n", 0, at) + 1) + 1
    unexpected = _UNEXPECTED.match(message)
    if unexpected and len(unexpected.group(1)) <= 3:  # an operator, not a described token
        return literal_pattern(unexpected.group(1)), None
    if current is None or current.lineno != exc.lineno:
        return None, None
    if current.type == TOKEN_EOF:
        return END, None
    if current.type == TOKEN_NAME:
        return name_pattern(str(current.value)), None
    return literal_pattern(str(current.value)), None
