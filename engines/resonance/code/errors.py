"""Errors of code intelligence, under the resonance tree.

    ResonanceError
    └── CodeIntelError              code indexing and symbol search
        ├── GrammarMissing          tree-sitter or a language's grammar package is not installed
        └── CodeIndexMismatch       the index holds another root than the one asked for
"""

from __future__ import annotations

from ..errors import ResonanceError

__all__ = ["CodeIndexMismatch", "CodeIntelError", "GrammarMissing"]


class CodeIntelError(ResonanceError):
    """Code indexing or symbol search failed."""


class GrammarMissing(CodeIntelError):
    """tree-sitter, or the grammar of one language, cannot be imported; names the package."""

    def __init__(self, language: str, package: str, detail: str = "") -> None:
        self.language = language
        self.package = package
        extra = f" ({detail})" if detail else ""
        super().__init__(
            f"no tree-sitter grammar for {language}: pip install {package}{extra} "
            f"(or pip install 'soulgraph[memory]' for every supported language)"
        )


class CodeIndexMismatch(CodeIntelError):
    """index() was asked for a root other than the one the index holds."""
