"""The association phases' kernels (kernels/phases.py) against the numpy they replace."""

from __future__ import annotations

import numpy as np
import pytest

from soul.engines.resonance.kernels.phases import boost_members, inhibition, live_rows, top_order
from soul.engines.resonance.store.ops import FLAG_DELETED, FLAG_PENDING_EMBED


@pytest.mark.parametrize("seed", range(12))
def test_the_inhibition_kernel_damps_as_the_pairs_loop_did(seed: int) -> None:
    # lateral inhibition's pass over the window's near-duplicate pairs is one kernel call
    # (issue 26): numpy's pairs (i < j, in row order, float32 threshold), at most `most`
    # per winner, each damping by 1 - strength·cos in float64, to the bit
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    vecs = rng.normal(size=(n, 8)).astype(np.float32)
    vecs[rng.choice(n, n // 2)] = vecs[0]  # duplicates: many pairs past the threshold
    vecs /= np.linalg.norm(vecs, axis=1)[:, None]
    sims = vecs @ vecs.T
    threshold, strength, most = float(rng.uniform(0.5, 0.99)), float(rng.uniform(0, 1)), int(seed % 4)
    want, damped = np.ones(n), 0
    winners, losers = np.nonzero(sims > threshold)
    taken: dict[int, int] = {}
    for i, j in zip(winners.tolist(), losers.tolist(), strict=True):
        if j > i and taken.get(i, 0) < most:
            taken[i] = taken.get(i, 0) + 1
            want[j] *= 1.0 - strength * float(sims[i, j])
            damped += 1
    got = np.ones(n)
    assert inhibition(sims, np.float32(threshold), strength, most, got) == damped
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("seed", range(8))
def test_the_joined_rows_kernel_keeps_the_live_store_rows(seed: int) -> None:
    # the memories spreading reaches are read in the store's flags in one kernel call
    # (issue 26: flags_of's Python read per row and four masks): the positions numpy keeps
    rng = np.random.default_rng(seed)
    flags = bytearray(rng.choice([0, FLAG_DELETED, FLAG_PENDING_EMBED,
                                  FLAG_DELETED | FLAG_PENDING_EMBED], 300).astype(np.uint8).tobytes())
    as_array = np.frombuffer(bytes(flags), np.uint8)
    rows = rng.integers(0, 300, int(rng.integers(0, 80))).astype(np.int64)
    joined = np.where(rng.random(len(rows)) < 0.3, -1, rows)  # -1: a node that is no row
    keep = joined >= 0
    keep[keep] = (as_array[joined[keep]] & FLAG_DELETED) == 0
    out = np.empty(len(joined), np.int64)
    m = live_rows(joined, flags, FLAG_DELETED, out)
    assert out[:m].tolist() == np.flatnonzero(keep).tolist()
    flags.append(0)  # no view of the flags outlives a call: the store can still grow them


@pytest.mark.parametrize("seed", range(12))
def test_the_priming_kernel_is_the_boost_times_the_topic_share(seed: int) -> None:
    # session priming's factor and the score times it, in one kernel call (issue 26: a mark
    # array as long as the store, a gather, where and three array operations): numpy's
    # boost · (1 + topic_boost · share) to the bit, and the count of rows it boosts; the
    # basin's (no share) is the boost where a member, as its list of ids gave it
    rng = np.random.default_rng(seed)
    rows = rng.choice(1000, int(rng.integers(1, 300)), replace=False).astype(np.int64)
    recent = np.sort(rng.choice(1000, int(rng.integers(0, 50)), replace=False)).astype(np.int64)
    boost, topic_boost = float(rng.choice([1.3, 1.0, 0.8])), float(rng.uniform(0, 0.3))
    shares = rng.uniform(0, 1, len(rows)) * (rng.random(len(rows)) < 0.5) if seed % 3 else np.zeros(0)
    score = rng.uniform(0, 2, len(rows))
    primed = np.isin(rows, recent)
    mult = np.where(primed, boost, 1.0)
    if len(shares):
        want = mult * (1.0 + topic_boost * shares)
        boosted = int(np.count_nonzero(want > 1.0))
    else:
        want, boosted = mult, int(np.count_nonzero(primed)) if boost > 1.0 else 0
    want_score = score * want
    factor = np.empty(len(rows))
    assert boost_members(rows, recent, boost, shares, topic_boost, score, factor) == boosted
    assert factor.tobytes() == want.tobytes() and score.tobytes() == want_score.tobytes()


@pytest.mark.parametrize("seed", range(12))
def test_the_top_order_kernel_is_the_head_of_numpys_stable_argsort(seed: int) -> None:
    # full resonance reads its scores' order only as far as the top k or the inhibition
    # window (issue 26: a negation and a stable argsort of every candidate): the head of
    # numpy's stable argsort of -score, equal scores by position, NaN last
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 300))
    score = np.round(rng.uniform(-1, 2, n), 1)  # many equal scores
    if seed % 3 == 0 and n:
        score[rng.random(n) < 0.1] = np.nan
        score[0] = -0.0
    want = (-score).argsort(kind="stable")
    for m in (0, 1, 10, 50, n, n + 5):
        out = np.empty(max(m, 0), np.int64)
        got = top_order(score, m, out)
        assert got == min(m, n) and out[:got].tolist() == want[:m].tolist(), m
