"""Knowledge-graph snapshots: the whole `GraphState` in one file, so a reopen replays only
the log written after it.

A snapshot is written in the WAL's own segment format (`wal.encode_entry` framing, one
CRC32 per entry) and read back with the store's `scan.scan_segment`, so its damage checks
are the log's. Entries, in order: a JSON header (format, counts, the per-writer seq it
covers, the highest clock, merged ids' aliases), the node keys and display forms and the
triplets' predicates and memories (NUL-joined strings), then the node and edge columns, each
triplet's id and edge, and the retired (dropped Hebbian) ids as raw little-endian arrays.
Format 1 (ids 1..n, the triplet's id its position) is still read. Everything else (triplet records, indexes, mention maps,
degrees) is derived from those on load. Written to a temporary name, fsynced, renamed.
"""

from __future__ import annotations

import json
import os
import zlib
from pathlib import Path

import numpy as np

from ..errors import CorruptSegment
from ..store.scan import map_file, scan_segment
from ..store.wal import ENTRY_HEADER, ENTRY_MAGIC, SEGMENT_MAGIC, encode_entry, fsync_dir
from .adjacency import EdgeTable
from .kg_log import Apply, list_snapshots
from .kg_state import MEMORY_PREFIX, GraphState, Triplet

__all__ = [
    "SnapshotLoader", "list_snapshots", "read_covered", "read_snapshot", "verified_covered",
    "write_snapshot",
]

HEADER, STRINGS, COLUMN = 100, 101, 102  # op codes inside snapshot files only
SEP = "\x00"
_DTYPES = {"src": "<i4", "dst": "<i4", "w": "<f8", "valid_from": "<f8", "invalid_at": "<f8",
           "hebbian": "u1", "last": "<f8", "mention": "u1"}
_STRINGS = ("keys", "display", "predicates", "memories")


def write_snapshot(state: GraphState, covered: dict[str, int], max_hlc: int, snap_dir: Path,
                   instance: str, hlc: int) -> Path:
    """Write `state` to a new snapshot file; return its path."""
    snap_dir.mkdir(parents=True, exist_ok=True)
    n_nodes, n_edges = len(state.keys), state.edges.n
    trips = list(state.trip.values())  # creation order, kept by the reload
    ids = np.array([t.id for t in trips], "<i8")
    trip_edge = np.array([state.trip_edge[t.id] for t in trips], "<i8")
    header = {"format": 2, "nodes": n_nodes, "edges": n_edges, "triplets": len(trips),
              "covered": covered, "max_hlc": max_hlc,
              "aliases": [[a, b] for a, b in state.alias.items()]}
    strings = {
        "keys": state.keys, "display": state.display,
        "predicates": [t.predicate for t in trips],
        "memories": [t.memory or "" for t in trips],
    }
    entries: list[tuple[int, bytes]] = [(HEADER, json.dumps(header).encode())]
    entries.extend((STRINGS, SEP.join(strings[name]).encode()) for name in _STRINGS)
    entries.append((COLUMN, np.ascontiguousarray(state.entity[:n_nodes], "u1").tobytes()))
    for name in EdgeTable.COLS:
        col = getattr(state.edges, name)[:n_edges]
        entries.append((COLUMN, np.ascontiguousarray(col, _DTYPES[name]).tobytes()))
    entries.append((COLUMN, ids.tobytes()))
    entries.append((COLUMN, trip_edge.tobytes()))
    entries.append((COLUMN, np.array(sorted(state.retired), "<i8").tobytes()))
    path = snap_dir / f"snap_{hlc:020d}_{instance}.snap"
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(SEGMENT_MAGIC)
        for seq, (op, payload) in enumerate(entries, 1):
            fh.write(encode_entry(seq, hlc, op, payload))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fsync_dir(snap_dir)
    return path


def read_snapshot(path: Path, half_life: float, floor: float,
                  ) -> tuple[GraphState, dict[str, int], int]:
    """(state, covered, max_hlc) from a snapshot; CorruptSegment if any check fails."""
    scan = scan_segment(path, map_file(path))
    if scan.damaged:
        start, _, reason = scan.damaged[0]
        raise CorruptSegment(path, start, reason)
    entries = scan.entries
    try:
        header = json.loads(bytes(entries[0][3])) if entries else {}
        fmt = header.get("format", 1)
        tail = ["<i8"] if fmt == 1 else ["<i8", "<i8", "<i8"]  # (ids,) trip_edge, (retired)
        expect = 1 + len(_STRINGS) + 1 + len(EdgeTable.COLS) + len(tail)
        if len(entries) != expect:
            raise CorruptSegment(path, 8, f"{len(entries)} entries, expected {expect}")
        strings = {name: bytes(entries[1 + i][3]).decode().split(SEP)
                   for i, name in enumerate(_STRINGS)}
        cols = [np.frombuffer(e[3], dtype) for e, dtype in zip(
            entries[5:], ["u1", *(_DTYPES[c] for c in EdgeTable.COLS), *tail], strict=True)]
        if fmt == 1:  # a triplet's id was its position; id 0 never used
            cols = [*cols[:-1], np.arange(len(cols[-1]), dtype="<i8"), cols[-1],
                    np.zeros(0, "<i8")]
        state = _restore(GraphState(half_life, floor), header, strings, cols)
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        raise CorruptSegment(path, 8, f"snapshot does not decode: {exc}") from exc
    return state, {k: int(v) for k, v in header["covered"].items()}, int(header["max_hlc"])


def verified_covered(path: Path) -> dict[str, int]:
    """What a snapshot covers, after checking every entry's CRC (CorruptSegment if one
    fails): `soul memory check` reads graph snapshots with it."""
    scan = scan_segment(path, map_file(path))
    if scan.damaged:
        start, _, reason = scan.damaged[0]
        raise CorruptSegment(path, start, reason)
    if not scan.entries:
        raise CorruptSegment(path, 0, "no entries")
    header = json.loads(bytes(scan.entries[0][3]))
    return {k: int(v) for k, v in header["covered"].items()}


def read_covered(path: Path) -> dict[str, int] | None:
    """What a snapshot covers (writer instance -> last seq), from its first entry alone
    (CRC-checked); None if that cannot be read."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(SEGMENT_MAGIC) + ENTRY_HEADER.size)
            if len(head) < len(SEGMENT_MAGIC) + ENTRY_HEADER.size or not head.startswith(
                    SEGMENT_MAGIC):
                return None
            magic, length, _, _, _ = ENTRY_HEADER.unpack_from(head, len(SEGMENT_MAGIC))
            body = fh.read(length + 4)
        if magic != ENTRY_MAGIC or len(body) != length + 4:
            return None
        crc = zlib.crc32(body[:length], zlib.crc32(head[len(SEGMENT_MAGIC) + 2 :]))
        if crc != int.from_bytes(body[length:], "little"):
            return None
        return {k: int(v) for k, v in json.loads(body[:length])["covered"].items()}
    except (OSError, ValueError, KeyError, AttributeError):
        return None


def _restore(st: GraphState, header: dict, strings: dict[str, list[str]],
             cols: list[np.ndarray]) -> GraphState:
    n, m, n_trip = header["nodes"], header["edges"], header["triplets"]
    keys = strings["keys"] if n else []
    display = strings["display"] if n else []
    if len(keys) != n or len(display) != n or len(cols[0]) != n:
        raise ValueError(f"node columns disagree with the header's {n} nodes")
    st.keys, st.display = keys, display
    st.index = {k: i for i, k in enumerate(keys)}
    cap = max(1024, n)
    st.degree = np.zeros(cap, np.int32)
    st.entity = np.zeros(cap, np.uint8)
    st.entity[:n] = cols[0]
    edges = EdgeTable(max(1024, m))
    for name, col in zip(EdgeTable.COLS, cols[1:-3], strict=True):
        if len(col) != m:
            raise ValueError(f"edge column {name} has {len(col)} rows, expected {m}")
        getattr(edges, name)[:m] = col
    edges.n = m
    st.edges = edges
    live = np.isinf(edges.invalid_at[:m])
    src, dst = edges.src[:m], edges.dst[:m]
    st.degree[:n] += np.bincount(src[live], minlength=n).astype(np.int32)
    st.degree[:n] += np.bincount(dst[live & (src != dst)], minlength=n).astype(np.int32)
    # Mentions: live mention edges in edge order, the order they were made in.
    mention = edges.mention[:m].astype(bool) & live
    st.n_mention_edges = int(mention.sum())
    cut = len(MEMORY_PREFIX)
    for e, (a, b) in zip(np.flatnonzero(mention).tolist(),
                         zip(src[mention].tolist(), dst[mention].tolist(), strict=True),
                         strict=True):
        mid = keys[a][cut:]
        st.mentions.setdefault(mid, {})[b] = e
        st.memories.setdefault(b, []).append(mid)
    ids, trip_edge, retired = cols[-3], cols[-2], cols[-1]
    preds, mems = strings["predicates"], strings["memories"]
    n_trip = header["triplets"]
    if not n_trip:
        preds, mems = [], []
    if len(ids) != n_trip or len(trip_edge) != n_trip or len(preds) != n_trip or len(
            mems) != n_trip:
        raise ValueError(f"triplet columns disagree with the header's {n_trip} triplets")
    st.trip, st.trip_edge = {}, {}
    for tid, e, pred, mem in zip(ids.tolist(), trip_edge.tolist(), preds, mems, strict=True):
        if e < 0:
            continue
        s, o = int(src[e]), int(dst[e])
        inv = float(edges.invalid_at[e])
        t = Triplet(tid, display[s], pred, display[o], float(edges.w[e]),
                    float(edges.valid_from[e]), None if inv == np.inf else inv, mem or None)
        st.trip[tid], st.trip_edge[tid] = t, e
        if edges.hebbian[e]:
            st.hebbian_ids.add(tid)
        if t.invalidated_at is None:
            st.live[(keys[s], t.predicate, keys[o])] = tid
        st.by_node.setdefault(s, []).append(tid)
        if o != s:
            st.by_node.setdefault(o, []).append(tid)
        st.by_pred.setdefault(t.predicate, []).append(tid)
    st.alias = {int(a): int(b) for a, b in header.get("aliases", [])}
    st.retired = set(retired.tolist())
    return st


class SnapshotLoader:
    """Recovery's snapshot loader: the state recovery builds starts as `state`, or as the
    snapshot's, and the log's entries after it are applied to that one."""

    def __init__(self, state: GraphState, half_life: float, floor: float) -> None:
        self.state, self.half_life, self.floor = state, half_life, floor

    def __call__(self, snap: Path) -> tuple[Apply, dict[str, int], int]:
        self.state, covered, max_hlc = read_snapshot(snap, self.half_life, self.floor)
        return self.state.apply, covered, max_hlc
