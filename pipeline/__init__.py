"""soulgraph: write an LLM agent's soul as a YAML blueprint; get a compiled, validated graph.

The front door:

    import soul
    checked = soul.validate("claudius")        # every diagnostic, never raises for bad input
    plan = soul.compile("path/to/soul.yaml")   # Blueprint -> Graph -> Plan, or BlueprintInvalid
    claudius = soul.load("claudius")           # a runnable Soul
    reply = claudius.session(user="ada").turn_sync("Hello").reply

Names are imported lazily so `import soul` stays cheap; type checkers see them through the
`TYPE_CHECKING` imports below.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from soul.compiler import Checked, Graph, Plan, build_graph, load_valid, validate
    from soul.compiler import compile_blueprint as compile
    from soul.diagnostics import Diagnostic
    from soul.errors import (
        BlueprintError,
        BlueprintInvalid,
        BlueprintNotFound,
        BlueprintTooLarge,
        ParseError,
        ProviderError,
        RegistryError,
        RunError,
        SoulError,
        StepError,
    )
    from soul.kinds import Attribute, Output, Registry, Section, StepKind, default_registry
    from soul.language import Blueprint
    from soul.providers.base import Provider
    from soul.providers.scripted import ScriptedProvider
    from soul.runtime import Session, Soul, Trace, TurnResult, load

__version__ = "0.1.0"

_EXPORTS = {
    "load": "soul.runtime",
    "Soul": "soul.runtime",
    "Session": "soul.runtime",
    "TurnResult": "soul.runtime",
    "Trace": "soul.runtime",
    "ScriptedProvider": "soul.providers.scripted",
    "Provider": "soul.providers.base",
    "validate": "soul.compiler",
    "load_valid": "soul.compiler",
    "Checked": "soul.compiler",
    "compile": "soul.compiler",
    "Plan": "soul.compiler",
    "Graph": "soul.compiler",
    "build_graph": "soul.compiler",
    "Blueprint": "soul.language",
    "Diagnostic": "soul.diagnostics",
    "StepKind": "soul.kinds",
    "Output": "soul.kinds",
    "Section": "soul.kinds",
    "Attribute": "soul.kinds",
    "Registry": "soul.kinds",
    "default_registry": "soul.kinds",
    "SoulError": "soul.errors",
    "BlueprintError": "soul.errors",
    "BlueprintInvalid": "soul.errors",
    "BlueprintNotFound": "soul.errors",
    "BlueprintTooLarge": "soul.errors",
    "RegistryError": "soul.errors",
    "RunError": "soul.errors",
    "StepError": "soul.errors",
    "ParseError": "soul.errors",
    "ProviderError": "soul.errors",
}

__all__ = [
    "Attribute",
    "Blueprint",
    "BlueprintError",
    "BlueprintInvalid",
    "BlueprintNotFound",
    "BlueprintTooLarge",
    "Checked",
    "Diagnostic",
    "Graph",
    "Output",
    "ParseError",
    "Plan",
    "Provider",
    "ProviderError",
    "Registry",
    "RegistryError",
    "RunError",
    "ScriptedProvider",
    "Section",
    "Session",
    "Soul",
    "SoulError",
    "StepError",
    "StepKind",
    "Trace",
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
    value = getattr(import_module(module), "compile_blueprint" if name == "compile" else name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
