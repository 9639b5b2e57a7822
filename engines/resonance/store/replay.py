"""Replay of large logs block by block: runs of single ADD entries decoded as columns.

`State.replay` takes entries one at a time (~14 µs each for an ADD in Python: a million
single `remember` entries took ~14 s). Here a run of consecutive ADD entries of one segment is
decoded at once: the 48-byte fixed headers are gathered into one array and read as a numpy
record array; ids, texts and tags are gathered into one NUL-joined buffer per column, which
one UTF-8 decode and one split turn into strings; vectors are copied straight from the
mapped segment into the state's matrix. Every other op, and any run the bulk decoder does
not accept (invalid UTF-8, a NUL inside a text, an id already present or repeated, mixed
dimensions, a short payload), goes through `State.apply` one entry at a time, exactly as
`State.replay` would: the bulk path checks everything before it changes the state, so
falling back never applies an entry twice.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable, Iterator

import numpy as np

from ..errors import ConfigError, ResonanceError
from . import ops
from .recovery import Block
from .state import State

__all__ = ["replay_blocks"]

MIN_RUN = 8  # shorter runs of ADDs are applied one by one (the bulk setup costs ~20 µs)
_FIELDS = ("li", "lt", "lg", "lr", "ls", "lm")
# ops._ADD = "<BBdddIHHIHHHI": kind, flags, created, mu, var, n, dim, then the byte lengths
# of id, text, tags, realm, source, meta. Packed, little-endian, 48 bytes.
_HEAD = np.dtype({
    "names": ["kind", "flags", "created", "mu", "var", "n", "dim", *_FIELDS],
    "formats": ["u1", "u1", "<f8", "<f8", "<f8", "<u4", "<u2", "<u2", "<u4", "<u2", "<u2",
                "<u2", "<u4"],
    "offsets": [0, 1, 2, 10, 18, 26, 30, 32, 34, 38, 40, 42, 44],
    "itemsize": 48,
})
assert _HEAD.itemsize == ops._ADD.size

OnError = Callable[[str, int, int, memoryview, Exception], None]
_ERRORS = (ResonanceError, ValueError, KeyError, UnicodeDecodeError)


def replay_blocks(state: State, blocks: Iterator[Block], on_error: OnError) -> None:
    """Apply blocks of entries in order (the same result as ``state.replay`` of the entries)."""
    covered = state.covered
    for block in blocks:
        is_add = block.op == ops.ADD
        cuts = np.flatnonzero(np.diff(is_add.view(np.int8))) + 1
        starts, stops = [0, *cuts.tolist()], [*cuts.tolist(), len(block)]
        for a, e in zip(starts, stops, strict=True):
            run = block.sub(a, e)
            if is_add[a] and e - a >= MIN_RUN and _bulk_add(state, run):
                continue
            for _, instance, seq, op, payload in run.entries():
                try:
                    state.apply(op, payload)
                except _ERRORS as exc:
                    on_error(instance, seq, op, payload, exc)
        covered[block.instance] = int(block.seq[-1])
        state.max_hlc = max(state.max_hlc, int(block.hlc.max()))


def _column(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray, n: int) -> list[str]:
    from ..kernels.wal import join_fields

    joined = join_fields(buf, starts, lengths, np.uint8(0))
    values = codecs.utf_8_decode(joined, "strict", True)[0].split(ops.SEP) if n else []
    if len(values) != n:
        raise ValueError("a field holds a NUL character")
    return values


def _bulk_add(state: State, run: Block) -> bool:
    """Append a run of ADD entries as columns; False (state untouched) if it cannot."""
    from ..kernels.wal import gather_rows

    try:
        n = len(run)
        buf = np.frombuffer(run.raw, np.uint8)
        if int(run.length.min()) < _HEAD.itemsize:
            return False
        raw_heads = np.empty((n, _HEAD.itemsize), np.uint8)
        gather_rows(buf, run.off, _HEAD.itemsize, raw_heads)
        head = raw_heads.view(_HEAD).reshape(n)
        dim = int(head["dim"][0])
        if dim == 0 or (head["dim"] != dim).any():
            return False
        if state.dim is not None and state.vectors.shape[1] and dim != state.dim:
            return False
        lengths = [head[f].astype(np.int64) for f in _FIELDS]
        starts = [run.off + _HEAD.itemsize]
        for ln in lengths:
            starts.append(starts[-1] + ln)
        if (starts[-1] + 4 * dim > run.off + run.length).any():
            return False  # a short payload: let the one-by-one path report it
        ids, text, tags = (_column(buf, starts[i], lengths[i], n) for i in range(3))
        extra: list[list[str | None]] = []
        for i in (3, 4, 5):
            if lengths[i].any():
                extra.append([v or None for v in _column(buf, starts[i], lengths[i], n)])
            else:
                extra.append([None] * n)
        start = state.n_rows
        new_rows = dict(zip(ids, range(start, start + n), strict=True))
        if len(new_rows) != n or (state.rows and not state.rows.keys().isdisjoint(new_rows)):
            return False  # replayed twice or repeated ids: the first one stands (apply knows)
        numeric = {name: np.ascontiguousarray(head[name]).tobytes()
                   for name in ("kind", "flags", "created", "mu", "var", "n")}
    except _ERRORS:
        return False
    # Nothing above touched the state; from here on nothing can fail for a decoded run.
    try:
        state._reserve(n, dim)
    except ConfigError:
        return False
    target = state._vectors[start : start + n].view(np.uint8)
    gather_rows(buf, starts[-1], 4 * dim, target)
    state.ids.extend(ids)
    state.rows.update(new_rows)
    state.kind.extend(numeric["kind"])
    state.flags.extend(numeric["flags"])
    state.text.extend(text)
    state.tags.extend(tags)
    state.realm.extend(extra[0])
    state.source.extend(extra[1])
    state.meta.extend(extra[2])
    for name in ("created", "mu", "var", "n"):
        getattr(state, name).frombytes(numeric[name])
    state.last_active.frombytes(numeric["created"])
    state.access_count.frombytes(bytes(4 * n))
    state.alive += n
    return True
