"""The cortical index and the themes over a live Field: optional tools, called by you.

Neither is in `Field.recall` or `Field.resonate`: measured (`benchmarks/cortical.py`,
docs/benchmarks.md), HNSW finds more of the true neighbours, sooner, at every size the
machine could build. What they do better is what these views are for:

- `FieldCortical` builds several times faster than HNSW and adds a memory in constant time,
  finds near-copies exactly, and gives a second, independent candidate list: `search(query,
  k, candidates=C)` ranks the top C by sparse-code overlap by exact cosine.
- `FieldThemes` organises the field into themes ("what is this field about") and retrieves
  across several topics at once (`retrieve(..., min_per_theme=1)`): diverse context, not a
  faster nearest-neighbour search.

Both index the field's live rows when made and read vectors from the field's own matrix (no
copy). `refresh()` brings a view up to date with the field: rows written since are added,
forgotten ones removed — O(rows) of bookkeeping plus the new rows' work. A view is not saved
with the field; build it again after opening (the build is the cheap part, see the docs).
Queries are a text (embedded by the field's embedder) or a vector.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ConfigError
from ..field.hits import Hit, memory_hit
from ..store import ops
from .cortical import CorticalIndex
from .sparse import SparseCoder
from .themes import ThemeConfig, ThemeIndex

if TYPE_CHECKING:
    from ..field.field import Field

__all__ = ["FieldCortical", "FieldThemes", "ThemeSummary"]


@dataclass(frozen=True)
class ThemeSummary:
    """A theme of the field: its id, size, and the memory nearest its centre."""

    id: int
    size: int
    representative: str  # memory id
    text: str


class _FieldView:
    """Rows of a Field kept in step with it: `refresh` adds new rows, drops forgotten ones."""

    def __init__(self, field: Field) -> None:
        if field.store.state.dim is None:
            raise ConfigError("the field holds no vectors yet: remember something first")
        self.field = field
        self.dim = int(field.store.state.dim)
        self._indexed = np.zeros(0, bool)  # row -> in the view

    def _vectors_of(self, rows: np.ndarray) -> np.ndarray:
        return self.field.store.state.vectors[rows]

    def _changes(self) -> tuple[np.ndarray, np.ndarray]:
        """(rows to add, rows to remove) since the last refresh; marks them done."""
        st = self.field.store.state
        n = st.n_rows
        flags = np.frombuffer(bytes(st.flags[:n]), np.uint8)
        # a row waiting for its embedding has a zero vector: it joins once re-embedded
        usable = (flags & (ops.FLAG_DELETED | ops.FLAG_PENDING_EMBED)) == 0
        had = np.zeros(n, bool)
        had[: self._indexed.size] = self._indexed[:n]
        add = np.flatnonzero(usable & ~had)
        gone = np.flatnonzero(~usable & had)
        self._indexed = usable
        return add, gone

    def _query(self, query: str | np.ndarray) -> np.ndarray:
        if isinstance(query, str):
            vectors, _ = self.field.embed([query])
            return vectors[0]
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.dim:
            raise ConfigError(f"a query vector of {q.shape[0]} dimensions; the field's have {self.dim}")
        return q

    def _hits(self, rows: np.ndarray, scores: np.ndarray, what: str) -> list[Hit]:
        st = self.field.store.state
        return [memory_hit(st, int(r), float(s), {what: float(s)})
                for r, s in zip(rows.tolist(), scores.tolist(), strict=True) if st.is_alive(int(r))]


class FieldCortical(_FieldView):
    """A cortical index over a Field's memories (see the module docstring)."""

    def __init__(self, field: Field, coder: SparseCoder | None = None) -> None:
        super().__init__(field)
        self.index = CorticalIndex(coder or SparseCoder(self.dim))
        self.index.rerank(self._vectors_of)
        self.refresh()

    def refresh(self) -> int:
        """Index rows written since the last refresh, drop forgotten ones; returns how many
        rows changed."""
        add, gone = self._changes()
        if gone.size:
            self.index.remove(gone)
        if add.size:
            self.index.add(add, self._vectors_of(add))
        return int(add.size + gone.size)

    def search(self, query: str | np.ndarray, k: int = 10, *, candidates: int | None = 300) -> list[Hit]:
        """The `k` memories best for `query`: the top `candidates` by code overlap ranked by
        exact cosine (score = cosine), or with `candidates=None` by overlap alone (score =
        shared features, 0..64)."""
        rows, scores = self.index.search(self._query(query), k, candidates=candidates)
        return self._hits(rows, scores, "cortical")

    def stats(self) -> dict[str, Any]:
        """The index's posting and memory figures (`CorticalIndex.stats`)."""
        return self.index.stats()


class FieldThemes(_FieldView):
    """Themes over a Field's memories (see the module docstring). `maintain_budget`: the
    split/merge changes made after the first assignment (`ThemeIndex.maintain`)."""

    def __init__(self, field: Field, config: ThemeConfig | None = None, *, maintain_budget: int = 10_000) -> None:
        super().__init__(field)
        self.index = ThemeIndex(self.dim, config)
        self.refresh(maintain_budget)

    def refresh(self, maintain_budget: int = 8) -> int:
        """Assign rows written since the last refresh, take forgotten ones out, then run
        `maintain` with `maintain_budget` changes; returns how many rows changed."""
        add, gone = self._changes()
        if gone.size:
            self.index.remove(gone)
        if add.size:
            self.index.assign(add, self._vectors_of(add))
        if maintain_budget > 0:
            self.index.maintain(self._vectors_of, budget=maintain_budget)
        return int(add.size + gone.size)

    def themes(self, limit: int | None = None) -> list[ThemeSummary]:
        """The live themes, biggest first (at most `limit`), each with its representative."""
        st = self.field.store.state
        found = sorted(self.index.themes(), key=lambda t: (-t.size, t.id))[:limit]
        out = []
        for t in found:
            row = t.representative if t.representative >= 0 else int(self.index.members(t.id)[0])
            out.append(ThemeSummary(t.id, t.size, st.ids[row], st.text[row]))
        return out

    def retrieve(self, query: str | np.ndarray, k: int = 10, *, themes: int = 4, min_per_theme: int = 0) -> list[Hit]:
        """Two-stage retrieval (`ThemeIndex.retrieve`): `themes` themes chosen by MMR, their
        members ranked by cosine (score); `min_per_theme` keeps each chosen theme's best."""
        rows, scores = self.index.retrieve(self._query(query), k, themes=themes, vectors_of=self._vectors_of,
                                           min_per_theme=min_per_theme)
        return self._hits(rows, scores, "themes")

    def stats(self) -> dict[str, Any]:
        """Theme count and size distribution (`ThemeIndex.stats`)."""
        return self.index.stats()
