"""The value of a step that has not run this turn, as templates and gates read it.

A valid blueprint may read a step that does not run on every turn: one skipped by `every` or
closed by `when`, or — in fused mode — a step answered in the same call as the reader, whose
outputs do not exist yet when the prompt is rendered. Such a step reads as `NotRun`: every
declared output is None (`steps.st_check.result` is none, `{% if steps.think.text %}` is
false), the step itself is falsy, and nothing raises. An output the kind does not declare is
still undefined (the compiler rejects those references).

It is deliberately not a Mapping: the chained prompt lists the steps of the turn so far, and a
step that did not run has nothing to list.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["NotRun", "not_run_steps"]


class NotRun:
    """A step with no outputs this turn: each declared output reads as None."""

    __slots__ = ("outputs",)

    def __init__(self, outputs: Iterable[str]) -> None:
        self.outputs = frozenset(outputs)

    def __getattr__(self, name: str) -> None:
        # only reached for names that are not real attributes (slots and methods come first)
        if name in self.outputs:
            return None
        raise AttributeError(name)

    def __getitem__(self, name: str) -> None:
        if name in self.outputs:
            return None
        raise KeyError(name)

    def __contains__(self, name: object) -> bool:
        return False  # no output has a value

    def get(self, name: str, default: Any = None) -> Any:
        """As `dict.get`: no output has a value, so always `default`."""
        return default

    def __bool__(self) -> bool:
        return False

    def __str__(self) -> str:
        return ""

    def __repr__(self) -> str:
        return f"NotRun({', '.join(sorted(self.outputs))})"


def not_run_steps(*scopes: Mapping[str, Any]) -> dict[str, NotRun]:
    """A NotRun for every step of the given scopes (`ScopePlan.steps`: name -> PlannedStep)."""
    return {name: NotRun(step.kind.output_names()) for scope in scopes for name, step in scope.items()}
