"""Sparse codes: a memory's vector as `active` of `bits` features (the seed's 64 of 16,384).

A code is the set of the `active` largest coordinates of a fixed random projection of the
vector to `bits` dimensions (winner-take-all, as in the fly olfactory circuit and FlyHash).
Two vectors at small angle have correlated projections, so their winners overlap; the
expected overlap grows with their cosine (tested: monotone on average), and for unrelated
vectors it is about active²/bits = 0.25 bits.

Two projections, both seeded and deterministic:

- ``"hadamard"`` (default): per block of P = 512 outputs (384-d input zero-padded), three
  rounds of random signs then a Walsh–Hadamard transform, H·D3·H·D2·H·D1·x — the structured
  "fast JL" transform that Andoni et al. (2015) show behaves like a Gaussian projection for
  cross-polytope LSH. 32 blocks give 16,384 outputs for ~0.44 M additions per vector.
- ``"gaussian"``: a dense float32 (dim × bits) Gaussian matrix (25 MB at 384 × 16,384),
  one BLAS product per chunk of rows: 6.3 M multiply-adds per vector.

`benchmarks/cortical.py --projections` compares both (encode rate, neighbour recall through
the cortical index); the numbers are in docs/benchmarks.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError

__all__ = ["SparseCoder", "SparseCoderParams"]

_CHUNK = 256  # rows per projection step: (256 × 16,384) float32 = 16 MB of scratch


@dataclass(frozen=True)
class SparseCoderParams:
    """What fixes a coder's codes; stored beside a saved index to detect a mismatch."""

    dim: int
    bits: int
    active: int
    seed: int
    projection: str
    rounds: int


class SparseCoder:
    """Encodes unit vectors to sorted arrays of `active` feature ids in [0, bits)."""

    def __init__(
        self, dim: int, *, bits: int = 16384, active: int = 64, seed: int = 0,
        projection: str = "hadamard", rounds: int = 3,
    ) -> None:
        if dim < 1 or bits < 2 or not 1 <= active < bits:
            raise ConfigError(
                f"SparseCoder needs dim >= 1, bits >= 2 and 1 <= active < bits; "
                f"got dim={dim}, bits={bits}, active={active}"
            )
        if bits > np.iinfo(np.int32).max:
            raise ConfigError(f"bits={bits} does not fit the int32 codes")
        if projection not in ("hadamard", "gaussian"):
            raise ConfigError(
                f"unknown projection {projection!r}; use 'hadamard' (fast) or 'gaussian'"
            )
        if rounds < 1:
            raise ConfigError(f"rounds must be >= 1, got {rounds}")
        self.params = SparseCoderParams(dim, bits, active, int(seed), projection, rounds)
        self.dim, self.bits, self.active = dim, bits, active
        rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x5A11C0DE]))
        if projection == "hadamard":
            self._p = 1 << max(1, math.ceil(math.log2(dim)))  # padded width, power of two
            n_blocks = -(-bits // self._p)
            self._signs = np.where(
                rng.random((rounds, self._p, n_blocks)) < 0.5, -1.0, 1.0
            ).astype(np.float32)
            self._matrix: np.ndarray | None = None
        else:
            self._p = dim
            self._signs = np.zeros((0, 0, 0), np.float32)
            self._matrix = rng.standard_normal((dim, bits), dtype=np.float32)

    def __repr__(self) -> str:
        p = self.params
        return (f"SparseCoder(dim={p.dim}, bits={p.bits}, active={p.active}, seed={p.seed}, "
                f"projection={p.projection!r})")

    def encode(self, vectors: np.ndarray) -> np.ndarray:
        """(n, active) int32 codes, each row's feature ids ascending. A zero or non-finite
        vector (an embedder fallback) has no direction: its row is all -1 (no code).

        Vectors need not be unit length: winner-take-all only compares a row's own
        projections, so scaling a vector does not change its code.
        """
        x = np.asarray(vectors, dtype=np.float32)
        if x.ndim == 1:
            x = x.reshape(1, -1)
        if x.ndim != 2 or x.shape[1] != self.dim:
            raise ConfigError(
                f"encode expects vectors of dimension {self.dim}, got shape {np.shape(vectors)}"
            )
        n = x.shape[0]
        out = np.full((n, self.active), -1, dtype=np.int32)
        valid = np.isfinite(x).all(axis=1) & (np.abs(x).max(axis=1, initial=0.0) > 0)
        rows = np.flatnonzero(valid)
        if rows.size == 0:
            return out
        from ..kernels.cortical import hadamard_project_topk, wta_topk
        from ..recall.dedup import single_thread_blas

        codes = np.empty((rows.size, self.active), dtype=np.int32)
        for s in range(0, rows.size, _CHUNK):
            part = rows[s : s + _CHUNK]
            if self._matrix is None:
                hadamard_project_topk(
                    np.ascontiguousarray(x[part]), self._signs, self.bits, self.active,
                    codes[s : s + part.size],
                )
            else:
                with single_thread_blas():  # a 256-row product is too small to share cores
                    proj = np.ascontiguousarray(x[part] @ self._matrix)
                wta_topk(proj, self.active, codes[s : s + part.size])
        out[rows] = codes
        return out

    @staticmethod
    def overlap(a: np.ndarray, b: np.ndarray) -> int:
        """How many feature ids two codes share (-1 entries, "no code", never count)."""
        a = np.asarray(a).reshape(-1)
        b = np.asarray(b).reshape(-1)
        return int(np.intersect1d(a[a >= 0], b[b >= 0], assume_unique=True).size)
