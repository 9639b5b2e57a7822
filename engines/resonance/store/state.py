"""The store's in-memory state: columns of memories, and how each WAL op changes them.

Columns, not one object per memory: replaying a million entries appends to a dozen arrays
instead of building a million objects, and vectors live in one float32 matrix that the
indexes read directly. A row number is stable for the life of the state; forgetting a memory
leaves a tombstone row (content and vector cleared) so indexes keyed by row stay valid.
"""

from __future__ import annotations

import json
import mmap
from array import array
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ..errors import ConfigError, ResonanceError, UnknownMemory
from ..memory import Confidence, Kind, Memory
from . import ops

__all__ = ["ACCESS_HISTORY", "State"]

ACCESS_HISTORY = 16  # access times kept per memory (the count is kept in full)
_SCALARS = frozenset((str, int, float, bool, type(None)))
_METAS_KEPT = 65_536
_POPULATE_BYTES = 32 << 20


def alloc_vectors(rows: int, dim: int) -> np.ndarray:
    """An uninitialised (rows, dim) float32 matrix.

    Large ones come from an anonymous mmap with MAP_POPULATE: the kernel maps every page in one
    call, where first-touch faults (one per 4 KiB page, on a VM) cost 2–3 s per 1.5 GB and
    dominated recovery.
    """
    nbytes = rows * dim * 4
    flag = getattr(mmap, "MAP_POPULATE", 0)
    if nbytes < _POPULATE_BYTES or not flag:
        return np.empty((rows, dim), dtype=np.float32)
    buf = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | flag)
    return np.frombuffer(buf, dtype=np.float32).reshape(rows, dim)


class State:
    """Every memory of a field as columns, plus what of the log has been applied."""

    def __init__(self, dim: int | None = None) -> None:
        self.dim = dim
        self.ids: list[str] = []
        self.rows: dict[str, int] = {}
        self.kind = bytearray()
        self.flags = bytearray()
        self.text: list[str] = []
        self.tags: list[str] = []  # TAG_SEP-joined: split only when read
        self.realm: list[str | None] = []
        self.source: list[str | None] = []
        self.meta: list[str | None] = []
        self.created = array("d")
        self.last_active = array("d")
        self.mu = array("d")
        self.var = array("d")
        self.n = array("I")
        self.access_count = array("I")
        self.accessed: dict[int, list[float]] = {}
        self._metas: dict[int, tuple[str, dict[str, Any]]] = {}  # row -> its flat meta, decoded
        self._vectors = np.zeros((0, dim or 0), dtype=np.float32)
        self.covered: dict[str, int] = {}  # writer instance -> last seq applied
        # The embedding model the vectors come from (MODEL entries, the snapshot header);
        # None for a field written before fields recorded it, or never embedded into.
        self.embedder: dict[str, object] | None = None
        self.max_hlc = 0
        self.alive = 0
        # Bytes of log about to be replayed: an upper bound on the vectors to come, so the
        # matrix is allocated once instead of grown (and copied) a dozen times.
        self.size_hint_bytes = 0

    # -- reading ---------------------------------------------------------------------------

    def __len__(self) -> int:
        return self.alive

    @property
    def n_rows(self) -> int:
        """Rows, tombstones included (row numbers run 0 .. n_rows-1)."""
        return len(self.ids)

    @property
    def vectors(self) -> np.ndarray:
        """The (n_rows, dim) float32 matrix (a view: copy it before keeping it)."""
        return self._vectors[: len(self.ids)]

    def is_alive(self, row: int) -> bool:
        """False for a forgotten memory's tombstone."""
        return not self.flags[row] & ops.FLAG_DELETED

    def flags_of(self, rows: np.ndarray) -> np.ndarray:
        """The flags of ``rows`` (uint8), read byte by byte. Not through a numpy view of
        ``flags``: a writer appending rows meanwhile (queries do not wait for writes) could
        not resize a bytearray whose buffer a view holds (BufferError)."""
        return np.fromiter(map(self.flags.__getitem__, rows.tolist()), np.uint8, rows.shape[0])

    def row_of(self, memory_id: str) -> int:
        """Row of a live memory; UnknownMemory if it does not exist or was forgotten."""
        row = self.rows.get(memory_id)
        if row is None or self.flags[row] & ops.FLAG_DELETED:
            raise UnknownMemory(memory_id)
        return row

    def tags_at(self, row: int) -> tuple[str, ...]:
        """The tags of a row."""
        joined = self.tags[row]
        return tuple(joined.split(ops.TAG_SEP)) if joined else ()

    def meta_at(self, row: int) -> dict[str, Any]:
        """The meta dict of a row (JSON decoded on demand; a fresh dict each call)."""
        raw = self.meta[row]
        if not raw:
            return {}
        # Every recalled hit reads its row's meta: a flat one (scalar values, the usual
        # session, valence, status...) is decoded once and copied, a copy being a whole one.
        # Kept with the text it came from: a row's text is never replaced but by forget's None.
        kept = self._metas.get(row)
        if kept is not None and kept[0] is raw:
            return kept[1].copy()
        value = json.loads(raw)
        if type(value) is dict and all(type(v) in _SCALARS for v in value.values()):
            if len(self._metas) >= _METAS_KEPT:
                self._metas.clear()
            self._metas[row] = (raw, value)
            return value.copy()
        return value

    def memory(self, row: int) -> Memory:
        """A read-only Memory for a row."""
        return Memory(
            id=self.ids[row],
            kind=Kind(self.kind[row]),
            content=self.text[row],
            embedding=self._vectors[row].copy(),
            tags=self.tags_at(row),
            realm=self.realm[row],
            source=self.source[row],
            created=self.created[row],
            accessed=tuple(self.accessed.get(row, ())),
            access_count=self.access_count[row],
            last_active=self.last_active[row],
            confidence=Confidence(self.mu[row], self.var[row], self.n[row]),
            meta=self.meta_at(row),
            pending_embedding=bool(self.flags[row] & ops.FLAG_PENDING_EMBED),
        )

    def pending_rows(self) -> list[int]:
        """Live rows whose vector is a zero fallback."""
        pend, dead = ops.FLAG_PENDING_EMBED, ops.FLAG_DELETED
        return [r for r, f in enumerate(self.flags) if f & pend and not f & dead]

    # -- applying --------------------------------------------------------------------------

    def _reserve(self, extra: int, dim: int) -> None:
        hint = self.size_hint_bytes // (4 * dim) + 1 if dim else 0
        if self.dim is None or self._vectors.shape[1] == 0:
            self.dim = dim
            self._vectors = alloc_vectors(max(1024, extra, hint), dim)
        elif dim != self.dim:
            raise ConfigError(f"vector of dimension {dim}; this field holds {self.dim}-d vectors")
        need = len(self.ids) + extra
        if need > self._vectors.shape[0]:
            size = max(need, 2 * self._vectors.shape[0], len(self.ids) + hint)
            grown = alloc_vectors(size, dim)
            grown[: len(self.ids)] = self._vectors[: len(self.ids)]
            self._vectors = grown

    def apply(self, op: int, payload: memoryview) -> None:
        """Apply one WAL entry's operation."""
        if op == ops.ADD:
            fields, vec = ops.decode_add_fields(payload)
            if fields[0] not in self.rows:  # replayed twice: the first one stands
                self._flush_adds_unique([fields], [vec])
        elif op == ops.ADD_BATCH:
            self.apply_batch(ops.decode_add_batch(payload))
        elif op == ops.OBSERVE:
            memory_id, value, ts = ops.decode_observe(payload)
            if (row_ := self.rows.get(memory_id)) is not None:
                c = Confidence(self.mu[row_], self.var[row_], self.n[row_]).observe(value)
                self.mu[row_], self.var[row_], self.n[row_] = c.mu, c.var, c.n
                self.last_active[row_] = max(self.last_active[row_], ts)
        elif op == ops.ACCESS:
            memory_ids, ts = ops.decode_access(payload)
            for memory_id in memory_ids:
                if (row_ := self.rows.get(memory_id)) is not None:
                    self._touch(row_, ts)
        elif op == ops.FORGET:
            memory_id, _ = ops.decode_forget(payload)
            if (row_ := self.rows.get(memory_id)) is not None and self.is_alive(row_):
                self._tombstone(row_)
        elif op == ops.REEMBED:
            memory_id, vec = ops.decode_reembed(payload)
            if (row_ := self.rows.get(memory_id)) is not None and self.is_alive(row_):
                self._vectors[row_] = np.frombuffer(vec, dtype="<f4")
                self.flags[row_] &= ~ops.FLAG_PENDING_EMBED
        elif op == ops.MODEL:
            self.embedder = ops.decode_model(payload)
        # Unknown ops come from a newer version: skipping keeps old readers working.

    def apply_batch(self, batch: ops.Batch) -> None:
        """Append the memories of an ADD_BATCH (ids already present are skipped)."""
        # A batch applied twice has all its ids present already; checking its ends is enough
        # (new ids are 64 random bits) and keeps this off the profile of a million-row replay.
        if batch.ids and (batch.ids[0] in self.rows or batch.ids[-1] in self.rows):
            keep = [i for i, mid in enumerate(batch.ids) if mid not in self.rows]
            for i in keep:
                self._flush_adds_unique([self._batch_row(batch, i)],
                                        [memoryview(batch.vectors[i].tobytes())])
            return
        n = len(batch.ids)
        if not n:
            return
        self._reserve(n, batch.vectors.shape[1])
        start = len(self.ids)
        self._vectors[start : start + n] = batch.vectors
        self.ids.extend(batch.ids)
        self.rows.update(zip(batch.ids, range(start, start + n), strict=True))
        self.kind.extend(batch.kind)
        self.flags.extend(batch.flags)
        self.text.extend(batch.text)
        self.tags.extend(batch.tags)
        self.realm.extend(batch.realm)
        self.source.extend(batch.source)
        self.meta.extend(batch.meta)
        # Raw little-endian columns straight into the arrays (this runs on x86/ARM LE).
        for name in ("created", "mu", "var", "n"):
            getattr(self, name).frombytes(getattr(batch, name))
        self.last_active.frombytes(batch.created)
        self.access_count.frombytes(bytes(4 * n))
        self.alive += n

    @staticmethod
    def _batch_row(b: ops.Batch, i: int) -> tuple:
        created, mu, var = (np.frombuffer(c, "<f8")[i] for c in (b.created, b.mu, b.var))
        return (b.ids[i], b.kind[i], b.flags[i], float(created), float(mu), float(var),
                int(np.frombuffer(b.n, "<u4")[i]), b.text[i], b.tags[i], b.realm[i],
                b.source[i], b.meta[i])

    def _extend(self, ids: list[str], kind: list[int], flags: list[int], created: list[float],
                mu: list[float], var: list[float], n: list[int], text: list[str],
                tags: list[str], realm: list[str | None],
                source: list[str | None], meta: list[str | None]) -> None:
        # Column-wise extends run in C: this is what makes replaying batches cheap.
        start = len(self.ids)
        self.ids.extend(ids)
        self.rows.update(zip(ids, range(start, start + len(ids)), strict=True))
        self.kind.extend(kind)
        self.flags.extend(flags)
        self.text.extend(text)
        self.tags.extend(tags)
        self.realm.extend(realm)
        self.source.extend(source)
        self.meta.extend(meta)
        self.created.extend(created)
        self.last_active.extend(created)
        self.mu.extend(mu)
        self.var.extend(var)
        self.n.extend(n)
        self.access_count.extend([0] * len(ids))
        self.alive += len(ids)

    def replay(self, entries: Iterator[tuple[int, str, int, int, memoryview]],
               on_error: Callable[[str, int, int, memoryview, Exception], None]) -> None:
        """Apply entries in order; runs of ADDs are decoded into columns and appended at once."""
        pending: list[tuple] = []
        vecs: list[memoryview] = []
        decode, add_op = ops.decode_add_fields, ops.ADD
        covered, max_hlc = self.covered, self.max_hlc
        for hlc, instance, seq, op, payload in entries:
            try:
                if op == add_op:
                    fields, vec = decode(payload)
                    pending.append(fields)
                    vecs.append(vec)
                    if len(pending) >= 8192:
                        self._flush_adds(pending, vecs)
                else:
                    if pending:
                        self._flush_adds(pending, vecs)
                    self.apply(op, payload)
            except (ResonanceError, ValueError, KeyError, UnicodeDecodeError) as exc:
                on_error(instance, seq, op, payload, exc)
            # mark_applied, inlined: a writer's entries arrive in increasing seq
            covered[instance] = seq
            if hlc > max_hlc:
                max_hlc = hlc
        if pending:
            self._flush_adds(pending, vecs)
        self.max_hlc = max_hlc

    def _flush_adds(self, pending: list[tuple], vecs: list[memoryview]) -> None:
        rows = self.rows
        if len({f[0] for f in pending}) != len(pending) or any(f[0] in rows for f in pending):
            for fields, vec in zip(pending, vecs, strict=True):  # rare: duplicates in the run
                if fields[0] not in rows:
                    self._flush_adds_unique([fields], [vec])
        else:
            self._flush_adds_unique(pending, vecs)
        pending.clear()
        vecs.clear()

    def _flush_adds_unique(self, pending: list[tuple], vecs: list[memoryview]) -> None:
        dims = {len(v) for v in vecs}
        if len(dims) != 1:
            raise ConfigError(f"vectors of several sizes in one run: {sorted(dims)} bytes")
        dim = dims.pop() // 4
        self._reserve(len(pending), dim)
        start = len(self.ids)
        block = np.frombuffer(b"".join(vecs), dtype="<f4").reshape(len(vecs), dim)
        self._vectors[start : start + len(vecs)] = block
        self._extend(*(list(col) for col in zip(*pending, strict=True)))

    def _touch(self, row: int, ts: float) -> None:
        history = self.accessed.setdefault(row, [])
        history.append(ts)
        if len(history) > ACCESS_HISTORY:
            del history[0]
        # counted last: a reader that sees the new count finds the new time in the history
        # (scoring_cache.AccessHistories reads a row's times again when its count moved)
        self.access_count[row] += 1
        if ts > self.last_active[row]:
            self.last_active[row] = ts

    def _tombstone(self, row: int) -> None:
        # Forgetting clears content and vector too: a forgotten memory must not be readable
        # from the next snapshot.
        self.flags[row] = ops.FLAG_DELETED
        self.text[row] = ""
        self.tags[row] = ""
        self.meta[row] = None
        self._metas.pop(row, None)
        self.realm[row] = self.source[row] = None
        self._vectors[row] = 0.0
        self.accessed.pop(row, None)
        self.alive -= 1

    def mark_applied(self, instance: str, seq: int, hlc: int) -> None:
        """Record that ``instance``'s entries up to ``seq`` are in this state."""
        if seq > self.covered.get(instance, 0):
            self.covered[instance] = seq
        if hlc > self.max_hlc:
            self.max_hlc = hlc
