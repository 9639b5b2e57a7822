"""Near-duplicate checks through the LSH index: remember_many merges exactly as remembering
one by one does, finds planted near-duplicates as brute force does, and survives reopening,
forgetting and re-embedding."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from soul.engines.resonance import Field
from soul.engines.resonance.recall.dedup import DupIndex

DIM = 384


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def planted(n_base: int, n_dup: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Random unit vectors, then near-duplicates of random earlier ones at cosine 0.96–0.995,
    shuffled in after their originals; returns (vectors, index of the original or -1)."""
    rng = np.random.default_rng(seed)
    base = _unit(rng.standard_normal((n_base, DIM)))
    of = rng.integers(0, n_base, n_dup)
    cos = rng.uniform(0.96, 0.995, n_dup)[:, None]
    u = rng.standard_normal((n_dup, DIM))
    u -= (u * base[of]).sum(1, keepdims=True) * base[of]  # orthogonal to the original
    dups = _unit(cos * base[of] + np.sqrt(1 - cos**2) * _unit(u))
    vectors, origin = list(base), [-1] * n_base
    for d, o in zip(dups, of.tolist(), strict=True):  # after the original, anywhere later
        at = int(rng.integers(o + 1, len(vectors) + 1))
        vectors.insert(at, d)
        origin.insert(at, o)
        origin = [x + 1 if x >= at else x for x in origin]  # shifted originals
    return np.array(vectors, np.float32), np.array(origin)


def _items(vectors: np.ndarray) -> list[dict]:
    return [{"text": f"memory number {i} with its own words", "embedding": v}
            for i, v in enumerate(vectors)]


def _groups(ids: list[str | None]) -> list[int]:
    first: dict[str | None, int] = {}
    return [first.setdefault(m, i) for i, m in enumerate(ids)]


@pytest.mark.parametrize("seed", [0, 1])
def test_batched_merges_equal_one_by_one_and_brute_force(tmp_path: Path, seed: int) -> None:
    vectors, _ = planted(700, 250, seed)
    items = _items(vectors)
    with Field.open(tmp_path / "a", batch_size=64) as a:
        batched = a.remember_many(items)
    with Field.open(tmp_path / "b") as b:
        single = [b.remember(**it) for it in items]
    assert _groups(batched) == _groups(single)
    # brute force, one by one: the most similar kept memory at cosine >= 0.95, else new
    kept: list[int] = []
    expect: list[int] = []
    for i, v in enumerate(vectors):
        sims = vectors[kept] @ v if kept else np.zeros(0)
        if len(sims) and sims.max() >= 0.95:
            expect.append(expect[kept[int(sims.argmax())]])
        else:
            kept.append(i)
            expect.append(i)
    assert _groups(batched) == expect
    assert len(set(batched)) < len(items)  # merges happened


def test_merges_reinforce_across_reopen_forget_and_reembed(tmp_path: Path) -> None:
    vectors, _ = planted(50, 0, 3)
    with Field.open(tmp_path / "f") as f:
        ids = f.remember_many(_items(vectors))
    near = _unit(vectors[7] + 0.05 * _unit(np.random.default_rng(4).standard_normal(DIM)))
    with Field.open(tmp_path / "f") as f:  # the index is rebuilt from the store
        assert f.remember("a different text, same meaning", embedding=near) == ids[7]
        assert f.get(ids[7]).confidence.n == 1
        f.forget(ids[7])
        fresh = f.remember("again after forgetting it", embedding=near)
        assert fresh != ids[7]
        pending = f.remember("stored while the embedder was down", embedding=np.zeros(DIM))
        assert f.get(pending).pending_embedding
        row = f.store.state.row_of(pending)
        f.store.reembed(pending, vectors[20] * -1)
        f.indexes.reembedded(row, vectors[20] * -1)
        assert f.remember("close to the re-embedded one", embedding=-vectors[20]) == pending


def test_lsh_finds_planted_duplicates_like_brute_force() -> None:
    rng = np.random.default_rng(5)
    stored = _unit(rng.standard_normal((20_000, DIM)))
    dup = DupIndex(DIM)
    dup.insert(np.arange(len(stored)), dup.codes(stored))
    of = rng.integers(0, len(stored), 2_000)
    cos = rng.uniform(0.95, 0.999, len(of))[:, None]
    u = rng.standard_normal((len(of), DIM))
    u -= (u * stored[of]).sum(1, keepdims=True) * stored[of]
    queries = _unit(cos * stored[of] + np.sqrt(1 - cos**2) * _unit(u))
    best = np.full(len(of), -2.0, np.float32)
    row = np.full(len(of), -1, np.int64)
    dup.best(queries, dup.codes(queries), stored, best, row)
    found = (row == of).mean()
    assert found >= 0.995, found  # (1 - p^14)^24 predicts a miss of <= 0.2% at 0.95
    np.testing.assert_allclose(best[row == of], (queries * stored[of]).sum(1)[row == of],
                               rtol=1e-4)
