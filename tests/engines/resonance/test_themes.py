"""Themes (xMemory): assignment with the sparsity term, two-stage retrieval, maintenance."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from soul.engines.resonance.errors import ConfigError, IndexStale
from soul.engines.resonance.kernels.themes import sparsity
from soul.engines.resonance.themes.themes import ThemeConfig, ThemeIndex


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def clustered(n_per: int, n_clusters: int, spread: float, seed: int = 0,
              dim: int = 64) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(vectors, cluster label, centres); rows shuffled so clusters arrive interleaved."""
    rng = np.random.default_rng(seed)
    centres = _unit(rng.standard_normal((n_clusters, dim)))
    label = rng.permutation(np.repeat(np.arange(n_clusters), n_per))
    vecs = _unit(centres[label] + spread * rng.standard_normal((label.size, dim)) / np.sqrt(dim))
    return vecs, label, centres


def test_sparsity_is_the_seeds_term() -> None:
    assert sparsity(48.0, 48.0) == pytest.approx(0.5)
    assert sparsity(0.0, 48.0) == pytest.approx(1 / (1 + np.exp(-2)))
    assert sparsity(96.0, 48.0) == pytest.approx(1 / (1 + np.exp(2)))


def test_one_theme_per_cluster() -> None:
    vecs, label, _ = clustered(40, 10, spread=0.5)  # member·centre ≈ 0.9
    index = ThemeIndex(64)
    got = index.assign(np.arange(len(vecs)), vecs)
    assert len(index) == 10
    for t in np.unique(got):  # purity: every theme holds one cluster only
        assert np.unique(label[got == t]).size == 1
    assert sorted(th.size for th in index.themes()) == [40] * 10


def test_sparsity_prevents_one_giant_theme() -> None:
    vecs, _, _ = clustered(1500, 1, spread=0.8, seed=3)  # one broad blob of 1,500
    rows = np.arange(len(vecs))
    plain = ThemeIndex(64, ThemeConfig(sparsity_weight=0.0, new_theme_threshold=0.5))
    plain.assign(rows, vecs)
    assert plain.stats()["size_max"] >= 1400  # cosine alone: (nearly) everything snowballs
    index = ThemeIndex(64)
    index.assign(rows, vecs)
    st = index.stats()
    assert st["themes"] >= 5 and st["size_max"] <= 300, st  # 1,500 rows: no theme over 20 %


def test_retrieve_recall_close_to_brute_force() -> None:
    vecs, _, centres = clustered(60, 30, spread=0.9, seed=4)
    index = ThemeIndex(64)
    index.assign(np.arange(len(vecs)), vecs)
    index.maintain(lambda r: vecs[r], budget=100)
    rng = np.random.default_rng(5)
    queries = _unit(centres[rng.integers(0, 30, 100)] + 0.9 * rng.standard_normal((100, 64)) / 8)
    truth = np.argsort(-(queries @ vecs.T), axis=1)[:, :10]
    recall = []
    for q, t in zip(queries, truth, strict=True):
        rows, scores = index.retrieve(q, 10, vectors_of=lambda r: vecs[r])
        assert (np.diff(scores) <= 1e-7).all()
        assert np.allclose(scores, vecs[rows] @ q, atol=1e-5)
        recall.append(np.isin(rows, t).mean())
    assert np.mean(recall) >= 0.97, np.mean(recall)


def test_retrieve_draws_from_several_themes() -> None:
    vecs, label, centres = clustered(50, 12, spread=0.5, seed=6)
    index = ThemeIndex(64)
    got = index.assign(np.arange(len(vecs)), vecs)
    # a query between three topics: the answer spans their three themes
    q = _unit(centres[0] + centres[1] + centres[2])
    rows, _ = index.retrieve(q, 12, themes=3, vectors_of=lambda r: vecs[r])
    assert set(label[rows]) == {0, 1, 2}
    assert np.unique(got[rows]).size == 3
    # forced breadth: a query at one topic still gets the best rows of each chosen theme
    q1 = centres[5]
    rows, _ = index.retrieve(q1, 10, themes=3, vectors_of=lambda r: vecs[r], min_per_theme=2)
    assert np.unique(got[rows]).size == 3
    assert (label[rows] == 5).sum() == 6


def test_split_of_an_oversized_theme() -> None:
    vecs, label, _ = clustered(100, 2, spread=0.4, seed=7)
    cfg = ThemeConfig(new_theme_threshold=-1.0, max_theme_size=150)  # everything joins
    index = ThemeIndex(64, cfg)
    index.assign(np.arange(200), vecs)
    assert len(index) == 1
    report = index.maintain(lambda r: vecs[r])
    assert len(report["split"]) == 1 and len(index) == 2
    for th in index.themes():  # the two halves are the two clusters
        members = index.members(th.id)
        assert th.size == 100 and np.unique(label[members]).size == 1
        assert th.representative in members
    assert index.maintain(lambda r: vecs[r])["split"] == []


def test_merge_of_two_near_identical_themes() -> None:
    vecs, _, _ = clustered(30, 1, spread=0.3, seed=8)
    index = ThemeIndex(64)
    index.assign(np.arange(30), vecs)
    # the same topic again, after a forced new theme (threshold above any score)
    index.config = ThemeConfig(new_theme_threshold=2.0)
    index.assign(np.array([100]), vecs[:1] * 0.999)
    index.config = ThemeConfig()
    more = _unit(vecs[:20] + 0.01)
    index.assign(np.arange(200, 220), more)
    before = index.stats()["themes"]
    assert before == 2
    report = index.maintain(lambda r: _lookup(r, vecs, more))
    assert len(report["merged"]) == 1 and len(index) == 1
    assert index.stats()["rows"] == 51


def _lookup(rows: np.ndarray, vecs: np.ndarray, more: np.ndarray) -> np.ndarray:
    out = np.empty((rows.size, vecs.shape[1]), np.float32)
    for i, r in enumerate(rows.tolist()):
        out[i] = vecs[r] if r < 30 else vecs[0] * 0.999 if r == 100 else more[r - 200]
    return out


def test_remove_and_empty_themes_die() -> None:
    vecs, _, _ = clustered(20, 3, spread=0.4, seed=9)
    index = ThemeIndex(64)
    got = index.assign(np.arange(60), vecs)
    t = int(got[0])
    index.remove(np.flatnonzero(got == t))
    assert len(index) == 2 and t not in {th.id for th in index.themes()}
    assert (index.theme_of(np.flatnonzero(got == t)) == -1).all()
    rows, _ = index.retrieve(vecs[0], 5, vectors_of=lambda r: vecs[r])
    assert not np.isin(rows, np.flatnonzero(got == t)).any()
    report = index.maintain(lambda r: vecs[r])
    assert report["refreshed"] >= 2


def test_background_maintenance_runs_and_stops() -> None:
    vecs, _, _ = clustered(100, 2, spread=0.4, seed=10)
    index = ThemeIndex(64, ThemeConfig(new_theme_threshold=-1.0, max_theme_size=150))
    index.assign(np.arange(200), vecs)
    index.start_background(lambda r: vecs[r], interval=0.02)
    with pytest.raises(ConfigError, match="already running"):
        index.start_background(lambda r: vecs[r])
    deadline = time.monotonic() + 5
    while len(index) < 2 and time.monotonic() < deadline:
        # reads and writes go on while it runs
        index.retrieve(vecs[0], 5, vectors_of=lambda r: vecs[r])
        time.sleep(0.005)
    index.stop_background()
    assert len(index) == 2 and index.last_maintenance
    assert index._thread is None


def test_save_load_round_trip(tmp_path: Path) -> None:
    vecs, _, _ = clustered(30, 5, spread=0.5, seed=11)
    index = ThemeIndex(64, ThemeConfig(ideal_size=20.0))
    index.assign(np.arange(150) * 3, vecs)
    index.remove(np.array([0, 3]))
    path = tmp_path / "themes.npz"
    index.save(path)
    loaded = ThemeIndex.load(path)
    assert loaded.config == index.config and loaded.stats() == index.stats()
    for a, b in zip(index.themes(), loaded.themes(), strict=True):
        assert (a.id, a.size, a.representative) == (b.id, b.size, b.representative)
        assert np.array_equal(index.members(a.id), loaded.members(b.id))
    q = vecs[7]
    look = lambda r: vecs[r // 3]  # noqa: E731
    assert np.array_equal(index.retrieve(q, 5, vectors_of=look)[0],
                          loaded.retrieve(q, 5, vectors_of=look)[0])
    with pytest.raises(IndexStale):
        ThemeIndex.load(tmp_path / "missing.npz")


def test_bad_input() -> None:
    with pytest.raises(ConfigError):
        ThemeConfig(max_theme_size=3, min_theme_size=2)
    index = ThemeIndex(8)
    with pytest.raises(ConfigError, match="distinct"):
        index.assign(np.array([1, 1]), np.ones((2, 8)))
    got = index.assign(np.array([1, 2]), np.array([np.zeros(8), np.ones(8)]))
    assert got[0] == -1 and got[1] >= 0
