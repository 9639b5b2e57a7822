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
import heapq
import json
import mmap
import os
import time
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from .errors import ManifestError
from .wal import (
    CRC,
    ENTRY_HEADER,
    ENTRY_MAGIC,
    MAX_PAYLOAD,
    SEGMENT_MAGIC,
    parse_segment_name,
    read_manifest,
)

__all__ = ["Issue", "RecoveryReport", "SegmentScan", "WalReader", "map_file", "scan_segment"]

IssueKind = Literal[
    "torn_tail", "corrupt", "bad_header", "short_sealed", "missing_segment", "seq_gap",
    "bad_manifest", "bad_snapshot",
]
# An entry as replayed: (hlc, instance, seq, op, payload). A tuple, not a dataclass: recovery
# handles millions of them and tuples also sort in the global order for free.
Entry = tuple[int, str, int, int, memoryview]

_HDR = ENTRY_HEADER.size
_TAIL = CRC.size


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


@dataclass(frozen=True, slots=True)
class SegmentScan:
    """What one segment holds: its valid entries and its damaged byte ranges."""

    path: Path
    entries: list[tuple[int, int, int, memoryview]]  # (hlc, seq, op, payload)
    damaged: list[tuple[int, int, str]]  # (start, end, reason), end exclusive
    tail_start: int | None  # where a damaged tail begins (nothing valid after it)
    size: int


def _entry_at(buf: memoryview, off: int, n: int) -> tuple[int, int, int, int, str | None]:
    """Parse the entry at ``off``: (hlc, seq, op, end, None) or (0, 0, 0, 0, reason)."""
    if n - off < _HDR + _TAIL:
        return 0, 0, 0, 0, "incomplete entry header"
    magic, length, seq, hlc, op = ENTRY_HEADER.unpack_from(buf, off)
    if magic != ENTRY_MAGIC:
        return 0, 0, 0, 0, "bad entry magic"
    if length > MAX_PAYLOAD:
        return 0, 0, 0, 0, f"implausible length {length}"
    end = off + _HDR + length
    if end + _TAIL > n:
        return 0, 0, 0, 0, f"entry of {length} bytes runs past the end of the file"
    (crc,) = CRC.unpack_from(buf, end)
    if zlib.crc32(buf[off + 2 : end]) != crc:
        return 0, 0, 0, 0, "CRC32 mismatch"
    return hlc, seq, op, end + _TAIL, None


def _resync(buf: memoryview, raw: bytes, start: int, n: int) -> int | None:
    # The next offset holding a complete, CRC-valid entry; the magic narrows the search.
    pos = raw.find(ENTRY_MAGIC, start)
    while pos != -1:
        if _entry_at(buf, pos, n)[4] is None:
            return pos
        pos = raw.find(ENTRY_MAGIC, pos + 1)
    return None


def map_file(path: Path) -> bytes | mmap.mmap:
    """The file's bytes, memory-mapped and prefaulted: no copy through a Python buffer."""
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            return b""
        flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
        return mmap.mmap(fh.fileno(), size, flags=flags, prot=mmap.PROT_READ)


def _map_and_scan(path: Path) -> tuple[bytes | mmap.mmap, SegmentScan] | None:
    try:
        raw = map_file(path)
    except FileNotFoundError:  # deleted since it was listed: a concurrent compaction
        return None
    return raw, scan_segment(path, raw)


def scan_segment(path: Path, raw: bytes | mmap.mmap | None = None) -> SegmentScan:
    """Read a segment file and split it into valid entries and damaged ranges."""
    if raw is None:
        raw = path.read_bytes()
    buf = memoryview(raw)
    n = len(raw)
    entries: list[tuple[int, int, int, memoryview]] = []
    damaged: list[tuple[int, int, str]] = []
    off = len(SEGMENT_MAGIC)
    if n <= off and raw[:n] == SEGMENT_MAGIC[:n]:
        # Created by a writer killed before its 8-byte header was complete (SIGKILL right
        # after rotating): it can hold nothing acknowledged, so it is empty, not damaged.
        return SegmentScan(path, entries, damaged, None, n)
    if raw[:off] != SEGMENT_MAGIC:
        damaged.append((0, min(off, n), "bad segment magic"))
    tail_start: int | None = None
    unpack, crc32 = ENTRY_HEADER.unpack_from, zlib.crc32
    unpack_crc = CRC.unpack_from
    while off < n:
        # Fast path inlined: this loop runs once per entry during recovery.
        if n - off >= _HDR + _TAIL:
            magic, length, seq, hlc, op = unpack(buf, off)
            end = off + _HDR + length
            if (
                magic == ENTRY_MAGIC
                and end + _TAIL <= n
                and crc32(buf[off + 2 : end]) == unpack_crc(buf, end)[0]
            ):
                entries.append((hlc, seq, op, buf[off + _HDR : end]))
                off = end + _TAIL
                continue
        reason = _entry_at(buf, off, n)[4] or "unreadable entry"
        nxt = _resync(buf, raw, off + 1, n)
        if nxt is None:
            damaged.append((off, n, reason))
            tail_start = off
            break
        damaged.append((off, nxt, reason))
        off = nxt
    return SegmentScan(path, entries, damaged, tail_start, n)


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


class WalReader:
    """Reads a WAL directory: ``entries()`` yields every entry in global order.

    With ``repair=True`` (opening a store), dead writers' torn tails are truncated and damaged
    bytes are copied to ``quarantine_dir``; with ``repair=False`` (``check``) nothing is written.
    ``covered`` maps an instance to the last seq already in a snapshot: those are skipped.
    """

    def __init__(
        self,
        wal_dir: Path,
        quarantine_dir: Path,
        *,
        repair: bool,
        covered: dict[str, int] | None = None,
        skip_instances: frozenset[str] = frozenset(),
    ) -> None:
        self.wal_dir = wal_dir
        self.quarantine_dir = quarantine_dir
        self.repair = repair
        self.covered = dict(covered or {})
        self.skip = skip_instances
        self.report = RecoveryReport()

    def _instances(self) -> dict[str, list[tuple[int, Path]]]:
        found: dict[str, list[tuple[int, Path]]] = {}
        if not self.wal_dir.is_dir():
            return found
        for entry in os.scandir(self.wal_dir):
            parsed = parse_segment_name(entry.name)
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
        started = time.perf_counter()
        streams = [self._instance_entries(i, segs) for i, segs in self._instances().items()]
        merged = streams[0] if len(streams) == 1 else heapq.merge(*streams)  # empty: merge()
        rep = self.report
        for item in merged:
            rep.replayed += 1
            yield item
        rep.seconds = time.perf_counter() - started

    def _instance_entries(self, instance: str, segs: list[tuple[int, Path]]) -> Iterator[Entry]:
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
        except (ManifestError, KeyError, TypeError, ValueError) as exc:
            self._issue("bad_manifest", path, 0, 0, str(exc))
            return {}

    def _read_instance(
        self, instance: str, segs: list[tuple[int, Path]], live: bool
    ) -> Iterator[Entry]:
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
        # The next segment is mapped and CRC-checked on a second thread while this one is
        # applied: zlib.crc32 releases the GIL, and checking is a third of recovery's time.
        with ThreadPoolExecutor(max_workers=1) as pool:
            ahead = pool.submit(_map_and_scan, segs[0][1]) if segs else None
            for i, (_, path) in enumerate(segs):
                assert ahead is not None
                mapped = ahead.result()
                if i + 1 < len(segs):
                    ahead = pool.submit(_map_and_scan, segs[i + 1][1])
                if mapped is None:
                    self._issue("missing_segment", path, 0, 0,
                                "deleted while being read (another process compacted the "
                                "field); reopen to see its entries")
                    continue
                raw, scan = mapped
                if scan.damaged and self.repair:
                    # Repair truncates files: work on a private copy, not on a mapping.
                    raw = bytes(raw)
                    scan = scan_segment(path, raw)
                is_last = i == len(segs) - 1
                self._handle_damage(scan, raw, live, is_last, sealed.get(path.name, (None, 0))[0])
                yield from self._segment_entries(instance, scan, covered, progress)

    def _segment_entries(
        self, instance: str, scan: SegmentScan, covered: int, progress: list[int]
    ) -> Iterator[Entry]:
        rep = self.report
        rep.segments += 1
        rep.bytes += scan.size
        rep.entries += len(scan.entries)
        if scan.entries:
            first, last = scan.entries[0][1], scan.entries[-1][1]
            rep.segment_ranges[scan.path.name] = (instance, first, last)
            rep.max_hlc = max(rep.max_hlc, scan.entries[-1][0])
        last_seq = progress[0]
        for hlc, seq, op, payload in scan.entries:
            if seq <= last_seq:  # covered by the snapshot, or a duplicate
                continue
            if seq != last_seq + 1:
                self._issue("seq_gap", scan.path, 0, 0,
                            f"writer {instance} jumps from seq {last_seq} to {seq}")
            last_seq = progress[0] = seq
            yield hlc, instance, seq, op, payload

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
            kept = self._quarantine(path, raw, start, end, reason) if self.repair else None
            detail = reason
            if kind == "torn_tail" and self.repair and not live:
                os.truncate(path, start)
                with open(path, "rb+") as fh:
                    os.fsync(fh.fileno())
                detail = f"{reason}; truncated from {scan.size} to {start} bytes"
            self._issue(kind, path, start, end - start, detail, kept)

    def _quarantine(self, path: Path, raw: bytes | mmap.mmap, start: int, end: int, reason: str) -> str:
        self.quarantine_dir.mkdir(parents=True, exist_ok=True)
        target = self.quarantine_dir / f"{path.name}.{start}.bad"
        if not target.exists():  # the same damage is found again on every open
            tmp = target.with_name(target.name + ".tmp")
            tmp.write_bytes(raw[start:end])
            os.replace(tmp, target)
            record = {
                "segment": path.name, "offset": start, "length": end - start,
                "reason": reason, "file": target.name, "time": time.time(),
            }
            with open(self.quarantine_dir / "report.jsonl", "a") as fh:
                fh.write(json.dumps(record) + "\n")
        return str(target)

    def _issue(self, kind: IssueKind, path: Path, offset: int, length: int, detail: str,
               quarantined: str | None = None) -> None:
        self.report.issues.append(Issue(kind, str(path), offset, length, detail, quarantined))
