"""Speed of the resonance engine on synthetic memories: recall latency, baselines, embedder.

    python benchmarks/resonance.py              # 100k memories
    python benchmarks/resonance.py --n 1000000  # 1M (HNSW build takes ~15 min on 2 cores)
    python benchmarks/resonance.py --skip-field --skip-embedder
    python benchmarks/resonance.py --recovery              # + reopen after 100k single adds
    python benchmarks/resonance.py --recovery --recovery-n 1000000 --only-recovery

Memories: clustered random unit 384-d vectors (n/50 topics) and texts of 8–30 pseudo-words drawn from a Zipf(1.1)
vocabulary of 30k words whose ~150 most frequent are English stop words, as in real text.
Queries: 3–5 Zipf words and a vector near a random memory. Query embedding is not part of
the recall timings (it is a cache hit for repeated queries; the embedder has its own row).

Rows: hybrid recall (HybridSearcher: BM25 top-100 + HNSW top-100 + exact signals + fusion);
keyword top-10 vs bm25s; semantic top-10 vs brute-force numpy (and HNSW recall@10 against
it); embedder sentences/s; and, through Field when it exists, insert rate (embeddings given)
and reopen/recovery time.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

DIM = 384


def _vocabulary(vocab: int) -> np.ndarray:
    """Zipf rank → word: the most frequent ranks are English stop words, as in real text
    (the tokenizer drops them); the rest are pseudo-words."""
    from soul.engines.resonance.recall.text import ENGLISH_STOP_WORDS

    stop = sorted(w for w in ENGLISH_STOP_WORDS if len(w) > 1)
    return np.array(stop + [f"w{i:x}q" for i in range(vocab - len(stop))])


def _zipf_ranks(rng: np.random.Generator, size: int, vocab: int, s: float = 1.1) -> np.ndarray:
    """0-based ranks from a finite Zipf law p(r) ∝ r^-s over `vocab` words (numpy's zipf
    is unbounded: clipping its tail would pile a third of all tokens on the last word)."""
    p = np.arange(1, vocab + 1, dtype=np.float64) ** -s
    return rng.choice(vocab, size=size, p=p / p.sum())


def synth_corpus(n: int, seed: int = 0, vocab: int = 30_000) -> tuple[list[str], np.ndarray]:
    """n texts of Zipf words and n clustered unit vectors (float32)."""
    rng = np.random.default_rng(seed)
    words = _vocabulary(vocab)
    lengths = rng.integers(8, 31, size=n)
    ranks = _zipf_ranks(rng, int(lengths.sum()), vocab)
    texts, pos = [], 0
    for ln in lengths:
        texts.append(" ".join(words[ranks[pos : pos + ln]]))
        pos += ln
    # clustered like real embeddings (topics), not uniform on the sphere, where every
    # neighbour is equally far and no index (or user) can tell them apart
    centers = rng.normal(size=(max(n // 50, 1), DIM)).astype(np.float32)
    centers /= np.linalg.norm(centers, axis=1, keepdims=True)
    vecs = centers[rng.integers(0, centers.shape[0], size=n)]
    vecs = vecs + rng.normal(scale=1.0 / np.sqrt(DIM), size=(n, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    return texts, vecs


def synth_queries(
    n_q: int, vecs: np.ndarray, seed: int = 1, vocab: int = 30_000
) -> tuple[list[str], np.ndarray]:
    """Queries of 3–5 Zipf words and vectors near random memories."""
    rng = np.random.default_rng(seed)
    words = _vocabulary(vocab)
    texts = [" ".join(words[_zipf_ranks(rng, int(rng.integers(3, 6)), vocab)])
             for _ in range(n_q)]
    base = vecs[rng.integers(0, vecs.shape[0], size=n_q)]
    q = base + rng.normal(scale=0.5 / np.sqrt(DIM), size=base.shape).astype(np.float32)
    return texts, q / np.linalg.norm(q, axis=1, keepdims=True)


def timed(fn: Callable[[int], Any], n: int, warmup: int = 20) -> np.ndarray:
    """Per-call latencies in ms of fn(i) for i in range(n), after a warm-up."""
    for i in range(min(warmup, n)):
        fn(i)
    out = np.empty(n)
    for i in range(n):
        t = time.perf_counter()
        fn(i)
        out[i] = (time.perf_counter() - t) * 1e3
    return out


def row(name: str, lat: np.ndarray | None = None, note: str = "") -> str:
    """One table row: p50 / p99 in ms (or '—') and a note."""
    if lat is None:
        return f"| {name} | — | — | {note} |"
    return f"| {name} | {np.percentile(lat, 50):.3f} | {np.percentile(lat, 99):.3f} | {note} |"


def bench_engine(n: int, n_q: int, rows: list[str]) -> tuple[list[str], np.ndarray]:
    """Build BM25 + HNSW over n synthetic memories; time hybrid, keyword, semantic."""
    from soul.engines.resonance.recall.bm25 import BM25Index
    from soul.engines.resonance.recall.hybrid import HybridSearcher
    from soul.engines.resonance.recall.index import VectorIndex

    texts, vecs = synth_corpus(n)
    q_texts, q_vecs = synth_queries(n_q, vecs)
    ids = np.arange(n)

    t = time.perf_counter()
    bm = BM25Index()
    bm.add_many(ids, texts)
    bm.merge()
    t_bm = time.perf_counter() - t
    t = time.perf_counter()
    vx = VectorIndex(DIM)
    for s in range(0, n, 50_000):
        vx.add(ids[s : s + 50_000], vecs[s : s + 50_000])
    t_vx = time.perf_counter() - t
    rows.append(f"| build: BM25 index ({n:,} docs) | — | — | {t_bm:.1f} s, "
                f"{n / t_bm:,.0f} docs/s incl. tokenizing |")
    rows.append(f"| build: HNSW (M 16, ef_construction 200) | — | — | {t_vx:.1f} s, "
                f"{n / t_vx:,.0f} vectors/s |")

    searcher = HybridSearcher(bm, vx)
    lat = timed(lambda i: searcher.search(q_texts[i], q_vecs[i], 10), n_q)
    rows.append(row(f"hybrid recall k=10 ({n:,})", lat,
                    "BM25 top-100 + HNSW top-100 + exact signals + fusion"))
    lat = timed(lambda i: bm.top_k(q_texts[i], 10), n_q)
    rows.append(row("keyword top-10 (ours, numba)", lat))
    try:
        import bm25s

        t = time.perf_counter()
        model = bm25s.BM25(k1=1.2, b=0.75)
        model.index(bm25s.tokenize(texts, stopwords="en", show_progress=False),
                    show_progress=False)
        t_b = time.perf_counter() - t

        def bm25s_query(i: int) -> Any:
            toks = bm25s.tokenize([q_texts[i]], stopwords="en", show_progress=False)
            return model.retrieve(toks, k=10, show_progress=False, n_threads=1)

        lat = timed(bm25s_query, n_q)
        rows.append(row("keyword top-10 (bm25s 0.3, numpy backend)", lat,
                        f"index build {t_b:.1f} s"))
    except ImportError:
        rows.append(row("keyword top-10 (bm25s)", None, "bm25s not installed"))
    lat = timed(lambda i: vx.search(q_vecs[i], 10), n_q)
    rows.append(row("semantic top-10 (HNSW, ef 64)", lat))

    def brute(i: int) -> np.ndarray:
        sims = vecs @ q_vecs[i]
        top = np.argpartition(-sims, 10)[:10]
        return top[np.argsort(-sims[top])]

    lat = timed(brute, min(n_q, 300))
    agree = np.mean([len(set(vx.search(q_vecs[i], 10)[0].tolist()) & set(brute(i).tolist()))
                     / 10 for i in range(min(n_q, 300))])
    rows.append(row("semantic top-10 (brute-force numpy)", lat,
                    f"HNSW recall@10 vs brute force: {agree:.3f}"))
    return texts, vecs


def bench_embedder(rows: list[str], n_sent: int = 512) -> None:
    """Sentences/s of Embedder.default() on synthetic English-like sentences."""
    from soul.engines.resonance.recall.embedder import Embedder

    emb = Embedder.default(cache_size=0)
    rng = np.random.default_rng(5)
    text = ("memory soul agent remembers the user likes quiet mornings and strong coffee "
            "yesterday we talked about travel plans for summer in the mountains with friends "
            "she said that the project deadline moved again because of the review")
    words = text.split()
    sents = [" ".join(rng.choice(words, size=int(rng.integers(5, 40)))) for _ in range(n_sent)]
    emb.embed(sents[:32])
    t = time.perf_counter()
    emb.embed(sents)
    dt = time.perf_counter() - t
    rows.append(f"| embedder (MiniLM int8, 2 threads, batch 32) | — | — | "
                f"{n_sent / dt:,.0f} sentences/s (5–40 words) |")
    t = time.perf_counter()
    for s in sents[:64]:
        emb.embed([s])
    dt = time.perf_counter() - t
    rows.append(f"| embedder, one sentence per call | {1e3 * dt / 64:.2f} | — | "
                f"{64 / dt:,.0f} sentences/s |")


class _QueryVectors:
    """A stand-in embedder that knows the benchmark's query vectors (embedding excluded)."""

    def __init__(self, table: dict[str, np.ndarray]) -> None:
        self.table = table
        self.dim = DIM

    def embed(self, texts: list[str], *, fallback: bool = True) -> np.ndarray:
        return np.stack([self.table[t] for t in texts])


def bench_field(texts: list[str], vecs: np.ndarray, n_q: int, rows: list[str]) -> None:
    """Insert rate (embeddings given), reopen time, hybrid recall through Field."""
    try:
        from soul.engines.resonance import Field
    except ImportError:
        rows.append(row("Field (insert / recovery)", None, "Field not available"))
        return
    root = Path(tempfile.mkdtemp(prefix="soul-bench-field-"))
    try:
        n = len(texts)
        items = [{"text": t, "embedding": v} for t, v in zip(texts, vecs, strict=True)]
        q_texts, q_vecs = synth_queries(n_q, vecs)
        lookup = _QueryVectors(dict(zip(q_texts, q_vecs, strict=False)))
        t = time.perf_counter()
        with Field.open(root / "f", embedder=lookup, dedup_threshold=None,
                        touch_on_recall=False) as field:
            field.remember_many(items)
            dt_ins = time.perf_counter() - t
            t = time.perf_counter()
            field.recall(q_texts[0], k=10)  # builds BM25 and HNSW
            dt_build = time.perf_counter() - t
            lat = timed(lambda i: field.recall(q_texts[i], k=10), n_q)
        rows.append(f"| Field insert, embeddings given ({n:,}) | — | — | "
                    f"{n / dt_ins:,.0f} memories/s |")
        rows.append(f"| Field first recall (builds BM25 + HNSW) | — | — | {dt_build:.1f} s |")
        rows.append(row(f"Field.recall hybrid k=10 ({n:,})", lat,
                        "query vectors given; Hit objects, confidence, tags included"))
        t = time.perf_counter()
        field = Field.open(root / "f", dedup_threshold=None)
        dt_open = time.perf_counter() - t
        rows.append(f"| Field reopen (recovery of {n:,}) | — | — | {dt_open:.2f} s |")
        field.close()
        t, c = time.perf_counter(), time.process_time()
        with Field.open(root / "d", touch_on_recall=False) as field:  # default: dedup 0.95
            field.remember_many(items)
            dt, dc = time.perf_counter() - t, time.process_time() - c
        rows.append(f"| Field insert, embeddings given, dedup on (0.95) ({n:,}) | — | — | "
                    f"{n / dt:,.0f} memories/s (CPU {dc:.2f} s, load {os.getloadavg()[0]:.1f}) |")
    finally:
        shutil.rmtree(root, ignore_errors=True)


_REOPEN = """
import sys, time, json
from soul.engines.resonance import Store
t, c = time.perf_counter(), time.process_time()
st = Store.open(sys.argv[1], compact_after=10**12)
print(json.dumps([time.perf_counter() - t, time.process_time() - c, len(st.state)]))
st.writer.close()
"""


def bench_recovery(n: int, rows: list[str], repeats: int = 3) -> None:
    """Recovery of ``n`` single ADD entries (one ``Store.add`` each, as ``remember`` writes
    them, 384-d): each reopen in a fresh process (wall, CPU, load average)."""
    import json
    import subprocess
    import sys

    from soul.engines.resonance import Store
    from soul.engines.resonance.store.ops import Row

    root = Path(tempfile.mkdtemp(prefix="soul-bench-recovery-"))
    try:
        rng = np.random.default_rng(0)
        vecs = rng.standard_normal((min(n, 50_000), DIM)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        t = time.perf_counter()
        with Store.open(root, durability="os", compact_after=10**12) as st:
            now = time.time()
            for i in range(n):
                st.add(Row(f"{i:016x}", 3, 0, now, 0.7, 0.04, 0,
                           f"memory number {i} about tea and travel plans with friends",
                           ("user",) if i % 3 == 0 else (), None, None,
                           f'{{"turn": {i}}}' if i % 5 == 0 else None), vecs[i % len(vecs)])
        rows.append(f"| log {n:,} single adds (Store.add, os durability) | — | — | "
                    f"{time.perf_counter() - t:.1f} s |")
        for _ in range(repeats):
            load = os.getloadavg()[0]
            out = subprocess.run([sys.executable, "-c", _REOPEN, str(root)], check=True,
                                 capture_output=True, text=True).stdout
            wall, cpu, count = json.loads(out.strip().splitlines()[-1])
            assert count == n
            rows.append(f"| recovery of {n:,} single ADD entries | — | — | {wall:.2f} s wall, "
                        f"{cpu:.2f} s CPU (load {load:.1f}) |")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """Run and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100_000, help="memories (1000000 for 1M)")
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--skip-embedder", action="store_true")
    ap.add_argument("--skip-field", action="store_true")
    ap.add_argument("--recovery", action="store_true",
                    help="also time recovery of a log of single remember() entries")
    ap.add_argument("--recovery-n", type=int, default=100_000,
                    help="entries for --recovery (1000000 for the issue's goal)")
    ap.add_argument("--only-recovery", action="store_true")
    args = ap.parse_args(argv)
    rows: list[str] = []
    if args.recovery or args.only_recovery:
        bench_recovery(args.recovery_n, rows)
    if args.only_recovery:
        print("\n".join(rows))
        return 0
    texts, vecs = bench_engine(args.n, args.queries, rows)
    if not args.skip_embedder:
        bench_embedder(rows)
    if not args.skip_field:
        bench_field(texts, vecs, args.queries, rows)
    print(f"resonance benchmark: {args.n:,} memories, {args.queries} queries, "
          f"{os.cpu_count()} cores\n")
    print("| what | p50 ms | p99 ms | notes |\n|---|---|---|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
