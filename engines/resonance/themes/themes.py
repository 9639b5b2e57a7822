"""Themes (xMemory): memories grouped by meaning, retrieved theme-first, kept in shape.

Assignment (the seed's formula): a row joins the live theme of highest

    score = semantic_weight · cos(vector, centroid) + sparsity_weight · sparsity(size)
    sparsity(size) = 1 / (1 + exp(2 · (size / ideal_size − 1)))

or founds a new theme when that best score is below `new_theme_threshold`. The sparsity term
(0.88 for a new theme, 0.5 at `ideal_size`, 0.12 at twice it) makes a big theme less
attractive the bigger it gets, so themes do not snowball into one. The seed gives the formula
but no weights or sizes; the defaults below are ours, set on LoCoMo's MiniLM embeddings and
on clustered synthetic data (docs/memory.md, "Themes").

Retrieval is two-stage: (1) the query's cosine with every centroid, and `themes` themes
chosen greedily by maximal marginal relevance (λ·cos(query, c) − (1 − λ)·max cos(c, chosen)),
so near-duplicate themes do not crowd out a second topic; (2) the members of those themes
(and more themes, in query-cosine order, until at least `expand_min` rows) ranked by their
exact cosine with the query.

Maintenance (`maintain`, or a daemon thread): themes above `max_theme_size` are split by
spherical 2-means; pairs of themes whose centroids are at cosine ≥ `merge_threshold` and
whose union fits `max_theme_size` are merged. The slow part (reading vectors, 2-means) runs
without the lock; the result is applied under it only if the theme did not change meanwhile
(else it is retried next run), so `assign` and `retrieve` never wait for a whole run.

Thread safety: one lock guards the tables (`ThemeTables`, tables.py, shared with maintenance);
member arrays are never mutated in place (replaced on change), so a reader's snapshot stays
valid after it lets go of the lock.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, IndexStale
from .maintain import run_maintenance
from .tables import ThemeTables

__all__ = ["Theme", "ThemeConfig", "ThemeIndex"]

log = logging.getLogger("soul.engines.resonance")
VectorsOf = Callable[[np.ndarray], np.ndarray]
_CHUNK = 256  # rows per assignment step (centroids are refreshed between steps)
_FORMAT = 1


@dataclass(frozen=True)
class ThemeConfig:
    """Weights and sizes of theme assignment, retrieval and maintenance."""

    semantic_weight: float = 0.8
    sparsity_weight: float = 0.2
    ideal_size: float = 48.0  # the seed's `ideal_size` (no value given there)
    new_theme_threshold: float = 0.55  # best score below this founds a new theme
    max_theme_size: int = 192  # maintenance splits themes above this (4 × ideal)
    min_theme_size: int = 4  # a split whose smaller half is below this is not made
    merge_threshold: float = 0.9  # centroid cosine at which two themes are near-duplicates
    mmr_lambda: float = 0.85  # stage 1: relevance vs diversity of the chosen themes
    expand_min: int = 64  # stage 2: add themes until at least this many candidate rows

    def __post_init__(self) -> None:
        if (self.semantic_weight < 0 or self.sparsity_weight < 0 or self.ideal_size <= 0
                or self.min_theme_size < 1 or self.max_theme_size < 2 * self.min_theme_size
                or not 0.0 <= self.mmr_lambda <= 1.0 or self.expand_min < 0):
            raise ConfigError(
                f"invalid ThemeConfig {self}: weights >= 0, ideal_size > 0, "
                f"max_theme_size >= 2·min_theme_size >= 2, 0 <= mmr_lambda <= 1"
            )


@dataclass(frozen=True)
class Theme:
    """A live theme: id, member count, unit centroid, and the member nearest the centroid
    (as of the last maintenance; the founding member until then)."""

    id: int
    size: int
    centroid: np.ndarray
    representative: int


class ThemeIndex:
    """Themes over row ids: assign, remove, two-stage retrieve, split/merge maintenance."""

    def __init__(self, dim: int, config: ThemeConfig | None = None) -> None:
        if dim < 1:
            raise ConfigError(f"dim must be >= 1, got {dim}")
        self.dim = dim
        self.config = config or ThemeConfig()
        self._tables = ThemeTables(dim)
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.last_maintenance: dict[str, Any] = {}

    def __len__(self) -> int:
        """The number of live themes."""
        tb = self._tables
        return int(tb.alive[: tb.n].sum())

    # ---- assignment -----------------------------------------------------------------------
    def assign(self, rows: np.ndarray, vectors: np.ndarray) -> np.ndarray:
        """Assign each row (in order) to a theme; returns the theme id per row. A row
        already assigned is moved (removed, then assigned again). Zero vectors get -1."""
        from ..kernels.themes import assign_sequential

        tb = self._tables
        rows_arr = np.asarray(rows, dtype=np.int64).reshape(-1)
        vecs = np.asarray(vectors, dtype=np.float32).reshape(-1, self.dim)
        if rows_arr.shape[0] != vecs.shape[0]:
            raise ConfigError(f"assign got {rows_arr.shape[0]} rows, {vecs.shape[0]} vectors")
        if rows_arr.size and (rows_arr.min() < 0 or np.unique(rows_arr).size != rows_arr.size):
            raise ConfigError("assign needs distinct row ids >= 0")
        out = np.full(rows_arr.shape[0], -1, np.int64)
        norms = np.linalg.norm(vecs, axis=1)
        ok = np.flatnonzero(np.isfinite(norms) & (norms > 1e-12))
        unit = np.zeros_like(vecs)
        unit[ok] = vecs[ok] / norms[ok, None]
        self.remove(rows_arr)
        cfg = self.config
        for s in range(0, ok.size, _CHUNK):
            part = ok[s : s + _CHUNK]
            with tb.lock:
                t0 = tb.n
                tb.grow(t0 + part.size)
                sims = np.ascontiguousarray(unit[part] @ tb.cent[:t0].T, dtype=np.float32)
                got = np.empty(part.size, np.int64)
                tb.n = assign_sequential(
                    sims, np.ascontiguousarray(unit[part]), t0, tb.sums, tb.sizes,
                    tb.alive, t0, cfg.semantic_weight, cfg.sparsity_weight,
                    cfg.ideal_size, cfg.new_theme_threshold, got,
                )
                tb.rep[t0 : tb.n] = -1
                tb.add_members(rows_arr[part], got)
                touched = np.unique(got)
                tb.refresh(touched)
                tb.dirty.update(touched.tolist())
                out[part] = got
        return out

    def remove(self, rows: np.ndarray) -> None:
        """Take rows out of their themes (unknown rows are ignored); the centroid sums lose
        their vectors on the next maintenance (`maintain` recomputes them exactly), sizes
        at once. A theme left empty dies."""
        tb = self._tables
        rows_arr = np.asarray(rows, dtype=np.int64).reshape(-1)
        with tb.lock:
            rows_arr = rows_arr[(rows_arr >= 0) & (rows_arr < tb.theme_of.shape[0])]
            themes = tb.theme_of[rows_arr]
            has = themes >= 0
            rows_arr, themes = rows_arr[has], themes[has]
            if rows_arr.size == 0:
                return
            tb.theme_of[rows_arr] = -1
            for t in np.unique(themes).tolist():
                gone = rows_arr[themes == t]
                left = np.setdiff1d(tb.members[t], gone, assume_unique=True)
                tb.set_members(t, left)
                tb.dirty.add(t)

    # ---- retrieval ------------------------------------------------------------------------
    def retrieve(
        self, vector: np.ndarray, k: int, *, themes: int = 4, vectors_of: VectorsOf,
        min_per_theme: int = 0,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Two-stage retrieval: (rows int64, cosine float32), best first. `vectors_of(rows)`
        gives the rows' vectors (e.g. the Field's state matrix). `min_per_theme` > 0 keeps
        each chosen theme's best rows in the result even when other themes' rows score
        higher (forced breadth; 0 ranks purely by cosine)."""
        q = np.asarray(vector, dtype=np.float32).reshape(-1)
        nq = float(np.linalg.norm(q))
        if k <= 0 or nq < 1e-12:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        q = q / nq
        chosen, groups = self._choose_themes(q, themes)
        if not groups:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        rows = np.concatenate(groups)
        vecs = np.asarray(vectors_of(rows), dtype=np.float32).reshape(-1, self.dim)
        norms = np.maximum(np.linalg.norm(vecs, axis=1), 1e-12)
        cos = (vecs @ q) / norms
        order = np.argsort(-cos, kind="stable")
        if min_per_theme > 0:
            label = np.repeat(np.arange(len(groups)), [g.size for g in groups])
            keep: list[int] = []
            for g in range(min(len(chosen), len(groups))):
                idx = order[label[order] == g][:min_per_theme]
                keep.extend(idx.tolist())
            keep_set = set(keep)
            rest = [i for i in order.tolist() if i not in keep_set]
            picked = np.array(keep[:k] + rest[: max(0, k - len(keep))], np.int64)
            order = picked[np.argsort(-cos[picked], kind="stable")]
        top = order[:k]
        return rows[top], cos[top].astype(np.float32)

    def _choose_themes(self, q: np.ndarray, n: int) -> tuple[list[int], list[np.ndarray]]:
        """Stage 1 under the lock: MMR-chosen themes, then expansion to `expand_min` rows;
        returns the chosen ids and the member arrays of every theme to expand."""
        tb = self._tables
        lam = self.config.mmr_lambda
        with tb.lock:
            live = tb.live()
            if live.size == 0:
                return [], []
            cent = tb.cent[live]
            sim = cent @ q
            pool = live[np.argsort(-sim, kind="stable")[: max(4 * n, n)]]
            pool_sim = tb.cent[pool] @ q
            pool_cent = tb.cent[pool]
            chosen_idx: list[int] = []
            max_red = np.full(pool.size, -np.inf, np.float32)
            while len(chosen_idx) < min(n, pool.size):
                red = np.where(np.isfinite(max_red), max_red, 0.0)
                mmr = lam * pool_sim - (1.0 - lam) * red
                mmr[chosen_idx] = -np.inf
                j = int(np.argmax(mmr))
                chosen_idx.append(j)
                max_red = np.maximum(max_red, pool_cent @ pool_cent[j])
            chosen = [int(pool[j]) for j in chosen_idx]
            groups = [tb.members[t] for t in chosen]
            total = sum(g.size for g in groups)
            if total < self.config.expand_min:
                for t in live[np.argsort(-sim, kind="stable")].tolist():
                    if total >= self.config.expand_min:
                        break
                    if t not in chosen:
                        groups.append(tb.members[t])
                        total += tb.members[t].size
            return chosen, groups

    # ---- maintenance ----------------------------------------------------------------------
    def maintain(self, vectors_of: VectorsOf, *, budget: int = 8) -> dict[str, Any]:
        """Split oversized themes, merge near-duplicates (at most `budget` changes), refresh
        the centroids of themes that lost members and the representatives. Returns what it
        did: {"split": [(old, new), ...], "merged": [(kept, gone), ...], "refreshed": n,
        "skipped": n (changed while being worked on; retried next run)}."""
        cfg = self.config
        report = run_maintenance(self._tables, vectors_of, budget, max_size=cfg.max_theme_size,
                                 min_size=cfg.min_theme_size, merge_threshold=cfg.merge_threshold)
        self.last_maintenance = report
        return report

    def start_background(self, vectors_of: VectorsOf, interval: float = 30.0) -> None:
        """Run `maintain` every `interval` seconds on a daemon thread until stop_background()."""
        if self._thread is not None and self._thread.is_alive():
            raise ConfigError("theme maintenance is already running; stop_background() first")
        self._stop.clear()

        def loop() -> None:
            while not self._stop.wait(interval):
                try:
                    self.maintain(vectors_of)
                except Exception:  # a bad run must not kill the thread; the next one retries
                    log.exception("theme maintenance failed")

        self._thread = threading.Thread(target=loop, name="soul-theme-maintenance", daemon=True)
        self._thread.start()

    def stop_background(self, timeout: float | None = 10.0) -> None:
        """Stop the maintenance thread (waits for a run in progress to finish)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    # ---- views ----------------------------------------------------------------------------
    def themes(self) -> list[Theme]:
        """Every live theme."""
        tb = self._tables
        with tb.lock:
            return [Theme(int(t), int(tb.sizes[t]), tb.cent[t].copy(), int(tb.rep[t]))
                    for t in tb.live().tolist()]

    def theme_of(self, rows: np.ndarray) -> np.ndarray:
        """The theme id of each row (-1 if unassigned)."""
        tb = self._tables
        rows_arr = np.asarray(rows, dtype=np.int64).reshape(-1)
        out = np.full(rows_arr.size, -1, np.int64)
        with tb.lock:
            ok = (rows_arr >= 0) & (rows_arr < tb.theme_of.shape[0])
            out[ok] = tb.theme_of[rows_arr[ok]]
        return out

    def members(self, theme: int) -> np.ndarray:
        """The rows of a theme (empty for a dead or unknown id)."""
        tb = self._tables
        with tb.lock:
            return tb.members.get(int(theme), np.zeros(0, np.int64)).copy()

    def stats(self) -> dict[str, Any]:
        """Theme count and size distribution."""
        tb = self._tables
        with tb.lock:
            sizes = tb.sizes[: tb.n][tb.alive[: tb.n] == 1]
        return {"themes": int(sizes.size), "rows": int(sizes.sum()),
                "size_max": int(sizes.max()) if sizes.size else 0,
                "size_median": float(np.median(sizes)) if sizes.size else 0.0,
                "singletons": int((sizes == 1).sum())}

    # ---- persistence ----------------------------------------------------------------------
    def save(self, path: Path) -> None:
        """Write the tables to `path` (npz) atomically: temporary file, fsync, rename."""
        tb = self._tables
        path = Path(path)
        with tb.lock:
            n = tb.n
            arrays = {"sums": tb.sums[:n].copy(), "sizes": tb.sizes[:n].copy(),
                      "alive": tb.alive[:n].copy(), "rep": tb.rep[:n].copy(),
                      "theme_of": tb.theme_of.copy(),
                      "dirty": np.array(sorted(tb.dirty), np.int64)}
        meta = json.dumps({"format": _FORMAT, "dim": self.dim, "config": asdict(self.config)})
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as fh:
            np.savez(fh, meta=np.array(meta), **arrays)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path) -> ThemeIndex:
        """Load a saved index; `IndexStale` if missing, unreadable or of another format."""
        path = Path(path)
        try:
            with np.load(path) as z:
                meta = json.loads(str(z["meta"]))
                arrays = {name: z[name] for name in
                          ("sums", "sizes", "alive", "rep", "theme_of", "dirty")}
            if meta["format"] != _FORMAT:
                raise ValueError(f"format {meta['format']}, expected {_FORMAT}")
            index = cls(int(meta["dim"]), ThemeConfig(**meta["config"]))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise IndexStale(f"cannot load the theme index {path}: {exc}") from exc
        tb = index._tables
        n = arrays["sizes"].shape[0]
        tb.grow(n)
        tb.n = n
        tb.sums[:n], tb.sizes[:n] = arrays["sums"], arrays["sizes"]
        tb.alive[:n], tb.rep[:n] = arrays["alive"], arrays["rep"]
        tb.theme_of = arrays["theme_of"].astype(np.int64)
        tb.dirty = set(arrays["dirty"].tolist())
        assigned = np.flatnonzero(tb.theme_of >= 0)
        order = np.argsort(tb.theme_of[assigned], kind="stable")
        by_theme = assigned[order]
        bounds = np.searchsorted(tb.theme_of[by_theme], np.arange(n + 1))
        for t in np.flatnonzero(tb.alive[:n]).tolist():
            tb.members[t] = by_theme[bounds[t] : bounds[t + 1]]
        tb.refresh(np.arange(n))
        return index
