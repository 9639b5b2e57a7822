"""The knowledge graph's read side: lock-free queries over its current state.

`GraphReads` is the half of `KnowledgeGraph` that never writes: triplets by id or by parts,
mentions, the adjacency (live or as of a time), spreading activation and attractors. None of
it takes the writer lock: it reads the state's append-only or swapped-whole structures and
immutable `Adjacency` views (see `kg_state`, `adjacency`), so a read-only graph has all of it.
The two caches here (the last as-of adjacency, the attractors) are keyed by the state's
version, so a write or a `refresh` invalidates them by itself.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from functools import lru_cache
from itertools import chain
from operator import itemgetter
from typing import Any

import numpy as np

from ..errors import ResonanceError
from ..recall.postings import grow
from . import kg_query
from .activation import Reach, Spread, SpreadConfig, TopSeeds, reach, spread_seeds
from .adjacency import Adjacency, build_as_of
from .kg_state import MEMORY_PREFIX, GraphState, Triplet, entity_key

__all__ = ["GraphReads", "MentionRows", "UnknownTriplet"]

@lru_cache(maxsize=4096)
def _entity_key(name: str) -> str:
    """An entity name's node key (`entity_key`, a pure function: the few topic names a
    session has come back query after query)."""
    return entity_key(name)[0]


class UnknownTriplet(ResonanceError, KeyError):
    """No triplet with this id exists in the graph."""

    def __init__(self, triplet_id: int) -> None:
        self.triplet_id = triplet_id
        super().__init__(f"no triplet with id {triplet_id}")

    def __str__(self) -> str:
        return f"no triplet with id {self.triplet_id}; ids come from relate() or triplets()"


_SLACK = 4096  # slots of `MentionRows.flat` that may go unused beyond as many as are used


class MentionRows:
    """Each memory node's mentioned entity nodes, in its mentions' order, laid end to end
    (``flat[start[n] : start[n] + count[n]]``) for the topic-share kernel.

    Built whole on first use, then caught up with only the memories the writer marked since
    (`GraphState.mentions_changed`): a memory whose mentions changed gets its new list at
    the end of ``flat`` (the old one is left unused until the waste outgrows the rest, then
    it is built whole again). One state at a time: another (a `refresh`) starts it over.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state: GraphState | None = None
        self._start = np.zeros(0, np.int64)
        self._count = np.zeros(0, np.int32)
        self._flat = np.zeros(0, np.int32)
        self._used = 0  # slots of flat written
        self._live = 0  # of which still some memory's

    def shares(self, state: GraphState, writer_lock: threading.RLock, nodes: np.ndarray,
               topic_nodes: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """The kernel's `topic_shares` of ``nodes`` (int64) over ``state``'s mentions now."""
        out = np.empty(len(nodes))
        with self._lock:  # the kernel reads what a catch-up writes
            self._catch_up(state, writer_lock)
            _kernels().topic_shares(nodes, self._start, self._count, self._flat, topic_nodes,
                                    weights, out)
        return out

    def catch_up(self, state: GraphState, writer_lock: threading.RLock) -> None:
        """Take in the memories whose mentions changed, if this table was built for
        ``state`` (a writer's thread calls it after a write, `GraphReads.prepare`)."""
        with self._lock:
            if self._state is state:
                self._catch_up(state, writer_lock)

    def _catch_up(self, st: GraphState, writer_lock: threading.RLock) -> None:
        if self._state is not st or self._used > 2 * self._live + _SLACK:
            self._build(st, writer_lock)
            return
        if not st.mentions_changed:
            return
        cut, keys, mentions = len(MEMORY_PREFIX), st.keys, st.mentions
        with writer_lock:  # the marks and the mentions they name, at one moment
            changed, st.mentions_changed = st.mentions_changed, set()
            lists = [(node, tuple(mentions.get(keys[node][cut:], ()))) for node in changed]
            n_nodes = len(keys)
        self._start, self._count = grow(self._start, n_nodes), grow(self._count, n_nodes)
        self._flat = grow(self._flat, self._used + sum(len(entities) for _, entities in lists))
        for node, entities in lists:
            k = len(entities)
            self._live += k - int(self._count[node])
            self._start[node], self._count[node] = self._used, k
            self._flat[self._used : self._used + k] = entities
            self._used += k

    def _build(self, st: GraphState, writer_lock: threading.RLock) -> None:
        with writer_lock:  # from here on the writer marks what changes
            st.mentions_changed = set()
            items = list(st.mentions.items())
            index = st.index
            nodes = np.fromiter((index.get(MEMORY_PREFIX + m, -1) for m, _ in items),
                                np.int64, len(items))
            n_nodes = len(st.keys)
        if (nodes < 0).any():  # a memory without its node (none is written so): left out
            items = [item for item, node in zip(items, nodes.tolist(), strict=True) if node >= 0]
            nodes = nodes[nodes >= 0]
        counts = np.fromiter(map(len, map(itemgetter(1), items)), np.int32, len(items))
        total = int(counts.sum())
        self._flat = np.zeros(max(2 * total, 1024), np.int32)
        self._flat[:total] = np.fromiter(chain.from_iterable(map(itemgetter(1), items)),
                                         np.int32, total)
        self._start = np.zeros(max(n_nodes, 1024), np.int64)
        self._count = np.zeros(max(n_nodes, 1024), np.int32)
        self._start[nodes] = np.cumsum(counts) - counts
        self._count[nodes] = counts
        self._used = self._live = total
        self._state = st


def _kernels() -> Any:
    """kernels/spread.py (numba), imported by the first topic share."""
    from ..kernels import spread

    return spread


class GraphReads:
    """Queries of a `KnowledgeGraph` (its base class), which sets the attributes below."""

    state: GraphState
    half_life: float
    floor: float
    spread_config: SpreadConfig
    weights_max_age: float
    attractor_ttl: float
    attractor_refreshes: int
    _wlock: threading.RLock
    _asof: tuple[float, int, Adjacency] | None
    _attr: tuple[int, float, int, list[tuple[str, float]]] | None
    _mention_rows: MentionRows

    def triplet(self, triplet_id: int) -> Triplet:
        """One triplet by id (its weight as stored at the last reinforcement)."""
        t = self.state.get(triplet_id)
        if t is None:
            raise UnknownTriplet(triplet_id)
        return t

    def triplets(self, *, subject: str | None = None, predicate: str | None = None,
                 obj: str | None = None, as_of: float | None = None,
                 include_invalid: bool = False) -> list[Triplet]:
        """Triplets matching the given parts (names matched case-insensitively).

        Default: those valid now. ``as_of=t``: those valid at t (valid_from ≤ t <
        invalidated_at). ``include_invalid``: every stored triplet. Hebbian weights are
        reported decayed to now (or `as_of`); one decayed below the floor is left out.
        """
        return kg_query.query(self.state, subject, predicate, obj, as_of, include_invalid,
                              time.time())

    def entities_of(self, memory_id: str) -> tuple[str, ...]:
        """The entities a memory mentions (display forms)."""
        display = self.state.display
        return tuple(display[n] for n in self.state.mentions.get(memory_id, {}))

    def topic_shares(self, memory_ids: list[str], topics: Mapping[str, float]) -> list[float]:
        """Per memory, ``min(1, Σ topics[e])`` over the entities it mentions (display forms,
        summed in its mentions' order; an entity not in `topics` adds nothing): how much it
        touches a session's topics."""
        st = self.state
        index, prefix = st.index, MEMORY_PREFIX
        nodes = np.fromiter((index.get(prefix + m, -1) for m in memory_ids), np.int64,
                            len(memory_ids))
        return self.topic_shares_of(nodes, topics, st).tolist()

    def topic_shares_of(self, nodes: np.ndarray, topics: Mapping[str, float],
                        state: GraphState | None = None) -> np.ndarray:
        """`topic_shares` of memory nodes (int64; -1: a memory not in the graph) of
        ``state`` (default: the current one), as float64, in one kernel call over each
        memory's mentions laid end to end (`MentionRows`)."""
        st = self.state if state is None else state
        display = st.display
        by_node: dict[int, float] = {}
        for name, weight in topics.items():  # a topic's node is its display form's key
            n = st.index.get(_entity_key(name))
            if n is None or display[n] != name:
                by_node = {}
                break
            by_node[n] = weight
        if len(by_node) != len(topics):  # a name that is no node's display form: by name
            by_node = {n: w for n, name in enumerate(display) if (w := topics.get(name)) is not None}
        topic_nodes = np.fromiter(by_node, np.int64, len(by_node))
        weights = np.fromiter(by_node.values(), np.float64, len(by_node))
        return self._mention_rows.shares(st, self._wlock, np.ascontiguousarray(nodes, np.int64),
                                         topic_nodes, weights)

    def memories_of(self, entity: str) -> tuple[str, ...]:
        """The memories that mention an entity (matched case-insensitively)."""
        n = self.state.index.get(_entity_key(entity))
        return tuple(self.state.memories.get(n, ())) if n is not None else ()

    def adjacency(self, as_of: float | None = None) -> Adjacency:
        """The CSR over all nodes: live (cached, refreshed incrementally), or as of a time
        (built on demand; the last one is kept)."""
        st = self.state
        now = time.time()
        if as_of is None:
            return st.cache.get(st, now=now, half_life=self.half_life, floor=self.floor,
                                writer_lock=self._wlock, max_age=self.weights_max_age)
        cached = self._asof
        if cached is not None and cached[0] == as_of and cached[1] == st.version:
            return cached[2]
        version = st.version
        adj = build_as_of(st, as_of, half_life=self.half_life, floor=self.floor,
                          writer_lock=self._wlock)
        self._asof = (as_of, version, adj)
        return adj

    def spread(self, seeds: Mapping[str, float], *, strength: float | None = None,
               decay: float | None = None, max_hops: int | None = None,
               cutoff: float | None = None, as_of: float | None = None,
               hub_power: float | None = None) -> Spread:
        """Spreading activation from seed memories (memory id → initial activation, e.g.
        similarity); parameters default to `spread_config`. Seeds not in the graph come
        back with their own activation at hop 0."""
        cfg = self.spread_config.overridden(strength=strength, decay=decay, max_hops=max_hops,
                                            cutoff=cutoff, hub_power=hub_power)
        # The state's key list, not adj.keys: the same first items, without a Python-level
        # __getitem__ per reached node.
        return spread_seeds(self.adjacency(as_of), seeds, cfg, self.state.keys,
                            self.state.display)

    def reach(self, adjacency: Adjacency, seeds: Mapping[str, float] | TopSeeds,
              candidates: np.ndarray,
              threshold: float, limit: int, *, strength: float | None = None,
              decay: float | None = None, max_hops: int | None = None,
              cutoff: float | None = None, hub_power: float | None = None) -> Reach:
        """`spread` over ``adjacency`` (one of this graph's, e.g. `adjacency()`), read for
        full resonance: the activation and hop of the nodes ``candidates`` and the
        ``limit`` strongest other memories reached with activation ≥ ``threshold``
        (`activation.reach`)."""
        cfg = self.spread_config.overridden(strength=strength, decay=decay, max_hops=max_hops,
                                            cutoff=cutoff, hub_power=hub_power)
        return reach(adjacency, seeds, cfg, self.state.keys, candidates, threshold, limit)

    def prepare(self) -> None:
        """After a write: rebuild now what the next query would rebuild first — the live
        adjacency, the attractors (as many as last asked), the mentions' table of topic
        shares — if a query has read them before, so that the writer's thread pays for
        them instead of the next query's."""
        st = self.state
        if st.cache.built and st.cache.current() is None:
            self.adjacency()
        if st.mentions_changed:
            self._mention_rows.catch_up(st, self._wlock)
        attr = self._attr
        if attr is not None and attr[0] != st.version:
            self.attractors(attr[2])

    def attractors(self, n: int = 10) -> list[tuple[str, float]]:
        """The n most-connected entities with strength ``min(log2(1 + degree) / 4, 1)``.

        Cached: recomputed after a write (the graph's version changed) or once the cache is
        older than ``attractor_ttl`` seconds, never per call.
        """
        st = self.state
        cached = self._attr
        now = time.monotonic()
        if (cached is not None and cached[0] == st.version and now - cached[1] < self.attractor_ttl
                and cached[2] >= n):
            return cached[3][:n]
        k = max(n, 64)
        top = kg_query.top_entities(st, k)
        self._attr = (st.version, now, k, top)
        self.attractor_refreshes += 1
        return top[:n]
