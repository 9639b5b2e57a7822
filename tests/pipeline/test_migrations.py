"""Migrations: named, ordered, recorded once; the exact schema, on SQLite (an in-memory
database) and on PostgreSQL (a fresh schema), where the dialect's column types map back."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

import postgres_server
import pytest
from store_backends import backend, sqlite_only  # noqa: F401 - the fixture

from soul.errors import StoreError
from soul.store import migrations, postgres
from soul.store.migrations import MIGRATIONS, applied, migrate

# table -> [(column, declared type)] in order; a schema change must update this on purpose.
EXPECTED = {
    "migrations": [("name", "TEXT"), ("applied", "REAL")],
    "sessions": [
        ("id", "TEXT"),
        ("soul", "TEXT"),
        ("user", "TEXT"),
        ("blueprint", "TEXT"),
        ("status", "TEXT"),
        ("turns", "INTEGER"),
        ("logged_commit", "INTEGER"),
        ("created", "REAL"),
        ("updated", "REAL"),
        ("forked_from", "TEXT"),
        ("forked_at", "INTEGER"),
        ("user_model_key", "TEXT"),
        ("shard", "INTEGER"),
    ],
    "commits": [
        ("id", "INTEGER"),
        ("session_id", "TEXT"),
        ("turn", "INTEGER"),
        ("kind", "TEXT"),
        ("time", "REAL"),
        ("meta", "TEXT"),
        ("process", "TEXT"),
        ("cycle", "INTEGER"),
        ("state", "TEXT"),
        ("chetana", "TEXT"),
        ("remember", "TEXT"),
    ],
    "messages": [
        ("id", "INTEGER"),
        ("session_id", "TEXT"),
        ("commit_id", "INTEGER"),
        ("turn", "INTEGER"),
        ("layer", "TEXT"),
        ("tag", "TEXT"),
        ("step", "TEXT"),
        ("verb", "TEXT"),
        ("content", "TEXT"),
        ("meta", "TEXT"),
        ("time", "REAL"),
        ("cycle", "INTEGER"),
    ],
    "state": [("session_id", "TEXT"), ("json", "TEXT")],
    "user_models": [
        ("soul", "TEXT"),
        ("user", "TEXT"),
        ("version", "INTEGER"),
        ("text", "TEXT"),
        ("note", "TEXT"),
        ("session_id", "TEXT"),
        ("turn", "INTEGER"),
        ("created", "REAL"),
    ],
    "working_memory": [
        ("id", "INTEGER"),
        ("session_id", "TEXT"),
        ("commit_id", "INTEGER"),
        ("turn", "INTEGER"),
        ("region", "TEXT"),
        ("entry_type", "TEXT"),
        ("content", "TEXT"),
        ("verb", "TEXT"),
        ("meta", "TEXT"),
        ("time", "REAL"),
    ],
    "traces": [
        ("commit_id", "INTEGER"),
        ("session_id", "TEXT"),
        ("turn", "INTEGER"),
        ("kind", "TEXT"),
        ("json", "TEXT"),
    ],
    "chetana": [("session_id", "TEXT"), ("json", "TEXT")],
    "mood_and_criteria": [
        ("id", "INTEGER"),
        ("session_id", "TEXT"),
        ("mood", "TEXT"),
        ("criteria", "TEXT"),
        ("turn", "INTEGER"),
        ("time", "REAL"),
        ("cycle", "INTEGER"),
        ("process", "TEXT"),
        ("commit_id", "INTEGER"),
    ],
    "context_summaries": [
        ("id", "INTEGER"),
        ("session_id", "TEXT"),
        ("layer", "TEXT"),
        ("summary", "TEXT"),
        ("turn_from", "INTEGER"),
        ("turn_to", "INTEGER"),
        ("time", "REAL"),
        ("cycle_from", "INTEGER"),
        ("cycle_to", "INTEGER"),
        ("digest", "INTEGER"),
        ("process", "TEXT"),
        ("commit_id", "INTEGER"),
    ],
    "persona_cores": [
        ("session_id", "TEXT"),
        ("process", "TEXT"),
        ("path", "TEXT"),
        ("sha256", "TEXT"),
        ("text", "TEXT"),
        ("time", "REAL"),
    ],
    "field_leases": [
        ("soul", "TEXT"),
        ("user", "TEXT"),
        ("owner", "TEXT"),
        ("epoch", "INTEGER"),
        ("expires", "REAL"),
        ("taken", "REAL"),
    ],
}


@pytest.fixture
def db(backend: str) -> Iterator[Any]:  # noqa: F811 - the fixture
    if backend == "sqlite":
        conn: Any = sqlite3.connect(":memory:", isolation_level=None)
    else:
        conn = postgres.connect(postgres_server.fresh_url())
    yield conn
    conn.close()


# PostgreSQL's names of the types the dialect gives SQLite's declared ones.
PG_TYPES = {"bigint": "INTEGER", "double precision": "REAL", "text": "TEXT"}


def tables(conn: Any) -> dict[str, list[tuple[str, str]]]:
    if not isinstance(conn, sqlite3.Connection):
        return pg_tables(conn)
    names = [
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    ]
    return {
        name: [(c[1], c[2]) for c in conn.execute(f"PRAGMA table_info({name})")] for name in names
    }


def pg_tables(conn: Any) -> dict[str, list[tuple[str, str]]]:
    """The same shape from information_schema, without the dialect's `rowid` column."""
    out: dict[str, list[tuple[str, str]]] = {}
    rows = conn.execute(
        "SELECT table_name, column_name, data_type FROM information_schema.columns"
        " WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position"
    )
    for table, column, kind in rows:
        if column != "rowid":
            out.setdefault(table, []).append((column, PG_TYPES.get(kind, kind)))
    return out


def test_exact_columns_of_every_table(db: Any) -> None:
    migrate(db)
    assert tables(db) == EXPECTED


def test_each_migration_recorded_once_in_order(db: Any) -> None:
    names = [m.__name__ for m in MIGRATIONS]
    assert migrate(db) == names
    assert applied(db) == names
    assert migrate(db) == []  # up to date: nothing runs again
    assert db.execute("SELECT count(*) FROM migrations").fetchone()[0] == len(names)


def test_migration_names_are_ordered_and_unique() -> None:
    names = [m.__name__ for m in MIGRATIONS]
    assert names == sorted(names)
    assert len(set(names)) == len(names)
    assert all(n.startswith("m") and n[1:4].isdigit() for n in names)


def test_registering_a_name_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="twice"):
        migrations.migration(MIGRATIONS[0])


def test_a_later_migration_runs_alone_on_an_existing_database(
    db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    migrate(db)

    def m999_add_column(conn: Any) -> None:
        conn.execute("ALTER TABLE sessions ADD COLUMN extra TEXT")

    monkeypatch.setattr(migrations, "MIGRATIONS", [*MIGRATIONS, m999_add_column])
    assert migrate(db) == ["m999_add_column"]
    assert ("extra", "TEXT") in tables(db)["sessions"]
    assert migrate(db) == []


def test_a_failing_migration_leaves_no_trace(
    db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    migrate(db)

    def m999_broken(conn: Any) -> None:
        conn.execute("CREATE TABLE half (x TEXT)")
        raise RuntimeError("boom")

    monkeypatch.setattr(migrations, "MIGRATIONS", [*MIGRATIONS, m999_broken])
    with pytest.raises(RuntimeError):
        migrate(db)
    assert "half" not in tables(db)
    assert "m999_broken" not in applied(db)
    assert not db.in_transaction


def test_needs_an_autocommit_connection() -> None:
    conn = sqlite3.connect(":memory:")
    with pytest.raises(ValueError, match="isolation_level=None"):
        migrate(conn)
    conn.close()


def test_two_connections_on_one_file_apply_once(tmp_path) -> None:
    first = sqlite3.connect(tmp_path / "x.db", isolation_level=None)
    second = sqlite3.connect(tmp_path / "x.db", isolation_level=None)
    assert migrate(first)
    assert migrate(second) == []
    assert applied(second) == [m.__name__ for m in MIGRATIONS]
    first.close()
    second.close()


def test_a_store_migrated_by_a_newer_soul_is_refused(db: Any) -> None:
    migrate(db)
    db.execute("INSERT INTO migrations (name, applied) VALUES ('m999_from_the_future', 0)")
    with pytest.raises(StoreError, match=r"m999_from_the_future.*upgrade soulgraph"):
        migrate(db)


def test_two_connections_on_one_postgresql_schema_apply_once() -> None:
    if postgres_server.binaries() is None:
        pytest.skip(postgres_server.SKIP_REASON)
    url = postgres_server.fresh_url()
    first, second = postgres.connect(url), postgres.connect(url)
    try:
        assert migrate(first)
        assert migrate(second) == []
        assert applied(second) == [m.__name__ for m in MIGRATIONS]
    finally:
        first.close()
        second.close()


def test_a_store_at_the_forks_migration_moves_on_to_field_partitions(
    db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store last migrated at m003_forks (main before memory partitions): m004 alone runs,
    gives every session (a fork too) its shard, and leaves what m003 kept as it was."""
    from soul.store.shards import shard_of

    later = [m for m in MIGRATIONS if m.__name__ >= "m004"]
    assert later[0].__name__ == "m004_field_partitions"
    monkeypatch.setattr(migrations, "MIGRATIONS", [m for m in MIGRATIONS if m.__name__ < "m004"])
    assert migrate(db)[-1] == "m003_forks"
    db.execute("INSERT INTO sessions (id, soul, user, created, updated) VALUES ('s1', 'claudius', 'ann', 0, 0)")
    db.execute("INSERT INTO sessions (id, soul, user, created, updated, forked_from, forked_at, user_model_key)"
               " VALUES ('f1', 'claudius', 'ann', 0, 0, 's1', 1, 'ann@fork:f1')")
    db.execute("INSERT INTO commits (session_id, turn, kind, time, meta, state, chetana)"
               " VALUES ('s1', 1, 'message', 0, '{}', '{\"n\": 1}', '{\"c\": 2}')")
    monkeypatch.setattr(migrations, "MIGRATIONS", [*migrations.MIGRATIONS, *later])
    assert migrate(db) == [m.__name__ for m in later]
    assert tables(db) == EXPECTED
    rows = db.execute("SELECT id, shard, forked_from, forked_at, user_model_key FROM sessions ORDER BY id").fetchall()
    ann = shard_of("claudius", "ann")
    assert [tuple(r) for r in rows] == [("f1", ann, "s1", 1, "ann@fork:f1"), ("s1", ann, None, None, None)]
    commit = db.execute("SELECT state, chetana, remember FROM commits").fetchone()
    assert tuple(commit) == ('{"n": 1}', '{"c": 2}', None)  # turns before m004 recorded no items
    assert migrate(db) == []


def test_field_partitions_migration_gives_existing_sessions_their_shard(
    db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from soul.store.shards import shard_of

    later = [m for m in MIGRATIONS if m.__name__ >= "m004"]
    monkeypatch.setattr(migrations, "MIGRATIONS", [m for m in MIGRATIONS if m.__name__ < "m004"])
    migrate(db)
    db.execute("INSERT INTO sessions (id, soul, user, created, updated) VALUES ('s1', 'claudius', 'ann', 0, 0)")
    db.execute("INSERT INTO sessions (id, soul, user, created, updated) VALUES ('s2', 'claudius', 'bob', 0, 0)")
    monkeypatch.setattr(migrations, "MIGRATIONS", [*migrations.MIGRATIONS, *later])
    assert migrate(db) == [m.__name__ for m in later]
    shards = dict(db.execute("SELECT id, shard FROM sessions ORDER BY id").fetchall())
    assert shards == {"s1": shard_of("claudius", "ann"), "s2": shard_of("claudius", "bob")}
    assert shards["s1"] != shards["s2"]  # these two land apart (checked once, here)


# index -> (table, its columns, the rows it holds: None for all) on messages and commits; a
# change must update this on purpose (each entry is written by every commit it covers)
EXPECTED_INDEXES = {
    "messages_session": ("messages", ["session_id"], None),
    "messages_user_model_check": ("messages", ["session_id"], "tag = 'user_model_check'"),
    "messages_s_loud": ("messages", ["session_id"], "tag = 'S_loud'"),
    "commits_session": ("commits", ["session_id"], None),
    "commits_process": ("commits", ["session_id", "process", "kind", "cycle"], "process IS NOT NULL"),
}


def test_messages_and_commits_are_indexed_only_for_the_rows_their_queries_ask_for(db: Any) -> None:
    migrate(db)
    if isinstance(db, sqlite3.Connection):
        found = {}
        for name, table, sql in db.execute(
            "SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'index'"
            " AND tbl_name IN ('messages', 'commits') AND sql IS NOT NULL"
        ):
            columns = [c[2] for c in db.execute(f"PRAGMA index_info({name})")]
            where = sql.split(" WHERE ", 1)[1] if " WHERE " in sql else None
            found[name] = (table, columns, where)
    else:
        found = {}
        for name, table, definition in db.execute(
            "SELECT indexname, tablename, indexdef FROM pg_indexes WHERE schemaname = current_schema()"
            " AND tablename IN ('messages', 'commits') AND indexname NOT LIKE '%pkey'"
        ):
            columns = definition.split(" USING btree (", 1)[1].split(")", 1)[0].split(", ")
            where = definition.split(" WHERE ", 1)[1] if " WHERE " in definition else None
            # PostgreSQL shows the predicate as it parsed it: "(tag = 'x'::text)"
            if where is not None:
                where = where.strip("()").replace("::text", "")
            found[name] = (table, columns, where)
    assert found == EXPECTED_INDEXES


@sqlite_only
def test_the_queries_of_the_partial_indexes_use_them(db: Any) -> None:
    """SQLite's planner takes a partial index only for a query whose terms imply its condition:
    the snapshot's last check, the pending impulses and a process's commits do."""
    from soul.store.notify import pending_impulses_query
    from soul.store.reading import _LAST_CHECK

    migrate(db)
    impulses, _ = pending_impulses_query("s")
    once = ("SELECT turn FROM commits WHERE session_id = ? AND process = ?"
            " AND kind = 'cycle' AND cycle = ? ORDER BY id LIMIT 1")
    for query, index in [(_LAST_CHECK, "messages_user_model_check"), (impulses, "messages_s_loud"),
                         (once, "commits_process")]:
        plan = " ".join(str(r[-1]) for r in db.execute("EXPLAIN QUERY PLAN " + query, ("s",) * query.count("?")))
        assert f"USING INDEX {index}" in plan or f"USING COVERING INDEX {index}" in plan, plan
