"""Reading one segment: split it into valid entries (as arrays) and damaged byte ranges.

An entry is valid when its magic, its length (within the file) and its CRC32 check out.
After a bad entry the reader looks for the next offset that holds the entry magic *and* a
valid entry; everything in between is a damaged range. Nothing valid after a bad entry makes
it the segment's damaged tail (``tail_start``).

Two walkers give the same result: a Python loop (small logs: it needs no numba) and the
`kernels.wal.frame_entries` kernel (large logs: ~1 µs per entry less, without the GIL, so it
runs on recovery's read-ahead thread beside the replay). Damage is always classified here,
in Python, by the same `_entry_at` / `_resync` rules.
"""

from __future__ import annotations

import mmap
import os
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .wal import CRC, ENTRY_HEADER, ENTRY_MAGIC, MAX_PAYLOAD, SEGMENT_MAGIC

__all__ = ["SegmentScan", "map_file", "scan_segment"]

_HDR = ENTRY_HEADER.size
_TAIL = CRC.size


@dataclass(frozen=True, slots=True)
class SegmentScan:
    """What one segment holds: its valid entries (parallel arrays) and its damaged ranges."""

    path: Path
    raw: bytes | mmap.mmap  # the segment's bytes; payloads are raw[off : off + length]
    hlc: np.ndarray  # int64
    seq: np.ndarray  # int64
    op: np.ndarray  # uint8
    off: np.ndarray  # int64, payload offsets
    length: np.ndarray  # int64, payload lengths
    damaged: list[tuple[int, int, str]]  # (start, end, reason), end exclusive
    tail_start: int | None  # where a damaged tail begins (nothing valid after it)
    size: int

    def __len__(self) -> int:
        return len(self.seq)

    @property
    def entries(self) -> list[tuple[int, int, int, memoryview]]:
        """(hlc, seq, op, payload) per valid entry (for tests and tools; replay uses arrays)."""
        buf = memoryview(self.raw)
        return [(h, s, o, buf[p : p + n]) for h, s, o, p, n in zip(
            self.hlc.tolist(), self.seq.tolist(), self.op.tolist(), self.off.tolist(),
            self.length.tolist(), strict=True)]


def map_file(path: Path) -> bytes | mmap.mmap:
    """The file's bytes, memory-mapped and prefaulted: no copy through a Python buffer."""
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            return b""
        flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
        return mmap.mmap(fh.fileno(), size, flags=flags, prot=mmap.PROT_READ)


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


def _resync(buf: memoryview, raw: bytes | mmap.mmap, start: int, n: int) -> int | None:
    # The next offset holding a complete, CRC-valid entry; the magic narrows the search.
    pos = raw.find(ENTRY_MAGIC, start)
    while pos != -1:
        if _entry_at(buf, pos, n)[4] is None:
            return pos
        pos = raw.find(ENTRY_MAGIC, pos + 1)
    return None


def _walk_python(buf: memoryview, off: int, n: int, out: list[tuple]) -> int:
    """Append (hlc, seq, op, payload offset, length) of valid entries; return the stop offset."""
    unpack, crc32, unpack_crc = ENTRY_HEADER.unpack_from, zlib.crc32, CRC.unpack_from
    while off < n and n - off >= _HDR + _TAIL:
        magic, length, seq, hlc, op = unpack(buf, off)
        end = off + _HDR + length
        if (magic != ENTRY_MAGIC or end + _TAIL > n
                or crc32(buf[off + 2 : end]) != unpack_crc(buf, end)[0]):
            break
        out.append((hlc, seq, op, off + _HDR, length))
        off = end + _TAIL
    return off


class _KernelWalker:
    """Runs `frame_entries` in chunks of growing output arrays."""

    def __init__(self, raw: bytes | mmap.mmap) -> None:
        from ..kernels.wal import CRC_TABLE, frame_entries

        self.frame, self.table = frame_entries, CRC_TABLE
        self.buf = np.frombuffer(raw, np.uint8) if len(raw) else np.zeros(0, np.uint8)
        if self.buf.flags.writeable:  # the kernel's signature takes a read-only buffer
            self.buf = self.buf.view()
            self.buf.flags.writeable = False
        self.parts: list[tuple[np.ndarray, ...]] = []
        self.cap = max(64, len(raw) // 2048)  # ~1 entry per 2 KB (a 384-d ADD is ~1.7 KB)

    def walk(self, off: int, n: int) -> int:
        while off < n:
            cols = (np.empty(self.cap, np.int64), np.empty(self.cap, np.int64),
                    np.empty(self.cap, np.int64), np.empty(self.cap, np.int64),
                    np.empty(self.cap, np.uint8))
            k, off = self.frame(self.buf, off, self.table, *cols)
            self.parts.append(tuple(c[:k] for c in cols))
            if k < self.cap:
                break
            self.cap *= 2
        return off

    def arrays(self) -> tuple[np.ndarray, ...]:
        if not self.parts:
            return (np.zeros(0, np.int64),) * 4 + (np.zeros(0, np.uint8),)
        off, length, seq, hlc, op = (np.concatenate(c) for c in zip(*self.parts, strict=True))
        return hlc, seq, op, off, length


def scan_segment(
    path: Path, raw: bytes | mmap.mmap | None = None, *, fast: bool = False
) -> SegmentScan:
    """Read a segment file and split it into valid entries and damaged ranges.

    ``fast`` walks the entries with the numba kernel (same result, for large logs).
    """
    if raw is None:
        raw = path.read_bytes()
    buf = memoryview(raw)
    n = len(raw)
    damaged: list[tuple[int, int, str]] = []
    off = len(SEGMENT_MAGIC)
    if n <= off and raw[:n] == SEGMENT_MAGIC[:n]:
        # Created by a writer killed before its 8-byte header was complete (SIGKILL right
        # after rotating): it can hold nothing acknowledged, so it is empty, not damaged.
        return _scan(path, raw, [], damaged, None, n)
    if raw[:off] != SEGMENT_MAGIC:
        damaged.append((0, min(off, n), "bad segment magic"))
    tail_start: int | None = None
    walker = _KernelWalker(raw) if fast else None
    found: list[tuple] = []
    while off < n:
        off = walker.walk(off, n) if walker is not None else _walk_python(buf, off, n, found)
        if off >= n:
            break
        reason = _entry_at(buf, off, n)[4] or "unreadable entry"
        nxt = _resync(buf, raw, off + 1, n)
        if nxt is None:
            damaged.append((off, n, reason))
            tail_start = off
            break
        damaged.append((off, nxt, reason))
        off = nxt
    if walker is not None:
        return SegmentScan(path, raw, *walker.arrays(), damaged, tail_start, n)
    return _scan(path, raw, found, damaged, tail_start, n)


def _scan(path: Path, raw: bytes | mmap.mmap, found: list[tuple],
          damaged: list[tuple[int, int, str]], tail_start: int | None, n: int) -> SegmentScan:
    cols = np.array(found, np.int64).reshape(-1, 5)
    return SegmentScan(path, raw, cols[:, 0].copy(), cols[:, 1].copy(),
                       cols[:, 2].astype(np.uint8), cols[:, 3].copy(), cols[:, 4].copy(),
                       damaged, tail_start, n)
