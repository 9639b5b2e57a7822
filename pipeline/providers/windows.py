"""Context windows: how many tokens a model slot can take in one call, and how many of them
the reply keeps for itself.

Where a window comes from, first match wins: the slot's `context_window` option in the
blueprint; the provider object's own `context_window` (the local model: its `n_ctx`; a test's
scripted provider: whatever the test set); a `local` spec's `n_ctx` option (default 4096);
the table of known API models below (matched by the model name's longest known prefix);
for `scripted:`/`replay:` and scripted provider objects a generous `SCRIPTED_WINDOW`; and
for any other model the conservative `UNKNOWN_WINDOW`. The table holds published input
windows as of 2025; a model missing from it gets the small default, never an overrun.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

LOCAL_N_CTX = 4096  # LocalProvider's default n_ctx
UNKNOWN_WINDOW = 8192  # a model nobody told us about: small enough for any current model
SCRIPTED_WINDOW = 131072  # canned replies have no window; generous, and configurable
DEFAULT_REPLY_TOKENS = 1024  # kept for the reply when the slot sets no max_tokens
LOCAL_REPLY_TOKENS = 512  # LocalProvider's default max_tokens

# model name prefix (after the provider family) -> input window in tokens
KNOWN_WINDOWS: dict[str, int] = {
    # Anthropic
    "claude-opus-4": 200_000, "claude-sonnet-4": 200_000, "claude-haiku-4": 200_000,
    "claude-3-7-sonnet": 200_000, "claude-3-5-sonnet": 200_000, "claude-3-5-haiku": 200_000,
    "claude-3-opus": 200_000, "claude-3-haiku": 200_000, "claude-3-sonnet": 200_000,
    # OpenAI
    "gpt-4.1": 1_047_576, "gpt-4o": 128_000, "gpt-4-turbo": 128_000, "gpt-4": 8192,
    "gpt-3.5-turbo": 16_385, "gpt-5": 400_000, "o1": 200_000, "o3": 200_000, "o4-mini": 200_000,
    # Claude Code CLI aliases
    "sonnet": 200_000, "opus": 200_000, "haiku": 200_000,
    # common local-server models (Ollama, llama.cpp server) reached through openai/ or litellm/
    "llama3": 8192, "llama3.1": 131_072, "llama3.2": 131_072, "qwen2.5": 32_768,
    "mistral": 32_768, "gemma2": 8192, "gemma3": 131_072, "phi3": 4096,
}


def known_window(spec: str) -> int | None:
    """The window of a `provider/model` spec from the table (longest matching prefix of the
    model name, the provider family and any `vendor/` path before it ignored), or None."""
    name = spec.rsplit("/", 1)[-1].lower()
    best = None
    for prefix, window in KNOWN_WINDOWS.items():
        if name.startswith(prefix) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, window)
    return best[1] if best else None


def _positive(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    return int(value)


def context_window(spec: str, options: Mapping[str, Any] | None = None, provider: Any = None) -> int:
    """The context window, in tokens, of a call on `spec` with the slot's `options` through
    `provider` (any of them may be missing): see the module's docstring for the order."""
    options = options or {}
    declared = _positive(options.get("context_window"))
    if declared:
        return declared
    own = _positive(getattr(provider, "context_window", None))
    if own:
        return own
    if getattr(provider, "name", None) == "scripted" or spec.startswith(("scripted:", "replay:")):
        return SCRIPTED_WINDOW
    if spec == "local" or spec.startswith("local/"):
        return _positive(options.get("n_ctx")) or LOCAL_N_CTX
    return known_window(spec) or UNKNOWN_WINDOW


def reply_tokens(spec: str, options: Mapping[str, Any] | None, window: int) -> int:
    """Tokens kept free for the reply: the slot's `max_tokens`, else the provider's default
    (512 for local models, 1024 otherwise), never more than half the window."""
    options = options or {}
    wanted = _positive(options.get("max_tokens"))
    if wanted is None:
        wanted = LOCAL_REPLY_TOKENS if spec == "local" or spec.startswith("local/") else DEFAULT_REPLY_TOKENS
    return min(wanted, window // 2)
