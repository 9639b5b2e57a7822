"""The call graph as knowledge-graph triplets: calls, contains, imports, inherits.

Subjects and objects are qualified symbol names (a file's relative path for what a file
contains or imports). The triplets the graph holds are remembered in the `triplets` table with
the graph's ids, so each sync is a diff: an edge that disappeared (a file changed or was
deleted) is *invalidated* — it stays in the graph, queryable "as of" before the change —
and a new edge is related. Unchanged edges are left alone.
"""

from __future__ import annotations

import sqlite3
from typing import Any

__all__ = ["PREDICATES", "desired_triplets", "sync_triplets"]

PREDICATES = ("calls", "contains", "imports", "inherits")


def desired_triplets(conn: sqlite3.Connection) -> dict[tuple[str, str, str], float]:
    """(subject, predicate, object) -> weight for the current tables."""
    out: dict[tuple[str, str, str], float] = {}
    rows = conn.execute(
        "SELECT coalesce(a.qualified, c.file), b.qualified, count(*) FROM calls c "
        "JOIN symbols b ON b.id = c.callee LEFT JOIN symbols a ON a.id = c.caller "
        "GROUP BY 1, 2")
    for subject, obj, n in rows:
        out[(subject, "calls", obj)] = float(n)  # call sites; the graph gets weight 1
    for qualified, parent, file in conn.execute("SELECT qualified, parent, file FROM symbols"):
        out[(parent or file, "contains", qualified)] = 1.0
    for file, module in conn.execute("SELECT DISTINCT file, module FROM imports"):
        out[(file, "imports", module)] = 1.0
    rows = conn.execute(
        "SELECT h.child, coalesce(s.qualified, h.base) FROM inherits h "
        "LEFT JOIN symbols s ON s.id = h.base_id")
    for child, base in rows:
        out[(child, "inherits", base)] = 1.0
    return out


def _fold(key: tuple[str, str, str]) -> tuple[str, str, str]:
    return (key[0].casefold(), key[1], key[2].casefold())


def sync_triplets(conn: sqlite3.Connection, graph: Any) -> tuple[int, int]:
    """Make the graph's code triplets match the tables; returns (related, invalidated)."""
    # The graph matches names case-insensitively: compare casefolded keys, so two names
    # that differ only by case share one triplet instead of invalidating each other.
    want: dict[tuple[str, str, str], tuple[str, str, str]] = {}
    for key in sorted(desired_triplets(conn)):
        want.setdefault(_fold(key), key)
    have: dict[tuple[str, str, str], tuple[tuple[str, str, str], int]] = {}
    for s, p, o, kg_id in conn.execute("SELECT subject, predicate, object, kg_id FROM triplets"):
        have[_fold((s, p, o))] = ((s, p, o), kg_id)
    gone = [have[f] for f in have if f not in want]
    new = [want[f] for f in want if f not in have]
    conn.execute("BEGIN")
    try:
        for key, kg_id in gone:
            graph.invalidate(kg_id)
            conn.execute("DELETE FROM triplets WHERE subject = ? AND predicate = ? AND object = ?", key)
        for key in new:
            s, p, o = key
            kg_id = graph.relate(s, p, o, weight=1.0)
            conn.execute("INSERT INTO triplets VALUES (?, ?, ?, ?)", (s, p, o, int(kg_id)))
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return len(new), len(gone)
