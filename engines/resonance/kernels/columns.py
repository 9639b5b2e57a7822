"""A memory State's columns as the kernels read them, in place: their numba types (a State's
array("d") and array("I") columns and its bytearrays: its flags, its kind codes), and the
gather of the scored rows' numeric columns (`resonate.scoring_inputs.Inputs`).

The types are shared by the kernels that take a column (fusion's `drop_deleted`, the phases'
`live_rows`, `gather_columns` here). A column is read in place: a kernel call holds the GIL, so
no writer resizes it meanwhile, and no view of it outlives the call.
"""

from __future__ import annotations

from numba import boolean, float64, int64, njit, types, uint8, uint32

__all__ = ["BYTES", "COUNTS", "DOUBLES", "FLAGS", "gather_columns"]

DOUBLES = types.PyArray(float64, 1, "C")  # a State's array("d") columns
COUNTS = types.PyArray(uint32, 1, "C")  # its array("I") columns
BYTES = types.ByteArray(uint8, 1, "C")  # its bytearray columns
FLAGS = BYTES  # (its flags are one)


@njit(boolean(DOUBLES, COUNTS, COUNTS, DOUBLES, DOUBLES, DOUBLES, BYTES, int64[::1],
              float64[:, ::1], int64[::1]), cache=True)
def gather_columns(created, access_count, n, last_active, mu, var, kind, rows, numbers,
                   kinds) -> bool:  # pragma: no cover - compiled
    """The scored rows' numeric columns into the rows of ``numbers`` (created, access count,
    observations, last active, mu, var, as float64) and their kind codes into ``kinds``;
    False, unfinished, if a row is past a column (a writer between two appends)."""
    for i in range(rows.shape[0]):
        r = rows[i]
        if not (0 <= r < len(created) and r < len(access_count) and r < len(n)
                and r < len(last_active) and r < len(mu) and r < len(var) and r < len(kind)):
            return False
        numbers[0, i] = created[r]
        numbers[1, i] = access_count[r]
        numbers[2, i] = n[r]
        numbers[3, i] = last_active[r]
        numbers[4, i] = mu[r]
        numbers[5, i] = var[r]
        kinds[i] = kind[r]
    return True
