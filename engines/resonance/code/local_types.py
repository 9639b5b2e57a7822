"""Local variable types: what a declaration, parameter or assignment says a name holds.

The resolver's only "type inference": `c = Circle(2)`, `const b = new Board()`,
`let c = Circle::new(..)`, `geo::Circle c(2)`, `(c *Circle)`, `Shape s` give the receiver of
a later `c.area()` its type, so the call resolves to that type's member.
"""

from __future__ import annotations

from .languages import LanguageSpec
from .syntax import Node, call_target, dotted, text

__all__ = ["VAR_NODES", "local_types"]

_VAR_NAME_FIELDS = ("name", "pattern", "left", "declarator")
VAR_NODES = frozenset({
    "assignment", "typed_parameter", "typed_default_parameter",  # python, ruby
    "variable_declarator", "required_parameter", "optional_parameter",  # js / ts
    "let_declaration", "parameter",  # rust, c#
    "short_var_declaration", "parameter_declaration", "var_spec",  # go, c++
    "local_variable_declaration", "formal_parameter", "enhanced_for_statement",  # java
    "variable_declaration", "declaration",  # c#, c++
})


def _unwrap_type(node: Node | None) -> Node | None:
    """`&mut T`, `*T`, `T*`, `: T` → T."""
    while node is not None and node.type in ("reference_type", "pointer_type", "type_annotation", "nullable_type", "type"):
        inner = node.child_by_field_name("type")
        node = inner if inner is not None else (node.named_children[-1] if node.named_children else None)
    return node


def _constructed(value: Node | None, spec: LanguageSpec) -> str | None:
    """The type a value expression builds, when it visibly builds one."""
    if value is None:
        return None
    if value.type in ("expression_list",) and value.named_children:
        value = value.named_children[0]
    if value.type == "unary_expression" and value.named_children:  # go &T{...}
        value = value.named_children[-1]
    if value.type in spec.constructors:
        return (call_target(value, spec) or ("", None))[0] or None
    if value.type in ("composite_literal", "struct_expression"):
        return dotted(text(value.child_by_field_name("type") or value.child_by_field_name("name"))) or None
    if value.type in ("call", "call_expression"):
        fn = value.child_by_field_name("function")
        if spec.name == "ruby":
            target = call_target(value, spec)
            return dotted(f"{target[1]}.{target[0]}" if target and target[1] else (target or ("",))[0]) or None
        if fn is not None and fn.type == "scoped_identifier":  # rust Circle::new(..)
            return dotted(text(fn.child_by_field_name("path"))) or None
        if fn is not None and spec.name == "python" and fn.type in ("identifier", "attribute"):
            return dotted(text(fn))  # a class call builds an instance; the resolver checks
    return None


def local_types(node: Node, spec: LanguageSpec) -> list[tuple[str, str]]:
    """(variable, type name) pairs a declaration, parameter or assignment makes visible:
    `c = Circle(2)`, `const b = new Board()`, `geo::Circle c(2)`, `(c *Circle)`,
    `Shape s` — the resolver's only "type inference"."""
    if node.type not in VAR_NODES:
        return []
    typ = _unwrap_type(node.child_by_field_name("type"))
    type_name = dotted(text(typ)) if typ is not None else ""
    if type_name in ("var", "auto", ""):
        type_name = ""
    out: list[tuple[str, str]] = []
    names: list[Node] = []
    for f in _VAR_NAME_FIELDS:
        names.extend(node.children_by_field_name(f))
    for name in names:
        value = node.child_by_field_name("value") or node.child_by_field_name("right")
        if name.type == "init_declarator":  # c++ `Circle c(2)`
            name = name.child_by_field_name("declarator")
        elif name.type == "variable_declarator":  # java / c#: `T x = new T()`
            value = name.child_by_field_name("value") or next(
                (c for c in name.named_children if c.type in spec.constructors), None)
            name = name.child_by_field_name("name") or (name.named_children[0] if name.named_children else None)
        elif name.type in ("expression_list",) and name.named_children:
            name = name.named_children[0]
        elif name.type in ("pointer_declarator", "reference_declarator"):
            name = name.named_children[-1] if name.named_children else None
        if name is None or name.type not in ("identifier", "field_identifier"):
            continue
        found = type_name or _constructed(value, spec)
        if found:
            out.append((text(name), found))
    return out
