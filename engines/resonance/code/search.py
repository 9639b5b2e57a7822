"""Symbol search: BM25 over identifier words, plus an exact-name signal and, with an
embedder, the cosine between the query and each symbol's description.

Identifiers are split into words before the shared BM25 tokenizer sees them
(`parseHTTPResponse` → parse http response, `total_area` → total area), in the documents
and in the query, so "total area" finds `totalArea` and `total_area`. A symbol's document
holds its name (twice: names matter most), its qualified name, signature and docstring.

    score = 0.8·kw + 0.2·name                    (no embedder)
    score = 0.5·kw + 0.3·cos + 0.2·name          (with an embedder)

kw: BM25 / the best BM25 among the candidates; name: 1 when the query is the symbol's name
(case and separators aside), 0.5 when every query word is a word of the name; cos: cosine
of the query and `kind qualified: signature. doc`, clipped at 0. Candidates: the BM25 top 50
∪ the cosine top 50. The BM25 index and the vector matrix are built at the first search
after each index() run; vectors are cached in the database by symbol id and text (in memory
only when the index is read-only).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from .symbols import Symbol
from .tables import Tables

__all__ = ["SymbolSearch", "split_identifier"]

_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_DEPTH = 50


def split_identifier(text: str) -> str:
    """Words of identifiers: `parseHTTPResponse_v2` → `parse HTTP Response v 2`."""
    return " ".join(_CAMEL.findall(text))


def _name_key(text: str) -> str:
    return re.sub(r"[\W_]+", "", text).lower()


def _document(s: Symbol) -> str:
    words = split_identifier(s.name)
    return f"{words} {words} {split_identifier(s.qualified)} {s.kind} {split_identifier(s.signature)} {s.doc}"


def _description(s: Symbol) -> str:
    return f"{s.kind} {s.qualified}: {s.signature}. {s.doc}".strip()


class SymbolSearch:
    """Lazily built search structures over the symbols table."""

    def __init__(self, tables: Tables, embedder: Any = None, *, persist: bool = True) -> None:
        self.tables = tables
        self.persist = persist  # False: vectors computed are not written to the database
        self._embedder_spec = embedder
        self._embedder: Any = None
        self._symbols: list[Symbol] | None = None
        self._bm25: Any = None
        self._matrix: Any = None
        self._by_key: dict[str, list[int]] = {}  # name without case/separators -> rows
        self._words: list[frozenset[str]] = []  # the words of each name

    def invalidate(self) -> None:
        """Forget the built structures (the symbols changed)."""
        self._symbols = self._bm25 = self._matrix = None

    def _build(self) -> list[Symbol]:
        if self._symbols is None:
            from ..recall.bm25 import BM25Index  # numba: loaded on the first search only

            symbols = self.tables.symbols("ORDER BY file, start_line")
            bm25 = BM25Index()
            bm25.add_many(range(len(symbols)), [_document(s) for s in symbols])
            self._by_key = {}
            for i, s in enumerate(symbols):
                self._by_key.setdefault(_name_key(s.name), []).append(i)
            self._words = [frozenset(w.lower() for w in split_identifier(s.name).split()) for s in symbols]
            self._symbols, self._bm25, self._matrix = symbols, bm25, None
        return self._symbols

    def _embedder_obj(self) -> Any:
        if self._embedder is None and self._embedder_spec is not None:
            if self._embedder_spec == "default":
                from ..recall.embedder import Embedder

                self._embedder = Embedder.default()
            else:
                self._embedder = self._embedder_spec
        return self._embedder

    def _vectors(self, symbols: list[Symbol], embedder: Any) -> Any:
        """(n, dim) unit vectors of the symbols' descriptions, cached in the database (if
        `persist`)."""
        import numpy as np

        if self._matrix is not None:
            return self._matrix
        model = str(getattr(embedder, "model_id", type(embedder).__name__))
        conn = self.tables.conn
        cached = {i: (h, v) for i, h, v in conn.execute("SELECT id, text_hash, vec FROM vectors WHERE model = ?", (model,))}
        texts = [_description(s) for s in symbols]
        hashes = [hashlib.blake2b(t.encode(), digest_size=8).hexdigest() for t in texts]
        todo = [i for i, s in enumerate(symbols) if cached.get(s.id, ("",))[0] != hashes[i]]
        rows: dict[int, Any] = {}
        if todo:
            vecs = np.asarray(embedder.embed([texts[i] for i in todo]).vectors, dtype=np.float32)
            if self.persist:
                conn.execute("BEGIN")
                conn.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?, ?)", [
                    (symbols[i].id, hashes[i], model, vecs[j].tobytes()) for j, i in enumerate(todo)])
                conn.execute("COMMIT")
            rows = {i: vecs[j] for j, i in enumerate(todo)}
        dim = int(getattr(embedder, "dim", 0) or (next(iter(rows.values())).shape[0] if rows else 384))
        matrix = np.zeros((len(symbols), dim), dtype=np.float32)
        for i, s in enumerate(symbols):
            matrix[i] = rows[i] if i in rows else np.frombuffer(cached[s.id][1], dtype=np.float32)
        self._matrix = matrix
        return matrix

    def search(self, query: str, k: int) -> list[tuple[Symbol, float]]:
        """The k best (symbol, score), best first."""
        symbols = self._build()
        if not symbols or k <= 0 or not query.strip():
            return []
        words = f"{split_identifier(query)} {query}"
        res = self._bm25.search(words, _DEPTH)
        kw = {int(i): float(s) for i, s in zip(res.ids, res.scores, strict=True)}
        qkey = _name_key(query)
        qwords = {w.lower() for w in split_identifier(query).split()}
        named = set(self._by_key.get(qkey, ()))
        cos: dict[int, float] = {}
        embedder = self._embedder_obj()
        if embedder is not None:
            import numpy as np

            matrix = self._vectors(symbols, embedder)
            qv = np.asarray(embedder.embed([query]).vectors, dtype=np.float32)[0]
            sims = matrix @ qv
            top = np.argsort(-sims)[:_DEPTH]
            cand = set(kw) | set(int(i) for i in top) | named
            cos = {i: max(float(sims[i]), 0.0) for i in cand}
        else:
            cand = set(kw) | named
        best = max(kw.values(), default=0.0) or 1.0
        scored = []
        for i in cand:
            s = symbols[i]
            name = 1.0 if i in named else (0.5 if qwords and qwords <= self._words[i] else 0.0)
            k_score = kw.get(i, 0.0) / best
            score = (0.5 * k_score + 0.3 * cos.get(i, 0.0) + 0.2 * name) if embedder is not None else (0.8 * k_score + 0.2 * name)
            scored.append((score, s.file, s.start_line, i))
        scored.sort(key=lambda x: (-x[0], x[1], x[2]))
        return [(symbols[i], score) for score, _, _, i in scored[:k]]
