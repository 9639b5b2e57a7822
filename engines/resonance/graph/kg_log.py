"""The knowledge graph's write-ahead log: op codes, binary payloads, and recovery.

The graph logs to its own directory with the store's machinery: `wal.WalWriter` appends
(framing, CRC32, segments, manifest, group commit) and `recovery.WalReader` reads every
writer's segments back in global (hlc, instance, seq) order, quarantining damage exactly as
for the memory store. Only the op codes and payloads are the graph's own (kept apart from
`ops.py`: a graph log is never replayed into a memory store, nor the reverse).

Payloads are a fixed ``struct`` part followed by UTF-8 strings, each prefixed by its u32
byte length. Every entry carries the time it was made; weight changes are deltas applied as
``min(1, weight at that time + delta)`` (REINFORCE_BY, HEBBIAN_BY), so replay never depends
on the clock at replay, and reinforcements by several writers add up. REINFORCE and HEBBIAN
(absolute weights, written while a graph had one writer at a time) are still read.

Several processes may open one graph directory at once, as for the store: each open starts
its own writer instance (own segments and manifest, no directory-wide lock); recovery
applies every instance's entries in global (hlc, instance, seq) order. A read-only open
starts none and changes no file (damage is reported, not repaired; a directory that does
not exist reads as an empty graph and is not created).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import CorruptSegment, ReadOnlyField
from ..store.check import remove_stale_snapshot_tmps
from ..store.locks import compaction_lock, unseen_writers
from ..store.recovery import Issue, RecoveryReport, WalReader
from ..store.snapshot import list_snapshots  # the same file names as the store's
from ..store.wal import Durability, WalWriter

__all__ = [
    "FORGET_MEMORY",
    "HEBBIAN",
    "HEBBIAN_BY",
    "INVALIDATE",
    "MENTION",
    "OP_NAMES",
    "REINFORCE",
    "REINFORCE_BY",
    "RELATE",
    "GraphLog",
    "HebbianDeltas",
    "HebbianSet",
    "Relate",
    "decode",
    "encode_forget_memory",
    "encode_hebbian",
    "encode_hebbian_by",
    "encode_invalidate",
    "encode_mention",
    "encode_reinforce",
    "encode_reinforce_by",
    "encode_relate",
    "list_snapshots",
]

RELATE, REINFORCE, INVALIDATE, MENTION, FORGET_MEMORY, HEBBIAN = 1, 2, 3, 4, 5, 6
REINFORCE_BY, HEBBIAN_BY = 7, 8
OP_NAMES = {
    RELATE: "relate", REINFORCE: "reinforce", INVALIDATE: "invalidate", MENTION: "mention",
    FORGET_MEMORY: "forget_memory", HEBBIAN: "hebbian", REINFORCE_BY: "reinforce_by",
    HEBBIAN_BY: "hebbian_by",
}

log = logging.getLogger("soul.engines.resonance")

_RELATE = struct.Struct("<qdddB")  # id, weight, valid_from, logged at, flags (1: Hebbian)
_REINFORCE = struct.Struct("<qdd")  # id, new weight, at
_INVALIDATE = struct.Struct("<qd")  # id, at
_TS = struct.Struct("<d")
_HEB_HEAD = struct.Struct("<dI")  # at, number of edges
_HEB_EDGE = struct.Struct("<qd")  # id, new weight
_HEB_DELTA = struct.Struct("<d")  # a pair's delta
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


@dataclass(frozen=True, slots=True)
class HebbianDeltas:
    """One Hebbian flush: per memory pair (a < b) the summed delta. Which edge a pair
    strengthens (or creates, and its id) is decided when the entry is applied."""

    at: float
    pairs: tuple[tuple[str, str, float], ...]


def encode_relate(r: Relate) -> bytes:
    """RELATE payload."""
    return _RELATE.pack(r.id, r.weight, r.valid_from, r.at, 1 if r.hebbian else 0) + _strs(
        r.subject, r.predicate, r.object, r.memory or "")


def encode_reinforce(triplet_id: int, weight: float, at: float) -> bytes:
    """REINFORCE payload: a triplet's new (absolute) weight."""
    return _REINFORCE.pack(triplet_id, weight, at)


def encode_reinforce_by(triplet_id: int, delta: float, at: float) -> bytes:
    """REINFORCE_BY payload: a triplet strengthened by `delta` at `at`."""
    return _REINFORCE.pack(triplet_id, delta, at)


def encode_hebbian_by(h: HebbianDeltas) -> bytes:
    """HEBBIAN_BY payload: time, count, per pair its delta, then the memory ids."""
    parts = [_HEB_HEAD.pack(h.at, len(h.pairs))]
    parts.extend(_HEB_DELTA.pack(d) for _, _, d in h.pairs)
    parts.append(_strs(*(s for a, b, _ in h.pairs for s in (a, b))))
    return b"".join(parts)


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
    if op in (REINFORCE, REINFORCE_BY):
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
    if op == HEBBIAN_BY:
        at, n = _HEB_HEAD.unpack_from(payload, 0)
        off = _HEB_HEAD.size
        deltas = [_HEB_DELTA.unpack_from(payload, off + i * _HEB_DELTA.size)[0]
                  for i in range(n)]
        strs = _read_strs(payload, off + n * _HEB_DELTA.size)
        if len(strs) != 2 * n:
            raise ValueError(f"{len(strs)} memory ids for {n} Hebbian pairs")
        return HebbianDeltas(at, tuple((strs[2 * k], strs[2 * k + 1], d)
                                       for k, d in enumerate(deltas)))
    raise ValueError(f"unknown knowledge-graph op {op}")


Apply = Callable[[int, memoryview], None]
# Loads a snapshot file: (its apply function, covered, max_hlc); CorruptSegment if damaged.
LoadSnapshot = Callable[[Path], tuple[Apply, dict[str, int], int]]
# Writes a snapshot: (snapshot dir, covered, max_hlc, instance, hlc) -> its path.
WriteSnapshot = Callable[[Path, dict[str, int], int, str, int], Path]
# What a snapshot covers (instance -> last seq), None if it cannot be read.
ReadCovered = Callable[[Path], "dict[str, int] | None"]


class GraphLog:
    """A graph directory's log: recover (snapshot + log) into the state, then append.

    Layout: ``<dir>/wal/`` (per writer instance: segments, manifest and lock, as the
    store's), ``<dir>/snapshots/`` (`kg_snapshot`, and ``compact.lock``),
    ``<dir>/quarantine/`` (damaged bytes). Several processes may open a directory at once:
    each appends to its own writer instance and sees the others' entries written before it
    opened (or before its last `recover`).
    """

    def __init__(self, path: Path, apply: Apply, *, load_snapshot: LoadSnapshot | None = None,
                 durability: Durability = "batch", segment_bytes: int = 16 << 20,
                 sync_interval: float = 0.05, keep_snapshots: int = 2,
                 read_only: bool = False) -> None:
        self.path = path
        self.snap_dir = path / "snapshots"
        self.keep_snapshots = max(1, keep_snapshots)
        self.read_only = read_only
        if not read_only:
            path.mkdir(parents=True, exist_ok=True)
            remove_stale_snapshot_tmps(self.snap_dir)  # killed compactions' leftovers
        self.writer: WalWriter | None = None
        self.recover(apply, load_snapshot, repair=not read_only)
        if not read_only:
            self.writer = WalWriter(path / "wal", durability=durability,
                                    segment_bytes=segment_bytes, sync_interval=sync_interval,
                                    hlc_floor=self.max_hlc)

    def recover(self, apply: Apply, load_snapshot: LoadSnapshot | None, *,
                repair: bool) -> Apply:
        """Load the newest good snapshot and replay every entry it does not cover, this
        writer's own included, into `apply` (or the state the snapshot loader made); return
        the apply function the state ended in. ``repair``: truncate dead writers' torn tails
        and quarantine damage (at open); ``False`` only reads (a refresh while open)."""
        self.covered: dict[str, int] = {}
        self.max_hlc = 0
        self.snapshot: Path | None = None
        snap_issues: list[Issue] = []
        if load_snapshot is not None:
            apply, snap_issues = self._load_snapshot(apply, load_snapshot)
        reader = WalReader(self.path / "wal", self.path / "quarantine", repair=repair,
                           covered=self.covered)
        covered = self.covered
        for hlc, instance, seq, op, payload in reader.entries():
            try:
                apply(op, payload)
            except (ValueError, KeyError, IndexError, UnicodeDecodeError, struct.error) as exc:
                # A CRC-valid entry that cannot apply (a bug, a newer format): report it and
                # keep going, as the store does; one entry must not make the graph unreadable.
                reader.report.issues.append(Issue(
                    "corrupt", f"{instance} seq {seq}", 0, len(payload),
                    f"graph entry (op {OP_NAMES.get(op, op)}) could not be applied: {exc}"))
            covered[instance] = seq
            self.max_hlc = max(self.max_hlc, hlc)
        self.report: RecoveryReport = reader.report
        self.report.issues[:0] = snap_issues
        self.since_snapshot = self.report.replayed
        # Segments compaction may delete once covered: those of writers that were dead when
        # this process read them (a live writer's files are its own to delete), plus ours.
        own = self.writer.instance if self.writer is not None else None
        self._dead_ranges = {name: rng for name, rng in self.report.segment_ranges.items()
                             if rng[0] not in self.report.live_instances and rng[0] != own}
        if self.writer is not None:
            # Our next entries must sort after everything just seen (the clock is shared by
            # every writer on this machine, so this only matters if it stepped back).
            with self.writer._lock:
                self.writer._hlc = max(self.writer._hlc, self.max_hlc)
        return apply

    def _load_snapshot(self, apply: Apply, load: LoadSnapshot) -> tuple[Apply, list[Issue]]:
        issues: list[Issue] = []
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

    @property
    def instance(self) -> str | None:
        """This process's writer instance id (None when read-only)."""
        return self.writer.instance if self.writer is not None else None

    def writable(self, operation: str) -> WalWriter:
        """The writer, or `ReadOnlyField` naming ``operation`` when opened read-only."""
        if self.writer is None:
            raise ReadOnlyField(operation, self.path)
        return self.writer

    def append(self, op: int, payload: bytes) -> None:
        """Log one entry (durable as the mode promises once this returns)."""
        writer = self.writable("write to the knowledge graph")
        seq, hlc = writer.append(op, payload)
        self.covered[writer.instance] = seq
        self.max_hlc = max(self.max_hlc, hlc)
        self.since_snapshot += 1

    def sync(self) -> None:
        """Force everything logged so far to stable storage (read-only: nothing to do)."""
        if self.writer is not None:
            self.writer.sync()

    def compact(self, write: WriteSnapshot, read_covered: ReadCovered) -> Path | None:
        """Snapshot the state (the caller holds the writer lock, so it matches the log),
        then delete the segments and older snapshots it makes useless.

        The store's rules: None, changing nothing, when another process is compacting this
        graph, or when the newest snapshot covers entries this process has not seen (their
        segments may be gone: a snapshot of this state would hide them). Only segments of
        writers that were dead when read, and this writer's own sealed ones, are deleted.
        """
        writer = self.writable("compact the knowledge graph")
        with compaction_lock(self.snap_dir) as held:
            if not held:
                log.info("graph compaction skipped: another process is compacting %s",
                         self.path)
                return None
            if not self._sees_newest_snapshot(read_covered):
                return None
            writer.rotate()  # everything written so far is in sealed, synced segments
            covered = dict(self.covered)
            path = write(self.snap_dir, covered, self.max_hlc, writer.instance,
                         writer.next_hlc())
            self.snapshot, self.since_snapshot = path, 0
            self._prune(covered)
            return path

    def _sees_newest_snapshot(self, read_covered: ReadCovered) -> bool:
        snaps = list_snapshots(self.snap_dir)
        behind = unseen_writers(snaps, self.snapshot, self.covered, read_covered)
        if behind:
            log.info("graph compaction skipped: %s holds entries of %s that this process has "
                     "not seen; refresh() or reopen the graph to compact", snaps[0].name,
                     ", ".join(behind))
        return not behind

    def _prune(self, covered: dict[str, int]) -> None:
        writer = self.writable("compact the knowledge graph")
        for old in list_snapshots(self.snap_dir)[self.keep_snapshots :]:
            old.unlink(missing_ok=True)
        ranges = dict(self._dead_ranges)
        ranges.update({s.name: (writer.instance, s.first_seq, s.last_seq)
                       for s in writer.sealed_segments})
        gone = {name for name, (inst, _, last) in ranges.items()
                if last <= covered.get(inst, 0)}
        wal = self.path / "wal"
        for name in gone:
            (wal / name).unlink(missing_ok=True)
        self._dead_ranges = {k: v for k, v in self._dead_ranges.items() if k not in gone}
        writer.forget_sealed(gone)
        # A dead writer with no segment left needs neither manifest nor lock file.
        left = {p.name.rpartition("_")[0] for p in wal.glob("*.seg")}
        for instance in {rng[0] for rng in ranges.values()} - left - {writer.instance}:
            for suffix in (".manifest.json", ".lock"):
                (wal / f"{instance}{suffix}").unlink(missing_ok=True)

    def close(self) -> None:
        """Close the writer (seal its segment, mark its manifest closed)."""
        if self.writer is not None:
            self.writer.close()

