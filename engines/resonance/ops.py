"""Operation codes and their binary payloads, as written to the WAL.

Fixed fields are packed with ``struct``; strings are UTF-8 with their lengths in the fixed
part; embeddings are raw little-endian float32 (``dim * 4`` bytes), never JSON lists, so a
1,536-byte vector costs one memcpy to write and one ``np.frombuffer`` to read. A batch of
memories (``ADD_BATCH``) carries its small fields as one JSON document of columns and its
vectors as one contiguous float32 block.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "ACCESS",
    "ADD",
    "ADD_BATCH",
    "FORGET",
    "OBSERVE",
    "OP_NAMES",
    "REEMBED",
    "Row",
    "decode_access",
    "decode_add",
    "decode_add_batch",
    "decode_add_fields",
    "decode_forget",
    "decode_observe",
    "decode_reembed",
    "encode_access",
    "encode_add",
    "encode_add_batch",
    "encode_forget",
    "encode_observe",
    "encode_reembed",
]

ADD, ADD_BATCH, FORGET, OBSERVE, ACCESS, REEMBED = 1, 2, 3, 4, 5, 6
OP_NAMES = {
    ADD: "add", ADD_BATCH: "add_batch", FORGET: "forget",
    OBSERVE: "observe", ACCESS: "access", REEMBED: "reembed",
}

FLAG_PENDING_EMBED = 1  # the vector is a zero fallback: re-embed later
FLAG_DELETED = 2

# kind, flags, created, mu, var, n, dim, and the byte lengths of id, text, tags, realm,
# source, meta (in that order after the fixed part). Empty realm/source/meta mean None.
_ADD = struct.Struct("<BBdddIHHIHHHI")
_TS = struct.Struct("<d")
_OBSERVE = struct.Struct("<dd")
_BATCH = struct.Struct("<IHI")
_REEMBED = struct.Struct("<HH")
TAG_SEP = "\x1f"  # ASCII unit separator: never typed in a tag


@dataclass(frozen=True, slots=True)
class Row:
    """The fields of one memory as carried by ADD (the vector travels separately)."""

    id: str
    kind: int
    flags: int
    created: float
    mu: float
    var: float
    n: int
    text: str
    tags: tuple[str, ...]
    realm: str | None
    source: str | None
    meta: str | None  # JSON text, decoded only when someone reads it


def encode_add(row: Row, vector: np.ndarray) -> bytes:
    """Payload of ADD: one memory and its float32 vector."""
    id_b, text_b = row.id.encode(), row.text.encode()
    tags_b = TAG_SEP.join(row.tags).encode()
    realm_b, source_b = (row.realm or "").encode(), (row.source or "").encode()
    meta_b = (row.meta or "").encode()
    vec = np.ascontiguousarray(vector, dtype="<f4")
    head = _ADD.pack(
        row.kind, row.flags, row.created, row.mu, row.var, row.n, vec.shape[0],
        len(id_b), len(text_b), len(tags_b), len(realm_b), len(source_b), len(meta_b),
    )
    return b"".join((head, id_b, text_b, tags_b, realm_b, source_b, meta_b, vec.tobytes()))


def decode_add_fields(payload: memoryview) -> tuple[tuple, memoryview]:
    """(fields in ``Row`` order as a plain tuple, raw float32 vector bytes) of an ADD payload.

    A tuple, not a Row: replay decodes millions of these and transposes them into columns.
    """
    kind, flags, created, mu, var, n, dim, li, lt, lg, lr, ls, lm = _ADD.unpack_from(payload)
    p = _ADD.size
    end = p + li + lt + lg + lr + ls + lm
    raw = bytes(payload[p:end])
    q = li + lt
    text = raw[li:q].decode()
    tags = tuple(raw[q : q + lg].decode().split(TAG_SEP)) if lg else ()
    q += lg
    realm = source = meta = None
    if lr | ls | lm:
        realm = raw[q : q + lr].decode() if lr else None
        q += lr
        source = raw[q : q + ls].decode() if ls else None
        q += ls
        meta = raw[q : q + lm].decode() if lm else None
    fields = (raw[:li].decode(), kind, flags, created, mu, var, n, text, tags, realm, source, meta)
    return fields, payload[end : end + dim * 4]


def decode_add(payload: memoryview) -> tuple[Row, memoryview]:
    """(row, raw float32 vector bytes) of an ADD payload."""
    fields, vec = decode_add_fields(payload)
    return Row(*fields), vec


def encode_add_batch(rows: list[Row], vectors: np.ndarray) -> bytes:
    """Payload of ADD_BATCH: many memories as JSON columns plus one float32 block."""
    cols: dict[str, list[Any]] = {
        "id": [r.id for r in rows], "kind": [r.kind for r in rows],
        "flags": [r.flags for r in rows], "created": [r.created for r in rows],
        "mu": [r.mu for r in rows], "var": [r.var for r in rows], "n": [r.n for r in rows],
        "text": [r.text for r in rows], "tags": [list(r.tags) for r in rows],
        "realm": [r.realm for r in rows], "source": [r.source for r in rows],
        "meta": [r.meta for r in rows],
    }
    doc = json.dumps(cols, ensure_ascii=False, separators=(",", ":")).encode()
    block = np.ascontiguousarray(vectors, dtype="<f4")
    return b"".join((_BATCH.pack(len(rows), block.shape[1], len(doc)), doc, block.tobytes()))


def decode_add_batch(payload: memoryview) -> tuple[dict[str, list[Any]], np.ndarray]:
    """(columns, float32 vectors of shape (n, dim)) of an ADD_BATCH payload."""
    n, dim, ldoc = _BATCH.unpack_from(payload)
    p = _BATCH.size
    cols = json.loads(bytes(payload[p : p + ldoc]))
    p += ldoc
    vectors = np.frombuffer(payload[p : p + n * dim * 4], dtype="<f4").reshape(n, dim)
    return cols, vectors


def encode_forget(memory_id: str, ts: float) -> bytes:
    """Payload of FORGET."""
    return _TS.pack(ts) + memory_id.encode()


def decode_forget(payload: memoryview) -> tuple[str, float]:
    """(id, ts) of a FORGET payload."""
    return bytes(payload[_TS.size :]).decode(), _TS.unpack_from(payload)[0]


def encode_observe(memory_id: str, value: float, ts: float) -> bytes:
    """Payload of OBSERVE: one confidence observation (strengthen 1, weaken 0)."""
    return _OBSERVE.pack(ts, value) + memory_id.encode()


def decode_observe(payload: memoryview) -> tuple[str, float, float]:
    """(id, value, ts) of an OBSERVE payload."""
    ts, value = _OBSERVE.unpack_from(payload)
    return bytes(payload[_OBSERVE.size :]).decode(), value, ts


def encode_access(memory_ids: list[str], ts: float) -> bytes:
    """Payload of ACCESS: these memories were read (recalled) at ``ts``."""
    return _TS.pack(ts) + "\n".join(memory_ids).encode()


def decode_access(payload: memoryview) -> tuple[list[str], float]:
    """(ids, ts) of an ACCESS payload."""
    return bytes(payload[_TS.size :]).decode().split("\n"), _TS.unpack_from(payload)[0]


def encode_reembed(memory_id: str, vector: np.ndarray) -> bytes:
    """Payload of REEMBED: a real vector replacing a zero fallback."""
    id_b = memory_id.encode()
    vec = np.ascontiguousarray(vector, dtype="<f4")
    return _REEMBED.pack(vec.shape[0], len(id_b)) + id_b + vec.tobytes()


def decode_reembed(payload: memoryview) -> tuple[str, memoryview]:
    """(id, raw float32 vector bytes) of a REEMBED payload."""
    dim, li = _REEMBED.unpack_from(payload)
    p = _REEMBED.size
    return bytes(payload[p : p + li]).decode(), payload[p + li : p + li + dim * 4]
