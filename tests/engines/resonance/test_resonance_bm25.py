"""BM25: the numba kernels against plain-numpy references, and BM25Index's behaviour."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

pytest.importorskip("numba")

from soul.engines.resonance.errors import ConfigError
from soul.engines.resonance.kernels import bm25_accumulate, csr_merge, topk_sorted
from soul.engines.resonance.recall.bm25 import BM25Index, BM25Params
from soul.engines.resonance.recall.text import TextConfig, light_stem, tokenize

K1, B = 1.2, 0.75


def _random_csr(rng: np.random.Generator, n_docs: int, n_terms: int):
    """A random corpus as (doc → {term: tf}) and its CSR by term."""
    docs = []
    for _ in range(n_docs):
        terms = rng.choice(n_terms, size=rng.integers(1, 12), replace=False)
        docs.append({int(t): int(rng.integers(1, 4)) for t in terms})
    offsets = np.zeros(n_terms + 1, np.int64)
    post_docs, post_tf = [], []
    for t in range(n_terms):
        for d, tfs in enumerate(docs):
            if t in tfs:
                post_docs.append(d)
                post_tf.append(tfs[t])
        offsets[t + 1] = len(post_docs)
    doc_len = np.array([sum(x.values()) for x in docs], np.float32)
    return docs, offsets, np.array(post_docs, np.int32), np.array(post_tf, np.float32), doc_len


def _reference_scores(docs, alive, q_terms, q_weights, avgdl):
    """Plain-Python BM25 (Lucene form) over the doc → {term: tf} maps."""
    out = np.zeros(len(docs))
    for d, tfs in enumerate(docs):
        if not alive[d]:
            continue
        dl = sum(tfs.values())
        for t, w in zip(q_terms, q_weights, strict=True):
            tf = tfs.get(int(t), 0)
            if tf:
                out[d] += w * tf / (tf + K1 * (1 - B + B * dl / avgdl))
    return out


@pytest.mark.parametrize("seed", range(5))
def test_accumulate_matches_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    docs, offsets, pdocs, ptf, dl = _random_csr(rng, 200, 40)
    alive = (rng.random(200) > 0.1).astype(np.uint8)
    q_terms = rng.choice(45, size=5, replace=False).astype(np.int32)  # some beyond the CSR
    q_weights = rng.random(5).astype(np.float32) + 0.1
    avgdl = float(dl.mean())
    scores = np.zeros(200, np.float32)
    matched = np.zeros(200, np.float32)
    touched = np.empty(200, np.int32)
    n = bm25_accumulate(offsets, pdocs, ptf, dl, alive, q_terms, q_weights, np.float32(K1),
                        np.float32(B), np.float32(avgdl), scores, matched, touched, 0)
    ref = _reference_scores(docs, alive, q_terms, q_weights, avgdl)
    np.testing.assert_allclose(scores, ref, rtol=1e-5, atol=1e-6)
    ref_matched = [
        sum(w for t, w in zip(q_terms, q_weights, strict=True) if int(t) in tfs) if alive[d]
        else 0.0
        for d, tfs in enumerate(docs)
    ]
    np.testing.assert_allclose(matched, ref_matched, rtol=1e-5)
    assert sorted(touched[:n].tolist()) == np.flatnonzero(ref > 0).tolist()


@pytest.mark.parametrize(("n", "k"), [(0, 5), (1, 5), (7, 3), (500, 10), (500, 500), (64, 0)])
def test_topk_sorted_matches_argsort(n: int, k: int) -> None:
    rng = np.random.default_rng(n + k)
    scores = np.round(rng.random(1000), 2).astype(np.float32)  # rounding forces ties
    cand = rng.choice(1000, size=n, replace=False).astype(np.int32)
    out_s = np.empty(k, np.int32)
    out_v = np.empty(k, np.float32)
    m = topk_sorted(scores, cand, n, k, out_s, out_v)
    # reference: score descending, then slot ascending
    ref = sorted(cand.tolist(), key=lambda d: (-scores[d], d))[:k]
    assert m == min(n, k)
    assert out_s[:m].tolist() == ref
    np.testing.assert_array_equal(out_v[:m], scores[ref])


def test_csr_merge_matches_rebuild() -> None:
    rng = np.random.default_rng(3)
    _, offsets, pdocs, ptf, _ = _random_csr(rng, 100, 30)
    alive = (rng.random(130) > 0.2).astype(np.uint8)
    # 30 more docs (slots 100..129) with terms up to 34
    add_t, add_d, add_f = [], [], []
    for d in range(100, 130):
        for t in rng.choice(35, size=3, replace=False):
            add_t.append(t)
            add_d.append(d)
            add_f.append(float(rng.integers(1, 3)))
    off, md, mf = csr_merge(offsets, pdocs, ptf, np.array(add_t, np.int32),
                            np.array(add_d, np.int32), np.array(add_f, np.float32), 35, alive)
    postings = {}
    for t in range(30):
        for p in range(offsets[t], offsets[t + 1]):
            postings.setdefault(t, []).append((int(pdocs[p]), float(ptf[p])))
    for t, d, f in zip(add_t, add_d, add_f, strict=True):
        postings.setdefault(int(t), []).append((d, f))
    assert off.shape[0] == 36
    for t in range(35):
        expect = sorted((d, f) for d, f in postings.get(t, []) if alive[d])
        got = list(zip(md[off[t]:off[t + 1]].tolist(), mf[off[t]:off[t + 1]].tolist(),
                       strict=True))
        assert got == expect


def _reference_index(corpus: dict[int, str], query: str) -> dict[int, float]:
    """BM25 from scratch over token lists, as a pure-Python oracle for BM25Index."""
    toks = {i: tokenize(t) for i, t in corpus.items()}
    n = len(toks)
    avgdl = sum(len(t) for t in toks.values()) / n
    df = Counter(w for t in toks.values() for w in set(t))
    out = {}
    for i, t in toks.items():
        tf = Counter(t)
        s = 0.0
        for w, c in Counter(tokenize(query)).items():
            if tf[w]:
                idf = math.log(1 + (n - df[w] + 0.5) / (df[w] + 0.5))
                s += c * idf * tf[w] / (tf[w] + K1 * (1 - B + B * len(t) / avgdl))
        if s > 0:
            out[i] = s
    return out


WORDS = "cat dog bird fish runs ran running swims flew park river tree house red blue".split()  # noqa: SIM905


@pytest.mark.parametrize("merge_every", [1, 7, 10_000])
def test_index_matches_reference_through_adds_and_removes(merge_every: int) -> None:
    rng = np.random.default_rng(merge_every)
    idx = BM25Index(BM25Params(merge_every=merge_every))
    corpus: dict[int, str] = {}
    for step in range(120):
        doc_id = int(rng.integers(0, 80))
        if step % 9 == 8 and corpus:
            victim = int(rng.choice(list(corpus)))
            assert idx.remove(victim)
            del corpus[victim]
        else:
            text = " ".join(rng.choice(WORDS, size=int(rng.integers(1, 9))))
            idx.add(doc_id, text)  # re-adding an id replaces it
            corpus[doc_id] = text
        if step % 10 == 0:
            query = " ".join(rng.choice(WORDS, size=3))
            ref = _reference_index(corpus, query)
            ids, scores = idx.top_k(query, 1000)
            assert dict(zip(ids.tolist(), scores.tolist(), strict=True)) == pytest.approx(ref)
            assert list(scores) == sorted(scores, reverse=True)
    assert len(idx) == len(corpus)


def test_search_extra_ids_and_coverage() -> None:
    idx = BM25Index()
    idx.add_many([10, 20, 30], ["red fish swims", "blue bird flew", "red bird"])
    res = idx.search("red bird", 2, [30, 99, 10])
    assert res.ids[0] == 30 and res.ids.shape == (2,)
    np.testing.assert_allclose(res.extra_scores, idx.scores_for("red bird", [30, 99, 10]))
    assert res.extra_scores[1] == 0.0
    # doc 30 holds both query terms → coverage 1; doc 10 only "red" (same df as "bird")
    np.testing.assert_allclose(res.extra_coverage, [1.0, 0.0, 0.5], rtol=1e-6)
    np.testing.assert_allclose(res.coverage[0], 1.0, rtol=1e-6)
    assert idx.top_k("zebra", 5)[0].size == 0
    assert idx.top_k("", 5)[0].size == 0


def test_more_scores_ids_as_its_scoring_pass_saw_the_index() -> None:
    docs = ["red fish swims", "blue bird flew", "red bird"]
    idx = BM25Index()
    idx.add_many([10, 20, 30], docs)
    _, more = idx.search_keeping("red bird", 1)
    idx.add(40, "red bird red")  # written after the pass: unknown to it, like an absent id
    scores, coverage = more(np.array([30, 40, 99, 10]))
    before = BM25Index()
    before.add_many([10, 20, 30], docs)
    expected = before.search("red bird", 1, [30, 40, 99, 10])
    assert scores.tolist() == expected.extra_scores.tolist()
    assert coverage.tolist() == expected.extra_coverage.tolist()
    assert scores[1] == scores[2] == 0.0 and scores[0] > scores[3] > 0.0


@pytest.mark.parametrize("sparse", [False, True])
def test_the_slots_of_ids_are_the_dict_lookups_through_adds_replacements_and_removals(sparse: bool) -> None:
    # dense ids (a field's store rows) are read through an id -> slot array, sparse ones (far
    # past the slots held) through the dict; either way each id's slot, -1 for none
    rng = np.random.default_rng(3)
    base = 10**9 if sparse else 0
    idx = BM25Index(BM25Params(merge_every=16))
    for step in range(300):
        doc = base + int(rng.integers(0, 200))
        if rng.random() < 0.25:
            idx.remove(doc)
        else:
            idx.add(doc, f"word{step % 7} thing{doc % 11}")  # an id present again: replaced
        if step % 20 == 0:
            ids = base + rng.integers(-3 if not sparse else 0, 230, 60)
            want = [idx._slot_of.get(int(i), -1) for i in ids.tolist()]
            assert idx._slots(ids.astype(np.int64)).tolist() == want
            assert idx._slots(ids.tolist()).tolist() == want
    assert (idx._slot_dense.values is None) == sparse
    if not sparse:  # a negative id (numpy would read it from the array's end) drops the array
        idx.add(-5, "a negative id")
        assert idx._slot_dense.values is None
        assert idx._slots(np.array([-5, 3], np.int64)).tolist() == [idx._slot_of[-5], idx._slot_of.get(3, -1)]


def test_a_write_between_two_queries_is_seen() -> None:
    # a query reads a view of the index kept until the next write (issue 26): after every
    # kind of write, the scores are those of an index built afresh from the same documents
    idx = BM25Index(BM25Params(merge_every=3))
    corpus = {1: "red fish", 2: "blue bird"}

    def check() -> None:
        fresh = BM25Index()
        fresh.add_many(list(corpus), list(corpus.values()))
        for query in ("red", "bird fish", "red bird"):
            got, want = idx.top_k(query, 5), fresh.top_k(query, 5)
            assert dict(zip(*(a.tolist() for a in got), strict=True)) == dict(
                zip(*(a.tolist() for a in want), strict=True))

    idx.add_many(list(corpus), list(corpus.values()))
    check()
    for write in ("add", "remove", "replace", "merge", "add", "add"):
        if write == "add":
            doc_id = max(corpus) + 1
            corpus[doc_id] = "red red bird" if doc_id % 2 else "fish"
            idx.add(doc_id, corpus[doc_id])
        elif write == "remove":
            idx.remove(max(corpus))
            del corpus[max(corpus)]
        elif write == "replace":
            corpus[1] = "green fish bird"
            idx.add(1, corpus[1])
        else:
            idx.merge()
        check()


def test_empty_index_and_bad_input() -> None:
    idx = BM25Index()
    assert idx.top_k("anything", 3)[0].size == 0
    assert not idx.remove(1)
    with pytest.raises(ConfigError):
        idx.add_many([1, 2], ["only one"])
    with pytest.raises(ConfigError):
        BM25Params(b=2.0)


def test_stemming_and_stop_words() -> None:
    assert tokenize("The cats were running to the parks!") == ["cat", "run", "park"]
    assert light_stem("hiking") == "hike"
    assert light_stem("parties") == light_stem("party") == "parti"
    assert tokenize("The Cats", TextConfig(stem=False, stop_words=frozenset())) == ["the", "cats"]
    assert tokenize("snake_case 2023") == ["snake", "case", "2023"]


def test_merge_drops_removed_postings_and_keeps_scores() -> None:
    idx = BM25Index(BM25Params(merge_every=10_000))
    idx.add_many(range(6), ["red fish", "red bird", "blue fish", "red red", "fish", "bird"])
    idx.merge()
    before = dict(zip(*(a.tolist() for a in idx.top_k("red fish", 10)), strict=True))
    idx.remove(3)
    idx.add(9, "green fish")  # buffered
    idx.merge()
    offsets, docs, _ = idx._main
    assert 3 not in idx._slot_ids[docs].tolist()  # the removed doc's postings are gone
    assert offsets[-1] == docs.shape[0] == 10  # 9 postings − 1 removed + 2 added
    after = dict(zip(*(a.tolist() for a in idx.top_k("red fish", 10)), strict=True))
    assert set(after) == (set(before) - {3}) | {9}


@pytest.mark.parametrize("seed", range(6))
def test_one_search_call_answers_as_the_separate_kernels_do(seed: int) -> None:
    # A keyword search runs as one kernel call (kernels/bm25.py search, issue 26): scoring
    # over the main CSR and the append buffer, the top k, the extra ids' signals. Each must
    # be, byte for byte, what the scoring pass, topk_sorted and the slot gather give.
    rng = np.random.default_rng(seed)
    idx = BM25Index(BM25Params(merge_every=int(rng.integers(5, 40))))
    ids = rng.permutation(400)[:120]
    for doc_id in ids.tolist():  # a main CSR and a buffer, some documents removed
        idx.add(doc_id, " ".join(rng.choice(WORDS, size=int(rng.integers(1, 9)))))
        if rng.random() < 0.1:
            idx.remove(int(rng.choice(ids)))
    for _ in range(10):
        query = " ".join(rng.choice(WORDS, size=int(rng.integers(1, 5))))
        extra = rng.choice(500, int(rng.integers(0, 30)))
        k = int(rng.integers(0, 40))
        got = idx.search(query, k, extra)
        sc = idx._score(query)
        inv = np.float32(1.0 / sc.total if sc.total > 0 else 0.0)
        slots, scores = np.empty(k, np.int32), np.empty(k, np.float32)
        m = topk_sorted(sc.scores, sc.touched, sc.n, k, slots, scores) if k else 0
        extra_scores, extra_matched = idx._gather(sc, extra)
        for a, b in ((got.ids, sc.view.slot_ids[slots[:m]]), (got.scores, scores[:m]),
                     (got.coverage, sc.matched[slots[:m]] * inv),
                     (got.extra_scores, extra_scores), (got.extra_coverage, extra_matched * inv)):
            assert a.tobytes() == b.tobytes()


def _same_search(a: BM25Index, b: BM25Index, query: str, k: int, extra: list[int]) -> None:
    got, want = a.search(query, k, extra), b.search(query, k, extra)
    for x, y in ((got.ids, want.ids), (got.scores, want.scores), (got.coverage, want.coverage),
                 (got.extra_scores, want.extra_scores),
                 (got.extra_coverage, want.extra_coverage)):
        assert x.tobytes() == y.tobytes()


@pytest.mark.parametrize("merge_every", [1, 13, 1024])
def test_an_index_written_between_queries_ranks_as_one_built_at_once(merge_every: int) -> None:
    # A conversation writes one memory between two recalls: every query then reads an append
    # buffer grown by one document (kept incrementally, not rebuilt from every document since
    # the last merge). Hits, scores and coverage are byte for byte those of an index built
    # at once from the same documents in the same order, through replacements and removals.
    rng = np.random.default_rng(merge_every)
    words = [*WORDS, *(f"w{i}" for i in range(60))]
    idx = BM25Index(BM25Params(merge_every=merge_every))
    corpus: dict[int, str] = {}
    for step in range(160):
        doc_id = int(rng.integers(0, 140))
        if step % 11 == 10 and corpus:
            victim = int(rng.choice(list(corpus)))
            idx.remove(victim)
            del corpus[victim]
        else:
            text = " ".join(rng.choice(words, size=int(rng.integers(1, 12))))
            idx.add(doc_id, text)
            corpus[doc_id] = text
        fresh = BM25Index()
        order = sorted(corpus, key=idx._slot_of.__getitem__)  # the incremental index's order
        fresh.add_many(order, [corpus[i] for i in order])
        for _ in range(2):
            query = " ".join(rng.choice(words, size=int(rng.integers(1, 6))))
            extra = rng.choice(150, int(rng.integers(0, 8))).tolist()
            _same_search(idx, fresh, query, int(rng.integers(1, 30)), extra)
            assert idx.scores_for(query, order).tobytes() == fresh.scores_for(query, order).tobytes()


def test_the_append_buffer_is_as_wide_as_the_terms_it_holds() -> None:
    # A query after a write builds the buffer's CSR: its size follows what was written since
    # the last merge, not the vocabulary of the whole index.
    idx = BM25Index(BM25Params(merge_every=10_000))
    idx.add_many(range(500), [f"common t{i} u{i}" for i in range(500)])
    idx.merge()
    assert idx.vocabulary_size == 1001
    idx.add(1000, "common fresh fresh words")
    idx.add(1001, "fresh t3")
    top = idx.top_k("fresh t3", 3)[0].tolist()
    assert top[0] == 1001 and set(top) == {1001, 1000, 3}
    offsets, docs, _ = idx._buf_csr
    assert offsets.shape[0] == 1 + 4  # common, fresh, words, t3: local term ids
    assert sorted(docs.tolist()) == [500, 500, 500, 501, 501]


def test_append_buffer_slots_and_local_terms() -> None:
    from soul.engines.resonance.recall.postings import AppendBuffer

    buf = AppendBuffer()
    buf.append(7, np.array([40, 2], np.int32), np.array([1, 2], np.float32))
    buf.append(8, np.array([2, 9, 100], np.int32), np.array([3, 1, 1], np.float32))
    assert buf.n_docs == 2 and buf.n_local == 4
    assert buf.terms_of(7).tolist() == [40, 2] and buf.terms_of(8).tolist() == [2, 9, 100]
    assert buf.terms_of(6) is None and buf.terms_of(9) is None
    assert buf.local_ids(np.array([2, 100, 3, 5000], np.int32)).tolist() == [1, 3, -1, -1]
    terms, docs, tfs = buf.postings()
    assert terms.tolist() == [40, 2, 2, 9, 100] and docs.tolist() == [7, 7, 8, 8, 8]
    assert tfs.tolist() == [1, 2, 3, 1, 1] and buf.local_terms().tolist() == [0, 1, 1, 2, 3]
