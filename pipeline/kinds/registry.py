"""The step-kind registry: built-in kinds and third-party kinds from entry points.

Every kind arrives through the entry-point group `soul.steps`: each entry point names a
callable that receives the registry and registers its kinds. The built-ins come the same way,
through soulgraph's own entry point (`builtin`, declared in its pyproject.toml), so a plugin is
a first-class citizen and this module never imports the built-in steps: importing the kinds
loads no step, and `soul.steps` (which builds on the kinds) is never imported from below.

Entry points are read from the installed distributions' metadata. A source checkout whose
install predates the group (its metadata lists no `soul.steps` entry point of soulgraph's) is
read from the checkout's own pyproject.toml instead: the same declaration, where it is written.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from soul.errors import RegistryError
from soul.kinds.stepkind import StepKind

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

ENTRY_POINT_GROUP = "soul.steps"
DISTRIBUTION = "soulgraph"  # whose entry points hold the built-in kinds
# The checkout this module was loaded from, when it was: pipeline/kinds/registry.py -> the root.
_SOURCE_TREE = Path(__file__).resolve().parents[2]


class Registry:
    """Step kinds by name."""

    def __init__(self) -> None:
        self._kinds: dict[str, type[StepKind]] = {}

    def register(self, kind: type[StepKind]) -> type[StepKind]:
        """Add a kind; usable as a class decorator. Refuses duplicates and bad declarations."""
        if not (isinstance(kind, type) and issubclass(kind, StepKind)):
            raise RegistryError(f"{kind!r} is not a StepKind subclass")
        problems = kind.check_declaration()
        if problems:
            raise RegistryError(f"step kind {kind.__name__}: " + "; ".join(problems))
        if kind.name in self._kinds and self._kinds[kind.name] is not kind:
            raise RegistryError(
                f"step kind '{kind.name}' is registered twice "
                f"({self._kinds[kind.name].__module__} and {kind.__module__})"
            )
        self._kinds[kind.name] = kind
        return kind

    def get(self, name: str) -> type[StepKind] | None:
        return self._kinds.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._kinds

    def __iter__(self) -> Iterator[type[StepKind]]:
        return iter(sorted(self._kinds.values(), key=lambda k: k.name))

    def names(self) -> list[str]:
        return sorted(self._kinds)


_default: Registry | None = None


def default_registry() -> Registry:
    """The process-wide registry: every `soul.steps` entry point, the built-ins' included."""
    global _default
    if _default is None:
        registry = Registry()
        for ep in _entry_points():
            try:
                hook = ep.load()
                hook(registry)
            except RegistryError:
                raise
            except Exception as exc:
                raise RegistryError(
                    f"the step plugin '{ep.name}' ({ep.value}) failed to load: {exc}"
                ) from exc
        _default = registry
    return _default


def _entry_points() -> list[EntryPoint]:
    """The group's entry points, soulgraph's (the built-ins) first, then the plugins' in the
    order Python finds them; soulgraph's from the source checkout when its metadata has none."""
    from importlib.metadata import entry_points as installed

    found = list(installed(group=ENTRY_POINT_GROUP))
    own = [ep for ep in found if _distribution(ep) == DISTRIBUTION]
    others = [ep for ep in found if _distribution(ep) != DISTRIBUTION]
    return (own or _declared_in_checkout()) + others


def _distribution(ep: EntryPoint) -> str | None:
    return None if ep.dist is None else ep.dist.name


def _declared_in_checkout() -> list[EntryPoint]:
    """soulgraph's `soul.steps` entry points as the checkout's pyproject.toml declares them;
    RegistryError when there is no such checkout (soul installed without its metadata)."""
    import tomllib
    from importlib.metadata import EntryPoint

    path = _SOURCE_TREE / "pyproject.toml"
    project = tomllib.loads(path.read_text(encoding="utf-8")).get("project", {}) if path.is_file() else {}
    group = project.get("entry-points", {}).get(ENTRY_POINT_GROUP, {}) if project.get("name") == DISTRIBUTION else {}
    if not group:
        raise RegistryError(
            f"no built-in step kinds: the {DISTRIBUTION} distribution lists no '{ENTRY_POINT_GROUP}'"
            f" entry point and {path} declares none; reinstall soulgraph"
            " (pip install soulgraph, or pip install -e . in a checkout)"
        )
    return [EntryPoint(name, value, ENTRY_POINT_GROUP) for name, value in group.items()]
