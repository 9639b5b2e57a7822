"""The incrementally refreshed adjacency equals one built from scratch, after any writes."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from soul.engines.resonance.graph.adjacency import Adjacency, AdjacencyCache
from soul.engines.resonance.graph.kg import KnowledgeGraph


def edges_of(adj: Adjacency) -> dict[int, list[tuple[int, float]]]:
    out = {}
    for node in range(adj.n_nodes):
        nodes, weights = adj.neighbours(node)
        out[node] = sorted(zip(nodes.tolist(), np.round(weights, 5).tolist(), strict=True))
    return out


def from_scratch(g: KnowledgeGraph) -> Adjacency:
    cache = AdjacencyCache()
    import time

    return cache.get(g.state, now=time.time(), half_life=g.half_life, floor=g.floor,
                     writer_lock=g._wlock, max_age=g.weights_max_age)


def random_writes(g: KnowledgeGraph, rng: random.Random, n: int) -> None:
    ids: list[int] = []
    for _ in range(n):
        r = rng.random()
        if r < 0.35:
            g.mention(f"m{rng.randrange(60)}", [f"e{rng.randrange(40)}"
                                                for _ in range(rng.randrange(1, 4))])
        elif r < 0.6:
            ids.append(g.relate(f"e{rng.randrange(40)}", rng.choice(["calls", "contains"]),
                                f"e{rng.randrange(40)}", weight=rng.uniform(0.1, 1.0)))
        elif r < 0.7 and ids:
            g.invalidate(rng.choice(ids))
        elif r < 0.8:
            g.forget_memory(f"m{rng.randrange(60)}")
        else:
            g.hebbian([f"m{rng.randrange(60)}" for _ in range(3)], delta=rng.uniform(0.01, 0.5))
            if rng.random() < 0.5:
                g.flush()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_incremental_equals_full_rebuild(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    with KnowledgeGraph.open(tmp_path / "kg", flush_interval=None) as g:
        for _ in range(30):
            random_writes(g, rng, rng.randrange(1, 15))
            inc = g.adjacency()
            full = from_scratch(g)
            assert inc.n_nodes == full.n_nodes
            assert edges_of(inc) == edges_of(full)
            assert (inc.degree == full.degree).all()
            s = g.spread({"m1": 1.0, "m2": 0.5})
            assert all(0 <= a <= 1 for a in s.memories.values())
        stats = g.stats()
        assert stats["adjacency_delta_builds"] > 0  # the incremental path ran


def test_large_deltas_merge_into_the_main_csr(tmp_path: Path) -> None:
    with KnowledgeGraph.open(tmp_path / "kg", flush_interval=None) as g:
        g.mention("m0", ["e0"])
        g.adjacency()
        for i in range(1500):  # past the 1,024-edge merge threshold
            g.mention(f"m{i}", [f"e{i % 97}"])
            if i % 100 == 0:
                g.adjacency()
        adj = g.adjacency()
        assert g.stats()["adjacency_full_builds"] >= 2
        assert edges_of(adj) == edges_of(from_scratch(g))
        assert adj is g.adjacency()  # no write since: the cached snapshot


def test_a_snapshot_does_not_change_under_its_reader(tmp_path: Path) -> None:
    with KnowledgeGraph.open(tmp_path / "kg", flush_interval=None) as g:
        t = g.relate("a", "calls", "b", weight=0.5)
        g.mention("m", ["a"])
        before = g.adjacency()
        snap = edges_of(before)
        g.relate("a", "calls", "b", weight=0.2)  # reinforce: a changed weight
        g.invalidate(t)
        g.mention("m", ["c"])
        assert edges_of(before) == snap
        after = g.adjacency()
        assert after is not before
        a = after.node_of("e:a")
        assert a is not None and after.node_of("e:b") not in after.neighbours(a)[0].tolist()


def test_from_edges_and_node_of() -> None:
    keys = ["m:x", "e:y", "e:z"]
    adj = Adjacency.from_edges(np.array([0, 1]), np.array([1, 2]), np.array([1.0, 0.5]), keys,
                               np.array([0, 1, 1]))
    assert adj.node_of("e:y") == 1 and adj.node_of("e:q") is None
    assert list(adj.keys) == keys and adj.keys[-1] == "e:z" and len(adj.keys) == 3
    assert adj.degree.tolist() == [1, 2, 1]
    nodes, weights = adj.neighbours(1)
    assert sorted(zip(nodes.tolist(), weights.tolist(), strict=True)) == [(0, 1.0), (2, 0.5)]


def test_prepare_after_a_write_builds_what_the_next_query_reads(tmp_path: Path) -> None:
    # A conversation's write (and the Hebbian flusher) calls prepare: the adjacency and the
    # attractors a query has read are rebuilt then, so the next query rebuilds nothing and
    # reads what it would have built itself. A graph no query has read builds nothing.
    rng = random.Random(7)
    with KnowledgeGraph.open(tmp_path / "kg", flush_interval=None) as g:
        random_writes(g, rng, 20)
        g.prepare()
        assert g.state.cache.full_builds == 0 and g.attractor_refreshes == 0
        g.adjacency()
        g.attractors(5)
        for _ in range(10):
            random_writes(g, rng, rng.randrange(1, 6))
            g.prepare()
            builds = (g.state.cache.full_builds + g.state.cache.delta_builds,
                      g.attractor_refreshes)
            adj, top = g.adjacency(), g.attractors(5)
            assert builds == (g.state.cache.full_builds + g.state.cache.delta_builds,
                              g.attractor_refreshes)  # nothing rebuilt by the query
            assert edges_of(adj) == edges_of(from_scratch(g))
            g._attr = None  # what the query would have computed itself
            assert top == g.attractors(5)
