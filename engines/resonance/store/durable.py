"""The durable store: recover (snapshot + log), log every change before applying it, compact.

A field directory holds ``wal/`` (each writer's segments and manifest), ``snapshots/`` and
``quarantine/``. Opening a store loads the newest snapshot that passes its CRCs (falling back
to an older one), replays every log entry it does not cover in global (hlc, instance, seq)
order, and starts a new writer instance. Several processes may open the same field: each
appends to its own files, none waits for another; each sees the others' writes at its next
open.

``read_only=True`` opens an existing field for reading and changes no file: no writer
instance (manifest, lock, segment), no repair of damage (a dead writer's torn tail is reported,
not truncated or quarantined), no compaction; every write raises `ReadOnlyField`.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import ConfigError, CorruptSegment, FieldNotFound, ReadOnlyField, StoreClosed
from . import ops
from .check import check_log, remove_stale_snapshot_tmps
from .locks import compaction_lock, unseen_writers
from .recovery import Issue, RecoveryReport, WalReader, map_file
from .snapshot import _sections, list_snapshots, read_header, read_snapshot, write_snapshot
from .state import State
from .wal import Durability, WalWriter

__all__ = ["CheckReport", "Store"]

log = logging.getLogger("soul.engines.resonance")

BATCH_ROWS = 2048  # memories per ADD_BATCH entry: ~3 MB with 384-d vectors


@dataclass(frozen=True)
class CheckReport:
    """What ``Store.check`` found: counts and every issue (``ok`` when there are none)."""

    path: str
    segments: int
    entries: int
    bytes: int
    snapshots: int
    issues: tuple[Issue, ...] = field(default=())

    @property
    def ok(self) -> bool:
        """True when every segment and snapshot passed its checks."""
        return not self.issues


class Store:
    """A field's memories, durable through a write-ahead log. Use ``Store.open``."""

    def __init__(
        self,
        path: str | Path,
        *,
        durability: Durability = "batch",
        segment_bytes: int = 64 << 20,
        sync_interval: float = 0.05,
        compact_after: int = 100_000,
        keep_snapshots: int = 2,
        read_only: bool = False,
    ) -> None:
        self.path = Path(path)
        self.wal_dir = self.path / "wal"
        self.snap_dir = self.path / "snapshots"
        self.quarantine_dir = self.path / "quarantine"
        self.compact_after = compact_after
        self.keep_snapshots = max(1, keep_snapshots)
        self.read_only = read_only
        self._closed = False
        self._lock = threading.RLock()
        if read_only:
            _check_exists(self.path)
        else:
            self.wal_dir.mkdir(parents=True, exist_ok=True)
            for tmp in remove_stale_snapshot_tmps(self.snap_dir):
                log.info("removed %s, left by a compaction that was killed", tmp)
        started = time.perf_counter()
        self.state, self.snapshot, snap_issues = self._load_snapshot()
        reader = WalReader(
            self.wal_dir, self.quarantine_dir, repair=not read_only, covered=self.state.covered
        )
        def unapplied(instance: str, seq: int, op: int, payload: memoryview,
                      exc: Exception) -> None:
            # A CRC-valid entry that cannot apply (a bug, a newer format): report it and keep
            # going; one bad entry must not make the whole field unreadable.
            reader.report.issues.append(Issue(
                "corrupt", f"{instance} seq {seq}", 0, len(payload),
                f"entry (op {op}) could not be applied: {exc}",
            ))

        self.state.size_hint_bytes = sum(p.stat().st_size for p in self.wal_dir.glob("*.seg"))
        if reader.resolve_fast():  # a large log: runs of ADDs decoded as columns
            from .replay import replay_blocks

            replay_blocks(self.state, reader.blocks(), unapplied)
        else:
            self.state.replay(reader.entries(), unapplied)
        self.state.size_hint_bytes = 0
        self.report: RecoveryReport = reader.report
        self.report.issues[:0] = snap_issues
        self.report.seconds = time.perf_counter() - started
        self._since_snapshot = self.report.replayed
        self._dead_ranges = {
            name: rng for name, rng in self.report.segment_ranges.items()
            if rng[0] not in self.report.live_instances
        }
        # None when read-only: no instance, so nothing on disk says this process was here
        self.writer: WalWriter | None = None if read_only else WalWriter(
            self.wal_dir, durability=durability, segment_bytes=segment_bytes,
            sync_interval=sync_interval, hlc_floor=max(self.report.max_hlc, self.state.max_hlc),
        )

    @classmethod
    def open(cls, path: str | Path, *, read_only: bool = False, **config: object) -> Store:
        """Open (creating if needed) the store at ``path``; see ``Store.__init__`` options.
        ``read_only``: open an existing store without changing any file (`FieldNotFound` if
        there is none; writes raise `ReadOnlyField`)."""
        return cls(path, read_only=read_only, **config)  # type: ignore[arg-type]

    def _writable(self, operation: str) -> WalWriter:
        """The writer, or `ReadOnlyField` naming ``operation`` (`StoreClosed` once closed)."""
        if self.writer is None:
            raise ReadOnlyField(operation, self.path)
        return self.writer

    def _load_snapshot(self) -> tuple[State, Path | None, list[Issue]]:
        issues: list[Issue] = []
        for snap in list_snapshots(self.snap_dir):
            try:
                return read_snapshot(snap), snap, issues
            except (CorruptSegment, OSError, ValueError, KeyError) as exc:
                offset = exc.offset if isinstance(exc, CorruptSegment) else 0
                issues.append(Issue(
                    "bad_snapshot", str(snap), offset, 0,
                    f"{exc}; falling back to an older snapshot or the full log",
                ))
        return State(), None, issues

    # -- writing: log first, then apply ----------------------------------------------------

    def _log(self, op: int, payload: bytes) -> None:
        writer = self._writable("write to the store")
        with self._lock:
            seq, hlc = writer.append(op, payload)
            self.state.apply(op, memoryview(payload))
            self.state.mark_applied(writer.instance, seq, hlc)
            self._since_snapshot += 1

    def _check_vectors(self, vectors: np.ndarray) -> None:
        dim = self.state.dim
        if vectors.ndim != 2 or (dim and vectors.shape[1] != dim) or vectors.shape[1] == 0:
            raise ConfigError(
                f"vectors of shape {vectors.shape}; this field holds {dim}-d vectors"
                if dim else f"vectors of shape {vectors.shape}: expected (n, dim) with dim > 0"
            )

    def add(self, row: ops.Row, vector: np.ndarray) -> int:
        """Log and apply one new memory; return its row."""
        self._writable("add a memory")
        self._check_vectors(np.asarray(vector).reshape(1, -1))
        with self._lock:
            self._log(ops.ADD, ops.encode_add(row, vector))
            return self.state.rows[row.id]

    def add_many(self, rows: Sequence[ops.Row], vectors: np.ndarray) -> list[int]:
        """Log and apply many new memories, ``BATCH_ROWS`` per log entry; return their rows."""
        self._writable("add memories")
        vectors = np.asarray(vectors, dtype=np.float32)
        if len(rows) != len(vectors):
            raise ConfigError(f"{len(rows)} memories but {len(vectors)} vectors")
        if not rows:
            return []
        self._check_vectors(vectors)
        out: list[int] = []
        with self._lock:
            for start in range(0, len(rows), BATCH_ROWS):
                chunk = list(rows[start : start + BATCH_ROWS])
                self._log(ops.ADD_BATCH, ops.encode_add_batch(chunk, vectors[start : start + BATCH_ROWS]))
                out.extend(self.state.rows[r.id] for r in chunk)
        return out

    def observe(self, memory_id: str, value: float) -> None:
        """Log one confidence observation (1 strengthens, 0 weakens)."""
        self._writable("observe a memory's confidence")
        self.state.row_of(memory_id)
        self._log(ops.OBSERVE, ops.encode_observe(memory_id, value, time.time()))

    def access(self, memory_ids: Sequence[str]) -> None:
        """Log that these memories were read now."""
        self._writable("log accesses")
        if memory_ids:
            self._log(ops.ACCESS, ops.encode_access(list(memory_ids), time.time()))

    def forget(self, memory_id: str) -> int:
        """Log the removal of a memory; return the row it had."""
        self._writable("forget a memory")
        row = self.state.row_of(memory_id)
        self._log(ops.FORGET, ops.encode_forget(memory_id, time.time()))
        return row

    def reembed(self, memory_id: str, vector: np.ndarray) -> None:
        """Log a real vector replacing a memory's zero fallback."""
        self._writable("re-embed a memory")
        self.state.row_of(memory_id)
        self._check_vectors(np.asarray(vector).reshape(1, -1))
        self._log(ops.REEMBED, ops.encode_reembed(memory_id, vector))

    def record_embedder(self, record: dict[str, object]) -> None:
        """Log the embedding model the field's vectors come from (a MODEL entry: replay and
        snapshots carry it, so the record and the vectors can never disagree)."""
        self._writable("record the embedding model")
        self._log(ops.MODEL, ops.encode_model(record))

    def sync(self) -> None:
        """Make everything logged so far durable, whatever the durability mode (read-only:
        nothing to do)."""
        if self.writer is not None:
            self.writer.sync()

    # -- compaction ------------------------------------------------------------------------

    def compact(self) -> Path | None:
        """Snapshot the state, then delete log segments and old snapshots it makes useless.

        Returns None, changing nothing, when another process is compacting this field, or
        when the newest snapshot holds entries this process has not seen (another writer
        compacted after this one opened, and deleted the segments those entries were in: a
        snapshot from this state would hide them).
        """
        with self._lock:
            if self.closed:
                raise StoreClosed("the store is closed")
            writer = self._writable("compact")
            with compaction_lock(self.snap_dir) as held:
                if not held:
                    log.info("compaction skipped: another process is compacting %s", self.path)
                    return None
                if not self._sees_newest_snapshot():
                    return None
                writer.rotate()  # everything we wrote is now in sealed, synced segments
                path = write_snapshot(self.state, self.snap_dir, writer.instance, writer.next_hlc())
                _sections(path, map_file(path))  # read back before deleting what it covers
                self.snapshot = path
                self._since_snapshot = 0
                self._prune(path)
                return path

    def _sees_newest_snapshot(self) -> bool:
        snaps = list_snapshots(self.snap_dir)
        behind = unseen_writers(snaps, self.snapshot, self.state.covered, _covered_by)
        if behind:
            log.info("compaction skipped: %s holds entries of %s that this process has not "
                     "seen; reopen the field to compact", snaps[0].name, ", ".join(behind))
        return not behind

    def _prune(self, newest: Path) -> None:
        writer = self._writable("compact")
        for old in list_snapshots(self.snap_dir)[self.keep_snapshots :]:
            old.unlink(missing_ok=True)
        covered = self.state.covered
        ranges = dict(self._dead_ranges)
        ranges.update({s.name: (writer.instance, s.first_seq, s.last_seq)
                       for s in writer.sealed_segments})
        gone: set[str] = set()
        for name, (instance, _, last) in ranges.items():
            if last <= covered.get(instance, 0):
                (self.wal_dir / name).unlink(missing_ok=True)
                gone.add(name)
        self._dead_ranges = {k: v for k, v in self._dead_ranges.items() if k not in gone}
        writer.forget_sealed(gone)
        # A dead writer with no segment left needs neither manifest nor lock file.
        left = {name.rpartition("_")[0] for name in (p.name for p in self.wal_dir.glob("*.seg"))}
        for instance in {rng[0] for rng in ranges.values()} - left - {writer.instance}:
            for suffix in (".manifest.json", ".lock"):
                (self.wal_dir / f"{instance}{suffix}").unlink(missing_ok=True)

    # -- checking and closing --------------------------------------------------------------

    @staticmethod
    def check(path: str | Path) -> CheckReport:
        """Verify every segment's and snapshot's CRCs without changing anything."""
        root = Path(path)
        found = check_log(root, _snapshot_covered, list_snapshots(root / "snapshots"))
        return CheckReport(str(root), found.segments, found.entries, found.bytes,
                           found.snapshots, found.issues)

    def close(self) -> None:
        """Compact if the log grew past ``compact_after`` entries, then close the writer."""
        with self._lock:
            if self.closed:
                return
            if self.writer is not None:
                if self._since_snapshot >= self.compact_after:
                    with contextlib.suppress(OSError):
                        self.compact()
                self.writer.close()
            self._closed = True

    @property
    def closed(self) -> bool:
        """True once close() ran."""
        return self._closed or (self.writer is not None and self.writer.closed)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check_exists(path: Path) -> None:
    """A read-only open needs a field there: `FieldNotFound` for a folder without one (an
    OSError, as a writable open would raise, for a file in the way)."""
    if path.exists() and not path.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "not a folder", str(path))
    if not ((path / "wal").is_dir() or (path / "snapshots").is_dir()):
        raise FieldNotFound(path)


def _snapshot_covered(snapshot: Path) -> dict[str, int]:
    """What a snapshot covers, after checking every section's CRC (CorruptSegment if not)."""
    return json.loads(bytes(_sections(snapshot, snapshot.read_bytes())[0]))["covered"]


def _covered_by(snapshot: Path) -> dict[str, int] | None:
    """The per-writer seq a snapshot covers, from its header (None: unreadable)."""
    header = read_header(snapshot)
    return None if header is None else header["covered"]
