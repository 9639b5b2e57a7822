"""CodeIndex: a persistent, incremental index of a source tree's symbols and call graph.

    index(root): walk ─► per file: same size+mtime? skip · same hash? skip · else parse
                 ─► drop the rows of deleted files ─► resolve every call and base type
                 ─► (with a knowledge graph) sync the call graph as triplets

The tables live in `<path>/code.sqlite`. Files that did not change are never read again
(size and mtime first, then a BLAKE2 hash), so a second run over an unchanged tree only
stats it. Resolution runs over the whole index after any change, since a change in one file
can resolve (or break) calls in another. A read-only index (`open(..., read_only=True)`)
answers every query and changes no file; `index()` raises `ReadOnlyField`.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import FieldNotFound, ReadOnlyField
from .callgraph import sync_triplets
from .errors import CodeIndexMismatch, GrammarMissing
from .languages import language_for
from .resolver import Resolver
from .search import SymbolSearch
from .symbols import CallSite, Symbol, extract
from .tables import Tables, connect, connect_read_only

__all__ = ["MAX_FILE_BYTES", "SKIP_DIRS", "CodeIndex", "IndexReport"]

log = logging.getLogger("soul.engines.resonance.code")

MAX_FILE_BYTES = 1 << 20
SKIP_DIRS = frozenset({
    ".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".env", "env",
    ".tox", ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache", "build", "dist", "target",
    "out", ".eggs", ".idea", ".vscode", "site-packages", ".cache", ".next", "vendor",
    "bower_components", ".gradle", "bin", "obj",
})


@dataclass(frozen=True)
class IndexReport:
    """What one `index()` run did. `skipped` counts skipped files by reason."""

    files_seen: int
    files_parsed: int
    files_skipped: int
    symbols: int
    calls: int
    resolved: int
    seconds: float
    files_removed: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    languages: dict[str, int] = field(default_factory=dict)  # indexed files per language

    @property
    def resolved_share(self) -> float:
        """Resolved calls / all calls (0 when there are none)."""
        return self.resolved / self.calls if self.calls else 0.0


def _skip_dir(entry: os.DirEntry[str]) -> bool:
    name = entry.name
    return (name in SKIP_DIRS or name.endswith(".egg-info")
            or os.path.exists(os.path.join(entry.path, "pyvenv.cfg")))


def walk(root: Path, exclude: Path | None = None) -> list[Path]:
    """Files under root, sorted; skipped folders never entered, symlinks not followed."""
    out: list[Path] = []
    stack = [str(root)]
    exclude_s = str(exclude) if exclude is not None else None
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError as exc:
            log.warning("cannot list %s: %s", folder, exc)
            continue
        for e in entries:
            if e.is_dir(follow_symlinks=False):
                if not _skip_dir(e) and e.path != exclude_s:
                    stack.append(e.path)
            elif e.is_file(follow_symlinks=False):
                out.append(Path(e.path))
    return sorted(out)


class CodeIndex:
    """Symbols, calls, imports and inheritance of one source tree, searchable.

    >>> idx = CodeIndex.open("field/code"); idx.index("src/")       # doctest: +SKIP
    >>> idx.find_symbol("Circle.area"); idx.symbol_callers("square")  # doctest: +SKIP
    """

    def __init__(self, path: Path, graph: Any = None, embedder: Any = None, *,
                 read_only: bool = False) -> None:
        self.path = path
        self.graph = graph
        self.read_only = read_only
        self._conn = _connect(path / "code.sqlite", read_only)
        self._tables = Tables(self._conn)
        self._lock = threading.RLock()
        self._search = SymbolSearch(self._tables, embedder, persist=not read_only)

    @classmethod
    def open(cls, path: str | Path, *, graph: Any = None, embedder: Any = None,
             read_only: bool = False) -> CodeIndex:
        """Open or create the index in folder `path`. `graph`: a KnowledgeGraph to receive
        the call graph as triplets; `embedder`: any object with `embed(texts)` (or the
        string "default" for `Embedder.default()`, loaded at the first search).
        `read_only`: open an existing index without changing a file (`FieldNotFound` if
        there is none)."""
        folder = Path(path).expanduser()
        if not read_only:
            folder.mkdir(parents=True, exist_ok=True)
        return cls(folder, graph, embedder, read_only=read_only)

    def __enter__(self) -> CodeIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._conn.close()

    @property
    def root(self) -> Path | None:
        """The source tree this index holds (None before the first index())."""
        value = self._tables.meta("root")
        return Path(value) if value else None

    # ---- indexing --------------------------------------------------------------------------
    def index(self, root: str | Path, *, progress: Callable[[int, int, str], None] | None = None,
              reset: bool = False) -> IndexReport:
        """Bring the index up to date with the tree at `root` (see the module docstring).

        `progress(done, total, relpath)` is called per file. One index holds one root:
        another root raises CodeIndexMismatch unless `reset=True` (which starts over).
        """
        if self.read_only:
            raise ReadOnlyField("index a source tree", self.path)
        started = time.perf_counter()
        root = Path(root).expanduser().resolve()
        if not root.is_dir():
            raise CodeIndexMismatch(f"{root} is not a folder; index() needs a source tree")
        with self._lock:
            t = self._tables
            held = t.meta("root")
            if held and held != str(root) and not reset:
                raise CodeIndexMismatch(
                    f"{self.path} indexes {held}, not {root}: use another index folder "
                    f"(another --field), or reset=True / --reset to replace it")
            if held != str(root):
                self._conn.execute("BEGIN")
                for table in ("files", "symbols", "calls", "imports", "inherits"):
                    self._conn.execute(f"DELETE FROM {table}")
                t.set_meta("root", str(root))
                self._conn.execute("COMMIT")
            files = walk(root, exclude=self.path.resolve())
            known = t.file_rows()
            skipped: Counter[str] = Counter()
            missing: set[str] = set()
            seen: set[str] = set()
            parsed = 0
            for done, path in enumerate(files, start=1):
                rel = path.relative_to(root).as_posix()
                if progress is not None:
                    progress(done, len(files), rel)
                spec = language_for(path)
                if spec is None:
                    skipped["unknown language"] += 1
                    continue
                if spec.name in missing:
                    skipped[f"grammar missing: pip install {spec.package}"] += 1
                    continue
                try:
                    st = path.stat()
                except OSError:
                    skipped["unreadable"] += 1
                    continue
                if st.st_size > MAX_FILE_BYTES:
                    skipped["larger than 1 MiB"] += 1
                    continue
                old = known.get(rel)
                if old is not None and old[1] == st.st_size and old[2] == st.st_mtime_ns:
                    seen.add(rel)
                    continue
                try:
                    data = path.read_bytes()
                except OSError:
                    skipped["unreadable"] += 1
                    continue
                if b"\0" in data[:8192]:
                    skipped["binary"] += 1
                    continue
                seen.add(rel)
                digest = hashlib.blake2b(data, digest_size=16).hexdigest()
                if old is not None and old[0] == digest:
                    t.touch_file(rel, st.st_size, st.st_mtime_ns)
                    continue
                try:
                    fs = extract(data, rel, spec)
                except GrammarMissing as exc:
                    log.warning("%s", exc)
                    missing.add(spec.name)
                    seen.discard(rel)
                    skipped[f"grammar missing: pip install {spec.package}"] += 1
                    continue
                self._conn.execute("BEGIN")
                t.put_file(fs, digest, st.st_size, st.st_mtime_ns)
                self._conn.execute("COMMIT")
                parsed += 1
            removed = [p for p in known if p not in seen]
            if removed:
                self._conn.execute("BEGIN")
                for p in removed:
                    t.delete_file(p)
                self._conn.execute("COMMIT")
            if parsed or removed or t.meta("resolved") != "1":
                self._resolve()
            if self.graph is not None:
                sync_triplets(self._conn, self.graph)
            self._search.invalidate()
            calls = t.count("calls")
            languages = dict(self._conn.execute("SELECT language, count(*) FROM files GROUP BY language").fetchall())
            return IndexReport(
                files_seen=len(files), files_parsed=parsed, files_skipped=sum(skipped.values()),
                symbols=t.count("symbols"), calls=calls,
                resolved=t.count("calls", "WHERE callee IS NOT NULL"),
                seconds=time.perf_counter() - started, files_removed=len(removed),
                skipped=dict(skipped), languages=languages,
            )

    def _resolve(self) -> None:
        """Re-link every call and base type over the whole index, in one transaction."""
        t = self._tables
        resolver = Resolver(t.symbols(), t.imports(), t.inherits())
        inherits = resolver.resolve_inherits()
        rows = t.calls_with_rowid()
        updates = []
        for rowid, language, call in rows:
            r = resolver.resolve(call, language)
            updates.append((r.callee, r.reason, rowid))
        self._conn.execute("BEGIN")
        self._conn.execute("DELETE FROM inherits")
        self._conn.executemany("INSERT INTO inherits VALUES (?,?,?,?,?)", [(h.file, h.child, h.base, h.line, h.base_id) for h in inherits])
        self._conn.executemany("UPDATE calls SET callee = ?, reason = ? WHERE rowid = ?", updates)
        t.set_meta("resolved", "1")
        self._conn.execute("COMMIT")

    # ---- queries ---------------------------------------------------------------------------
    def find_symbol(self, name: str) -> list[Symbol]:
        """Symbols whose id, name or qualified name is `name`, or whose qualified name ends
        with it on a dot (`Circle.area`, `geo::Circle::area` alike)."""
        q = name.replace("::", ".").strip()
        with self._lock:
            t = self._tables
            found = t.symbols("WHERE id = ? OR name = ? OR qualified = ? OR qualified LIKE ? ESCAPE '\\' ORDER BY file, start_line",
                              (name, q, q, "%." + q.replace("%", "\\%").replace("_", "\\_")))
        return found

    def search_symbols(self, query: str, k: int = 10) -> list[tuple[Symbol, float]]:
        """The k symbols best matching `query` (BM25 over split names, qualified names,
        signatures and docstrings; fused with embedding cosine when an embedder is set)."""
        with self._lock:
            return self._search.search(query, k)

    def _ids(self, symbol: str) -> list[str]:
        return [s.id for s in self.find_symbol(symbol)]

    def symbol_callers(self, symbol: str) -> list[CallSite]:
        """Resolved call sites whose callee is `symbol` (an id, name or qualified name)."""
        ids = self._ids(symbol)
        with self._lock:
            return self._tables.calls(f"WHERE callee IN ({','.join('?' * len(ids))}) ORDER BY file, line", ids) if ids else []

    def symbol_callees(self, symbol: str) -> list[CallSite]:
        """Call sites inside `symbol`, resolved (callee set) or not (callee None, reason)."""
        ids = self._ids(symbol)
        with self._lock:
            return self._tables.calls(f"WHERE caller IN ({','.join('?' * len(ids))}) ORDER BY file, line", ids) if ids else []

    def stats(self) -> dict[str, Any]:
        """Counts: files per language, symbols per kind, calls and resolved calls."""
        with self._lock:
            c, t = self._conn, self._tables
            return {
                "root": t.meta("root"),
                "files": dict(c.execute("SELECT language, count(*) FROM files GROUP BY language").fetchall()),
                "symbols": dict(c.execute("SELECT kind, count(*) FROM symbols GROUP BY kind").fetchall()),
                "calls": t.count("calls"), "resolved": t.count("calls", "WHERE callee IS NOT NULL"),
                # calls whose name some indexed symbol carries: the ones that could resolve
                "calls_to_indexed_names": t.count("calls", "WHERE name IN (SELECT name FROM symbols)"),
            }


def _connect(db: Path, read_only: bool) -> Any:
    """The index database: created if missing, unless read-only (then `FieldNotFound`)."""
    if not read_only:
        return connect(db)
    try:
        return connect_read_only(db)
    except FileNotFoundError:
        raise FieldNotFound(db.parent, "code index", "index a source tree into it first "
                            "(CodeIndex.index, or soul memory index-code)") from None
