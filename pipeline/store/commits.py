"""Committing a turn: one write transaction per `Commit`, compare-and-set on the session's turn
count (read under SQLite's BEGIN IMMEDIATE lock, or PostgreSQL's row lock on the session), then
its JSONL lines written from the same data (`soul.store.mirror`: repaired from the database
after a crash between the two), or handed back to be written later (`logs_later`). The commit side of `SessionStore` (a mixin over its
connection and transactions, like `UserModels` and `Export`).

A background process's cycle (kind "cycle") runs beside the turns: it is not checked against
the turn count and does not advance it; it is stamped with the count read in its transaction.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from soul.errors import SessionNotFound, StaleTurn, StoreError
from soul.records import Commit, SessionInfo
from soul.store import logs, notify
from soul.store.connection import Connection
from soul.store.database import Checkpointer
from soul.store.descriptors import Descriptors
from soul.store.dialect import Dialect, dialect_of, insert_rows
from soul.store.export import SESSION_COLUMNS
from soul.store.heads import Head, Heads
from soul.store.logs import dumps, dumps_fields
from soul.store.minds import write_cycle_rows
from soul.store.mirror import Mirror
from soul.store.partitions import check_fence
from soul.store.reading import SeenSessions
from soul.store.redaction import could_hold_secrets, redact_commit, secrets

COMMIT_KINDS = ("message", "spontaneous", "subprocess", "cycle")


def _serialised(commit: Commit) -> tuple[str | None, str | None, str, list[str], list[str], str | None]:
    """The JSON the transaction writes: state, Chetana state, trace, each message's and each
    memory entry's meta, and what the turn writes to the memory field (`remember`)."""
    return (
        dumps(commit.state) if commit.state is not None else None,
        dumps(commit.chetana) if commit.chetana is not None else None,
        dumps_fields(commit.trace),
        [dumps(m.meta) if m.meta else "{}" for m in commit.messages],
        [dumps(m.meta) if m.meta else "{}" for m in commit.memory],
        dumps(list(commit.remember)) if commit.remember is not None else None,
    )


def _texts(commit: Commit) -> Iterator[str]:
    """Every text field of a commit that is not JSON (see `redact_commit`)."""
    for m in commit.messages:
        yield m.content
    for e in commit.memory:
        yield e.content
    if commit.user_model is not None:
        yield commit.user_model.text
        yield commit.user_model.note
    if commit.mood is not None:
        yield commit.mood.mood
        yield commit.mood.criteria
    for summary in commit.summaries:
        yield summary.summary


class Commits(Mirror):
    """Applying turns and mirroring them to the JSONL logs."""

    _conn: Connection
    _lock: Any
    _write: Callable[..., Any]
    _checkpointer: Checkpointer | None
    _damage_reported: Callable[[], AbstractContextManager[None]]
    _log_folders: dict[str, Path]
    _descriptors: Descriptors
    _chetana_written: dict[str, tuple[str, Any]]
    _seen: SeenSessions
    _heads: Heads | None  # None on PostgreSQL
    _writes: int
    home: Path

    def commit(self, commit: Commit, *, once: bool = False) -> int:
        """Apply a turn's changes in one transaction; the session's new turn number (see
        `apply`, which also says the commit's id)."""
        return self.apply(commit, once=once).turn

    def apply(self, commit: Commit, *, once: bool = False, logs_later: bool = False) -> Applied:
        """Apply a turn's changes in one transaction; its new turn number and commit id.

        Refused with StaleTurn unless the session's turn count equals `commit.base_turn`
        (subprocess commits keep the count but check it all the same). A cycle commit is not
        checked and returns the turn count it was stamped with. The JSONL logs are appended
        after the transaction, from the same data — or, with `logs_later`, when the caller calls
        `Applied.append_logs` (in any thread: a session does it in the worker thread that writes
        the turn's memories, after the reply); until then they lag the database by this commit,
        as after a crash, and any later commit of the session (or `repair_logs`, or the next open)
        appends them. Every text and JSON field is redacted first (`redact_commit`): a key quoted
        in a prompt or reply is stored nowhere.

        `once=True` (cycle commits only) makes a cycle idempotent by (session, process, cycle
        number): if that cycle is already stored, nothing is written and the turn count it was
        stamped with is returned. The check runs inside the commit's transaction, under its
        lock, so a cycle re-run after a crash (a durable runner's retry) is applied exactly
        once. Turns need no flag: their base-turn check already makes them once-only.

        A commit with a `fence` (a partitioned memory field's lease) is refused with
        `LeaseLost` unless that lease still has the fence's owner and epoch, checked in the
        same transaction (`soul.store.partitions.check_fence`). `commit.remember` (what the
        turn writes to the memory field) is kept with the commit, for rebuilding the field.
        """
        if commit.kind not in COMMIT_KINDS:
            raise StoreError(f"unknown commit kind {commit.kind!r}")
        if once and commit.kind != "cycle":
            raise StoreError(
                f"once=True is for cycle commits (got kind {commit.kind!r}): a turn is applied"
                " once by its base-turn check"
            )
        if commit.kind == "cycle":
            _check_cycle(commit)
        # Serialised before the transaction: a value that is not JSON fails without a lock held.
        serialised = _serialised(commit)
        known = secrets()
        state, chetana, trace, metas, memory, remember = serialised
        json_texts = [t for t in (state, chetana, trace, remember, *metas, *memory) if t is not None]
        if could_hold_secrets(_texts(commit), known, json_texts=json_texts):
            # a secret (or what may be one) somewhere: redacted field by field, then written
            commit = redact_commit(commit, known)
            state, chetana, trace, metas, memory, remember = _serialised(commit)
        now = time.time()
        dialect = dialect_of(self._conn)

        # On a backend that holds the whole database for the transaction (SQLite), the session's
        # last commit (the one before this) and its user model's latest version are read with
        # the session row: three statements in one.
        holds_all = dialect.serialised
        head = _head(dialect, commit.user_model is not None)
        heads = self._heads  # (SQLite's: the snapshot head this commit leaves, soul.store.heads)

        def body(conn: Connection) -> tuple[int, int, int, dict[str, Any], str, int, SessionInfo, Head | None] | int:
            row = conn.execute(head, (commit.session_id,)).fetchone()
            if row is None:
                raise SessionNotFound(f"no session {commit.session_id!r}")
            # `user`: the name its user-model versions are kept under; `cursor`: the logs'
            # (only a holder of the folder's lock moves it: see `_mirror`)
            turns, soul, user, cursor = row[:4]
            if holds_all:
                previous, latest = row[4:6]
                listed = row[6:]  # the session as listed (`SessionInfo`), before this commit
            else:
                listed = row[4:]
            if commit.fence is not None:
                check_fence(conn, commit.fence)
            if once:
                done = conn.execute(
                    "SELECT turn FROM commits WHERE session_id = ? AND process = ?"
                    " AND kind = 'cycle' AND cycle = ? ORDER BY id LIMIT 1",
                    (commit.session_id, commit.process, commit.cycle),
                ).fetchone()
                if done is not None:
                    return int(done[0])
            # A cycle runs beside the turns: it takes the count as it finds it.
            turn = turns if commit.kind == "cycle" else commit.turn
            if commit.kind != "cycle" and turns != commit.base_turn:
                raise StaleTurn(
                    f"session {commit.session_id} is at turn {turns}, not {commit.base_turn}:"
                    " another turn was committed meanwhile"
                )
            version = None
            if commit.user_model is not None:
                if not holds_all:
                    # Sessions of one (soul, user) commit in parallel on PostgreSQL: versions queue.
                    dialect.lock(conn, f"user_model {soul!r} {user!r}")
                    latest = conn.execute(
                        "SELECT max(version) FROM user_models WHERE soul = ? AND user = ?",
                        (soul, user),
                    ).fetchone()[0]
                version = (latest or 0) + 1
            event = {
                "kind": commit.kind,
                "messages": len(commit.messages),
                "memory": len(commit.memory),
                "state": state is not None,
                "chetana": chetana is not None,
                "user_model_version": version,
            }
            # Only commits that have them say so: older sessions' events read as before.
            if commit.process is not None or commit.cycle is not None:
                event.update(process=commit.process, cycle=commit.cycle)
            if commit.mood is not None:
                event["mood"] = True
            if commit.summaries:
                event["summaries"] = len(commit.summaries)
            event_json = dumps(event)
            cid = conn.execute(
                "INSERT INTO commits (session_id, turn, kind, time, meta, process, cycle, state,"
                " chetana, remember) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (commit.session_id, turn, commit.kind, now, event_json, commit.process,
                 commit.cycle, state, chetana, remember),
            ).fetchone()[0]
            sid = commit.session_id
            cycle = commit.cycle
            if commit.messages:
                insert_rows(
                    conn, "messages",
                    (("session_id", sid), ("commit_id", cid), ("turn", turn), ("time", now), ("cycle", cycle)),
                    _MESSAGE_COLUMNS,
                    [(m.layer, m.tag, m.step, m.verb, m.content, meta)
                     for m, meta in zip(commit.messages, metas, strict=True)],
                )
            if commit.mood is not None or commit.summaries:
                write_cycle_rows(conn, commit, cid, turn, now)
            if state is not None:
                conn.execute(
                    "INSERT INTO state (session_id, json) VALUES (?, ?)"
                    " ON CONFLICT (session_id) DO UPDATE SET json = excluded.json",
                    (sid, state),
                )
            if (model := commit.user_model) is not None:
                conn.execute(
                    "INSERT INTO user_models (soul, user, version, text, note, session_id, turn,"
                    " created) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (soul, user, version, model.text, model.note, sid, turn, now),
                )
            if commit.memory:
                insert_rows(
                    conn, "working_memory",
                    (("session_id", sid), ("commit_id", cid), ("turn", turn), ("time", now)),
                    _MEMORY_COLUMNS,
                    [(m.region, m.entry_type, m.content, m.verb, meta)
                     for m, meta in zip(commit.memory, memory, strict=True)],
                )
            if chetana is not None:
                conn.execute(
                    "INSERT INTO chetana (session_id, json) VALUES (?, ?)"
                    " ON CONFLICT (session_id) DO UPDATE SET json = excluded.json",
                    (sid, chetana),
                )
            conn.execute(
                "INSERT INTO traces (commit_id, session_id, turn, kind, json)"
                " VALUES (?, ?, ?, ?, ?)",
                (cid, sid, turn, commit.kind, trace),
            )
            conn.execute(
                "UPDATE sessions SET turns = ?, updated = ? WHERE id = ?", (turn, now, sid)
            )
            if not holds_all:  # (read after the insert: in its own snapshot, past any wait)
                previous = conn.execute(
                    "SELECT coalesce(max(id), 0) FROM commits WHERE session_id = ? AND id < ?",
                    (sid, cid),
                ).fetchone()[0]
            if dialect.name != "sqlite":  # other processes hear of it at COMMIT, ids only
                dialect.notify(conn, notify.channel(soul), notify.Notice(sid, cid, notify.ORIGIN).payload)
            # the session as listed after it (what `SessionStore.session` would read now)
            after = (listed[0], listed[1], listed[2], turn, listed[4], now, *listed[6:])
            # and its snapshot head, worked out from the one kept (SQLite: soul.store.heads)
            kept = None if heads is None else heads.after_commit(
                sid, self._writes, after, state, chetana,
                (version, model.text) if model is not None and version is not None else None,
                cid, len(commit.memory))
            return cursor, previous, cid, event, event_json, turn, SessionInfo(*after), kept

        # The logs' folder is locked before the transaction, so the cursor it reads stays true
        # until the lines are appended (no second read); a session's first commit makes the
        # folder after it, and locks it then. Lines appended later (`logs_later`) take the lock
        # and read the cursor when they are appended.
        writer = None
        if not logs_later:  # (an OSError: the mirror tries again after the commit, and says why it cannot)
            with contextlib.suppress(OSError):
                writer = self._descriptors.hold(self._log_folder(commit.session_id), create=False)
        try:
            applied = self._write(body)
            if isinstance(applied, int):  # once=True, and this cycle was already stored
                return Applied(applied, 0)
            return self._mirrored(commit, applied, now, metas, chetana, writer, later=logs_later)
        finally:
            if writer is not None:
                writer.release()

    def _mirrored(
        self,
        commit: Commit,
        applied: tuple[int, int, int, dict[str, Any], str, int, SessionInfo, Head | None],
        now: float,
        metas: list[str],
        chetana: str | None,
        writer: logs.Writer | None,
        *,
        later: bool = False,
    ) -> Applied:
        """After the transaction: the checkpoint poked, the commit's lines appended (`later`:
        handed back to be appended by the caller, `Applied.append_logs`)."""
        cursor, previous, cid, event, event_json, turn, info, head = applied
        if head is not None and self._heads is not None:  # the next snapshot takes it unless something is written first
            self._heads.keep(commit.session_id, head)
        if self._checkpointer is not None:
            self._checkpointer.poke()
        if chetana is not None and type(commit.chetana) is dict:
            # the next snapshot of the session reads this text back: it takes this value instead
            # of decoding it (`Reading._chetana`; a Commit's data is not changed once applied)
            written = self._chetana_written
            if len(written) >= 4096:
                written.clear()
            written[commit.session_id] = (chetana, commit.chetana)
        # the session's rows as its next snapshot reads them back (`soul.store.reading.Seen`)
        self._seen.committed(commit.session_id, previous, cid, commit.memory, commit.messages, now)
        mirror = functools.partial(self._append_lines, commit, previous, cid, turn, now, event, metas, event_json)
        if later:
            return Applied(turn, cid, info, mirror)
        mirror(writer, cursor)
        return Applied(turn, cid, info)


_MESSAGE_COLUMNS = ("layer", "tag", "step", "verb", "content", "meta")
_MEMORY_COLUMNS = ("region", "entry_type", "content", "verb", "meta")
_HEAD = "SELECT turns, soul, coalesce(user_model_key, user), logged_commit, "
_PREVIOUS = "(SELECT coalesce(max(id), 0) FROM commits WHERE session_id = sessions.id), "
_LATEST_VERSION = (
    "(SELECT max(version) FROM user_models WHERE soul = sessions.soul"
    " AND user = coalesce(sessions.user_model_key, sessions.user)), "
)


@functools.cache
def _head(dialect: Dialect, user_model: bool) -> str:
    """The commit's first statement: the session row (its turn count, soul, user-model name,
    logs' cursor, and its columns as listed), locked; on a dialect whose write transaction
    holds the whole database, also the session's last commit id and, if the commit writes a
    user model, that model's latest version (else NULL)."""
    if not dialect.serialised:
        return _HEAD + SESSION_COLUMNS + " FROM sessions WHERE id = ?" + dialect.for_update
    return (_HEAD + _PREVIOUS + (_LATEST_VERSION if user_model else "NULL, ") + SESSION_COLUMNS
            + " FROM sessions WHERE id = ?" + dialect.for_update)


def _check_cycle(commit: Commit) -> None:
    # A cycle is not checked against the turn count, so a full replacement it carried (state,
    # Chetana) could silently undo a turn committed meanwhile: refused, not lost.
    if not commit.process or commit.cycle is None:
        raise StoreError(
            f"a cycle commit of session {commit.session_id} needs its process and cycle number"
            f" (got process={commit.process!r}, cycle={commit.cycle!r})"
        )
    if commit.state is not None or commit.chetana is not None:
        raise StoreError(
            f"cycle {commit.cycle} of process {commit.process!r} carries a full"
            f" {'state' if commit.state is not None else 'Chetana state'}: a cycle runs beside"
            " the turns and would overwrite one committed meanwhile; let the next turn write it"
        )


@dataclass(frozen=True)
class Applied:
    """A commit as the store applied it: the session's turn number after it, its id (0 when
    `once=True` found the cycle stored already and wrote nothing), the session as listed
    after it (None when nothing was written), and, when it was applied with `logs_later`, what
    appends its JSONL lines (`append_logs`)."""

    turn: int
    commit_id: int
    session: SessionInfo | None = None
    pending_logs: Callable[[], None] | None = field(default=None, repr=False, compare=False)

    def append_logs(self) -> None:
        """Append the commit's JSONL lines, if `apply(..., logs_later=True)` left them (at
        most once has effect: the logs' cursor says what is appended; an error is logged)."""
        if self.pending_logs is not None:
            self.pending_logs()
