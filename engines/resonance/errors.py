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
    ├── EmbedderMismatch           a field holds vectors of another embedding model
    ├── SearchIndexError           a vector or keyword index
    │   └── IndexStale             a persisted index does not match the store
    ├── ReadOnlyField              a write to a field (store, graph, code index) opened read-only
    ├── FieldNotFound              read_only=True on a path that holds no field: nothing is created
    ├── FieldInUse                 an operation that needs the field alone (reembed) found another writer
    └── ConfigError                a bad option given to Field.open() or a component

Errors carry the facts needed to act: a corrupt segment names its file and byte offset.
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "ConfigError",
    "CorruptSegment",
    "EmbedderError",
    "EmbedderMismatch",
    "EmbedderUnavailable",
    "FieldInUse",
    "FieldNotFound",
    "IndexStale",
    "ManifestError",
    "MemoryModelError",
    "QualityGateRefused",
    "ReadOnlyField",
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


class EmbedderMismatch(ResonanceError):
    """The field's vectors come from one embedding model and another was offered: vectors of
    two models are not comparable, so the field refuses to mix them. `held` and `offered`
    describe the two models, `path` is the field."""

    def __init__(self, path: str | Path, held: str, offered: str, offered_spec: str = "") -> None:
        self.path = str(path)
        self.held = held
        self.offered = offered
        target = f" --embedder {offered_spec}" if offered_spec else ""
        super().__init__(
            f"{self.path} holds vectors of the embedding model {held}, but the embedder offered "
            f"is {offered}: vectors of two models cannot be mixed; open the field with its own "
            f"model, or migrate it with `soul memory reembed --field {self.path}{target}`"
        )


class SearchIndexError(ResonanceError):
    """A vector or keyword index failed."""


class IndexStale(SearchIndexError):
    """A persisted index does not match the store and must be rebuilt."""


class ReadOnlyField(ResonanceError):
    """A write (remember, forget, strengthen, relate, compact, ...) to a field, store, graph
    or code index opened with ``read_only=True``; `operation` names it, `path` where."""

    def __init__(self, operation: str, path: str | Path) -> None:
        self.operation = operation
        self.path = str(path)
        super().__init__(
            f"cannot {operation}: {self.path} was opened read-only (read_only=True); "
            "open it without read_only to write"
        )


class FieldNotFound(ResonanceError):
    """``read_only=True`` on a path that holds no field (or no graph / code index): a
    read-only open never creates one. `path` is what was asked for."""

    def __init__(self, path: str | Path, what: str = "memory field", hint: str = "") -> None:
        self.path = str(path)
        fix = hint or "pass the folder of an existing field, or open it without read_only to create it"
        super().__init__(f"{self.path} holds no {what} (a read-only open never creates one): {fix}")


class FieldInUse(ResonanceError):
    """An operation that needs the field to itself (re-embedding) found another process
    writing it; `reason` says what was found."""

    def __init__(self, path: str | Path, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path} is in use: {reason}; close the other processes that "
                         "have the field open (a running soul, soul serve, an ingest), then try again")


class ConfigError(ResonanceError):
    """An option given to Field.open() or to a component is invalid."""
