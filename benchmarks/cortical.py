"""Cortical index vs HNSW vs brute force (and themes): recall@10, latency, build, memory.

Data (say which in every table): `--data real` is LoCoMo as embedded by the engine's MiniLM
(all turns of the dev file as memories, its questions as queries); `--data mix` (default)
scales that to `--n` vectors: each memory is a real turn embedding plus Gaussian noise
(cosine ≈ 0.86 to its turn), so the set keeps real embeddings' anisotropy and topic
structure, and the queries are the real questions. Ground truth is exact cosine top-10.

    python benchmarks/cortical.py                      # 100k, mix
    python benchmarks/cortical.py --data real
    python benchmarks/cortical.py --n 1000000 --skip-hnsw
    python benchmarks/cortical.py --projections        # hadamard vs gaussian coder
    python benchmarks/cortical.py --n 200000 --skip-themes --adds 500   # + one-memory add cost
    python benchmarks/cortical.py --field              # through a Field: today's recall vs the tools

`--adds N` times adding N more memories one at a time to the built HNSW and cortical
indexes (what a conversation does each turn). `--field` runs LoCoMo through real Fields (one
per conversation, every turn a memory): today's `recall` (semantic, hybrid) beside
`FieldCortical.search` and `FieldThemes.retrieve` (themes/over_field.py), scored on the
questions' evidence turns (recall@10, as benchmarks/locomo.py), with each one's build time.

Embeddings come from benchmarks/locomo.py's on-disk cache (computed once if missing).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))


def real_embeddings() -> tuple[np.ndarray, np.ndarray]:
    """(turn vectors, question vectors) of LoCoMo dev, unit float32."""
    from locomo import DEFAULT_CACHE, DEFAULT_DATA, CachedEmbedder, load_locomo

    from soul.engines.resonance.recall.embedder import Embedder

    convs = load_locomo(DEFAULT_DATA)
    emb = CachedEmbedder(Embedder.default(), DEFAULT_CACHE)
    turns = emb.embed([t for c in convs for _, t in c.turns]).vectors
    questions = emb.embed([q for c in convs for q, _, _ in c.questions]).vectors
    emb.save()
    return _unit(turns), _unit(questions)


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)).astype(np.float32)


def make_data(kind: str, n: int, n_queries: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    turns, questions = real_embeddings()
    rng = np.random.default_rng(seed)
    queries = questions[rng.permutation(len(questions))[:n_queries]]
    if kind == "real":
        return turns, queries
    base = turns[rng.integers(0, len(turns), n)]
    noise = rng.standard_normal((n, turns.shape[1]), dtype=np.float32) * (0.6 / np.sqrt(384))
    return _unit(base + noise), queries


def latency(fn: Callable[[np.ndarray], np.ndarray], queries: np.ndarray,
            truth: np.ndarray) -> tuple[float, float, float]:
    """(recall@10, p50 ms, p95 ms) of `fn(query) -> top-10 rows`."""
    times, recall = [], []
    for q, t in zip(queries, truth, strict=True):
        t0 = time.perf_counter()
        rows = fn(q)
        times.append(time.perf_counter() - t0)
        recall.append(np.isin(rows[:10], t).mean())
    ms = np.array(times) * 1e3
    return float(np.mean(recall)), float(np.percentile(ms, 50)), float(np.percentile(ms, 95))


def row(name: str, rec: float, p50: float, p95: float, build: float | None,
        mem: float | None, note: str = "") -> None:
    b = f"{build:.1f}" if build is not None else "—"
    m = f"{mem / 2**20:.0f}" if mem is not None else "—"
    print(f"| {name} | {rec:.3f} | {p50:.3f} | {p95:.3f} | {b} | {m} | {note} |", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", choices=["mix", "real"], default="mix")
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--candidates", type=int, nargs="+", default=[100, 300, 1000])
    ap.add_argument("--skip-hnsw", action="store_true")
    ap.add_argument("--skip-themes", action="store_true")
    ap.add_argument("--projections", action="store_true",
                    help="also compare the hadamard and gaussian coders")
    ap.add_argument("--adds", type=int, default=0, help="then time adding this many memories one by one")
    ap.add_argument("--field", action="store_true", help="LoCoMo through Fields: today's recall vs the tools")
    args = ap.parse_args(argv)
    if args.field:
        return field_section()

    from soul.engines.resonance.recall.dedup import single_thread_blas
    from soul.engines.resonance.themes.cortical import CorticalIndex
    from soul.engines.resonance.themes.sparse import SparseCoder

    data, queries = make_data(args.data, args.n, args.queries)
    n = len(data)
    print(f"data: {args.data}, {n:,} memories (dim {data.shape[1]}), {len(queries)} real "
          f"LoCoMo questions as queries; ground truth = exact cosine top-10\n")
    with single_thread_blas():
        truth = np.stack([np.argsort(-(data @ q))[:10] for q in queries])

    print("| system | recall@10 | p50 ms | p95 ms | build s | memory MiB | notes |")
    print("|---|---|---|---|---|---|---|")

    def brute(q: np.ndarray) -> np.ndarray:
        s = data @ q
        top = np.argpartition(-s, 10)[:10]
        return top[np.argsort(-s[top])]

    with single_thread_blas():
        row("brute force (numpy, 1 BLAS thread)", *latency(brute, queries, truth), 0.0,
            data.nbytes, "the vectors themselves")

    if not args.skip_hnsw:
        from soul.engines.resonance.recall.index import VectorIndex

        t0 = time.perf_counter()
        hnsw = VectorIndex(data.shape[1])
        for s in range(0, n, 20_000):
            hnsw.add(np.arange(s, min(s + 20_000, n)), data[s : s + 20_000])
        build = time.perf_counter() - t0
        with tempfile.TemporaryDirectory() as tmp:
            hnsw._index.save_index(str(Path(tmp) / "h"))
            graph_bytes = (Path(tmp) / "h").stat().st_size
        row("HNSW (M 16, ef_c 200, ef 64)", *latency(lambda q: hnsw.search(q, 10)[0], queries,
                                                     truth), build, graph_bytes,
            "hnswlib graph + its vector copy")

    coder = SparseCoder(data.shape[1])
    coder.encode(data[:10])  # compile / load the kernels outside the timing
    t0 = time.perf_counter()
    index = CorticalIndex(coder)
    for s in range(0, n, 20_000):
        index.add(np.arange(s, min(s + 20_000, n)), data[s : s + 20_000])
    build = time.perf_counter() - t0
    st = index.stats()
    index.rerank(lambda rows: data[rows])
    note = (f"postings mean {st['posting_mean']:.0f}, max {st['posting_max']} "
            f"({st['features_used']} features used)")
    row("cortical, overlap only", *latency(lambda q: index.search(q, 10)[0], queries, truth),
        build, st["bytes"], note)
    for c in args.candidates:
        row(f"cortical + exact re-rank of top {c}",
            *latency(lambda q, c=c: index.search(q, 10, candidates=c)[0], queries, truth),
            build, st["bytes"], "vectors read from the caller's matrix")

    if args.adds:
        extra = make_data(args.data, args.adds, 1, seed=1)[0]
        print(f"\n| adding {args.adds} memories one at a time to {n:,} | ms per memory (mean) | p95 ms |")
        print("|---|---|---|")
        targets = [("cortical", index.add)]
        if not args.skip_hnsw:
            targets.insert(0, ("HNSW", hnsw.add))
        for name, add in targets:
            times = []
            for i, v in enumerate(extra):
                t0 = time.perf_counter()
                add(np.array([n + i]), v[None, :])
                times.append(time.perf_counter() - t0)
            ms = np.array(times) * 1e3
            print(f"| {name} | {ms.mean():.3f} | {np.percentile(ms, 95):.3f} |", flush=True)
        print()

    if not args.skip_themes:
        from soul.engines.resonance.themes.themes import ThemeIndex

        t0 = time.perf_counter()
        themes = ThemeIndex(data.shape[1])
        themes.assign(np.arange(n), data)
        themes.maintain(lambda rows: data[rows], budget=10_000)
        build = time.perf_counter() - t0
        ts = themes.stats()
        for k_themes in (4, 8):
            row(f"themes, {k_themes} themes + expansion",
                *latency(lambda q, kt=k_themes: themes.retrieve(
                    q, 10, themes=kt, vectors_of=lambda r: data[r])[0], queries, truth),
                build, None, f"{ts['themes']} themes, largest {ts['size_max']}")

    if args.projections:
        print("\n| coder | encode vectors/s | cortical + re-rank 300 recall@10 |")
        print("|---|---|---|")
        for proj in ("hadamard", "gaussian"):
            c = SparseCoder(data.shape[1], projection=proj)
            c.encode(data[:10])
            sample = data[: min(n, 20_000)]
            t0 = time.perf_counter()
            c.encode(sample)
            rate = len(sample) / (time.perf_counter() - t0)
            ix = CorticalIndex(c)
            ix.add(np.arange(n), data)
            ix.rerank(lambda rows: data[rows])
            rec = latency(lambda q, ix=ix: ix.search(q, 10, candidates=300)[0], queries, truth)
            print(f"| {proj} | {rate:,.0f} | {rec[0]:.3f} |", flush=True)
    return 0


def field_section() -> int:
    """LoCoMo through Fields: evidence recall@10 and latency of today's recall beside the
    cortical and theme views over the same field, and what each costs to build."""
    import contextlib

    from locomo import DEFAULT_CACHE, DEFAULT_DATA, CachedEmbedder, load_locomo, score

    from soul.engines.resonance import Field, QualityGateRefused
    from soul.engines.resonance.recall.embedder import Embedder
    from soul.engines.resonance.themes import FieldCortical, FieldThemes

    convs = load_locomo(DEFAULT_DATA)
    emb = CachedEmbedder(Embedder.default(), DEFAULT_CACHE)
    results: dict[str, list[tuple[float, float]]] = {}  # system -> [(recall@10, ms)]
    builds: dict[str, float] = {}
    memories = 0
    with tempfile.TemporaryDirectory() as tmp:
        for conv in convs:
            field = Field.open(Path(tmp) / conv.sample_id, embedder=emb)
            for dia_id, text in conv.turns:
                with contextlib.suppress(QualityGateRefused):
                    field.remember(text, meta={"dia_id": dia_id})
            memories += len(field)
            emb.embed([q for q, _, _ in conv.questions])  # cached: no system pays for it
            t0 = time.perf_counter()
            field.recall(conv.questions[0][0], 10, mode="semantic")  # the HNSW catch-up
            builds["HNSW (the field's, at first recall)"] = builds.get("HNSW (the field's, at first recall)", 0.0) + time.perf_counter() - t0
            t0 = time.perf_counter()
            cortical = FieldCortical(field)
            builds["FieldCortical"] = builds.get("FieldCortical", 0.0) + time.perf_counter() - t0
            t0 = time.perf_counter()
            themes = FieldThemes(field)
            builds["FieldThemes"] = builds.get("FieldThemes", 0.0) + time.perf_counter() - t0
            systems: dict[str, Callable[[str], list[Any]]] = {
                "recall semantic (today)": lambda q, f=field: f.recall(q, 10, mode="semantic"),
                "recall hybrid (today's default)": lambda q, f=field: f.recall(q, 10, mode="hybrid"),
                "FieldCortical, re-rank 300": lambda q, c=cortical: c.search(q, 10, candidates=300),
                "FieldCortical, re-rank 1000": lambda q, c=cortical: c.search(q, 10, candidates=1000),
                "FieldThemes, 8 themes": lambda q, t=themes: t.retrieve(q, 10, themes=8),
                "FieldThemes, 8 themes, 1 per theme": lambda q, t=themes: t.retrieve(q, 10, themes=8, min_per_theme=1),
            }
            for name, run in systems.items():
                for q, evidence, _ in conv.questions:
                    t0 = time.perf_counter()
                    hits = run(q)
                    ms = (time.perf_counter() - t0) * 1e3
                    results.setdefault(name, []).append((score([h.meta.get("dia_id", "") for h in hits], evidence)[1], ms))
            field.close()
    emb.save()
    n_q = len(next(iter(results.values())))
    print(f"LoCoMo dev through Fields: {len(convs)} conversations, {memories:,} memories, {n_q:,} questions "
          "(evidence recall@10; latency includes the query's embedding, served from the cache)\n")
    print("| system | evidence recall@10 | p50 ms | p95 ms |")
    print("|---|---|---|---|")
    for name, rows in results.items():
        rec = np.array([r for r, _ in rows])
        ms = np.array([m for _, m in rows])
        print(f"| {name} | {rec.mean():.3f} | {np.percentile(ms, 50):.2f} | {np.percentile(ms, 95):.2f} |")
    print("\n| build, all conversations | seconds |")
    print("|---|---|")
    for name, secs in builds.items():
        print(f"| {name} | {secs:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
