"""The resonance engine's exception tree.

    ResonanceError                 every failure raised by soul.engines.resonance
    ├── StoreError                 the durable store (WAL, segments, snapshots)
    │   ├── CorruptSegment         a segment/snapshot failed its CRC or framing check
    │   ├── ManifestError          a writer manifest could not be read or written
    │   └── StoreClosed            an operation on a closed store or field
    ├── MemoryModelError           the memory model: what may be remembered, what exists
    │   ├── QualityGateRefused     remember() refused content (too short, ...)
    │   └── UnknownMemory          an id that is not (or no longer) in the field
    ├── EmbedderError              the embedder (model load, inference, tokenizer)
    │   └── EmbedderUnavailable    the circuit breaker is open / no model could be loaded
    ├── SearchIndexError           a vector or keyword index
    │   └── IndexStale             a persisted index does not match the store
    └── ConfigError                a bad option given to Field.open() or a component

Errors carry the facts needed to act: a corrupt segment names its file and byte offset.
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "ConfigError",
    "CorruptSegment",
    "EmbedderError",
    "EmbedderUnavailable",
    "IndexStale",
    "ManifestError",
    "MemoryModelError",
    "QualityGateRefused",
    "ResonanceError",
    "SearchIndexError",
    "StoreClosed",
    "StoreError",
    "UnknownMemory",
]


class ResonanceError(Exception):
    """Base class of every error raised by the resonance engine."""


class StoreError(ResonanceError):
    """The durable store failed (I/O, framing, snapshot)."""


class CorruptSegment(StoreError):
    """Bytes in a segment or snapshot failed their CRC or framing check."""

    def __init__(self, path: str | Path, offset: int, reason: str) -> None:
        self.path = str(path)
        self.offset = offset
        self.reason = reason
        super().__init__(f"{self.path} at byte {offset}: {reason}")


class ManifestError(StoreError):
    """A writer's manifest could not be read or written."""


class StoreClosed(StoreError):
    """The store or field was used after close()."""


class MemoryModelError(ResonanceError):
    """The memory model refused or could not find something."""


class QualityGateRefused(MemoryModelError):
    """remember() refused content; `reason` says why (e.g. "too short: 4 < 10 characters")."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class UnknownMemory(MemoryModelError, KeyError):
    """No memory with this id exists in the field."""

    def __init__(self, memory_id: str) -> None:
        self.memory_id = memory_id
        super().__init__(f"no memory with id {memory_id!r}")

    def __str__(self) -> str:  # KeyError's str() would repr() the message
        return f"no memory with id {self.memory_id!r}"


class EmbedderError(ResonanceError):
    """The embedder failed: model or tokenizer missing, inference error."""


class EmbedderUnavailable(EmbedderError):
    """The embedder cannot serve now (circuit breaker open, no model)."""


class SearchIndexError(ResonanceError):
    """A vector or keyword index failed."""


class IndexStale(SearchIndexError):
    """A persisted index does not match the store and must be rebuilt."""


class ConfigError(ResonanceError):
    """An option given to Field.open() or to a component is invalid."""
