"""Numba kernels of the scoring factors that read access histories and decay: one call per
factor over the candidate rows, not a few dozen numpy calls over arrays of a few rows.

Plain functions over flat arrays, no validation (the caller, `resonate.scoring_inputs`, owns
the dtypes and shapes). The histories are laid end to end: row ``i``'s kept access times are
``flat[start_i : start_i + counts[i]]``, rows in order. Each kernel is the arithmetic its
numpy form did (the same operations on the same values, in the same order; NaN and infinity
read the same way), so only `pow`, `exp` and `log` may differ from numpy's vectorised ones,
by an ulp.
"""

from __future__ import annotations

import math

import numpy as np
from numba import boolean, float64, int64, njit, void

__all__ = ["base_level", "confidence", "decayed", "guard", "relevance", "row_sums", "sigmoid", "spacing",
           "strength"]

_SIG_BASE = void(float64[::1], float64[::1], int64[::1], float64[::1], float64, float64, float64,
                 float64, float64[::1])


@njit(_SIG_BASE, cache=True, error_model="numpy")
def base_level(created: np.ndarray, flat: np.ndarray, counts: np.ndarray,
               access_count: np.ndarray, now: float, decay: float, floor: float, day: float,
               out: np.ndarray) -> None:  # pragma: no cover - compiled
    """ACT-R base-level activation ``ln Σ_j t_j^−d`` per row into ``out`` (see
    `scoring_inputs.base_level_flat`: ages in days floored at ``floor``, Petrov's
    approximation for the accesses older than the kept history)."""
    e = 1.0 - decay
    start = 0
    for i in range(created.shape[0]):
        c = created[i]
        if not math.isfinite(c):
            c = now
        a = (now - c) / day
        age_created = a if a > floor else floor  # fmax: NaN reads as the floor
        s = 0.0
        t_k = floor
        for j in range(start, start + counts[i]):
            a = (now - flat[j]) / day
            a = a if a > floor else floor
            s += a ** -decay
            if a > t_k:
                t_k = a
        start += counts[i]
        total = age_created ** -decay + s
        ac = access_count[i]
        if not math.isfinite(ac):
            ac = 0.0
        older = ac - counts[i]
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
        out[i] = math.log(min(max(total, 1e-300), 1e300))


@njit(void(float64[::1], float64, float64, float64, float64[::1]), cache=True,
      error_model="numpy")
def sigmoid(b: np.ndarray, offset: float, width: float, floor: float,
            out: np.ndarray) -> None:  # pragma: no cover - compiled
    """``floor + (1 − floor)·sigmoid(clip((b + offset)/width, −500, 500))`` per row (ActR)."""
    for i in range(b.shape[0]):
        z = (b[i] + offset) / width
        z = min(max(z, -500.0), 500.0)
        out[i] = floor + (1.0 - floor) / (1.0 + math.exp(-z))


_SIG_SPACING = void(float64[::1], float64[::1], int64[::1], float64[::1], float64, float64,
                    float64[::1])


@njit(_SIG_SPACING, cache=True, error_model="numpy")
def spacing(created: np.ndarray, flat: np.ndarray, counts: np.ndarray,
            access_count: np.ndarray, floor: float, min_accesses: float,
            out: np.ndarray) -> None:  # pragma: no cover - compiled
    """The Spacing factor per row into ``out``: ``floor + (1 − floor)/(1 + CV)`` of the gaps
    between a row's presentations (its kept accesses, and its creation first when no older
    access was dropped), sorted; 1.0 for a row with fewer than ``min_accesses`` accesses
    or no gap."""
    start = 0
    for i in range(created.shape[0]):
        n_acc = counts[i]
        keep = 1 if access_count[i] <= n_acc else 0
        times = np.empty(n_acc + keep)
        if keep:
            times[0] = created[i]
        for j in range(n_acc):
            times[keep + j] = flat[start + j]
        start += n_acc
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
        out[i] = value if access_count[i] >= min_accesses and k > 0 else 1.0


_SIG_DECAYED = void(float64[::1], int64[::1], float64[::1], float64[::1], float64[::1], float64,
                    float64, float64, float64[::1], float64[::1], float64[::1], int64[::1],
                    int64[::1])


@njit(_SIG_DECAYED, cache=True, error_model="numpy")
def decayed(last_active: np.ndarray, kind: np.ndarray, mu: np.ndarray, var: np.ndarray,
            rates: np.ndarray, now: float, day: float, prior_var: float, idle: np.ndarray,
            mu_out: np.ndarray, var_out: np.ndarray, tier: np.ndarray,
            kind_out: np.ndarray) -> None:  # pragma: no cover - compiled
    """Per row: idle days since last active, the confidence (mean, variance) decayed over
    them at the rate of the row's kind (see `Confidence.decay`), the tier those give
    (`scoring_inputs.tier_index`: 0 hot, 1 warm, 2 cool, 3 cold), and the kind clipped to
    the known ones (an index into a per-kind table)."""
    top = rates.shape[0] - 1
    for i in range(last_active.shape[0]):
        last = last_active[i]
        if not math.isfinite(last):
            last = now
        d = now - last
        d = (d if (d > 0.0 or d != d) else 0.0) / day
        idle[i] = d
        k = kind[i]
        k = 0 if k < 0 else top if k > top else k
        kind_out[i] = k
        keep = math.exp(-rates[k] * d)
        m = mu[i]
        mu_out[i] = (m if math.isfinite(m) else 0.0) * keep
        v = var[i]
        v = v if math.isfinite(v) else prior_var
        v = v if (v > 0.0 or v != v) else 0.0
        var_out[i] = prior_var + (v - prior_var) * keep
        t = 0 if d < 1.0 else 1 if d < 7.0 else 2
        m = mu_out[i]
        tier[i] = 3 if (m if math.isfinite(m) else 0.0) < 0.1 or d >= 30.0 else t


@njit(void(float64[:, ::1]), cache=True, error_model="numpy")
def guard(table: np.ndarray) -> None:  # pragma: no cover - compiled
    """In place: a value that is not finite reads 1.0 (neutral), then it is clipped to
    [0, 1e6] (numpy's maximum/minimum: −0.0 stays −0.0)."""
    for i in range(table.shape[0]):
        for j in range(table.shape[1]):
            v = table[i, j]
            if not math.isfinite(v):
                v = 1.0
            v = v if v >= 0.0 else 0.0
            table[i, j] = v if v <= 1e6 else 1e6


@njit(void(float64[:, ::1], float64[::1]), cache=True, error_model="numpy")
def row_sums(table: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover - compiled
    """``out`` = the rows of ``table`` added one after the other (``np.add.accumulate`` over
    axis 0, its last row: the same additions in the same order)."""
    for j in range(table.shape[1]):
        out[j] = table[0, j]
    for i in range(1, table.shape[0]):
        for j in range(table.shape[1]):
            out[j] += table[i, j]


@njit(void(float64[::1], float64, float64, float64[::1]), cache=True, error_model="numpy")
def strength(observations: np.ndarray, floor: float, half: float,
             out: np.ndarray) -> None:  # pragma: no cover - compiled
    """The Strength factor: ``floor + (1 − floor)·n/(n + half)``, n the observations (≥ 0)."""
    for i in range(observations.shape[0]):
        n = observations[i]
        n = n if (n >= 0.0 or n != n) else 0.0
        out[i] = floor + (1.0 - floor) * n / (n + half)


@njit(void(float64[::1], float64[::1], float64, float64, float64[::1]), cache=True,
      error_model="numpy")
def confidence(mu: np.ndarray, var: np.ndarray, floor: float, doubt: float,
               out: np.ndarray) -> None:  # pragma: no cover - compiled
    """The Confidence factor: ``floor + (1 − floor)·clip(mu − doubt·sqrt(var), 0, 1)``."""
    for i in range(mu.shape[0]):
        c = mu[i] - doubt * math.sqrt(var[i])
        if c == c:  # numpy's maximum/minimum: NaN stays NaN
            c = c if c >= 0.0 else 0.0
            c = c if c <= 1.0 else 1.0
        out[i] = floor + (1.0 - floor) * c


@njit(void(float64[::1], boolean, float64[::1]), cache=True, error_model="numpy")
def relevance(r: np.ndarray, cosine: bool, out: np.ndarray) -> None:  # pragma: no cover
    """The Relevance factor: a non-finite relevance reads 0; a cosine as clip((r + 1)/2,
    0, 1), a unit relevance as max(r, 0)."""
    for i in range(r.shape[0]):
        v = r[i]
        if not math.isfinite(v):
            v = 0.0
        if cosine:
            v = (v + 1.0) / 2.0
            v = v if v >= 0.0 else 0.0
            v = v if v <= 1.0 else 1.0
        else:
            v = v if v >= 0.0 else 0.0
        out[i] = v
