"""Checking what gates and templates read: steps that exist, are upstream, and have that output.

The checks report into a `Findings` (validation's rule set is one) rather than importing the
validator: validation uses this module, never the other way round.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from jinja2 import TemplateNotFound

from soul.compiler.topology import ancestors
from soul.diagnostics import Diagnostic, did_you_mean, one_of
from soul.errors import BlueprintError
from soul.kinds import CONTEXT_NAMES, Registry
from soul.language import (
    Analysis,
    KeyPath,
    analyse_expression,
    analyse_template,
    attribute_pattern,
    column,
    display_path,
    name_pattern,
    read_pattern,
)

if TYPE_CHECKING:
    from soul.language import Blueprint, StateVar, Step

ALLOWED_NAMES = frozenset((*CONTEXT_NAMES, "steps"))
Problem = tuple[int, str, str | None, str | None]  # (line in the text, message, hint, near: soul.language.column)


class Findings(Protocol):
    """Where reference checks report: errors, the steps someone reads (for the dead-step
    warning), and the registry that says which outputs a kind has."""

    bp: Blueprint
    registry: Registry
    out: list[Diagnostic]
    read_steps: set[tuple[str, str]]  # (scope, step)

    def error(self, path: KeyPath, message: str, hint: str | None = None, *, key: bool = False) -> None: ...


@dataclass(frozen=True)
class Scope:
    """Where steps live: the turn, a subprocess (which also sees the turn's steps), a process."""

    kind: str
    outer: frozenset[str]
    state: Mapping[str, StateVar]
    outer_steps: Mapping[str, Step] = field(default_factory=dict)


def _problems(
    rules: Findings,
    analysis: Analysis,
    visible: Set[str],
    scope: Scope,
    steps: Mapping[str, Step],
    owner: str | None,
) -> list[Problem]:
    """(line within the text, message, hint, near: where on the line) for every bad read."""
    out: list[Problem] = []
    lines = dict(analysis.name_lines)
    for name in sorted(analysis.names - ALLOWED_NAMES):
        out.append((lines.get(name, 1), f"unknown name '{name}'",
                    did_you_mean(name, ALLOWED_NAMES) or f"names available: {one_of(ALLOWED_NAMES)}", name_pattern(name)))
    who = f"step '{owner}'" if owner else "this expression"
    for ref in analysis.refs:
        near = read_pattern(ref.root, ref.name)
        if ref.root == "state":
            if ref.name not in scope.state:
                out.append((ref.lineno, f"state has no key '{ref.name}'",
                            did_you_mean(ref.name, scope.state) or f"declared keys: {one_of(scope.state)}", near))
            continue
        step = steps.get(ref.name) or scope.outer_steps.get(ref.name)
        if step is None:
            known = [*steps, *scope.outer_steps]
            out.append((ref.lineno, f"{who} reads steps.{ref.name}, but there is no step '{ref.name}'", did_you_mean(ref.name, known), near))
            continue
        rules.read_steps.add(("turn" if ref.name in scope.outer_steps else scope.kind, ref.name))
        if ref.name == owner:
            out.append((ref.lineno, f"{who} reads its own output steps.{ref.name}", "a gate is decided before its step runs; read an upstream step", near))
            continue
        if ref.name not in visible:
            out.append((ref.lineno, f"{who} reads steps.{ref.name}, but '{ref.name}' is not upstream of it", f"add '{ref.name}' to its `after`", near))
            continue
        kind = rules.registry.get(step.uses)
        if kind is not None and ref.attr is not None and ref.attr not in kind.output_names():
            outputs = kind.output_names()
            out.append((
                ref.lineno,
                f"step '{ref.name}' ({kind.name}) has no output '{ref.attr}'; its outputs are: {', '.join(outputs)}",
                did_you_mean(ref.attr, outputs),
                near,
            ))
    return out


def check_expression(
    rules: Findings,
    text: str,
    path: KeyPath,
    visible: Set[str],
    scope: Scope,
    steps: Mapping[str, Step],
    owner: str | None,
) -> None:
    """Check a gate expression written at `path` in the blueprint."""
    analysis = analyse_expression(text)
    if analysis.error:
        rules.error(path, f"`{path[-1]}` does not compile: {analysis.error}", "it is a Jinja expression, e.g. steps.check.result and turn.number > 1")
        return
    for _line, message, hint, _near in _problems(rules, analysis, visible, scope, steps, owner):
        rules.error(path, message, hint)
    for attr, _line in analysis.private:
        rules.error(path, _PRIVATE.format(attr), _PRIVATE_HINT)
    for _line, message, hint, _near in analysis.refused:
        rules.error(path, message, hint)


_PRIVATE = "reads '{}', a Python internal the sandbox refuses"
_PRIVATE_HINT = "templates and gates read only the names soul gives them (steps, state, input, ...)"


def check_includes(rules: Findings, analysis: Analysis, origin: str, path: KeyPath) -> None:
    """Every template `origin` includes (imports, extends), transitively: found, inside the
    blueprint's folder (or the built-in templates), at most 1 MiB, and never including
    itself. Errors point at `path`, where the blueprint names the template."""
    seen: set[str] = set()

    def walk(chain: tuple[str, ...], found: Analysis) -> None:
        for name, line, optional in found.includes:
            where = f"'{chain[-1]}' line {line} includes '{name}'"
            if name in chain:
                loop = " → ".join((*chain[chain.index(name):], name))
                rules.error(path, f"{where}: an include cycle ({loop}) that never ends", "remove one of the includes")
                continue
            if name in seen:
                continue
            seen.add(name)
            try:
                text = rules.bp.template_source(name)
            except TemplateNotFound:
                if not optional:
                    rules.error(path, f"{where}, which is not found beside the blueprint nor among the built-in templates",
                                "check the name; paths are relative to the blueprint's folder")
                continue
            except BlueprintError as exc:
                reason = getattr(exc, "reason", str(exc))
                hint = getattr(exc, "hint", None)
                rules.error(path, f"{where}, which is refused: {reason}", hint)
                continue
            inner = analyse_template(text)
            if inner.error:
                rules.error(path, f"{where}, which does not compile (line {inner.error_line}): {inner.error}")
                continue
            for attr, at in inner.private:
                rules.error(path, f"'{name}' line {at} " + _PRIVATE.format(attr), _PRIVATE_HINT)
            for at, message, hint, _near in inner.refused:
                rules.error(path, f"'{name}' line {at}: {message}", hint)
            walk((*chain, name), inner)

    walk((origin,), analysis)


def check_template(rules: Findings, target: Path, step: Step, scope: Scope, steps: Mapping[str, Step]) -> None:
    """Check a step's template file; errors point at the line and column in the template."""
    text = target.read_text(encoding="utf-8")
    lines = text.splitlines()
    shown = display_path(target)
    analysis = analyse_template(text)

    def emit(line: int, message: str, hint: str | None, near: str | None, col: int | None = None) -> None:
        source = lines[line - 1] if 0 < line <= len(lines) else None
        rules.out.append(
            Diagnostic(
                file=shown, line=line, col=col or (column(source, near) if source is not None else 1),
                severity="error", message=message, hint=hint, key_path=(*step.path, "template"),
                source_line=source,
            )
        )

    if analysis.error:
        emit(analysis.error_line, f"template does not compile: {analysis.error}", None, analysis.error_near, analysis.error_col)
        return
    after = {n: tuple(d for d in s.after if d in steps) for n, s in steps.items()}
    visible = scope.outer | ancestors(after).get(step.name, set())
    for line, message, hint, near in _problems(rules, analysis, visible, scope, steps, step.name):
        emit(line, message, hint, near)
    for attr, line in analysis.private:
        emit(line, _PRIVATE.format(attr), _PRIVATE_HINT, attribute_pattern(attr))
    for line, message, hint, near in analysis.refused:
        emit(line, message, hint, near)
    if step.template is not None:
        check_includes(rules, analysis, step.template, (*step.path, "template"))
