"""The knowledge graph's in-memory state and how each logged op changes it.

The live graph and recovery change the state through the same `GraphState.apply`, so what a
process sees and what a reopen rebuilds cannot differ (the store's rule, `state.py`).

Nodes are keyed ``m:<memory id>`` and ``e:<normalised entity>``, so a memory and an entity
never collide; each keeps the display form it was first seen with. Readers never take a
lock: every structure they read is either append-only (lists read by index, whose first
items never change) or replaced whole by the writer (a memory's mention map, an entity's
memory list, a triplet's record), and single reads and appends are atomic under the GIL.

Triplet ids are content-addressed (`triplet_id`): the 63-bit BLAKE2b hash of the subject
key, predicate, object key and a *generation* (0 for the first triplet of that (s, p, o), 1
for the next one once the first was invalidated, and so on: the first generation whose id
is not taken). Two processes that state the same fact without seeing each other so compute
the same id, and replay merges the two RELATEs into one triplet (`_relate`). Weight changes
are logged as deltas with the time they were made (REINFORCE_BY, HEBBIAN_BY) and applied as
``min(1, weight at that time + delta)``: several writers' reinforcements add up in the
global log order instead of the last absolute weight winning.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, replace

import numpy as np

from ..errors import ConfigError
from . import kg_log
from .adjacency import AdjacencyCache, EdgeTable
from .entities import normalise

__all__ = ["GraphState", "Triplet", "check_name", "entity_key", "node_key", "triplet_id"]

MEMORY_PREFIX = "m:"
ENTITY_PREFIX = "e:"
_ID_MASK = (1 << 63) - 1  # ids stay positive in a signed 64-bit column (sqlite, numpy <i8)


def triplet_id(subject_key: str, predicate: str, object_key: str, generation: int) -> int:
    """The content id of the `generation`-th triplet (s, p, o): 63 bits of BLAKE2b over the
    node keys (normalised, so "Alice" and "alice" agree), never 0."""
    h = hashlib.blake2b(f"{subject_key}\x00{predicate}\x00{object_key}\x00{generation}".encode(),
                        digest_size=8)
    return int.from_bytes(h.digest(), "little") & _ID_MASK or 1


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


def check_name(name: str, what: str) -> None:
    """`ConfigError` unless ``name`` (a ``what``: subject, memory id...) can name a node."""
    if not isinstance(name, str) or not name.strip() or "\x00" in name:
        raise ConfigError(f"{what} {name!r}: must be a non-empty string without NUL")


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
        self.trip: dict[int, Triplet] = {}  # by id, in the order they were created
        self.trip_edge: dict[int, int] = {}
        self.hebbian_ids: set[int] = set()
        # A RELATE whose fact already had a live triplet under another id (two writers that
        # had not seen each other's generations): merged, its id kept as an alias.
        self.alias: dict[int, int] = {}
        # Ids of dropped Hebbian edges: never given out again, so a stale reference to one
        # (another writer's reinforcement) cannot land on a newer edge.
        self.retired: set[int] = set()
        self.live: dict[tuple[str, str, str], int] = {}  # (s key, predicate, o key) -> id
        self.by_node: dict[int, list[int]] = {}  # node -> ids of triplets touching it
        self.by_pred: dict[str, list[int]] = {}
        self.mentions: dict[str, dict[int, int]] = {}  # memory id -> {entity node: edge}
        self.memories: dict[int, list[str]] = {}  # entity node -> memory ids (live)
        # memory nodes whose mentions changed since the read side's table caught up
        # (`kg_read.MentionRows`; None until one is built: recovery records nothing)
        self.mentions_changed: set[int] | None = None
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

    def resolve(self, tid: int) -> int:
        """The id a triplet is stored under (an alias's target, else `tid` itself)."""
        return self.alias.get(tid, tid)

    def get(self, tid: int) -> Triplet | None:
        """The triplet with this id (or alias), None if there is none."""
        return self.trip.get(self.alias.get(tid, tid))

    def new_id(self, skey: str, predicate: str, okey: str) -> int:
        """The id a new triplet (s, p, o) gets: its first generation not taken here."""
        g = 0
        while True:
            tid = triplet_id(skey, predicate, okey, g)
            if tid not in self.trip and tid not in self.alias and tid not in self.retired:
                return tid
            g += 1

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
        elif op == kg_log.REINFORCE_BY:
            tid, delta, at = value  # type: ignore[misc]
            self._reinforce_by(tid, delta, at)
        elif op == kg_log.HEBBIAN_BY:
            self._hebbian_by(value)  # type: ignore[arg-type]
        self.version += 1
        self.cache.touch()

    def _relate(self, r: kg_log.Relate) -> None:
        tid = self.alias.get(r.id, r.id)
        if tid in self.trip:
            # The same fact (same content id) stated by another writer that had not seen this
            # one, or a re-logged entry: one triplet, weights combined as a reinforcement
            # (an invalidation stays: only a new generation makes the fact hold again).
            self._reinforce(tid, min(1.0, self.weight_at(tid, r.at) + r.weight), r.at)
            return
        skey, sdisp, s_ent = node_key(r.subject)
        okey, odisp, o_ent = node_key(r.object)
        spo = (skey, r.predicate, okey)
        old = self.live.get(spo)
        if old is not None:
            if old in self.hebbian_ids and self.weight_at(old, r.at) < self.floor:
                self._drop(old)  # a Hebbian re-creation: the old edge had decayed away
            else:
                # A live twin under another id: merge into it rather than keep two.
                self.alias[r.id] = old
                self._reinforce(old, min(1.0, self.weight_at(old, r.at) + r.weight), r.at)
                return
        if r.id in self.retired:
            # The content id of a Hebbian edge that was dropped here, stated by a writer that
            # had not seen it go: stored under a fresh id, so stale references stay stale.
            self.alias[r.id] = new = self.new_id(skey, r.predicate, okey)
            r = replace(r, id=new)
        s = self.node(skey, sdisp, s_ent)
        o = self.node(okey, odisp, o_ent)
        e = self.edges.add(s, o, r.weight, r.valid_from, hebbian=r.hebbian, last=r.at)
        self._link(s, o, 1)
        self.trip_edge[r.id] = e
        self.trip[r.id] = Triplet(r.id, self.display[s], r.predicate, self.display[o],
                                  r.weight, r.valid_from, None, r.memory)
        if r.hebbian:
            self.hebbian_ids.add(r.id)
        self.live[spo] = r.id
        self.by_node.setdefault(s, []).append(r.id)
        if o != s:
            self.by_node.setdefault(o, []).append(r.id)
        self.by_pred.setdefault(r.predicate, []).append(r.id)

    def _get(self, tid: int) -> Triplet:
        t = self.trip.get(tid)
        if t is None:
            raise KeyError(f"no triplet {tid}")
        return t

    def _reinforce_by(self, tid: int, delta: float, at: float) -> None:
        tid = self.alias.get(tid, tid)
        if tid in self.trip:  # else another writer dropped it (forgotten, decayed): nothing
            self._reinforce(tid, min(1.0, self.weight_at(tid, at) + delta), at)

    def _reinforce(self, tid: int, w: float, at: float) -> None:
        t = self._get(tid)
        e = self.trip_edge[tid]
        self.edges.w[e] = w
        self.edges.last[e] = at
        self.trip[tid] = replace(t, weight=w)
        self.cache.edge_changed(e)

    def _invalidate(self, tid: int, at: float) -> None:
        tid = self.alias.get(tid, tid)
        t = self.trip.get(tid)
        if t is None and tid in self.retired:
            return  # a Hebbian edge another writer dropped: already gone
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
        del self.trip[tid]
        del self.trip_edge[tid]
        self.retired.add(tid)
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
        if self.mentions_changed is not None:
            self.mentions_changed.add(m)

    def _forget(self, memory_id: str, at: float) -> None:
        links = self.mentions.pop(memory_id, {})
        m = self.index.get(MEMORY_PREFIX + memory_id)
        if links and m is not None and self.mentions_changed is not None:
            self.mentions_changed.add(m)
        for en, e in links.items():
            self.edges.invalid_at[e] = at
            self._link(int(self.edges.src[e]), en, -1)
            self.n_mention_edges -= 1
            self.memories[en] = [x for x in self.memories.get(en, ()) if x != memory_id]
            self.cache.edge_changed(e)
        if m is None:
            return
        for tid in list(self.by_node.get(m, ())):
            t = self.trip.get(tid)
            if t is None:
                continue
            if tid in self.hebbian_ids:
                self._drop(tid)
            elif t.invalidated_at is None:
                self._invalidate(tid, at)

    def _hebbian(self, h: kg_log.HebbianSet) -> None:
        # The single-writer format (absolute weights, ids chosen by the writer): still read.
        for tid, w, a, b in h.edges:
            if tid in self.trip:
                self._reinforce(tid, w, h.at)
            else:
                self._relate(kg_log.Relate(tid, MEMORY_PREFIX + a, "relates_to",
                                           MEMORY_PREFIX + b, w, h.at, h.at, None, True))

    def _hebbian_by(self, h: kg_log.HebbianDeltas) -> None:
        """Each pair resolved here, by content, not by an id the writer chose: strengthen the
        live ``relates_to`` between the two memories (either direction; an explicit one too),
        else create one (replacing a Hebbian edge that decayed below the floor)."""
        for a, b, delta in h.pairs:
            ka, kb = MEMORY_PREFIX + a, MEMORY_PREFIX + b
            tid = self.live.get((ka, "relates_to", kb))
            if tid is None:
                tid = self.live.get((kb, "relates_to", ka))
            if tid is not None and (tid not in self.hebbian_ids
                                    or self.weight_at(tid, h.at) >= self.floor):
                self._reinforce(tid, min(1.0, self.weight_at(tid, h.at) + delta), h.at)
                continue
            if tid is not None:
                self._drop(tid)
            self._relate(kg_log.Relate(self.new_id(ka, "relates_to", kb), ka, "relates_to",
                                       kb, min(1.0, delta), h.at, h.at, None, True))

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
    """Seconds in `days` days (the half-life option is given in days); `ConfigError` unless
    positive and finite."""
    if not (days > 0 and math.isfinite(days)):
        raise ConfigError(f"half-life {days} days: must be a positive number")
    return days * 86400.0
