"""Numba kernels of the resonance engine, one module per user (importing one compiles or
loads only its own kernels).

Kept apart from the API modules so that `import soul.engines.resonance` never pays for numba:
`resonance.bm25` imports `kernels.bm25` when a BM25 index is built, and recovery imports
`kernels.wal` only for a log large enough to be worth it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["bm25_accumulate", "csr_merge", "topk_sorted"]


def __getattr__(name: str) -> Any:
    # The BM25 kernels by their old path, loaded on first use only.
    if name in __all__:
        from . import bm25

        return getattr(bm25, name)
    raise AttributeError(name)
