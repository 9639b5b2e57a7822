"""The cortical index and themes as optional tools over a live Field (themes/over_field.py)."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from word_embedder import WordEmbedder

from soul.engines.resonance import Field
from soul.engines.resonance.errors import ConfigError
from soul.engines.resonance.themes import FieldCortical, FieldThemes

TOPICS = {
    "garden": ["tomato", "basil", "compost", "seedling", "trowel", "greenhouse", "soil", "watering"],
    "music": ["cello", "violin", "rehearsal", "orchestra", "sonata", "conductor", "tempo", "bow"],
    "sailing": ["harbour", "mast", "jib", "tide", "anchor", "keel", "regatta", "dinghy"],
    "kitchen": ["risotto", "parmesan", "saucepan", "simmer", "oven", "recipe", "garlic", "butter"],
}


def _texts(per_topic: int = 40, seed: int = 0) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    out = []
    for topic, words in TOPICS.items():
        for i in range(per_topic):
            picked = rng.sample(words, 5)
            out.append((topic, f"note {topic} {i}: " + " ".join(picked) + f" entry{seed}x{i}{topic}"))
    return out


@pytest.fixture
def field(tmp_path: Path):  # type: ignore[no-untyped-def]
    # unrelated notes, not a conversation: each vector is its own text's (no session context)
    f = Field.open(tmp_path / "f", WordEmbedder(), context_weight=None)
    f.remember_many([{"text": t, "kind": "episode", "tags": [topic]} for topic, t in _texts()])
    yield f
    f.close()


def _exact_top(field: Field, query: np.ndarray, k: int) -> list[str]:
    st = field.store.state
    rows = [r for r in range(st.n_rows) if st.is_alive(r)]
    scores = st.vectors[rows] @ query
    return [st.ids[rows[i]] for i in np.argsort(-scores)[:k]]


def test_cortical_finds_a_memory_from_its_own_text_first(field: Field) -> None:
    view = FieldCortical(field)
    st = field.store.state
    target = st.ids[17]
    hits = view.search(st.text[17], 5)
    assert hits[0].id == target and hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert hits[0].components == {"cortical": hits[0].score}


def test_cortical_with_every_candidate_reranked_is_exact_cosine(field: Field) -> None:
    view = FieldCortical(field)
    query = field.embed(["cello orchestra rehearsal tempo"])[0][0]
    got = [h.id for h in view.search(query, 10, candidates=len(field))]
    found = set(_exact_top(field, query, 40))  # overlap ties below cosine order: compare as sets
    assert set(got) <= found and len(got) == 10
    assert all("music" in h.tags for h in view.search(query, 10, candidates=len(field)))


def test_refresh_follows_the_field_writes_and_forgets(field: Field) -> None:
    view = FieldCortical(field)
    new = field.remember("a lighthouse keeper polishes the lamp lens at dusk", kind="episode")
    assert all(h.id != new for h in view.search("lighthouse keeper lamp lens dusk", 3))
    assert view.refresh() == 1
    assert view.search("lighthouse keeper lamp lens dusk", 3)[0].id == new
    field.forget(new)
    assert view.refresh() == 1
    assert all(h.id != new for h in view.search("lighthouse keeper lamp lens dusk", 3))


def test_themes_organise_the_field_and_retrieve_across_topics(field: Field) -> None:
    view = FieldThemes(field)
    themes = view.themes()
    assert len(themes) >= 2 and sum(t.size for t in themes) == len(field)
    assert themes == sorted(themes, key=lambda t: (-t.size, t.id))
    assert all(t.representative in field and t.text for t in themes)
    broad = view.retrieve("tomato compost cello violin", 8, themes=4, min_per_theme=1)
    assert len({h.tags[0] for h in broad}) >= 2  # more than one topic in the answer
    assert all(h.components["themes"] == h.score for h in broad)


def test_a_view_needs_vectors_and_a_query_of_the_fields_size(tmp_path: Path) -> None:
    with Field.open(tmp_path / "empty", WordEmbedder()) as empty, pytest.raises(ConfigError, match="no vectors"):
        FieldCortical(empty)
    with Field.open(tmp_path / "g", WordEmbedder()) as g:
        g.remember("garden tomato basil compost in the greenhouse", kind="episode")
        with pytest.raises(ConfigError, match="dimensions"):
            FieldThemes(g).retrieve(np.ones(3, np.float32))
