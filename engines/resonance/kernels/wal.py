"""Numba kernels of recovery: frame and CRC-check a segment's entries, gather ADD payloads.

Recovery of a log of single ADD entries spent ~14 µs per entry in Python (unpack the header,
slice, crc32, build a tuple, decode, append). These kernels do the per-entry work over the
mapped segment in one call each, without the GIL:

- `frame_entries` walks the entries from an offset (magic, length, bounds, CRC32 over
  everything after the magic) and writes each valid entry's payload offset, length, seq, hlc
  and op into arrays; it stops at the first entry that fails a check (the caller, which knows
  the resync and quarantine rules, takes over there) or when the output arrays are full.
- `crc32` is zlib's CRC-32 (reflected polynomial 0xEDB88320), slicing by 8 bytes.
- `gather_rows` / `join_fields` copy fixed-width blocks (ADD headers, vectors) into a matrix
  and variable-length fields into one NUL-joined buffer, which one C-level decode and split
  turn into a column of strings.

Layout constants mirror `wal.ENTRY_HEADER` ("<2sIQQB", 23 bytes) and its 4-byte CRC trailer.
"""

from __future__ import annotations

import numpy as np
from numba import int64, njit, types, uint8, uint32

__all__ = ["CRC_TABLE", "crc32", "frame_entries", "gather_rows", "join_fields"]

_RO_U8 = types.Array(types.uint8, 1, "C", readonly=True)
_HDR = 23  # magic 2, length 4, seq 8, hlc 8, op 1
_TRAILER = 4


def _crc_table() -> np.ndarray:
    table = np.zeros((8, 256), np.uint32)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0xEDB88320 if c & 1 else c >> 1
        table[0, i] = c
    for i in range(256):
        c = int(table[0, i])
        for k in range(1, 8):
            c = int(table[0, c & 0xFF]) ^ (c >> 8)
            table[k, i] = c
    return table


CRC_TABLE = _crc_table()


@njit(uint32(_RO_U8, int64, int64, uint32[:, ::1]), cache=True, nogil=True)
def crc32(buf, start, end, table):  # pragma: no cover - compiled
    """zlib.crc32(buf[start:end])."""
    crc = np.uint64(0xFFFFFFFF)
    i = start
    while i + 8 <= end:
        one = crc ^ (np.uint64(buf[i]) | (np.uint64(buf[i + 1]) << np.uint64(8))
                     | (np.uint64(buf[i + 2]) << np.uint64(16))
                     | (np.uint64(buf[i + 3]) << np.uint64(24)))
        two = (np.uint64(buf[i + 4]) | (np.uint64(buf[i + 5]) << np.uint64(8))
               | (np.uint64(buf[i + 6]) << np.uint64(16))
               | (np.uint64(buf[i + 7]) << np.uint64(24)))
        crc = np.uint64(
            table[7, one & np.uint64(0xFF)] ^ table[6, (one >> np.uint64(8)) & np.uint64(0xFF)]
            ^ table[5, (one >> np.uint64(16)) & np.uint64(0xFF)]
            ^ table[4, (one >> np.uint64(24)) & np.uint64(0xFF)]
            ^ table[3, two & np.uint64(0xFF)] ^ table[2, (two >> np.uint64(8)) & np.uint64(0xFF)]
            ^ table[1, (two >> np.uint64(16)) & np.uint64(0xFF)]
            ^ table[0, (two >> np.uint64(24)) & np.uint64(0xFF)]
        )
        i += 8
    while i < end:
        crc = np.uint64(table[0, (crc ^ np.uint64(buf[i])) & np.uint64(0xFF)]) ^ (
            crc >> np.uint64(8))
        i += 1
    return np.uint32(crc ^ np.uint64(0xFFFFFFFF))


@njit(cache=True, nogil=True, inline="always")
def _u32(buf, p):  # pragma: no cover - compiled
    return (np.uint64(buf[p]) | (np.uint64(buf[p + 1]) << np.uint64(8))
            | (np.uint64(buf[p + 2]) << np.uint64(16)) | (np.uint64(buf[p + 3]) << np.uint64(24)))


@njit(
    types.UniTuple(int64, 2)(
        _RO_U8, int64, uint32[:, ::1],
        int64[::1], int64[::1], int64[::1], int64[::1], uint8[::1],
    ),
    cache=True,
    nogil=True,
)
def frame_entries(buf, off, table, out_off, out_len, out_seq, out_hlc, out_op):
    # pragma: no cover - compiled
    """Walk valid entries from ``off``; return (entries written, offset where it stopped).

    Stops at the end of the buffer, at the first entry failing a check (bad magic, running
    past the end, CRC mismatch: the caller classifies it), or when the outputs are full.
    ``out_off`` gets each payload's offset (after the 23-byte header).
    """
    n = buf.shape[0]
    cap = out_off.shape[0]
    k = 0
    while off < n and k < cap:
        if n - off < _HDR + _TRAILER or buf[off] != 0xA7 or buf[off + 1] != 0x5E:
            break
        length = np.int64(_u32(buf, off + 2))
        end = off + _HDR + length
        if end + _TRAILER > n:
            break
        if np.uint64(crc32(buf, off + 2, end, table)) != _u32(buf, end):
            break
        seq = _u32(buf, off + 6) | (_u32(buf, off + 10) << np.uint64(32))
        hlc = _u32(buf, off + 14) | (_u32(buf, off + 18) << np.uint64(32))
        out_off[k] = off + _HDR
        out_len[k] = length
        out_seq[k] = np.int64(seq)
        out_hlc[k] = np.int64(hlc)
        out_op[k] = buf[off + 22]
        k += 1
        off = end + _TRAILER
    return k, off


@njit(cache=True, nogil=True)
def gather_rows(buf, starts, width, out):  # pragma: no cover - compiled
    """out[i, :width] = buf[starts[i] : starts[i] + width] (out: a C-contiguous uint8 matrix)."""
    for i in range(starts.shape[0]):
        s = starts[i]
        out[i, :width] = buf[s : s + width]  # a slice copy: vectorised, unlike a byte loop


@njit(cache=True, nogil=True)
def join_fields(buf, starts, lengths, sep):  # pragma: no cover - compiled
    """The fields buf[starts[i] : starts[i] + lengths[i]] joined by the byte ``sep``."""
    n = starts.shape[0]
    if n == 0:
        return np.zeros(0, np.uint8)
    out = np.empty(lengths.sum() + n - 1, np.uint8)
    p = 0
    for i in range(n):
        s, ln = starts[i], lengths[i]
        out[p : p + ln] = buf[s : s + ln]
        p += ln
        if i + 1 < n:
            out[p] = sep
            p += 1
    return out
