"""Resonance: a durable, hybrid-recall memory engine (WAL store, embedder, HNSW + BM25).

The front door: code outside the engine imports from here, never from its subpackages.
"""

from typing import TYPE_CHECKING

from .errors import (
    ConfigError,
    CorruptSegment,
    EmbedderError,
    EmbedderMismatch,
    EmbedderUnavailable,
    FieldInUse,
    FieldNotFound,
    IndexStale,
    ManifestError,
    MemoryModelError,
    QualityGateRefused,
    ReadOnlyField,
    ResonanceError,
    SearchIndexError,
    StoreClosed,
    StoreError,
    UnknownMemory,
)
from .kinds import Kind

if TYPE_CHECKING:
    from .code import CodeIndex
    from .field.config import FieldConfig
    from .field.field import Field
    from .field.hits import Hit
    from .field.ingest import check_item
    from .field.reembed import ReembedReport, reembed_field
    from .graph.kg import KnowledgeGraph
    from .memory import DECAY_RATES, Confidence, Memory, Tier
    from .recall.bm25 import BM25Index
    from .recall.embedder import Embedder, EmbedderConfig
    from .recall.embedder_registry import BUILTIN_EMBEDDERS, load_embedder
    from .recall.fusion import FusionConfig
    from .recall.hybrid import HybridSearcher
    from .recall.index import IndexParams, VectorIndex
    from .recall.models import EmbedderIdentity
    from .resonate.scoring import Affect
    from .store.durable import CheckReport, Store
    from .store.recovery import Issue, RecoveryReport

# Only the errors and the kinds load with the engine (standard library only): a blueprint's
# validation lists the memory kinds without numpy. The rest is exported lazily — the Field and
# the store load numpy; the embedder, the indexes, the graph, the scoring pipeline and the code
# index load onnxruntime, hnswlib, numba or tree-sitter — so nobody pays for what they don't use.
_LAZY = {
    "CheckReport": ".store.durable",
    "Confidence": ".memory",
    "DECAY_RATES": ".memory",
    "Field": ".field.field",
    "FieldConfig": ".field.config",
    "Hit": ".field.hits",
    "Issue": ".store.recovery",
    "Memory": ".memory",
    "RecoveryReport": ".store.recovery",
    "Store": ".store.durable",
    "Tier": ".memory",
    "Affect": ".resonate.scoring",
    "BM25Index": ".recall.bm25",
    "CodeIndex": ".code",
    "Embedder": ".recall.embedder",
    "EmbedderConfig": ".recall.embedder",
    "BUILTIN_EMBEDDERS": ".recall.embedder_registry",
    "EmbedderIdentity": ".recall.models",
    "load_embedder": ".recall.embedder_registry",
    "ReembedReport": ".field.reembed",
    "reembed_field": ".field.reembed",
    "FusionConfig": ".recall.fusion",
    "HybridSearcher": ".recall.hybrid",
    "IndexParams": ".recall.index",
    "KnowledgeGraph": ".graph.kg",
    "VectorIndex": ".recall.index",
    "check_item": ".field.ingest",
    "FieldCortical": ".themes.over_field",
    "FieldThemes": ".themes.over_field",
    "ThemeSummary": ".themes.over_field",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        from importlib import import_module

        # kept as a global: the next look-up (a `from ... import` in a recall, every turn)
        # finds it without coming here and through the import machinery again
        value = globals()[name] = getattr(import_module(_LAZY[name], __name__), name)
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BUILTIN_EMBEDDERS",
    "DECAY_RATES",
    "Affect",
    "BM25Index",
    "CheckReport",
    "CodeIndex",
    "Confidence",
    "ConfigError",
    "CorruptSegment",
    "Embedder",
    "EmbedderConfig",
    "EmbedderError",
    "EmbedderIdentity",
    "EmbedderMismatch",
    "EmbedderUnavailable",
    "Field",
    "FieldConfig",
    "FieldCortical",
    "FieldInUse",
    "FieldNotFound",
    "FieldThemes",
    "FusionConfig",
    "Hit",
    "HybridSearcher",
    "IndexParams",
    "IndexStale",
    "Issue",
    "Kind",
    "KnowledgeGraph",
    "ManifestError",
    "Memory",
    "MemoryModelError",
    "QualityGateRefused",
    "ReadOnlyField",
    "RecoveryReport",
    "ReembedReport",
    "ResonanceError",
    "SearchIndexError",
    "Store",
    "StoreClosed",
    "StoreError",
    "ThemeSummary",
    "Tier",
    "UnknownMemory",
    "VectorIndex",
    "check_item",
    "load_embedder",
    "reembed_field",
]
