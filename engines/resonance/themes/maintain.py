"""Theme maintenance: exact refresh, 2-means splits of oversized themes, near-duplicate merges.

Optimistic concurrency: a step snapshots a theme's member array under the lock of the theme
index's tables (`ThemeTables`, tables.py), does its slow part (reading vectors, 2-means)
without it, and applies the result under the lock only if the theme still holds the very same
array (member arrays are replaced, never mutated, on change); otherwise the step is skipped
and counted, and the next run retries it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from .tables import ThemeTables

__all__ = ["run_maintenance", "two_means"]

_REFRESH_PER_RUN = 4096  # dirty themes refreshed per run: bounds one run's vector reads
_MERGE_CHUNK = 1024  # centroid rows per block of the pairwise similarity


def _unit(x: np.ndarray) -> np.ndarray:
    return x / max(float(np.linalg.norm(x)), 1e-12)


def two_means(vecs: np.ndarray, iters: int = 10) -> np.ndarray:
    """Spherical 2-means, deterministic: seeds are the member farthest from the centroid
    and the member farthest from that one. Returns a bool label per row (True: 2nd half)."""
    c = _unit(vecs.sum(axis=0))
    a = int(np.argmin(vecs @ c))
    b = int(np.argmin(vecs @ vecs[a]))
    c1, c2 = vecs[a].astype(np.float64), vecs[b].astype(np.float64)
    label = np.zeros(vecs.shape[0], bool)
    for i in range(iters):
        new = vecs @ c2 > vecs @ c1
        if i and np.array_equal(new, label):
            break
        label = new
        if label.all() or not label.any():
            break
        c1, c2 = _unit(vecs[~label].sum(axis=0)), _unit(vecs[label].sum(axis=0))
    return label


def _vectors(vectors_of: Callable[[np.ndarray], np.ndarray], rows: np.ndarray,
             dim: int) -> np.ndarray:
    vecs = np.asarray(vectors_of(rows), dtype=np.float64).reshape(-1, dim)
    return vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)


def _representative(vecs: np.ndarray, rows: np.ndarray) -> int:
    return int(rows[int(np.argmax(vecs @ _unit(vecs.sum(axis=0))))])


def run_maintenance(tables: ThemeTables, vectors_of: Callable[[np.ndarray], np.ndarray],
                    budget: int, *, max_size: int, min_size: int,
                    merge_threshold: float) -> dict[str, Any]:
    """One maintenance run over a theme index's tables: themes above `max_size` split unless
    a half would be below `min_size`, pairs at centroid cosine >= `merge_threshold` merged
    (ThemeConfig's fields of those names; ThemeIndex.maintain describes the report)."""
    report: dict[str, Any] = {"split": [], "merged": [], "refreshed": 0, "skipped": 0,
                              "unsplittable": []}
    # 1. exact sums and representatives of themes that changed since the last run
    with tables.lock:
        dirty = sorted(tables.dirty)[:_REFRESH_PER_RUN]
        snaps = {t: tables.members[t] for t in dirty if t in tables.members}
    for t, rows in snaps.items():
        vecs = _vectors(vectors_of, rows, tables.dim)
        rep = _representative(vecs, rows)
        with tables.lock:
            if tables.members.get(t) is not rows:
                report["skipped"] += 1
                continue
            tables.sums[t] = vecs.sum(axis=0)
            tables.rep[t] = rep
            tables.refresh(np.array([t]))
            tables.dirty.discard(t)
            report["refreshed"] += 1
    # 2. split oversized themes, biggest first
    with tables.lock:
        live = tables.live()
        big = live[tables.sizes[live] > max_size]
        big = big[np.argsort(-tables.sizes[big], kind="stable")][:budget].tolist()
        snaps = {t: tables.members[t] for t in big}
    for t, rows in snaps.items():
        vecs = _vectors(vectors_of, rows, tables.dim)
        label = two_means(vecs)
        if min(label.sum(), (~label).sum()) < min_size:
            report["unsplittable"].append(t)
            continue
        a_rows, b_rows = rows[~label], rows[label]
        a_vecs, b_vecs = vecs[~label], vecs[label]
        with tables.lock:
            if tables.members.get(t) is not rows:
                report["skipped"] += 1
                continue
            new = tables.n
            tables.grow(new + 1)
            tables.n = new + 1
            tables.alive[new] = 1
            tables.members[new] = b_rows
            tables.theme_of[b_rows] = new
            tables.members[t] = a_rows
            for tid, r, v in ((t, a_rows, a_vecs), (new, b_rows, b_vecs)):
                tables.sizes[tid] = r.size
                tables.sums[tid] = v.sum(axis=0)
                tables.rep[tid] = _representative(v, r)
            tables.refresh(np.array([t, new]))
            tables.dirty.discard(t)
        report["split"].append((t, new))
    # 3. merge near-duplicate themes, most similar first, each theme once per run
    left = budget - len(report["split"])
    if left > 0:
        with tables.lock:
            live = tables.live()
            cent, sizes = tables.cent[live], tables.sizes[live]
            pairs: list[tuple[float, int, int]] = []
            for s in range(0, live.size, _MERGE_CHUNK):
                sim = cent[s : s + _MERGE_CHUNK] @ cent.T
                ii, jj = np.nonzero(sim >= merge_threshold)
                for i, j in zip((ii + s).tolist(), jj.tolist(), strict=True):
                    if i < j and sizes[i] + sizes[j] <= max_size:
                        pairs.append((float(sim[i - s, j]), int(live[i]), int(live[j])))
            pairs.sort(key=lambda p: (-p[0], p[1], p[2]))
            used: set[int] = set()
            for _, a, b in pairs:
                if len(report["merged"]) >= left:
                    break
                if a in used or b in used:
                    continue
                if tables.sizes[b] > tables.sizes[a]:
                    a, b = b, a  # the bigger theme keeps its id
                used.update((a, b))
                gone = tables.members.pop(b)
                tables.members[a] = np.concatenate([tables.members[a], gone])
                tables.theme_of[gone] = a
                tables.sums[a] += tables.sums[b]
                tables.sizes[a] += tables.sizes[b]
                tables.sizes[b] = 0
                tables.alive[b] = 0
                tables.dirty.discard(b)
                tables.dirty.add(a)  # representative recomputed next run
                tables.refresh(np.array([a]))
                report["merged"].append((a, b))
    return report
