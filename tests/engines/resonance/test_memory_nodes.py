"""MemoryNodes: the graph node of each store row, and the store row of each graph node, kept
across queries, are the key look-ups'."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from soul.engines.resonance.graph.kg_state import MEMORY_PREFIX, GraphState
from soul.engines.resonance.memory import parse_kind
from soul.engines.resonance.resonate.memory_nodes import MemoryNodes
from soul.engines.resonance.store import ops
from soul.engines.resonance.store.state import State


def _add_row(state: State, memory_id: str) -> None:
    row = ops.Row(id=memory_id, kind=int(parse_kind("belief")), flags=0, created=1.0, mu=0.7,
                  var=0.04, n=0, text=memory_id, tags=(), realm=None, source=None, meta=None)
    state.apply(ops.ADD, memoryview(ops.encode_add(row, np.zeros(4, np.float32))))


def _by_key(state: State, graph: GraphState, rows: np.ndarray) -> list[int]:
    """What spreading looked up before: each row's memory key in the graph's index."""
    return [graph.index.get(MEMORY_PREFIX + state.ids[r], -1) for r in rows.tolist()]


def _row_by_key(state: State, graph: GraphState, nodes: np.ndarray) -> list[int]:
    """What spreading looked up before for a reached node: its memory id's store row."""
    keys, cut = graph.keys, len(MEMORY_PREFIX)
    return [state.rows.get(keys[n][cut:], -1) if n < len(keys) and keys[n].startswith(MEMORY_PREFIX)
            else -1 for n in nodes.tolist()]


# one step of a field's life: a memory written (a store row), a graph node made (of a
# memory written or not yet, or an entity), a writer's catch-up after a write (issue 26),
# or a query reading some rows' nodes
_STEP = st.one_of(st.tuples(st.just("row"), st.integers(0, 59)),
                  st.tuples(st.just("catch up"), st.just(0)),
                  st.tuples(st.just("memory node"), st.integers(0, 59)),
                  st.tuples(st.just("entity node"), st.integers(0, 59)),
                  st.tuples(st.just("query"), st.integers(0, 2**32)),
                  st.tuples(st.just("nodes query"), st.integers(0, 2**32)))


@settings(max_examples=150, deadline=None)
@given(st.lists(_STEP, max_size=80))
def test_nodes_of_rows_and_rows_of_nodes_are_the_key_lookups_after_any_interleaving_of_writes(steps) -> None:
    # rows and nodes come in any order: a memory's node made before its row, long after it
    # (a phrase that becomes an entity links older memories), or never
    state, graph, nodes = State(), GraphState(30.0, 0.01), MemoryNodes()
    for what, n in steps:
        if what == "row" and f"m{n}" not in state.rows:
            _add_row(state, f"m{n}")
        elif what == "memory node":
            graph.node(MEMORY_PREFIX + f"m{n}", f"m{n}", False)
        elif what == "entity node":
            graph.node(f"e:thing {n}", f"thing {n}", True)
        elif what == "catch up":
            nodes.catch_up(state, graph)
        elif what == "query" and state.n_rows:
            rows = np.random.default_rng(n).integers(0, state.n_rows, 1 + n % 40)
            assert nodes.of(state, graph, rows).tolist() == _by_key(state, graph, rows)
        elif what == "nodes query" and len(graph.keys):  # nodes past the graph's read -1
            reached = np.random.default_rng(n).integers(0, len(graph.keys) + 3, 1 + n % 40)
            assert nodes.rows_of(state, graph, reached).tolist() == _row_by_key(state, graph, reached)
    if len(graph.keys):
        every_node = np.arange(len(graph.keys))
        assert nodes.rows_of(state, graph, every_node).tolist() == _row_by_key(state, graph, every_node)
    if state.n_rows:
        every = np.arange(state.n_rows)
        assert nodes.of(state, graph, every).tolist() == _by_key(state, graph, every)


def test_a_graph_or_store_swapped_whole_starts_the_map_over() -> None:
    # a refresh swaps in a new GraphState (or a new State): its nodes are numbered anew
    state, graph, nodes = State(), GraphState(30.0, 0.01), MemoryNodes()
    for i in range(5):
        _add_row(state, f"m{i}")
        graph.node(MEMORY_PREFIX + f"m{i}", f"m{i}", False)
    rows = np.arange(5)
    assert nodes.of(state, graph, rows).tolist() == [0, 1, 2, 3, 4]
    other = GraphState(30.0, 0.01)
    other.node("e:x", "x", True)
    for i in (4, 2):
        other.node(MEMORY_PREFIX + f"m{i}", f"m{i}", False)
    assert nodes.of(state, other, rows).tolist() == [-1, -1, 2, -1, 1]
    assert nodes.rows_of(state, other, np.arange(3)).tolist() == [-1, 4, 2]
    fresh = State()
    _add_row(fresh, "m2")
    assert nodes.of(fresh, other, np.array([0])).tolist() == [2]
    assert nodes.rows_of(fresh, other, np.arange(3)).tolist() == [-1, -1, 0]


def test_flags_of_reads_the_rows_flags_and_leaves_the_state_free_to_grow() -> None:
    # queries do not wait for writes: reading flags through a numpy view would keep a writer
    # from extending the bytearray (BufferError) while the view lived
    state = State()
    for i in range(6):
        _add_row(state, f"m{i}")
    state.flags[2] |= ops.FLAG_DELETED
    rows = np.array([5, 2, 0, 2])
    got = state.flags_of(rows)
    assert got.dtype == np.uint8 and got.tolist() == [state.flags[r] for r in rows.tolist()]
    assert ((got & ops.FLAG_DELETED) != 0).tolist() == [False, True, False, True]
    _add_row(state, "m6")  # the bytearray grows with nothing holding its buffer
    assert state.flags_of(np.array([6])).tolist() == [state.flags[6]]
