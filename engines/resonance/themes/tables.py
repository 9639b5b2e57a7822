"""The theme index's tables: what it knows of each theme and row, under one lock.

`ThemeIndex` (themes.py) assigns rows and retrieves over them; maintenance (maintain.py)
splits, merges and refreshes them. Both work on this class, so neither reaches into the other.

Thread safety: `lock` guards every table; member arrays are never mutated in place (replaced
on change), so a reader's snapshot stays valid after it lets go of the lock. The methods
below are called with the lock held.
"""

from __future__ import annotations

import threading

import numpy as np

__all__ = ["ThemeTables"]


class ThemeTables:
    """Per theme: Σ member vectors, unit centroid, size, liveness, representative row and
    member rows; per row: its theme; and the themes changed since the last maintenance."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.lock = threading.Lock()
        self.sums = np.zeros((0, dim), np.float64)  # Σ member vectors per theme
        self.cent = np.zeros((0, dim), np.float32)  # unit centroids
        self.sizes = np.zeros(0, np.int64)
        self.alive = np.zeros(0, np.uint8)
        self.rep = np.zeros(0, np.int64)
        self.n = 0  # theme ids issued (dead ones are never reused)
        self.members: dict[int, np.ndarray] = {}
        self.theme_of = np.zeros(0, np.int64)  # row → theme, -1 if none
        # themes whose members changed since the last maintenance: their sums (removals are
        # not subtracted: remove() gets no vectors) and representatives are recomputed there
        self.dirty: set[int] = set()

    def live(self) -> np.ndarray:
        """The ids of the live themes, ascending."""
        return np.flatnonzero(self.alive[: self.n])

    def grow(self, n_themes: int) -> None:
        """Room for `n_themes` themes in the per-theme tables."""
        if n_themes <= self.sizes.shape[0]:
            return
        cap = max(n_themes, 2 * self.sizes.shape[0], 64)
        for name in ("sums", "cent", "sizes", "alive", "rep"):
            old = getattr(self, name)
            new = np.zeros((cap, *old.shape[1:]), old.dtype)
            new[: old.shape[0]] = old
            setattr(self, name, new)

    def add_members(self, rows: np.ndarray, themes: np.ndarray) -> None:
        """Rows join the given themes (one theme per row)."""
        top = int(rows.max()) + 1
        if top > self.theme_of.shape[0]:
            grown = np.full(max(top, 2 * self.theme_of.shape[0], 1024), -1, np.int64)
            grown[: self.theme_of.shape[0]] = self.theme_of
            self.theme_of = grown
        self.theme_of[rows] = themes
        order = np.argsort(themes, kind="stable")
        rows_s, themes_s = rows[order], themes[order]
        cuts = np.flatnonzero(np.diff(themes_s)) + 1
        for grp_rows, t in zip(np.split(rows_s, cuts), themes_s[np.r_[0, cuts]].tolist(),
                               strict=True):
            old = self.members.get(t)
            self.members[t] = grp_rows.copy() if old is None else np.concatenate([old, grp_rows])
            if self.rep[t] < 0:
                self.rep[t] = grp_rows[0]

    def set_members(self, t: int, rows: np.ndarray) -> None:
        """Replace theme t's member array (never mutated in place: readers keep snapshots)."""
        self.members[t] = rows
        self.sizes[t] = rows.size
        if rows.size == 0:
            self.alive[t] = 0
            self.members.pop(t, None)
            self.dirty.discard(t)
        elif not np.isin(self.rep[t], rows):
            self.rep[t] = rows[0]

    def refresh(self, themes: np.ndarray) -> None:
        """Unit centroids of `themes` from their sums."""
        themes = themes[themes < self.n]
        s = self.sums[themes]
        norms = np.maximum(np.linalg.norm(s, axis=1, keepdims=True), 1e-12)
        self.cent[themes] = (s / norms).astype(np.float32)
