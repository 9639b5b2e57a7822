"""Spreading activation: its parameters (`SpreadConfig`), its result (`Spread`), and the call
into the numba kernel (`spread_nodes`, with per-thread reusable arrays).

The propagation rule is documented in `kernels/spread.py`; `spread_seeds` (what
`KnowledgeGraph.spread` runs) maps memory ids to nodes and calls `spread_nodes` over the
graph's current `Adjacency`.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, NamedTuple

import numpy as np

from ..errors import ConfigError
from .adjacency import Adjacency
from .kg_state import MEMORY_PREFIX

__all__ = ["Reach", "Spread", "SpreadConfig", "TopSeeds", "reach", "spread_nodes", "spread_seeds"]


_OVERRIDDEN: dict[tuple, SpreadConfig] = {}  # (config, the overrides) -> the copy


@dataclass(frozen=True)
class SpreadConfig:
    """Spreading-activation defaults, tuned so a memory two and three memory-hops out scores.

    A memory-hop is two graph hops (memory → entity → memory). Per graph hop an activation
    is multiplied by ``decay`` and the edge weight, and leaving an entity node by
    ``degree ** -hub_power`` (hub damping: an entity mentioned by 200 memories gives each
    1/14 of what a private one gives). With these values, from a seed at 1.0 along a chain of
    entities each mentioned by two memories: one memory-hop 0.45, two 0.21, three 0.09 —
    all above the 0.05 entry threshold, so hops 2 and 3 matter; a memory reached only
    through a 200-memory hub gets 0.045 and stays out. ``max_hops`` 6 allows three
    memory-hops; ``cutoff`` stops a path whose activation fell below it.
    """

    strength: float = 1.0
    decay: float = 0.8
    max_hops: int = 6
    cutoff: float = 0.01
    hub_power: float = 0.5

    def overridden(self, *, strength: float | None = None, decay: float | None = None,
                   max_hops: int | None = None, cutoff: float | None = None,
                   hub_power: float | None = None) -> SpreadConfig:
        """A copy with the given values (None keeps this one's); `ConfigError` if invalid.
        Each query asks for the same few: the last ones are kept (the config is frozen)."""
        key = (self, strength, decay, max_hops, cutoff, hub_power)
        kept = _OVERRIDDEN.get(key)
        if kept is not None:
            return kept
        cfg = SpreadConfig(
            strength=self.strength if strength is None else strength,
            decay=self.decay if decay is None else decay,
            max_hops=self.max_hops if max_hops is None else max_hops,
            cutoff=self.cutoff if cutoff is None else cutoff,
            hub_power=self.hub_power if hub_power is None else hub_power,
        )
        if not (0 <= cfg.decay <= 1 and cfg.strength >= 0 and cfg.cutoff > 0
                and cfg.max_hops >= 0):
            raise ConfigError(f"spread(strength={cfg.strength}, decay={cfg.decay}, max_hops="
                              f"{cfg.max_hops}, cutoff={cfg.cutoff}): need 0 <= decay <= 1, "
                              "strength >= 0, cutoff > 0, max_hops >= 0")
        if len(_OVERRIDDEN) >= 64:
            _OVERRIDDEN.clear()
        _OVERRIDDEN[key] = cfg
        return cfg


class Spread:
    """The result of `KnowledgeGraph.spread`: reached nodes as arrays, dicts on demand.

    ``memories`` (memory id → activation), ``entities`` (entity → activation) and ``hops``
    (memory id → the hop it was first reached at; seeds 0) are built on first access.
    """

    def __init__(self, nodes: np.ndarray, activation: np.ndarray, hops: np.ndarray,
                 keys: Sequence[str], display: list[str],
                 extra_seeds: Mapping[str, float], entity: np.ndarray | None = None) -> None:
        self.nodes, self.activation, self.hop = nodes, activation, hops
        self._keys, self._display, self._extra = keys, display, extra_seeds
        # entity flag per graph node (1 entity, 0 memory), when the caller has it
        self._entity = (np.ascontiguousarray(entity, np.uint8)
                        if entity is not None and len(entity) >= len(keys) else None)

    def __len__(self) -> int:
        return len(self.nodes) + len(self._extra)

    @cached_property
    def _split(self) -> tuple[dict[str, float], dict[str, float], dict[str, int]]:
        mem: dict[str, float] = dict(self._extra)
        ent: dict[str, float] = {}
        hops: dict[str, int] = dict.fromkeys(self._extra, 0)
        keys, display, cut = self._keys, self._display, len(MEMORY_PREFIX)
        for n, a, h in zip(self.nodes.tolist(), self.activation.tolist(), self.hop.tolist(),
                           strict=True):
            key = keys[n]
            if key.startswith(MEMORY_PREFIX):
                mem[key[cut:]] = a
                hops[key[cut:]] = h
            else:
                ent[display[n]] = a
        return mem, ent, hops

    @property
    def memories(self) -> dict[str, float]:
        """memory id → activation, for every memory reached (seeds included)."""
        return self._split[0]

    @property
    def entities(self) -> dict[str, float]:
        """entity (display form) → activation."""
        return self._split[1]

    @property
    def hops(self) -> dict[str, int]:
        """memory id → the hop at which it was first reached (seeds: 0)."""
        return self._split[2]

    def strongest_memories(self, threshold: float, limit: int,
                           exclude: frozenset[str] = frozenset(),
                           exclude_nodes: np.ndarray | None = None) -> dict[str, float]:
        """At most `limit` reached memories with activation ≥ threshold not in `exclude`,
        strongest first; looks at nodes in activation order and stops once it has them.
        ``exclude_nodes``: the graph nodes of (some of) `exclude`, -1 for none: they and the
        entity nodes are dropped in one array pass before that look."""
        out: dict[str, float] = {}
        if limit <= 0:
            return out
        memories_only = self._entity is not None
        known = _NONE if exclude_nodes is None or not memories_only else np.sort(
            np.asarray(exclude_nodes, np.int64))
        strong = np.empty(len(self.nodes), np.int64)
        found = _kernels().strong_nodes(
            np.ascontiguousarray(self.activation >= threshold),
            np.ascontiguousarray(self.nodes, np.int32),
            self._entity if memories_only else _NO_FLAGS, memories_only, known, strong)
        if not found:
            return out
        strong = strong[:found]
        if found > 1:
            strong = strong[(-self.activation[strong]).argsort(kind="stable")]
        keys, cut = self._keys, len(MEMORY_PREFIX)
        for node, a in zip(self.nodes[strong].tolist(), self.activation[strong].tolist(),
                           strict=True):
            key = keys[node]
            if key.startswith(MEMORY_PREFIX) and key[cut:] not in exclude:
                out[key[cut:]] = a
                if len(out) >= limit:
                    break
        return out

    def of_nodes(self, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(activation, hop) of each graph node in `nodes` (-1: not a node): 0 and -1 where
        spreading did not reach it. One kernel call: no per-node dictionary."""
        nodes = np.ascontiguousarray(nodes, np.int64)
        act = np.empty(len(nodes), np.float64)
        hop = np.empty(len(nodes), np.int64)
        reached = np.ascontiguousarray(self.nodes, np.int32)
        order = reached.argsort(kind="stable")  # numpy's sort: fast at any size
        _kernels().node_values(reached[order], order, np.ascontiguousarray(
            self.activation, np.float32), np.ascontiguousarray(self.hop, np.int32), nodes,
            act, hop)
        return act, hop

    def memories_above(self, threshold: float) -> dict[str, float]:
        """Reached memories with activation ≥ threshold, strongest first (no full dict)."""
        out: dict[str, float] = {}
        strong = np.flatnonzero(self.activation >= threshold)
        strong = strong[np.argsort(-self.activation[strong], kind="stable")]
        keys, cut = self._keys, len(MEMORY_PREFIX)
        for node, a in zip(self.nodes[strong].tolist(), self.activation[strong].tolist(),
                           strict=True):
            key = keys[node]
            if key.startswith(MEMORY_PREFIX):
                out[key[cut:]] = a
        for k, a in self._extra.items():
            if a >= threshold:
                out.setdefault(k, a)
        return out


def _seed_nodes(adj: Adjacency, seeds: Mapping[str, float],
                cfg: SpreadConfig) -> tuple[np.ndarray, np.ndarray, dict[str, float]]:
    """(seed nodes, their values: scaled by strength, clipped to [0, 1]), and the seeds not
    in the graph with their value."""
    nodes, vals, extra = [], [], {}
    for mid, value in seeds.items():
        a = min(max(float(value) * cfg.strength, 0.0), 1.0)
        n = adj.node_of(MEMORY_PREFIX + mid)
        if n is None:
            extra[mid] = a
        else:
            nodes.append(n)
            vals.append(a)
    return np.array(nodes, np.int32), np.array(vals, np.float32), extra


def spread_seeds(adj: Adjacency, seeds: Mapping[str, float], cfg: SpreadConfig,
                 keys: Sequence[str], display: list[str]) -> Spread:
    """Spreading activation from seed memories (memory id → initial activation) over
    ``adj``; ``keys`` and ``display`` name its nodes. Seeds not in the graph come back with
    their own activation at hop 0."""
    nodes, vals, extra = _seed_nodes(adj, seeds, cfg)
    reached, act, hop = spread_nodes(adj, nodes, vals, decay=cfg.decay, cutoff=cfg.cutoff,
                                     max_hops=cfg.max_hops, hub_power=cfg.hub_power)
    return Spread(reached, act, hop, keys, display, extra, adj.entity)


class TopSeeds(NamedTuple):
    """Seeds given as full resonance has them: the ``top`` candidates of ``relevance`` > 0
    (most relevant first, equal ones in candidate order), each starting at its relevance,
    at the graph node ``nodes`` gives it (-1: not in the graph) — picked and mapped in one
    kernel call, not through a memory id and a node key each."""

    relevance: np.ndarray  # float64, per candidate
    nodes: np.ndarray  # int64, per candidate
    top: int


class Reach(NamedTuple):
    """What full resonance reads of a spreading (`reach`)."""

    activation: np.ndarray  # float64: each candidate's (0 where not reached)
    hops: np.ndarray  # int64: the hop each candidate was first reached at (-1: not reached)
    # the strongest other memories reached, strongest first: their graph nodes (int32),
    # activation (float32) and hop (int32) — full resonance maps the nodes to store rows
    # with one gather (`MemoryNodes.rows_of`); `strongest` names them
    nodes: np.ndarray
    strengths: np.ndarray
    node_hops: np.ndarray
    reached: int  # nodes reached, seeds not in the graph included (len of the Spread)
    keys: Sequence[str]  # the graph's node keys
    seeds: int  # how many seeds there were (those not in the graph included)

    @property
    def strongest(self) -> list[tuple[str, float, int]]:
        """(memory id, activation, hop) of the strongest other memories, strongest first."""
        cut = len(MEMORY_PREFIX)
        return [(self.keys[node][cut:], a, h) for node, a, h in zip(
            self.nodes.tolist(), self.strengths.tolist(), self.node_hops.tolist(), strict=True)]


def reach(adj: Adjacency, seeds: Mapping[str, float] | TopSeeds, cfg: SpreadConfig,
          keys: Sequence[str], candidates: np.ndarray, threshold: float, limit: int) -> Reach:
    """Spreading activation from ``seeds`` as `spread_seeds` runs it, read as full
    resonance reads it, in one kernel call: the activation and hop of each of the graph
    nodes ``candidates`` (-1: none), as `Spread.of_nodes` gives them, and the strongest
    other memories, as `Spread.strongest_memories(threshold, limit, <the candidates' ids>,
    candidates)` gives them (with their hop) — without the Spread's arrays and sorts (at
    100k memories, of_nodes alone sorted ~13k reached nodes a query). ``seeds``: memory
    id -> initial activation, or full resonance's `TopSeeds`."""
    ws = _workspace(adj.n_nodes)
    k, limit = candidates.shape[0], max(int(limit), 0)
    cand_act, cand_hop = np.empty(k), np.empty(k, np.int64)
    s_nodes, s_act, s_hop = (np.empty(limit, np.int32), np.empty(limit, np.float32),
                             np.empty(limit, np.int32))
    cands = np.ascontiguousarray(candidates, np.int64)
    if isinstance(seeds, TopSeeds):  # the seeds picked and spread from in one kernel call
        n_seeds, in_graph, n, m = _kernels().reach_top(
            adj.indptr, adj.indices, adj.weights, adj.delta_src, adj.delta_dst, adj.delta_w,
            adj.degree, adj.entity, np.ascontiguousarray(seeds.relevance, np.float64),
            np.ascontiguousarray(seeds.nodes, np.int64), adj.n_nodes, max(int(seeds.top), 0),
            float(cfg.strength), np.float32(cfg.decay), np.float32(cfg.cutoff),
            int(cfg.max_hops), np.float32(cfg.hub_power), ws.act, ws.hops, ws.touched, ws.mark,
            ws.frontier, ws.nxt, ws.values, cands, np.float32(threshold), limit, cand_act,
            cand_hop, s_nodes, s_act, s_hop)
        outside = n_seeds - in_graph
    else:
        nodes, vals, extra = _seed_nodes(adj, seeds, cfg)
        n_seeds, outside = len(seeds), len(extra)
        n, m = _kernels().reach(
            adj.indptr, adj.indices, adj.weights, adj.delta_src, adj.delta_dst, adj.delta_w,
            adj.degree, adj.entity, nodes, vals, np.float32(cfg.decay), np.float32(cfg.cutoff),
            int(cfg.max_hops), np.float32(cfg.hub_power), ws.act, ws.hops, ws.touched, ws.mark,
            ws.frontier, ws.nxt, ws.values, cands, np.float32(threshold), limit, cand_act,
            cand_hop, s_nodes, s_act, s_hop)
    return Reach(cand_act, cand_hop, s_nodes[:m], s_act[:m], s_hop[:m], n + outside, keys,
                 n_seeds)


def spread_nodes(adj: Adjacency, seed_nodes: np.ndarray, seed_values: np.ndarray, *,
                 decay: float, cutoff: float, max_hops: int,
                 hub_power: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Run the spreading kernel over an adjacency from seed nodes (values already scaled by
    strength and clipped to [0, 1]); returns (reached nodes, activation, first hop)."""
    spread_activation = _kernels().spread_activation
    ws = _workspace(adj.n_nodes)
    k = spread_activation(adj.indptr, adj.indices, adj.weights, adj.delta_src, adj.delta_dst,
                          adj.delta_w, adj.degree, adj.entity,
                          np.ascontiguousarray(seed_nodes, np.int32),
                          np.ascontiguousarray(seed_values, np.float32), np.float32(decay),
                          np.float32(cutoff), int(max_hops), np.float32(hub_power), ws.act,
                          ws.hops, ws.touched, ws.mark, ws.frontier, ws.nxt, ws.values)
    reached, act, hops = np.empty(k, np.int32), np.empty(k, np.float32), np.empty(k, np.int32)
    _kernels().harvest(k, ws.touched, ws.act, ws.hops, ws.mark, reached, act, hops)  # and cleans
    return reached, act, hops


class _Workspace:
    """Per-thread kernel arrays, kept between calls and cleaned by resetting only what a
    call touched (O(reached), not O(nodes))."""

    def __init__(self, n: int) -> None:
        self.size = n
        self.act = np.zeros(n, np.float32)
        self.hops = np.full(n, -1, np.int32)
        self.mark = np.full(n, -1, np.int32)
        self.touched = np.empty(n, np.int32)
        self.frontier = np.empty(n, np.int32)
        self.nxt = np.empty(n, np.int32)
        self.values = np.empty(n, np.float32)


_local = threading.local()
_NONE = np.zeros(0, np.int64)
_NO_FLAGS = np.zeros(0, np.uint8)
_KERNELS: Any = None


def _kernels() -> Any:
    """kernels/spread.py, imported on first use (numba loads when a graph is spread)."""
    global _KERNELS
    if _KERNELS is None:
        from ..kernels import spread

        _KERNELS = spread
    return _KERNELS


def _workspace(n: int) -> _Workspace:
    ws: _Workspace | None = getattr(_local, "ws", None)
    if ws is None or ws.size < n:
        # grow with headroom: a graph that gains nodes does not reallocate on every call
        ws = _Workspace(max(n + n // 4, 1024))
        _local.ws = ws
    return ws
