"""The knowledge graph's in-memory state and how each logged op changes it.

The live graph and recovery change the state through the same `GraphState.apply`, so what a
process sees and what a reopen rebuilds cannot differ (the store's rule, `state.py`).

Nodes are keyed ``m:<memory id>`` and ``e:<normalised entity>``, so a memory and an entity
never collide; each keeps the display form it was first seen with. Readers never take a
lock: every structure they read is either append-only (lists read by index, whose first
items never change) or replaced whole by the writer (a memory's mention map, an entity's
memory list, a triplet's record), and single reads and appends are atomic under the GIL.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from . import kg_log
from .adjacency import AdjacencyCache, EdgeTable
from .entities import normalise

__all__ = ["GraphState", "Triplet", "entity_key", "node_key"]

MEMORY_PREFIX = "m:"
ENTITY_PREFIX = "e:"


@dataclass(frozen=True)
class Triplet:
    """A fact (subject, predicate, object) with a weight, valid from `valid_from` until
    `invalidated_at` (None: still valid). `memory` is the memory that stated it.

    Subjects and objects are entity names as first written, or ``m:<id>`` for memory nodes
    (the Hebbian ``relates_to`` edges between co-retrieved memories).
    """

    id: int
    subject: str
    predicate: str
    object: str
    weight: float
    valid_from: float
    invalidated_at: float | None
    memory: str | None

    def valid_at(self, t: float) -> bool:
        """True when the fact held at time t: valid_from <= t < invalidated_at."""
        return self.valid_from <= t and (self.invalidated_at is None or t < self.invalidated_at)


def node_key(name: str) -> tuple[str, str, bool]:
    """(node key, display form, is entity) of a subject/object name: ``m:<id>`` names a
    memory node, anything else an entity (keyed by its normalised form)."""
    if name.startswith(MEMORY_PREFIX):
        return name, name, False
    display = " ".join(name.split())
    return ENTITY_PREFIX + normalise(display), display, True


def entity_key(name: str) -> tuple[str, str]:
    """(node key, display form) of an entity name (never a memory node)."""
    display = " ".join(name.split())
    return ENTITY_PREFIX + normalise(display), display


class GraphState:
    """Nodes, edges, triplets and mentions, and `apply` for every logged op."""

    def __init__(self, half_life: float, floor: float) -> None:
        self.half_life, self.floor = half_life, floor
        self.keys: list[str] = []
        self.display: list[str] = []
        self.index: dict[str, int] = {}
        self.degree = np.zeros(1024, np.int32)  # live edges per node
        self.entity = np.zeros(1024, np.uint8)
        self.edges = EdgeTable()
        self.trip: list[Triplet | None] = [None]  # by id; id 0 is never used
        self.trip_edge: list[int] = [-1]
        self.hebbian_ids: set[int] = set()
        self.live: dict[tuple[str, str, str], int] = {}  # (s key, predicate, o key) -> id
        self.by_node: dict[int, list[int]] = {}  # node -> ids of triplets touching it
        self.by_pred: dict[str, list[int]] = {}
        self.mentions: dict[str, dict[int, int]] = {}  # memory id -> {entity node: edge}
        self.memories: dict[int, list[str]] = {}  # entity node -> memory ids (live)
        self.cache = AdjacencyCache()
        self.n_mention_edges = 0
        self.version = 0

    # -- nodes -----------------------------------------------------------------------------

    def node(self, key: str, display: str, is_entity: bool) -> int:
        """The node of `key`, created if new."""
        i = self.index.get(key)
        if i is not None:
            return i
        i = len(self.keys)
        if i == len(self.degree):
            self.degree = np.concatenate([self.degree, np.zeros(i, np.int32)])
            self.entity = np.concatenate([self.entity, np.zeros(i, np.uint8)])
        self.entity[i] = is_entity
        self.display.append(display)
        self.keys.append(key)  # last: a reader that finds the key finds the rest too
        self.index[key] = i
        return i

    def node_of_name(self, name: str) -> int | None:
        """The node a subject/object/entity name refers to, if it exists."""
        return self.index.get(node_key(name)[0])

    def _link(self, a: int, b: int, delta: int) -> None:
        self.degree[a] += delta
        if b != a:
            self.degree[b] += delta

    # -- weights ---------------------------------------------------------------------------

    def weight_at(self, triplet_id: int, t: float) -> float:
        """A triplet's weight at t: Hebbian ones decay from their last reinforcement."""
        e = self.trip_edge[triplet_id]
        w = float(self.edges.w[e])
        if triplet_id in self.hebbian_ids:
            age = max(t - float(self.edges.last[e]), 0.0)
            w *= 0.5 ** (age / self.half_life)
        return w

    # -- applying ops ----------------------------------------------------------------------

    def apply(self, op: int, payload: memoryview) -> None:
        """Apply one logged op (live writes and recovery both come through here)."""
        value = kg_log.decode(op, payload)
        if op == kg_log.RELATE:
            self._relate(value)  # type: ignore[arg-type]
        elif op == kg_log.REINFORCE:
            tid, w, at = value  # type: ignore[misc]
            self._reinforce(tid, w, at)
        elif op == kg_log.INVALIDATE:
            tid, at = value  # type: ignore[misc]
            self._invalidate(tid, at)
        elif op == kg_log.MENTION:
            at, memory_id, names = value  # type: ignore[misc]
            self._mention(memory_id, names, at)
        elif op == kg_log.FORGET_MEMORY:
            at, memory_id, _ = value  # type: ignore[misc]
            self._forget(memory_id, at)
        elif op == kg_log.HEBBIAN:
            self._hebbian(value)  # type: ignore[arg-type]
        self.version += 1
        self.cache.touch()

    @property
    def next_id(self) -> int:
        """The id the next new triplet gets."""
        return len(self.trip)

    def _relate(self, r: kg_log.Relate) -> None:
        if r.id < len(self.trip) and self.trip[r.id] is not None:
            raise ValueError(f"triplet {r.id} already exists")
        skey, sdisp, s_ent = node_key(r.subject)
        okey, odisp, o_ent = node_key(r.object)
        spo = (skey, r.predicate, okey)
        old = self.live.get(spo)
        if old is not None:
            # Only a Hebbian re-creation meets a live twin: the old edge had decayed away.
            self._drop(old)
        s = self.node(skey, sdisp, s_ent)
        o = self.node(okey, odisp, o_ent)
        e = self.edges.add(s, o, r.weight, r.valid_from, hebbian=r.hebbian, last=r.at)
        self._link(s, o, 1)
        while len(self.trip) < r.id:
            self.trip.append(None)
            self.trip_edge.append(-1)
        t = Triplet(r.id, self.display[s], r.predicate, self.display[o], r.weight,
                    r.valid_from, None, r.memory)
        if r.id == len(self.trip):
            self.trip_edge.append(e)
            self.trip.append(t)
        else:
            self.trip_edge[r.id] = e
            self.trip[r.id] = t
        if r.hebbian:
            self.hebbian_ids.add(r.id)
        self.live[spo] = r.id
        self.by_node.setdefault(s, []).append(r.id)
        if o != s:
            self.by_node.setdefault(o, []).append(r.id)
        self.by_pred.setdefault(r.predicate, []).append(r.id)

    def _get(self, tid: int) -> Triplet:
        t = self.trip[tid] if 0 < tid < len(self.trip) else None
        if t is None:
            raise KeyError(f"no triplet {tid}")
        return t

    def _reinforce(self, tid: int, w: float, at: float) -> None:
        t = self._get(tid)
        e = self.trip_edge[tid]
        self.edges.w[e] = w
        self.edges.last[e] = at
        self.trip[tid] = replace(t, weight=w)
        self.cache.edge_changed(e)

    def _invalidate(self, tid: int, at: float) -> None:
        t = self._get(tid)
        if t.invalidated_at is not None:
            return
        e = self.trip_edge[tid]
        self.edges.invalid_at[e] = at
        self.trip[tid] = replace(t, invalidated_at=at)
        spo = (self.keys[self.edges.src[e]], t.predicate, self.keys[self.edges.dst[e]])
        if self.live.get(spo) == tid:
            del self.live[spo]
        self._link(int(self.edges.src[e]), int(self.edges.dst[e]), -1)
        self.cache.edge_changed(e)

    def _drop(self, tid: int) -> None:
        """Remove a decayed Hebbian edge entirely (it is not a fact that held once)."""
        t = self._get(tid)
        e = self.trip_edge[tid]
        if t.invalidated_at is None:
            self._link(int(self.edges.src[e]), int(self.edges.dst[e]), -1)
        spo = (self.keys[self.edges.src[e]], t.predicate, self.keys[self.edges.dst[e]])
        if self.live.get(spo) == tid:
            del self.live[spo]
        self.edges.w[e] = 0.0
        self.edges.invalid_at[e] = self.edges.valid_from[e]  # never valid: gone from as-of too
        self.trip[tid] = None
        self.hebbian_ids.discard(tid)
        self.cache.edge_changed(e)

    def _mention(self, memory_id: str, names: list[str], at: float) -> None:
        m = self.node(MEMORY_PREFIX + memory_id, MEMORY_PREFIX + memory_id, False)
        links = dict(self.mentions.get(memory_id, {}))
        for name in names:
            key, display = entity_key(name)
            if not key[len(ENTITY_PREFIX):]:
                continue
            en = self.node(key, display, True)
            if en in links:
                continue
            links[en] = self.edges.add(m, en, 1.0, at, mention=True)
            self._link(m, en, 1)
            self.n_mention_edges += 1
            mems = self.memories.get(en)
            if mems is None:
                self.memories[en] = [memory_id]
            else:
                mems.append(memory_id)
        self.mentions[memory_id] = links  # swapped whole: readers never see it half-built

    def _forget(self, memory_id: str, at: float) -> None:
        links = self.mentions.pop(memory_id, {})
        m = self.index.get(MEMORY_PREFIX + memory_id)
        for en, e in links.items():
            self.edges.invalid_at[e] = at
            self._link(int(self.edges.src[e]), en, -1)
            self.n_mention_edges -= 1
            self.memories[en] = [x for x in self.memories.get(en, ()) if x != memory_id]
            self.cache.edge_changed(e)
        if m is None:
            return
        for tid in list(self.by_node.get(m, ())):
            t = self.trip[tid]
            if t is None:
                continue
            if tid in self.hebbian_ids:
                self._drop(tid)
            elif t.invalidated_at is None:
                self._invalidate(tid, at)

    def _hebbian(self, h: kg_log.HebbianSet) -> None:
        for tid, w, a, b in h.edges:
            t = self.trip[tid] if tid < len(self.trip) else None
            if t is not None:
                self._reinforce(tid, w, h.at)
            else:
                self._relate(kg_log.Relate(tid, MEMORY_PREFIX + a, "relates_to",
                                           MEMORY_PREFIX + b, w, h.at, h.at, None, True))

    # -- queries ---------------------------------------------------------------------------

    def query(self, subject: str | None, predicate: str | None, obj: str | None,
              as_of: float | None, include_invalid: bool, now: float) -> list[Triplet]:
        """`KnowledgeGraph.triplets` (see there); reads only, no lock."""
        st = self
        if subject is not None or obj is not None:
            node = st.node_of_name(subject if subject is not None else obj)  # type: ignore[arg-type]
            if node is None:
                return []
            ids: Sequence[int] = st.by_node.get(node, ())
        elif predicate is not None:
            ids = st.by_pred.get(predicate, ())
        else:
            ids = range(1, len(st.trip))
        skey = node_key(subject)[0] if subject is not None else None
        okey = node_key(obj)[0] if obj is not None else None
        t_at = now if as_of is None else as_of
        out: list[Triplet] = []
        for tid in list(ids):
            t = st.trip[tid]
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
                if w < self.floor:
                    continue
                t = Triplet(t.id, t.subject, t.predicate, t.object, w, t.valid_from,
                            t.invalidated_at, t.memory)
            out.append(t)
        return out

    def top_entities(self, k: int) -> list[tuple[str, float]]:
        """The k entities with the most live edges, strength ``min(log2(1 + degree)/4, 1)``,
        strongest first (ties: the older entity first)."""
        size = len(self.keys)
        deg = np.where(self.entity[:size].astype(bool), self.degree[:size], 0)
        k = min(k, int((deg > 0).sum()))
        if k == 0:
            return []
        idx = np.argpartition(-deg, k - 1)[:k]
        idx = idx[np.lexsort((idx, -deg[idx]))]
        return [(self.display[i], min(math.log2(1 + int(deg[i])) / 4, 1.0))
                for i in idx.tolist()]

    # -- maintenance -----------------------------------------------------------------------

    def decayed_away(self, now: float) -> list[int]:
        """Hebbian triplets whose weight at `now` is below the floor."""
        out = []
        for tid in self.hebbian_ids:
            if self.weight_at(tid, now) < self.floor:
                out.append(tid)
        return out

    def drop(self, ids: list[int]) -> None:
        """Drop decayed Hebbian edges (not logged: replay and decay give the same result,
        since a weight below the floor reads as absent everywhere)."""
        for tid in ids:
            self._drop(tid)
        if ids:
            self.version += 1
            self.cache.touch()


def half_life_days(days: float) -> float:
    """Seconds in `days` days (the half-life option is given in days)."""
    if not (days > 0 and math.isfinite(days)):
        raise ValueError(f"half-life {days} days: must be a positive number")
    return days * 86400.0
