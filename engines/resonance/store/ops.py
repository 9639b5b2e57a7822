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

import numpy as np

from ..errors import ConfigError

__all__ = [
    "ACCESS",
    "ADD",
    "ADD_BATCH",
    "FORGET",
    "MODEL",
    "OBSERVE",
    "OP_NAMES",
    "REEMBED",
    "Batch",
    "Row",
    "decode_access",
    "decode_add",
    "decode_add_batch",
    "decode_add_fields",
    "decode_forget",
    "decode_model",
    "decode_observe",
    "decode_reembed",
    "encode_access",
    "encode_add",
    "encode_add_batch",
    "encode_forget",
    "encode_model",
    "encode_observe",
    "encode_reembed",
]

ADD, ADD_BATCH, FORGET, OBSERVE, ACCESS, REEMBED, MODEL = 1, 2, 3, 4, 5, 6, 7
OP_NAMES = {
    ADD: "add", ADD_BATCH: "add_batch", FORGET: "forget",
    OBSERVE: "observe", ACCESS: "access", REEMBED: "reembed", MODEL: "model",
}

FLAG_PENDING_EMBED = 1  # the vector is a zero fallback: re-embed later
FLAG_DELETED = 2

# kind, flags, created, mu, var, n, dim, and the byte lengths of id, text, tags, realm,
# source, meta (in that order after the fixed part). Empty realm/source/meta mean None.
_ADD = struct.Struct("<BBdddIHHIHHHI")
_TS = struct.Struct("<d")
_OBSERVE = struct.Struct("<dd")
_BATCH = struct.Struct("<IHIIII")  # n, dim, byte lengths of ids, text, tags, extra
_REEMBED = struct.Struct("<HH")
TAG_SEP = "\x1f"  # ASCII unit separator: never typed in a tag
SEP = "\x00"  # between the values of a column in ADD_BATCH and snapshots


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
    head = raw[: q + lg].decode()
    if len(head) == q + lg:  # ASCII: one decode, then slices (the usual case, and faster)
        memory_id, text, tags = head[:li], head[li:q], head[q:]
    else:
        memory_id, text = raw[:li].decode(), raw[li:q].decode()
        tags = raw[q : q + lg].decode()  # joined: split only when someone reads them
    q += lg
    realm = source = meta = None
    if lr | ls | lm:
        realm = raw[q : q + lr].decode() if lr else None
        q += lr
        source = raw[q : q + ls].decode() if ls else None
        q += ls
        meta = raw[q : q + lm].decode() if lm else None
    fields = (memory_id, kind, flags, created, mu, var, n, text, tags, realm, source, meta)
    return fields, payload[end : end + dim * 4]


def decode_add(payload: memoryview) -> tuple[Row, memoryview]:
    """(row, raw float32 vector bytes) of an ADD payload."""
    fields, vec = decode_add_fields(payload)
    tags = tuple(fields[8].split(TAG_SEP)) if fields[8] else ()
    return Row(*fields[:8], tags, *fields[9:]), vec


def _joined(values: list[str], what: str) -> bytes:
    if any(SEP in v for v in values):
        raise ConfigError(f"a {what} contains a NUL character, which the log reserves")
    return SEP.join(values).encode()


def encode_add_batch(rows: list[Row], vectors: np.ndarray) -> bytes:
    """Payload of ADD_BATCH: many memories as columns plus one float32 block.

    ids, texts and tags are NUL-joined UTF-8 (one split decodes a column, far faster than
    JSON); realm/source/meta are a JSON document, empty when all are None; the numeric
    columns are raw arrays.
    """
    n = len(rows)
    block = np.ascontiguousarray(vectors, dtype="<f4")
    ids = _joined([r.id for r in rows], "id")
    text = _joined([r.text for r in rows], "text")
    tags = _joined([TAG_SEP.join(r.tags) for r in rows], "tag")
    extra = [r.realm for r in rows], [r.source for r in rows], [r.meta for r in rows]
    extra_b = b"" if not any(any(col) for col in extra) else json.dumps(
        extra, ensure_ascii=False, separators=(",", ":")).encode()
    numeric = b"".join((
        bytes(r.kind for r in rows), bytes(r.flags for r in rows),
        np.array([r.created for r in rows], "<f8").tobytes(),
        np.array([r.mu for r in rows], "<f8").tobytes(),
        np.array([r.var for r in rows], "<f8").tobytes(),
        np.array([r.n for r in rows], "<u4").tobytes(),
    ))
    head = _BATCH.pack(n, block.shape[1], len(ids), len(text), len(tags), len(extra_b))
    return b"".join((head, ids, text, tags, extra_b, numeric, block.tobytes()))


@dataclass(frozen=True, slots=True)
class Batch:
    """The decoded columns of an ADD_BATCH (numeric columns still raw bytes)."""

    ids: list[str]
    text: list[str]
    tags: list[str]  # TAG_SEP-joined per memory
    realm: list[str | None]
    source: list[str | None]
    meta: list[str | None]
    kind: bytes
    flags: bytes
    created: bytes  # <f8
    mu: bytes  # <f8
    var: bytes  # <f8
    n: bytes  # <u4
    vectors: np.ndarray  # (n, dim) float32, a read-only view of the payload


def decode_add_batch(payload: memoryview) -> Batch:
    """The columns of an ADD_BATCH payload."""
    n, dim, li, lt, lg, le = _BATCH.unpack_from(payload)
    p = _BATCH.size
    ids = bytes(payload[p : p + li]).decode().split(SEP) if n else []
    p += li
    text = bytes(payload[p : p + lt]).decode().split(SEP) if n else []
    p += lt
    tags = bytes(payload[p : p + lg]).decode().split(SEP) if n else []
    p += lg
    if le:
        realm, source, meta = json.loads(bytes(payload[p : p + le]))
    else:
        realm = source = meta = [None] * n
    p += le
    cols = []
    for width in (1, 1, 8, 8, 8, 4):
        cols.append(bytes(payload[p : p + n * width]))
        p += n * width
    vectors = np.frombuffer(payload[p : p + n * dim * 4], dtype="<f4").reshape(n, dim)
    if not (len(ids) == len(text) == len(tags) == len(realm) == n):
        raise ValueError(f"ADD_BATCH columns disagree with its count {n}")
    return Batch(ids, text, tags, realm, source, meta, *cols, vectors)


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


def encode_model(record: dict[str, object]) -> bytes:
    """Payload of MODEL: the embedding model the field's vectors come from (name, dim,
    fingerprint), as a JSON object. Readers older than this op skip it."""
    return json.dumps(record, sort_keys=True, separators=(",", ":")).encode()


def decode_model(payload: memoryview) -> dict[str, object]:
    """The record of a MODEL payload."""
    record = json.loads(bytes(payload))
    if not isinstance(record, dict):
        raise ValueError("MODEL payload is not a JSON object")
    return record
