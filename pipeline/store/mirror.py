"""The JSONL mirror of a store's commits: each session's log files appended from what a commit
wrote, under the session folder's lock, with a cursor (`sessions.logged_commit`) that says
which commit the files hold up to; after a crash between the database and the files (or a
commit applied with `logs_later` whose lines were not appended yet) the lines past the cursor
are read back from the database and appended, exactly once. A mixin of `SessionStore` (under
`Commits`, which mirrors each commit it applies).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from soul.records import Commit
from soul.store import home as soul_home
from soul.store import logs
from soul.store.connection import Connection
from soul.store.descriptors import Descriptors
from soul.store.dialect import dialect_of

__all__ = ["Mirror"]

log = logging.getLogger("soul.store.commits")  # (the logger these warnings have always had)


class Mirror:
    """Appending commits' lines to the session's JSONL logs, and repairing them."""

    _conn: Connection
    _lock: Any
    _damage_reported: Callable[[], AbstractContextManager[None]]
    _log_folders: dict[str, Path]
    _descriptors: Descriptors

    def _append_lines(self, commit: Commit, previous: int, cid: int, turn: int, now: float, event: dict[str, Any],
                      metas: list[str], event_json: str, writer: logs.Writer | None = None,
                      cursor: int | None = None) -> None:
        """Append a commit's log lines (`_mirror`: with the folder's lock held, `writer`,
        and the cursor read under it, or taking them); an OSError is logged, not raised."""
        lines = logs.commit_lines(
            cid, turn, now, event, commit.messages,
            cycle=commit.cycle, process=commit.process, mood=commit.mood,
            summaries=commit.summaries,
            # the rows' JSON, spliced into the lines (a meta that is not a dict is written as
            # `dict(meta)` there, so only dicts' JSON is the same text)
            metas=metas if all(type(m.meta) is dict for m in commit.messages) else None,
            event_json=event_json,
        )
        try:
            self._mirror(commit.session_id, _Just(previous, cid, lines), writer, cursor)
        except OSError as error:
            # The turn is committed; the mirror catches up on the next commit or open.
            log.warning("session %s: logs not written yet (%s)", commit.session_id, error)

    def repair_logs(self, session_id: str | None = None) -> list[str]:
        """Write the log lines of commits not yet mirrored (after a crash); the sessions fixed."""
        query = (
            "SELECT id FROM sessions s WHERE logged_commit <"
            " (SELECT coalesce(max(c.id), 0) FROM commits c WHERE c.session_id = s.id)"
        )
        with self._lock:
            if session_id is None:
                ids = [r[0] for r in self._conn.execute(query)]
            else:
                ids = [r[0] for r in self._conn.execute(query + " AND id = ?", (session_id,))]
        for sid in ids:
            self._mirror(sid)
        return ids

    def _mirror(
        self, session_id: str, just: _Just | None = None, writer: logs.Writer | None = None,
        cursor: int | None = None,
    ) -> None:
        """Append the lines of the session's commits past the logs' cursor, and move it on.

        Under the folder lock, so two processes never write the same commit twice: `writer`
        when the caller holds it already (with `cursor`, read while it held it), else taken
        here (and the cursor read under it).
        """
        if writer is None:
            held = self._descriptors.hold(self._log_folder(session_id), create=True)
            assert held is not None  # (made on demand)
            with held:
                self._mirror_held(session_id, just, held, None)
        else:
            self._mirror_held(session_id, just, writer, cursor)

    def _mirror_held(self, session_id: str, just: _Just | None, writer: logs.Writer, cursor: int | None) -> None:
        with self._lock:
            if cursor is None:
                row = self._conn.execute(
                    "SELECT logged_commit FROM sessions WHERE id = ?", (session_id,)
                ).fetchone()
                if row is None:  # deleted meanwhile
                    return
                cursor = row[0]
            if writer.dirty:
                writer.truncate_after(cursor)
            if just is not None and just.previous == cursor:
                # The usual case: everything before this commit is mirrored; no re-read.
                lines, upto = just.lines, just.commit
            else:
                lines, upto = logs.pending_lines(self._conn, session_id, cursor)
            if upto > cursor:
                writer.mark_dirty()
                writer.append(lines)
                # one statement, its own transaction (the connection is in autocommit mode)
                with self._damage_reported():
                    dialect_of(self._conn).retry(lambda: self._conn.execute(
                        "UPDATE sessions SET logged_commit = ? WHERE id = ? AND logged_commit < ?",
                        (upto, session_id, upto),
                    ))
            writer.mark_clean()

    def _log_folder(self, session_id: str) -> Path:
        """The session's log folder (its path worked out once per session; made when locked)."""
        folders = self._log_folders
        found = folders.get(session_id)
        if found is None:
            if len(folders) >= 4096:
                folders.clear()
            found = folders[session_id] = soul_home.session_logs_dir(session_id, self.home)
        return found


@dataclass(frozen=True)
class _Just:
    """The commit just made, so its log lines need not be read back from the database."""

    previous: int  # the session's commit before it (0 for none)
    commit: int
    lines: list[logs.LogLine]
