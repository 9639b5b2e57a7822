"""A Field's embedder: the one given, or the default loaded the first time a text needs it.

Every vector a Field stores or searches with is a unit row (`unit_rows`); an embedder's
failure on a text is a zero row with ``ok`` False, stored as a fallback to re-embed later.

The field's record of its embedding model (`State.embedder`, logged as a MODEL entry) is
checked against the embedder as soon as it is known — at open when one is given, at first
use when the default loads — and a different model raises `EmbedderMismatch`. A field with
no record (new, or written before fields recorded their model) adopts the embedder's model
on its first write that embeds a text; a field with vectors but no record refuses only an
embedder of another dimension (nothing else can be known about its vectors).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import EmbedderMismatch
from ..recall.models import EmbedderIdentity, identity_of

if TYPE_CHECKING:
    from ..store.durable import Store

__all__ = ["FieldEmbedder", "unit_rows"]

_QUERIES_KEPT = 16  # at most this many queries' unit rows kept by a field (`FieldEmbedder.query`)


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero)."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    # np.linalg.norm(vectors, axis=1, keepdims=True), as it computes it, without its dispatch
    norms = np.sqrt(np.add.reduce(vectors * vectors, axis=1, keepdims=True))
    if all(map((0.0).__lt__, norms.ravel().tolist())):  # no zero (nor NaN) row: one divide
        return vectors / norms
    return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)


class FieldEmbedder:
    """Embeds texts for one Field (``embedder``: any object with ``dim`` and ``embed(texts)``;
    None uses ``Embedder.shared()`` — the default model, loaded once per process — on first
    use, so a field only written with given vectors never loads a model)."""

    def __init__(self, store: Store, embedder: Any = None) -> None:
        self._store = store  # its dimension shapes the answer for no texts
        if embedder is not None:
            self.check(embedder)
        self._embedder = embedder
        # recent queries' answers (`query`): text -> (the embedder's cached vector they were
        # made from, unit rows, ok); a query whose cached vector changed is made again
        self._queries: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    @property
    def embedder(self) -> Any:
        """The embedder, loading the default one on first use (checked against the field's
        record: `EmbedderMismatch` if the field holds another model's vectors)."""
        if self._embedder is None:
            from ..recall.embedder import Embedder

            default = Embedder.shared()  # one model session per process, not per field
            self.check(default)
            self._embedder = default
        return self._embedder

    @property
    def held(self) -> EmbedderIdentity | None:
        """The model the field records (None: no record yet)."""
        record = self._store.state.embedder
        return EmbedderIdentity.from_record(record) if record else None

    def check(self, embedder: Any) -> None:
        """`EmbedderMismatch` unless `embedder` is the model whose vectors the field holds."""
        offered = identity_of(embedder)
        held = self.held
        if held is None:
            dim = self._store.state.dim
            if dim and len(self._store.state) and offered.dim != dim:
                raise EmbedderMismatch(self._store.path, f"unrecorded ({dim}-d)",
                                       offered.describe(), _spec_hint(embedder, offered))
            return
        if not held.same_model(offered):
            raise EmbedderMismatch(self._store.path, held.describe(), offered.describe(),
                                   _spec_hint(embedder, offered))

    def adopt(self) -> None:
        """Record the embedder's model if the field has no record yet (first write)."""
        if (self._store.state.embedder is None and self._embedder is not None
                and not self._store.read_only):
            self._store.record_embedder(identity_of(self._embedder).record())

    def embed_for_write(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Like `embed`, for vectors about to be stored: adopts the model first (`adopt`)."""
        out = self.embed(texts)
        if texts:
            self.adopt()
        return out

    @property
    def loaded(self) -> Any:
        """The embedder if it is given or loaded already, else None (loads nothing)."""
        return self._embedder

    def knows(self, text: str) -> bool:
        """Whether `text`'s vector is cached by the embedder already (loads no model: False
        before one is loaded, and for embedders that keep no cache)."""
        knows = getattr(self.loaded, "knows", None)
        return bool(knows and knows(text))

    def embed(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(unit vectors (n, dim) float32, ok mask): rows not ok are zero fallbacks."""
        if not texts:
            return np.zeros((0, self._store.state.dim or 0), np.float32), np.zeros(0, bool)
        out = self.embedder.embed(list(texts))
        vectors = np.asarray(getattr(out, "vectors", out), dtype=np.float32)
        ok = getattr(out, "ok", None)
        ok = np.linalg.norm(vectors, axis=1) > 0 if ok is None else np.asarray(ok, bool)
        return unit_rows(vectors), ok

    def query(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """`embed`, for a search's query: a text whose vector the embedder caches is made a
        unit row once, not on every search — a turn's warm-up (in a worker thread) leaves it
        for the turn's recall on the event loop. The rows come back read-only."""
        cached = getattr(self.loaded, "cached", None)
        if len(texts) != 1 or cached is None:
            return self.embed(texts)
        text = texts[0]
        hit = cached(text)  # counted as the embedder counts a hit
        if hit is None:  # embedded now (a miss, counted), then kept as a hit would be
            out = self.embed(texts)
            hit = cached(text, count=False)
            if hit is None:  # not cached: a failure's zero row, or an embedder without a cache
                return out
        kept = self._queries.get(text)
        if kept is not None and kept[0] is hit:
            return kept[1], kept[2]
        vectors = np.asarray(hit, dtype=np.float32).reshape(1, -1)  # as `embed` made it of a hit
        ok = np.ones(1, bool)
        unit = unit_rows(vectors)
        unit.flags.writeable = ok.flags.writeable = False
        if len(self._queries) >= _QUERIES_KEPT:  # warm-ups write from worker threads: one
            self._queries.clear()                   # atomic call, no iteration to race with
        self._queries[text] = (hit, unit, ok)
        return unit, ok


def _spec_hint(embedder: Any, offered: EmbedderIdentity) -> str:
    """What to pass `soul memory reembed --embedder` for this model, when it is known: the
    bundled model's name, or the ONNX file an embedder was loaded from."""
    from ..recall.embedder import DEFAULT_MODEL_ID

    if offered.name == DEFAULT_MODEL_ID:
        return "minilm"
    path = getattr(embedder, "model_path", None)
    return str(path) if path else ""
