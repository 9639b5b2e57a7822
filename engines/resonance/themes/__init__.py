"""resonance.themes: sparse codes (`sparse`), the cortical index (`cortical`), themes
(`themes`), and both as optional tools over a live Field (`over_field`: `FieldCortical`,
`FieldThemes`; docs/memory.md says when to use them). Loaded lazily: numpy and numba load
when a name is first used."""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .over_field import FieldCortical, FieldThemes, ThemeSummary

__all__ = ["FieldCortical", "FieldThemes", "ThemeSummary"]


def __getattr__(name: str) -> object:
    if name in __all__:
        from . import over_field

        return getattr(over_field, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
