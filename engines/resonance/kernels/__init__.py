"""Numba kernels of the resonance engine (importing this package compiles or loads them).

Kept apart from the API modules so that `import soul.engines.resonance` never pays for numba:
only `resonance.bm25` imports this package, and only when a BM25 index is built.
"""

from __future__ import annotations

from .bm25 import bm25_accumulate, csr_merge, topk_sorted

__all__ = ["bm25_accumulate", "csr_merge", "topk_sorted"]
