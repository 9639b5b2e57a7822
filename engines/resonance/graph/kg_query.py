"""Reading the knowledge graph's state: triplet queries and the attractor ranking.

Readers take no lock (see `kg_state`): they copy an id list (one atomic read), then look
each triplet up by id, skipping ids that were dropped meanwhile.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .kg_state import GraphState, Triplet, node_key

__all__ = ["query", "top_entities"]


def query(st: GraphState, subject: str | None, predicate: str | None, obj: str | None,
          as_of: float | None, include_invalid: bool, now: float) -> list[Triplet]:
    """`KnowledgeGraph.triplets` (see there); reads only, no lock."""
    if subject is not None or obj is not None:
        node = st.node_of_name(subject if subject is not None else obj)  # type: ignore[arg-type]
        if node is None:
            return []
        ids: Sequence[int] = st.by_node.get(node, ())
    elif predicate is not None:
        ids = st.by_pred.get(predicate, ())
    else:
        ids = list(st.trip)
    skey = node_key(subject)[0] if subject is not None else None
    okey = node_key(obj)[0] if obj is not None else None
    t_at = now if as_of is None else as_of
    out: list[Triplet] = []
    for tid in list(ids):
        t = st.trip.get(tid)
        if t is None or (predicate is not None and t.predicate != predicate):
            continue
        if skey is not None and node_key(t.subject)[0] != skey:
            continue
        if okey is not None and node_key(t.object)[0] != okey:
            continue
        if not include_invalid:
            if as_of is not None and not t.valid_at(as_of):
                continue
            if as_of is None and t.invalidated_at is not None and t.invalidated_at <= now:
                continue
        if tid in st.hebbian_ids:
            w = st.weight_at(tid, t_at)
            if w < st.floor:
                continue
            t = Triplet(t.id, t.subject, t.predicate, t.object, w, t.valid_from,
                        t.invalidated_at, t.memory)
        out.append(t)
    return out

def top_entities(st: GraphState, k: int) -> list[tuple[str, float]]:
    """The k entities with the most live edges, strength ``min(log2(1 + degree)/4, 1)``,
    strongest first (ties: the older entity first)."""
    size = len(st.keys)
    deg = np.where(st.entity[:size].astype(bool), st.degree[:size], 0)
    k = min(k, int((deg > 0).sum()))
    if k == 0:
        return []
    idx = np.argpartition(-deg, k - 1)[:k]
    idx = idx[np.lexsort((idx, -deg[idx]))]
    return [(st.display[i], min(math.log2(1 + int(deg[i])) / 4, 1.0))
            for i in idx.tolist()]
