"""Sparse codes: determinism, shape, and overlap that tracks cosine."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from soul.engines.resonance.errors import ConfigError
from soul.engines.resonance.themes.sparse import SparseCoder


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


@pytest.fixture(scope="module")
def vecs() -> np.ndarray:
    return _unit(np.random.default_rng(1).standard_normal((50, 384)))


@pytest.mark.parametrize("projection", ["hadamard", "gaussian"])
def test_encode_is_deterministic_by_seed(vecs: np.ndarray, projection: str) -> None:
    a = SparseCoder(384, seed=7, projection=projection).encode(vecs)
    b = SparseCoder(384, seed=7, projection=projection).encode(vecs)
    c = SparseCoder(384, seed=8, projection=projection).encode(vecs)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)
    # a row's code does not depend on the batch it was encoded in
    assert np.array_equal(SparseCoder(384, seed=7, projection=projection).encode(vecs[3]), a[3:4])


@pytest.mark.parametrize("projection", ["hadamard", "gaussian"])
def test_codes_have_exactly_active_sorted_distinct_bits(vecs: np.ndarray, projection: str) -> None:
    coder = SparseCoder(384, bits=16384, active=64, projection=projection)
    codes = coder.encode(vecs)
    assert codes.shape == (50, 64) and codes.dtype == np.int32
    assert (codes >= 0).all() and (codes < 16384).all()
    assert (np.diff(codes, axis=1) > 0).all()  # ascending, hence distinct


def test_odd_sizes_and_scale_invariance() -> None:
    coder = SparseCoder(100, bits=1000, active=10, seed=3)  # 100 → padded 128; 1000 bits
    x = _unit(np.random.default_rng(2).standard_normal((20, 100)))
    codes = coder.encode(x)
    assert codes.shape == (20, 10) and (codes < 1000).all() and (np.diff(codes, axis=1) > 0).all()
    assert np.array_equal(coder.encode(3.5 * x), codes)


def test_zero_and_non_finite_vectors_have_no_code(vecs: np.ndarray) -> None:
    x = vecs[:4].copy()
    x[1] = 0.0
    x[2, 5] = np.nan
    codes = SparseCoder(384).encode(x)
    assert (codes[1] == -1).all() and (codes[2] == -1).all()
    assert (codes[[0, 3]] >= 0).all()
    assert SparseCoder.overlap(codes[1], codes[0]) == 0


def test_wta_matches_a_numpy_reference_for_gaussian() -> None:
    coder = SparseCoder(64, bits=512, active=16, seed=5, projection="gaussian")
    x = _unit(np.random.default_rng(3).standard_normal((30, 64)))
    proj = x @ coder._matrix
    ref = np.sort(np.argsort(-proj, axis=1, kind="stable")[:, :16], axis=1)
    assert np.array_equal(coder.encode(x), ref)


def test_hadamard_matches_a_dense_reference() -> None:
    # the kernel's transform equals an explicit product with the Hadamard matrix
    coder = SparseCoder(6, bits=24, active=5, seed=9, projection="hadamard", rounds=2)
    p = 8
    h = np.array([[1.0]])
    while h.shape[0] < p:
        h = np.block([[h, h], [h, -h]])
    x = _unit(np.random.default_rng(4).standard_normal((10, 6)))
    xp = np.zeros((10, p))
    xp[:, :6] = x
    vals = []
    for blk in range(coder._signs.shape[2]):
        y = xp.copy()
        for rd in range(2):
            y = (y * coder._signs[rd, :, blk]) @ h.T
        vals.append(y / p)
    proj = np.concatenate(vals, axis=1)[:, :24]
    ref = np.sort(np.argsort(-proj, axis=1, kind="stable")[:, :5], axis=1)
    assert np.array_equal(coder.encode(x), ref)


@pytest.mark.parametrize("projection", ["hadamard", "gaussian"])
def test_overlap_grows_with_cosine(projection: str) -> None:
    rng = np.random.default_rng(6)
    base = _unit(rng.standard_normal((200, 384)))
    noise = _unit(rng.standard_normal((200, 384)))
    coder = SparseCoder(384, projection=projection)
    base_codes = coder.encode(base)
    means = []
    for target in (0.0, 0.3, 0.5, 0.7, 0.9, 0.97):
        # a vector at cosine `target` with base (noise is ~orthogonal in 384-d)
        other = _unit(target * base + np.sqrt(1 - target**2) * noise)
        codes = coder.encode(other)
        means.append(np.mean([SparseCoder.overlap(a, b) for a, b in zip(base_codes, codes,
                                                                        strict=True)]))
    assert all(a < b for a, b in itertools.pairwise(means)), means
    assert means[0] < 1.0  # unrelated: about active²/bits = 0.25
    assert means[-1] > 32  # near-copies share most of their bits


def test_bad_arguments_are_config_errors() -> None:
    with pytest.raises(ConfigError):
        SparseCoder(384, active=0)
    with pytest.raises(ConfigError):
        SparseCoder(384, projection="fourier")
    with pytest.raises(ConfigError, match="dimension 384"):
        SparseCoder(384).encode(np.zeros((2, 10), np.float32))
