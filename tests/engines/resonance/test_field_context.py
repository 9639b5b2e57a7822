"""Session context: a memory's vector carries the one remembered before it (field/context.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from word_embedder import WordEmbedder

from soul.engines.resonance import ConfigError, Field

TEXTS = [
    "Caroline went to the support group yesterday",
    "that sounds like a wonderful evening for you",
    "Melanie painted a sunrise over the lake last week",
    "yes and the kids loved the colours of it",
    "we should go camping together in the summer",
]


def _own(text: str) -> np.ndarray:
    return WordEmbedder().embed([text]).vectors[0]


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def _vector(field: Field, memory_id: str) -> np.ndarray:
    return np.array(field.get(memory_id).embedding)


def test_each_memory_carries_the_one_before_it_as_a_decaying_context(tmp_path: Path) -> None:
    with Field.open(tmp_path / "f", WordEmbedder()) as field:
        ids = [field.remember(t, session="s") for t in TEXTS[:3]]
        v0, v1, v2 = (_vector(field, i) for i in ids)
        np.testing.assert_allclose(v0, _own(TEXTS[0]), atol=1e-6)  # a chain starts unmixed
        np.testing.assert_allclose(v1, _unit(_own(TEXTS[1]) + 0.5 * v0), atol=1e-6)
        np.testing.assert_allclose(v2, _unit(_own(TEXTS[2]) + 0.5 * v1), atol=1e-6)
        # the text, the keyword index and the query side are the memory's own
        assert field.get(ids[1]).content == TEXTS[1]
        assert [h.id for h in field.recall("wonderful evening", k=1, mode="keyword")] == [ids[1]]


def test_another_session_a_gap_or_the_option_off_starts_unmixed(tmp_path: Path) -> None:
    with Field.open(tmp_path / "s", WordEmbedder()) as field:
        field.remember(TEXTS[0], session="a")
        other = field.remember(TEXTS[1], session="b")
        np.testing.assert_allclose(_vector(field, other), _own(TEXTS[1]), atol=1e-6)
    for option in ({"context_weight": None}, {"context_weight": 0}, {"contiguity": None}):
        with Field.open(tmp_path / str(option), WordEmbedder(), **option) as field:
            field.remember(TEXTS[0])
            second = field.remember(TEXTS[1])
            np.testing.assert_allclose(_vector(field, second), _own(TEXTS[1]), atol=1e-6)
    with Field.open(tmp_path / "gap", WordEmbedder(), contiguity=0.0) as field:
        field.remember(TEXTS[0])
        second = field.remember(TEXTS[1])  # later than 0 s after the first: no chain
        np.testing.assert_allclose(_vector(field, second), _own(TEXTS[1]), atol=1e-6)


def test_remember_many_across_batches_equals_remembering_one_by_one(tmp_path: Path) -> None:
    with Field.open(tmp_path / "one", WordEmbedder()) as field:
        singles = [_vector(field, field.remember(t, session="s")) for t in TEXTS]
    with Field.open(tmp_path / "many", WordEmbedder(), batch_size=2) as field:
        ids = field.remember_many(TEXTS, session="s")
        batched = [_vector(field, i) for i in ids if i is not None]
    np.testing.assert_allclose(np.stack(batched), np.stack(singles), atol=1e-6)


def test_a_given_embedding_is_stored_as_given_and_a_failed_one_skips_the_chain(
        tmp_path: Path) -> None:
    given = _own("a vector the caller made")
    with Field.open(tmp_path / "f", WordEmbedder()) as field:
        first, mine, failed, after = field.remember_many([
            TEXTS[0], {"text": TEXTS[1], "embedding": given}, "FAIL this text now", TEXTS[2]])
        assert first and mine and failed and after
        np.testing.assert_allclose(_vector(field, mine), given, atol=1e-6)
        assert not _vector(field, failed).any()  # a zero fallback, to re-embed later
        # the failed one is skipped: the chain goes on from the given vector
        np.testing.assert_allclose(_vector(field, after), _unit(_own(TEXTS[2]) + 0.5 * given),
                                   atol=1e-6)
        # a given vector equal to a stored one still merges, whatever its text
        assert field.remember("other words entirely for this one", embedding=given) == mine


def test_the_chain_goes_on_across_remember_calls_in_a_session(tmp_path: Path) -> None:
    with Field.open(tmp_path / "f", WordEmbedder(), context_weight=1.0) as field:
        first = field.remember(TEXTS[0], session="s")
        field.remember(TEXTS[3], session="t")  # another session in between
        second = field.remember_many([TEXTS[1]], session="s")[0]
        assert second is not None
        np.testing.assert_allclose(_vector(field, second),
                                   _unit(_own(TEXTS[1]) + _vector(field, first)), atol=1e-6)


@pytest.mark.parametrize("bad", [-0.5, float("nan"), float("inf"), "half", True])
def test_a_bad_context_weight_is_refused(tmp_path: Path, bad: object) -> None:
    with pytest.raises(ConfigError, match="context_weight"):
        Field.open(tmp_path / "f", WordEmbedder(), context_weight=bad)


def test_distinct_neighbours_are_not_merged_for_their_context_but_duplicates_are(
        tmp_path: Path) -> None:
    similar = [f"memory {i}: the {a} of the {b} near the river" for i, (a, b) in enumerate(
        (a, b) for a in ("cat", "dog", "bird") for b in ("barn", "mill", "house"))]
    with Field.open(tmp_path / "f", WordEmbedder()) as field:
        ids = field.remember_many(similar)  # mixed vectors of this chain are close ...
        assert len(set(ids)) == len(similar)  # ... but their texts are not: nothing merged
        first = field.remember("The cat sat on the mat by the door")
        again = field.remember("the cat sat on the mat, by the door!")  # same words
        assert again == first
        later = field.remember_many(similar[:2])  # the same texts again: merged
        assert later == ids[:2]
