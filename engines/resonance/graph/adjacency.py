"""CSR adjacency of the knowledge graph: immutable read views, rebuilt incrementally.

The graph's edges live in an `EdgeTable` (growable columns, one row per edge, owned by the
writer). Readers get an `Adjacency`: a main CSR over every live edge when it was built, plus
a small *delta* (edges added since, sorted by source) and a copy of the main weights with
the edges changed since patched in. `AdjacencyCache` decides what a refresh costs:

- new edges only        → rebuild the delta (argsort of the delta: O(d log d), d small);
- changed weights/kills → one copy of the main weights with the changed slots patched;
- delta or changes past ``merge_at`` (``max(1024, edges / 128)``) → a full rebuild, an
  O(edges) counting sort in numba (`kernels.spread.build_csr`).

An `Adjacency` is never changed once built (writers build new arrays and swap a reference),
so a reader holding one needs no lock while it reads.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

__all__ = ["Adjacency", "AdjacencyCache", "EdgeTable", "NodeKeys", "build_as_of"]

_EMPTY_I32 = np.zeros(0, np.int32)
_EMPTY_F32 = np.zeros(0, np.float32)


class NodeKeys(Sequence[str]):
    """The first ``n`` node keys of an append-only list: a view, not a copy (O(1) to make)."""

    __slots__ = ("_keys", "_n")

    def __init__(self, keys: list[str], n: int) -> None:
        self._keys, self._n = keys, n

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return tuple(self._keys[: self._n][i])
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError(f"node {i} out of range (0..{self._n - 1})")
        return self._keys[i]

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys[: self._n])


@dataclass(frozen=True, eq=False)
class Adjacency:
    """A symmetric CSR over all nodes (``m:<memory id>`` and ``e:<entity>``), immutable.

    ``indptr``/``indices``/``weights`` are the main CSR; it covers nodes below
    ``len(indptr) - 1``. Edges added after it was built are in ``delta_src`` (sorted),
    ``delta_dst``, ``delta_w``: use `neighbours` to see both. ``degree`` counts each node's
    live edges, ``entity`` flags entity nodes (1) apart from memory nodes (0).
    """

    indptr: np.ndarray
    indices: np.ndarray
    weights: np.ndarray
    keys: Sequence[str]
    delta_src: np.ndarray = field(default_factory=lambda: _EMPTY_I32)
    delta_dst: np.ndarray = field(default_factory=lambda: _EMPTY_I32)
    delta_w: np.ndarray = field(default_factory=lambda: _EMPTY_F32)
    degree: np.ndarray = field(default_factory=lambda: _EMPTY_I32)
    entity: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))
    index: Mapping[str, int] = field(default_factory=dict)
    built_at: float = 0.0

    @property
    def n_nodes(self) -> int:
        """How many nodes this view knows."""
        return len(self.keys)

    @property
    def n_slots(self) -> int:
        """Directed slots (each undirected edge counts twice), main and delta."""
        return int(self.indptr[-1]) + len(self.delta_src)

    def node_of(self, key: str) -> int | None:
        """The node number of a key (``"m:<id>"`` or ``"e:<entity>"``), or None."""
        i = self.index.get(key)
        return i if i is not None and i < len(self.keys) else None

    def neighbours(self, node: int) -> tuple[np.ndarray, np.ndarray]:
        """(nodes, weights) of a node's edges, main and delta together (zero-weight slots,
        edges dropped since the main CSR was built, are left out)."""
        parts_i, parts_w = [], []
        if node < len(self.indptr) - 1:
            a, b = int(self.indptr[node]), int(self.indptr[node + 1])
            parts_i.append(self.indices[a:b])
            parts_w.append(self.weights[a:b])
        lo, hi = np.searchsorted(self.delta_src, [node, node + 1])
        parts_i.append(self.delta_dst[lo:hi])
        parts_w.append(self.delta_w[lo:hi])
        nodes, weights = np.concatenate(parts_i), np.concatenate(parts_w)
        live = weights > 0
        return nodes[live], weights[live]

    @classmethod
    def from_edges(cls, src: np.ndarray, dst: np.ndarray, weights: np.ndarray,
                   keys: Sequence[str], entity: np.ndarray | None = None) -> Adjacency:
        """A CSR built from scratch from undirected edges (benchmarks and tests)."""
        from ..kernels.spread import build_csr

        n = len(keys)
        src = np.ascontiguousarray(src, np.int32)
        dst = np.ascontiguousarray(dst, np.int32)
        w = np.clip(np.ascontiguousarray(weights, np.float32), 0, 1).astype(np.float32)
        keep = np.ones(len(src), np.uint8)
        slots = 2 * len(src)
        indptr = np.empty(n + 1, np.int64)
        indices = np.empty(slots, np.int32)
        wts = np.empty(slots, np.float32)
        fwd, bwd = np.empty(len(src), np.int64), np.empty(len(src), np.int64)
        used = build_csr(n, src, dst, w, keep, indptr, indices, wts, fwd, bwd)
        degree = np.diff(indptr).astype(np.int32)
        ent = (np.zeros(n, np.uint8) if entity is None
               else np.ascontiguousarray(entity, np.uint8))
        keys_list = list(keys)
        return cls(indptr, indices[:used], wts[:used], NodeKeys(keys_list, n),
                   degree=degree, entity=ent, index={k: i for i, k in enumerate(keys_list)})


class EdgeTable:
    """Every edge ever added, as growable columns (row = edge id). Owned by the writer."""

    def __init__(self, capacity: int = 1024) -> None:
        self.n = 0
        self.src = np.zeros(capacity, np.int32)
        self.dst = np.zeros(capacity, np.int32)
        self.w = np.zeros(capacity, np.float64)  # the stored weight (Hebbian: at `last`)
        self.valid_from = np.zeros(capacity, np.float64)
        self.invalid_at = np.full(capacity, np.inf)  # inf: still valid
        self.hebbian = np.zeros(capacity, np.uint8)  # 1: decays with the graph's half-life
        self.last = np.zeros(capacity, np.float64)  # when a Hebbian edge was last reinforced
        self.mention = np.zeros(capacity, np.uint8)  # 1: memory → entity, else a triplet

    COLS = ("src", "dst", "w", "valid_from", "invalid_at", "hebbian", "last", "mention")

    def add(self, src: int, dst: int, w: float, valid_from: float, *, hebbian: bool = False,
            last: float = 0.0, mention: bool = False) -> int:
        """Append one edge; return its id."""
        if self.n == len(self.src):
            for name in self.COLS:
                old = getattr(self, name)
                new = np.full(2 * len(old), np.inf) if name == "invalid_at" else np.zeros(
                    2 * len(old), old.dtype)
                new[: len(old)] = old
                setattr(self, name, new)
        e = self.n
        self.src[e], self.dst[e], self.w[e] = src, dst, w
        self.valid_from[e], self.hebbian[e], self.last[e] = valid_from, hebbian, last
        self.mention[e] = mention
        self.n = e + 1
        return e

    def effective(self, at: float, half_life: float, floor: float,
                  rows: np.ndarray | slice | None = None) -> np.ndarray:
        """Weights as of `at`: Hebbian edges decayed (below `floor`: 0), others as stored."""
        sel = slice(0, self.n) if rows is None else rows
        w = self.w[sel].astype(np.float32)
        heb = self.hebbian[sel].astype(bool)
        if heb.any():
            age = np.maximum(at - self.last[sel][heb], 0.0)
            dec = (w[heb] * 0.5 ** (age / half_life)).astype(np.float32)
            dec[dec < floor] = 0.0
            w[heb] = dec
        return w


class GraphLike(Protocol):
    """What `AdjacencyCache.get` reads from the graph's state."""

    edges: EdgeTable
    keys: list[str]
    index: dict[str, int]
    degree: np.ndarray
    entity: np.ndarray


@dataclass
class _Main:
    adj: Adjacency
    n_edges: int  # edges [0, n_edges) are in the main CSR
    slot_fwd: np.ndarray
    slot_bwd: np.ndarray


class AdjacencyCache:
    """Builds and caches the live `Adjacency` from an `EdgeTable`, incrementally.

    The graph calls `edge_changed(e)` when an existing edge's weight or validity changes and
    `touch()` after any write; `get(...)` returns the cached view while nothing changed.
    """

    def __init__(self) -> None:
        self._main: _Main | None = None
        self._changed: set[int] = set()
        self._current: Adjacency | None = None
        self._version = 0
        self._built_version = -1
        self._build_lock = threading.Lock()
        self.full_builds = 0
        self.delta_builds = 0

    def touch(self) -> None:
        """Something was written: the next `get` refreshes."""
        self._version += 1

    def edge_changed(self, e: int) -> None:
        """An edge already in the main CSR changed weight or validity."""
        if self._main is not None and e < self._main.n_edges:
            self._changed.add(e)
        self._version += 1

    def reset(self) -> None:
        """Forget everything (the next `get` builds from scratch)."""
        self._main, self._current, self._built_version = None, None, -1
        self._changed = set()

    @property
    def built(self) -> bool:
        """Whether a `get` has built an adjacency (a query has read one) since the last reset."""
        return self._main is not None

    def current(self) -> Adjacency | None:
        """The cached view if it is up to date, without building."""
        return self._current if self._built_version == self._version else None

    def get(self, state: GraphLike, *, now: float, half_life: float, floor: float,
            writer_lock: threading.RLock, max_age: float) -> Adjacency:
        """The live adjacency, refreshed as little as the writes since the last call need.

        Everything the build reads from `state` is read under `writer_lock`: the node count,
        the edges and the per-node arrays (which a writer may replace when they grow) must
        describe the same moment.
        """
        cur = self._current
        if (cur is not None and self._built_version == self._version
                and now - cur.built_at < max_age):
            return cur
        with self._build_lock:
            cur = self._current
            if (cur is not None and self._built_version == self._version
                    and now - cur.built_at < max_age):
                return cur
            # Copy what the build needs under the writer lock (short), build outside it.
            with writer_lock:
                version = self._version
                main = self._main
                edges, keys, index = state.edges, state.keys, state.index
                n_nodes = len(keys)
                stale = cur is not None and now - cur.built_at >= max_age
                merge_at = max(1024, edges.n // 128)
                full = (main is None or stale or edges.n - main.n_edges > merge_at
                        or len(self._changed) > merge_at)
                deg = state.degree[:n_nodes].copy()
                ent = state.entity[:n_nodes].copy()
                if full:
                    m = edges.n
                    cols = (edges.src[:m].copy(), edges.dst[:m].copy(),
                            edges.effective(now, half_life, floor),
                            (edges.invalid_at[:m] > now).astype(np.uint8))
                    self._changed = set()
                else:
                    assert main is not None
                    lo, m = main.n_edges, edges.n
                    changed = np.fromiter(self._changed, np.int64, len(self._changed))
                    ch_w = edges.effective(now, half_life, floor, changed)
                    ch_w[edges.invalid_at[changed] <= now] = 0.0
                    d_cols = (edges.src[lo:m].copy(), edges.dst[lo:m].copy(),
                              edges.effective(now, half_life, floor, slice(lo, m)),
                              edges.invalid_at[lo:m] > now)
            if full:
                adj, new_main = _full_build(*cols, keys, index, deg, ent, n_nodes, now)
                self._main = new_main
                self.full_builds += 1
            else:
                adj = _delta_build(main, changed, ch_w, *d_cols, keys, index, deg, ent,
                                   n_nodes, now)
                self.delta_builds += 1
            self._current = adj
            self._built_version = version
            return adj


def build_as_of(state: GraphLike, at: float, *, half_life: float, floor: float,
                writer_lock: threading.RLock) -> Adjacency:
    """A CSR of the edges valid at `at` (valid_from ≤ at < invalidated_at), built from
    scratch; Hebbian weights decayed to `at` from their last reinforcement."""
    with writer_lock:
        e, n = state.edges, len(state.keys)
        m = e.n
        keep = ((e.valid_from[:m] <= at) & (at < e.invalid_at[:m])).astype(np.uint8)
        cols = (e.src[:m].copy(), e.dst[:m].copy(), e.effective(at, half_life, floor), keep)
        ent = state.entity[:n].copy()
    live = keep.astype(bool) & (cols[2] > 0)
    deg = (np.bincount(cols[0][live], minlength=n) + np.bincount(
        cols[1][live & (cols[0] != cols[1])], minlength=n)).astype(np.int32)
    adj, _ = _full_build(*cols, state.keys, state.index, deg, ent, n, at)
    return adj


def _full_build(src: np.ndarray, dst: np.ndarray, w: np.ndarray, keep: np.ndarray,
                keys: list[str], index: Mapping[str, int], degree: np.ndarray,
                entity: np.ndarray, n: int, now: float) -> tuple[Adjacency, _Main]:
    from ..kernels.spread import build_csr

    keep &= (w > 0).astype(np.uint8)
    m = len(src)
    slots = 2 * int(keep.sum())
    indptr = np.empty(n + 1, np.int64)
    indices = np.empty(slots, np.int32)
    wts = np.empty(slots, np.float32)
    fwd, bwd = np.empty(m, np.int64), np.empty(m, np.int64)
    used = build_csr(n, src, dst, w, keep, indptr, indices, wts, fwd, bwd)
    adj = Adjacency(indptr, indices[:used], wts[:used], NodeKeys(keys, n), degree=degree,
                    entity=entity, index=index, built_at=now)
    return adj, _Main(adj, m, fwd, bwd)


def _delta_build(main: _Main, changed: np.ndarray, ch_w: np.ndarray, src: np.ndarray,
                 dst: np.ndarray, w: np.ndarray, live: np.ndarray, keys: list[str],
                 index: Mapping[str, int], degree: np.ndarray, entity: np.ndarray, n: int,
                 now: float) -> Adjacency:
    base = main.adj
    weights = base.weights
    if len(changed):
        weights = weights.copy()
        for slots in (main.slot_fwd[changed], main.slot_bwd[changed]):
            ok = slots >= 0
            weights[slots[ok]] = ch_w[ok]
    keep = live & (w > 0)
    src, dst, w = src[keep], dst[keep], w[keep]
    loop = src == dst
    d_src = np.concatenate([src, dst[~loop]])
    d_dst = np.concatenate([dst, src[~loop]])
    d_w = np.concatenate([w, w[~loop]])
    order = np.argsort(d_src, kind="stable")
    return Adjacency(base.indptr, base.indices, weights, NodeKeys(keys, n),
                     np.ascontiguousarray(d_src[order], np.int32),
                     np.ascontiguousarray(d_dst[order], np.int32),
                     np.ascontiguousarray(d_w[order], np.float32),
                     degree=degree, entity=entity, index=index, built_at=now)
