"""Resonance: a durable, hybrid-recall memory engine (WAL store, embedder, HNSW + BM25)."""
