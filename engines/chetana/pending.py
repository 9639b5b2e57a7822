"""The gate that keeps a lazily built `ChetanaContext` exact.

A context's focus, self-assessment, intentions and steering are built the first time one of
them is read, from the live subsystems, which is only right while those have not changed
since the context was handed out. So the controller leaves the context (weakly) in a gate
shared with its subsystems, and every method that changes what a context shows passes the
gate first: a context still alive and unread is built then, from the state it was handed out
in. A context nobody kept costs nothing; most turns nobody reads the one `before_turn`
returns once the host took what it needed.

Like the controller itself, this is not thread-safe: a context that goes to another thread
while the controller keeps running should be read (built) first.
"""

from __future__ import annotations

import weakref
from typing import Any

__all__ = ["NO_GATE", "Gate"]


class Gate:
    """Holds a weak reference to the context still waiting to be built, if any."""

    __slots__ = ("ref",)

    def __init__(self) -> None:
        self.ref: weakref.ref[Any] | None = None

    def hold(self, context: Any) -> None:
        """Wait on `context` (the previous one, if any, is settled first)."""
        if self.ref is not None:
            self.settle()
        self.ref = weakref.ref(context)

    def settle(self) -> None:
        """Build the waiting context now, before the state it reads changes."""
        ref, self.ref = self.ref, None
        context = ref() if ref is not None else None
        if context is not None:
            context._resolve()


# A subsystem used alone hands out no lazy context: its gate never holds one.
NO_GATE = Gate()
