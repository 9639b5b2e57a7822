"""Symbols, call sites, imports and inheritance of one source file, read with tree-sitter.

`extract(source, relpath, spec)` parses a file and walks its tree once (iteratively, so deep
expressions cannot overflow the stack), keeping a scope stack: definitions become `Symbol`s
whose parent is the enclosing class-like symbol; call and constructor nodes become
`CallSite`s whose caller is the innermost enclosing symbol (None at module level).
Callees are linked later, across files, by `resolver.py`.

Qualified names follow each language's own naming: Python, JavaScript/TypeScript and Rust
prefix the file's module path (`pkg/mod.py` → `pkg.mod`); Java and Go their declared
package; C#, C++ and Ruby only their namespaces/modules; C has one global namespace.
Symbol ids are `relpath#Local.Name` (`~2`, `~3` for overloads), stable while the file is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePosixPath

from . import local_types, syntax
from .languages import LanguageSpec, parser_for

__all__ = ["CallSite", "FileSymbols", "Import", "Inheritance", "Symbol", "extract", "module_path"]

CONTAINERS = frozenset({"class", "struct", "enum", "interface", "trait", "module"})
_METHOD_PARENTS = frozenset({"class", "struct", "enum", "interface", "trait"})


@dataclass(frozen=True)
class Symbol:
    """A definition: function, class, method, struct, enum, interface, trait or module."""

    id: str
    name: str
    qualified: str
    kind: str
    language: str
    file: str
    start_line: int  # 1-based, inclusive
    end_line: int
    signature: str
    parent: str | None  # the qualified name of the enclosing class-like symbol
    doc: str = ""


@dataclass(frozen=True)
class CallSite:
    """A call (or `new X`) in `file` at `line`; `callee` is the resolved symbol id or None,
    and `reason` says how it was resolved or why it was not."""

    caller: str | None  # symbol id of the enclosing definition; None at module level
    name: str  # the called name, without receiver
    file: str
    line: int
    callee: str | None = None
    receiver: str | None = None  # as written: "self", "inv", "geo.Circle"; None if bare
    column: int = 0
    reason: str = ""
    receiver_type: str | None = None  # the type a local declaration gives the receiver


@dataclass(frozen=True)
class Import:
    """One imported thing: `from module import name as alias` in any language's syntax."""

    file: str
    module: str
    name: str | None
    alias: str | None
    line: int


@dataclass(frozen=True)
class Inheritance:
    """`child` (a qualified name) extends or implements `base` (dotted, as written);
    `base_id` is the resolved symbol id when the base is in the index."""

    file: str
    child: str
    base: str
    line: int
    base_id: str | None = None


@dataclass(frozen=True)
class FileSymbols:
    """Everything extracted from one file; `namespace` is its package/namespace prefix."""

    file: str
    language: str
    namespace: str
    symbols: tuple[Symbol, ...]
    calls: tuple[CallSite, ...]
    imports: tuple[Import, ...]
    inherits: tuple[Inheritance, ...]


def module_path(relpath: str, spec: LanguageSpec) -> str:
    """`pkg/sub/mod.py` → `pkg.sub.mod`; an index file (`__init__`, `index`, `mod`) names
    its folder."""
    p = PurePosixPath(relpath)
    parts = [*p.parent.parts, p.stem]
    if parts[-1] in spec.index_names and len(parts) > 1:
        parts.pop()
    return ".".join(x for x in parts if x not in ("", "."))


@dataclass
class _Scope:
    parts: tuple[str, ...]  # local qualified parts (without the module/package prefix)
    symbol: Symbol | None  # None for namespaces and impl blocks
    parent_like: bool  # members take it as parent (classes, impl blocks)
    types: dict[str, str] = field(default_factory=dict)  # local variable -> type name


class _Walk:
    """One file's walk: the scope stack and what has been found so far."""

    def __init__(self, relpath: str, spec: LanguageSpec, prefix: tuple[str, ...], namespace: str) -> None:
        self.relpath, self.spec, self.prefix, self.namespace = relpath, spec, prefix, namespace
        self.scopes: list[_Scope] = []
        self.symbols: list[Symbol] = []
        self.calls: list[CallSite] = []
        self.imports: list[Import] = []
        self.inherits: list[Inheritance] = []
        self._ids: dict[str, int] = {}

    def qualified(self, parts: tuple[str, ...]) -> str:
        return ".".join((*self.prefix, *parts))

    def _parent(self) -> tuple[str | None, str | None]:
        """(qualified name, kind) of the nearest class-like scope."""
        for s in reversed(self.scopes):
            if s.parent_like:
                return self.qualified(s.parts), (s.symbol.kind if s.symbol else "struct")
            if s.symbol is not None:
                return None, None  # a function in between: a nested definition
        return None, None

    def caller(self) -> str | None:
        for s in reversed(self.scopes):
            if s.symbol is not None:
                return s.symbol.id
        return None

    def enter(self, node: syntax.Node) -> _Scope | None:
        spec, t = self.spec, node.type
        if t in spec.imports:
            found = syntax.imports(node, spec)
            line = node.start_point[0] + 1
            self.imports.extend(Import(self.relpath, m, n, a, line) for m, n, a in found)
            if found or t != "call":
                return None
        if t in spec.definitions:
            scope = self._define(node)
            if scope is not None:
                return scope
        if self.scopes and t in local_types.VAR_NODES:
            self.scopes[-1].types.update(local_types.local_types(node, spec))
        if t in spec.scopes:
            return self._scope(node)
        if t in spec.calls or t in spec.constructors:
            target = syntax.call_target(node, spec)
            if target is not None and target[0]:
                name, receiver = target
                if receiver in spec.self_names:
                    receiver = "self"
                self.calls.append(CallSite(
                    caller=self.caller(), name=name, file=self.relpath,
                    line=node.start_point[0] + 1, receiver=receiver,
                    column=node.start_point[1], receiver_type=self._type_of(receiver),
                ))
        return None

    def _type_of(self, receiver: str | None) -> str | None:
        """The declared/constructed type of a receiver that is a local variable."""
        if receiver is None or receiver == "self":
            return None
        for s in reversed(self.scopes):
            if receiver in s.types:
                return s.types[receiver]
            if s.symbol is not None and s.symbol.kind in CONTAINERS:
                break  # a class body's names are fields, not this function's locals
        return None

    def _scope(self, node: syntax.Node) -> _Scope | None:
        parts = syntax.scope_name(node)
        base = self.scopes[-1].parts if self.scopes else ()
        if node.type == "impl_item":  # rust: methods belong to the type; a trait is a base
            trait = node.child_by_field_name("trait")
            if trait is not None and parts:
                self.inherits.append(Inheritance(
                    self.relpath, self.qualified((*base, *parts)), syntax.dotted(syntax.text(trait)),
                    node.start_point[0] + 1))
            return _Scope((*base, *parts), None, True)
        if node.type == "file_scoped_namespace_declaration":
            self.prefix = (*self.prefix, *parts)
            return None
        return _Scope((*base, *parts), None, False)

    def _define(self, node: syntax.Node) -> _Scope | None:
        found = syntax.definition(node, self.spec)
        if found is None:
            return None
        kind, name, extra = found
        outer = self.scopes[-1].parts if self.scopes else ()
        parts = (*outer, *extra, name)
        parent, parent_kind = self._parent()
        if extra:  # Go receivers, C++ `Circle::area`: the parent is named, not enclosing
            parent, parent_kind = self.qualified((*outer, *extra)), "struct"
        if kind == "function" and parent_kind in _METHOD_PARENTS:
            kind = "method"
        local = ".".join(parts)
        n = self._ids.get(local, 0) + 1
        self._ids[local] = n
        sym = Symbol(
            id=f"{self.relpath}#{local}" + (f"~{n}" if n > 1 else ""),
            name=name, qualified=self.qualified(parts), kind=kind, language=self.spec.name,
            file=self.relpath, start_line=node.start_point[0] + 1, end_line=node.end_point[0] + 1,
            signature=syntax.signature(node), parent=parent, doc=syntax.docstring(node, self.spec),
        )
        self.symbols.append(sym)
        if kind in CONTAINERS:
            for base in syntax.bases(node, self.spec):
                if base:
                    self.inherits.append(Inheritance(self.relpath, sym.qualified, base, sym.start_line))
        return _Scope(parts, sym, kind in CONTAINERS)


def _namespace(root: syntax.Node, spec: LanguageSpec) -> str:
    """The package a Java or Go file declares ("" when none)."""
    if not spec.package_decl:
        return ""
    for c in root.named_children:
        if c.type == spec.package_decl:
            ident = next((x for x in c.named_children if x.type in ("scoped_identifier", "identifier", "package_identifier")), None)
            return syntax.dotted(syntax.text(ident))
    return ""


def extract(source: bytes, relpath: str, spec: LanguageSpec) -> FileSymbols:
    """Parse `source` (the bytes of `relpath`) and extract its symbols, calls, imports and
    inheritance. Raises GrammarMissing when the language's grammar is not installed."""
    tree = parser_for(spec).parse(source)
    root = tree.root_node
    namespace = _namespace(root, spec)
    if spec.naming == "path":
        namespace = module_path(relpath, spec)
    prefix = tuple(p for p in namespace.split(".") if p)
    walk = _Walk(relpath, spec, prefix, namespace)
    stack: list[tuple[syntax.Node, bool]] = [(root, False)]
    while stack:
        node, leaving = stack.pop()
        if leaving:
            walk.scopes.pop()
            continue
        scope = walk.enter(node)
        if scope is not None:
            walk.scopes.append(scope)
            stack.append((node, True))
        children = node.named_children
        stack.extend((c, False) for c in reversed(children))
    return FileSymbols(
        relpath, spec.name, namespace, tuple(walk.symbols), tuple(walk.calls),
        tuple(walk.imports), tuple(walk.inherits),
    )
