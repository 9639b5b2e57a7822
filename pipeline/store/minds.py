"""Background processes in the store: their cycles' rows, the Persona Core they started from,
and what resuming one reads back. The mind side of `SessionStore` (a mixin over its
connection and transactions, like `Commits`, `UserModels` and `Export`).

A process (AgentCSD's subconscious loop) commits one `Commit` of kind "cycle" per cycle; its
mood and criteria go to `mood_and_criteria`, its folded histories to `context_summaries`
(`write_cycle_rows`, inside the commit's transaction). Its Persona Core is snapshotted once
per session: the row in `persona_cores` and `logs/<session>/persona_core_snapshot.md` (a
second process of the session: `persona_core_snapshot.<process>.md`).

Resuming reads a bounded window (`mind_history`): the last `MESSAGE_LIMIT` messages of the
session and the last `MOOD_LIMIT` moods of the process, so a session of any length resumes
in the same time; older entries live on in the summaries the process wrote.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from soul.errors import StoreError
from soul.records import Commit, SummaryRecord
from soul.store import home as soul_home
from soul.store.connection import Connection
from soul.store.database import dicts

MESSAGE_LIMIT = 2000  # messages mind_history reads back (the session's latest, all layers)
MOOD_LIMIT = 200  # moods mind_history reads back (the process's latest)
SNAPSHOT_NAME = "persona_core_snapshot"

# Process names become parts of file names under logs/<session>/.
_PROCESS = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")


@dataclass(frozen=True)
class PersonaCore:
    """The Persona Core a process of a session started from, kept verbatim.

    `path` is where the user's file was read from; `sha256` the hex digest of `text` (UTF-8).
    """

    process: str
    path: str
    sha256: str
    text: str
    time: float


@dataclass(frozen=True)
class MindMessage:
    """A stored message as resuming needs it: which commit, turn and cycle it came from."""

    layer: str
    tag: str
    content: str
    step: str | None
    cycle: int | None  # the cycle of its commit (a process's cycle, or the cycle a turn saw)
    turn: int
    commit_id: int
    time: float
    verb: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    process: str | None = None  # the process of its commit (None for a turn of no process)
    kind: str = "message"  # its commit's kind: message, spontaneous, subprocess, cycle


@dataclass(frozen=True)
class MindMood:
    """A mood and criteria a process set, at its cycle and the session's turn count then."""

    mood: str
    criteria: str
    cycle: int | None
    turn: int
    time: float


@dataclass(frozen=True)
class MindHistory:
    """What a process resumes from.

    `cycles` is the highest cycle it committed (0 if none) and `last_cycle_commit` the id of
    its last cycle commit (0 if none): messages with a greater `commit_id` are what changed
    since. `messages` are the session's latest messages (every layer, every commit kind) in
    commit order, at most `MESSAGE_LIMIT`; `truncated` says older ones were left out.
    `moods` are the process's latest, oldest first; `summaries` its latest summary per
    history (keyed by the history's layer name).
    """

    process: str
    cycles: int
    last_cycle_commit: int
    messages: tuple[MindMessage, ...]
    moods: tuple[MindMood, ...]
    summaries: dict[str, SummaryRecord]
    truncated: bool = False


def write_cycle_rows(
    conn: Connection, commit: Commit, commit_id: int, turn: int, now: float
) -> None:
    """Insert a commit's mood and summaries (inside its transaction). Summaries fill the old
    turn_from/turn_to columns with the turn count they were written at."""
    sid = commit.session_id
    if (mood := commit.mood) is not None:
        conn.execute(
            "INSERT INTO mood_and_criteria (session_id, mood, criteria, turn, time, cycle,"
            " process, commit_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (sid, mood.mood, mood.criteria, turn, now, commit.cycle, commit.process, commit_id),
        )
    conn.executemany(
        "INSERT INTO context_summaries (session_id, layer, summary, turn_from, turn_to, time,"
        " cycle_from, cycle_to, digest, process, commit_id)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (sid, s.layer, s.summary, turn, turn, now, s.cycle_from, s.cycle_to, int(s.digest),
             commit.process, commit_id)
            for s in commit.summaries
        ],
    )


class Minds:
    """Persona Cores, moods and the history a background process resumes from."""

    _read: Callable[[], AbstractContextManager[Connection]]
    _write: Callable[..., Any]
    _require: Callable[[Connection, str], None]
    home: Path

    def snapshot_persona_core(
        self, session_id: str, process: str, path: str | Path, text: str
    ) -> PersonaCore:
        """Keep the Persona Core `process` starts from: the row, and its file in the session's
        log folder. The first snapshot of a (session, process) wins: calling again returns the
        stored one unchanged (and rewrites its file if it went missing). The text is the
        user's own file, stored verbatim (nothing redacted)."""
        _check_process(process)
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        now = time.time()

        def body(conn: Connection) -> tuple[PersonaCore, bool]:
            self._require(conn, session_id)
            conn.execute(
                "INSERT INTO persona_cores (session_id, process, path, sha256, text, time)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (session_id, process) DO NOTHING",
                (session_id, process, str(path), digest, text, now),
            )
            found = _core_and_rank(conn, session_id, process)
            assert found is not None  # inserted just now, or there before
            return found

        core, first = self._write(body)
        self._write_snapshot_file(session_id, core, first)
        return core

    def persona_core(self, session_id: str, process: str) -> PersonaCore | None:
        """The Persona Core snapshotted for this process of the session, or None."""
        with self._read() as conn:
            self._require(conn, session_id)
            found = _core_and_rank(conn, session_id, process)
        return found[0] if found else None

    def persona_core_file(self, session_id: str, process: str) -> Path | None:
        """Where the snapshot of this process's Persona Core is written, or None if none is."""
        with self._read() as conn:
            self._require(conn, session_id)
            found = _core_and_rank(conn, session_id, process)
        return self._snapshot_path(session_id, process, found[1]) if found else None

    def mind_history(
        self,
        session_id: str,
        process: str,
        *,
        messages: int = MESSAGE_LIMIT,
        moods: int = MOOD_LIMIT,
    ) -> MindHistory:
        """What `process` resumes from, read in one transaction (see `MindHistory`)."""
        with self._read() as conn:
            self._require(conn, session_id)
            cycles, last = conn.execute(
                "SELECT coalesce(max(cycle), 0), coalesce(max(id), 0) FROM commits"
                " WHERE session_id = ? AND process = ? AND kind = 'cycle'",
                (session_id, process),
            ).fetchone()
            rows = conn.execute(
                "SELECT m.layer, m.tag, m.content, m.step, m.cycle, m.turn, m.commit_id, m.time,"
                " m.verb, m.meta, c.process, c.kind FROM messages m"
                " JOIN commits c ON c.id = m.commit_id"
                " WHERE m.session_id = ? ORDER BY m.id DESC LIMIT ?",
                (session_id, messages + 1),
            ).fetchall()
            mood_rows = conn.execute(
                "SELECT mood, criteria, cycle, turn, time FROM mood_and_criteria"
                " WHERE session_id = ? AND process = ? ORDER BY id DESC LIMIT ?",
                (session_id, process, moods),
            ).fetchall()
            summary_rows = conn.execute(
                "SELECT layer, summary, coalesce(cycle_from, 0), coalesce(cycle_to, 0), digest"
                " FROM context_summaries WHERE id IN (SELECT max(id) FROM context_summaries"
                " WHERE session_id = ? AND process = ? GROUP BY layer) ORDER BY layer",
                (session_id, process),
            ).fetchall()
        truncated = len(rows) > messages
        kept = rows[:messages] if truncated else rows
        return MindHistory(
            process=process,
            cycles=cycles,
            last_cycle_commit=last,
            messages=tuple(_mind_message(r) for r in reversed(kept)),
            moods=tuple(MindMood(*r) for r in reversed(mood_rows)),
            summaries={
                r[0]: SummaryRecord(r[0], r[1], r[2], r[3], bool(r[4])) for r in summary_rows
            },
            truncated=truncated,
        )

    def moods(self, session_id: str) -> list[dict[str, Any]]:
        """Every mood and criteria of the session, oldest first: mood, criteria, cycle,
        process, turn, time (what `--json` prints)."""
        with self._read() as conn:
            self._require(conn, session_id)
            return dicts(
                conn,
                "SELECT mood, criteria, cycle, process, turn, time FROM mood_and_criteria"
                " WHERE session_id = ? ORDER BY id",
                session_id,
            )

    # -- the snapshot file -----------------------------------------------------------------

    def _snapshot_path(self, session_id: str, process: str, first: bool) -> Path:
        name = SNAPSHOT_NAME if first else f"{SNAPSHOT_NAME}.{process}"
        return soul_home.session_logs_dir(session_id, self.home) / f"{name}.md"

    def _write_snapshot_file(self, session_id: str, core: PersonaCore, first: bool) -> None:
        target = self._snapshot_path(session_id, core.process, first)
        data = core.text.encode("utf-8")
        try:
            if target.exists() and target.read_bytes() == data:
                return
            target.parent.mkdir(parents=True, exist_ok=True)
            # Written aside and renamed, so a reader never sees half a Persona Core.
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.replace(tmp, target)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError as error:
            raise StoreError(
                f"cannot write the Persona Core snapshot {target} ({error.strerror or error}):"
                " check that the data home's logs folder is writable"
            ) from error


def _check_process(process: str) -> None:
    if not _PROCESS.match(process):
        raise StoreError(
            f"invalid process name {process!r}: use letters, digits, '_' and '-' (at most 64)"
        )


def _core_and_rank(
    conn: Connection, session_id: str, process: str
) -> tuple[PersonaCore, bool] | None:
    # The session's first process to snapshot owns the plain file name (AgentCSD's layout).
    row = conn.execute(
        "SELECT process, path, sha256, text, time, rowid FROM persona_cores"
        " WHERE session_id = ? AND process = ?",
        (session_id, process),
    ).fetchone()
    if row is None:
        return None
    earlier = conn.execute(
        "SELECT 1 FROM persona_cores WHERE session_id = ? AND rowid < ? LIMIT 1",
        (session_id, row[5]),
    ).fetchone()
    return PersonaCore(*row[:5]), earlier is None


def _mind_message(row: tuple[Any, ...]) -> MindMessage:
    layer, tag, content, step, cycle, turn, cid, at, verb, meta, process, kind = row
    return MindMessage(
        layer, tag, content, step, cycle, turn, cid, at, verb, json.loads(meta), process, kind
    )
