"""What a template or gate will surely fail on, found in its syntax tree without rendering.

`soul validate` never renders with data, but some failures do not depend on data: a filter or
test Jinja does not have (inside an `{% if %}` Jinja defers that error to run time), and a
constant expression the bounded sandbox refuses or Python cannot compute (`"x" * 10**9`,
`range(10**6)`, `"%999999999d" % 1`, `1 / 0`). Constant parts are folded here with the
sandbox's own operators and filters, which check their bounds *before* computing, under a
budget of characters, so checking costs little whatever the template asks for.

What depends on data (a loop over the input, `input.text * n`, a render that grows past its
limit, a computed include) stays a run-time `StepError`.
"""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Callable, Iterator
from typing import Any

from jinja2 import TemplateError, nodes
from jinja2.sandbox import SecurityError

from soul.diagnostics import did_you_mean
from soul.language import columns
from soul.language.sandbox import MAX_OUTPUT, MAX_POWER_BITS, Sandbox

Refusal = tuple[int, str, str | None, str | None]  # (line in the template, message, hint, near: columns.py)

FOLD_BUDGET = 2 * MAX_OUTPUT  # characters or items all folded values of one text may make
# Filters folded on constants: the padding ones the sandbox bounds, and a few that only convert.
_FOLDED_FILTERS = frozenset({
    "center", "indent", "format", "wordwrap", "truncate", "filesizeformat",
    "string", "lower", "upper", "trim", "length", "int", "float", "abs", "round",
})
_UNARY: dict[type[nodes.UnaryExpr], Callable[[Any], Any]] = {
    nodes.Neg: operator.neg, nodes.Pos: operator.pos, nodes.Not: operator.not_,
}
_LIMIT_HINT = "templates and gates run in a bounded sandbox: see Limits in docs/blueprints.md"
_NOT = object()  # not a constant


def refusals(tree: nodes.Node, env: Sandbox) -> tuple[Refusal, ...]:
    """Every part of `tree` that fails whenever it runs, by line."""
    found = [*_unknown(tree, env)]
    folder = _Folder(env, shadowed=any(n.name == "range" for n in tree.find_all(nodes.Name) if n.ctx != "load"))
    with contextlib.suppress(RecursionError):  # nested past Python's stack: what was found stands
        folder.walk(tree)
    found.extend(folder.found)
    return tuple(sorted(set(found), key=lambda r: (r[0], r[1])))


def _unknown(tree: nodes.Node, env: Sandbox) -> Iterator[Refusal]:
    for node in tree.find_all(nodes.Filter):
        if node.name not in env.filters:
            yield (node.lineno, f"no filter named '{node.name}'",
                   did_you_mean(node.name, env.filters) or "see the built-in filters in Jinja's documentation", columns.filter_pattern(node.name))
    for test in tree.find_all(nodes.Test):
        if test.name not in env.tests:
            yield (test.lineno, f"no test named '{test.name}'",
                   did_you_mean(test.name, env.tests) or "see the built-in tests in Jinja's documentation", columns.test_pattern(test.name))


def _near(node: nodes.Expr) -> str | None:
    """What to look for on the line of a folded expression that fails: its operator, its
    filter, or the call to `range`."""
    if isinstance(node, nodes.BinExpr):
        return columns.literal_pattern(node.operator)
    if isinstance(node, nodes.Filter):
        return columns.filter_pattern(node.name)
    if isinstance(node, nodes.Call):
        return columns.call_pattern("range")
    return None


class _Folder:
    """Folds constant expressions bottom up; a failure is recorded once, at the smallest
    expression that fails, and makes everything around it non-constant."""

    def __init__(self, env: Sandbox, *, shadowed: bool) -> None:
        self.env = env
        self.shadowed = shadowed  # `range` assigned in the template: not the sandbox's range
        self.budget = FOLD_BUDGET
        self.found: list[Refusal] = []

    def walk(self, node: nodes.Node) -> None:
        for child in node.iter_child_nodes():
            if isinstance(child, nodes.Expr):
                self.fold(child)
            else:
                self.walk(child)

    def fold(self, node: nodes.Expr) -> Any:
        """The value of a constant `node`, or _NOT (its constant parts folded all the same)."""
        if self.budget <= 0:
            return _NOT
        if isinstance(node, nodes.Const):
            return node.value
        if isinstance(node, nodes.TemplateData):
            return node.data
        parts = self._operands(node)
        if parts is None:  # not foldable here: look for constants inside
            self.walk(node)
            return _NOT
        values = [self.fold(part) for part in parts]
        if any(v is _NOT for v in values):
            return _NOT
        try:
            return self._checked(self._compute(node, values))
        except SecurityError as exc:
            self.found.append((node.lineno, f"always refused by the sandbox: {exc}", _LIMIT_HINT, _near(node)))
        except TemplateError:
            pass  # the filter machinery wants a render's context: not foldable
        except (ArithmeticError, TypeError, ValueError) as exc:
            words = exc.args[-1] if len(exc.args) == 2 and isinstance(exc.args[-1], str) else str(exc)  # (errno, text)
            if isinstance(node, nodes.Call):  # the sandbox's range() refuses past MAX_RANGE items
                self.found.append((node.lineno, f"always refused by the sandbox: {words}", _LIMIT_HINT, _near(node)))
            else:
                self.found.append((node.lineno, f"fails whenever it runs: {words}", None, _near(node)))
        return _NOT

    def _operands(self, node: nodes.Expr) -> list[nodes.Expr] | None:
        if isinstance(node, nodes.List | nodes.Tuple):
            return list(node.items)
        if isinstance(node, nodes.BinExpr):
            return [node.left, node.right]
        if type(node) in _UNARY:
            return [node.node]  # type: ignore[attr-defined]
        if isinstance(node, nodes.Concat):
            return list(node.nodes)
        plain = not getattr(node, "dyn_args", None) and not getattr(node, "dyn_kwargs", None)
        if isinstance(node, nodes.Filter) and node.node is not None and plain and node.name in _FOLDED_FILTERS:
            return [node.node, *node.args, *(k.value for k in node.kwargs)]
        if isinstance(node, nodes.Call) and plain and not node.kwargs and not self.shadowed \
                and isinstance(node.node, nodes.Name) and node.node.name == "range":
            return list(node.args)
        return None

    def _compute(self, node: nodes.Expr, values: list[Any]) -> Any:
        if isinstance(node, nodes.List):
            return values
        if isinstance(node, nodes.Tuple):
            return tuple(values)
        if isinstance(node, nodes.And | nodes.Or):
            return (values[0] and values[1]) if isinstance(node, nodes.And) else (values[0] or values[1])
        if isinstance(node, nodes.BinExpr):
            return self.env.call_binop(None, node.operator, values[0], values[1])  # type: ignore[arg-type]
        if type(node) in _UNARY:
            return _UNARY[type(node)](values[0])  # type: ignore[index]
        if isinstance(node, nodes.Concat):
            return self.env.concat_operands(tuple(values))
        if isinstance(node, nodes.Filter):
            n = len(node.args)
            kwargs = {k.key: v for k, v in zip(node.kwargs, values[1 + n:], strict=True)}
            return self.env.call_filter(node.name, values[0], values[1:1 + n], kwargs)
        return self.env.globals["range"](*values)

    def _checked(self, value: Any) -> Any:
        """`value`, or _NOT when folding on would cost too much (the budget, a huge integer)."""
        if isinstance(value, str | list | tuple):
            self.budget -= len(value)
            return value if self.budget > 0 else _NOT
        if isinstance(value, int) and value.bit_length() > MAX_POWER_BITS:
            return _NOT
        return value
