"""Reading tree-sitter nodes: names of definitions, call targets, imports and base types.

Small functions over one node each, shared by every language where the grammars agree
(most name their parts with the same fields: `name`, `function`, `body`) and branching on
node types where they do not. Used by the extractor in `symbols.py`.
"""

from __future__ import annotations

import re
from typing import Any

from .languages import LanguageSpec

Node = Any  # tree_sitter.Node; not imported here so the module loads without tree-sitter

_NAME_TYPES = frozenset({
    "identifier", "field_identifier", "type_identifier", "property_identifier", "constant",
    "namespace_identifier", "package_identifier", "private_property_identifier",
})
_MEMBER = {  # node type -> (object field, member field)
    "attribute": ("object", "attribute"),
    "member_expression": ("object", "property"),
    "selector_expression": ("operand", "field"),
    "field_expression": (None, "field"),  # rust: value, c/cpp: argument
    "scoped_identifier": ("path", "name"),
    "qualified_identifier": ("scope", "name"),
    "member_access_expression": ("expression", "name"),
}
_BASE_CONTAINERS = frozenset({
    "class_heritage", "extends_clause", "implements_clause", "extends_type_clause",
    "superclass", "super_interfaces", "extends_interfaces", "base_class_clause", "base_list",
    "trait_bounds", "type_list", "argument_list",
})
_TYPE_NAMES = frozenset({
    "identifier", "type_identifier", "constant", "scope_resolution", "qualified_identifier",
    "qualified_name", "member_expression", "attribute", "scoped_type_identifier",
    "generic_type", "generic_name", "template_type", "nested_type_identifier",
    "scoped_identifier",
})
_FUNCTION_VALUES = frozenset({
    "arrow_function", "function_expression", "function", "generator_function",
})
_C_DECLARATORS = frozenset({
    "pointer_declarator", "reference_declarator", "function_declarator",
    "parenthesized_declarator", "attributed_declarator",
})
_GENERIC = re.compile(r"<.*>", re.S)
_SPACE = re.compile(r"\s+")
_COMMENT_MARKS = re.compile(r"^\s*(///?|/\*+|\*+/?|#+|--)\s?|\s*\*+/\s*$", re.M)


def text(node: Node | None) -> str:
    """The source text of a node ("" for None)."""
    return node.text.decode("utf-8", "replace") if node is not None else ""


def dotted(name: str) -> str:
    """`geo::Circle<T>` / `a.b` / `a\\b` → `geo.Circle`: generics dropped, one separator."""
    name = _GENERIC.sub("", name).replace("::", ".").replace("\\", ".").strip()
    return name.lstrip("*&").strip(".")


def _c_name(node: Node) -> tuple[str, list[str]] | None:
    """Name and scope parts of a C/C++ declarator chain (`Circle::area`, `(*fp)`)."""
    d = node.child_by_field_name("declarator")
    while d is not None and d.type in _C_DECLARATORS:
        nxt = d.child_by_field_name("declarator")
        d = nxt if nxt is not None else (d.named_children[0] if d.named_children else None)
    if d is None:
        return None
    parts = dotted(text(d)).split(".")
    if d.type in ("identifier", "field_identifier", "qualified_identifier",
                  "destructor_name", "operator_name", "template_function"):
        return parts[-1], parts[:-1]
    return None


def definition(node: Node, spec: LanguageSpec) -> tuple[str, str, list[str]] | None:
    """(kind, name, extra scope parts) of a definition node, or None if it defines nothing
    we index (an anonymous struct, a `mod x;` declaration, a non-function variable)."""
    kind = spec.definitions[node.type]
    t = node.type
    if t == "variable_declarator":
        value = node.child_by_field_name("value")
        name = node.child_by_field_name("name")
        if value is None or value.type not in _FUNCTION_VALUES or name is None:
            return None
        return kind, text(name), []
    if t == "function_definition" and spec.group == "c":
        found = _c_name(node)
        return (kind, found[0], found[1]) if found else None
    if t in ("struct_specifier", "union_specifier", "enum_specifier", "class_specifier"):
        if node.child_by_field_name("body") is None:
            return None  # a use (`struct circle *c`), not a definition
        name = node.child_by_field_name("name")
        if name is None and node.parent is not None and node.parent.type == "type_definition":
            name = node.parent.child_by_field_name("declarator")
        return (kind, dotted(text(name)), []) if name is not None else None
    if t == "type_spec":
        shape = node.child_by_field_name("type")
        kinds = {"struct_type": "struct", "interface_type": "interface"}
        if shape is None or shape.type not in kinds:
            return None
        return kinds[shape.type], text(node.child_by_field_name("name")), []
    if t == "method_declaration" and spec.name == "go":
        receiver = node.child_by_field_name("receiver")
        rtype = receiver.named_children[0].child_by_field_name("type") if receiver and receiver.named_children else None
        return kind, text(node.child_by_field_name("name")), [dotted(text(rtype))] if rtype else []
    if t == "mod_item" and node.child_by_field_name("body") is None:
        return None
    enum_bases = ("Enum", "IntEnum", "StrEnum", "Flag", "IntFlag")
    if t == "class_definition" and any(b.split(".")[-1] in enum_bases for b in bases(node, spec)):
        kind = "enum"
    name = node.child_by_field_name("name")
    if name is None:
        return None
    parts = dotted(text(name)).split(".")
    return kind, parts[-1], parts[:-1]


def scope_name(node: Node) -> list[str]:
    """The name parts a namespace or impl block opens (empty for an anonymous namespace)."""
    name = node.child_by_field_name("name") or node.child_by_field_name("type")
    if name is not None and name.type == "generic_type":
        name = name.child_by_field_name("type")
    return [p for p in dotted(text(name)).split(".") if p]


def signature(node: Node) -> str:
    """The definition's header: its text up to the body, on one line (≤ 240 characters)."""
    body = node.child_by_field_name("body")
    raw = node.text[: body.start_byte - node.start_byte] if body is not None else node.text.split(b"\n", 1)[0]
    sig = _SPACE.sub(" ", raw.decode("utf-8", "replace")).strip().rstrip("{:=").strip()
    return sig[:240]


def docstring(node: Node, spec: LanguageSpec) -> str:
    """A Python docstring, or the comment block right above the definition (≤ 300 chars)."""
    if spec.name == "python":
        body = node.child_by_field_name("body")
        first = body.named_children[0] if body is not None and body.named_children else None
        if first is not None and first.type == "expression_statement" and first.named_children:
            s = first.named_children[0]
            if s.type == "string":
                return _SPACE.sub(" ", text(s).strip("\"'rbuf \n")).strip()[:300]
        return ""
    anchor = node
    while anchor.parent is not None and anchor.parent.type in ("export_statement", "decorated_definition", "template_declaration"):
        anchor = anchor.parent
    lines: list[str] = []
    prev, row = anchor.prev_named_sibling, anchor.start_point[0]
    while prev is not None and prev.type in spec.comment and prev.end_point[0] >= row - 1:
        lines.insert(0, text(prev))
        row, prev = prev.start_point[0], prev.prev_named_sibling
    return _SPACE.sub(" ", _COMMENT_MARKS.sub("", "\n".join(lines))).strip()[:300]


def _member(node: Node) -> tuple[str, str | None] | None:
    """(name, receiver text) of a callee expression."""
    if node.type in _NAME_TYPES:
        return text(node), None
    if node.type in ("generic_name", "template_function", "generic_function"):
        inner = node.child_by_field_name("name") or node.child_by_field_name("function")
        inner = inner if inner is not None else (node.named_children[0] if node.named_children else None)
        return _member(inner) if inner is not None else None
    fields = _MEMBER.get(node.type)
    if fields is None:
        return None
    obj_field, name_field = fields
    name = node.child_by_field_name(name_field)
    obj = node.child_by_field_name(obj_field) if obj_field else (
        node.child_by_field_name("value") or node.child_by_field_name("argument"))
    if name is None:
        return None
    return dotted(text(name)).split(".")[-1], (text(obj) if obj is not None else None)


def call_target(node: Node, spec: LanguageSpec) -> tuple[str, str | None] | None:
    """(called name, receiver as written or None) of a call or constructor node."""
    t = node.type
    if t in spec.constructors:
        typ = node.child_by_field_name("constructor") or node.child_by_field_name("type")
        if typ is None:
            return None
        parts = dotted(text(typ)).split(".")
        return parts[-1], ".".join(parts[:-1]) or None
    if t == "method_invocation":  # java
        obj = node.child_by_field_name("object")
        return text(node.child_by_field_name("name")), text(obj) if obj is not None else None
    if t == "call" and spec.name == "ruby":
        method = text(node.child_by_field_name("method"))
        receiver = node.child_by_field_name("receiver")
        if method == "new" and receiver is not None:  # Foo::Bar.new builds a Bar
            parts = dotted(text(receiver)).split(".")
            return parts[-1], ".".join(parts[:-1]) or None
        return (method, text(receiver) if receiver is not None else None) if method else None
    fn = node.child_by_field_name("function")
    if fn is None and t == "call":
        fn = node.child_by_field_name("method")
    return _member(fn) if fn is not None else None


def _strip_quotes(s: str) -> str:
    return s.strip().strip("\"'`<>")


def _rust_use(node: Node, prefix: str) -> list[tuple[str, str | None, str | None]]:
    t = node.type
    if t == "scoped_identifier":
        path = dotted(text(node.child_by_field_name("path")))
        return [(".".join(p for p in (prefix, path) if p), text(node.child_by_field_name("name")), None)]
    if t in ("identifier", "self", "crate", "super"):
        return [(prefix, text(node), None)] if prefix else [(text(node), None, None)]
    if t == "use_as_clause":
        inner = _rust_use(node.child_by_field_name("path"), prefix)
        return [(m, n, text(node.child_by_field_name("alias"))) for m, n, _ in inner]
    if t == "scoped_use_list":
        path = dotted(text(node.child_by_field_name("path")))
        new = ".".join(p for p in (prefix, path) if p)
        lst = node.child_by_field_name("list")
        return [i for c in (lst.named_children if lst else []) for i in _rust_use(c, new)]
    if t == "use_list":
        return [i for c in node.named_children for i in _rust_use(c, prefix)]
    if t == "use_wildcard":
        base = dotted(text(node).rstrip("*").rstrip(":"))
        return [(".".join(p for p in (prefix, base) if p), "*", None)]
    return []


def imports(node: Node, spec: LanguageSpec) -> list[tuple[str, str | None, str | None]]:
    """(module, imported name or None, alias or None) for each thing an import node brings."""
    t = node.type
    out: list[tuple[str, str | None, str | None]] = []
    if t == "import_statement" and spec.name == "python":
        for c in node.named_children:
            if c.type == "aliased_import":
                out.append((text(c.child_by_field_name("name")), None, text(c.child_by_field_name("alias"))))
            elif c.type == "dotted_name":
                out.append((text(c), None, None))
    elif t == "import_from_statement":
        module = text(node.child_by_field_name("module_name"))
        for c in node.children_by_field_name("name"):
            if c.type == "aliased_import":
                out.append((module, text(c.child_by_field_name("name")), text(c.child_by_field_name("alias"))))
            else:
                out.append((module, text(c), None))
        if any(c.type == "wildcard_import" for c in node.named_children):
            out.append((module, "*", None))
    elif t == "import_statement":  # javascript / typescript
        source = _strip_quotes(text(node.child_by_field_name("source")))
        clause = next((c for c in node.named_children if c.type == "import_clause"), None)
        for c in clause.named_children if clause is not None else []:
            if c.type == "identifier":
                out.append((source, "default", text(c)))
            elif c.type == "namespace_import":
                out.append((source, "*", text(c.named_children[0]) if c.named_children else None))
            elif c.type == "named_imports":
                for s in c.named_children:
                    if s.type == "import_specifier":
                        alias = s.child_by_field_name("alias")
                        out.append((source, text(s.child_by_field_name("name")), text(alias) if alias else None))
        if clause is None:
            out.append((source, None, None))
    elif t == "import_spec":  # go
        name = node.child_by_field_name("name")
        out.append((_strip_quotes(text(node.child_by_field_name("path"))), None, text(name) if name else None))
    elif t == "use_declaration":
        arg = node.child_by_field_name("argument")
        out.extend(_rust_use(arg, "") if arg is not None else [])
    elif t == "import_declaration":  # java
        target = next((c for c in node.named_children if c.type in ("scoped_identifier", "identifier")), None)
        whole = text(target)
        if any(c.type == "asterisk" for c in node.named_children):
            out.append((whole, "*", None))
        elif "." in whole:
            module, _, name = whole.rpartition(".")
            out.append((module, name, None))
        elif whole:
            out.append((whole, None, None))
    elif t == "preproc_include":
        out.append((_strip_quotes(text(node.child_by_field_name("path"))), None, None))
    elif t == "call" and spec.name == "ruby":
        if text(node.child_by_field_name("method")) in ("require", "require_relative", "load"):
            args = node.child_by_field_name("arguments")
            if args is not None and args.named_children:
                out.append((_strip_quotes(text(args.named_children[0])), None, None))
    elif t == "using_directive":
        alias = node.child_by_field_name("name")
        target = next((c for c in node.named_children if c.type in ("qualified_name", "identifier") and c != alias), None)
        if target is not None:
            out.append((text(target), None, text(alias) if alias is not None else None))
    return out


def _type_names(node: Node, out: list[str]) -> None:
    for c in node.named_children:
        if c.type in _TYPE_NAMES:
            inner = c.child_by_field_name("type") or c.child_by_field_name("name") if c.type in ("generic_type", "template_type") else None
            out.append(dotted(text(inner if inner is not None else c)))
        elif c.type in _BASE_CONTAINERS:
            _type_names(c, out)


def bases(node: Node, spec: LanguageSpec) -> list[str]:
    """Names of the types a class-like definition extends or implements, as written."""
    out: list[str] = []
    if spec.name == "python":
        sup = node.child_by_field_name("superclasses")
        if sup is not None:
            _type_names(sup, out)
        return out
    if node.type == "type_spec":  # go: embedded fields of a struct
        shape = node.child_by_field_name("type")
        fields = next((c for c in shape.named_children if c.type == "field_declaration_list"), None) if shape else None
        for f in fields.named_children if fields is not None else []:
            if f.type == "field_declaration" and f.child_by_field_name("name") is None:
                out.append(dotted(text(f.child_by_field_name("type"))))
        return out
    for c in node.named_children:
        if c.type in _BASE_CONTAINERS and c.type != "argument_list":
            _type_names(c, out)
    return out

