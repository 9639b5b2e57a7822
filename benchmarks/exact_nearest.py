"""The vector index's two ways to answer: HNSW's graph walk against a scan of every vector.

    python benchmarks/exact_nearest.py [--sizes 500,1000,2000,4096,8000,16000] [--queries 200]

`VectorIndex.search` scans every live vector up to `recall/index.py`'s EXACT_UP_TO and walks
hnswlib's graph past it. This prints, per field size, the p50 of one search at k = 100 (the
depth hybrid recall asks each list for) both ways — warm, and cold: right after 40 MB were
read, as a query's embedding streams MiniLM's weights through the caches just before a
turn's recall — and how many of the true 100 nearest the walk found (the scan's are exact).
Vectors are benchmarks/resonance.py's clustered 384-d ones, queries near random memories.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from resonance import synth_corpus, synth_queries

from soul.engines.resonance.recall import index as index_module
from soul.engines.resonance.recall.index import VectorIndex

K = 100


def _p50_us(index: VectorIndex, queries: np.ndarray, scan: bool, flush: np.ndarray | None) -> tuple[float, list[np.ndarray]]:
    index_module.EXACT_UP_TO = 1 << 62 if scan else 0
    found, times = [], []
    for q in queries:
        if flush is not None:
            flush.sum()  # evicts the index from the caches
        t = time.perf_counter()
        ids, _ = index.search(q, K)
        times.append(time.perf_counter() - t)
        found.append(ids)
    return statistics.median(times) * 1e6, found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="500,1000,2000,4096,8000,16000")
    ap.add_argument("--queries", type=int, default=200)
    args = ap.parse_args()
    bound = index_module.EXACT_UP_TO
    flush = np.ones(40_000_000 // 8)
    print(f"# exact scan or HNSW walk, k = {K} — {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; "
          f"EXACT_UP_TO = {bound}\n")
    print("| vectors | walk, warm (µs) | scan, warm (µs) | walk, cold (µs) | scan, cold (µs) | walk's recall@100 |")
    print("|---|---|---|---|---|---|")
    for n in (int(s) for s in args.sizes.split(",")):
        _, vecs = synth_corpus(n)
        _, queries = synth_queries(args.queries, vecs)
        index = VectorIndex(vecs.shape[1])
        index.add(np.arange(n), vecs)
        _p50_us(index, queries[:20], True, None)  # compiles and loads the scan's kernel
        walk_warm, walked = _p50_us(index, queries, False, None)
        scan_warm, scanned = _p50_us(index, queries, True, None)
        walk_cold, _ = _p50_us(index, queries, False, flush)
        scan_cold, _ = _p50_us(index, queries, True, flush)
        recall = statistics.mean(len(set(w.tolist()) & set(s.tolist())) / len(s) for w, s in zip(walked, scanned, strict=True))
        print(f"| {n:,} | {walk_warm:.0f} | {scan_warm:.0f} | {walk_cold:.0f} | {scan_cold:.0f} | {recall:.3f} |", flush=True)
    index_module.EXACT_UP_TO = bound


if __name__ == "__main__":
    main()
