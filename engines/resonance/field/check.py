"""`Field.check`: the memory store's log and the knowledge graph's, verified together.

A field holds two write-ahead logs: the store's (``<field>/``) and the graph's
(``<field>/graph/``). Damage to either loses data, so a check that read only the store's
would say "ok" while the graph had lost most of its triplets. Nothing is changed.
"""

from __future__ import annotations

from pathlib import Path

from ..graph.kg_snapshot import list_snapshots, verified_covered
from ..store.check import check_log
from ..store.durable import CheckReport, Store

__all__ = ["check_field"]


def check_field(path: str | Path) -> CheckReport:
    """Every segment's and snapshot's CRCs, quarantined damage and leftovers of killed
    compactions, of both logs; the counts are their sums."""
    root = Path(path)
    store = Store.check(root)
    graph_dir = root / "graph"
    if not graph_dir.is_dir():
        return store
    graph = check_log(graph_dir, verified_covered, list_snapshots(graph_dir / "snapshots"))
    return CheckReport(
        store.path, store.segments + graph.segments, store.entries + graph.entries,
        store.bytes + graph.bytes, store.snapshots + graph.snapshots,
        store.issues + graph.issues,
    )
