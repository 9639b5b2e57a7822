"""Schema migrations of the session database: named, ordered functions, each recorded once.

The pattern is simonw/llm's `migrations.py`: `@migration` appends a function to `MIGRATIONS`;
`migrate()` runs the ones whose name is not yet in the `migrations` table. A migration never
changes once released; a schema change is a new function at the end of the list.

Each migration runs with its record in one `BEGIN IMMEDIATE` transaction, so two processes
opening a fresh home at once cannot both apply it, and a crash leaves it either done or not.
(`executescript` is never used: it commits whatever transaction is open.) On PostgreSQL the
same functions run through the dialect translation (`soul.store.dialect`), and a
transaction-scoped advisory lock stands in for BEGIN IMMEDIATE's database lock.

A database that records a migration this code does not know was migrated by a newer soul:
opening it is refused (StoreError) rather than writing rows an older schema mislabels.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from soul.errors import StoreError
from soul.store.connection import Connection
from soul.store.dialect import dialect_of

Migration = Callable[[Connection], None]

MIGRATIONS: list[Migration] = []


def migration(fn: Migration) -> Migration:
    """Register `fn` as the next migration; its `__name__` is what gets recorded."""
    if any(m.__name__ == fn.__name__ for m in MIGRATIONS):
        raise ValueError(f"migration {fn.__name__} is registered twice")
    MIGRATIONS.append(fn)
    return fn


def applied(conn: Connection) -> list[str]:
    """Names of the migrations recorded in this database, in the order they were applied."""
    if not dialect_of(conn).has_table(conn, "migrations"):
        return []
    return [r[0] for r in conn.execute("SELECT name FROM migrations ORDER BY rowid")]


def migrate(conn: Connection) -> list[str]:
    """Apply every pending migration; the names applied now (empty when up to date).

    `conn` must be in autocommit mode (`isolation_level=None`): the transactions are ours.
    """
    if conn.isolation_level is not None:
        raise ValueError("migrate() needs a connection opened with isolation_level=None")
    # Cheap read first: an up-to-date database (the usual case) takes no write lock.
    known = {m.__name__ for m in MIGRATIONS}
    found = applied(conn)
    if unknown := [name for name in found if name not in known]:
        raise StoreError(
            f"the session store's schema is newer than this soul knows (migrations"
            f" {', '.join(unknown)} were applied by a later version): upgrade soulgraph, or"
            " point SOUL_HOME / SOUL_STORE at another store"
        )
    if set(found) >= known:
        return []
    dialect = dialect_of(conn)
    done: list[str] = []
    for fn in MIGRATIONS:
        conn.execute("BEGIN IMMEDIATE")
        try:
            dialect.lock(conn, "soul-store-migrations")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied REAL NOT NULL)"
            )
            # Checked inside the write lock: another process may have applied it meanwhile.
            if conn.execute("SELECT 1 FROM migrations WHERE name = ?", (fn.__name__,)).fetchone():
                conn.execute("COMMIT")
                continue
            fn(conn)
            conn.execute(
                "INSERT INTO migrations (name, applied) VALUES (?, ?)", (fn.__name__, time.time())
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        done.append(fn.__name__)
    return done


def _run(conn: Connection, *statements: str) -> None:
    for statement in statements:
        conn.execute(statement)


@migration
def m001_initial(conn: Connection) -> None:
    """Sessions, the commit log, messages, state, user models, working memory, traces, Chetana.

    Names follow AgentCSD where they fit (sessions.status, messages.layer/tag, the
    mood_and_criteria and context_summaries tables), with `turn` for its `cycle_number` and
    `time` (epoch seconds, REAL) for its `created_at`. Every per-session table cascades from
    `sessions`, except `user_models`: those belong to (soul, user) and outlive sessions.
    """
    _run(
        conn,
        """CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            soul TEXT NOT NULL,
            user TEXT NOT NULL,
            blueprint TEXT NOT NULL DEFAULT '',
            status TEXT NOT NULL DEFAULT 'active',
            turns INTEGER NOT NULL DEFAULT 0,
            logged_commit INTEGER NOT NULL DEFAULT 0,
            created REAL NOT NULL,
            updated REAL NOT NULL
        )""",
        "CREATE INDEX sessions_soul ON sessions(soul, created)",
        # One row per applied Commit: the unit the JSONL logs are mirrored by. AUTOINCREMENT so
        # ids only ever grow, which the logs' cursor (sessions.logged_commit) relies on.
        """CREATE TABLE commits (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            turn INTEGER NOT NULL,
            kind TEXT NOT NULL,
            time REAL NOT NULL,
            meta TEXT NOT NULL DEFAULT '{}'
        )""",
        "CREATE INDEX commits_session ON commits(session_id)",
        """CREATE TABLE messages (
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            commit_id INTEGER NOT NULL,
            turn INTEGER NOT NULL,
            layer TEXT NOT NULL,
            tag TEXT NOT NULL,
            step TEXT,
            verb TEXT,
            content TEXT NOT NULL,
            meta TEXT NOT NULL DEFAULT '{}',
            time REAL NOT NULL
        )""",
        "CREATE INDEX messages_session ON messages(session_id)",
        # The Samantha-Dreams gate asks for the latest user_model_check of a session.
        "CREATE INDEX messages_session_tag ON messages(session_id, tag)",
        """CREATE TABLE state (
            session_id TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
            json TEXT NOT NULL
        )""",
        """CREATE TABLE user_models (
            soul TEXT NOT NULL,
            user TEXT NOT NULL,
            version INTEGER NOT NULL,
            text TEXT NOT NULL,
            note TEXT NOT NULL DEFAULT '',
            session_id TEXT,
            turn INTEGER,
            created REAL NOT NULL,
            PRIMARY KEY (soul, user, version)
        )""",
        # The Claudius seed's working memory (thread -> session_id), with Open Souls regions.
        """CREATE TABLE working_memory (
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            commit_id INTEGER NOT NULL,
            turn INTEGER NOT NULL,
            region TEXT NOT NULL,
            entry_type TEXT NOT NULL,
            content TEXT NOT NULL,
            verb TEXT,
            meta TEXT NOT NULL DEFAULT '{}',
            time REAL NOT NULL
        )""",
        "CREATE INDEX working_memory_session ON working_memory(session_id)",
        """CREATE TABLE traces (
            commit_id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            turn INTEGER NOT NULL,
            kind TEXT NOT NULL,
            json TEXT NOT NULL
        )""",
        "CREATE INDEX traces_session ON traces(session_id, turn)",
        """CREATE TABLE chetana (
            session_id TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
            json TEXT NOT NULL
        )""",
        """CREATE TABLE mood_and_criteria (
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            mood TEXT NOT NULL,
            criteria TEXT NOT NULL,
            turn INTEGER NOT NULL,
            time REAL NOT NULL
        )""",
        "CREATE INDEX mood_and_criteria_session ON mood_and_criteria(session_id, time)",
        """CREATE TABLE context_summaries (
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            layer TEXT NOT NULL,
            summary TEXT NOT NULL,
            turn_from INTEGER NOT NULL,
            turn_to INTEGER NOT NULL,
            time REAL NOT NULL
        )""",
        "CREATE INDEX context_summaries_session ON context_summaries(session_id, layer)",
    )


@migration
def m002_background_processes(conn: Connection) -> None:
    """Background processes (AgentCSD's subconscious loop) beside the turns.

    Cycles: `messages.cycle` and `commits.process/cycle` (a process's cycle commit, or the
    cycle a turn saw); mood and criteria and context summaries gain the process and cycle
    that wrote them and the commit they came in (`commit_id`, so the JSONL mirror can be
    rebuilt from the database); summaries also say whether a truncation digest stands in
    (`digest`). Old summary rows keep turn_from/turn_to, which new rows fill with the
    session's turn count. `persona_cores` keeps the Persona Core a process started from,
    verbatim, once per (session, process).
    """
    _run(
        conn,
        "ALTER TABLE messages ADD COLUMN cycle INTEGER",
        "ALTER TABLE commits ADD COLUMN process TEXT",
        "ALTER TABLE commits ADD COLUMN cycle INTEGER",
        "ALTER TABLE mood_and_criteria ADD COLUMN cycle INTEGER",
        "ALTER TABLE mood_and_criteria ADD COLUMN process TEXT",
        "ALTER TABLE mood_and_criteria ADD COLUMN commit_id INTEGER",
        "ALTER TABLE context_summaries ADD COLUMN cycle_from INTEGER",
        "ALTER TABLE context_summaries ADD COLUMN cycle_to INTEGER",
        "ALTER TABLE context_summaries ADD COLUMN digest INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE context_summaries ADD COLUMN process TEXT",
        "ALTER TABLE context_summaries ADD COLUMN commit_id INTEGER",
        """CREATE TABLE persona_cores (
            session_id TEXT REFERENCES sessions(id) ON DELETE CASCADE,
            process TEXT NOT NULL,
            path TEXT NOT NULL,
            sha256 TEXT NOT NULL,
            text TEXT NOT NULL,
            time REAL NOT NULL,
            PRIMARY KEY (session_id, process)
        )""",
        # Resuming a process asks for its highest cycle and its last cycle commit.
        "CREATE INDEX commits_process ON commits(session_id, process, kind, cycle)",
        # A process's moods in order, and its latest summary per layer.
        "CREATE INDEX mood_and_criteria_process ON mood_and_criteria(session_id, process)",
        "CREATE INDEX context_summaries_process"
        " ON context_summaries(session_id, process, layer)",
        # The JSONL repair reads a session's moods and summaries after its log cursor.
        "CREATE INDEX mood_and_criteria_commit ON mood_and_criteria(session_id, commit_id)",
        "CREATE INDEX context_summaries_commit ON context_summaries(session_id, commit_id)",
    )


@migration
def m003_forks(conn: Connection) -> None:
    """Turns as they were, and sessions forked from them (`soul sessions fork`).

    `commits.state` and `commits.chetana` keep the soul state and Chetana's state a commit
    carried (NULL when it carried none), so what a session was after any turn can be read
    back and a fork started from it. `sessions.forked_from/forked_at` name the session and
    turn a fork was made from; `sessions.user_model_key` is the name its user-model versions
    are kept under when it keeps a line of its own (a fork's: `user@fork:<id>`; NULL: the
    session's user, the line every session of that soul and user shares).
    """
    _run(
        conn,
        "ALTER TABLE commits ADD COLUMN state TEXT",
        "ALTER TABLE commits ADD COLUMN chetana TEXT",
        "ALTER TABLE sessions ADD COLUMN forked_from TEXT",
        "ALTER TABLE sessions ADD COLUMN forked_at INTEGER",
        "ALTER TABLE sessions ADD COLUMN user_model_key TEXT",
    )


@migration
def m004_field_partitions(conn: Connection) -> None:
    """Memory past one machine (docs/scale.md): a memory field partitioned by (soul, user),
    each partition owned by one process at a time, and sessions spread over workers by shard.

    - `field_leases`: one row per (soul, user) partition: its owner, the fence `epoch` (raised
      by one each time the owner changes; commits and memory writes carry it, and a stale
      one is refused), when the lease `expires` unless renewed, and when it was `taken`.
    - `sessions.shard`: the session's shard (`soul.store.shards.shard_of(soul, user)`), so a
      worker reads only its own shards' sessions; filled in here for existing sessions.
    - `commits.remember`: the items the turn wrote to the memory field after it committed
      (JSON), so a new owner rebuilds the partition from the store exactly; NULL before this.
    """
    from soul.store.shards import shard_of

    _run(
        conn,
        """CREATE TABLE field_leases (
            soul TEXT NOT NULL,
            user TEXT NOT NULL,
            owner TEXT NOT NULL,
            epoch INTEGER NOT NULL,
            expires REAL NOT NULL,
            taken REAL NOT NULL,
            PRIMARY KEY (soul, user)
        )""",
        "CREATE INDEX field_leases_owner ON field_leases(owner)",
        "ALTER TABLE sessions ADD COLUMN shard INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE commits ADD COLUMN remember TEXT",
    )
    rows = conn.execute("SELECT id, soul, user FROM sessions").fetchall()
    conn.executemany("UPDATE sessions SET shard = ? WHERE id = ?",
                     [(shard_of(soul, user), sid) for sid, soul, user in rows])
    _run(
        conn,
        "CREATE INDEX sessions_shard ON sessions(soul, shard)",
        "CREATE INDEX sessions_user ON sessions(soul, user)",
    )


@migration
def m005_partial_indexes(conn: Connection) -> None:
    """Indexes that hold only the rows their queries ask for, so a commit writes fewer.

    `messages_session_tag` indexed every message by (session, tag) for two questions: a
    session's last user-model check (each snapshot that reads the session's rows) and its S_loud
    impulses since its last turn (the triggers). A commit of ten messages wrote ten entries
    into it, spread over the pages of as many tags; now one partial index per question holds
    only those messages. `commits_process` holds only the commits of a background process
    (every query on it names one): a turn's commit writes no entry.
    """
    _run(
        conn,
        "DROP INDEX messages_session_tag",
        "CREATE INDEX messages_user_model_check ON messages(session_id) WHERE tag = 'user_model_check'",
        "CREATE INDEX messages_s_loud ON messages(session_id) WHERE tag = 'S_loud'",
        "DROP INDEX commits_process",
        "CREATE INDEX commits_process ON commits(session_id, process, kind, cycle) WHERE process IS NOT NULL",
    )
