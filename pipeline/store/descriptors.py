"""The JSONL folders' descriptors a store keeps open between commits: each session folder's lock
file and the log files appended to, so a commit opens and closes none of them (four opens and
four closes a claudius turn, ~20 us of its commit).

The folder lock (`soul.store.logs`) is an flock, which two threads of one process holding one
open descriptor would both get: a folder's kept descriptors come with a mutex, taken before the
flock and let go after it. A folder deleted meanwhile (`delete_session`, another process, by
hand) leaves its kept lock file unlinked: that is looked at (`fstat`, no path walked) each time
the lock is taken, and the folder's descriptors are then closed and opened again by path. At
most `LIMIT` folders are kept (the least recently used not in use closed first); `close()`
closes them all.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

from soul.store import logs

try:  # POSIX; elsewhere the lock is a no-op (see soul.store.logs)
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

# folders kept open, the most recently used (4 descriptors each: 128 at most, well inside the
# 1,024 a process commonly may have, beside a server's sockets)
LIMIT = 32


class Kept:
    """One folder's open descriptors: its lock file, its log files by name, and the mutex a
    `Writer` holds with the flock; and the folder's path with a separator, which the log
    files' paths start with."""

    __slots__ = ("closed", "files", "lock", "mutex", "prefix", "retired")

    def __init__(self, lock: int, folder: Path) -> None:
        self.lock = lock
        self.prefix = os.path.join(folder, "")
        self.files: dict[str, int] = {}
        self.mutex = threading.Lock()
        self.closed = False
        self.retired = False  # forgotten while a writer held it: that writer closes it

    def let_go(self) -> None:
        """A `Writer` is done with these (its flock let go): closed if they were forgotten
        meanwhile, and the mutex released."""
        try:
            if self.retired:
                self.close()
        finally:
            self.mutex.release()

    def close(self) -> None:
        """Close every descriptor (the mutex held, or the folder no longer shared)."""
        if self.closed:
            return
        self.closed = True
        for fd in (self.lock, *self.files.values()):
            os.close(fd)
        self.files.clear()

    def __del__(self) -> None:
        # a store dropped without close(): its folders' descriptors go with it, as its
        # connection's do (a process making many stores would run out of descriptors)
        with contextlib.suppress(OSError):
            self.close()


class Descriptors:
    """The kept descriptors of one store's session folders (thread-safe)."""

    def __init__(self, limit: int = LIMIT) -> None:
        self._kept: dict[str, Kept] = {}
        self._guard = threading.Lock()
        self._limit = limit

    def hold(self, folder: Path, *, create: bool) -> logs.Writer | None:
        """`logs.locked` (`create`) or `logs.locked_if_made`, on kept descriptors: the folder's
        locked `Writer`, or None when the folder is not made and `create` is False."""
        key = os.fspath(folder)
        while True:
            with self._guard:
                kept = self._kept.pop(key, None)
                if kept is not None:
                    self._kept[key] = kept  # the most recently used, last
            if kept is None:
                fd = logs.open_lock(folder, create=create)
                if fd is None:
                    return None
                fresh = Kept(fd, folder)
                with self._guard:
                    kept = self._kept.setdefault(key, fresh)
                    if kept is fresh:
                        self._trim(key)
                if kept is not fresh:  # another thread opened it first: this one closed, once
                    # (by `close`, not os.close: `fresh.__del__` would close the number again,
                    # by then whatever file reused it: a log, a memory field's WAL lock, SQLite's)
                    fresh.close()
            kept.mutex.acquire()
            if kept.closed:  # closed meanwhile (trimmed, deleted): look again
                kept.mutex.release()
                continue
            try:
                if fcntl is not None:
                    fcntl.flock(kept.lock, fcntl.LOCK_EX)
                if os.fstat(kept.lock).st_nlink:  # still the folder's lock file
                    return logs.Writer(folder, kept.lock, kept)  # (its release lets go of both)
            except BaseException:
                if fcntl is not None:
                    with contextlib.suppress(OSError):
                        fcntl.flock(kept.lock, fcntl.LOCK_UN)
                kept.mutex.release()
                raise
            with self._guard:  # the folder was deleted: open it again by path
                if self._kept.get(key) is kept:
                    del self._kept[key]
            kept.close()  # (closing lets go of the flock)
            kept.mutex.release()

    def forget(self, folder: Path) -> None:
        """Close the folder's kept descriptors (its session is deleted); a writer holding them
        now closes them when it lets go."""
        with self._guard:
            kept = self._kept.pop(os.fspath(folder), None)
            if kept is None:
                return
            kept.retired = True
        if kept.mutex.acquire(blocking=False):
            kept.let_go()

    def close(self) -> None:
        """Close every kept descriptor (the store is closing)."""
        with self._guard:
            every, self._kept = list(self._kept.values()), {}
        for kept in every:
            with kept.mutex:
                kept.close()

    def _trim(self, keep: str) -> None:
        # (the guard held) the least recently used folders not in use, closed down to the limit;
        # never `keep`, the one just opened (with every other folder in use, the limit waits)
        if len(self._kept) <= self._limit:
            return
        for key in list(self._kept):
            kept = self._kept[key]
            if key != keep and kept.mutex.acquire(blocking=False):
                try:
                    del self._kept[key]
                    kept.close()
                finally:
                    kept.mutex.release()
            if len(self._kept) <= self._limit:
                return
