"""The knowledge graph: triplets, reinforcement, invalidation and "as of", mentions, Hebbian
links (queued, capped, decaying), attractors (cached), and recovery from its log."""

from __future__ import annotations

import math
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from soul.engines.resonance import ConfigError, StoreClosed
from soul.engines.resonance.graph.kg import PREDICATES, KnowledgeGraph, UnknownTriplet
from soul.engines.resonance.graph.kg_state import triplet_id

DAY = 86400.0


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "kg"


@pytest.fixture
def graph(path: Path) -> KnowledgeGraph:
    g = KnowledgeGraph.open(path, flush_interval=None)
    yield g
    g.close()


def test_relate_and_query_by_any_part(graph: KnowledgeGraph) -> None:
    a = graph.relate("Field", "calls", "Store.open", memory="m1", valid_from=100.0)
    b = graph.relate("Field", "contains", "HybridSearcher")
    c = graph.relate("Caroline", "likes", "pottery")  # a user-defined predicate
    # content ids: the (normalised) fact and its generation, the same in every process
    assert (a, b, c) == (triplet_id("e:field", "calls", "e:store.open", 0),
                         triplet_id("e:field", "contains", "e:hybridsearcher", 0),
                         triplet_id("e:caroline", "likes", "e:pottery", 0))
    assert len({a, b, c}) == 3 and all(0 < x < 2**63 for x in (a, b, c))
    t = graph.triplet(a)
    assert (t.subject, t.predicate, t.object, t.weight, t.valid_from, t.memory) == (
        "Field", "calls", "Store.open", 1.0, 100.0, "m1")
    assert t.invalidated_at is None
    assert [x.id for x in graph.triplets(subject="field")] == [a, b]  # case-insensitive
    assert [x.id for x in graph.triplets(obj="store.open")] == [a]
    assert [x.id for x in graph.triplets(predicate="likes")] == [c]
    assert [x.id for x in graph.triplets(subject="Field", predicate="contains")] == [b]
    assert graph.triplets(subject="nobody") == []
    assert len(graph.triplets()) == 3
    assert "calls" in PREDICATES


def test_relating_again_reinforces_sum_capped_at_one(graph: KnowledgeGraph) -> None:
    tid = graph.relate("Melanie", "paints", "sunsets", weight=0.4)
    assert graph.relate("melanie", "paints", "Sunsets", weight=0.4) == tid
    assert graph.triplet(tid).weight == pytest.approx(0.8)
    assert graph.relate("Melanie", "paints", "sunsets", weight=0.5) == tid
    assert graph.triplet(tid).weight == 1.0
    assert len(graph.triplets()) == 1


def test_invalidation_and_as_of(graph: KnowledgeGraph) -> None:
    old = graph.relate("Caroline", "lives_in", "Boston", valid_from=1000.0)
    graph.invalidate(old, at=2000.0)
    new = graph.relate("Caroline", "lives_in", "Denver", valid_from=2000.0)
    assert [t.object for t in graph.triplets(subject="Caroline")] == ["Denver"]
    assert [t.object for t in graph.triplets(subject="Caroline", as_of=1500.0)] == ["Boston"]
    assert [t.object for t in graph.triplets(subject="Caroline", as_of=2000.0)] == ["Denver"]
    assert graph.triplets(subject="Caroline", as_of=999.0) == []
    both = graph.triplets(subject="Caroline", include_invalid=True)
    assert [(t.id, t.invalidated_at) for t in both] == [(old, 2000.0), (new, None)]
    assert graph.triplet(old).valid_at(1999.0) and not graph.triplet(old).valid_at(2000.0)
    graph.invalidate(old, at=5000.0)  # already invalid: the first time stands
    assert graph.triplet(old).invalidated_at == 2000.0
    # relating an invalidated fact again starts a new triplet
    again = graph.relate("Caroline", "lives_in", "Boston")
    assert again not in (old, new)


def test_as_of_adjacency_and_spread(graph: KnowledgeGraph) -> None:
    graph.mention("A", ["Boston"])
    graph.mention("B", ["Denver"])
    t0 = time.time()  # the mentions hold from about now on
    t = graph.relate("Boston", "near", "Denver", valid_from=t0 - 100)
    graph.invalidate(t, at=t0 + 1000)
    assert "B" in graph.spread({"A": 1.0}).memories  # live: invalidated only in the future
    assert "B" in graph.spread({"A": 1.0}, as_of=t0 + 500).memories
    assert "B" not in graph.spread({"A": 1.0}, as_of=t0 + 1500).memories
    # the mentions did not exist "as of" before they were made
    assert graph.spread({"A": 1.0}, as_of=t0 - 50).memories == {"A": 1.0}
    adj = graph.adjacency(as_of=t0 + 500)
    assert graph.adjacency(as_of=t0 + 500) is adj  # the last as-of CSR is kept
    assert adj.node_of("e:boston") is not None and adj.node_of("e:nowhere") is None
    graph.invalidate(t, at=t0 - 10)  # already invalid (from t0 + 1000): unchanged
    graph.relate("Boston", "far", "Denver")
    assert graph.adjacency(as_of=t0 + 500) is not adj  # a write: rebuilt


def test_bad_input_is_refused_with_a_clear_error(graph: KnowledgeGraph) -> None:
    with pytest.raises(ConfigError, match="lowercase identifier"):
        graph.relate("a", "Calls Often", "b")
    with pytest.raises(ConfigError, match=r"weight 1.5"):
        graph.relate("a", "calls", "b", weight=1.5)
    with pytest.raises(ConfigError, match="subject"):
        graph.relate("  ", "calls", "b")
    with pytest.raises(UnknownTriplet, match="no triplet with id 42"):
        graph.invalidate(42)
    with pytest.raises(ConfigError, match="unknown option"):
        KnowledgeGraph.open(graph.path / "other", half_life=3)
    with pytest.raises(ConfigError, match="delta"):
        graph.hebbian(["a", "b"], delta=0)


def test_mentions_link_memories_and_entities(graph: KnowledgeGraph) -> None:
    graph.mention("m1", ["Caroline", "pottery class"])
    graph.mention("m2", ["caroline", "Melanie"])
    graph.mention("m1", ["CAROLINE"])  # already linked: nothing new
    assert graph.entities_of("m1") == ("Caroline", "pottery class")
    assert graph.entities_of("m2") == ("Caroline", "Melanie")  # the first display form
    assert graph.memories_of("caroline") == ("m1", "m2")
    assert graph.memories_of("nobody") == ()
    assert graph.stats()["mention_edges"] == 4
    graph.forget_memory("m1")
    assert graph.entities_of("m1") == ()
    assert graph.memories_of("Caroline") == ("m2",)
    assert graph.memories_of("pottery class") == ()
    assert "m1" not in graph.spread({"m2": 1.0}).memories
    graph.forget_memory("never-seen")  # nothing to drop, nothing logged


def test_forget_memory_drops_its_hebbian_links_but_keeps_its_facts(
        graph: KnowledgeGraph) -> None:
    fact = graph.relate("Caroline", "likes", "pottery", memory="m1")
    graph.mention("m1", ["Caroline"])
    graph.hebbian(["m1", "m2"])
    graph.flush()
    assert len(graph.triplets(predicate="relates_to")) == 1
    graph.forget_memory("m1")
    assert graph.triplets(predicate="relates_to") == []
    assert graph.triplet(fact).invalidated_at is None


def test_hebbian_is_queued_until_flush_and_capped(graph: KnowledgeGraph) -> None:
    graph.hebbian(["a", "b", "c", "d", "e", "f", "g"], delta=0.3)  # first five: 10 pairs
    assert graph.triplets(predicate="relates_to") == []  # nothing applied yet
    assert graph.stats()["hebbian_queued"] == 1
    graph.flush()
    links = graph.triplets(predicate="relates_to")
    assert len(links) == 10
    assert {t.subject for t in links} | {t.object for t in links} == {
        "m:a", "m:b", "m:c", "m:d", "m:e"}
    for _ in range(5):
        graph.hebbian(["b", "a"], delta=0.3)  # same pair, either order
    graph.flush()
    ab = graph.triplets(subject="m:a", obj="m:b", predicate="relates_to")
    assert len(ab) == 1 and ab[0].weight == pytest.approx(1.0, abs=1e-6)  # capped
    ac = graph.triplets(subject="m:a", obj="m:c")[0]
    assert ac.weight == pytest.approx(0.3, rel=1e-4)
    graph.hebbian(["a"])  # no pair: nothing queued
    assert graph.stats()["hebbian_queued"] == 0


def test_hebbian_background_flush(path: Path) -> None:
    with KnowledgeGraph.open(path, flush_interval=0.02) as g:
        g.hebbian(["x", "y"])
        deadline = time.monotonic() + 5
        while not g.triplets(predicate="relates_to") and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(g.triplets(predicate="relates_to")) == 1


def test_hebbian_weights_decay_and_drop_below_the_floor(path: Path) -> None:
    with KnowledgeGraph.open(path, flush_interval=None, half_life_days=10) as g:
        g.hebbian(["a", "b"], delta=0.4)
        g.flush()
        now = time.time()
        (t,) = g.triplets(predicate="relates_to", as_of=now + 10 * DAY)
        assert t.weight == pytest.approx(0.2, rel=1e-3)  # one half-life later
        (t,) = g.triplets(predicate="relates_to", as_of=now + 20 * DAY)
        assert t.weight == pytest.approx(0.1, rel=1e-3)
        # 0.4 / 2**6 = 0.00625 < floor 0.01: reads as absent, then decay() reclaims it
        assert g.triplets(predicate="relates_to", as_of=now + 60 * DAY) == []
        assert g.decay(now + 20 * DAY) == 0
        assert g.decay(now + 60 * DAY) == 1
        assert g.triplets(predicate="relates_to", include_invalid=True) == []
        g.hebbian(["a", "b"], delta=0.1)  # a fresh link after the old one was dropped
        g.flush()
        assert [t.weight for t in g.triplets(predicate="relates_to")] == [
            pytest.approx(0.1, rel=1e-4)]


def test_hebbian_decay_reaches_the_adjacency(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with KnowledgeGraph.open(path, flush_interval=None, half_life_days=10,
                             weights_max_age=60.0) as g:
        g.hebbian(["a", "b"], delta=0.8)
        g.flush()
        before = g.spread({"a": 1.0}).memories["b"]
        real = time.time
        monkeypatch.setattr(time, "time", lambda: real() + 10 * DAY)
        after = g.spread({"a": 1.0}).memories["b"]  # the cached CSR is too old: refreshed
        assert after == pytest.approx(before / 2, rel=1e-3)


def test_attractors_are_cached_and_refreshed_on_write_and_ttl(path: Path) -> None:
    with KnowledgeGraph.open(path, flush_interval=None, attractor_ttl=0.2) as g:
        for i in range(7):
            g.mention(f"m{i}", ["Caroline"] + (["Melanie"] if i < 3 else []))
        g.mention("m9", ["Boston"])
        top = g.attractors(2)
        assert [name for name, _ in top] == ["Caroline", "Melanie"]
        assert top[0][1] == pytest.approx(min(math.log2(1 + 7) / 4, 1))
        refreshes = g.stats()["attractor_refreshes"]
        for _ in range(50):
            assert g.attractors(2) == top  # served from the cache
        assert g.stats()["attractor_refreshes"] == refreshes
        for i in range(5):
            g.mention(f"b{i}", ["Boston"])  # a write: the next call recomputes
        assert [name for name, _ in g.attractors(3)] == ["Caroline", "Boston", "Melanie"]
        assert g.stats()["attractor_refreshes"] == refreshes + 1
        time.sleep(0.25)  # TTL expired with no write: recomputed once
        g.attractors(3)
        assert g.stats()["attractor_refreshes"] == refreshes + 2
        assert g.attractors(1)[0][0] == "Caroline"
        g.attractors(100)  # more than there are entities: cached all the same
        before = g.stats()["attractor_refreshes"]
        assert len(g.attractors(100)) == 3 and g.stats()["attractor_refreshes"] == before
        for i in range(40):
            g.mention(f"c{i}", ["Caroline"])
        assert g.attractors(1)[0][1] == 1.0  # log2(48)/4 > 1: capped


def test_everything_survives_reopening(path: Path) -> None:
    with KnowledgeGraph.open(path, flush_interval=None, durability="fsync") as g:
        a = g.relate("Caroline", "lives_in", "Boston", valid_from=10.0, memory="m1")
        g.relate("Caroline", "likes", "pottery", weight=0.3)
        g.relate("caroline", "likes", "Pottery", weight=0.3)  # reinforced to 0.6
        g.invalidate(a, at=20.0)
        g.mention("m1", ["Caroline", "Boston"])
        g.mention("m2", ["Caroline"])
        g.mention("m3", ["Boston"])
        g.forget_memory("m3")
        g.hebbian(["m1", "m2"], delta=0.2)
        g.hebbian(["m1", "m2", "m4"], delta=0.2)
        g.flush()
        g.hebbian(["m2", "m4"], delta=0.5)  # queued at close: close() flushes it
        g.close()
        before = (g.triplets(include_invalid=True), g.entities_of("m1"),
                  g.memories_of("Boston"), g.spread({"m1": 1.0}).memories)
    with KnowledgeGraph.open(path, flush_interval=None) as g:
        after = (g.triplets(include_invalid=True), g.entities_of("m1"),
                 g.memories_of("Boston"), g.spread({"m1": 1.0}).memories)
        assert [replace(t, weight=0) for t in after[0]] == [
            replace(t, weight=0) for t in before[0]]
        assert [t.weight for t in after[0]] == pytest.approx([t.weight for t in before[0]])
        assert after[1:3] == before[1:3]
        assert after[3] == pytest.approx(before[3])
        weights = {(t.subject, t.object): t.weight for t in g.triplets(predicate="relates_to")}
        assert weights[("m:m1", "m:m2")] == pytest.approx(0.4, rel=1e-4)
        assert weights[("m:m2", "m:m4")] == pytest.approx(0.7, rel=1e-4)
        assert g.triplet(a).invalidated_at == 20.0
        assert g.stats()["recovery_issues"] == []
        assert g.stats()["recovered_entries"] == 10  # one entry per write, one per flush
        new = g.relate("x", "calls", "y")
        assert new == triplet_id("e:x", "calls", "e:y", 0)
        # the invalidated fact stated again: its next generation, a new id
        again = g.relate("Caroline", "lives_in", "Boston")
        assert again == triplet_id("e:caroline", "lives_in", "e:boston", 1) != a
    with KnowledgeGraph.open(path, flush_interval=None) as g:
        assert g.triplet(new).subject == "x"


def test_closed_graph_refuses_writes(path: Path) -> None:
    g = KnowledgeGraph.open(path, flush_interval=None)
    g.close()
    g.close()  # idempotent
    with pytest.raises(StoreClosed):
        g.relate("a", "calls", "b")


def test_readers_do_not_wait_for_writers(graph: KnowledgeGraph) -> None:
    """Readers run while a writer thread writes: no errors, no torn reads."""
    for i in range(50):
        graph.mention(f"seed{i}", ["hub", f"e{i}"])
    stop = threading.Event()
    errors: list[BaseException] = []

    def write() -> None:
        try:
            i = 0
            while not stop.is_set():
                graph.mention(f"w{i}", [f"e{i % 50}", f"x{i}"])
                graph.relate(f"x{i}", "relates_to", f"e{i % 7}")
                graph.hebbian([f"w{i}", f"seed{i % 50}"])
                if i % 10 == 0:
                    graph.flush()
                i += 1
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        for _ in range(300):
            s = graph.spread({"seed0": 1.0, "seed1": 0.5})
            assert all(0 <= a <= 1 for a in s.memories.values())
            graph.triplets(subject="hub")
            graph.memories_of("e3")
            graph.attractors(5)
    finally:
        stop.set()
        writer.join()
    assert not errors


def test_public_names() -> None:
    from soul.engines.resonance.graph import kg

    assert set(kg.__all__) == {"PREDICATES", "Adjacency", "KnowledgeGraph", "Spread",
                               "SpreadConfig", "Triplet", "UnknownTriplet", "spread_nodes"}
    assert kg.SpreadConfig() == kg.SpreadConfig(strength=1.0, decay=0.8, max_hops=6,
                                                cutoff=0.01, hub_power=0.5)


@pytest.mark.parametrize("seed", range(12))
def test_topic_shares_sum_each_memorys_topics_in_its_mention_order(graph: KnowledgeGraph,
                                                                   seed: int) -> None:
    # Session priming weighs a memory by the session's topics among its entities (issue 26:
    # looked up from the topics' side when they hold fewer memories); the share must be the
    # sum over the memory's entities in its mention order, to the last bit, either way.
    import random

    rng = random.Random(seed)
    names = [f"Entity {i}" for i in range(12)]
    memories = [f"m{i}" for i in range(rng.randint(1, 40))]
    for memory_id in memories:
        graph.mention(memory_id, rng.sample(names, rng.randint(0, 6)))
    topics = {name: rng.choice([0.1, 0.3, 1 / 3, 0.7, 1.0, 0.05]) for name in
              rng.sample(names, rng.randint(1, 10 if seed % 2 else 3))}
    asked = rng.sample([*memories, "unknown"], rng.randint(1, len(memories) + 1))
    expected = [min(1.0, sum(topics.get(e, 0.0) for e in graph.entities_of(m))) for m in asked]
    assert graph.topic_shares(asked, topics) == expected
