"""Full resonance speed: Field.resonate at 100k memories / 300k edges (and 1M / 3M).

    python benchmarks/resonance_full.py                 # 100k memories, 300k graph edges
    python benchmarks/resonance_full.py --n 1000000     # 1M / 3M (HNSW build ~15-20 min)

Memories and queries as in benchmarks/resonance.py (clustered 384-d vectors, Zipf texts;
query vectors given, so embedding is not timed). The graph: each memory mentions two
entities drawn from a Zipf law over n/5 entities (2 edges per memory) and follows the
memory before it (the temporal contiguity edge remember() writes), so 3 edges per memory.

Rows: Field.resonate k=10 with every phase (p50/p99), the same with spreading off, hybrid
recall beside it; and, timed separately, a full CSR rebuild of the graph, one relate plus the
incremental adjacency update, and spreading activation from 20 seeds.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from resonance import _QueryVectors, _zipf_ranks, row, synth_corpus, synth_queries, timed


def build(n: int, root: Path, n_q: int) -> tuple[object, list[str], dict[str, float]]:
    """A field of n memories with 3n graph edges; returns it, the queries and build times."""
    from soul.engines.resonance import Field

    texts, vecs = synth_corpus(n)
    q_texts, q_vecs = synth_queries(n_q, vecs)
    lookup = _QueryVectors(dict(zip(q_texts, q_vecs, strict=False)))
    times: dict[str, float] = {}
    # entities and contiguity are written below in bulk, as a field's remember() would
    field = Field.open(root / "f", embedder=lookup, dedup_threshold=None, touch_on_recall=False,
                       entities=False, contiguity=None)
    t = time.perf_counter()
    ids = field.remember_many([{"text": x, "embedding": v} for x, v in zip(texts, vecs, strict=True)])
    times["insert"] = time.perf_counter() - t
    rng = np.random.default_rng(7)
    ents = _zipf_ranks(rng, 2 * n, max(n // 5, 10), s=1.0).reshape(n, 2)
    graph = field.graph
    t = time.perf_counter()
    prev = None
    for i, memory_id in enumerate(ids):
        graph.mention(memory_id, (f"Entity{ents[i, 0]}", f"Entity{ents[i, 1]}"))
        if prev is not None:
            graph.relate(f"m:{prev}", "follows", f"m:{memory_id}")
        prev = memory_id
    times["graph"] = time.perf_counter() - t
    t = time.perf_counter()
    field.resonate(q_texts[0], k=10)  # builds BM25, HNSW and the CSR
    times["first"] = time.perf_counter() - t
    return field, q_texts, times


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=300)
    args = ap.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="soul-bench-resonate-"))
    rows: list[str] = []
    try:
        field, queries, times = build(args.n, root, args.queries)
        graph = field.graph  # type: ignore[attr-defined]
        edges = graph.stats().get("edges")
        n_q = len(queries)
        full = timed(lambda i: field.resonate(queries[i], k=10), n_q)  # type: ignore[attr-defined]
        nospread = timed(lambda i: field.resonate(queries[i], k=10,  # type: ignore[attr-defined]
                                                  disabled={"spreading"}), n_q)
        hybrid = timed(lambda i: field.recall(queries[i], k=10), n_q)  # type: ignore[attr-defined]
        # an "as of" adjacency is built whole from the edge table, never cached: a full rebuild
        rebuild = timed(lambda i: graph.adjacency(as_of=time.time()), 5, warmup=1)
        rng = np.random.default_rng(3)
        st = field.store.state  # type: ignore[attr-defined]
        seeds = [{st.ids[int(r)]: 0.6 for r in rng.integers(0, st.n_rows, 20)} for _ in range(n_q)]
        cfg = field.resonance  # type: ignore[attr-defined]
        spread = timed(lambda i: graph.spread(seeds[i], decay=cfg.spread_decay, cutoff=cfg.cutoff)
                       .strongest_memories(cfg.entry_threshold, cfg.join), n_q)

        def one_relate(i: int) -> None:
            graph.relate(f"Bench{i}", "relates_to", f"Entity{i}")
            graph.adjacency()

        relate = timed(one_relate, 200, warmup=5)
        rows += [
            row(f"Field.resonate k=10, every phase ({args.n:,} memories, {edges:,} edges)", full),
            row("Field.resonate k=10, spreading off", nospread),
            row("Field.recall hybrid k=10 (for comparison)", hybrid),
            row("KnowledgeGraph.spread, 20 seeds, resonate's decay and cutoff, 50 strongest",
                spread),
            row("graph CSR full rebuild (adjacency as of now)", rebuild),
            row("one relate + incremental adjacency", relate),
        ]
        field.close()  # type: ignore[attr-defined]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"full resonance: {args.n:,} memories, {n_q} queries, {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.1f}")
    print(f"build: insert {times['insert']:.1f} s, graph {times['graph']:.1f} s, first resonate "
          f"(BM25 + HNSW + CSR) {times['first']:.1f} s\n")
    print("| what | p50 ms | p99 ms | notes |\n|---|---|---|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
