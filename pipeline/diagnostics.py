"""Diagnostics: one error or warning, with the place in the blueprint it points at."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning"]


@dataclass(frozen=True, order=True)
class Position:
    """A place in a file: 1-based line and column."""

    line: int
    col: int


@dataclass(frozen=True)
class Diagnostic:
    """One finding about a blueprint: `FILE:LINE:COL: error: MESSAGE`, with a hint if any."""

    file: str
    line: int
    col: int
    severity: Severity
    message: str
    hint: str | None = None
    key_path: tuple[str | int, ...] = ()
    source_line: str | None = None

    def format(self) -> str:
        """The one-line form, as compilers print it."""
        text = f"{self.file}:{self.line}:{self.col}: {self.severity}: {self.message}"
        if self.hint:
            text += f" ({self.hint})"
        return text

    def format_with_source(self) -> str:
        """The one-line form, then the offending YAML line with a caret under the column."""
        text = self.format()
        if self.source_line is not None:
            line, col = _window(self.source_line.rstrip(), max(self.col, 1))
            text += f"\n    {line}\n    {' ' * (col - 1)}^"
        return text

    def sort_key(self) -> tuple[str, int, int, int, str]:
        return (self.file, self.line, self.col, 0 if self.severity == "error" else 1, self.message)


def sort_diagnostics(diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
    """Sorted by file and position; exact duplicates removed."""
    seen: set[tuple[object, ...]] = set()
    out: list[Diagnostic] = []
    for d in sorted(diagnostics, key=Diagnostic.sort_key):
        key = (d.file, d.line, d.col, d.severity, d.message)
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


def closest(word: str, candidates: Iterable[str]) -> str | None:
    """The candidate close enough to `word` to be what was meant, else None."""
    matches = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return matches[0] if matches else None


def did_you_mean(word: str, candidates: Iterable[str]) -> str | None:
    """A "did you mean 'x'?" hint when a candidate is close enough, else None."""
    match = closest(word, candidates)
    return f"did you mean '{match}'?" if match else None


def one_of(candidates: Iterable[str]) -> str:
    """A readable, sorted list of names for messages: 'a, b, c'."""
    names = sorted(candidates)
    return ", ".join(names) if names else "(none)"


SOURCE_WIDTH = 100  # a long line (a minified or hostile file) is shown around the column


def _window(line: str, col: int) -> tuple[str, int]:
    """At most SOURCE_WIDTH characters of `line` around `col`, and the column within them."""
    if len(line) <= SOURCE_WIDTH:
        return line, col
    start = max(0, min(col - 1 - SOURCE_WIDTH // 2, len(line) - SOURCE_WIDTH))
    shown = line[start : start + SOURCE_WIDTH]
    prefix = "…" if start else ""
    suffix = "…" if start + SOURCE_WIDTH < len(line) else ""
    return prefix + shown + suffix, col - start + len(prefix)
