"""Checking a log directory without changing a byte: segments, snapshots, leftovers.

A log directory (the memory store's, ``<field>/``, and the knowledge graph's,
``<field>/graph/``) holds ``wal/``, ``snapshots/`` and ``quarantine/``. `check_log` verifies
every segment's CRCs from where the newest good snapshot leaves off, each snapshot with the
caller's reader (the two logs' snapshot formats differ), and reports what earlier opens left:
damaged bytes kept in quarantine (data recovery had to skip — a repaired log replays cleanly
afterwards, so without this a damaged field would check "ok" forever after) and temporary
snapshot files of a compaction that was killed (`stale_snapshot_tmps`, removed at open).
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import CorruptSegment
from .locks import compaction_lock
from .recovery import Issue, WalReader

__all__ = [
    "LogCheck", "check_log", "quarantined_issues", "remove_stale_snapshot_tmps",
    "stale_snapshot_tmps",
]

# Reads a snapshot's covered writers (instance -> last seq); raises CorruptSegment (or
# OSError/ValueError) when the snapshot fails its checks.
SnapshotCovered = Callable[[Path], Mapping[str, int]]


@dataclass(frozen=True)
class LogCheck:
    """What `check_log` found in one log directory."""

    segments: int
    entries: int
    bytes: int
    snapshots: int
    issues: tuple[Issue, ...]


def check_log(root: Path, covered_of: SnapshotCovered, snapshots: list[Path]) -> LogCheck:
    """Verify `root`'s log (see the module doc); `snapshots`: its snapshot files, newest
    first; `covered_of` verifies one and says what it covers."""
    issues: list[Issue] = []
    covered: dict[str, int] | None = None
    for snap in snapshots:
        try:
            theirs = dict(covered_of(snap))
        except CorruptSegment as exc:
            issues.append(Issue("bad_snapshot", str(snap), exc.offset, 0, exc.reason))
            continue
        except (OSError, ValueError, KeyError, TypeError) as exc:
            issues.append(Issue("bad_snapshot", str(snap), 0, 0, f"unreadable: {exc}"))
            continue
        if covered is None:  # the newest good snapshot: what recovery would start from
            covered = theirs
    reader = WalReader(root / "wal", root / "quarantine", repair=False, covered=covered)
    for _ in reader.blocks():
        pass
    issues.extend(reader.report.issues)
    issues.extend(quarantined_issues(root / "quarantine"))
    issues.extend(Issue("stale_tmp", str(tmp), 0, _size(tmp),
                        "a killed compaction's temporary snapshot; removed at the next open")
                  for tmp in stale_snapshot_tmps(root / "snapshots"))
    rep = reader.report
    return LogCheck(rep.segments, rep.entries, rep.bytes, len(snapshots), tuple(issues))


def quarantined_issues(qdir: Path) -> list[Issue]:
    """One issue per damaged range an earlier open quarantined (from report.jsonl).

    A dead writer's torn tail is what a crash leaves by design (nothing in it was
    acknowledged), so one kept as ``kind: torn_tail`` is no issue; records from before the kind
    was written, and ``.bad`` files no record names, still count."""
    if not qdir.is_dir():
        return []
    out: list[Issue] = []
    seen: set[str] = set()
    try:
        lines = (qdir / "report.jsonl").read_text(errors="replace").splitlines()
    except OSError:
        lines = []
    for line in lines:
        try:
            rec = json.loads(line)
            name, offset, length = str(rec["file"]), int(rec["offset"]), int(rec["length"])
            detail = f"{rec.get('reason', 'damaged')}; recovery skipped these bytes"
        except (ValueError, KeyError, TypeError):
            continue  # a torn last line of the report: the .bad file below still counts
        if name in seen:
            continue
        seen.add(name)
        if rec.get("kind") == "torn_tail":
            continue
        out.append(Issue("quarantined", str(rec.get("segment", name)), offset, length, detail,
                         str(qdir / name)))
    for bad in sorted(qdir.glob("*.bad")):
        if bad.name not in seen:
            out.append(Issue("quarantined", bad.name, 0, _size(bad),
                             "damaged bytes an earlier open set aside", str(bad)))
    return out


def stale_snapshot_tmps(snap_dir: Path) -> list[Path]:
    """Temporary snapshot files no compaction is writing now: a compaction writes its
    temporary file while it holds ``compact.lock``, so when nobody holds the lock every
    ``*.tmp`` there was left by a compaction that was killed. Changes nothing."""
    if not snap_dir.is_dir():
        return []
    tmps = sorted(snap_dir.glob("*.tmp"))
    if not tmps:
        return []
    try:
        fd = os.open(snap_dir / "compact.lock", os.O_RDWR)
    except FileNotFoundError:
        return tmps  # no compaction ever took the lock here since it was made
    except OSError:
        return []
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return []  # a compaction is running: its file is not stale
        return tmps
    finally:
        os.close(fd)


def remove_stale_snapshot_tmps(snap_dir: Path) -> list[Path]:
    """Delete the temporary files of killed compactions (see `stale_snapshot_tmps`), under
    the compaction lock so a compaction starting meanwhile cannot lose its file."""
    if not snap_dir.is_dir() or not any(snap_dir.glob("*.tmp")):
        return []
    with compaction_lock(snap_dir) as held:
        if not held:
            return []
        removed = sorted(snap_dir.glob("*.tmp"))
        for tmp in removed:
            tmp.unlink(missing_ok=True)
    return removed


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
