"""Model providers by spec string: `scripted:FILE` today; the SDK providers arrive with the
providers issue (`anthropic/…`, `openai/…`, `litellm/…`, `claude-cli/…`, `local/…`, `replay:…`)."""

from __future__ import annotations

from typing import Any

from soul.errors import ProviderError
from soul.providers.base import Chunk, Completion, Provider, Request, Usage

__all__ = ["Chunk", "Completion", "Provider", "ProviderError", "Request", "Usage", "resolve"]

_PENDING = ("local", "anthropic", "openai", "litellm", "claude-cli", "replay")


def resolve(spec: str, options: dict[str, Any] | None = None) -> Provider:
    """The provider for a spec string such as `scripted:replies.yaml`."""
    if spec.startswith("scripted:"):
        from soul.providers.scripted import ScriptedProvider

        return ScriptedProvider.from_file(spec.split(":", 1)[1])
    family = spec.split("/", 1)[0].split(":", 1)[0]
    if family in _PENDING:
        raise ProviderError(
            f"model '{spec}': the {family} provider is not built yet (it comes with the providers "
            "issue); run with --script FILE (a YAML list of raw model replies) or model "
            "scripted:FILE for now"
        )
    raise ProviderError(
        f"unknown model '{spec}': write provider/model (local, anthropic/…, openai/…, litellm/…, "
        "claude-cli/…) or scripted:FILE"
    )
