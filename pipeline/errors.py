"""The exceptions soul raises, one class per failure a caller may want to handle.

    SoulError
    ├── BlueprintError            a blueprint cannot be loaded or is invalid
    │   ├── BlueprintNotFound     no file or built-in soul by that name
    │   ├── BlueprintTooLarge     over the 1 MiB limit
    │   ├── BlueprintInvalid      one or more diagnostics (YAML, schema, graph rules)
    │   └── FileRefused           a file it names is outside its folder, too big or not text
    ├── RegistryError             a step kind is unknown or declared twice
    ├── StoreError                the session store refused or failed an operation
    │   ├── SessionNotFound       no session has that id (or unique prefix)
    │   ├── SessionExists         an imported session's id (or user model) is taken here
    │   ├── StaleTurn             another writer committed the session's turn first
    │   ├── LeaseHeld             another live process owns the memory partition
    │   └── LeaseLost             a write under a memory partition's lease that has moved on
    ├── BundleError               a soul bundle cannot be written, or is refused on reading
    ├── RunError                  a turn failed
    │   ├── StepError             a step failed; `.step` and `.kind` name it
    │   ├── MissingExtra          an optional part of soulgraph is not installed
    │   ├── ToolLoadError         a declared tool cannot be imported or described
    │   │   └── McpServerError    an MCP server cannot be started, reached or listed
    │   │       └── CommandNotAllowed  its command is not on the user's allow-list
    │   └── BudgetExceeded        a prompt's uncuttable parts exceed the model's window
    ├── ServeError                `soul serve` cannot start as asked
    ├── EngineError               an engine failed, translated at its bridge
    │   ├── MemoryFieldError      the memory field cannot be opened, read or written
    │   └── ChetanaError          Chetana refused its configuration or saved state
    └── ProviderError             a model call failed
        ├── ProviderTimeout       no reply (or no next chunk) within the call's timeout
        ├── ProviderUnavailable   a 5xx, a refused connection, or a stream cut mid-way
        ├── RateLimited           429; `retry_after` says how long the provider asked to wait
        ├── AuthError             no key, or the key was refused (never retried)
        ├── BadRequest            the provider refused the request as malformed (never retried)
        ├── CircuitOpen           too many failures in a row: calls wait out the cooldown
        ├── ReplayMiss            a replayed run asked for a call the cassette does not hold
        └── PriceTableError       the user's price table cannot be read (not JSON, bad prices)

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


class FileRefused(BlueprintError):
    """A file a blueprint names (persona, template, include) may not be read: it lies outside
    the blueprint's folder, is not a regular file, is over `MAX_FILE_BYTES` or is not UTF-8."""

    def __init__(self, what: str, name: str, reason: str, hint: str) -> None:
        super().__init__(f"{what} '{name}' refused: {reason} ({hint})")
        self.what = what
        self.name = name
        self.reason = reason
        self.hint = hint


class RegistryError(SoulError):
    """A step kind is unknown, malformed, or registered twice."""


class StoreError(SoulError):
    """The session store refused or failed an operation."""


class SessionNotFound(StoreError):
    """No session has that id (or no unique one has that prefix)."""


class StaleTurn(StoreError):
    """The commit's base turn is not the session's turn count: another writer got there first."""


class SessionExists(StoreError):
    """An imported session's id is already in the store, or its user model's versions differ
    from the store's: nothing of the import was written."""


class LeaseHeld(StoreError):
    """A (soul, user) memory partition is owned by another live process: its turns and
    cycles run there (docs/scale.md). `owner` and `expires` say who and until when."""

    def __init__(self, message: str, *, owner: str = "", expires: float = 0.0) -> None:
        super().__init__(message)
        self.owner = owner
        self.expires = expires


class LeaseLost(StoreError):
    """A commit or memory write carried a memory partition's lease (its fence epoch) that
    has since passed to another owner: it is refused, nothing of it is written."""


class BundleError(SoulError):
    """A soul bundle (`soul pack`, `soul unpack`) cannot be written, or is refused on reading:
    a member outside the target, a link or device file, an oversized or compression-bomb
    member, a bad checksum, a newer format. Nothing is written when it is refused."""


class RunError(SoulError):
    """A turn could not be completed."""


class StepError(RunError):
    """A step failed while running; `step` names it and `kind` is its `uses:` kind (either may
    be None when not known where the error is raised)."""

    def __init__(self, message: str, *, step: str | None = None, kind: str | None = None) -> None:
        super().__init__(message)
        self.step = step
        self.kind = kind

    @classmethod
    def from_exception(cls, exc: BaseException, *, step: str, kind: str | None = None, what: str = "") -> StepError:
        """A StepError for `exc` raised inside `step` (raise it `from exc`): "step 'NAME': WHAT: EXC"."""
        detail = f"{what}: {exc}" if what else str(exc)
        return cls(f"step '{step}': {detail}", step=step, kind=kind)


class MissingExtra(RunError):
    """An optional part of soulgraph (an extra) is not installed; the message names the
    `pip install 'soulgraph[EXTRA]'` line (`soul.extras`)."""


class ToolLoadError(RunError):
    """A tool of the blueprint's `tools:` cannot be imported or described (its module or
    function is missing, its import raised, a parameter is positional-only); the message
    starts with the blueprint's FILE:LINE:COL. A tool that fails when called is no error:
    the failure is data the model reads (docs/tools.md)."""


class McpServerError(ToolLoadError):
    """An MCP server a blueprint names cannot be started, reached or listed, or what it
    lists does not fit (a tool `use:` names is missing, a schema is not JSON Schema). A
    tool call that fails on a running server is no error: it is data the model reads."""


class CommandNotAllowed(McpServerError):
    """A blueprint's MCP entry runs a command the user has not allowed
    (SOUL_ALLOW_COMMANDS, --allow-command, $SOUL_HOME/allowed-commands)."""


class BudgetExceeded(RunError):
    """The parts of a prompt that cannot be cut are larger than the model's window allows;
    the message lists them by size and says how to fix it (docs/conversation.md)."""


class ServeError(SoulError):
    """`soul serve` cannot start as asked (a public host without a token, a bad port)."""


class EngineError(SoulError):
    """An engine (resonance memory, Chetana) failed or refused, translated at its bridge
    (`soul.runtime.memory`, `soul.runtime.chetana`): the message says what happened, where
    and how to fix it; the engine's own exception is the `__cause__`."""


class MemoryFieldError(EngineError):
    """The memory field could not be opened, read or written (a bad `memory.field` path, a
    damaged field, a file where a folder should be, an engine error)."""


class ChetanaError(EngineError):
    """Chetana refused its configuration or its saved state."""


class ProviderError(SoulError):
    """A model call failed."""


class ProviderTimeout(ProviderError):
    """No reply, or no next chunk of a stream, within the call's timeout."""


class ProviderUnavailable(ProviderError):
    """The provider could not answer: a 5xx, a refused connection, or a stream cut mid-way."""


class RateLimited(ProviderError):
    """The provider said 429; `retry_after` is its requested wait in seconds, when given."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class AuthError(ProviderError):
    """No key was found, or the provider refused it. Retrying cannot help."""


class BadRequest(ProviderError):
    """The provider refused the request itself (unknown model, bad parameter). Never retried."""


class CircuitOpen(ProviderError):
    """A provider+model failed too often in a row; calls fail fast until the cooldown ends."""


class ReplayMiss(ProviderError):
    """A replayed run made a call its cassette does not hold (the message names the nearest)."""


class PriceTableError(ProviderError):
    """The user's price table ($SOUL_PRICES, or prices.json in the data home) cannot be read."""
