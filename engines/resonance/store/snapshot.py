"""Snapshots: the whole in-memory state in one file, so recovery replays only the log after it.

File ``snapshots/snap_{hlc:020d}_{instance}.snap``: an 8-byte magic, then sections, each
``length u64 | crc32 u32 | bytes``: a JSON header (format, dim, rows, the per-writer seq it
covers, the embedding model's record), ids, texts and tags NUL-joined, a JSON document of realm/source/meta/accesses, then the numeric columns and the vectors as
raw little-endian arrays. Written to a temporary name, fsynced, renamed: a crash leaves either
the old snapshot or the new one, never half of one.
"""

from __future__ import annotations

import json
import mmap
import os
import struct
import zlib
from array import array
from pathlib import Path

import numpy as np

from ..errors import CorruptSegment
from .ops import SEP
from .recovery import map_file
from .state import State, alloc_vectors
from .wal import fsync_dir

__all__ = ["SNAPSHOT_MAGIC", "list_snapshots", "read_header", "read_snapshot", "write_snapshot"]

SNAPSHOT_MAGIC = b"SOULSNP1"
_SECTION = struct.Struct("<QI")
# Numeric columns in file order: (attribute, array typecode, numpy dtype).
_NUMERIC = (
    ("kind", None, "u1"), ("flags", None, "u1"),
    ("created", "d", "<f8"), ("last_active", "d", "<f8"), ("mu", "d", "<f8"),
    ("var", "d", "<f8"), ("n", "I", "<u4"), ("access_count", "I", "<u4"),
)


def list_snapshots(snap_dir: Path) -> list[Path]:
    """Snapshot files, newest first (the name starts with the clock it was taken at)."""
    if not snap_dir.is_dir():
        return []
    return sorted(snap_dir.glob("snap_*.snap"), reverse=True)


def write_snapshot(state: State, snap_dir: Path, instance: str, hlc: int) -> Path:
    """Write ``state`` to a new snapshot file and return its path."""
    snap_dir.mkdir(parents=True, exist_ok=True)
    n = state.n_rows
    header = {
        "format": 1, "dim": state.dim, "rows": n, "alive": state.alive,
        "covered": state.covered, "max_hlc": state.max_hlc, "embedder": state.embedder,
    }
    others = {
        "realm": state.realm, "source": state.source, "meta": state.meta,
        "accessed": {str(k): v for k, v in state.accessed.items()},
    }
    sections: list[bytes | memoryview] = [
        json.dumps(header).encode(),
        SEP.join(state.ids).encode(), SEP.join(state.text).encode(),
        SEP.join(state.tags).encode(),
        json.dumps(others, ensure_ascii=False, separators=(",", ":")).encode(),
    ]
    for name, _, dtype in _NUMERIC:
        sections.append(np.asarray(getattr(state, name), dtype=dtype).tobytes())
    sections.append(memoryview(np.ascontiguousarray(state.vectors, dtype="<f4")).cast("B"))
    path = snap_dir / f"snap_{hlc:020d}_{instance}.snap"
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(SNAPSHOT_MAGIC)
        for data in sections:
            fh.write(_SECTION.pack(len(data), zlib.crc32(data)))
            fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fsync_dir(snap_dir)
    return path


def _sections(path: Path, raw: bytes | mmap.mmap) -> list[memoryview]:
    buf = memoryview(raw)
    if raw[:8] != SNAPSHOT_MAGIC:
        raise CorruptSegment(path, 0, "bad snapshot magic")
    out, off = [], 8
    while off < len(raw):
        if off + _SECTION.size > len(raw):
            raise CorruptSegment(path, off, "truncated section header")
        length, crc = _SECTION.unpack_from(buf, off)
        start = off + _SECTION.size
        if start + length > len(raw):
            raise CorruptSegment(path, off, f"section of {length} bytes runs past the end")
        data = buf[start : start + length]
        if zlib.crc32(data) != crc:
            raise CorruptSegment(path, off, "section CRC32 mismatch")
        out.append(data)
        off = start + length
    if len(out) != 6 + len(_NUMERIC):
        raise CorruptSegment(path, off, f"{len(out)} sections, expected {6 + len(_NUMERIC)}")
    return out


def read_header(path: Path) -> dict | None:
    """The JSON header of a snapshot (its first section, CRC-checked), or None if unreadable."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(SNAPSHOT_MAGIC) + _SECTION.size)
            if head[:8] != SNAPSHOT_MAGIC or len(head) < 8 + _SECTION.size:
                return None
            length, crc = _SECTION.unpack_from(head, 8)
            data = fh.read(min(length, 1 << 26))
        if len(data) != length or zlib.crc32(data) != crc:
            return None
        return json.loads(data)
    except (OSError, ValueError):
        return None


def read_snapshot(path: Path) -> State:
    """Load a snapshot; CorruptSegment if any section fails its check."""
    sections = _sections(path, map_file(path))
    try:
        header = json.loads(bytes(sections[0]))
        others = json.loads(bytes(sections[4]))
        ids, text, tags = (bytes(s).decode().split(SEP) for s in sections[1:4])
    except ValueError as exc:
        raise CorruptSegment(path, 8, f"unreadable string section: {exc}") from exc
    n, dim = header["rows"], header["dim"]
    if n == 0:
        ids = text = tags = []
    state = State(dim)
    state.ids, state.text, state.tags = ids, text, tags
    state.rows = dict(zip(ids, range(n), strict=True))
    state.realm, state.source, state.meta = others["realm"], others["source"], others["meta"]
    state.accessed = {int(k): v for k, v in others["accessed"].items()}
    for (name, typecode, _), data in zip(_NUMERIC, sections[5:-1], strict=True):
        if typecode is None:
            setattr(state, name, bytearray(data))
        else:
            column = array(typecode)
            column.frombytes(data)
            setattr(state, name, column)
    if dim:
        vectors = np.frombuffer(sections[-1], dtype="<f4").reshape(n, dim)
        state._vectors = alloc_vectors(max(n, 1024), dim)
        state._vectors[:n] = vectors
    state.covered = {k: int(v) for k, v in header["covered"].items()}
    state.max_hlc = int(header["max_hlc"])
    state.embedder = header.get("embedder")  # absent in snapshots older than the record
    state.alive = int(header["alive"])
    if len(state.ids) != n or len(state.flags) != n:
        raise CorruptSegment(path, 8, f"columns disagree with the header's {n} rows")
    return state
