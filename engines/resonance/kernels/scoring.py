"""Numba kernels of the scoring factors that read access histories and decay: one call per
factor over the candidate rows, not a few dozen numpy calls over arrays of a few rows.

Plain functions over flat arrays, no validation (the caller, `resonate.scoring_inputs`, owns
the dtypes and shapes). The histories are laid end to end: row ``i``'s kept access times are
``flat[start_i : start_i + counts[i]]``, rows in order. Each kernel is the arithmetic its
numpy form did (the same operations on the same values, in the same order; NaN and infinity
read the same way), so only `pow`, `exp` and `log` may differ from numpy's vectorised ones,
by an ulp.

Each factor's arithmetic for one row is written once, in a `_..._of` function; the per-factor
kernels loop over the rows with it, and `core` computes every such factor a query has on in
one pass over the rows (what a resonance query calls: one kernel call, not seven), so both
give the same values bit for bit. `guard_rows` and `weighted_sums` are combine's stages
around numpy's log (kept: its SIMD log is what the scores were computed with).
`stale_histories` and `gather_histories` are the access-history cache's bookkeeping
(`resonate.scoring_cache`): which rows to read again, then the kept times laid end to end;
`key_sets` the meta cache's; `gather_columns` reads the scored rows' columns in the State's
own arrays (`resonate.scoring_inputs.Inputs`).
"""

from __future__ import annotations

import math

import numpy as np
from numba import boolean, float64, int32, int64, njit, types, void

from .columns import gather_columns  # (read through this module by its callers)

__all__ = ["CORE", "base_level", "confidence", "core", "decayed", "gather_columns",
           "gather_histories", "guard", "guard_rows", "key_sets", "relevance", "sigmoid", "spacing",
           "stale_histories", "strength", "weighted_sums"]

# The factors `core` computes, in the order of its ``slots`` argument.
CORE = ("Relevance", "ActR", "Strength", "Confidence", "Kind", "Spacing", "Tier")


@njit(error_model="numpy")
def _base_level_of(created: float, flat: np.ndarray, start: int, count: int,
                   access_count: float, now: float, decay: float, floor: float,
                   day: float) -> float:  # pragma: no cover - compiled
    """One row's ACT-R base level (see `base_level`)."""
    e = 1.0 - decay
    c = created
    if not math.isfinite(c):
        c = now
    a = (now - c) / day
    age_created = a if a > floor else floor  # fmax: NaN reads as the floor
    s = 0.0
    t_k = floor
    for j in range(start, start + count):
        a = (now - flat[j]) / day
        a = a if a > floor else floor
        s += a ** -decay
        if a > t_k:
            t_k = a
    total = age_created ** -decay + s
    ac = access_count
    if not math.isfinite(ac):
        ac = 0.0
    older = ac - count
    if older > 0.0:
        t_n = age_created if age_created > t_k else t_k
        span = t_n - t_k
        spread = (t_n ** e - t_k ** e) / (e * (span if span > 0 else 1.0))
        each = spread if span > 1e-12 * t_n else t_k ** -decay
        if not math.isfinite(each):
            each = 0.0
        total = total + older * each
    if not math.isfinite(total):
        total = 0.0
    return math.log(min(max(total, 1e-300), 1e300))


@njit(error_model="numpy")
def _sigmoid_of(b: float, offset: float, width: float,
                floor: float) -> float:  # pragma: no cover - compiled
    z = (b + offset) / width
    z = min(max(z, -500.0), 500.0)
    return floor + (1.0 - floor) / (1.0 + math.exp(-z))


@njit(error_model="numpy")
def _spacing_of(created: float, flat: np.ndarray, start: int, n_acc: int,
                access_count: float, floor: float,
                min_accesses: float) -> float:  # pragma: no cover - compiled
    """One row's Spacing factor (see `spacing`)."""
    keep = 1 if access_count <= n_acc else 0
    times = np.empty(n_acc + keep)
    if keep:
        times[0] = created
    for j in range(n_acc):
        times[keep + j] = flat[start + j]
    for j in range(times.shape[0]):
        if not math.isfinite(times[j]):
            times[j] = 0.0
    for j in range(1, times.shape[0]):
        if times[j] < times[j - 1]:  # rare (clock skew): in time order
            times.sort()
            break
    k = times.shape[0] - 1 if times.shape[0] > 1 else 0
    s1 = 0.0
    s2 = 0.0
    for j in range(1, times.shape[0]):
        gap = times[j] - times[j - 1]
        s1 += gap
        s2 += gap * gap
    kk = k if k > 1 else 1.0
    mean = s1 / kk
    var = s2 / kk - mean * mean
    sd = math.sqrt(var if (var > 0.0 or var != var) else 0.0)
    cv = sd / mean if mean > 0 else 0.0
    if not math.isfinite(cv):
        cv = 0.0
    value = floor + (1.0 - floor) / (1.0 + cv)
    return value if access_count >= min_accesses and k > 0 else 1.0


@njit(error_model="numpy")
def _decayed_of(last_active: float, kind: int, mu: float, var: float, rates: np.ndarray,
                now: float, day: float,
                prior_var: float) -> tuple[float, int, float, float, int]:  # pragma: no cover
    """One row's (idle days, kind clipped, decayed mean, decayed variance, tier)."""
    top = rates.shape[0] - 1
    last = last_active
    if not math.isfinite(last):
        last = now
    d = now - last
    d = (d if (d > 0.0 or d != d) else 0.0) / day
    k = kind
    k = 0 if k < 0 else top if k > top else k
    keep = math.exp(-rates[k] * d)
    m_out = (mu if math.isfinite(mu) else 0.0) * keep
    v = var if math.isfinite(var) else prior_var
    v = v if (v > 0.0 or v != v) else 0.0
    v_out = prior_var + (v - prior_var) * keep
    t = 0 if d < 1.0 else 1 if d < 7.0 else 2
    tier = 3 if (m_out if math.isfinite(m_out) else 0.0) < 0.1 or d >= 30.0 else t
    return d, k, m_out, v_out, tier


@njit(error_model="numpy")
def _strength_of(n: float, floor: float, half: float) -> float:  # pragma: no cover - compiled
    n = n if (n >= 0.0 or n != n) else 0.0
    return floor + (1.0 - floor) * n / (n + half)


@njit(error_model="numpy")
def _confidence_of(mu: float, var: float, floor: float,
                   doubt: float) -> float:  # pragma: no cover - compiled
    c = mu - doubt * math.sqrt(var)
    if c == c:  # numpy's maximum/minimum: NaN stays NaN
        c = c if c >= 0.0 else 0.0
        c = c if c <= 1.0 else 1.0
    return floor + (1.0 - floor) * c


@njit(error_model="numpy")
def _relevance_of(v: float, cosine: bool) -> float:  # pragma: no cover - compiled
    if not math.isfinite(v):
        v = 0.0
    if cosine:
        v = (v + 1.0) / 2.0
        v = v if v >= 0.0 else 0.0
        v = v if v <= 1.0 else 1.0
    else:
        v = v if v >= 0.0 else 0.0
    return v



@njit(cache=True, error_model="numpy")  # compiled on first use: not on a query's path
def base_level(created: np.ndarray, flat: np.ndarray, counts: np.ndarray,
               access_count: np.ndarray, now: float, decay: float, floor: float, day: float,
               out: np.ndarray) -> None:  # pragma: no cover - compiled
    """ACT-R base-level activation ``ln Σ_j t_j^−d`` per row into ``out`` (see
    `scoring_inputs.base_level_flat`: ages in days floored at ``floor``, Petrov's
    approximation for the accesses older than the kept history)."""
    start = 0
    for i in range(created.shape[0]):
        out[i] = _base_level_of(created[i], flat, start, counts[i], access_count[i], now, decay,
                                floor, day)
        start += counts[i]


@njit(cache=True, error_model="numpy")  # compiled on first use: not on a query's path
def sigmoid(b: np.ndarray, offset: float, width: float, floor: float,
            out: np.ndarray) -> None:  # pragma: no cover - compiled
    """``floor + (1 − floor)·sigmoid(clip((b + offset)/width, −500, 500))`` per row (ActR)."""
    for i in range(b.shape[0]):
        out[i] = _sigmoid_of(b[i], offset, width, floor)



@njit(cache=True, error_model="numpy")  # compiled on first use: not on a query's path
def spacing(created: np.ndarray, flat: np.ndarray, counts: np.ndarray,
            access_count: np.ndarray, floor: float, min_accesses: float,
            out: np.ndarray) -> None:  # pragma: no cover - compiled
    """The Spacing factor per row into ``out``: ``floor + (1 − floor)/(1 + CV)`` of the gaps
    between a row's presentations (its kept accesses, and its creation first when no older
    access was dropped), sorted; 1.0 for a row with fewer than ``min_accesses`` accesses
    or no gap."""
    start = 0
    for i in range(created.shape[0]):
        out[i] = _spacing_of(created[i], flat, start, counts[i], access_count[i], floor,
                             min_accesses)
        start += counts[i]



@njit(cache=True, error_model="numpy")  # compiled on first use: not on a query's path
def decayed(last_active: np.ndarray, kind: np.ndarray, mu: np.ndarray, var: np.ndarray,
            rates: np.ndarray, now: float, day: float, prior_var: float, idle: np.ndarray,
            mu_out: np.ndarray, var_out: np.ndarray, tier: np.ndarray,
            kind_out: np.ndarray) -> None:  # pragma: no cover - compiled
    """Per row: idle days since last active, the confidence (mean, variance) decayed over
    them at the rate of the row's kind (see `Confidence.decay`), the tier those give
    (`scoring_inputs.tier_index`: 0 hot, 1 warm, 2 cool, 3 cold), and the kind clipped to
    the known ones (an index into a per-kind table)."""
    for i in range(last_active.shape[0]):
        d, k, m, v, t = _decayed_of(last_active[i], kind[i], mu[i], var[i], rates, now, day,
                                    prior_var)
        idle[i] = d
        kind_out[i] = k
        mu_out[i] = m
        var_out[i] = v
        tier[i] = t


@njit(boolean(float64[:, ::1], int64), cache=True, error_model="numpy")
def guard_rows(table: np.ndarray, m: int) -> bool:  # pragma: no cover - compiled
    """`guard` over the first ``m`` rows of ``table``; whether every value is then > 0 (no
    factor vetoes: the log needs no divide-by-zero guard)."""
    positive = True
    for i in range(m):
        for j in range(table.shape[1]):
            v = table[i, j]
            if not math.isfinite(v):
                v = 1.0
            v = v if v >= 0.0 else 0.0
            v = v if v <= 1e6 else 1e6
            table[i, j] = v
            if not v > 0.0:
                positive = False
    return positive


@njit(cache=True, error_model="numpy")  # compiled on first use: not on a query's path
def guard(table: np.ndarray) -> None:  # pragma: no cover - compiled
    """In place: a value that is not finite reads 1.0 (neutral), then it is clipped to
    [0, 1e6] (numpy's maximum/minimum: −0.0 stays −0.0)."""
    guard_rows(table, table.shape[0])


@njit(void(float64[:, ::1], float64[::1], float64, float64[::1]), cache=True,
      error_model="numpy")
def weighted_sums(logs: np.ndarray, weights: np.ndarray, cap: float,
                  out: np.ndarray) -> None:  # pragma: no cover - compiled
    """``out`` = Σ_i weights[i]·logs[i] per column, the rows added one after the other (as
    `row_sums` of the weighted rows; a weight of 1 leaves a log as it is), then capped at
    ``cap`` (numpy's minimum: NaN stays NaN)."""
    for j in range(logs.shape[1]):
        out[j] = logs[0, j] * weights[0]
    for i in range(1, logs.shape[0]):
        w = weights[i]
        for j in range(logs.shape[1]):
            out[j] += logs[i, j] * w
    for j in range(logs.shape[1]):
        if out[j] > cap:
            out[j] = cap


@njit(cache=True, error_model="numpy")  # compiled on first use: not on a query's path
def strength(observations: np.ndarray, floor: float, half: float,
             out: np.ndarray) -> None:  # pragma: no cover - compiled
    """The Strength factor: ``floor + (1 − floor)·n/(n + half)``, n the observations (≥ 0)."""
    for i in range(observations.shape[0]):
        out[i] = _strength_of(observations[i], floor, half)


@njit(cache=True, error_model="numpy")  # compiled on first use: not on a query's path
def confidence(mu: np.ndarray, var: np.ndarray, floor: float, doubt: float,
               out: np.ndarray) -> None:  # pragma: no cover - compiled
    """The Confidence factor: ``floor + (1 − floor)·clip(mu − doubt·sqrt(var), 0, 1)``."""
    for i in range(mu.shape[0]):
        out[i] = _confidence_of(mu[i], var[i], floor, doubt)


@njit(cache=True, error_model="numpy")  # compiled on first use: not on a query's path
def relevance(r: np.ndarray, cosine: bool, out: np.ndarray) -> None:  # pragma: no cover
    """The Relevance factor: a non-finite relevance reads 0; a cosine as clip((r + 1)/2,
    0, 1), a unit relevance as max(r, 0)."""
    for i in range(r.shape[0]):
        out[i] = _relevance_of(r[i], cosine)


_SIG_CORE = void(float64[::1], float64[:, ::1], int64[::1], float64[::1], int64[::1],
                 float64[::1], float64[::1], float64[::1], float64[::1], float64, float64,
                 float64, float64[:, ::1], int64[::1])


@njit(_SIG_CORE, cache=True, error_model="numpy")
def core(rel: np.ndarray, numbers: np.ndarray, kind: np.ndarray, flat: np.ndarray,
         counts: np.ndarray, rates: np.ndarray, params: np.ndarray, kind_table: np.ndarray,
         tier_table: np.ndarray, now: float, day: float, prior_var: float, table: np.ndarray,
         slots: np.ndarray) -> None:  # pragma: no cover - compiled
    """The `CORE` factors into the rows ``slots`` of ``table`` (-1: that factor is off), one
    pass over the rows. ``numbers``: the rows' created, access count, observations, last
    active, mu, var; ``params``: Relevance's cosine flag (1/0), ActR's decay, age floor in
    days, offset, width and floor, Strength's floor and half, Confidence's floor and doubt,
    Spacing's floor and minimum accesses; ``kind_table``/``tier_table``: Kind's and Tier's
    values by kind and by tier. The values are the per-factor kernels' to the bit."""
    s_rel, s_actr, s_str, s_conf = slots[0], slots[1], slots[2], slots[3]
    s_kind, s_space, s_tier = slots[4], slots[5], slots[6]
    cosine = params[0] != 0.0
    decays = s_conf >= 0 or s_kind >= 0 or s_tier >= 0
    start = 0
    for i in range(rel.shape[0]):
        c, ac, count = numbers[0, i], numbers[1, i], counts[i]
        if s_rel >= 0:
            table[s_rel, i] = _relevance_of(rel[i], cosine)
        if s_actr >= 0:
            b = _base_level_of(c, flat, start, count, ac, now, params[1], params[2], day)
            table[s_actr, i] = _sigmoid_of(b, params[3], params[4], params[5])
        if s_str >= 0:
            table[s_str, i] = _strength_of(numbers[2, i], params[6], params[7])
        if decays:
            _, k, m, v, t = _decayed_of(numbers[3, i], kind[i], numbers[4, i], numbers[5, i],
                                        rates, now, day, prior_var)
            if s_conf >= 0:
                table[s_conf, i] = _confidence_of(m, v, params[8], params[9])
            if s_kind >= 0:
                table[s_kind, i] = kind_table[k]
            if s_tier >= 0:
                table[s_tier, i] = tier_table[t]
        if s_space >= 0:
            table[s_space, i] = _spacing_of(c, flat, start, count, ac, params[10], params[11])
        start += count


@njit(int64(int64[::1], float64[::1], int64[::1], int64[::1]), cache=True, nogil=True)
def stale_histories(rows: np.ndarray, counts: np.ndarray, seen: np.ndarray,
                    out: np.ndarray) -> int:  # pragma: no cover - compiled
    """The positions ``i`` of the rows whose kept access history is stale (the access count
    it was read at, ``seen[rows[i]]``, is not ``counts[i]``) into ``out``; how many
    (`scoring_cache.AccessHistories`)."""
    m = 0
    for i in range(rows.shape[0]):
        if seen[rows[i]] != counts[i]:
            out[m] = i
            m += 1
    return m


@njit(int64(int64[::1], int64[::1], int64[::1], float64[:, ::1], float64[::1], int64[::1]),
      cache=True, nogil=True)
def gather_histories(rows: np.ndarray, slot: np.ndarray, kept: np.ndarray,
                     times: np.ndarray, flat: np.ndarray,
                     counts: np.ndarray) -> int:  # pragma: no cover - compiled
    """The kept access times of ``rows`` (row r's: the first ``kept[slot[r]]`` of
    ``times[slot[r]]``) laid end to end into ``flat``, how many per row into ``counts``;
    returns how many in all."""
    at = 0
    for i in range(rows.shape[0]):
        s = slot[rows[i]]
        c = kept[s]
        counts[i] = c
        for j in range(c):
            flat[at] = times[s, j]
            at += 1
    return at


@njit(types.UniTuple(int64, 3)(int32[::1], int64[::1], int32[::1], int64[::1]), cache=True,
      nogil=True)
def key_sets(key_of: np.ndarray, rows: np.ndarray, ids: np.ndarray,
             unread: np.ndarray) -> tuple[int, int, int]:  # pragma: no cover - compiled
    """``ids[i] = key_of[rows[i]]`` (a row's meta key-set id, -1: not read yet), the positions
    of the rows not read yet into ``unread``; returns (how many, the smallest id, the
    largest; 0 and -1 for no rows) (`scoring_cache.MetaCache`)."""
    m = 0
    lo = 0
    hi = -1
    for i in range(rows.shape[0]):
        k = key_of[rows[i]]
        ids[i] = k
        if k < 0:
            unread[m] = i
            m += 1
        if i == 0 or k < lo:
            lo = k
        if i == 0 or k > hi:
            hi = k
    return m, lo, hi
