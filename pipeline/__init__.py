"""soulgraph: write an LLM agent's soul as a YAML blueprint; get a compiled, validated graph.

The front door:

    import soul
    checked = soul.validate("claudius")        # every diagnostic, never raises for bad input
    plan = soul.compile("path/to/soul.yaml")   # Blueprint -> Graph -> Plan, or BlueprintInvalid
    claudius = soul.load("claudius")           # a runnable Soul
    reply = claudius.session(user="ada").turn_sync("Hello").reply

Names are imported lazily so `import soul` stays cheap.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "load": "soul.souls",
    "Soul": "soul.souls",
    "Session": "soul.session",
    "TurnResult": "soul.events",
    "Trace": "soul.events",
    "ScriptedProvider": "soul.providers.scripted",
    "Provider": "soul.providers.base",
    "RunError": "soul.errors",
    "StepError": "soul.errors",
    "ParseError": "soul.errors",
    "ProviderError": "soul.errors",
    "validate": "soul.validate",
    "load_valid": "soul.validate",
    "Checked": "soul.validate",
    "compile": "soul.plan",
    "Plan": "soul.plan",
    "Graph": "soul.graph",
    "build_graph": "soul.graph",
    "Blueprint": "soul.blueprint",
    "Diagnostic": "soul.diagnostics",
    "StepKind": "soul.stepkind",
    "Output": "soul.stepkind",
    "Section": "soul.stepkind",
    "Attribute": "soul.stepkind",
    "Registry": "soul.registry",
    "default_registry": "soul.registry",
    "SoulError": "soul.errors",
    "BlueprintError": "soul.errors",
    "BlueprintInvalid": "soul.errors",
    "BlueprintNotFound": "soul.errors",
    "BlueprintTooLarge": "soul.errors",
    "RegistryError": "soul.errors",
}

__all__ = sorted([*_EXPORTS, "__version__"])


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'soul' has no attribute '{name}'")
    value = getattr(import_module(module), "compile_blueprint" if name == "compile" else name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
