"""The code index's tables in SQLite (stdlib): files, symbols, calls, imports, inheritance,
the triplets given to a knowledge graph, and cached symbol vectors.

These tables are the source of truth; a knowledge graph, when given, receives a copy of the
call graph as triplets. One file's rows are replaced in one transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path

from .symbols import CallSite, FileSymbols, Import, Inheritance, Symbol

__all__ = ["SCHEMA_VERSION", "Tables", "connect", "connect_read_only", "row_call", "row_symbol"]

SCHEMA_VERSION = "1"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    path TEXT PRIMARY KEY, language TEXT NOT NULL, hash TEXT NOT NULL,
    size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, namespace TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS symbols (
    id TEXT PRIMARY KEY, name TEXT NOT NULL, qualified TEXT NOT NULL, kind TEXT NOT NULL,
    language TEXT NOT NULL, file TEXT NOT NULL, start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL, signature TEXT NOT NULL, parent TEXT, doc TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS symbols_name ON symbols(name);
CREATE INDEX IF NOT EXISTS symbols_qualified ON symbols(qualified);
CREATE INDEX IF NOT EXISTS symbols_file ON symbols(file);
CREATE TABLE IF NOT EXISTS calls (
    file TEXT NOT NULL, caller TEXT, name TEXT NOT NULL, receiver TEXT, line INTEGER NOT NULL,
    col INTEGER NOT NULL, callee TEXT, reason TEXT NOT NULL, receiver_type TEXT);
CREATE INDEX IF NOT EXISTS calls_file ON calls(file);
CREATE INDEX IF NOT EXISTS calls_caller ON calls(caller);
CREATE INDEX IF NOT EXISTS calls_callee ON calls(callee);
CREATE TABLE IF NOT EXISTS imports (
    file TEXT NOT NULL, module TEXT NOT NULL, name TEXT, alias TEXT, line INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS imports_file ON imports(file);
CREATE TABLE IF NOT EXISTS inherits (
    file TEXT NOT NULL, child TEXT NOT NULL, base TEXT NOT NULL, line INTEGER NOT NULL,
    base_id TEXT);
CREATE INDEX IF NOT EXISTS inherits_file ON inherits(file);
CREATE TABLE IF NOT EXISTS triplets (
    subject TEXT NOT NULL, predicate TEXT NOT NULL, object TEXT NOT NULL,
    kg_id INTEGER NOT NULL, PRIMARY KEY (subject, predicate, object));
CREATE TABLE IF NOT EXISTS vectors (
    id TEXT PRIMARY KEY, text_hash TEXT NOT NULL, model TEXT NOT NULL, vec BLOB NOT NULL);
"""

_SYMBOL_COLS = "id, name, qualified, kind, language, file, start_line, end_line, signature, parent, doc"
_CALL_COLS = "caller, name, file, line, callee, receiver, col, reason, receiver_type"


def connect(path: Path) -> sqlite3.Connection:
    """Open (creating) the index database in WAL mode with the schema in place."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.executescript(_SCHEMA)
    conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
    return conn


def connect_read_only(path: Path) -> sqlite3.Connection:
    """Open an existing index database for reading without creating or changing a file.

    SQLite's ``mode=ro`` still creates the ``-wal`` and ``-shm`` files of a WAL database (and
    leaves them), so the database is opened ``immutable`` unless a ``-wal`` file is already
    there (a writer is open, or was killed): only then can the file hold data the database
    does not, and ``mode=ro`` reads it through the files that exist anyway. Raises
    FileNotFoundError (NotADirectoryError for a file in the way) if there is no database.
    """
    path.stat()  # the database must exist: connect() in any mode would create it
    wal = path.with_name(path.name + "-wal").exists()
    uri = path.resolve().as_uri() + ("?mode=ro" if wal else "?mode=ro&immutable=1")
    return sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)


def row_symbol(row: tuple) -> Symbol:
    """A Symbol from a `SELECT {_SYMBOL_COLS}` row."""
    return Symbol(*row)


def row_call(row: tuple) -> CallSite:
    """A CallSite from a `SELECT {_CALL_COLS}` row."""
    return CallSite(*row)


class Tables:
    """Typed reads and writes over the connection (callers hold the transaction)."""

    SYMBOL_COLS = _SYMBOL_COLS
    CALL_COLS = _CALL_COLS

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def file_rows(self) -> dict[str, tuple[str, int, int]]:
        """path -> (hash, size, mtime_ns)."""
        return {p: (h, s, m) for p, h, s, m in self.conn.execute("SELECT path, hash, size, mtime_ns FROM files")}

    def delete_file(self, path: str) -> None:
        for table, col in (("symbols", "file"), ("calls", "file"), ("imports", "file"), ("inherits", "file"), ("files", "path")):
            self.conn.execute(f"DELETE FROM {table} WHERE {col} = ?", (path,))

    def touch_file(self, path: str, size: int, mtime_ns: int) -> None:
        self.conn.execute("UPDATE files SET size = ?, mtime_ns = ? WHERE path = ?", (size, mtime_ns, path))

    def put_file(self, fs: FileSymbols, digest: str, size: int, mtime_ns: int) -> None:
        self.delete_file(fs.file)
        c = self.conn
        c.execute("INSERT INTO files VALUES (?, ?, ?, ?, ?, ?)", (fs.file, fs.language, digest, size, mtime_ns, fs.namespace))
        c.executemany(f"INSERT INTO symbols ({_SYMBOL_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)", [
            (s.id, s.name, s.qualified, s.kind, s.language, s.file, s.start_line, s.end_line, s.signature, s.parent, s.doc)
            for s in fs.symbols])
        c.executemany(f"INSERT INTO calls ({_CALL_COLS}) VALUES (?,?,?,?,?,?,?,?,?)", [
            (k.caller, k.name, k.file, k.line, k.callee, k.receiver, k.column, k.reason, k.receiver_type) for k in fs.calls])
        c.executemany("INSERT INTO imports VALUES (?,?,?,?,?)", [(i.file, i.module, i.name, i.alias, i.line) for i in fs.imports])
        c.executemany("INSERT INTO inherits VALUES (?,?,?,?,?)", [(h.file, h.child, h.base, h.line, h.base_id) for h in fs.inherits])

    def symbols(self, where: str = "", args: Iterable[object] = ()) -> list[Symbol]:
        return [row_symbol(r) for r in self.conn.execute(f"SELECT {_SYMBOL_COLS} FROM symbols {where}", tuple(args))]

    def calls_with_rowid(self) -> list[tuple[int, str, CallSite]]:
        """(rowid, language, call) for every call."""
        rows = self.conn.execute(f"SELECT c.rowid, f.language, {', '.join('c.' + x for x in _CALL_COLS.split(', '))} FROM calls c JOIN files f ON f.path = c.file")
        return [(r[0], r[1], row_call(r[2:])) for r in rows]

    def calls(self, where: str, args: Iterable[object]) -> list[CallSite]:
        return [row_call(r) for r in self.conn.execute(f"SELECT {_CALL_COLS} FROM calls {where}", tuple(args))]

    def imports(self) -> list[Import]:
        return [Import(*r) for r in self.conn.execute("SELECT file, module, name, alias, line FROM imports")]

    def inherits(self) -> list[Inheritance]:
        return [Inheritance(*r) for r in self.conn.execute("SELECT file, child, base, line, base_id FROM inherits")]

    def count(self, table: str, where: str = "") -> int:
        return int(self.conn.execute(f"SELECT count(*) FROM {table} {where}").fetchone()[0])

    def meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))
