"""soulgraph: write an LLM agent's soul as a YAML blueprint; get a compiled, validated graph.

The front door:

    import soul
    checked = soul.validate("claudius")        # every diagnostic, never raises for bad input
    plan = soul.compile("path/to/soul.yaml")   # Blueprint -> Graph -> Plan, or BlueprintInvalid
    claudius = soul.load("claudius")           # a runnable Soul
    reply = claudius.session(user="ada").turn_sync("Hello").reply

Names are imported lazily so `import soul` stays cheap (no YAML, Jinja or networkx until a
name is used); type checkers see them through the `TYPE_CHECKING` imports below, and the
package ships `py.typed`. Every name comes through its stage's front door.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from soul.compiler import Checked, Graph, Plan, build_graph, load_valid, validate
    from soul.compiler import compile_blueprint as compile
    from soul.diagnostics import Diagnostic
    from soul.errors import (
        AuthError,
        BadRequest,
        BlueprintError,
        BlueprintInvalid,
        BlueprintNotFound,
        BlueprintTooLarge,
        BudgetExceeded,
        ChetanaError,
        CircuitOpen,
        CommandNotAllowed,
        EngineError,
        FileRefused,
        LeaseHeld,
        LeaseLost,
        McpServerError,
        MemoryFieldError,
        MissingExtra,
        PriceTableError,
        ProviderError,
        ProviderTimeout,
        ProviderUnavailable,
        RateLimited,
        RegistryError,
        ReplayMiss,
        RunError,
        ServeError,
        SessionNotFound,
        SoulError,
        StaleTurn,
        StepError,
        StoreError,
        ToolLoadError,
    )
    from soul.kinds import Attribute, Output, Registry, Section, StepKind, default_registry
    from soul.language import Blueprint
    from soul.providers import Message, Provider, ScriptedProvider
    from soul.runtime import (
        CallTrace,
        Reply,
        Session,
        Soul,
        StepFinished,
        StepStarted,
        StepTrace,
        SubprocessFinished,
        Token,
        Trace,
        TurnCommitted,
        TurnResult,
        load,
    )
    from soul.store import SessionStore

__version__ = "0.1.0"

# Where each public name lives: the module (a stage's front door, or a root leaf) -> names.
_HOMES: dict[str, tuple[str, ...]] = {
    "soul.runtime": (
        "load", "Soul", "Session", "TurnResult", "Trace", "StepTrace", "CallTrace",
        "StepStarted", "Token", "StepFinished", "Reply", "TurnCommitted", "SubprocessFinished",
    ),
    "soul.store": ("SessionStore",),
    "soul.providers": ("Provider", "ScriptedProvider", "Message"),
    "soul.compiler": ("validate", "load_valid", "Checked", "compile", "Plan", "Graph", "build_graph"),
    "soul.language": ("Blueprint",),
    "soul.diagnostics": ("Diagnostic",),
    "soul.kinds": ("StepKind", "Output", "Section", "Attribute", "Registry", "default_registry"),
    "soul.errors": (
        "SoulError",
        "BlueprintError", "BlueprintNotFound", "BlueprintTooLarge", "BlueprintInvalid", "FileRefused",
        "RegistryError",
        "StoreError", "SessionNotFound", "SessionExists", "StaleTurn", "LeaseHeld", "LeaseLost", "BundleError",
        "RunError", "StepError", "MissingExtra", "ToolLoadError", "McpServerError", "CommandNotAllowed",
        "BudgetExceeded", "ServeError",
        "EngineError", "MemoryFieldError", "ChetanaError",
        "ProviderError", "ProviderTimeout", "ProviderUnavailable", "RateLimited", "AuthError",
        "BadRequest", "CircuitOpen", "ReplayMiss", "PriceTableError",
    ),
}  # fmt: skip
_EXPORTS = {name: module for module, names in _HOMES.items() for name in names}
# The compiler names it compile_blueprint (a module-level `compile` would shadow the builtin).
_RENAMED = {"compile": "compile_blueprint"}

__all__ = [
    "Attribute",
    "AuthError",
    "BadRequest",
    "Blueprint",
    "BlueprintError",
    "BlueprintInvalid",
    "BlueprintNotFound",
    "BlueprintTooLarge",
    "BudgetExceeded",
    "BundleError",
    "CallTrace",
    "Checked",
    "ChetanaError",
    "CircuitOpen",
    "CommandNotAllowed",
    "Diagnostic",
    "EngineError",
    "FileRefused",
    "Graph",
    "LeaseHeld",
    "LeaseLost",
    "McpServerError",
    "MemoryFieldError",
    "Message",
    "MissingExtra",
    "Output",
    "Plan",
    "PriceTableError",
    "Provider",
    "ProviderError",
    "ProviderTimeout",
    "ProviderUnavailable",
    "RateLimited",
    "Registry",
    "RegistryError",
    "ReplayMiss",
    "Reply",
    "RunError",
    "ScriptedProvider",
    "Section",
    "ServeError",
    "Session",
    "SessionExists",
    "SessionNotFound",
    "SessionStore",
    "Soul",
    "SoulError",
    "StaleTurn",
    "StepError",
    "StepFinished",
    "StepKind",
    "StepStarted",
    "StepTrace",
    "StoreError",
    "SubprocessFinished",
    "Token",
    "ToolLoadError",
    "Trace",
    "TurnCommitted",
    "TurnResult",
    "__version__",
    "build_graph",
    "compile",
    "default_registry",
    "load",
    "load_valid",
    "validate",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'soul' has no attribute '{name}'")
    value = getattr(import_module(module), _RENAMED.get(name, name))
    # Cached as a module global, so later look-ups skip this function. Importing a submodule
    # binds only its own name here (`soul.compiler`, never `soul.validate`), so no import can
    # replace an exported function with a module.
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
