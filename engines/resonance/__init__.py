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
from .field import Field, FieldConfig, Hit
from .memory import DECAY_RATES, Confidence, Kind, Memory, Tier
from .recovery import Issue, RecoveryReport
from .store import CheckReport, Store

__all__ = [
    "DECAY_RATES",
    "CheckReport",
    "Confidence",
    "ConfigError",
    "CorruptSegment",
    "EmbedderError",
    "EmbedderUnavailable",
    "Field",
    "FieldConfig",
    "Hit",
    "IndexError_",
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
]
