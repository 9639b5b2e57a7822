"""Knowledge-graph snapshots: the whole `GraphState` in one file, so a reopen replays only
the log written after it.

A snapshot is written in the WAL's own segment format (`wal.encode_entry` framing, one
CRC32 per entry) and read back with the store's `scan.scan_segment`, so its damage checks
are the log's. Entries, in order: a JSON header (format, counts, the per-writer seq it
covers, the highest clock), the node keys and display forms and the triplets' predicates
and memories (NUL-joined strings), then the node and edge columns and each triplet's edge
as raw little-endian arrays. Everything else (triplet records, indexes, mention maps,
degrees) is derived from those on load. Written to a temporary name, fsynced, renamed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from .adjacency import EdgeTable
from .errors import CorruptSegment
from .kg_log import list_snapshots
from .kg_state import MEMORY_PREFIX, GraphState, Triplet
from .scan import map_file, scan_segment
from .wal import SEGMENT_MAGIC, encode_entry

__all__ = ["list_snapshots", "read_snapshot", "write_snapshot"]

HEADER, STRINGS, COLUMN = 100, 101, 102  # op codes inside snapshot files only
SEP = "\x00"
_DTYPES = {"src": "<i4", "dst": "<i4", "w": "<f8", "valid_from": "<f8", "invalid_at": "<f8",
           "hebbian": "u1", "last": "<f8", "mention": "u1"}
_STRINGS = ("keys", "display", "predicates", "memories")


def write_snapshot(state: GraphState, covered: dict[str, int], max_hlc: int, snap_dir: Path,
                   instance: str, hlc: int) -> Path:
    """Write `state` to a new snapshot file; return its path."""
    snap_dir.mkdir(parents=True, exist_ok=True)
    n_nodes, n_edges, n_trip = len(state.keys), state.edges.n, len(state.trip)
    trip_edge = np.array([e if t is not None else -1 for t, e in zip(
        state.trip, state.trip_edge, strict=True)], "<i8")
    header = {"format": 1, "nodes": n_nodes, "edges": n_edges, "triplets": n_trip,
              "covered": covered, "max_hlc": max_hlc}
    strings = {
        "keys": state.keys, "display": state.display,
        "predicates": [t.predicate if t is not None else "" for t in state.trip],
        "memories": [t.memory or "" if t is not None else "" for t in state.trip],
    }
    entries: list[tuple[int, bytes]] = [(HEADER, json.dumps(header).encode())]
    entries.extend((STRINGS, SEP.join(strings[name]).encode()) for name in _STRINGS)
    entries.append((COLUMN, np.ascontiguousarray(state.entity[:n_nodes], "u1").tobytes()))
    for name in EdgeTable.COLS:
        col = getattr(state.edges, name)[:n_edges]
        entries.append((COLUMN, np.ascontiguousarray(col, _DTYPES[name]).tobytes()))
    entries.append((COLUMN, trip_edge.tobytes()))
    path = snap_dir / f"snap_{hlc:020d}_{instance}.snap"
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(SEGMENT_MAGIC)
        for seq, (op, payload) in enumerate(entries, 1):
            fh.write(encode_entry(seq, hlc, op, payload))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fd = os.open(snap_dir, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return path


def read_snapshot(path: Path, half_life: float, floor: float,
                  ) -> tuple[GraphState, dict[str, int], int]:
    """(state, covered, max_hlc) from a snapshot; CorruptSegment if any check fails."""
    scan = scan_segment(path, map_file(path))
    if scan.damaged:
        start, _, reason = scan.damaged[0]
        raise CorruptSegment(path, start, reason)
    entries = scan.entries
    expect = 1 + len(_STRINGS) + 1 + len(EdgeTable.COLS) + 1
    if len(entries) != expect:
        raise CorruptSegment(path, 8, f"{len(entries)} entries, expected {expect}")
    try:
        header = json.loads(bytes(entries[0][3]))
        strings = {name: bytes(entries[1 + i][3]).decode().split(SEP)
                   for i, name in enumerate(_STRINGS)}
        cols = [np.frombuffer(e[3], dtype) for e, dtype in zip(
            entries[5:], ["u1", *(_DTYPES[c] for c in EdgeTable.COLS), "<i8"], strict=True)]
        state = _restore(GraphState(half_life, floor), header, strings, cols)
    except (ValueError, KeyError, IndexError) as exc:
        raise CorruptSegment(path, 8, f"snapshot does not decode: {exc}") from exc
    return state, {k: int(v) for k, v in header["covered"].items()}, int(header["max_hlc"])


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
    for name, col in zip(EdgeTable.COLS, cols[1:-1], strict=True):
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
    trip_edge = cols[-1]
    preds, mems = strings["predicates"], strings["memories"]
    if len(trip_edge) != n_trip or len(preds) != n_trip or len(mems) != n_trip:
        raise ValueError(f"triplet columns disagree with the header's {n_trip} triplets")
    st.trip, st.trip_edge = [None] * n_trip, [-1] * n_trip
    for tid in range(1, n_trip):
        e = int(trip_edge[tid])
        if e < 0:
            continue
        s, o = int(src[e]), int(dst[e])
        inv = float(edges.invalid_at[e])
        t = Triplet(tid, display[s], preds[tid], display[o], float(edges.w[e]),
                    float(edges.valid_from[e]), None if inv == np.inf else inv,
                    mems[tid] or None)
        st.trip[tid], st.trip_edge[tid] = t, e
        if edges.hebbian[e]:
            st.hebbian_ids.add(tid)
        if t.invalidated_at is None:
            st.live[(keys[s], t.predicate, keys[o])] = tid
        st.by_node.setdefault(s, []).append(tid)
        if o != s:
            st.by_node.setdefault(o, []).append(tid)
        st.by_pred.setdefault(t.predicate, []).append(tid)
    return st
