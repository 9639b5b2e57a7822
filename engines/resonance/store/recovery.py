"""Recovery: read every writer's segments in global order, report and quarantine damage.

What is found and what happens to it (each case becomes an `Issue` in the report):

- ``torn_tail``: the last entries of a dead writer's last segment are incomplete or fail their
  CRC with nothing valid after them — a write cut short by a crash. The bytes are copied to
  ``quarantine/`` and the segment is truncated to its last valid entry.
- ``corrupt``: an entry fails its check but valid entries follow (flipped bits, a bad block).
  The damaged range is copied to ``quarantine/`` with its file and offset; every valid entry
  before and after it is replayed. The segment is left as is until compaction deletes it.
- ``short_sealed`` / ``missing_segment``: a manifest records more than the disk holds.
- ``seq_gap``: a writer's entries skip sequence numbers (entries were lost).

A live writer's files (its lock is held) are only read: its incomplete tail is a write in
progress, so it is neither reported nor truncated.
"""

from __future__ import annotations

import fcntl
import json
import mmap
import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

from ..errors import ManifestError
from .scan import SegmentScan, map_file, scan_segment
from .wal import parse_segment_name, read_manifest

__all__ = [
    "Block", "Issue", "RecoveryReport", "SegmentScan", "WalReader", "map_file", "scan_segment",
]

# Logs at least this large are read with the numba kernels (loading numba costs ~0.5 s,
# more than a small log's whole replay); tests force either path with WalReader(fast=...).
FAST_BYTES = 48 << 20

IssueKind = Literal[
    "torn_tail", "corrupt", "bad_header", "short_sealed", "missing_segment", "seq_gap",
    "bad_manifest", "bad_snapshot", "not_a_segment", "quarantined", "stale_tmp",
]
# An entry as replayed: (hlc, instance, seq, op, payload). A tuple, not a dataclass: recovery
# handles millions of them and tuples also sort in the global order for free.
Entry = tuple[int, str, int, int, memoryview]


@dataclass(frozen=True, slots=True)
class Issue:
    """One problem found in the store's files, with where it is and what was done."""

    kind: IssueKind
    path: str
    offset: int
    length: int
    detail: str
    quarantined: str | None = None

    def __str__(self) -> str:
        where = f"{self.path} at byte {self.offset}"
        kept = f"; {self.length} bytes kept in {self.quarantined}" if self.quarantined else ""
        return f"{self.kind}: {where}: {self.detail}{kept}"


@dataclass
class RecoveryReport:
    """Everything recovery found: counts, the highest clock seen, and every issue."""

    segments: int = 0
    entries: int = 0
    replayed: int = 0
    bytes: int = 0
    max_hlc: int = 0
    issues: list[Issue] = field(default_factory=list)
    # (segment name) -> (instance, first seq, last seq); compaction decides from this what
    # a snapshot covers.
    segment_ranges: dict[str, tuple[str, int, int]] = field(default_factory=dict)
    live_instances: set[str] = field(default_factory=set)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """True when nothing was found damaged or missing."""
        return not self.issues


@dataclass(frozen=True, slots=True)
class Block:
    """Consecutive entries of one segment, in global order: parallel arrays over its bytes.

    Recovery hands the state blocks, not entries: a run of a million ADDs is then decoded by
    a few array operations instead of a million Python frames.
    """

    instance: str
    raw: bytes | mmap.mmap
    hlc: np.ndarray
    seq: np.ndarray
    op: np.ndarray
    off: np.ndarray
    length: np.ndarray

    def __len__(self) -> int:
        return len(self.seq)

    def sub(self, start: int, stop: int) -> Block:
        """Entries [start, stop) of this block."""
        return Block(self.instance, self.raw, self.hlc[start:stop], self.seq[start:stop],
                     self.op[start:stop], self.off[start:stop], self.length[start:stop])

    def entries(self) -> Iterator[Entry]:
        """(hlc, instance, seq, op, payload) per entry."""
        buf, inst = memoryview(self.raw), self.instance
        for h, s, o, p, n in zip(self.hlc.tolist(), self.seq.tolist(), self.op.tolist(),
                                 self.off.tolist(), self.length.tolist(), strict=True):
            yield h, inst, s, o, buf[p : p + n]


class WalReader:
    """Reads a WAL directory: ``blocks()`` (or ``entries()``) in global order.

    With ``repair=True`` (opening a store), dead writers' torn tails are truncated and damaged
    bytes are copied to ``quarantine_dir``; with ``repair=False`` (``check``) nothing is written.
    ``covered`` maps an instance to the last seq already in a snapshot: those are skipped.
    ``fast``: walk segments with the numba kernels (None: when the log is ``FAST_BYTES`` or
    more); the result is the same either way.
    """

    def __init__(
        self,
        wal_dir: Path,
        quarantine_dir: Path,
        *,
        repair: bool,
        covered: dict[str, int] | None = None,
        skip_instances: frozenset[str] = frozenset(),
        fast: bool | None = None,
    ) -> None:
        self.wal_dir = wal_dir
        self.quarantine_dir = quarantine_dir
        self.repair = repair
        self.covered = dict(covered or {})
        self.skip = skip_instances
        self.fast = fast
        self.report = RecoveryReport()

    def _instances(self) -> dict[str, list[tuple[int, Path]]]:
        found: dict[str, list[tuple[int, Path]]] = {}
        if not self.wal_dir.is_dir():
            return found
        for entry in os.scandir(self.wal_dir):
            parsed = parse_segment_name(entry.name)
            if parsed and not entry.is_file():
                # A folder (or socket, ...) named like a segment holds no entries: say so and
                # read the rest, rather than fail to open the field.
                self._issue("not_a_segment", Path(entry.path), 0, 0,
                            "named like a segment but not a file; skipped (move it away)")
                continue
            if parsed and parsed[0] not in self.skip:
                found.setdefault(parsed[0], []).append((parsed[1], Path(entry.path)))
        for segs in found.values():
            segs.sort()
        return found

    def _probe_lock(self, instance: str) -> int | None:
        """Take a dead writer's lock (returns the fd) or None if the writer is alive."""
        path = self.wal_dir / f"{instance}.lock"
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            return -1  # closed cleanly: nobody writes there any more
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return None
        return fd

    def entries(self) -> Iterator[Entry]:
        """Every valid entry not covered by the snapshot, in (hlc, instance, seq) order."""
        for block in self.blocks():
            yield from block.entries()

    def blocks(self) -> Iterator[Block]:
        """Every valid entry not covered by the snapshot, in (hlc, instance, seq) order, as
        blocks of consecutive entries of one segment."""
        started = time.perf_counter()
        instances = sorted(self._instances().items())
        self.resolve_fast(instances)
        streams = [self._instance_blocks(i, segs) for i, segs in instances]
        if len(streams) == 1:
            merged: Iterator[Block] = streams[0]
        else:
            merged = _merge([b for stream in streams for b in stream])
        rep = self.report
        for block in merged:
            rep.replayed += len(block)
            yield block
        rep.seconds = time.perf_counter() - started

    def resolve_fast(self, instances: list[tuple[str, list[tuple[int, Path]]]] | None = None,
                     ) -> bool:
        """Whether segments are walked with the numba kernels (decided once, by log size)."""
        if self.fast is None:
            found = instances if instances is not None else self._instances().items()
            total = sum(_size(path) for _, segs in found for _, path in segs)
            self.fast = total >= FAST_BYTES
        return self.fast

    def _instance_blocks(self, instance: str, segs: list[tuple[int, Path]]) -> Iterator[Block]:
        lock_fd = self._probe_lock(instance)
        live = lock_fd is None
        if live:
            self.report.live_instances.add(instance)
        try:
            yield from self._read_instance(instance, segs, live)
        finally:
            if lock_fd is not None and lock_fd >= 0:
                os.close(lock_fd)

    def _sealed(self, instance: str) -> dict[str, tuple[int, int]]:
        """The manifest's sealed segments: name -> (size, last seq)."""
        path = self.wal_dir / f"{instance}.manifest.json"
        if not path.exists():
            return {}
        try:
            manifest = read_manifest(path)
            return {
                s["name"]: (int(s["size"]), int(s["last_seq"]))
                for s in manifest.get("segments", [])
            }
        except (ManifestError, KeyError, TypeError, ValueError, AttributeError) as exc:
            # A manifest of the wrong shape only loses the sealed sizes it would have
            # checked: the segments themselves are still read.
            self._issue("bad_manifest", path, 0, 0, f"{exc}; segments read without it")
            return {}

    def _read_instance(
        self, instance: str, segs: list[tuple[int, Path]], live: bool
    ) -> Iterator[Block]:
        covered = self.covered.get(instance, 0)
        sealed = self._sealed(instance)
        on_disk = {path.name for _, path in segs}
        for name, (size, seg_last) in sealed.items():
            if name not in on_disk and seg_last > covered:
                self._issue(
                    "missing_segment", self.wal_dir / name, 0, size,
                    f"the manifest lists it (entries up to seq {seg_last}) but the file is gone",
                )
        progress = [covered]  # the last seq yielded, carried across this writer's segments
        fast = bool(self.fast)
        # The next segment is mapped and CRC-checked on a second thread while this one is
        # applied: zlib.crc32 and the numba walker release the GIL.
        with ThreadPoolExecutor(max_workers=1) as pool:
            ahead = pool.submit(_map_and_scan, segs[0][1], fast) if segs else None
            for i, (_, path) in enumerate(segs):
                assert ahead is not None
                scan = ahead.result()
                if i + 1 < len(segs):
                    ahead = pool.submit(_map_and_scan, segs[i + 1][1], fast)
                if scan is None:
                    self._issue("missing_segment", path, 0, 0,
                                "deleted while being read (another process compacted the "
                                "field); reopen to see its entries")
                    continue
                if scan.damaged and self.repair:
                    # Repair truncates files: work on a private copy, not on a mapping.
                    scan = scan_segment(path, bytes(scan.raw), fast=fast)
                is_last = i == len(segs) - 1
                self._handle_damage(scan, scan.raw, live, is_last,
                                    sealed.get(path.name, (None, 0))[0])
                block = self._segment_block(instance, scan, progress)
                if block is not None:
                    yield block

    def _segment_block(
        self, instance: str, scan: SegmentScan, progress: list[int]
    ) -> Block | None:
        rep = self.report
        rep.segments += 1
        rep.bytes += scan.size
        rep.entries += len(scan)
        if not len(scan):
            return None
        seq = scan.seq
        rep.segment_ranges[scan.path.name] = (instance, int(seq[0]), int(seq[-1]))
        rep.max_hlc = max(rep.max_hlc, int(scan.hlc[-1]))
        last_seq = progress[0]
        block = Block(instance, scan.raw, scan.hlc, seq, scan.op, scan.off, scan.length)
        if seq[0] > last_seq and (len(seq) == 1 or bool((np.diff(seq) == 1).all())):
            # The usual case: a gapless run after what is already applied.
            if seq[0] != last_seq + 1:
                self._issue("seq_gap", scan.path, 0, 0,
                            f"writer {instance} jumps from seq {last_seq} to {int(seq[0])}")
            progress[0] = int(seq[-1])
            return block
        keep: list[int] = []
        for j, s in enumerate(seq.tolist()):
            if s <= last_seq:  # covered by the snapshot, or a duplicate
                continue
            if s != last_seq + 1:
                self._issue("seq_gap", scan.path, 0, 0,
                            f"writer {instance} jumps from seq {last_seq} to {s}")
            last_seq = s
            keep.append(j)
        progress[0] = last_seq
        if not keep:
            return None
        idx = np.array(keep, np.int64)
        return Block(instance, scan.raw, scan.hlc[idx], seq[idx], scan.op[idx], scan.off[idx],
                     scan.length[idx])

    def _handle_damage(
        self, scan: SegmentScan, raw: bytes | mmap.mmap, live: bool, is_last: bool, sealed_size: int | None
    ) -> None:
        path = scan.path
        if sealed_size is not None and scan.size < sealed_size:
            self._issue(
                "short_sealed", path, scan.size, sealed_size - scan.size,
                f"sealed segment is {scan.size} bytes, the manifest recorded {sealed_size}",
            )
        for start, end, reason in scan.damaged:
            at_tail = scan.tail_start == start
            if live and at_tail and is_last:
                continue  # a write in progress, not damage
            if start == 0:
                self._issue("bad_header", path, 0, end, reason)
                continue
            kind: IssueKind = "torn_tail" if at_tail and is_last else "corrupt"
            kept = self._quarantine(path, raw, start, end, reason, kind) if self.repair else None
            detail = reason
            if kind == "torn_tail" and self.repair and not live:
                os.truncate(path, start)
                with open(path, "rb+") as fh:
                    os.fsync(fh.fileno())
                detail = f"{reason}; truncated from {scan.size} to {start} bytes"
            self._issue(kind, path, start, end - start, detail, kept)

    def _quarantine(self, path: Path, raw: bytes | mmap.mmap, start: int, end: int, reason: str,
                    kind: IssueKind) -> str:
        self.quarantine_dir.mkdir(parents=True, exist_ok=True)
        target = self.quarantine_dir / f"{path.name}.{start}.bad"
        if not target.exists():  # the same damage is found again on every open
            tmp = target.with_name(target.name + ".tmp")
            tmp.write_bytes(raw[start:end])
            os.replace(tmp, target)
            record = {
                "segment": path.name, "offset": start, "length": end - start,
                "reason": reason, "kind": kind, "file": target.name, "time": time.time(),
            }
            with open(self.quarantine_dir / "report.jsonl", "a") as fh:
                fh.write(json.dumps(record) + "\n")
        return str(target)

    def _issue(self, kind: IssueKind, path: Path, offset: int, length: int, detail: str,
               quarantined: str | None = None) -> None:
        self.report.issues.append(Issue(kind, str(path), offset, length, detail, quarantined))


def _map_and_scan(path: Path, fast: bool) -> SegmentScan | None:
    try:
        raw = map_file(path)
    except FileNotFoundError:  # deleted since it was listed: a concurrent compaction
        return None
    return scan_segment(path, raw, fast=fast)


def _merge(blocks: list[Block]) -> Iterator[Block]:
    """Several writers' blocks interleaved in the global (hlc, instance, seq) order, cut into
    runs of consecutive entries of one block."""
    if not blocks:
        return
    rank = {name: r for r, name in enumerate(sorted({b.instance for b in blocks}))}
    hlc = np.concatenate([b.hlc for b in blocks])
    seq = np.concatenate([b.seq for b in blocks])
    inst = np.concatenate([np.full(len(b), rank[b.instance], np.int64) for b in blocks])
    bid = np.concatenate([np.full(len(b), j, np.int64) for j, b in enumerate(blocks)])
    pos = np.concatenate([np.arange(len(b), dtype=np.int64) for b in blocks])
    order = np.lexsort((seq, inst, hlc))
    bid, pos = bid[order], pos[order]
    cuts = np.flatnonzero((np.diff(bid) != 0) | (np.diff(pos) != 1)) + 1
    starts = [0, *cuts.tolist()]
    stops = [*cuts.tolist(), len(order)]
    for a, e in zip(starts, stops, strict=True):
        yield blocks[int(bid[a])].sub(int(pos[a]), int(pos[e - 1]) + 1)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
