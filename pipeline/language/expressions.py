"""Jinja in the sandbox: the environment for prompts and gates, and what an expression reads.

Gates (`when:`) and templates are compiled in the bounded sandbox (`soul.language.sandbox`)
with StrictUndefined, loading templates only through `TemplateFiles` (confined to the
blueprint's folder). The compiler reads their ASTs to find every `steps.<step>.<output>`,
every top-level name they use, the templates they include, the private attributes the
sandbox would refuse and what fails whatever the data (`refusals.py`), so all of it can be
checked before anything runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from jinja2 import StrictUndefined, TemplateSyntaxError, nodes
from jinja2.meta import find_undeclared_variables
from jinja2.parser import Parser

from soul.language import columns
from soul.language.files import TemplateFiles
from soul.language.refusals import Refusal, refusals
from soul.language.sandbox import Sandbox

CHECKED_ROOTS = frozenset({"steps", "state"})
# A step kind marks a `with:` parameter as a template in its params schema: {"format": "template"}
TEMPLATE_FORMAT = "template"


@dataclass(frozen=True)
class Reference:
    """A static read such as `steps.<step>.<output>` or `state.<key>`, at a line."""

    root: str
    name: str
    attr: str | None
    lineno: int


@dataclass(frozen=True)
class Analysis:
    """What an expression or template reads; `error` is set when it does not compile."""

    names: frozenset[str]
    refs: tuple[Reference, ...]
    error: str | None = None
    error_line: int = 1
    error_near: str | None = None  # where on its line (soul.language.columns), or
    error_col: int | None = None  # the column itself, when the lexer said
    constant: Any = None
    is_constant: bool = False
    includes: tuple[tuple[str, int, bool], ...] = ()  # (name, line, ignore missing): include/import/extends
    computed_include: bool = False  # an include/import/extends whose name is computed: what it reads is not knowable
    private: tuple[tuple[str, int], ...] = ()  # (attribute, line): `__x` reads the sandbox refuses
    refused: tuple[Refusal, ...] = ()  # (line, message, hint, near): fails whenever it runs (refusals.py)
    name_lines: tuple[tuple[str, int], ...] = ()  # (name, the first line reading it), for every name read


def environment(folder: Path | None = None, *, templates: bool = False) -> Sandbox:
    """The sandbox every prompt and gate runs in: no autoescape (prompts are not HTML).

    With `templates`, it loads templates by name from `folder` (the blueprint's) and the
    built-in templates, never from outside them; without, any include is a miss."""
    loader = TemplateFiles(folder) if templates else TemplateFiles(None, builtin=False)  # every name a miss
    return Sandbox(
        undefined=StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        loader=loader,
        auto_reload=False,  # a soul's templates do not change while it runs: no stat per render
    )


_analysis_env: Sandbox | None = None


def _env() -> Sandbox:
    global _analysis_env
    if _analysis_env is None:
        _analysis_env = environment()
    return _analysis_env


def constant_key(node: nodes.Getattr | nodes.Getitem) -> str | None:
    """The name an attribute or item look-up reads by (`x.name`, `x['name']`); None for a
    computed key (`x[name]`, `x[0]`)."""
    if isinstance(node, nodes.Getattr):
        return node.attr
    if isinstance(node.arg, nodes.Const) and isinstance(node.arg.value, str):
        return node.arg.value
    return None


def _refs(tree: nodes.Node) -> Iterator[Reference]:
    for node in tree.find_all((nodes.Getattr, nodes.Getitem)):
        chain: list[str] = []
        cur: nodes.Node = node
        while isinstance(cur, nodes.Getattr | nodes.Getitem):
            key = constant_key(cur)
            if key is not None:
                chain.append(key)
            else:
                chain = []  # a computed key: nothing static to check past it
                chain.append("\0")
            cur = cur.node
        if isinstance(cur, nodes.Name) and cur.name in CHECKED_ROOTS:
            chain.reverse()
            if chain and chain[0] != "\0":
                attr = chain[1] if len(chain) > 1 and chain[1] != "\0" else None
                yield Reference(cur.name, chain[0], attr, node.lineno)


def _includes(tree: nodes.Node) -> tuple[tuple[str, int, bool], ...]:
    """Templates named by constant include/import/extends (a computed name is not knowable)."""
    found = []
    for node in tree.find_all((nodes.Include, nodes.Import, nodes.FromImport, nodes.Extends)):
        target = node.template
        names = [target] if isinstance(target, nodes.Const) else list(target.items) if isinstance(target, nodes.List | nodes.Tuple) else []
        optional = getattr(node, "ignore_missing", False)
        found.extend((n.value, node.lineno, optional) for n in names if isinstance(n, nodes.Const) and isinstance(n.value, str))
    return tuple(found)


def _computed_include(tree: nodes.Node) -> bool:
    """Whether an include/import/extends names its template by an expression (not constants)."""
    for node in tree.find_all((nodes.Include, nodes.Import, nodes.FromImport, nodes.Extends)):
        target = node.template
        names = [target] if isinstance(target, nodes.Const) else list(target.items) if isinstance(target, nodes.List | nodes.Tuple) else None
        if names is None or not all(isinstance(n, nodes.Const) and isinstance(n.value, str) for n in names):
            return True
    return False


def _private(tree: nodes.Node) -> tuple[tuple[str, int], ...]:
    """Python internals the sandbox refuses (`x.__class__`): a SecurityError when rendered.
    (`x._key` may be a mapping's key, which the sandbox allows, so only `__` names count.)"""
    return tuple((n.attr, n.lineno) for n in tree.find_all(nodes.Getattr) if n.attr.startswith("__"))


def _foldable(expr: nodes.Expr) -> bool:
    """Whether evaluating a constant gate at validate time is cheap: no filters or calls
    (`"x"|center(10**9)` is constant too), and every operator bounded by the sandbox."""
    return not any(True for _ in expr.find_all((nodes.Filter, nodes.Call, nodes.Test)))


def _dedupe(refs: Iterator[Reference]) -> tuple[Reference, ...]:
    # `steps.a.b` also yields its prefix `steps.a`; drop a bare prefix when a longer read exists
    unique = set(refs)
    longer = {(r.root, r.name, r.lineno) for r in unique if r.attr is not None}
    kept = [r for r in unique if r.attr is not None or (r.root, r.name, r.lineno) not in longer]
    return tuple(sorted(kept, key=lambda r: (r.lineno, r.root, r.name, r.attr or "")))


@lru_cache(maxsize=4096)
def analyse_expression(text: str) -> Analysis:
    """Parse a gate expression such as `steps.check.result and turn.number > 1` (cached)."""
    env = _env()
    parser: Parser | None = None
    try:
        parser = Parser(env, text, state="variable")
        expr = parser.parse_expression()
        if parser.stream.current.type != "eof":
            token = parser.stream.current
            raise TemplateSyntaxError(f"unexpected '{token.value}' after the expression", token.lineno)
    except TemplateSyntaxError as exc:
        return _not_compiling(exc, parser, text)
    template = nodes.Template([nodes.Output([expr])]).set_environment(env)
    # an expression declares nothing, so every loaded Name is a read of the context
    names = frozenset(n.name for n in template.find_all(nodes.Name) if n.ctx == "load")
    constant, is_constant = None, False
    if not names and _foldable(expr):
        with contextlib.suppress(nodes.Impossible):
            constant, is_constant = expr.as_const(), True
    return Analysis(names, _dedupe(_refs(template)), constant=constant, is_constant=is_constant,
                    private=_private(template), refused=refusals(template, env), name_lines=_name_lines(template, names))


def analyse_template(text: str) -> Analysis:
    """Parse a whole template and list what it reads."""
    env = _env()
    parser: Parser | None = None
    try:
        parser = Parser(env, text)
        tree = parser.parse()
    except TemplateSyntaxError as exc:
        return _not_compiling(exc, parser, text)
    refused = refusals(tree, env)
    try:
        env.compile(tree)
    except TemplateSyntaxError as exc:
        # an unknown filter or test is already a refusal, with a "did you mean"
        unknown = any(m.startswith(("no filter named", "no test named")) for _, m, _, _ in refused)
        if not (unknown and (exc.message or "").startswith(("No filter named", "No test named"))):
            return Analysis(frozenset(), (), error=exc.message or str(exc), error_line=exc.lineno or 1)
    names = _undeclared(tree, env)
    return Analysis(names, _dedupe(_refs(tree)), includes=_includes(tree), computed_include=_computed_include(tree),
                    private=_private(tree), refused=refused, name_lines=_name_lines(tree, names))


def _not_compiling(exc: TemplateSyntaxError, parser: Parser | None, text: str) -> Analysis:
    """The analysis of a text that does not parse: the error, its line, and where on it."""
    current = parser.stream.current if parser is not None else None
    near, col = columns.syntax_error(exc, current, text)
    return Analysis(frozenset(), (), error=exc.message or str(exc), error_line=exc.lineno or 1,
                    error_near=near, error_col=col)


def _name_lines(tree: nodes.Node, names: frozenset[str]) -> tuple[tuple[str, int], ...]:
    """The first line each of `names` is read on."""
    first: dict[str, int] = {}
    for node in tree.find_all(nodes.Name):
        if node.ctx == "load" and node.name in names:
            first[node.name] = min(first.get(node.name, node.lineno), node.lineno)
    return tuple(sorted(first.items()))


def _undeclared(tree: nodes.Template, env: Sandbox) -> frozenset[str]:
    """The names a template reads from its context. Jinja finds them by compiling, which fails
    on an unknown filter or test (already a refusal): those are renamed to known ones in this
    freshly parsed tree meanwhile, so the other names are still checked."""
    unknown = [n for n in tree.find_all((nodes.Filter, nodes.Test)) if n.name not in (env.filters if isinstance(n, nodes.Filter) else env.tests)]
    names = [n.name for n in unknown]
    for node in unknown:
        node.name = "string" if isinstance(node, nodes.Filter) else "defined"
    try:
        return frozenset(find_undeclared_variables(tree))
    finally:
        for node, name in zip(unknown, names, strict=True):
            node.name = name
