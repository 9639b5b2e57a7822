"""The exceptions soul raises, one class per failure a caller may want to handle.

    SoulError
    ├── BlueprintError            a blueprint cannot be loaded or is invalid
    │   ├── BlueprintNotFound     no file or built-in soul by that name
    │   ├── BlueprintTooLarge     over the 1 MiB limit
    │   └── BlueprintInvalid      one or more diagnostics (YAML, schema, graph rules)
    ├── RegistryError             a step kind is unknown or declared twice
    ├── StoreError                the session store refused or failed an operation
    │   ├── SessionNotFound       no session has that id (or unique prefix)
    │   └── StaleTurn             another writer committed the session's turn first
    ├── RunError                  a turn failed
    │   ├── StepError
    │   └── ParseError
    └── ProviderError             a model call failed

The CLI prints a SoulError as its message and exits non-zero; anything else is a bug and
keeps its traceback.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from soul.diagnostics import Diagnostic


class SoulError(Exception):
    """Base of every error soul raises on purpose."""


class BlueprintError(SoulError):
    """A blueprint cannot be loaded, or it is not valid."""


class BlueprintNotFound(BlueprintError):
    """Neither a file nor a built-in soul matches the name given."""


class BlueprintTooLarge(BlueprintError):
    """The blueprint file is over the size limit."""


class BlueprintInvalid(BlueprintError):
    """The blueprint has errors; `diagnostics` holds every one, sorted by position."""

    def __init__(self, diagnostics: Sequence[Diagnostic]) -> None:
        self.diagnostics = tuple(diagnostics)
        errors = [d for d in self.diagnostics if d.severity == "error"]
        head = f"{len(errors)} error{'s' if len(errors) != 1 else ''} in blueprint"
        super().__init__(head + "\n" + "\n".join(d.format() for d in self.diagnostics))


class RegistryError(SoulError):
    """A step kind is unknown, malformed, or registered twice."""


class StoreError(SoulError):
    """The session store refused or failed an operation."""


class SessionNotFound(StoreError):
    """No session has that id (or no unique one has that prefix)."""


class StaleTurn(StoreError):
    """The commit's base turn is not the session's turn count: another writer got there first."""


class RunError(SoulError):
    """A turn could not be completed."""


class StepError(RunError):
    """A step failed while running."""


class ParseError(RunError):
    """A model reply could not be parsed into a step's outputs."""


class ProviderError(SoulError):
    """A model call failed."""
