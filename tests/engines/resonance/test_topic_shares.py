"""Session priming's topic shares: one kernel over each memory's mentions laid end to end
(`kg_read.MentionRows`, caught up with the memories a write changed) gives what the Python
sum over each memory's mention dict gave, bit for bit, after any interleaving of writes."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from word_embedder import WordEmbedder

from soul.engines.resonance import Field
from soul.engines.resonance.graph import kg_read
from soul.engines.resonance.graph.kg import KnowledgeGraph
from soul.engines.resonance.graph.kg_state import entity_key
from soul.engines.resonance.resonate import phases
from soul.engines.resonance.resonate.phases import Pool

NAMES = [f"Entity {i}" for i in range(10)]
WEIGHTS = [0.1, 0.3, 1 / 3, 0.7, 1.0, 0.05, 0.45, 0.2]


def reference(graph: KnowledgeGraph, memory_ids: list[str],
              topics: Mapping[str, float]) -> list[float]:
    """The Python sum topic_shares was before the kernel: per memory, its mention dict's
    entities in order, each topic's weight added to 0 (an entity no topic adds 0)."""
    st = graph.state
    display, mentions = st.display, st.mentions
    by_node: dict[int, float] = {}
    for name, weight in topics.items():
        n = st.index.get(entity_key(name)[0])
        if n is None or display[n] != name:
            by_node = {}
            break
        by_node[n] = weight
    if len(by_node) != len(topics):
        by_node = {n: w for n, name in enumerate(display) if (w := topics.get(name)) is not None}
    return [min(1.0, sum(by_node.get(e, 0) for e in mentions.get(m, ()))) for m in memory_ids]


def bits(values: list[float]) -> list[str]:
    return [float(v).hex() for v in values]


# one write or read of a conversation's graph: mentions of a memory (new or more of its
# entities), a memory forgotten, a memory node made by a relation only, the writer's
# after-write catch-up, or a query with some topics (a name no entity has, sometimes)
_STEP = st.one_of(
    st.tuples(st.just("mention"), st.integers(0, 8), st.lists(st.sampled_from(NAMES), max_size=6)),
    st.tuples(st.just("forget"), st.integers(0, 8), st.just([])),
    st.tuples(st.just("relate"), st.integers(0, 10), st.just([])),
    st.tuples(st.just("prepare"), st.just(0), st.just([])),
    st.tuples(st.just("query"), st.integers(0, 2**32), st.just([])),
)


@settings(max_examples=120, deadline=None)
@given(st.lists(_STEP, max_size=60), st.booleans())
def test_topic_shares_are_the_mention_order_sum_after_any_interleaving_of_writes(
        steps: list, tight: bool) -> None:
    slack = kg_read._SLACK
    kg_read._SLACK = 0 if tight else slack  # tight: the table is rebuilt whenever it wastes
    try:
        with tempfile.TemporaryDirectory() as tmp:
            graph = KnowledgeGraph.open(Path(tmp) / "kg", flush_interval=None)
            try:
                _run(graph, steps)
            finally:
                graph.close()
    finally:
        kg_read._SLACK = slack


def _run(graph: KnowledgeGraph, steps: list) -> None:
    for what, n, names in steps:
        if what == "mention":
            graph.mention(f"m{n}", names)
        elif what == "forget":
            graph.forget_memory(f"m{n}")
        elif what == "relate":
            graph.relate(f"m:m{n}", "relates_to", f"m:m{(n * 7) % 11}")
        elif what == "prepare":
            graph.prepare()
        else:
            rng = np.random.default_rng(n)
            chosen = rng.choice([*NAMES, "nobody at all"], int(rng.integers(1, 8)), replace=False)
            topics = {str(name): float(rng.choice(WEIGHTS)) for name in chosen}
            if n % 3:  # most sessions' topics are entities the graph has
                topics.pop("nobody at all", None)
            asked = [f"m{i}" for i in rng.integers(0, 12, int(rng.integers(0, 30)))]
            assert bits(graph.topic_shares(asked, topics)) == bits(reference(graph, asked, topics))
            index = graph.state.index
            nodes = np.array([index.get("m:" + m, -1) for m in asked], np.int64)
            got = graph.topic_shares_of(nodes, topics)
            assert got.dtype == np.float64 and bits(got.tolist()) == bits(
                reference(graph, asked, topics))


def test_a_refreshed_graph_is_read_from_its_new_state(tmp_path: Path) -> None:
    # another writer's mentions reach a reader on refresh, which swaps its state whole:
    # the table built over the old state must not answer for the new one
    writer = KnowledgeGraph.open(tmp_path / "kg", flush_interval=None)
    reader = KnowledgeGraph.open(tmp_path / "kg", flush_interval=None, read_only=True)
    try:
        writer.mention("a", ["Entity 1", "Entity 2"])
        reader.refresh()
        topics = {"Entity 2": 0.4, "Entity 3": 0.5}
        assert reader.topic_shares(["a", "b"], topics) == [0.4, 0.0]
        writer.mention("b", ["Entity 3", "Entity 2"])
        writer.mention("a", ["Entity 3"])
        assert reader.topic_shares(["a", "b"], topics) == [0.4, 0.0]  # not refreshed yet
        reader.refresh()
        want = reference(reader, ["a", "b"], topics)
        assert reader.topic_shares(["a", "b"], topics) == want == [0.4 + 0.5, 0.5 + 0.4]
    finally:
        reader.close()
        writer.close()


def test_session_priming_multiplies_by_the_topic_share_as_python_did(tmp_path: Path) -> None:
    # the priming factor is boost (seen recently) x (1 + topic_boost x share), computed as
    # an array now: the same bits as the per-candidate Python arithmetic
    field = Field.open(tmp_path / "f", WordEmbedder(), dedup_threshold=None)
    try:
        texts = ["Caroline paints pottery with Melanie", "Melanie runs marathons in Boston",
                 "Caroline moved to Boston for the pottery school", "Boston has a pottery fair",
                 "Melanie and Caroline met at the pottery fair in Boston"]
        ids = [field.remember(text) for text in texts]
        graph = field.association.graph
        for memory_id, names in zip(ids, [["Caroline", "Melanie", "pottery"],
                                          ["Melanie", "Boston"], ["Caroline", "Boston", "pottery"],
                                          ["Boston", "pottery"], ["Melanie", "Caroline", "Boston"]],
                                    strict=True):
            graph.mention(memory_id, names)
        field.primer.observe("s", [ids[1]], ["Boston", "Caroline", "pottery", "Boston"])
        topics = field.primer.topics("s")
        cfg = field.resonance
        rows = np.array([field.store.state.rows[m] for m in reversed(ids)], np.int64)
        n = len(rows)
        pool = Pool(rows, np.ones(n), np.zeros(n), np.zeros(n, np.int64), np.full(n, 0.5), {})
        facts: dict = {}
        phases.prime(cfg, field.association.sources, pool, "s", facts)
        shares = reference(graph, list(reversed(ids)), topics)
        want = [(cfg.priming_boost if m == ids[1] else 1.0) * (1.0 + cfg.topic_boost * share)
                for m, share in zip(reversed(ids), shares, strict=True)]
        assert bits(pool.parts["priming"].tolist()) == bits(want)
        assert bits(pool.score.tolist()) == bits([0.5 * w for w in want])
        assert facts["priming"]["boosted"] == sum(1 for w in want if w > 1.0) >= 4
    finally:
        field.close()


@pytest.mark.parametrize("seed", range(4))
def test_a_memory_mentioned_again_and_again_keeps_the_table_bounded(seed: int) -> None:
    # each change of a memory's mentions writes its list anew at the end of the table: the
    # waste is reclaimed by a rebuild once it outgrows the live part
    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory() as tmp:
        graph = KnowledgeGraph.open(Path(tmp) / "kg", flush_interval=None)
        try:
            topics = {"Entity 1": 0.3, "Entity 4": 0.7}
            for i in range(3000):
                graph.mention(f"m{i % 7}", [NAMES[int(x)] for x in rng.integers(0, 10, 3)])
                if i % 5 == 0:
                    graph.forget_memory(f"m{int(rng.integers(0, 7))}")
                asked = [f"m{j}" for j in range(8)]
                assert bits(graph.topic_shares(asked, topics)) == bits(
                    reference(graph, asked, topics))
            rows = graph._mention_rows
            assert rows._used <= 2 * rows._live + kg_read._SLACK + 30
        finally:
            graph.close()


def test_topic_shares_read_while_a_writer_mentions_and_forgets(tmp_path: Path) -> None:
    # readers take no graph lock for their own work: a query meanwhile sees each memory's
    # mentions before or after a write, never a table half caught up, and no error
    import threading

    graph = KnowledgeGraph.open(tmp_path / "kg", flush_interval=None)
    topics = {"Entity 1": 0.25, "Entity 2": 0.5, "Entity 7": 0.125}
    asked = [f"m{i}" for i in range(20)]
    graph.mention("m0", ["Entity 1"])
    graph.topic_shares(asked, topics)  # the table is built: writes are marked from here
    stop, errors = threading.Event(), []

    def write() -> None:
        rng = np.random.default_rng(5)
        try:
            while not stop.is_set():
                m = f"m{int(rng.integers(0, 20))}"
                if rng.random() < 0.2:
                    graph.forget_memory(m)
                else:
                    graph.mention(m, [NAMES[int(x)] for x in rng.integers(0, 10, 3)])
                if rng.random() < 0.3:
                    graph.prepare()
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        possible = {0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875}
        for _ in range(300):
            assert set(graph.topic_shares(asked, topics)) <= possible
    finally:
        stop.set()
        writer.join()
        try:
            assert not errors
            assert bits(graph.topic_shares(asked, topics)) == bits(reference(graph, asked, topics))
        finally:
            graph.close()
