"""The testing kit for soul authors: `converse` runs a scripted conversation and returns its
`Transcript`; the pytest plugin (`soul.testing.plugin`, entry point `pytest11`) gives the
`soul_conversation` and `soul_snapshot` fixtures; `SoulSnapshotExtension` is the syrupy
extension behind the latter.

Names load on first use: pytest imports this package at every start (through the plugin),
and only tests that use the kit should pay for the runtime.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from soul.testing.extension import SoulSnapshotExtension
    from soul.testing.kit import Transcript, TurnRecord, converse

_EXPORTS = {
    "converse": "soul.testing.kit",
    "Transcript": "soul.testing.kit",
    "TurnRecord": "soul.testing.kit",
    "SoulSnapshotExtension": "soul.testing.extension",
}

__all__ = ["SoulSnapshotExtension", "Transcript", "TurnRecord", "converse"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'soul.testing' has no attribute '{name}'")
    return getattr(import_module(module), name)
