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
from itertools import repeat

import numpy as np

from ..errors import ResonanceError
from . import kg_query
from .activation import Reach, Spread, SpreadConfig, reach, spread_seeds
from .adjacency import Adjacency, build_as_of
from .kg_state import GraphState, Triplet, entity_key

__all__ = ["GraphReads", "UnknownTriplet"]

_ZEROS = repeat(0)  # the weight of a mentioned entity that is no topic


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
        display, mentions = st.display, st.mentions
        by_node: dict[int, float] = {}
        for name, weight in topics.items():  # a topic's node is its display form's key
            n = st.index.get(_entity_key(name))
            if n is None or display[n] != name:
                by_node = {}
                break
            by_node[n] = weight
        if len(by_node) != len(topics):  # a name that is no node's display form: by name
            by_node = {n: w for n, name in enumerate(display) if (w := topics.get(name)) is not None}
        found = None
        members = st.memories
        if sum(len(members.get(n, ())) for n in by_node) <= len(memory_ids):
            # the topics' memories are fewer than the memories asked about: look from them
            found = {}
            for n, weight in by_node.items():
                for memory_id in members.get(n, ()):
                    found.setdefault(memory_id, []).append(weight)
        # summed in each memory's mention order, from 0; an entity not in the topics adds 0,
        # which changes no sum (x + 0 is x)
        weight, get = by_node.get, mentions.get
        if found is None:
            return [min(1.0, sum(map(weight, get(m, ()), _ZEROS))) for m in memory_ids]
        out = []
        for memory_id in memory_ids:
            weights = found.get(memory_id, ())
            if len(weights) <= 2:  # a + b is b + a: the mentions' order cannot matter
                out.append(min(1.0, sum(weights, 0)))
            else:
                out.append(min(1.0, sum(map(weight, get(memory_id, ()), _ZEROS))))
        return out

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

    def reach(self, adjacency: Adjacency, seeds: Mapping[str, float], candidates: np.ndarray,
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
        adjacency and the attractors (as many as last asked) — if a query has read them
        before, so that the writer's thread pays for them instead of the next query's."""
        st = self.state
        if st.cache.built and st.cache.current() is None:
            self.adjacency()
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
