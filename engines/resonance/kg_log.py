"""The knowledge graph's write-ahead log: op codes, binary payloads, and recovery.

The graph logs to its own directory with the store's machinery: `wal.WalWriter` appends
(framing, CRC32, segments, manifest, group commit) and `recovery.WalReader` reads every
writer's segments back in global (hlc, instance, seq) order, quarantining damage exactly as
for the memory store. Only the op codes and payloads are the graph's own (kept apart from
`ops.py`: a graph log is never replayed into a memory store, nor the reverse).

Payloads are a fixed ``struct`` part followed by UTF-8 strings, each prefixed by its u32
byte length. Every entry carries absolute values (ids, weights, times), never deltas, so
replaying a log gives the state the live process had, whatever the clock says at replay.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .errors import CorruptSegment, StoreError
from .recovery import Issue, RecoveryReport, WalReader
from .wal import Durability, WalWriter

__all__ = [
    "FORGET_MEMORY",
    "HEBBIAN",
    "INVALIDATE",
    "MENTION",
    "OP_NAMES",
    "REINFORCE",
    "RELATE",
    "GraphLog",
    "HebbianSet",
    "Relate",
    "decode",
    "encode_forget_memory",
    "encode_hebbian",
    "encode_invalidate",
    "encode_mention",
    "encode_reinforce",
    "encode_relate",
    "list_snapshots",
]

RELATE, REINFORCE, INVALIDATE, MENTION, FORGET_MEMORY, HEBBIAN = 1, 2, 3, 4, 5, 6
OP_NAMES = {
    RELATE: "relate", REINFORCE: "reinforce", INVALIDATE: "invalidate", MENTION: "mention",
    FORGET_MEMORY: "forget_memory", HEBBIAN: "hebbian",
}

_RELATE = struct.Struct("<qdddB")  # id, weight, valid_from, logged at, flags (1: Hebbian)
_REINFORCE = struct.Struct("<qdd")  # id, new weight, at
_INVALIDATE = struct.Struct("<qd")  # id, at
_TS = struct.Struct("<d")
_HEB_HEAD = struct.Struct("<dI")  # at, number of edges
_HEB_EDGE = struct.Struct("<qd")  # id, new weight
_LEN = struct.Struct("<I")


def _strs(*values: str) -> bytes:
    out = []
    for v in values:
        b = v.encode()
        out.append(_LEN.pack(len(b)))
        out.append(b)
    return b"".join(out)


def _read_strs(buf: memoryview, off: int) -> list[str]:
    out: list[str] = []
    n = len(buf)
    while off < n:
        if off + 4 > n:
            raise ValueError(f"string length cut short at byte {off}")
        (length,) = _LEN.unpack_from(buf, off)
        off += 4
        if off + length > n:
            raise ValueError(f"string of {length} bytes runs past the payload at byte {off}")
        out.append(bytes(buf[off : off + length]).decode())
        off += length
    return out


@dataclass(frozen=True, slots=True)
class Relate:
    """A new triplet (RELATE): subject/object are node keys' display forms."""

    id: int
    subject: str
    predicate: str
    object: str
    weight: float
    valid_from: float
    at: float
    memory: str | None
    hebbian: bool


@dataclass(frozen=True, slots=True)
class HebbianSet:
    """The result of one Hebbian flush: each edge's id, new weight and its two memories."""

    at: float
    edges: tuple[tuple[int, float, str, str], ...]


def encode_relate(r: Relate) -> bytes:
    """RELATE payload."""
    return _RELATE.pack(r.id, r.weight, r.valid_from, r.at, 1 if r.hebbian else 0) + _strs(
        r.subject, r.predicate, r.object, r.memory or "")


def encode_reinforce(triplet_id: int, weight: float, at: float) -> bytes:
    """REINFORCE payload: a triplet's new (absolute) weight."""
    return _REINFORCE.pack(triplet_id, weight, at)


def encode_invalidate(triplet_id: int, at: float) -> bytes:
    """INVALIDATE payload."""
    return _INVALIDATE.pack(triplet_id, at)


def encode_mention(memory_id: str, entities: list[str], at: float) -> bytes:
    """MENTION payload: a memory and the entities (display forms) it newly mentions."""
    return _TS.pack(at) + _strs(memory_id, *entities)


def encode_forget_memory(memory_id: str, at: float) -> bytes:
    """FORGET_MEMORY payload."""
    return _TS.pack(at) + _strs(memory_id)


def encode_hebbian(h: HebbianSet) -> bytes:
    """HEBBIAN payload: per edge its id and new weight, then the memory ids as strings."""
    parts = [_HEB_HEAD.pack(h.at, len(h.edges))]
    parts.extend(_HEB_EDGE.pack(i, w) for i, w, _, _ in h.edges)
    parts.append(_strs(*(s for _, _, a, b in h.edges for s in (a, b))))
    return b"".join(parts)


def decode(op: int, payload: memoryview) -> object:
    """The payload of `op` as a value: Relate, HebbianSet, or a tuple of fields."""
    if op == RELATE:
        tid, w, vf, at, flags = _RELATE.unpack_from(payload, 0)
        s, p, o, mem = _read_strs(payload, _RELATE.size)
        return Relate(tid, s, p, o, w, vf, at, mem or None, bool(flags & 1))
    if op == REINFORCE:
        return _REINFORCE.unpack_from(payload, 0)
    if op == INVALIDATE:
        return _INVALIDATE.unpack_from(payload, 0)
    if op in (MENTION, FORGET_MEMORY):
        (at,) = _TS.unpack_from(payload, 0)
        strs = _read_strs(payload, _TS.size)
        if not strs:
            raise ValueError("no memory id")
        return at, strs[0], strs[1:]
    if op == HEBBIAN:
        at, n = _HEB_HEAD.unpack_from(payload, 0)
        off = _HEB_HEAD.size
        nums = [_HEB_EDGE.unpack_from(payload, off + i * _HEB_EDGE.size) for i in range(n)]
        strs = _read_strs(payload, off + n * _HEB_EDGE.size)
        if len(strs) != 2 * n:
            raise ValueError(f"{len(strs)} memory ids for {n} Hebbian edges")
        return HebbianSet(at, tuple((i, w, strs[2 * k], strs[2 * k + 1])
                                    for k, (i, w) in enumerate(nums)))
    raise ValueError(f"unknown knowledge-graph op {op}")


def list_snapshots(snap_dir: Path) -> list[Path]:
    """A graph's snapshot files, newest first (the name starts with the clock it was taken
    at)."""
    if not snap_dir.is_dir():
        return []
    return sorted(snap_dir.glob("snap_*.snap"), reverse=True)


Apply = Callable[[int, memoryview], None]
# Loads a snapshot file: (its apply function, covered, max_hlc); CorruptSegment if damaged.
LoadSnapshot = Callable[[Path], tuple[Apply, dict[str, int], int]]
# Writes a snapshot: (snapshot dir, covered, max_hlc, instance, hlc) -> its path.
WriteSnapshot = Callable[[Path, dict[str, int], int, str, int], Path]


class GraphLog:
    """A graph directory's log: recover (snapshot + log) into the state, then append.

    Layout: ``<dir>/graph.lock`` (held while open: one process at a time), ``<dir>/wal/``
    (segments and manifests, as the store's), ``<dir>/snapshots/`` (`kg_snapshot`),
    ``<dir>/quarantine/`` (damaged bytes).
    """

    def __init__(self, path: Path, apply: Apply, *, load_snapshot: LoadSnapshot | None = None,
                 durability: Durability = "batch", segment_bytes: int = 16 << 20,
                 sync_interval: float = 0.05, keep_snapshots: int = 2) -> None:
        self.path = path
        self.snap_dir = path / "snapshots"
        self.keep_snapshots = max(1, keep_snapshots)
        path.mkdir(parents=True, exist_ok=True)
        self._lock_fd = os.open(path / "graph.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(self._lock_fd)
            raise StoreError(
                f"the knowledge graph at {path} is open in another process; close it there "
                "first (a graph directory has one writer at a time: triplet ids are assigned "
                "by the process that holds it)"
            ) from exc
        try:
            self.covered: dict[str, int] = {}
            self.snapshot: Path | None = None
            snap_issues: list[Issue] = []
            if load_snapshot is not None:
                apply, snap_issues = self._load_snapshot(apply, load_snapshot)
            self.report = self._recover(apply)
            self.report.issues[:0] = snap_issues
            self.since_snapshot = self.report.replayed
            self._dead_ranges = {name: rng for name, rng in self.report.segment_ranges.items()}
            self.writer = WalWriter(path / "wal", durability=durability,
                                    segment_bytes=segment_bytes, sync_interval=sync_interval,
                                    hlc_floor=self.max_hlc)
        except BaseException:
            os.close(self._lock_fd)
            raise

    def _load_snapshot(self, apply: Apply, load: LoadSnapshot) -> tuple[Apply, list[Issue]]:
        issues: list[Issue] = []
        self.max_hlc = 0
        for snap in list_snapshots(self.snap_dir):
            try:
                apply, covered, max_hlc = load(snap)
            except (CorruptSegment, OSError) as exc:
                offset = exc.offset if isinstance(exc, CorruptSegment) else 0
                issues.append(Issue("bad_snapshot", str(snap), offset, 0,
                                    f"{exc}; falling back to an older snapshot or the full log"))
                continue
            self.covered, self.max_hlc, self.snapshot = dict(covered), max_hlc, snap
            break
        return apply, issues

    def _recover(self, apply: Apply) -> RecoveryReport:
        reader = WalReader(self.path / "wal", self.path / "quarantine", repair=True,
                           covered=self.covered)
        covered = self.covered
        for _, instance, seq, op, payload in reader.entries():
            try:
                apply(op, payload)
            except (ValueError, KeyError, IndexError, UnicodeDecodeError, struct.error) as exc:
                # A CRC-valid entry that cannot apply (a bug, a newer format): report it and
                # keep going, as the store does; one entry must not make the graph unreadable.
                reader.report.issues.append(Issue(
                    "corrupt", f"{instance} seq {seq}", 0, len(payload),
                    f"graph entry (op {OP_NAMES.get(op, op)}) could not be applied: {exc}"))
            covered[instance] = seq
        self.max_hlc = max(getattr(self, "max_hlc", 0), reader.report.max_hlc)
        return reader.report

    def append(self, op: int, payload: bytes) -> None:
        """Log one entry (durable as the mode promises once this returns)."""
        self.writer.append(op, payload)
        self.since_snapshot += 1

    def sync(self) -> None:
        """Force everything logged so far to stable storage."""
        self.writer.sync()

    def compact(self, write: WriteSnapshot) -> Path:
        """Snapshot the state (the caller holds the writer lock, so it matches the log),
        then delete the segments and older snapshots it makes useless."""
        self.writer.rotate()  # everything written so far is in sealed, synced segments
        covered = dict(self.covered)
        if self.writer.seq:
            covered[self.writer.instance] = self.writer.seq
        path = write(self.snap_dir, covered, self.max_hlc, self.writer.instance,
                     self.writer.next_hlc())
        self.snapshot, self.since_snapshot = path, 0
        for old in list_snapshots(self.snap_dir)[self.keep_snapshots :]:
            old.unlink(missing_ok=True)
        ranges = dict(self._dead_ranges)
        ranges.update({s.name: (self.writer.instance, s.first_seq, s.last_seq)
                       for s in self.writer.sealed_segments})
        gone = {name for name, (inst, _, last) in ranges.items()
                if last <= covered.get(inst, 0)}
        wal = self.path / "wal"
        for name in gone:
            (wal / name).unlink(missing_ok=True)
        self._dead_ranges = {k: v for k, v in self._dead_ranges.items() if k not in gone}
        self.writer.forget_sealed(gone)
        # A dead writer with no segment left needs neither manifest nor lock file.
        left = {p.name.rpartition("_")[0] for p in wal.glob("*.seg")}
        for instance in {rng[0] for rng in ranges.values()} - left - {self.writer.instance}:
            for suffix in (".manifest.json", ".lock"):
                (wal / f"{instance}{suffix}").unlink(missing_ok=True)
        return path

    def close(self) -> None:
        """Close the writer and release the directory."""
        try:
            self.writer.close()
        finally:
            with contextlib.suppress(OSError):
                os.close(self._lock_fd)
