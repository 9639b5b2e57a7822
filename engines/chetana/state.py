"""Readers for restoring a serialized Chetana state: each checks one value's type and range
and names its path on failure, so a corrupt session says where it is corrupt."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .errors import StateError

__all__ = [
    "MISSING",
    "check_bool",
    "check_float",
    "check_int",
    "check_map",
    "check_str",
    "read_bool",
    "read_float",
    "read_int",
    "read_list",
    "read_map",
    "read_str",
]

#: Sentinel default meaning "the key is required".
MISSING: Any = object()


# The checks below take a fast path for the exact types JSON gives (dict, float, int): a
# restored state holds hundreds of values, read every turn, and an isinstance against an ABC
# or a union costs several times a type comparison. Other types take the full checks.


def _get(data: Mapping[str, Any], key: str, path: str, default: Any) -> Any:
    if type(data) is not dict and not isinstance(data, Mapping):
        raise StateError(f"{path} must be an object, got {type(data).__name__}")
    if key in data:
        return data[key]
    if default is MISSING:
        raise StateError(f"{path}.{key} is missing")
    return default


def check_map(value: Any, where: str) -> Mapping[str, Any]:
    """A JSON object."""
    if type(value) is not dict and not isinstance(value, Mapping):
        raise StateError(f"{where} must be an object, got {type(value).__name__}")
    return value


def check_bool(value: Any, where: str) -> bool:
    """A boolean."""
    if not isinstance(value, bool):
        raise StateError(f"{where} must be true or false, got {value!r}")
    return value


def check_str(value: Any, where: str) -> str:
    """A string."""
    if not isinstance(value, str):
        raise StateError(f"{where} must be a string, got {value!r}")
    return value


def read_map(data: Mapping[str, Any], key: str, path: str, default: Any = MISSING) -> Any:
    """A JSON object (or `default` when absent and a default is given)."""
    value = _get(data, key, path, default)
    if value is not default and not isinstance(value, Mapping):
        raise StateError(f"{path}.{key} must be an object, got {type(value).__name__}")
    return value


def read_list(data: Mapping[str, Any], key: str, path: str, default: Any = MISSING) -> Any:
    """A JSON array (a tuple is accepted too: states built in Python may hold them)."""
    value = _get(data, key, path, default)
    if value is not default and not isinstance(value, list | tuple):
        raise StateError(f"{path}.{key} must be a list, got {type(value).__name__}")
    return value


def check_float(value: Any, where: str, lo: float, hi: float) -> float:
    """A finite number, clamped into [lo, hi]."""
    if type(value) is float:
        number = value
    elif isinstance(value, bool) or not isinstance(value, int | float):
        raise StateError(f"{where} must be a number, got {value!r}")
    else:
        number = float(value)
    if not math.isfinite(number):
        raise StateError(f"{where} must be finite, got {value!r}")
    return min(hi, max(lo, number))


def plain_floats(values: Any, lo: float, hi: float) -> bool:
    """Whether `values` is a JSON array of floats, each finite and inside [lo, hi]: what
    `check_float` would return unchanged. Checked in a few C-level passes (a restored state
    holds long arrays of them, read every turn)."""
    if type(values) is not list or not values or set(map(type, values)) != _FLOAT_ONLY:
        return False
    try:
        total = math.fsum(values)  # NaN or an infinity make it non-finite (or raise)
    except (OverflowError, ValueError):
        return False
    return math.isfinite(total) and min(values) >= lo and max(values) <= hi


_FLOAT_ONLY = {float}


def check_floats(values: Any, where: str, lo: float, hi: float) -> list[float]:
    """Each number of a JSON array as `check_float` reads it (`where` names the items)."""
    if plain_floats(values, lo, hi):
        return list(values)
    return [check_float(value, where, lo, hi) for value in values]


def read_float(
    data: Mapping[str, Any], key: str, path: str, lo: float, hi: float, default: Any = MISSING
) -> float:
    """A finite number, clamped into [lo, hi]."""
    return check_float(_get(data, key, path, default), f"{path}.{key}", lo, hi)


def check_int(value: Any, where: str, lo: int = 0) -> int:
    """A whole number >= lo."""
    if type(value) is not int and (isinstance(value, bool) or not isinstance(value, int)):
        raise StateError(f"{where} must be a whole number, got {value!r}")
    if value < lo:
        raise StateError(f"{where} must be at least {lo}, got {value}")
    return value


def read_int(
    data: Mapping[str, Any], key: str, path: str, lo: int = 0, default: Any = MISSING
) -> int:
    """A whole number >= lo."""
    return check_int(_get(data, key, path, default), f"{path}.{key}", lo)


def read_bool(data: Mapping[str, Any], key: str, path: str, default: Any = MISSING) -> bool:
    """A boolean."""
    value = _get(data, key, path, default)
    if not isinstance(value, bool):
        raise StateError(f"{path}.{key} must be true or false, got {value!r}")
    return value


def read_str(
    data: Mapping[str, Any],
    key: str,
    path: str,
    choices: tuple[str, ...] | None = None,
    default: Any = MISSING,
) -> str:
    """A string, optionally one of `choices`."""
    value = _get(data, key, path, default)
    if not isinstance(value, str):
        raise StateError(f"{path}.{key} must be a string, got {value!r}")
    if choices is not None and value not in choices:
        raise StateError(f"{path}.{key} must be one of {', '.join(choices)}; got {value!r}")
    return value
