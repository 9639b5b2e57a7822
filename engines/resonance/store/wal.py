"""Write-ahead log: entry framing, one writer's segment files, its manifest and lock.

Layout under ``<field>/wal/``, for a writer instance ``I`` (one per open store):

    I.lock                 flock()ed by the live writer; free once it exits or is killed
    I.manifest.json        its segments (sealed ones with size and seq range), atomically replaced
    I_000001.seg, ...      segment files, rotated at ``segment_bytes``

A segment is an 8-byte magic followed by entries::

    magic 2B | length u32 | seq u64 | hlc u64 | op u8 | payload (length bytes) | crc32 u32

``crc32`` covers everything after the magic up to the payload's end, so a flipped bit
anywhere in an entry is caught; the magic lets a reader find the next entry after damage.
``seq`` increases by one per entry across a writer's segments; ``hlc`` is a hybrid logical
clock (nanoseconds, never going back, above every hlc seen at open), which orders entries of
different writers: the global order is (hlc, instance, seq).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import struct
import threading
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..errors import ConfigError, ManifestError, StoreClosed, StoreError

__all__ = [
    "ENTRY_HEADER",
    "ENTRY_MAGIC",
    "MAX_PAYLOAD",
    "SEGMENT_MAGIC",
    "Durability",
    "WalWriter",
    "encode_entry",
    "new_instance_id",
    "parse_segment_name",
    "read_manifest",
    "segment_name",
]

Durability = Literal["fsync", "batch", "os"]
DURABILITIES: tuple[str, ...] = ("fsync", "batch", "os")

SEGMENT_MAGIC = b"SOULWAL1"
ENTRY_MAGIC = b"\xa7\x5e"
ENTRY_HEADER = struct.Struct("<2sIQQB")  # magic, payload length, seq, hlc, op
CRC = struct.Struct("<I")
# Guards readers against a garbage length field; a real payload is far smaller.
MAX_PAYLOAD = 256 << 20


def encode_entry(seq: int, hlc: int, op: int, payload: bytes | memoryview) -> bytes:
    """Frame one entry (header, payload, CRC32) as bytes ready to append."""
    header = ENTRY_HEADER.pack(ENTRY_MAGIC, len(payload), seq, hlc, op)
    crc = zlib.crc32(payload, zlib.crc32(memoryview(header)[2:]))
    return b"".join((header, payload, CRC.pack(crc)))


def new_instance_id() -> str:
    """A writer instance id: sortable by creation time, unique across processes."""
    return f"{time.time_ns() // 1_000_000:011x}{secrets.token_hex(4)}"


def segment_name(instance: str, number: int) -> str:
    """The file name of a writer's ``number``-th segment."""
    return f"{instance}_{number:06d}.seg"


def parse_segment_name(name: str) -> tuple[str, int] | None:
    """(instance, number) of a segment file name, or None if it is not one."""
    if not name.endswith(".seg"):
        return None
    instance, _, number = name[:-4].rpartition("_")
    if not instance or not number.isdigit():
        return None
    return instance, int(number)


def read_manifest(path: Path) -> dict:
    """Load a manifest; raise ManifestError if it is unreadable."""
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ManifestError(f"cannot read manifest {path}: {exc}") from exc
    if not isinstance(manifest, dict) or not isinstance(manifest.get("segments", []), list):
        raise ManifestError(f"manifest {path} is JSON of the wrong shape (expected an object "
                            "with a list of segments)")
    return manifest


def _atomic_write(path: Path, data: bytes, sync: bool) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        if sync:
            fh.flush()
            os.fsync(fh.fileno())
    os.replace(tmp, path)
    if sync:
        fsync_dir(path.parent)


def fsync_dir(path: Path) -> None:
    """fsync a directory, so the files created or renamed in it survive power loss."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True, slots=True)
class SealedSegment:
    """A segment that will not grow again, as recorded in the manifest."""

    name: str
    first_seq: int
    last_seq: int
    size: int


class WalWriter:
    """Appends entries to one writer instance's segments; never touches other writers' files.

    Thread-safe: appends from several threads are serialised by one lock. In ``batch`` mode a
    background thread fsyncs at most every ``sync_interval`` seconds while writes are pending.
    """

    def __init__(
        self,
        wal_dir: str | Path,
        *,
        durability: Durability = "batch",
        segment_bytes: int = 64 << 20,
        sync_interval: float = 0.05,
        hlc_floor: int = 0,
        instance: str | None = None,
    ) -> None:
        if durability not in DURABILITIES:
            raise ConfigError(
                f"durability {durability!r} is not one of: {', '.join(DURABILITIES)}"
            )
        if segment_bytes < 4096:
            raise ConfigError(f"segment_bytes {segment_bytes} is below the minimum 4096")
        self.dir = Path(wal_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.durability: Durability = durability
        self.segment_bytes = segment_bytes
        self.sync_interval = sync_interval
        self.instance = instance or new_instance_id()
        self._lock = threading.Lock()
        self._hlc = hlc_floor
        self.seq = 0  # seq of the last appended entry
        self._sealed: list[SealedSegment] = []
        self._number = 0
        self._fd = -1
        self._size = 0
        self._first_seq = 1
        self._dirty = False
        self._closed = False
        self._lock_fd = os.open(self.dir / f"{self.instance}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(self._lock_fd)
            raise StoreError(f"writer instance {self.instance} is already in use") from exc
        self._open_segment()
        self._stop = threading.Event()
        self._flusher: threading.Thread | None = None
        if durability == "batch":
            self._flusher = threading.Thread(
                target=self._flush_loop, name=f"wal-sync-{self.instance}", daemon=True
            )
            self._flusher.start()

    # -- appending -------------------------------------------------------------------------

    def next_hlc(self) -> int:
        """Advance the hybrid logical clock (callers hold no lock: append does it)."""
        now = time.time_ns()
        self._hlc = now if now > self._hlc else self._hlc + 1
        return self._hlc

    def append(self, op: int, payload: bytes | memoryview) -> tuple[int, int]:
        """Append one entry; return (seq, hlc) once it is as durable as the mode promises."""
        with self._lock:
            if self._closed:
                raise StoreClosed("the write-ahead log is closed")
            seq = self.seq + 1
            hlc = self.next_hlc()
            data = encode_entry(seq, hlc, op, payload)
            if self._size + len(data) > self.segment_bytes and self._size > len(SEGMENT_MAGIC):
                self._rotate()
            self._write_all(data)
            self.seq = seq
            self._size += len(data)
            if self.durability == "fsync":
                os.fdatasync(self._fd)
            else:
                self._dirty = True
            return seq, hlc

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]

    def sync(self) -> None:
        """Force everything appended so far to stable storage (any mode)."""
        with self._lock:
            if self._fd >= 0 and self._dirty:
                os.fdatasync(self._fd)
                self._dirty = False

    def _flush_loop(self) -> None:
        # Group commit: one fsync covers every append since the last one.
        while not self._stop.wait(self.sync_interval):
            if self._dirty:
                with contextlib.suppress(OSError):
                    self.sync()

    # -- segments and manifest -------------------------------------------------------------

    @property
    def active_segment(self) -> str:
        """File name of the segment being appended to."""
        return segment_name(self.instance, self._number)

    @property
    def sealed_segments(self) -> tuple[SealedSegment, ...]:
        """This writer's segments that will not grow again."""
        return tuple(self._sealed)

    def _open_segment(self) -> None:
        self._number += 1
        path = self.dir / segment_name(self.instance, self._number)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        self._write_all(SEGMENT_MAGIC)
        self._size = len(SEGMENT_MAGIC)
        self._first_seq = self.seq + 1
        if self.durability != "os":
            os.fdatasync(self._fd)
            fsync_dir(self.dir)
        self._write_manifest(closed=False)

    def _seal_active(self) -> None:
        # Sealing syncs in every mode: the manifest records a size that must be true on disk.
        os.fdatasync(self._fd)
        os.close(self._fd)
        self._fd = -1
        self._dirty = False
        if self.seq >= self._first_seq:
            self._sealed.append(
                SealedSegment(self.active_segment, self._first_seq, self.seq, self._size)
            )
        else:  # an empty segment holds nothing worth keeping
            with contextlib.suppress(OSError):
                (self.dir / self.active_segment).unlink()

    def _rotate(self) -> None:
        self._seal_active()
        self._open_segment()

    def rotate(self) -> None:
        """Seal the active segment and start a new one (compaction calls this)."""
        with self._lock:
            if self._closed:
                raise StoreClosed("the write-ahead log is closed")
            if self.seq >= self._first_seq:
                self._rotate()

    def forget_sealed(self, names: set[str]) -> None:
        """Drop deleted segments from the manifest (after compaction removed them)."""
        with self._lock:
            self._sealed = [s for s in self._sealed if s.name not in names]
            if not self._closed:
                self._write_manifest(closed=False)

    def _write_manifest(self, *, closed: bool) -> None:
        manifest = {
            "format": 1,
            "instance": self.instance,
            "pid": os.getpid(),
            "durability": self.durability,
            "closed": closed,
            "active": None if closed else self.active_segment,
            "segments": [
                {"name": s.name, "first_seq": s.first_seq, "last_seq": s.last_seq, "size": s.size}
                for s in self._sealed
            ],
        }
        data = json.dumps(manifest, indent=1).encode()
        _atomic_write(self.dir / f"{self.instance}.manifest.json", data, self.durability != "os")

    def close(self) -> None:
        """Sync, seal the active segment, mark the manifest closed and release the lock."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._stop.set()
        if self._flusher is not None:
            self._flusher.join()
        with self._lock:
            self._seal_active()
            self._write_manifest(closed=True)
            os.close(self._lock_fd)
            with contextlib.suppress(OSError):
                (self.dir / f"{self.instance}.lock").unlink()

    @property
    def closed(self) -> bool:
        """True once close() ran."""
        return self._closed
