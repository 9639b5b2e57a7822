"""Spreading activation: known orders on hand-built graphs, hub damping, the kernel against a
plain-Python reference, and properties (activations in [0, 1], hops ≤ max_hops)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from soul.engines.resonance.graph.adjacency import Adjacency
from soul.engines.resonance.graph.kg import KnowledgeGraph, SpreadConfig, spread_nodes

ENTRY = 0.05  # the entry threshold a resonate phase would use for non-seed memories


@pytest.fixture
def graph(tmp_path: Path) -> KnowledgeGraph:
    g = KnowledgeGraph.open(tmp_path / "kg", flush_interval=None)
    yield g
    g.close()


def chain(g: KnowledgeGraph) -> None:
    # A -X- B -Y- C -Z- D: each entity mentioned by two memories.
    g.mention("A", ["X"])
    g.mention("B", ["X", "Y"])
    g.mention("C", ["Y", "Z"])
    g.mention("D", ["Z"])


def test_chain_each_memory_hop_scores(graph: KnowledgeGraph) -> None:
    chain(graph)
    s = graph.spread({"A": 1.0})
    m = s.memories
    assert m["A"] == 1.0
    assert m["B"] > m["C"] > m["D"]
    assert m["C"] > ENTRY and m["D"] > ENTRY  # two and three memory-hops out still enter
    assert s.hops == {"A": 0, "B": 2, "C": 4, "D": 6}
    assert set(s.entities) == {"X", "Y", "Z"}
    assert s.entities["X"] > s.entities["Y"] > s.entities["Z"]
    # the defaults' arithmetic (SpreadConfig's docstring): 0.8 per hop, 1/sqrt(2) out of X
    assert m["B"] == pytest.approx(0.8 * 0.8 / 2**0.5, rel=1e-5)
    assert m["C"] == pytest.approx(m["B"] * 0.8 * 0.8 / 2**0.5, rel=1e-5)


def test_the_seed_parameters_were_one_hop_expansion(graph: KnowledgeGraph) -> None:
    """The original's spread 0.5, decay 0.5, cutoff 0.02, max_hops 3 with its 0.1 entry
    threshold: B (one memory-hop) barely enters, C is never reached. Ours reach both."""
    chain(graph)
    old = graph.spread({"A": 1.0}, strength=0.5, decay=0.5, cutoff=0.02, max_hops=3,
                       hub_power=0.0)
    assert "C" not in old.memories
    assert old.memories["B"] == pytest.approx(0.125)
    new = graph.spread({"A": 1.0})
    assert new.memories["C"] > 0.1 > ENTRY


def test_hub_damping_keeps_a_hub_from_flooding(graph: KnowledgeGraph) -> None:
    """"I" is mentioned by 200 memories; A and B share the specific entity "pottery class".

    Undamped (mentions weight 1), every one of the 200 gets what B gets: the hub floods the
    result. Damped by 1/sqrt(degree) (the default), B is far ahead and the hub's memories
    stay under the entry threshold."""
    graph.mention("A", ["pottery class", "I"])
    graph.mention("B", ["pottery class"])
    for i in range(200):
        graph.mention(f"h{i}", ["I"])
    flat = graph.spread({"A": 1.0}, hub_power=0.0)
    hub = [flat.memories[f"h{i}"] for i in range(200)]
    assert min(hub) == pytest.approx(flat.memories["B"])
    assert sum(a >= ENTRY for a in hub) == 200
    damped = graph.spread({"A": 1.0})
    hub = [damped.memories.get(f"h{i}", 0.0) for i in range(200)]
    assert damped.memories["B"] > 5 * max(hub)
    assert max(hub) < ENTRY
    assert list(damped.memories_above(ENTRY)) == ["A", "B"]


def test_max_not_sum_and_seed_values_scale(graph: KnowledgeGraph) -> None:
    graph.mention("A", ["X", "Y"])
    graph.mention("B", ["X", "Y"])  # two paths A→B: the better one counts, not both
    graph.mention("C", ["X"])
    s = graph.spread({"A": 0.5})
    assert s.memories["A"] == 0.5
    assert s.memories["B"] == pytest.approx(s.memories["C"] * (3**0.5 / 2**0.5), rel=1e-5)
    assert graph.spread({"A": 0.5}, strength=0.5).memories["A"] == 0.25


def test_seeds_outside_the_graph_come_back_at_hop_zero(graph: KnowledgeGraph) -> None:
    chain(graph)
    s = graph.spread({"A": 0.9, "nowhere": 0.7})
    assert s.memories["nowhere"] == pytest.approx(0.7) and s.hops["nowhere"] == 0
    assert "nowhere" in s.memories_above(0.5)
    assert graph.spread({}).memories == {}


def test_triplets_and_hebbian_edges_carry_activation(graph: KnowledgeGraph) -> None:
    graph.mention("A", ["Field"])
    graph.mention("B", ["Store"])
    graph.relate("Field", "contains", "Store", weight=0.5)
    graph.hebbian(["A", "C"], delta=0.5)
    graph.flush()
    s = graph.spread({"A": 1.0})
    assert s.memories["C"] == pytest.approx(0.8 * 0.5, rel=1e-5)  # memory→memory, undamped
    # A → Field → Store → B; Field and Store have degree 2 (a mention and the triplet)
    assert s.memories["B"] == pytest.approx(0.8 * (0.8 * 0.5 / 2**0.5) * (0.8 / 2**0.5),
                                            rel=1e-5)


# -- the kernel against a plain-Python reference ------------------------------------------


def reference(n: int, edges: list[tuple[int, int, float]], entity: np.ndarray,
              seeds: dict[int, float], decay: float, cutoff: float, max_hops: int,
              hub_power: float) -> tuple[dict[int, float], dict[int, int]]:
    """Hop-limited max-product propagation, written the obvious way (float32 like the kernel)."""
    nbrs: dict[int, list[tuple[int, np.float32]]] = {i: [] for i in range(n)}
    for a, b, w in edges:
        nbrs[a].append((b, np.float32(w)))
        if a != b:
            nbrs[b].append((a, np.float32(w)))
    degree = {i: len(nbrs[i]) for i in range(n)}
    act = {s: np.float32(v) for s, v in seeds.items()}
    hops = dict.fromkeys(seeds, 0)
    frontier = dict(act)
    d, c, hp = np.float32(decay), np.float32(cutoff), np.float32(hub_power)
    for h in range(1, max_hops + 1):
        best: dict[int, np.float32] = {}
        for u, a in frontier.items():
            base = np.float32(a * d)
            if entity[u] and hp > 0 and degree[u] > 1:
                base = np.float32(base * np.float32(degree[u]) ** (-hp))
            for v, w in nbrs[u]:
                x = np.float32(base * w)
                if x >= c and x > act.get(v, 0) and x > best.get(v, 0):
                    best[v] = x
        frontier = {}
        for v, x in best.items():
            act[v] = x
            hops.setdefault(v, h)
            frontier[v] = x
        if not frontier:
            break
    return {k: float(v) for k, v in act.items()}, hops


@st.composite
def graphs(draw: st.DrawFn) -> tuple:
    n = draw(st.integers(2, 25))
    m = draw(st.integers(0, 60))
    edges = [(draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1)),
              draw(st.floats(0.0625, 1.0, width=32))) for _ in range(m)]
    entity = np.array([draw(st.booleans()) for _ in range(n)], np.uint8)
    seeds = draw(st.dictionaries(st.integers(0, n - 1), st.floats(0.0, 1.0, width=32),
                                 min_size=1, max_size=4))
    params = (draw(st.floats(0.125, 1.0, width=32)), draw(st.floats(0.0009765625, 0.25, width=32)),
              draw(st.integers(0, 7)), draw(st.sampled_from([0.0, 0.5, 1.0])))
    split = draw(st.integers(0, m))  # edges after `split` go to the delta
    return n, edges, entity, seeds, params, split


def adjacency_with_delta(n: int, edges: list, entity: np.ndarray, split: int) -> Adjacency:
    keys = [f"n{i}" for i in range(n)]
    main = edges[:split]
    arr = np.array(main, dtype=np.float64).reshape(-1, 3)
    adj = Adjacency.from_edges(arr[:, 0].astype(np.int32), arr[:, 1].astype(np.int32),
                               arr[:, 2], keys, entity)
    rest = edges[split:]
    src = [a for a, b, _ in rest] + [b for a, b, _ in rest if a != b]
    dst = [b for a, b, _ in rest] + [a for a, b, _ in rest if a != b]
    w = [x for _, _, x in rest] + [x for a, b, x in rest if a != b]
    order = np.argsort(np.array(src, np.int32), kind="stable")
    degree = np.zeros(n, np.int32)
    for a, b, _ in edges:
        degree[a] += 1
        if a != b:
            degree[b] += 1
    return Adjacency(adj.indptr, adj.indices, adj.weights, adj.keys,
                     np.array(src, np.int32)[order], np.array(dst, np.int32)[order],
                     np.array(w, np.float32)[order], degree=degree, entity=adj.entity,
                     index=adj.index)


@settings(max_examples=150, deadline=None)
@given(graphs())
def test_kernel_matches_reference_and_stays_bounded(case: tuple) -> None:
    n, edges, entity, seeds, (decay, cutoff, max_hops, hub_power), split = case
    adj = adjacency_with_delta(n, edges, entity, split)
    nodes = np.array(list(seeds), np.int32)
    vals = np.array(list(seeds.values()), np.float32)
    reached, act, hops = spread_nodes(adj, nodes, vals, decay=decay, cutoff=cutoff,
                                      max_hops=max_hops, hub_power=hub_power)
    assert len(set(reached.tolist())) == len(reached)
    assert ((act >= 0) & (act <= 1)).all()
    assert ((hops >= 0) & (hops <= max_hops)).all()
    want_act, want_hops = reference(n, edges, entity, seeds, decay, cutoff, max_hops, hub_power)
    got = dict(zip(reached.tolist(), act.tolist(), strict=True))
    assert got.keys() == want_act.keys()
    for k, v in want_act.items():
        assert got[k] == pytest.approx(v, rel=1e-5, abs=1e-7)
    assert dict(zip(reached.tolist(), hops.tolist(), strict=True)) == want_hops


def test_random_graph_activations_never_exceed_the_best_seed() -> None:
    rng = np.random.default_rng(7)
    n, m = 2000, 8000
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    adj = Adjacency.from_edges(src, dst, rng.random(m), [f"k{i}" for i in range(n)],
                               rng.integers(0, 2, n))
    seeds = rng.choice(n, 20, replace=False).astype(np.int32)
    vals = rng.uniform(0, 0.9, 20).astype(np.float32)
    cfg = SpreadConfig()
    _, act, hops = spread_nodes(adj, seeds, vals, decay=cfg.decay, cutoff=cfg.cutoff,
                                max_hops=cfg.max_hops, hub_power=cfg.hub_power)
    assert act.max() <= vals.max() + 1e-7
    assert hops.max() <= cfg.max_hops


@pytest.mark.parametrize("seed", range(15))
def test_reached_lookups_match_their_plain_definitions(graph: KnowledgeGraph, seed: int) -> None:
    # Resonance asks a Spread for the activation and hop of its candidates' nodes and for the
    # strongest memories it reached that are not candidates (issue 26: both as kernels over
    # the reached arrays); each must answer as the plain definition over those arrays does.
    import random

    rng = random.Random(seed)
    memories = [f"mem{i}" for i in range(rng.randint(2, 40))]
    entities = [f"Entity {i}" for i in range(rng.randint(1, 12))]
    for memory_id in memories:
        graph.mention(memory_id, rng.sample(entities, rng.randint(0, min(3, len(entities)))))
    reached_seeds = rng.sample(memories, 2)
    reached_values = [rng.uniform(0.1, 1.0) for _ in reached_seeds]
    reached = graph.spread(dict(zip(reached_seeds, reached_values, strict=True)),
                           decay=0.9, cutoff=0.01)
    adj = graph.adjacency()
    by_node = {n: (a, h) for n, a, h in zip(reached.nodes.tolist(), reached.activation.tolist(),
                                             reached.hop.tolist(), strict=True)}
    asked = [adj.node_of(f"m:{m}") for m in memories] + [adj.node_of(f"e:{entities[0].lower()}")]
    nodes = np.array([-1 if n is None else n for n in asked] + [-1, 10_000], np.int64)
    act, hop = reached.of_nodes(nodes)
    assert act.tolist() == [by_node.get(int(n), (0.0, -1))[0] if n >= 0 else 0.0 for n in nodes]
    assert hop.tolist() == [by_node.get(int(n), (0.0, -1))[1] if n >= 0 else -1 for n in nodes]

    known = frozenset(rng.sample(memories, rng.randint(0, len(memories))))
    known_nodes = np.array([adj.node_of(f"m:{m}") or -1 for m in known], np.int64)
    threshold, limit = rng.choice([0.0, 0.05, 0.3]), rng.choice([1, 3, 50])
    order = sorted(range(len(by_node)), key=lambda i: -reached.activation[i])  # stable
    expected = {}
    for i in order:
        key = graph.state.keys[int(reached.nodes[i])]
        if (reached.activation[i] >= threshold and key.startswith("m:")
                and key[2:] not in known and len(expected) < limit):
            expected[key[2:]] = float(reached.activation[i])
    # in order too: the joined memories are candidates in this order (ties: the earlier rank)
    got = reached.strongest_memories(threshold, limit, known, known_nodes)
    assert list(got.items()) == list(expected.items())
    assert list(reached.strongest_memories(threshold, limit, known).items()) == list(expected.items())

    # full resonance reads both in one kernel call (graph.reach, issue 26): the same answers
    seeds = dict(zip(reached_seeds, reached_values, strict=True))
    known_exact = np.array([-1 if (n := adj.node_of(f"m:{m}")) is None else n for m in known],
                           np.int64)  # every known memory's node (node 0 too)
    for candidates, names in ((nodes, None), (known_exact, known)):
        one = graph.reach(adj, seeds, candidates, threshold, limit, decay=0.9, cutoff=0.01)
        want_act, want_hop = reached.of_nodes(candidates)
        assert one.activation.tobytes() == want_act.tobytes()
        assert one.hops.tobytes() == want_hop.tobytes()
        assert one.reached == len(reached)
        if names is not None:
            assert [(m, a) for m, a, _ in one.strongest] == list(expected.items())
            assert [h for _, _, h in one.strongest] == [by_node[adj.node_of(f"m:{m}")][1]
                                                        for m, _, _ in one.strongest]


@pytest.mark.parametrize("seed", range(10))
def test_top_seeds_reach_as_the_seed_dict_of_the_best_candidates(seed: int) -> None:
    # full resonance hands its candidates' relevance and graph nodes to reach (TopSeeds,
    # issue 26), which picks the seeds in one kernel call: the Reach of the dict it built
    # before — the top `seeds` candidates by stable argsort of -relevance, those > 0, by
    # memory id — to the bit, seeds outside the graph (or past it) counted as before
    from soul.engines.resonance.graph.activation import TopSeeds, reach

    rng = np.random.default_rng(seed)
    n_mem, n_ent = 60, 15
    keys = [f"m:{i}" for i in range(n_mem)] + [f"e:{j}" for j in range(n_ent)]
    src = rng.integers(0, n_mem, 150)
    dst = rng.integers(n_mem, n_mem + n_ent, 150)
    entity = np.r_[np.zeros(n_mem), np.ones(n_ent)].astype(np.uint8)
    adj = Adjacency.from_edges(src, dst, rng.uniform(0.2, 1.0, 150), keys, entity)
    n = int(rng.integers(0, 70))
    memories = rng.choice(n_mem + 10, n, replace=False)  # past n_mem: not in the graph
    relevance = np.round(rng.uniform(-0.5, 1.5, n), 1)  # ties, negatives, past 1
    relevance[rng.random(n) < 0.1] = np.nan
    nodes = np.array([m if m < n_mem else -1 for m in memories], np.int64)
    if n:
        nodes[0] = len(keys) + 3  # a node newer than this adjacency
    cfg = SpreadConfig(strength=float(rng.choice([0.5, 1.0, 2.0])))
    top = int(rng.integers(0, 25))
    order = (-relevance).argsort(kind="stable")[:top]
    ids = [str(memories[i]) if nodes[i] < len(keys) else f"new{i}" for i in order.tolist()]
    seeds = {m: h for m, h in zip(ids, relevance[order].tolist(), strict=True) if h > 0}
    others = rng.permutation(np.r_[nodes, rng.integers(-1, len(keys), 5)])  # other candidates
    for threshold, limit, cands in ((0.0, 50, nodes), (0.05, 3, nodes), (0.0, 50, others)):
        want = reach(adj, seeds, cfg, keys, cands, threshold, limit)
        got = reach(adj, TopSeeds(relevance, nodes, top), cfg, keys, cands, threshold, limit)
        assert got.seeds == len(seeds) and got.reached == want.reached
        for a, b in zip(got[:5], want[:5], strict=True):
            assert a.tobytes() == b.tobytes()
