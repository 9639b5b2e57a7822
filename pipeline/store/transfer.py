"""Moving sessions between stores: every row of a session dumped as data, and loaded into
another store — SQLite or PostgreSQL, the same or the other — in one transaction (soul bundles,
`soul pack --sessions`, `soul unpack`, `soul sessions import`).

A dump holds, per table, its columns and rows as the database keeps them (JSON text stays
text), and the versions of the session's user model. Loading keeps everything but the row ids
the target assigns: commits get new ids (ids grow per store), and every row that names a commit
(messages, working memory, traces, moods, summaries) is given the new one. A session id the
target already has is refused (`SessionExists`); user-model versions the target already has are
kept if equal and refused if they differ. The JSONL mirror is rebuilt from the loaded rows.
All sessions of one load commit together or not at all.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from soul.errors import SessionExists, SessionNotFound, StoreError
from soul.store.connection import Connection
from soul.store.home import valid_session_id
from soul.store.shards import shard_of

DUMP_FORMAT = 1
T = TypeVar("T")

# The session's tables and their columns, in load order; `id` columns are the target's own.
SESSION_ROW = ("id", "soul", "user", "blueprint", "status", "turns", "created", "updated")
TABLES: dict[str, tuple[str, ...]] = {
    "commits": ("id", "turn", "kind", "time", "meta", "process", "cycle"),
    "messages": ("commit_id", "turn", "layer", "tag", "step", "verb", "content", "meta", "time", "cycle"),
    "state": ("json",),
    "working_memory": ("commit_id", "turn", "region", "entry_type", "content", "verb", "meta", "time"),
    "traces": ("commit_id", "turn", "kind", "json"),
    "chetana": ("json",),
    "mood_and_criteria": ("mood", "criteria", "turn", "time", "cycle", "process", "commit_id"),
    "context_summaries": ("layer", "summary", "turn_from", "turn_to", "time", "cycle_from", "cycle_to",
                          "digest", "process", "commit_id"),
    "persona_cores": ("process", "path", "sha256", "text", "time"),
}
ORDER = {"commits": "id", "messages": "id", "working_memory": "id", "traces": "commit_id",
         "mood_and_criteria": "id", "context_summaries": "id", "persona_cores": "process"}
USER_MODEL = ("version", "text", "note", "session_id", "turn", "created")


class Transfer:
    """Dumping and loading whole sessions (a mixin of `SessionStore`)."""

    _read: Callable[[], AbstractContextManager[Connection]]
    _write: Callable[[Callable[[Connection], Any]], Any]
    repair_logs: Callable[[str | None], list[str]]

    def dump_session(self, session_id: str) -> dict[str, Any]:
        """Every row of a session, and its user model's versions, as JSON-safe data."""
        with self._read() as conn:
            row = conn.execute(f"SELECT {', '.join(SESSION_ROW)} FROM sessions WHERE id = ?", (session_id,)).fetchone()
            if row is None:
                raise SessionNotFound(f"no session {session_id!r}")
            session = dict(zip(SESSION_ROW, row, strict=True))
            tables = {}
            for table, columns in TABLES.items():
                order = f" ORDER BY {ORDER[table]}" if table in ORDER else ""
                rows = conn.execute(f"SELECT {', '.join(columns)} FROM {table} WHERE session_id = ?{order}", (session_id,))
                tables[table] = [list(r) for r in rows]
            versions = conn.execute(
                f"SELECT {', '.join(USER_MODEL)} FROM user_models WHERE soul = ? AND user = ? ORDER BY version",
                (session["soul"], session["user"]),
            ).fetchall()
        return {"format": DUMP_FORMAT, "session": session, "columns": {t: list(c) for t, c in TABLES.items()},
                "tables": tables, "user_model": [dict(zip(USER_MODEL, v, strict=True)) for v in versions]}

    def load_sessions(self, dumps: Sequence[Mapping[str, Any]], *, blueprint: str | None = None) -> list[str]:
        """Load dumped sessions in one transaction (all or none); their ids. `blueprint`, when
        given, is where their blueprint now lives (the sessions' `blueprint` column)."""
        checked = [_checked(d) for d in dumps]

        def body(conn: Connection) -> list[str]:
            return [_load(conn, dump, blueprint) for dump in checked]

        loaded: list[str] = self._write(body)
        for sid in loaded:
            with contextlib.suppress(OSError):  # else the mirror catches up on the session's next commit
                self.repair_logs(sid)  # the JSONL mirror, rebuilt from the loaded rows
        return loaded


def _checked(dump: Mapping[str, Any]) -> Mapping[str, Any]:
    """A dump's shape checked before anything is written (a bundle is outside input)."""
    what = "a session dump"
    if not isinstance(dump, Mapping) or dump.get("format") != DUMP_FORMAT:
        found = dump.get("format") if isinstance(dump, Mapping) else type(dump).__name__
        raise StoreError(f"{what} of format {found!r}: this soulgraph reads format {DUMP_FORMAT} — upgrade soulgraph to load it")
    session, tables, columns = dump.get("session"), dump.get("tables"), dump.get("columns")
    if not isinstance(session, Mapping) or set(session) != set(SESSION_ROW):
        raise StoreError(f"{what}: its session row is malformed")
    if not isinstance(session.get("id"), str) or not valid_session_id(session["id"]):
        raise StoreError(f"{what}: {session.get('id')!r} is not a session id")
    if not isinstance(tables, Mapping) or not isinstance(columns, Mapping):
        raise StoreError(f"{what} of session {session['id']}: no tables")
    for table, wanted in TABLES.items():
        if list(columns.get(table) or []) != list(wanted):
            raise StoreError(f"{what} of session {session['id']}: table {table} has columns {columns.get(table)!r}, not {list(wanted)}")
        rows = tables.get(table, [])
        if not isinstance(rows, list) or any(not isinstance(r, list) or len(r) != len(wanted) for r in rows):
            raise StoreError(f"{what} of session {session['id']}: the rows of {table} are malformed")
        if any(not _plain(v) for r in rows for v in r):
            raise StoreError(f"{what} of session {session['id']}: table {table} holds a value that is not text or a number")
    versions = dump.get("user_model", [])
    if not isinstance(versions, list) or any(not isinstance(v, Mapping) or set(v) != set(USER_MODEL) for v in versions):
        raise StoreError(f"{what} of session {session['id']}: its user model versions are malformed")
    return dump


def _plain(value: Any) -> bool:
    return value is None or (isinstance(value, str | int | float) and not isinstance(value, bool))


def _load(conn: Connection, dump: Mapping[str, Any], blueprint: str | None) -> str:
    session = dict(dump["session"])
    sid = session["id"]
    if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (sid,)).fetchone():
        raise SessionExists(f"this store already has a session {sid} (soul {session['soul']}): "
                            f"delete it first (soul sessions delete {sid}) to import it again")
    if blueprint is not None:
        session["blueprint"] = blueprint
    conn.execute(f"INSERT INTO sessions ({', '.join(SESSION_ROW)}, logged_commit, shard)"
                 f" VALUES ({', '.join('?' * len(SESSION_ROW))}, 0, ?)",
                 (*(session[c] for c in SESSION_ROW), shard_of(str(session["soul"]), str(session["user"]))))
    tables = dump["tables"]
    commits: dict[int, int] = {}
    for row in tables.get("commits", []):
        old, rest = row[0], row[1:]
        new = conn.execute("INSERT INTO commits (session_id, turn, kind, time, meta, process, cycle)"
                           " VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id", (sid, *rest)).fetchone()[0]
        commits[int(old)] = int(new)
    for table, columns in TABLES.items():
        if table == "commits":
            continue
        at = columns.index("commit_id") if "commit_id" in columns else None
        rows = []
        for row in tables.get(table, []):
            row = list(row)
            if at is not None and row[at] is not None:
                if int(row[at]) not in commits:
                    raise StoreError(f"the dump of session {sid}: a row of {table} names commit {row[at]}, which it does not hold")
                row[at] = commits[int(row[at])]
            rows.append((sid, *row))
        if rows:
            conn.executemany(f"INSERT INTO {table} (session_id, {', '.join(columns)}) VALUES ({', '.join('?' * (len(columns) + 1))})", rows)
    _load_user_model(conn, session["soul"], session["user"], dump.get("user_model", []))
    return str(sid)


def _load_user_model(conn: Connection, soul: str, user: str, versions: Sequence[Mapping[str, Any]]) -> None:
    have = {v: t for v, t in conn.execute("SELECT version, text FROM user_models WHERE soul = ? AND user = ?", (soul, user))}
    for version in versions:
        number = version["version"]
        if number in have:
            if have[number] != version["text"]:
                raise SessionExists(f"this store already has version {number} of {soul}'s user model of {user}, "
                                    "and it differs: import into another data home, or revert it first")
            continue
        conn.execute(f"INSERT INTO user_models (soul, user, {', '.join(USER_MODEL)}) VALUES (?, ?, {', '.join('?' * len(USER_MODEL))})",
                     (soul, user, *(version[c] for c in USER_MODEL)))
        have[number] = version["text"]
