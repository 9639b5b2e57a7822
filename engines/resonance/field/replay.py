"""Replaying the session-context chain (field/context.py) when vectors are made again.

Remembering stores ``v_i = unit(e(text_i) + w · v_{i-1})`` along a session; re-embedding
(`reembed_field`, `Field.reembed_pending`) rebuilds the same vectors by walking each memory's
predecessor as the ``follows`` edge of the knowledge graph records it (``m:<prev> follows
m:<memory>``, written by `Association.linked` for every new memory of a session chain), in row
order — a predecessor is always an earlier row — so ``v_i`` uses the new ``v_{i-1}``.

What the ``follows`` chain cannot tell, and how the replay differs from remembering there:

- an ``embedding`` the caller gave is not recorded as such: it is embedded from its text
  like any other memory (a new model needs vectors of its own anyway);
- a near-duplicate merged inside a batch moved remember's chain on (its mixed vector, never
  stored, was the next item's context); the ``follows`` chain links new memories only, so the
  replay mixes the next memory with the last new one;
- a memory whose embedding failed (pending) was skipped by remember's chain; the replay
  embeds it and mixes through it — what remembering gives when the model does not fail;
- a predecessor forgotten since leaves no text: its successor is replayed unmixed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .context import with_context

if TYPE_CHECKING:
    from ..store.durable import Store
    from ..store.state import State
    from .indexes import FieldIndexes

__all__ = ["follows_links", "links_at", "mix_into", "replay_pending"]

Embed = Callable[[Sequence[str]], tuple[np.ndarray, np.ndarray]]


def follows_links(graph_state: Any, st: State) -> dict[int, int]:
    """Each row's predecessor row in its session chain, from the ``follows`` triplets of a
    graph state (`GraphState`); invalidated ones count (forgetting a memory invalidates its
    edges: what it was chained to at remember time is still what it was)."""
    from ..graph.kg_state import MEMORY_PREFIX

    links: dict[int, int] = {}
    for tid in list(graph_state.by_pred.get("follows", ())):
        t = graph_state.get(tid)
        if t is None or not (t.subject.startswith(MEMORY_PREFIX)
                             and t.object.startswith(MEMORY_PREFIX)):
            continue
        prev = st.rows.get(t.subject[len(MEMORY_PREFIX):])
        row = st.rows.get(t.object[len(MEMORY_PREFIX):])
        if prev is not None and row is not None and prev < row:
            links[row] = max(prev, links.get(row, -1))
    return links


def links_at(path: Path, st: State) -> dict[int, int]:
    """`follows_links` of the field at `path`, its graph opened read-only ({} without one)."""
    if not (path / "graph").exists():
        return {}
    from ..graph.kg import KnowledgeGraph

    graph = KnowledgeGraph.open(path / "graph", read_only=True, flush_interval=None)
    try:
        return follows_links(graph.state, st)
    finally:
        graph.close()


def mix_into(vectors: np.ndarray, rows: Sequence[int], links: dict[int, int],
             weight: float, vector_of: Callable[[int], np.ndarray | None]) -> None:
    """Mix `rows` (ascending; ``vectors[k]`` is row ``rows[k]``'s own unit vector, zero for a
    row without one) with their predecessors' stored vectors, in place, exactly as
    `ContextChain.mix` does. `vector_of(row)` gives a predecessor's vector outside `rows`."""
    at = {row: k for k, row in enumerate(rows)}
    for k, row in enumerate(rows):
        prev = links.get(row)
        if prev is None or not np.any(vectors[k]):
            continue
        context = vectors[at[prev]] if prev in at else vector_of(prev)
        if context is None or not np.any(context):
            continue
        vectors[k] = with_context(vectors[k], context, weight)


def replay_pending(store: Store, embed: Embed, indexes: FieldIndexes, lock: threading.RLock,
                   links: dict[int, int], weight: float, batch: int) -> int:
    """`Field.reembed_pending` with the session context: each pending memory the model now
    embeds is mixed with its predecessor, and the memories chained after it (which remember
    mixed without it) are embedded and mixed again down the chain. Returns how many pending
    memories now have a real vector."""
    st = store.state
    pending = st.pending_rows()
    own: dict[int, np.ndarray] = {}
    for start in range(0, len(pending), batch):
        chunk = pending[start : start + batch]
        vectors, ok = embed([st.text[r] for r in chunk])
        own.update((r, v) for r, v, good in zip(chunk, vectors, ok, strict=True) if good)
    after: dict[int, list[int]] = {}
    for row, prev in links.items():
        after.setdefault(prev, []).append(row)
    failed = set(pending) - set(own)
    todo, frontier = set(own), list(own)
    while frontier:  # the chains after the newly embedded memories
        for nxt in after.get(frontier.pop(), ()):
            if nxt not in todo and nxt not in failed and st.is_alive(nxt):
                todo.add(nxt)
                frontier.append(nxt)
    again = sorted(todo - set(own))
    for start in range(0, len(again), batch):
        chunk = again[start : start + batch]
        vectors, ok = embed([st.text[r] for r in chunk])
        own.update((r, v) for r, v, good in zip(chunk, vectors, ok, strict=True) if good)
    rows = sorted(own)
    if not rows:
        return 0
    block = np.stack([own[r] for r in rows]).astype(np.float32)
    waiting = set(pending)
    with lock:
        mix_into(block, rows, links, weight,
                 lambda r: st.vectors[r] if st.is_alive(r) and r not in failed else None)
        done = 0
        for row, vec in zip(rows, block, strict=True):
            if st.is_alive(row):
                done += row in waiting
                store.reembed(st.ids[row], vec)
                indexes.reembedded(row, vec)
    return done
