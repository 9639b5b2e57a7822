"""Resonance: a durable, hybrid-recall memory engine (WAL store, embedder, HNSW + BM25)."""

from .errors import (
    ConfigError,
    CorruptSegment,
    EmbedderError,
    EmbedderUnavailable,
    IndexError_,
    IndexStale,
    ManifestError,
    MemoryError_,
    QualityGateRefused,
    ResonanceError,
    StoreClosed,
    StoreError,
    UnknownMemory,
)
from .field.field import Field, FieldConfig, Hit
from .memory import DECAY_RATES, Confidence, Kind, Memory, Tier
from .store.durable import CheckReport, Store
from .store.recovery import Issue, RecoveryReport

# The embedder, the indexes and fusion load onnxruntime, hnswlib or numba: they are exported
# lazily, so importing the engine (or opening a Field for writing) does not pay for them.
_LAZY = {
    "BM25Index": ".recall.bm25",
    "Embedder": ".recall.embedder",
    "EmbedderConfig": ".recall.embedder",
    "FusionConfig": ".recall.fusion",
    "HybridSearcher": ".recall.hybrid",
    "IndexParams": ".recall.index",
    "VectorIndex": ".recall.index",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DECAY_RATES",
    "BM25Index",
    "CheckReport",
    "Confidence",
    "ConfigError",
    "CorruptSegment",
    "Embedder",
    "EmbedderConfig",
    "EmbedderError",
    "EmbedderUnavailable",
    "Field",
    "FieldConfig",
    "FusionConfig",
    "Hit",
    "HybridSearcher",
    "IndexError_",
    "IndexParams",
    "IndexStale",
    "Issue",
    "Kind",
    "ManifestError",
    "Memory",
    "MemoryError_",
    "QualityGateRefused",
    "RecoveryReport",
    "ResonanceError",
    "Store",
    "StoreClosed",
    "StoreError",
    "Tier",
    "UnknownMemory",
    "VectorIndex",
]
