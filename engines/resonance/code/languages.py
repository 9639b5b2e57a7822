"""The language registry: file extension → tree-sitter grammar + the node types that matter.

Each `LanguageSpec` is plain data read by the extractor (`symbols.py`): which node types
define symbols and of which kind, which are calls, imports, namespace scopes. Grammars come
from the official per-language packages on PyPI (`tree-sitter-python`, ...), imported the
first time a file of that language is parsed, so indexing Go never loads the Rust grammar.
"""

from __future__ import annotations

import importlib
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import GrammarMissing

__all__ = ["LANGUAGES", "LanguageSpec", "language_for", "parser_for"]

_FN, _METHOD, _CLASS = "function", "method", "class"


@dataclass(frozen=True)
class LanguageSpec:
    """What the extractor needs to know about one language.

    `definitions` maps a node type to the kind it defines ("function" becomes "method" when
    its parent symbol is a class-like container). `naming` is how qualified names are
    built: "path" (the file's module path, Python/JS/TS/Rust) or "declared" (packages and
    namespaces from the source only: Java, Go, C#, C, C++, Ruby).
    """

    name: str
    extensions: tuple[str, ...]
    package: str  # the PyPI package with the grammar
    module: str  # its import name
    loader: str = "language"  # the function returning the grammar capsule
    family: str = ""  # languages whose symbols can call each other (js/ts, c/cpp)
    naming: str = "path"
    definitions: dict[str, str] = field(default_factory=dict)
    calls: frozenset[str] = frozenset()
    constructors: frozenset[str] = frozenset()  # `new X(...)` nodes: a call of class X
    imports: frozenset[str] = frozenset()
    scopes: frozenset[str] = frozenset()  # namespaces / impl blocks: scope, not symbols
    package_decl: str = ""  # node type declaring the file's package (Java, Go)
    self_names: frozenset[str] = frozenset({"self", "this"})
    comment: frozenset[str] = frozenset({"comment"})
    index_names: tuple[str, ...] = ()  # module file stems that stand for their folder

    @property
    def group(self) -> str:
        """The family, or the language itself."""
        return self.family or self.name


_C_DEFS = {
    "function_definition": _FN,
    "struct_specifier": "struct",
    "union_specifier": "struct",
    "enum_specifier": "enum",
}

LANGUAGES: tuple[LanguageSpec, ...] = (
    LanguageSpec(
        "python", (".py", ".pyi"), "tree-sitter-python", "tree_sitter_python",
        definitions={"function_definition": _FN, "class_definition": _CLASS},
        calls=frozenset({"call"}),
        imports=frozenset({"import_statement", "import_from_statement"}),
        index_names=("__init__",),
    ),
    LanguageSpec(
        "javascript", (".js", ".mjs", ".cjs", ".jsx"), "tree-sitter-javascript",
        "tree_sitter_javascript", family="js",
        definitions={
            "function_declaration": _FN, "generator_function_declaration": _FN,
            "class_declaration": _CLASS, "class": _CLASS, "method_definition": _METHOD,
            "variable_declarator": _FN,  # only when its value is a function (see symbols)
        },
        calls=frozenset({"call_expression"}), constructors=frozenset({"new_expression"}),
        imports=frozenset({"import_statement"}), index_names=("index",),
    ),
    LanguageSpec(
        "typescript", (".ts", ".mts", ".cts"), "tree-sitter-typescript",
        "tree_sitter_typescript", loader="language_typescript", family="js",
        definitions={
            "function_declaration": _FN, "generator_function_declaration": _FN,
            "class_declaration": _CLASS, "abstract_class_declaration": _CLASS,
            "method_definition": _METHOD, "method_signature": _METHOD,
            "abstract_method_signature": _METHOD, "interface_declaration": "interface",
            "enum_declaration": "enum", "internal_module": "module", "module": "module",
            "variable_declarator": _FN,
        },
        calls=frozenset({"call_expression"}), constructors=frozenset({"new_expression"}),
        imports=frozenset({"import_statement"}), index_names=("index",),
    ),
    LanguageSpec(
        "tsx", (".tsx",), "tree-sitter-typescript", "tree_sitter_typescript",
        loader="language_tsx", family="js",
        definitions={
            "function_declaration": _FN, "class_declaration": _CLASS,
            "abstract_class_declaration": _CLASS, "method_definition": _METHOD,
            "method_signature": _METHOD, "interface_declaration": "interface",
            "enum_declaration": "enum", "variable_declarator": _FN,
        },
        calls=frozenset({"call_expression"}), constructors=frozenset({"new_expression"}),
        imports=frozenset({"import_statement"}), index_names=("index",),
    ),
    LanguageSpec(
        "go", (".go",), "tree-sitter-go", "tree_sitter_go", naming="declared",
        definitions={
            "function_declaration": _FN, "method_declaration": _METHOD,
            "type_spec": "struct",  # struct or interface, decided by its type (symbols)
            "method_elem": _METHOD,
        },
        calls=frozenset({"call_expression"}), imports=frozenset({"import_spec"}),
        package_decl="package_clause",
    ),
    LanguageSpec(
        "rust", (".rs",), "tree-sitter-rust", "tree_sitter_rust",
        definitions={
            "function_item": _FN, "function_signature_item": _METHOD,
            "struct_item": "struct", "union_item": "struct", "enum_item": "enum",
            "trait_item": "trait", "mod_item": "module",
        },
        calls=frozenset({"call_expression"}), imports=frozenset({"use_declaration"}),
        scopes=frozenset({"impl_item"}), self_names=frozenset({"self", "Self"}),
        comment=frozenset({"line_comment", "block_comment"}), index_names=("mod", "lib"),
    ),
    LanguageSpec(
        "java", (".java",), "tree-sitter-java", "tree_sitter_java", naming="declared",
        definitions={
            "class_declaration": _CLASS, "record_declaration": _CLASS,
            "interface_declaration": "interface", "annotation_type_declaration": "interface",
            "enum_declaration": "enum", "method_declaration": _METHOD,
            "constructor_declaration": _METHOD,
        },
        calls=frozenset({"method_invocation"}),
        constructors=frozenset({"object_creation_expression"}),
        imports=frozenset({"import_declaration"}), package_decl="package_declaration",
        comment=frozenset({"line_comment", "block_comment"}),
    ),
    LanguageSpec(
        "c", (".c", ".h"), "tree-sitter-c", "tree_sitter_c", family="c", naming="declared",
        definitions=dict(_C_DEFS),
        calls=frozenset({"call_expression"}), imports=frozenset({"preproc_include"}),
    ),
    LanguageSpec(
        "cpp", (".cpp", ".cc", ".cxx", ".hpp", ".hh", ".hxx", ".c++", ".h++"),
        "tree-sitter-cpp", "tree_sitter_cpp", family="c", naming="declared",
        definitions={**_C_DEFS, "class_specifier": _CLASS},
        calls=frozenset({"call_expression"}), constructors=frozenset({"new_expression"}),
        imports=frozenset({"preproc_include"}), scopes=frozenset({"namespace_definition"}),
    ),
    LanguageSpec(
        "ruby", (".rb",), "tree-sitter-ruby", "tree_sitter_ruby", naming="declared",
        definitions={
            "method": _FN, "singleton_method": _METHOD, "class": _CLASS, "module": "module",
        },
        calls=frozenset({"call"}), imports=frozenset({"call"}),
        self_names=frozenset({"self"}),
    ),
    LanguageSpec(
        "csharp", (".cs",), "tree-sitter-c-sharp", "tree_sitter_c_sharp", naming="declared",
        definitions={
            "class_declaration": _CLASS, "record_declaration": _CLASS,
            "struct_declaration": "struct", "record_struct_declaration": "struct",
            "interface_declaration": "interface", "enum_declaration": "enum",
            "method_declaration": _METHOD, "constructor_declaration": _METHOD,
            "local_function_statement": _FN,
        },
        calls=frozenset({"invocation_expression"}),
        constructors=frozenset({"object_creation_expression"}),
        imports=frozenset({"using_directive"}),
        scopes=frozenset({"namespace_declaration", "file_scoped_namespace_declaration"}),
    ),
)

_BY_EXT: dict[str, LanguageSpec] = {ext: s for s in LANGUAGES for ext in s.extensions}
_BY_NAME: dict[str, LanguageSpec] = {s.name: s for s in LANGUAGES}
_PARSERS: dict[str, Any] = {}
_LOCK = threading.Lock()


def language_for(path: str | Path) -> LanguageSpec | None:
    """The spec for a file by its extension, or None for a language we do not index."""
    return _BY_EXT.get(Path(path).suffix.lower())


def spec_named(name: str) -> LanguageSpec:
    """The spec of a language by name (as stored in the index)."""
    return _BY_NAME[name]


def parser_for(spec: LanguageSpec) -> Any:
    """A cached tree_sitter.Parser for the language; GrammarMissing names the package."""
    parser = _PARSERS.get(spec.name)
    if parser is not None:
        return parser
    with _LOCK:
        if spec.name in _PARSERS:
            return _PARSERS[spec.name]
        try:
            import tree_sitter  # lazy: only code indexing pays for it
        except ImportError as exc:
            raise GrammarMissing(spec.name, "tree-sitter", "py-tree-sitter itself") from exc
        try:
            grammar = getattr(importlib.import_module(spec.module), spec.loader)()
        except (ImportError, AttributeError) as exc:
            raise GrammarMissing(spec.name, spec.package, str(exc)) from exc
        try:
            parser = tree_sitter.Parser(tree_sitter.Language(grammar))
        except ValueError as exc:  # ABI version the installed tree-sitter cannot load
            raise GrammarMissing(
                spec.name, f"--upgrade tree-sitter {spec.package}", str(exc)
            ) from exc
        _PARSERS[spec.name] = parser
        return parser
