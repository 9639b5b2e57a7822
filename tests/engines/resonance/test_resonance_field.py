"""The Field API: remember (gate, merge), remember_many, recall modes, forget, strengthen,
stats, pending re-embedding, index persistence, check — with a small deterministic embedder."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from word_embedder import WordEmbedder

import soul.engines.resonance as resonance
from soul.engines.resonance import (
    ConfigError,
    Field,
    Hit,
    Kind,
    QualityGateRefused,
    UnknownMemory,
)

FACTS = [
    "Caroline went to the LGBTQ support group on Tuesday",
    "Melanie painted a sunrise over the lake last year",
    "The user prefers tea over coffee in the morning",
    "Deploys to production happen every Thursday afternoon",
    "The cat knocked the vase off the kitchen table",
]


@pytest.fixture
def field(tmp_path: Path) -> Iterator[Field]:
    with Field.open(tmp_path / "f", WordEmbedder()) as f:
        yield f


def test_exports_match_the_docs() -> None:
    assert {"Field", "Hit", "Memory", "Kind", "Store", "ResonanceError"} <= set(resonance.__all__)
    assert all(hasattr(resonance, name) for name in resonance.__all__)


def test_remember_get_and_reopen(tmp_path: Path) -> None:
    with Field.open(tmp_path, WordEmbedder()) as f:
        mid = f.remember(FACTS[2], kind="preference", tags=["user", "drinks"], realm="home",
                         source="user", confidence=0.9, meta={"turn": 3})
        m = f.get(mid)
        assert m.kind is Kind.PREFERENCE and m.tags == ("user", "drinks") and m.realm == "home"
        assert m.confidence.mu == 0.9 and m.meta == {"turn": 3} and m.content == FACTS[2]
        assert m.embedding.shape == (64,) and abs(np.linalg.norm(m.embedding) - 1) < 1e-5
    with Field.open(tmp_path, WordEmbedder()) as f:
        assert f.get(mid).meta == {"turn": 3} and len(f) == 1


def test_the_gate_refuses_short_text(field: Field) -> None:
    with pytest.raises(QualityGateRefused, match="too short"):
        field.remember("hi there")
    assert len(field) == 0


def test_near_duplicates_are_merged_as_reinforcement(field: Field) -> None:
    first = field.remember(FACTS[0])
    again = field.remember("caroline went to the LGBTQ support group on tuesday!")
    same_text = field.remember("  " + FACTS[0].upper() + " ")
    assert again == first == same_text and len(field) == 1
    m = field.get(first)
    assert m.confidence.n == 2 and m.confidence.mu > 0.7 and m.access_count == 2
    other = field.remember(FACTS[1])
    assert other != first and len(field) == 2


def test_dedup_can_be_turned_off(tmp_path: Path) -> None:
    with Field.open(tmp_path, WordEmbedder(), dedup_threshold=None) as f:
        a = f.remember(FACTS[0])
        b = f.remember(FACTS[0] + " indeed")
        assert a != b and len(f) == 2


def test_remember_many_batches_gates_merges_and_reports_progress(
    field: Field, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[tuple[int, int]] = []
    items = [*FACTS, "short", {"text": FACTS[3], "kind": "wisdom"},
             {"text": "A memory with its own vector here", "embedding": np.ones(64)}]
    with caplog.at_level(logging.INFO, logger="soul.engines.resonance"):
        ids = field.remember_many(items, progress=lambda d, t: seen.append((d, t)))
    assert ids[5] is None and "too short" in caplog.text
    assert ids[6] == ids[3]  # duplicate within the batch merged into the first
    assert len(set(filter(None, ids))) == 6 == len(field)
    assert seen[-1] == (8, 8)
    np.testing.assert_allclose(field.get(ids[7]).embedding, np.full(64, 1 / 8), rtol=1e-5)


def test_recall_modes_and_hits(field: Field) -> None:
    ids = field.remember_many(FACTS)
    for mode in ("hybrid", "semantic", "keyword"):
        hits = field.recall("what did Melanie paint over the lake", k=3, mode=mode)
        assert hits and isinstance(hits[0], Hit), mode
        assert hits[0].id == ids[1] and hits[0].text == FACTS[1], mode
        assert hits[0].kind == "episode" and hits == sorted(hits, key=lambda h: -h.score)
    comp = field.recall("Melanie painted", k=1)[0].components
    assert {"semantic", "keyword", "tag", "confidence"} <= set(comp)
    with pytest.raises(ConfigError):
        field.recall("x", mode="fuzzy")  # type: ignore[arg-type]
    assert field.get(ids[1]).access_count >= 4  # recalls are logged as accesses


def test_tags_boost_but_do_not_filter(field: Field) -> None:
    a = field.remember("the project deadline is next Friday", tags=["work"])
    b = field.remember("the party deadline is next Friday evening", tags=["home"])
    field.config = dataclasses.replace(field.config, touch_on_recall=False)  # same confidences
    plain = field.recall("deadline next Friday", k=2)
    boosted = field.recall("deadline next Friday", k=2, tags=["home"])
    assert {h.id for h in plain} == {h.id for h in boosted} == {a, b}
    score = {h.id: h for h in plain}
    hit_b = next(h for h in boosted if h.id == b)
    assert hit_b.components["tag"] == 1.0 and hit_b.score > score[b].score
    assert next(h for h in boosted if h.id == a).score == pytest.approx(score[a].score)


def test_forget_strengthen_weaken(field: Field) -> None:
    ids = field.remember_many(FACTS)
    field.recall("cat vase", k=1)  # builds the indexes, so forget must update them
    field.forget(ids[4])
    assert ids[4] not in field and all(h.id != ids[4] for h in field.recall("cat vase kitchen"))
    with pytest.raises(UnknownMemory):
        field.get(ids[4])
    with pytest.raises(UnknownMemory):
        field.forget(ids[4])
    up = field.strengthen(ids[0])
    down = field.weaken(ids[1])
    assert up.mu > 0.7 > down.mu and up.n == down.n == 1
    again = field.remember(FACTS[4])  # the forgotten text may come back as a new memory
    assert again != ids[4]


def test_zero_vector_fallbacks_are_flagged_and_reembedded(tmp_path: Path) -> None:
    emb = WordEmbedder()
    with Field.open(tmp_path, emb) as f:
        mid = f.remember("FAIL to embed this sentence today")
        assert f.get(mid).pending_embedding and f.stats()["pending_embeddings"] == 1
        assert f.recall("embed sentence", mode="keyword")[0].id == mid
        f.store.state.text[f.store.state.row_of(mid)] = "now it embeds this sentence"
        assert f.reembed_pending() == 1
        assert not f.get(mid).pending_embedding
        assert f.recall("embeds sentence", mode="semantic")[0].id == mid
    with Field.open(tmp_path, emb) as f:
        assert not f.get(mid).pending_embedding


def test_vector_index_is_persisted_and_rebuilt_when_stale(tmp_path: Path) -> None:
    with Field.open(tmp_path, WordEmbedder()) as f:
        f.remember_many(FACTS)
        f.recall("tea coffee", mode="semantic")
    saved = tmp_path / "index" / "vectors.hnsw"
    assert saved.exists()
    with Field.open(tmp_path, WordEmbedder(), touch_on_recall=False) as f:
        assert f.recall("tea coffee", k=1, mode="semantic")[0].text == FACTS[2]
        f.remember("a brand new memory about tea leaves")
    with Field.open(tmp_path, WordEmbedder(), touch_on_recall=False) as f:
        hits = f.recall("tea leaves", k=2, mode="semantic")  # stale stamp: rebuilt
        assert hits[0].text == "a brand new memory about tea leaves"
    (tmp_path / "index" / "vectors.hnsw.meta.json").unlink()
    with Field.open(tmp_path, WordEmbedder()) as f:
        assert len(f.recall("tea", mode="semantic")) == 6


def test_stats_and_check(field: Field) -> None:
    field.remember_many([*FACTS[:3], {"text": FACTS[3], "kind": "belief"}])
    stats = field.stats()
    assert stats["memories"] == 4 and stats["kinds"] == {"episode": 3, "belief": 1}
    assert stats["tiers"]["hot"] == 4 and stats["durability"] == "batch"
    assert Field.check(field.path).ok


def test_unknown_options_are_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown Field option.*durabilty.*known:.*durability"):
        Field.open(tmp_path, WordEmbedder(), durabilty="fsync")
    with Field.open(tmp_path / "x", WordEmbedder()) as f, pytest.raises(
        ConfigError, match="unknown memory kind"
    ):
        f.remember("long enough text", kind="mood")


def test_rrf_fusion_option(tmp_path: Path) -> None:
    with Field.open(tmp_path, WordEmbedder(), method="rrf") as f:
        f.remember_many(FACTS)
        assert f.recall("Thursday deploys", k=1)[0].text == FACTS[3]


def test_recall_between_writes_ranks_as_a_field_written_at_once(tmp_path: Path) -> None:
    # A conversation recalls, then writes one memory, then recalls again. Once a recall has
    # built the indexes, each write catches them up before it returns (in the writer's
    # thread), so the next recall inserts nothing. The indexes so kept answer byte for byte
    # as those of a field that took the same memories at once and recalled only at the end.
    rng = np.random.default_rng(5)
    words = [f"w{i}" for i in range(40)] + ["tea", "lake", "cat", "deploy", "sunrise", "group"]
    texts = [" ".join(rng.choice(words, size=int(rng.integers(4, 10)))) for _ in range(40)]
    queries = [" ".join(rng.choice(words, size=3)) for _ in range(6)]
    opts = {"touch_on_recall": False, "dedup_threshold": None}
    with Field.open(tmp_path / "talk", WordEmbedder(), **opts) as talk, \
            Field.open(tmp_path / "once", WordEmbedder(), **opts) as once:
        talk.remember(texts[0])
        for text in texts[1:]:
            talk.recall(queries[0], k=3)
            talk.remember(text)
            assert talk.indexes.stats() == {"vector_index": len(talk), "keyword_index": len(talk)}
        once.remember_many(texts)
        assert once.indexes.stats() == {"vector_index": None, "keyword_index": None}
        for query in queries:
            a, b = talk.recall(query, k=8), once.recall(query, k=8)
            assert [h.text for h in a] == [h.text for h in b]
            assert [h.score for h in a] == pytest.approx([h.score for h in b], rel=1e-6)
            ka, kb = (f.indexes.keyword().search(query, 20, range(40)) for f in (talk, once))
            for x, y in ((ka.ids, kb.ids), (ka.scores, kb.scores),
                         (ka.extra_scores, kb.extra_scores)):
                assert x.tobytes() == y.tobytes()
            vector = talk.indexes.vector()._vecs[0] + once.indexes.vector()._vecs[1]
            va, vb = (f.indexes.vector().search(vector, 10) for f in (talk, once))
            assert va[0].tolist() == vb[0].tolist() and va[1].tobytes() == vb[1].tobytes()
