"""The knowledge-graph node of each store row, kept across queries for spreading activation.

Spreading reads the node of every candidate (a few hundred a query). Looking each up by its
key (``"m:" + id``, a new string hashed every time) was most of that phase's Python; store
rows and graph nodes are both append-only, so the answer is kept in one array and only
what was added since (new rows, new memory nodes) is looked up.
"""

from __future__ import annotations

import threading
from itertools import repeat
from typing import TYPE_CHECKING

import numpy as np

from ..graph.kg_state import MEMORY_PREFIX
from ..recall.postings import grow

if TYPE_CHECKING:
    from ..graph.kg_state import GraphState
    from ..store.state import State

__all__ = ["MemoryNodes"]


class MemoryNodes:
    """Store row -> graph node of its memory (-1: none), for one store state and one graph
    state at a time (either swapped for another starts it over)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owners: tuple[object, object] | None = None
        self._nodes = np.full(0, -1, np.int64)
        self._node_rows = np.full(0, -1, np.int64)  # the other way: graph node -> store row
        self._rows = 0  # rows looked up so far
        self._seen = 0  # graph nodes scanned so far

    def of(self, state: State, graph: GraphState, rows: np.ndarray) -> np.ndarray:
        """The graph node of each of ``rows`` (int64; -1 where the memory has none)."""
        with self._lock:
            self._catch_up(state, graph)
            return self._nodes[rows]

    def rows_of(self, state: State, graph: GraphState, nodes: np.ndarray) -> np.ndarray:
        """The store row of each graph node in ``nodes`` (int64; -1 where the node is no
        memory of this store, or not one yet)."""
        with self._lock:
            self._catch_up(state, graph)
            known = self._node_rows
            nodes = np.asarray(nodes, np.int64)
            if not nodes.shape[0] or nodes.max() < known.shape[0]:
                return known[nodes]
            out = np.full(nodes.shape[0], -1, np.int64)  # a node newer than the last look-up
            inside = nodes < known.shape[0]
            out[inside] = known[nodes[inside]]
            return out

    def catch_up(self, state: State, graph: GraphState) -> None:
        """Take in the rows and nodes added since, if a query has read this store state and
        graph state before (a writer's thread calls it after a write, so the next query
        only gathers)."""
        with self._lock:
            owners = self._owners
            if owners is not None and owners[0] is state and owners[1] is graph:
                self._catch_up(state, graph)

    def _catch_up(self, state: State, graph: GraphState) -> None:
        if self._owners is None or self._owners[0] is not state or self._owners[1] is not graph:
            self._owners = (state, graph)
            self._nodes = np.full(0, -1, np.int64)
            self._node_rows = np.full(0, -1, np.int64)
            self._rows = self._seen = 0
        keys, index = graph.keys, graph.index
        filled = self._rows
        n_nodes = len(keys)  # read first: a node appended later is found by a later scan
        if n_nodes > self._seen and filled:
            # memory nodes made since the last scan, for rows already looked up
            cut, row_of, nodes = len(MEMORY_PREFIX), state.rows, self._nodes
            for node in range(self._seen, n_nodes):
                key = keys[node]
                if key.startswith(MEMORY_PREFIX):
                    row = row_of.get(key[cut:])
                    if row is not None and row < filled:
                        nodes[row] = node
                        self._node_row(node, row)
        self._seen = n_nodes
        n = len(state.ids)
        if n > filled:
            self._nodes = grow(self._nodes, n, -1)
            ids = state.ids[filled:n]
            got = self._nodes[filled:n] = np.fromiter(
                map(index.get, map(MEMORY_PREFIX.__add__, ids), repeat(-1)), np.int64, len(ids))
            has = np.flatnonzero(got >= 0)
            if has.shape[0]:
                self._node_row(got[has], has + filled)
            self._rows = n

    def _node_row(self, nodes: np.ndarray | int, rows: np.ndarray | int) -> None:
        """``_node_rows[nodes] = rows``, grown to hold the largest node."""
        top = int(np.max(nodes)) + 1
        if top > self._node_rows.shape[0]:
            self._node_rows = grow(self._node_rows, top, -1)
        self._node_rows[nodes] = rows
