"""The compaction lock: one process at a time snapshots a log and deletes what it covers.

Both write-ahead logs of a field (the memory store's and the knowledge graph's) compact under
``snapshots/compact.lock``, taken without waiting: a process that finds it held skips its
compaction (the holder's snapshot covers the same log), it never queues behind it. The lock
is an flock, so it is released when its holder exits or is killed.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

__all__ = ["compaction_lock", "unseen_writers"]


@contextmanager
def compaction_lock(snap_dir: Path) -> Iterator[bool]:
    """Hold ``snap_dir``/compact.lock for the block; yields False, holding nothing, when
    another process holds it. Creates ``snap_dir`` if needed."""
    snap_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(snap_dir / "compact.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        yield True
    finally:
        os.close(fd)  # closing the descriptor releases the flock


def unseen_writers(
    snaps: list[Path], current: Path | None, covered: Mapping[str, int],
    read_covered: Callable[[Path], Mapping[str, int] | None],
) -> list[str]:
    """The writer instances whose entries the newest snapshot (`snaps[0]`) holds but this
    process has not seen (`covered`: the seq it has of each). Compacting then would prune
    what it never read, so it must not; empty when there is no newer snapshot, or when the
    newest is unreadable (recovery will not choose it either)."""
    if not snaps or snaps[0] == current:
        return []
    theirs = read_covered(snaps[0])
    if theirs is None:
        return []
    return sorted(i for i, seq in theirs.items() if seq > covered.get(i, 0))
