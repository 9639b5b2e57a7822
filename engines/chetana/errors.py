"""Chetana's exceptions: one tree, so callers can catch the engine's failures as a whole.

    ChetanaError                       any failure raised by the Chetana engine
    ├── ConfigError (ValueError)       a config or priors value is invalid (negative, NaN,
    │   │                              a rate outside [0, 1], an unknown key, ...)
    │   └── ConfigTypeError (TypeError)  a config or priors value has the wrong type
    ├── StateError (ValueError)        a serialized state cannot be restored
    └── InputError (ValueError)        a hook was called with an unusable value (NaN latency, ...)

Every class is also a builtin `ValueError` (and `ConfigTypeError` a `TypeError`), so code that
already catches those keeps working.
"""

from __future__ import annotations

__all__ = ["ChetanaError", "ConfigError", "ConfigTypeError", "InputError", "StateError"]


class ChetanaError(Exception):
    """Base class of every error the Chetana engine raises."""


class ConfigError(ChetanaError, ValueError):
    """A `ChetanaConfig` or `CognitivePriors` value is invalid; the message names the field."""


class ConfigTypeError(ConfigError, TypeError):
    """A config or priors value has the wrong type (a string where a number belongs, ...)."""


class StateError(ChetanaError, ValueError):
    """A serialized Chetana state is malformed; the message gives the path of the bad value."""


class InputError(ChetanaError, ValueError):
    """A lifecycle hook received a value it cannot use (a NaN confidence, a negative latency)."""
