"""The rules of model slots' keys and hosts (docs/providers.md), checked in validation's one pass.

A slot's `api_key_env` must name a variable that looks like its provider's key (an error at
its FILE:LINE:COL), and a `base_url` that is not the provider's own host is a host this
blueprint chose: a warning, since the user's key goes there only if they allow it. The rules
are `soul.credentials`'s, which the providers enforce at run time.
"""

from __future__ import annotations

from typing import Protocol

from soul.credentials import KEY_RULE, host_label, is_own_host, key_family, key_variable_problem
from soul.language import Blueprint, KeyPath

KEYLESS_FAMILIES = ("local", "claude-cli")  # no key and no base_url: nothing to check


class Reporter(Protocol):
    """What the rules report through (validation's `_Rules`)."""

    bp: Blueprint

    def error(self, path: KeyPath, message: str, hint: str | None = None, *, key: bool = False) -> None: ...

    def warning(self, path: KeyPath, message: str, hint: str | None = None, *, key: bool = False) -> None: ...


def check_model_hosts(rules: Reporter) -> None:
    """Every slot's `api_key_env` and `base_url`, reported through `rules`."""
    for name, slot in rules.bp.models.items():
        spec = slot.provider
        if not isinstance(spec, str) or ":" in spec.partition("/")[0] or key_family(spec) in KEYLESS_FAMILIES:
            continue  # scripted:, replay:, the local model, the Claude CLI
        family = key_family(spec)
        variable, base_url = slot.options.get("api_key_env"), slot.options.get("base_url")
        if isinstance(variable, str):
            problem = key_variable_problem(family, variable)
            if problem is not None:
                rules.error(("models", name, "api_key_env"), f"model slot '{name}': api_key_env {problem}",
                            f"it must be {KEY_RULE}; a blueprint names a key's variable, never any other")
        if isinstance(base_url, str) and base_url and not is_own_host(family, base_url):
            host = host_label(base_url) or base_url
            asks = f"; its api_key_env {variable} is refused there until then" if isinstance(variable, str) else ""
            rules.warning(("models", name, "base_url"),
                          f"model slot '{name}' sends its requests to {base_url}, a host this blueprint chose: "
                          f"your key goes there only if you allow {host}{asks}",
                          f"without it the model is called with no key; to allow it: SOUL_ALLOW_HOSTS={host}, "
                          f"--allow-host {host}, or a line {host} in $SOUL_HOME/allowed-hosts")
