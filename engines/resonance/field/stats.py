"""What a Field reports about itself (`Field.stats`): counts, log, recovery, indexes, graph.

Read from the parts as they are, so asking changes nothing: a read-only field reports
``read_only: True`` and no writer (``durability`` and ``writer`` None).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..memory import Kind
from ..store.check import quarantined_issues
from .confidence import tier_counts

if TYPE_CHECKING:
    from ..store.durable import Store
    from .association import Association
    from .indexes import FieldIndexes

__all__ = ["field_stats"]


def field_stats(path: Path, store: Store, indexes: FieldIndexes, association: Association,
                embedder: Any) -> dict[str, Any]:
    """Counts by kind and tier, log and snapshot sizes, recovery and index facts, the
    graph's counts and ``embedder``'s own stats (None if it keeps none or is not loaded)."""
    st = store.state
    now = time.time()
    alive = np.flatnonzero((np.frombuffer(bytes(st.flags), np.uint8) & 2) == 0)
    kinds = np.bincount(np.frombuffer(bytes(st.kind), np.uint8)[alive], minlength=len(Kind))
    wal = list((path / "wal").glob("*.seg"))
    rep = store.report
    emb_stats = getattr(embedder, "stats", None)
    return {
        "path": str(path),
        "read_only": store.read_only,
        "memories": len(st),
        "rows": st.n_rows,
        "forgotten": st.n_rows - len(st),
        "pending_embeddings": len(st.pending_rows()),
        "dim": st.dim,
        "embedding_model": st.embedder,  # name, dim, sha256; None until the first write
        "kinds": {Kind(i).label: int(c) for i, c in enumerate(kinds) if c},
        "tiers": tier_counts(st, alive, now),
        "durability": store.writer.durability if store.writer is not None else None,
        "writer": store.writer.instance if store.writer is not None else None,
        "segments": len(wal),
        "wal_bytes": sum(p.stat().st_size for p in wal),
        "snapshot": str(store.snapshot) if store.snapshot else None,
        "recovery": {"replayed": rep.replayed, "seconds": round(rep.seconds, 4),
                     "issues": [str(i) for i in rep.issues]},
        "quarantined": [str(i) for i in quarantined_issues(path / "quarantine")],
        "graph": association.graph_stats(),
        **indexes.stats(),
        "embedder": emb_stats() if callable(emb_stats) else None,
    }
