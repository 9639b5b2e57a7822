"""Code intelligence: symbols, call sites, imports and inheritance of a source tree with
tree-sitter (10 languages), a resolver linking calls to symbols, a persistent incremental
index with symbol search, and the call graph as knowledge-graph triplets.

tree-sitter and the grammars are imported only when a file is parsed.
"""

from .errors import CodeIndexMismatch, CodeIntelError, GrammarMissing
from .index import CodeIndex, IndexReport
from .languages import LANGUAGES, LanguageSpec, language_for
from .symbols import CallSite, Import, Inheritance, Symbol

__all__ = [
    "LANGUAGES",
    "CallSite",
    "CodeIndex",
    "CodeIndexMismatch",
    "CodeIntelError",
    "GrammarMissing",
    "Import",
    "IndexReport",
    "Inheritance",
    "LanguageSpec",
    "Symbol",
    "language_for",
]
