"""The optional parts of soulgraph (pyproject's extras): whether one is installed, and the
error, at start, that names the line installing it.

A part that is missing is a `MissingExtra` before anything starts, never a page that cannot
connect or a turn that fails half-way: `soul serve` without a WebSocket library would start
and show a page whose socket never opens, so it is refused here first.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence

from soul.errors import MissingExtra


def install_line(extra: str) -> str:
    """The command that installs `extra`: pip install 'soulgraph[EXTRA]'."""
    return f"pip install 'soulgraph[{extra}]'"


def installed(module: str) -> bool:
    """Whether `module` is installed, found without importing it (`soul validate` and loading a
    soul stay fast: numba alone takes half a second to import)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or one set to None
        return False


def require(extra: str, needed_by: str, modules: Sequence[str | tuple[str, ...]]) -> None:
    """Raise `MissingExtra` unless every module imports; a tuple is alternatives, any one of
    which will do ("websockets or wsproto")."""
    missing = []
    for wanted in modules:
        choices = (wanted,) if isinstance(wanted, str) else wanted
        if not any(installed(m) for m in choices):
            missing.append(" or ".join(choices))
    if missing:
        raise MissingExtra(f"{needed_by} needs {', '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} "
                           f"not installed: {install_line(extra)}")
