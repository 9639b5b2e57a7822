"""Knowledge-graph timings: CSR build, spreading activation, incremental adjacency updates.

    python benchmarks/graph.py [--sizes 100000:300000,1000000:3000000] [--queries 500]

Synthetic graphs: n memories, each mentioning 3 entities (n/3 entities, popularity Zipf-like
with exponent 1, so a few hubs are mentioned by thousands of memories) — edges = 3n. The
first size is also built through the API (`KnowledgeGraph.mention`, logged to a WAL in a
temporary directory) to time ingest, `spread()` end to end, and one `relate` followed by
`adjacency()` (the incremental update). Spreading runs from 20 random seed memories with
the default `SpreadConfig`.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time

import numpy as np

from soul.engines.resonance.graph.adjacency import Adjacency, _full_build
from soul.engines.resonance.graph.kg import KnowledgeGraph, SpreadConfig, spread_nodes


def synthetic(n_mem: int, per_memory: int = 3, seed: int = 0) -> tuple[np.ndarray, np.ndarray, int]:
    """(memory index, entity index) pairs, and the number of entities."""
    rng = np.random.default_rng(seed)
    n_ent = max(n_mem // 3, 1)
    p = 1.0 / np.arange(1, n_ent + 1)
    p /= p.sum()
    ent = rng.choice(n_ent, size=(n_mem, per_memory), p=p)
    mem = np.repeat(np.arange(n_mem), per_memory)
    return mem, ent.reshape(-1), n_ent


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.array(xs), q))


def bench_arrays(n_mem: int, queries: int) -> dict[str, float]:
    mem, ent, n_ent = synthetic(n_mem)
    keys = [f"m:{i}" for i in range(n_mem)] + [f"e:ent{j}" for j in range(n_ent)]
    entity = np.r_[np.zeros(n_mem, np.uint8), np.ones(n_ent, np.uint8)]
    Adjacency.from_edges(mem[:10], ent[:10] + n_mem, np.ones(10), keys[: n_mem + n_ent],
                         entity)  # compile / load the kernels outside the timing
    adj = Adjacency.from_edges(mem, ent + n_mem, np.ones(len(mem)), keys, entity)
    # What the graph's full rebuild does (the node index is kept by the graph, not rebuilt).
    src, dst = mem.astype(np.int32), (ent + n_mem).astype(np.int32)
    w, keep = np.ones(len(mem), np.float32), np.ones(len(mem), np.uint8)
    t = time.perf_counter()
    _full_build(src, dst, w, keep, keys, adj.index, adj.degree, entity, len(keys), 0.0)
    build = time.perf_counter() - t
    cfg = SpreadConfig()
    rng = np.random.default_rng(1)
    times, reached = [], []
    for _ in range(queries):
        seeds = rng.choice(n_mem, 20, replace=False).astype(np.int32)
        vals = rng.uniform(0.3, 1.0, 20).astype(np.float32)
        t = time.perf_counter()
        nodes, _, _ = spread_nodes(adj, seeds, vals, decay=cfg.decay, cutoff=cfg.cutoff,
                                   max_hops=cfg.max_hops, hub_power=cfg.hub_power)
        times.append(time.perf_counter() - t)
        reached.append(len(nodes))
    return {"edges": len(mem), "build_s": build, "p50_ms": 1e3 * pct(times, 50),
            "p99_ms": 1e3 * pct(times, 99), "reached": statistics.median(reached)}


def bench_api(n_mem: int, queries: int, updates: int) -> dict[str, float]:
    mem, ent, _ = synthetic(n_mem)
    root = tempfile.mkdtemp(prefix="kg-bench-")
    try:
        with KnowledgeGraph.open(root, flush_interval=None) as g:
            per = len(mem) // n_mem
            t = time.perf_counter()
            for i in range(n_mem):
                g.mention(str(i), [f"ent{j}" for j in ent[i * per : (i + 1) * per].tolist()])
            ingest = time.perf_counter() - t
            t = time.perf_counter()
            g.adjacency()
            first = time.perf_counter() - t
            rng = np.random.default_rng(2)
            times = []
            for _ in range(queries):
                seeds = {str(i): float(v) for i, v in zip(
                    rng.choice(n_mem, 20, replace=False).tolist(),
                    rng.uniform(0.3, 1.0, 20).tolist(), strict=True)}
                t = time.perf_counter()
                s = g.spread(seeds)
                s.memories_above(0.05)
                times.append(time.perf_counter() - t)
            t = time.perf_counter()
            for k in range(updates):
                g.relate(f"ent{k}", "relates_to", f"ent{k + 1}")
                g.adjacency()
            upd = (time.perf_counter() - t) / updates
            t = time.perf_counter()
            for k in range(updates):
                g.relate(f"new{k}", "relates_to", f"ent{k + 7}")
            only_relate = (time.perf_counter() - t) / updates
            st = g.stats()
        t = time.perf_counter()
        with KnowledgeGraph.open(root, flush_interval=None):
            pass
        reopen = time.perf_counter() - t
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {"ingest_s": ingest, "first_adj_s": first, "p50_ms": 1e3 * pct(times, 50),
            "p99_ms": 1e3 * pct(times, 99), "update_ms": 1e3 * upd,
            "relate_ms": 1e3 * only_relate, "reopen_s": reopen,
            "full": st["adjacency_full_builds"], "delta": st["adjacency_delta_builds"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000,1000000",
                    help="memory counts (edges = 3 per memory), comma-separated")
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--updates", type=int, default=3000)
    ap.add_argument("--skip-api", action="store_true")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print("| memories | edges | CSR full rebuild s | spread p50 ms | p99 ms | nodes reached (median) |")
    print("|---|---|---|---|---|---|")
    for n in sizes:
        r = bench_arrays(n, args.queries)
        print(f"| {n:,} | {r['edges']:,} | {r['build_s']:.3f} | {r['p50_ms']:.3f} | "
              f"{r['p99_ms']:.3f} | {r['reached']:,.0f} |")
    if not args.skip_api:
        n = sizes[0]
        r = bench_api(n, args.queries, args.updates)
        print()
        print(f"API, {n:,} memories via mention() (WAL, durability batch):")
        print("| ingest s | first adjacency s | spread() p50 ms | p99 ms | relate + adjacency() ms "
              "| relate alone ms | reopen s | full / delta builds |")
        print("|---|---|---|---|---|---|---|---|")
        print(f"| {r['ingest_s']:.2f} | {r['first_adj_s']:.3f} | {r['p50_ms']:.3f} | "
              f"{r['p99_ms']:.3f} | {r['update_ms']:.3f} | {r['relate_ms']:.3f} | "
              f"{r['reopen_s']:.2f} | {r['full']} / {r['delta']} |")


if __name__ == "__main__":
    main()
