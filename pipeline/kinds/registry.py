"""The step-kind registry: built-in kinds and third-party kinds from entry points.

Every kind arrives through the entry-point group `soul.steps`: each entry point names a
callable that receives the registry and registers its kinds. The built-ins come through the
same callable (`soul.steps:register`), so a plugin is a first-class citizen.
"""

from __future__ import annotations

from collections.abc import Iterator

from soul.errors import RegistryError
from soul.kinds.stepkind import StepKind

ENTRY_POINT_GROUP = "soul.steps"
_BUILTIN_ENTRY = "soul.steps:register"


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
    """The process-wide registry: built-ins plus every installed `soul.steps` entry point."""
    global _default
    if _default is None:
        registry = Registry()
        import soul.steps

        soul.steps.register(registry)
        from importlib.metadata import entry_points

        for ep in entry_points(group=ENTRY_POINT_GROUP):
            if ep.value == _BUILTIN_ENTRY:
                continue  # already registered above, even when running from a source tree
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
