"""VectorIndex: HNSW search vs brute force, growth, removal, persistence and staleness."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("hnswlib")

from soul.engines.resonance.errors import ConfigError, IndexStale, SearchIndexError
from soul.engines.resonance.recall import index as index_module
from soul.engines.resonance.recall.index import IndexParams, VectorIndex


def _unit(rng: np.random.Generator, n: int, dim: int = 32) -> np.ndarray:
    v = rng.normal(size=(n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.mark.parametrize("walk", [False, True], ids=["scan", "hnsw"])
def test_search_matches_brute_force_and_grows(walk: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if walk:  # past the exact scan's bound: HNSW's graph answers
        monkeypatch.setattr(index_module, "EXACT_UP_TO", 0)
    rng = np.random.default_rng(0)
    vecs = _unit(rng, 3000)
    idx = VectorIndex(32, IndexParams(initial_capacity=100))
    for start in range(0, 3000, 500):  # several resizes
        idx.add(np.arange(start, start + 500), vecs[start : start + 500])
    assert len(idx) == 3000
    queries = _unit(rng, 50)
    hits = 0
    for q in queries:
        ids, sims = idx.search(q, 10)
        truth = np.argsort(-(vecs @ q))[:10]
        hits += len(set(ids.tolist()) & set(truth.tolist()))
        np.testing.assert_allclose(sims, vecs[ids] @ q, atol=1e-5)
        assert np.all(np.diff(sims) <= 1e-6)
    assert hits / 500 >= 0.95


def test_remove_readd_and_k_larger_than_size() -> None:
    rng = np.random.default_rng(1)
    vecs = _unit(rng, 20)
    idx = VectorIndex(32)
    idx.add(range(20), vecs)
    assert idx.remove(3) and not idx.remove(3)
    ids, _ = idx.search(vecs[3], 100)  # k > live count: clamps
    assert 3 not in ids.tolist() and len(ids) == 19
    idx.add([3], vecs[3:4])
    assert idx.search(vecs[3], 1)[0].tolist() == [3]
    assert len(idx) == 20 and 3 in idx


def test_replace_updates_vector_and_centroid() -> None:
    rng = np.random.default_rng(2)
    vecs = _unit(rng, 10)
    idx = VectorIndex(32)
    idx.add(range(10), vecs)
    idx.add([0], vecs[1:2])  # id 0 now holds vector 1
    np.testing.assert_allclose(idx.similarities(vecs[1], [0, 1]), [1.0, 1.0], atol=1e-5)
    expect = vecs[1:].sum(0) + vecs[1]
    np.testing.assert_allclose(idx.centroid(), expect / np.linalg.norm(expect), atol=1e-5)
    idx.remove(5)
    expect = expect - vecs[5]
    cos, hub = idx.signals(vecs[2], [2, 5, 77])
    assert np.isnan(cos[1]) and np.isnan(cos[2]) and cos[0] == pytest.approx(1.0, abs=1e-5)
    assert hub[0] == pytest.approx(vecs[2] @ expect / np.linalg.norm(expect), abs=1e-5)


def test_refuses_zero_vectors_and_bad_shapes() -> None:
    idx = VectorIndex(4)
    with pytest.raises(SearchIndexError):
        idx.add([1], np.zeros((1, 4), np.float32))
    with pytest.raises(ConfigError):
        idx.add([1, 2], np.ones((1, 4), np.float32))
    with pytest.raises(ConfigError):
        IndexParams(M=1)
    assert idx.search(np.ones(4), 5)[0].size == 0


def test_save_load_roundtrip_and_staleness(tmp_path) -> None:
    rng = np.random.default_rng(3)
    vecs = _unit(rng, 200)
    idx = VectorIndex(32, IndexParams(ef=80))
    idx.add(range(200), vecs)
    idx.remove(7)
    path = tmp_path / "vectors.hnsw"
    meta = idx.save(path, last_seq=42)
    assert meta.count == 199 and meta.last_seq == 42
    assert VectorIndex.read_meta(path) == meta
    loaded = VectorIndex.load(path, expect_seq=42, expect_count=199)
    assert len(loaded) == 199 and 7 not in loaded
    assert loaded.params.ef == 80
    q = vecs[11]
    assert loaded.search(q, 5)[0].tolist() == idx.search(q, 5)[0].tolist()
    np.testing.assert_allclose(loaded.centroid(), idx.centroid(), atol=1e-6)
    loaded.add([7], vecs[7:8])  # a removed id can come back after a load
    assert 7 in loaded
    with pytest.raises(IndexStale, match="seq 42"):
        VectorIndex.load(path, expect_seq=43)
    with pytest.raises(IndexStale):
        VectorIndex.load(path, expect_count=200)


def test_torn_or_missing_files_are_stale(tmp_path) -> None:
    idx = VectorIndex(8)
    idx.add([1, 2], _unit(np.random.default_rng(4), 2, 8))
    path = tmp_path / "v.hnsw"
    with pytest.raises(IndexStale):
        VectorIndex.load(path)
    idx.save(path, last_seq=1)
    with open(path, "ab") as fh:  # the index file changed after its meta: torn pair
        fh.write(b"\0")
    assert VectorIndex.read_meta(path) is None
    with pytest.raises(IndexStale):
        VectorIndex.load(path)
    idx.save(path, last_seq=1)
    meta_path = tmp_path / "v.hnsw.meta.json"
    meta_path.write_text(json.dumps({"garbage": True}))
    assert VectorIndex.read_meta(path) is None


def test_search_falls_back_to_an_exact_scan_when_hnsw_cannot_reach_k(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 12.10: on a small, sparse graph with many deletions hnswlib raises "Cannot
    return the results in a contiguous 2D array"; search answers by brute force instead."""
    monkeypatch.setattr(index_module, "EXACT_UP_TO", 0)  # a graph this small is scanned anyway
    rng = np.random.default_rng(0)
    raised = 0
    for _ in range(60):
        idx = VectorIndex(8, IndexParams(M=2, ef_construction=4, ef=1))
        vecs = rng.normal(size=(40, 8)).astype(np.float32)
        idx.add(np.arange(40), vecs)
        for i in rng.choice(40, 30, replace=False):
            idx.remove(int(i))
        try:  # the raw hnswlib call, to know the fallback was exercised
            idx._index.knn_query(vecs[:1], k=10, num_threads=1)
        except RuntimeError:
            raised += 1
        q = rng.normal(size=8).astype(np.float32)
        ids, sims = idx.search(q, 100)
        live = np.array(sorted(idx._live))
        exact = (vecs[live] / np.linalg.norm(vecs[live], axis=1)[:, None]) @ (
            q / np.linalg.norm(q))
        assert sorted(ids.tolist()) == live.tolist()
        assert np.allclose(sims, np.sort(exact)[::-1], atol=1e-5)
    assert raised > 0


def test_a_field_within_the_scan_bound_gets_the_exact_nearest_ranked_ties_by_id(tmp_path) -> None:
    """Up to EXACT_UP_TO live vectors, search is a scan: the true k nearest, most similar
    first, equal similarities by id (duplicate vectors), removed ids never, through
    removals, re-adds, growth and a reload."""
    rng = np.random.default_rng(5)
    vecs = _unit(rng, 900)
    vecs[500:520] = vecs[480:500]  # twenty exact duplicates: ties
    idx = VectorIndex(32, IndexParams(initial_capacity=64))
    for start in range(0, 900, 300):
        idx.add(np.arange(start, start + 300) * 3 + 7, vecs[start:start + 300])  # ids != rows
    ids_of = np.arange(900) * 3 + 7
    gone = set(rng.choice(900, 150, replace=False).tolist())
    for j in gone:
        assert idx.remove(int(ids_of[j]))
    back = sorted(gone)[:40]
    idx.add(ids_of[back], vecs[back])
    gone -= set(back)
    live = np.array([j for j in range(900) if j not in gone])

    def truth(q: np.ndarray, k: int) -> list[int]:
        sims = vecs[live] @ (q / np.linalg.norm(q))
        order = np.lexsort((ids_of[live], -sims))  # ties (the duplicates): by id
        return ids_of[live][order][:k].tolist()

    saved = idx.save(tmp_path / "v.idx")
    loaded = VectorIndex.load(tmp_path / "v.idx", expect_count=saved.count)
    for q in [*_unit(rng, 30), vecs[485], vecs[505]]:
        for index in (idx, loaded):
            ids, sims = index.search(q, 25)
            assert ids.tolist() == truth(q, 25)
            np.testing.assert_allclose(sims, vecs[[int(np.flatnonzero(ids_of == i)[0]) for i in ids]] @ q, atol=1e-5)
            assert not set(ids.tolist()) & set(ids_of[sorted(gone)].tolist())
    assert len(idx.search(vecs[0], 5000)[0]) == len(live)  # k past the live count: every live id


def test_equal_similarities_across_the_kth_place_are_kept_by_id() -> None:
    # ten copies of one vector, added in a shuffled id order, where the top 4 must cut them:
    # the scan keeps the four smallest ids (argpartition alone would keep any four)
    rng = np.random.default_rng(11)
    vecs = _unit(rng, 200)
    copies = rng.permutation(np.arange(500, 510))
    idx = VectorIndex(32)
    idx.add(np.arange(200), vecs)
    idx.add(copies, np.repeat(vecs[:1], 10, axis=0))
    for k in (1, 4, 7, 10, 11):
        ids, sims = idx.search(vecs[0], k)
        want = [0, 500, 501, 502, 503, 504, 505, 506, 507, 508, 509][:k]  # id 0 is the same vector
        assert ids.tolist() == want, k
        assert np.all(sims[:k] == sims[0])


def test_unit_rows_is_the_guarded_division_by_the_row_norms_bit_for_bit() -> None:
    # unit_rows divides at once when no row is zero or NaN (issue 26): the same values as
    # the guarded division it does otherwise, which leaves such rows zero
    from soul.engines.resonance.field.embedding import unit_rows

    rng = np.random.default_rng(3)
    for n in (0, 1, 2, 7, 64):
        vectors = rng.normal(size=(n, 384)).astype(np.float32) * rng.uniform(1e-3, 1e3)
        for bad in ([], [0], [n - 1], [0, n // 2]):
            if n == 0 and bad:
                continue
            v = vectors.copy()
            v[bad] = 0.0
            if len(bad) == 2:
                v[bad[1], 5] = np.nan
            norms = np.linalg.norm(v, axis=1, keepdims=True)
            with np.errstate(invalid="ignore"):
                want = np.divide(v, norms, out=np.zeros_like(v), where=norms > 0)
            assert np.array_equal(unit_rows(v), want, equal_nan=True)


def _signals_by_lookup(idx: VectorIndex, q: np.ndarray, ids: list[int]) -> tuple:
    """`signals` computed the slow way: each id through the live set and the row dict, its
    two dot products in float64; NaN for an id not in the index."""
    q = q / np.linalg.norm(q)
    centroid = idx._unit_centroid().astype(np.float64)
    cos, hub = np.full(len(ids), np.nan), np.full(len(ids), np.nan)
    for j, i in enumerate(ids):
        if i in idx._live:
            row = idx._vecs[idx._row_of[i]].astype(np.float64)
            cos[j], hub[j] = row @ q, row @ centroid
    return cos, hub


@pytest.mark.parametrize("sparse", [False, True])
def test_signals_are_each_rows_two_cosines_through_adds_removals_and_a_reload(
        tmp_path, sparse: bool) -> None:
    # signals reads dense ids (a field's store rows) through an id -> row array; sparse ids
    # (far past the rows held) through the set and dict. Either way: each live id's cosine
    # with the query and with the centroid (float32 sums, reassociated: within 1e-6), NaN
    # for the rest.
    rng = np.random.default_rng(5)
    vecs = _unit(rng, 400)
    base = 10**9 if sparse else 0
    idx = VectorIndex(32)
    order = rng.permutation(300)  # ids added out of order: rows are not ids
    for part in np.array_split(order, 7):
        idx.add(base + part, vecs[part])
    for i in (5, 17, 250):
        idx.remove(base + i)
    idx.add([base + 17], vecs[300:301])  # re-added: a new vector at its old row
    assert (idx._dense.values is None) == sparse

    def check(index: VectorIndex) -> None:
        for _ in range(5):
            q = rng.normal(size=32).astype(np.float32)
            for ids in ((base + rng.choice(300, 120, replace=False)).tolist(),
                        [base + 3, base + 5, base + 299, base + 350, base + 17],
                        [base + 3, base + 250, base + 17]):  # absent only by removal
                got = index.signals(q, ids)
                want = _signals_by_lookup(index, q, ids)
                for g, w in zip(got, want, strict=True):
                    assert g.dtype == np.float32
                    np.testing.assert_allclose(g, w, rtol=0, atol=1e-6)  # NaN where NaN

    check(idx)
    idx.save(tmp_path / "v.idx")
    check(VectorIndex.load(tmp_path / "v.idx"))
