"""The dialogue engine's exceptions: one tree, so callers can catch its failures as a whole.

    DialogueError                      any failure raised by the dialogue engine
    ├── RulesError (ValueError)        an unknown policy/strategy/detector name or a bad rule value
    └── StateError (ValueError)        a saved dialogue state cannot be restored
"""

from __future__ import annotations

__all__ = ["DialogueError", "RulesError", "StateError"]


class DialogueError(Exception):
    """Base class of every error the dialogue engine raises."""


class RulesError(DialogueError, ValueError):
    """A rule value is unusable: an unknown policy name, a probability outside [0, 1], ...
    The message names the value and lists what is accepted."""


class StateError(DialogueError, ValueError):
    """A serialized `DialogueState` is malformed; the message gives the path of the bad value."""
