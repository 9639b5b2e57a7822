"""Which API key a model slot may read, and which hosts are a provider's own.

A blueprint is text someone may hand you: its model slot chooses a `base_url` and names the
variable its key is in (`api_key_env`), never the key. These are the rules `soul validate`
reports on and the providers enforce (`soul.providers.hosts`), in one place:

- `api_key_env` names a variable that looks like a key for the slot's provider: written like
  an environment variable, ending in `_API_KEY`, or ending in `_KEY` / `_TOKEN` and naming the
  provider (`TEAM_ANTHROPIC_KEY`, `MY_CLAUDE_KEY` for anthropic/), and not another built-in provider's own
  variable (`ANTHROPIC_API_KEY` is not read for openai/). `HOME`, `AWS_SECRET_ACCESS_KEY` or
  `GITHUB_TOKEN` are never read as a model's key.
- a provider's own host is where its SDK sends requests without a `base_url` (https,
  standard port); any other `base_url` is a host the blueprint chose, which receives a key only
  when the user allowed it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlsplit

ALLOW_LIST_BYTES = 64 << 10  # an allow-list longer than this is read up to here


def allow_list_file(name: str) -> Path:
    """The data home's allow-list `name` (not created): what the user allowed, kept outside any
    blueprint's folder (`allowed-hosts`, `allowed-commands`)."""
    configured = os.environ.get("SOUL_HOME")
    return (Path(configured).expanduser() if configured else Path.home() / ".soul") / name


def allow_list_entries(name: str) -> list[str]:
    """The entries of the allow-list `name`: one a line, `#` comments cut; none when the file is
    absent or unreadable."""
    try:
        with allow_list_file(name).open("rb") as f:
            text = f.read(ALLOW_LIST_BYTES).decode("utf-8", "replace")
    except OSError:
        return []
    return [line.split("#", 1)[0] for line in text.splitlines()]

# The provider families whose SDKs have a home: family -> (host, its key variable). litellm's
# routes (litellm/openai/…, litellm/anthropic/…) share their provider's row.
OWN_HOSTS: dict[str, tuple[str, ...]] = {
    "openai": ("api.openai.com",),
    "anthropic": ("api.anthropic.com",),
}
DEFAULT_KEYS: dict[str, str] = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
# the words that name a provider in a variable's name (default: the family, in capitals)
PROVIDER_WORDS: dict[str, tuple[str, ...]] = {"anthropic": ("ANTHROPIC", "CLAUDE")}
KEY_RULE = ("a name ending in _API_KEY, or ending in _KEY or _TOKEN and naming the provider "
            "(e.g. TEAM_OPENAI_KEY, MY_CLAUDE_KEY), never another provider's own variable")

_ENV_NAME = re.compile(r"^[A-Z][A-Z0-9_]{0,127}$")


def key_family(spec: str) -> str:
    """The provider whose keys and hosts a spec uses: `openai/gpt-4o` -> openai,
    `litellm/groq/llama3` -> groq (litellm routes to it), `litellm/gpt-4o` -> litellm."""
    family, _, rest = spec.partition("/")
    if family == "litellm" and "/" in rest:
        return rest.partition("/")[0].lower()
    return family.lower()


def key_variable_problem(family: str, name: str) -> str | None:
    """Why `api_key_env: name` is not read for `family`'s key, or None when it may be."""
    if not _ENV_NAME.match(name):
        return f"'{name[:60]}' is not written like an environment variable (capital letters, digits and _)"
    owner = next((f for f, variable in DEFAULT_KEYS.items() if variable == name and f != family), None)
    if owner is not None:
        return f"{name} is {owner}'s key, not {family}'s"
    words = PROVIDER_WORDS.get(family) or (re.sub(r"[^A-Z0-9]+", "_", family.upper()),)
    if name.endswith("_API_KEY") or (name.endswith(("_KEY", "_TOKEN")) and any(w and w in name for w in words)):
        return None
    return f"{name} does not look like a {family} API key"


def host_label(base_url: str) -> str:
    """`host` or `host:port` of a URL, as an allow-list entry names it ('' if it has none)."""
    try:
        parts = urlsplit(base_url.strip())
        host, port = (parts.hostname or "").lower(), parts.port
    except ValueError:
        return ""
    if ":" in host:  # IPv6
        host = f"[{host}]"
    return f"{host}:{port}" if port is not None else host


def is_own_host(family: str, base_url: str) -> bool:
    """Whether `base_url` is where `family`'s SDK goes by itself (https, standard port)."""
    try:
        parts = urlsplit(base_url.strip())
        host, port = (parts.hostname or "").lower(), parts.port
    except ValueError:
        return False
    return parts.scheme == "https" and port in (None, 443) and host in OWN_HOSTS.get(family, ())
